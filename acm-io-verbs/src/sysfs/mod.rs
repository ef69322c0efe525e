//! Device and port discovery from sysfs, as a parser over a directory root.
//!
//! The daemon reads `/sys`; tests read fixture trees (`testdata/sysfs/`) with the same
//! code, which is why every function takes the root instead of assuming it. Two classes
//! are read:
//!
//! - `<root>/class/infiniband/<dev>/`: `node_guid`, `node_type` and, for each
//!   `ports/<n>/`, `state`, `link_layer`, `lid`, `lid_mask_count`, `sm_lid`, `sm_sl`,
//!   `rate`, the `gids/` table and the `pkeys/` table;
//! - `<root>/class/infiniband_mad/`: `abi_version` and, for each `umad<N>/`, the `ibdev`
//!   and `port` it serves.
//!
//! [`discover`] reports what is there and fails only when something that exists cannot
//! be read or does not read as the kernel writes it. Whether what it found is enough to
//! run is a separate question, asked with [`Discovery::require_infiniband`] and
//! [`Discovery::require_umad`], so that a diagnostic tool can list a host that the
//! daemon would refuse. [`read_port`] re-reads one port after a port event.
//!
//! Nothing here is cached and nothing decides policy: a port that is down, or has no
//! umad device, is reported as such.

mod attr;
mod device;
mod error;
mod port;
mod umad_class;
mod values;

use std::path::{Path, PathBuf};

pub use device::{IbDevice, NodeType};
pub use error::{DiscoveryError, SkippedPort};
pub use port::SysfsPort;
pub use umad_class::{DEFAULT_DEV_ROOT, UmadDev};

use crate::port::PortInfo;
use attr::{list_dir, parse_at};
use values::DEVICE_NAME;

/// Where sysfs is mounted.
pub const DEFAULT_ROOT: &str = "/sys";

/// The environment variable that points discovery at another sysfs tree (tests use
/// fixture trees); the daemon and `ib_acme -A` both honour it.
pub const ROOT_ENV: &str = "ACM_SYSFS_ROOT";

/// The sysfs root to read: `$ACM_SYSFS_ROOT`, else [`DEFAULT_ROOT`].
#[must_use]
pub fn root_from_env() -> std::path::PathBuf {
    std::env::var_os(ROOT_ENV).map_or_else(|| DEFAULT_ROOT.into(), Into::into)
}

/// Everything discovery found under one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The root that was read (`/sys`), kept for error messages.
    pub root: PathBuf,
    /// Whether `<root>/class/infiniband` exists (the ib_core module is loaded).
    pub infiniband_class: bool,
    /// Every device, whatever its ports' link layers, in natural name order (`mlx5_2`
    /// before `mlx5_10`).
    pub devices: Vec<IbDevice>,
    /// Whether `<root>/class/infiniband_mad` exists (the ib_umad module is loaded).
    pub umad_class: bool,
    /// `<root>/class/infiniband_mad/abi_version`, when the file exists.
    pub umad_abi_version: Option<u32>,
}

impl Discovery {
    /// The devices with at least one InfiniBand port, in discovery order. The
    /// reference daemon opens only those; RoCE-only devices are left out.
    pub fn infiniband_devices(&self) -> impl Iterator<Item = &IbDevice> {
        self.devices.iter().filter(|d| d.has_infiniband_port())
    }

    /// The device named `name`, whatever its ports.
    #[must_use]
    pub fn device(&self, name: &str) -> Option<&IbDevice> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The devices with at least one InfiniBand port, or why there are none:
    /// [`DiscoveryError::NoInfinibandClass`] when the class directory is missing,
    /// [`DiscoveryError::NoInfinibandDevices`] (listing any non-InfiniBand ports seen)
    /// when it holds no such device.
    pub fn require_infiniband(&self) -> Result<Vec<&IbDevice>, DiscoveryError> {
        let path = infiniband_class_path(&self.root);
        if !self.infiniband_class {
            return Err(DiscoveryError::NoInfinibandClass { path });
        }
        let devices: Vec<&IbDevice> = self.infiniband_devices().collect();
        if devices.is_empty() {
            let skipped = self
                .devices
                .iter()
                .flat_map(|d| {
                    d.ports.iter().map(|p| SkippedPort {
                        device: d.name.clone(),
                        port: p.info.number,
                        link_layer: p.info.link_layer.clone(),
                    })
                })
                .collect();
            return Err(DiscoveryError::NoInfinibandDevices { path, skipped });
        }
        Ok(devices)
    }

    /// `Ok` when the user MAD class exists, [`DiscoveryError::NoUmadClass`] otherwise.
    /// A port without a umad device of its own is not checked here (its
    /// [`SysfsPort::umad`] is `None`).
    pub fn require_umad(&self) -> Result<(), DiscoveryError> {
        if self.umad_class {
            Ok(())
        } else {
            Err(DiscoveryError::NoUmadClass {
                path: umad_class::class_path(&self.root),
            })
        }
    }
}

/// Reads both classes under `root` (normally [`DEFAULT_ROOT`]).
///
/// Missing class directories are not errors here (see [`Discovery::require_infiniband`]
/// and [`Discovery::require_umad`]); unreadable files and malformed values are, naming
/// the file. Entries whose names start with a dot are ignored.
pub fn discover(root: &Path) -> Result<Discovery, DiscoveryError> {
    let umad = umad_class::read_umad_class(root)?;
    let class_dir = infiniband_class_path(root);
    let names = list_dir(&class_dir)?;
    let infiniband_class = names.is_some();
    let mut names = names.unwrap_or_default();
    names.sort_by(|a, b| device::natural_cmp(a, b));
    let devices = names
        .iter()
        .map(|name| device::read_device(&class_dir, name, umad.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Discovery {
        root: root.to_owned(),
        infiniband_class,
        devices,
        umad_class: umad.is_some(),
        umad_abi_version: umad.and_then(|u| u.abi_version),
    })
}

/// Re-reads port `port` of `device` under `root`, as after a port-change event.
pub fn read_port(root: &Path, device: &str, port: u8) -> Result<PortInfo, DiscoveryError> {
    let class_dir = infiniband_class_path(root);
    // The name becomes a path component: refuse one that would leave the class.
    let device = parse_at(&class_dir.join(device), device, &DEVICE_NAME)?;
    let dir = class_dir.join(&device).join("ports").join(port.to_string());
    port::read_port_dir(&dir, port)
}

/// `root/class/infiniband`.
fn infiniband_class_path(root: &Path) -> PathBuf {
    root.join("class").join("infiniband")
}
