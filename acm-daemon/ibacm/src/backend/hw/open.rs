//! Opening the host's InfiniBand hardware for the backend: every device with an
//! InfiniBand port (verbs), a umad device per InfiniBand port, the route monitor and
//! the start-up walk of the IPoIB addresses. [`open_device`] opens one device, at
//! start and when one appears later (`hotplug.rs`).

use super::{HardwareError, convert, probe};
use crate::kernel::addrs;
use crate::kernel::rtnl::RouteMonitor;
use acm_engine::LocalIp;
use acm_engine::{DeviceDesc, DeviceId, PortId};
use acm_io_verbs::sysfs::IbDevice;
use acm_io_verbs::umad::UmadDevice;
use acm_io_verbs::verbs::VerbsDevice;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One opened device.
pub(crate) struct HwDevice {
    /// Its verbs handles.
    pub verbs: VerbsDevice,
    /// What the engine was told about it.
    pub desc: DeviceDesc,
}

/// One device and the SA agents of its ports, opened.
pub(super) struct OpenedDevice {
    /// The device.
    pub(super) device: HwDevice,
    /// The SA agent of every InfiniBand port that has a umad device.
    pub(super) umad: Vec<(PortId, UmadDevice)>,
    /// Problems that do not stop the device, for the log.
    pub(super) warnings: Vec<String>,
}

/// Everything the backend needs, opened.
pub(crate) struct OpenedHardware {
    /// The devices; a device's index is its engine [`DeviceId`].
    pub devices: Vec<HwDevice>,
    /// The SA agent of every InfiniBand port that has a umad device.
    pub umad: BTreeMap<PortId, UmadDevice>,
    /// Address-change notifications, if the socket could be opened.
    pub routes: Option<RouteMonitor>,
    /// Where sysfs is (for IPoIB lookups and device scans at run time).
    pub sysfs_root: PathBuf,
    /// Where the umad device nodes are (for devices that appear later).
    pub dev_root: PathBuf,
    /// Whether the SA agents ask for Reports (`sm_events`), for devices that appear
    /// later too.
    pub sm_events: bool,
    /// The host's IPoIB addresses at start.
    pub local_ips: Vec<LocalIp>,
    /// Problems that do not stop the daemon, for the log.
    pub warnings: Vec<String>,
}

/// Opens device `dev` (as sysfs describes it) as engine device `id`: its verbs
/// context, every port's attributes, and the SA agent of each InfiniBand port. With
/// `sm_events`, each agent also asks for the SA's Reports (docs/protocol/sa.md §9); a
/// port where the kernel refuses that gets the plain agent and a warning.
///
/// # Errors
/// A one-line reason: the device cannot be opened or queried, a umad device cannot
/// be opened (permissions, usually).
pub(super) fn open_device(
    dev: &IbDevice,
    id: DeviceId,
    dev_root: &Path,
    sm_events: bool,
) -> Result<OpenedDevice, HardwareError> {
    let verbs = VerbsDevice::open(&dev.name)?;
    let mut ports = Vec::new();
    for n in 1..=verbs.port_count() {
        ports.push(verbs.query_port(n)?);
    }
    let mut umad = Vec::new();
    let mut warnings = Vec::new();
    for p in dev.infiniband_ports() {
        let port = PortId {
            device: id,
            port: p.info.number,
        };
        match &p.umad {
            Some(u) => {
                let dev_path = u.dev_path(dev_root);
                let opened = if sm_events {
                    let (d, reports) = UmadDevice::open_with_reports(&dev_path)?;
                    if !reports {
                        warnings.push(format!(
                            "{}: another agent receives the SA's Reports on {} port {}: \
                             SM events (sm_events) will not reach this port",
                            dev_path.display(),
                            dev.name,
                            p.info.number
                        ));
                    }
                    d
                } else {
                    UmadDevice::open(&dev_path)?
                };
                umad.push((port, opened));
            }
            None => warnings.push(format!(
                "{} port {} has no umad device: it cannot query the SA",
                dev.name, p.info.number
            )),
        }
    }
    let desc = convert::device_desc(id, verbs.name(), verbs.guid(), &ports);
    Ok(OpenedDevice {
        device: HwDevice { verbs, desc },
        umad,
        warnings,
    })
}

/// Opens everything. Devices are numbered in sysfs discovery order. With `wait`, a
/// host without a usable device yet is not an error: the backend starts with none and
/// its scans open them as they appear (the warning says what is missing).
///
/// # Errors
/// A one-line reason: no devices (without `wait`), no umad, a device that cannot be
/// opened or queried, a umad device that cannot be opened (permissions, usually).
pub(crate) fn open(
    sysfs_root: &Path,
    dev_root: &Path,
    wait: bool,
    sm_events: bool,
) -> Result<OpenedHardware, HardwareError> {
    let mut warnings = Vec::new();
    let mut devices = Vec::new();
    let mut umad = BTreeMap::new();
    // `ibacm` already probed before detaching; sysfs is read again here (a few small
    // files, once) because the lock and the log came in between and this is what the
    // devices are opened from.
    match probe(sysfs_root) {
        Ok(found) => {
            let ib: Vec<_> = found.infiniband_devices().cloned().collect();
            for (i, dev) in ib.iter().enumerate() {
                let opened = open_device(dev, DeviceId(i as u32), dev_root, sm_events)?;
                warnings.extend(opened.warnings);
                umad.extend(opened.umad);
                devices.push(opened.device);
            }
        }
        Err(e) if wait => warnings.push(format!("{e}: waiting for an InfiniBand device")),
        Err(e) => return Err(e),
    }
    let routes = match RouteMonitor::open() {
        Ok(r) => Some(r),
        Err(e) => {
            warnings.push(format!(
                "cannot monitor address changes (NETLINK_ROUTE): {e}; addresses added later \
                 are not served until a restart"
            ));
            None
        }
    };
    let local_ips = addrs::walk(sysfs_root).unwrap_or_else(|e| {
        warnings.push(format!("cannot list the host's IPoIB addresses: {e}"));
        Vec::new()
    });
    Ok(OpenedHardware {
        devices,
        umad,
        routes,
        sysfs_root: sysfs_root.to_owned(),
        dev_root: dev_root.to_owned(),
        sm_events,
        local_ips,
        warnings,
    })
}
