//! `<root>/class/infiniband_mad`: which user MAD device node serves which port.
//!
//! The kernel's ib_umad module creates one `umad<N>` entry per port (plus `issm<N>`
//! entries for the SM's IsSM bit, which ibacm does not use), each with `ibdev` and
//! `port` files, and an `abi_version` file for the whole class. The device node itself
//! is `/dev/infiniband/umad<N>`, outside the sysfs root, so this module hands out the
//! index and lets the caller join it to whichever device directory it uses.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::attr::{list_dir, read_optional, read_required};
use super::error::DiscoveryError;
use super::values::{DECIMAL_U32, DEVICE_NAME, PORT_NUMBER, parse_decimal};

/// Where the kernel creates the user MAD device nodes.
pub const DEFAULT_DEV_ROOT: &str = "/dev/infiniband";

/// One user MAD device, `umad<index>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UmadDev {
    /// The `N` of `umadN`.
    pub index: u32,
}

impl UmadDev {
    /// The device name, `umadN`.
    #[must_use]
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// The device node under `dev_root` (normally [`DEFAULT_DEV_ROOT`]).
    #[must_use]
    pub fn dev_path(&self, dev_root: &Path) -> PathBuf {
        dev_root.join(self.name())
    }
}

impl fmt::Display for UmadDev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "umad{}", self.index)
    }
}

/// What `class/infiniband_mad` says.
#[derive(Debug, Default)]
pub(super) struct UmadClass {
    /// `abi_version`, when the file exists.
    pub(super) abi_version: Option<u32>,
    /// (device name, port number) to its umad device.
    pub(super) ports: BTreeMap<(String, u8), UmadDev>,
}

/// The umad class under `root`, or `None` when `root/class/infiniband_mad` does not
/// exist (ib_umad not loaded).
pub(super) fn read_umad_class(root: &Path) -> Result<Option<UmadClass>, DiscoveryError> {
    let dir = class_path(root);
    let Some(names) = list_dir(&dir)? else {
        return Ok(None);
    };
    let mut class = UmadClass {
        abi_version: read_optional(&dir.join("abi_version"), &DECIMAL_U32)?,
        ..UmadClass::default()
    };
    // Entries other than umad<N> (abi_version, issm<N>) are not ours. Lowest index
    // first, so that if two entries ever claimed one port the choice would not depend on
    // the directory's order.
    let mut devs: Vec<(UmadDev, &str)> = names
        .iter()
        .filter_map(|name| {
            let index = parse_decimal(name.strip_prefix("umad")?)?;
            Some((UmadDev { index }, name.as_str()))
        })
        .collect();
    devs.sort_unstable();
    for (dev, name) in devs {
        let entry = dir.join(name);
        let ibdev = read_required(&entry.join("ibdev"), &DEVICE_NAME)?;
        let port = read_required(&entry.join("port"), &PORT_NUMBER)?;
        class.ports.entry((ibdev, port)).or_insert(dev);
    }
    Ok(Some(class))
}

/// `root/class/infiniband_mad`.
pub(super) fn class_path(root: &Path) -> PathBuf {
    root.join("class").join("infiniband_mad")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        let dev = UmadDev { index: 3 };
        assert_eq!(dev.name(), "umad3");
        assert_eq!(
            dev.dev_path(Path::new(DEFAULT_DEV_ROOT)),
            PathBuf::from("/dev/infiniband/umad3")
        );
    }
}
