//! The host's InfiniBand devices and ports, read from sysfs for `-A`.
//!
//! Debian's `ib_acme` asks libibverbs; all it needs is each device's name and each port's
//! state, which the kernel also publishes as
//! `<root>/class/infiniband/<device>/ports/<n>/{state,link_layer}`. Reading sysfs keeps
//! `ib_acme` free of verbs (and of `unsafe`), and lets tests point [`SYSFS_ROOT_ENV`] at
//! a fixture tree instead of `/sys`.

use std::cmp::Ordering;
use std::io;
use std::path::{Path, PathBuf};

/// Environment variable naming the sysfs root to read instead of `/sys` (tests use
/// fixture trees).
pub const SYSFS_ROOT_ENV: &str = "ACM_SYSFS_ROOT";

/// Port state number of an ACTIVE port (`IBV_PORT_ACTIVE`), as in "4: ACTIVE".
const PORT_ACTIVE: u32 = 4;

/// One port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Port number (1-based).
    pub number: u32,
    /// Whether the port is ACTIVE.
    pub active: bool,
    /// `link_layer` ("InfiniBand", "Ethernet"); "InfiniBand" when the file is missing
    /// (kernels before RoCE did not have it).
    pub link_layer: String,
}

impl Port {
    /// Whether the port is InfiniBand (not RoCE/iWARP Ethernet), the only kind ibacm
    /// serves.
    #[must_use]
    pub fn is_infiniband(&self) -> bool {
        self.link_layer.eq_ignore_ascii_case("InfiniBand")
    }
}

/// One device and its ports in ascending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// Its ports.
    pub ports: Vec<Port>,
}

/// The sysfs root: `$ACM_SYSFS_ROOT`, or `/sys`.
#[must_use]
pub fn root() -> PathBuf {
    std::env::var_os(SYSFS_ROOT_ENV).map_or_else(|| PathBuf::from("/sys"), PathBuf::from)
}

/// Every device under `<root>/class/infiniband`, in natural name order (`mlx5_2` before
/// `mlx5_10`). No class directory means no devices.
///
/// # Errors
/// Failure to list a directory that exists.
pub fn devices(root: &Path) -> io::Result<Vec<Device>> {
    let class = root.join("class/infiniband");
    let entries = match std::fs::read_dir(&class) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ports = ports(&entry.path().join("ports"))?;
        out.push(Device { name, ports });
    }
    out.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    Ok(out)
}

fn ports(dir: &Path) -> io::Result<Vec<Port>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(number) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let state = std::fs::read_to_string(path.join("state")).unwrap_or_default();
        let link_layer = std::fs::read_to_string(path.join("link_layer"))
            .map_or_else(|_| "InfiniBand".to_owned(), |s| s.trim().to_owned());
        out.push(Port {
            number,
            active: state_is_active(&state),
            link_layer,
        });
    }
    out.sort_by_key(|p| p.number);
    Ok(out)
}

/// Reads a `state` file: "4: ACTIVE" (the number decides; the name is the fallback).
fn state_is_active(state: &str) -> bool {
    let (number, name) = state.split_once(':').unwrap_or(("", state));
    match number.trim().parse::<u32>() {
        Ok(n) => n == PORT_ACTIVE,
        Err(_) => name.trim().eq_ignore_ascii_case("ACTIVE"),
    }
}

/// Orders names by their text, comparing runs of digits by value.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a, b);
    loop {
        match (x.chars().next(), y.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let xd = x.len() - x.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let yd = y.len() - y.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (xn, yn) = (
                    x[..xd].trim_start_matches('0'),
                    y[..yd].trim_start_matches('0'),
                );
                let ord = xn.len().cmp(&yn.len()).then_with(|| xn.cmp(yn));
                if ord != Ordering::Equal {
                    return ord;
                }
                x = &x[xd..];
                y = &y[yd..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(&d);
                }
                x = &x[c.len_utf8()..];
                y = &y[d.len_utf8()..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files() {
        assert!(state_is_active("4: ACTIVE\n"));
        assert!(!state_is_active("1: DOWN\n"));
        assert!(!state_is_active("2: INIT"));
        assert!(state_is_active("ACTIVE"));
        assert!(!state_is_active(""));
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx4_0", "hfi1_0", "mlx5_02"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["hfi1_0", "mlx4_0", "mlx5_2", "mlx5_02", "mlx5_10"]);
    }

    #[test]
    fn reads_a_tree() {
        let root = std::env::temp_dir().join(format!("acme-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let port = |dev: &str, n: u32, state: &str, ll: Option<&str>| {
            let p = root.join(format!("class/infiniband/{dev}/ports/{n}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("state"), state).unwrap();
            if let Some(ll) = ll {
                std::fs::write(p.join("link_layer"), ll).unwrap();
            }
        };
        port("mlx5_10", 1, "4: ACTIVE\n", Some("InfiniBand\n"));
        port("mlx5_2", 2, "1: DOWN\n", Some("Ethernet\n"));
        port("mlx5_2", 1, "4: ACTIVE\n", None);
        let d = devices(&root).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "mlx5_2");
        assert_eq!(
            d[0].ports.iter().map(|p| p.number).collect::<Vec<_>>(),
            [1, 2]
        );
        assert!(d[0].ports[0].is_infiniband() && d[0].ports[0].active);
        assert!(!d[0].ports[1].is_infiniband() && !d[0].ports[1].active);
        assert_eq!(d[1].name, "mlx5_10");
        assert!(devices(&root.join("nothing")).unwrap().is_empty());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
