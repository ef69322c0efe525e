//! Opening the host's InfiniBand hardware for the backend: every device with an
//! InfiniBand port (verbs), a umad device per InfiniBand port, the route monitor and
//! the start-up walk of the IPoIB addresses.

use super::{convert, probe};
use crate::daemon::kernel::addrs;
use crate::daemon::kernel::rtnl::RouteMonitor;
use acm_engine::LocalIp;
use acm_engine::{DeviceDesc, DeviceId, PortId};
use acm_io_verbs::umad::UmadDevice;
use acm_io_verbs::verbs::VerbsDevice;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One opened device.
pub struct HwDevice {
    /// Its verbs handles.
    pub verbs: VerbsDevice,
    /// What the engine was told about it.
    pub desc: DeviceDesc,
    /// Set after a fatal device error: its events are no longer read.
    pub dead: bool,
}

/// Everything the backend needs, opened.
pub struct OpenedHardware {
    /// The devices; a device's index is its engine [`DeviceId`].
    pub devices: Vec<HwDevice>,
    /// The SA agent of every InfiniBand port that has a umad device.
    pub umad: BTreeMap<PortId, UmadDevice>,
    /// Address-change notifications, if the socket could be opened.
    pub routes: Option<RouteMonitor>,
    /// Where sysfs is (for IPoIB lookups at run time).
    pub sysfs_root: PathBuf,
    /// The host's IPoIB addresses at start.
    pub local_ips: Vec<LocalIp>,
    /// Problems that do not stop the daemon, for the log.
    pub warnings: Vec<String>,
}

/// Opens everything. Devices are numbered in sysfs discovery order. With `sm_events`,
/// each port's umad agent also asks for the SA's Reports (docs/protocol/sa.md §8); a
/// port where the kernel refuses that gets the plain agent and a warning.
///
/// # Errors
/// A one-line reason: no devices, no umad, a device that cannot be opened or queried,
/// a umad device that cannot be opened (permissions, usually).
pub fn open(sysfs_root: &Path, dev_root: &Path, sm_events: bool) -> Result<OpenedHardware, String> {
    // `ibacm` already probed before detaching; sysfs is read again here (a few small
    // files, once) because the lock and the log came in between and this is what the
    // devices are opened from.
    let found = probe(sysfs_root)?;
    let mut warnings = Vec::new();
    let mut devices = Vec::new();
    let mut umad = BTreeMap::new();
    let ib: Vec<_> = found.infiniband_devices().cloned().collect();
    for (i, dev) in ib.iter().enumerate() {
        let id = DeviceId(i as u32);
        let verbs = VerbsDevice::open(&dev.name).map_err(|e| e.to_string())?;
        let mut ports = Vec::new();
        for n in 1..=verbs.port_count() {
            ports.push(verbs.query_port(n).map_err(|e| e.to_string())?);
        }
        for p in dev.infiniband_ports() {
            let port = PortId {
                device: id,
                port: p.info.number,
            };
            match &p.umad {
                Some(u) => {
                    let dev_path = u.dev_path(dev_root);
                    let opened = if sm_events {
                        let (d, reports) =
                            UmadDevice::open_with_reports(&dev_path).map_err(|e| e.to_string())?;
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
                        UmadDevice::open(&dev_path).map_err(|e| e.to_string())?
                    };
                    umad.insert(port, opened);
                }
                None => warnings.push(format!(
                    "{} port {} has no umad device: it cannot query the SA",
                    dev.name, p.info.number
                )),
            }
        }
        let desc = convert::device_desc(id, verbs.name(), verbs.guid(), &ports);
        devices.push(HwDevice {
            verbs,
            desc,
            dead: false,
        });
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
        local_ips,
        warnings,
    })
}
