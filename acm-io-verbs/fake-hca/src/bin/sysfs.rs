//! `acm-fake-hca-sysfs FABRIC.toml HOST DIR`: writes, under DIR, the sysfs tree an
//! InfiniBand host of the fabric description would have (the parts ibacm reads:
//! `class/infiniband/<dev>/...` and `class/infiniband_mad/...`), so that a daemon
//! pointed at it with `ACM_SYSFS_ROOT=DIR` and preloaded with the emulated HCA
//! discovers the same devices and ports the emulation answers for. `class/net` is
//! written empty: the emulation has no IPoIB interfaces.

#[path = "../layout.rs"]
#[allow(dead_code, unreachable_pub)]
mod layout;

use acm_engine::{DeviceDesc, PortAttrs, PortState};
use acm_io_sim::FabricSpec;
use acm_io_sim::topology::Topology;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Why the tree could not be written.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("usage: acm-fake-hca-sysfs FABRIC.toml HOST DIR")]
    Usage,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Spec(String),
    #[error("the fabric has no host {0}")]
    NoHost(String),
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acm-fake-hca-sysfs: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), Error> {
    let [fabric, host, dir] = <[String; 3]>::try_from(args).map_err(|_| Error::Usage)?;
    let text = std::fs::read_to_string(&fabric).map_err(|source| Error::Io {
        path: fabric.clone().into(),
        source,
    })?;
    let spec = FabricSpec::parse(&text).map_err(|e| Error::Spec(format!("{fabric}: {e}")))?;
    let h = spec
        .host_index(&host)
        .ok_or_else(|| Error::NoHost(host.clone()))?;
    let devices = Topology::new(&spec).devices(h, spec.sm.lid, spec.sm.sl);
    write_tree(Path::new(&dir), &devices)
}

/// Writes the tree for `devices` under `root`.
fn write_tree(root: &Path, devices: &[DeviceDesc]) -> Result<(), Error> {
    let ib = root.join("class/infiniband");
    for d in devices {
        let dev = ib.join(&d.name);
        put(&dev.join("node_guid"), &guid(d.guid))?;
        put(&dev.join("node_type"), "1: CA")?;
        for (i, p) in d.ports.iter().enumerate() {
            write_port(&dev.join("ports").join((i + 1).to_string()), p)?;
        }
    }
    // No IPoIB interfaces: the emulated host's addresses come from its address file.
    let net = root.join("class/net");
    std::fs::create_dir_all(&net).map_err(|source| Error::Io { path: net, source })?;
    let mad = root.join("class/infiniband_mad");
    put(&mad.join("abi_version"), "5")?;
    for (i, port) in layout::umad_ports(devices).enumerate() {
        let u = mad.join(format!("umad{i}"));
        put(&u.join("ibdev"), &devices[port.device.0 as usize].name)?;
        put(&u.join("port"), &port.port.to_string())?;
    }
    Ok(())
}

fn write_port(dir: &Path, p: &PortAttrs) -> Result<(), Error> {
    let active = p.state == PortState::Active;
    put(
        &dir.join("state"),
        if active { "4: ACTIVE" } else { "1: DOWN" },
    )?;
    put(
        &dir.join("link_layer"),
        if p.link_layer_ib {
            "InfiniBand"
        } else {
            "Ethernet"
        },
    )?;
    put(&dir.join("lid"), &format!("{:#x}", p.lid))?;
    put(&dir.join("lid_mask_count"), &p.lmc.to_string())?;
    put(&dir.join("sm_lid"), &format!("{:#x}", p.sm_lid))?;
    put(&dir.join("sm_sl"), &p.sm_sl.to_string())?;
    put(&dir.join("rate"), &rate_text(p))?;
    for (i, g) in p.gids.iter().enumerate() {
        let mut s = String::new();
        for (j, pair) in g.0.chunks(2).enumerate() {
            if j > 0 {
                s.push(':');
            }
            let _ = write!(s, "{:02x}{:02x}", pair[0], pair[1]);
        }
        put(&dir.join("gids").join(i.to_string()), &s)?;
    }
    for (i, k) in p.pkeys.iter().enumerate() {
        put(&dir.join("pkeys").join(i.to_string()), &format!("{k:#06x}"))?;
    }
    Ok(())
}

/// `"10 Gb/sec (4X SDR)"`, as the kernel prints the port's rate.
fn rate_text(p: &PortAttrs) -> String {
    let (width, speed) = layout::width_speed(p.rate);
    let lanes = match width {
        1 => "1X",
        2 => "4X",
        4 => "8X",
        8 => "12X",
        16 => "2X",
        _ => "?",
    };
    let name = match speed {
        1 => "SDR",
        2 => "DDR",
        4 => "QDR",
        8 => "FDR10",
        16 => "FDR",
        32 => "EDR",
        64 => "HDR",
        128 => "NDR",
        256 => "XDR",
        _ => "?",
    };
    let gbps = p.rate.mbps().map_or(0.0, |m| f64::from(m) / 1000.0);
    format!("{gbps} Gb/sec ({lanes} {name})")
}

/// A GUID as sysfs prints it: four groups of four hex digits.
fn guid(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xFFFF,
        (g >> 16) & 0xFFFF,
        g & 0xFFFF
    )
}

fn put(path: &Path, text: &str) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, format!("{text}\n")).map_err(io)
}
