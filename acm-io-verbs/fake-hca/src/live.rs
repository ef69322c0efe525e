//! The emulated host's devices as they are now: the hub's setup at attach time, then
//! every change the hub reports ([`TopologyEvent`]). Port queries answer from here,
//! so that a query after an event sees the new values, as on a real HCA.
//!
//! A change reaches the application the way the kernel would carry it: the async
//! event on every open context of the device, the umad descriptors of a device that
//! died failing, and the host's sysfs tree (when it is the generator's) gaining or
//! losing the device's directory and its umad nodes.

use crate::config;
use crate::ffi::lock;
use crate::sysfs_tree;
use crate::umad;
use crate::verbs::async_event::{EVENT_DEVICE_FATAL, post_async_event};
use crate::verbs::qp::from_hub::break_qp;
use crate::verbs::state::STATE;
use acm_engine::{DeviceDesc, PortAttrs};
use acm_io_sim::hub::wire::TopologyEvent;
use std::path::Path;
use std::sync::Mutex;

/// One device of the host.
#[derive(Debug, Clone)]
struct LiveDevice {
    desc: DeviceDesc,
    /// In the device list (a dead device stays listed; a removed one does not).
    listed: bool,
    /// Usable: neither removed nor dead.
    healthy: bool,
}

/// Empty until the link attaches ([`attach`]): without a hub there are no devices.
static LIVE: Mutex<Vec<LiveDevice>> = Mutex::new(Vec::new());

/// The devices the hub said this host has when it attached, all listed and usable.
/// The link calls this before its thread can deliver any change to them; everything
/// else reaches a device through the device list, which the attached link gives.
pub fn attach(devices: &[DeviceDesc]) {
    *lock(&LIVE) = devices
        .iter()
        .map(|d| LiveDevice {
            desc: d.clone(),
            listed: true,
            healthy: true,
        })
        .collect();
}

/// Port `port` (from 1) of device `device` now; `None` for a device that is removed
/// or dead, or a port it lacks.
pub fn port_attrs(device: usize, port: u8) -> Option<PortAttrs> {
    let l = lock(&LIVE);
    let d = l.get(device).filter(|d| d.healthy)?;
    d.desc.ports.get(usize::from(port).checked_sub(1)?).cloned()
}

/// Whether device `device` is usable (listed and not dead).
pub fn healthy(device: usize) -> bool {
    lock(&LIVE).get(device).is_some_and(|d| d.healthy)
}

/// The indexes of the devices in the device list now.
pub fn listed() -> Vec<usize> {
    lock(&LIVE)
        .iter()
        .enumerate()
        .filter(|(_, d)| d.listed)
        .map(|(i, _)| i)
        .collect()
}

/// Carries out one change the hub reported.
pub fn apply(ev: TopologyEvent) {
    match ev {
        TopologyEvent::Port {
            port,
            change,
            attrs,
        } => {
            let d = port.device.0 as usize;
            let changed = {
                let mut l = lock(&LIVE);
                let Some(dev) = l.get_mut(d) else {
                    return;
                };
                let Some(slot) = dev
                    .desc
                    .ports
                    .get_mut(usize::from(port.port).saturating_sub(1))
                else {
                    return;
                };
                *slot = attrs;
                dev.healthy.then(|| dev.desc.clone())
            };
            // A dead device raises nothing more; it comes back with DEVICE_BACK.
            if let Some(desc) = changed {
                sysfs(|root| sysfs_tree::rewrite_port(root, &desc, port.port));
                post_to_device(d, i32::from(change.event_type()), u64::from(port.port));
            }
        }
        TopologyEvent::DeviceGone { device, fatal } => {
            let d = device.0 as usize;
            let (was_healthy, all) = {
                let mut l = lock(&LIVE);
                let Some(dev) = l.get_mut(d) else {
                    return;
                };
                let was = dev.healthy;
                dev.healthy = false;
                dev.listed &= fatal;
                let all: Vec<DeviceDesc> = l.iter().map(|x| x.desc.clone()).collect();
                (was, all)
            };
            if !fatal {
                sysfs(|root| sysfs_tree::remove_device(root, &all, d));
            }
            umad::device_dead(device);
            if was_healthy {
                post_to_device(d, EVENT_DEVICE_FATAL, 0);
            }
        }
        TopologyEvent::DeviceBack(desc) => {
            let d = desc.id.0 as usize;
            let all = {
                let mut l = lock(&LIVE);
                let Some(dev) = l.get_mut(d) else {
                    return;
                };
                *dev = LiveDevice {
                    desc,
                    listed: true,
                    healthy: true,
                };
                l.iter().map(|x| x.desc.clone()).collect::<Vec<_>>()
            };
            sysfs(|root| sysfs_tree::write_device(root, &all, d));
        }
        TopologyEvent::QpFatal { ep } => break_qp(ep.0),
    }
}

/// The hub is gone: every device is dead (still listed, as an HCA after a fatal
/// error), so that nothing reopens it.
pub fn all_dead() {
    for d in lock(&LIVE).iter_mut() {
        d.healthy = false;
    }
}

/// Posts an async event to every open context of device `device`.
fn post_to_device(device: usize, event_type: i32, element: u64) {
    let contexts: Vec<usize> = lock(&STATE)
        .contexts
        .iter()
        .filter(|(_, c)| c.device == device)
        .map(|(&k, _)| k)
        .collect();
    for ctx in contexts {
        post_async_event(ctx, event_type, element);
    }
}

/// Changes the host's sysfs tree, if it is one the generator wrote.
fn sysfs(f: impl FnOnce(&Path) -> Result<(), sysfs_tree::TreeError>) {
    let Some(root) = config::current().and_then(|c| c.sysfs_root.as_deref()) else {
        return;
    };
    if !sysfs_tree::is_emulated(root) {
        return;
    }
    if let Err(e) = f(root) {
        eprintln!("acm-fake-hca: sysfs: {e}");
    }
}
