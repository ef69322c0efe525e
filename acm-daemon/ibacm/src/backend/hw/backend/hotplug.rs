//! Devices that come and go while the daemon runs, and endpoints that break.
//!
//! rdma-core's ibacm enumerates its devices once and exits when there is none; a
//! device hot-added later, or reset after a fatal error (the driver removes and
//! re-adds it), stays unserved until a restart. Here sysfs is scanned once a second
//! (one directory listing; the device's files are read only when the listing changed
//! or a listed device is not open): a new device is opened, registered with the event
//! loop and fed to the engine as `DeviceAdded`; a device that left the listing, or
//! raised DEVICE_FATAL, is closed — its descriptors deregistered, its QPs destroyed,
//! its SA agents unregistered and closed — and the engine told `DeviceRemoved`. A
//! device that comes back gets its old engine id. A QP or CQ error event rebuilds the
//! endpoints of the port it happened on.

use super::HwBackend;
use crate::backend::hw::open::open_device;
use acm_engine::log::Level;
use acm_engine::{DeviceId, EndpointId, Input, Instant, PortEvent, PortId};
use acm_io_verbs::sysfs;
use mio::Interest;
use mio::unix::SourceFd;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

/// How often sysfs is scanned for devices: a device added is served within this.
const SCAN_INTERVAL: Duration = Duration::from_secs(1);

/// The scans' state.
#[derive(Debug)]
pub(super) struct Scan {
    next: Instant,
    /// The device names the last scan listed.
    listed: BTreeSet<String>,
    /// Listed devices that are not InfiniBand (RoCE, iWARP), never opened.
    ignored: BTreeSet<String>,
    /// The last reason each device could not be opened, said once until it changes.
    failures: BTreeMap<String, String>,
}

impl Scan {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            next: now + SCAN_INTERVAL,
            listed: BTreeSet::new(),
            ignored: BTreeSet::new(),
            failures: BTreeMap::new(),
        }
    }

    /// Whether a scan is due at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// When the next scan is due.
    pub(super) fn next(&self) -> Instant {
        self.next
    }
}

/// The names under `class/infiniband`, or none when the class is missing (ib_core
/// unloaded).
fn listing(sysfs_root: &std::path::Path) -> BTreeSet<String> {
    let dir = sysfs_root.join("class/infiniband");
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

impl HwBackend {
    /// The name of each open device, by id.
    fn open_names(&self) -> BTreeSet<String> {
        self.devices
            .iter()
            .flatten()
            .map(|d| d.desc.name.clone())
            .collect()
    }

    /// One scan: closes devices that left sysfs, opens those that appeared (or came
    /// back).
    pub(super) fn rescan(&mut self, now: Instant) {
        self.scan.next = now + SCAN_INTERVAL;
        let listed = listing(&self.sysfs_root);
        let open = self.open_names();
        let gone: Vec<DeviceId> = self
            .devices
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i, d)))
            .filter(|(_, d)| !listed.contains(&d.desc.name))
            .map(|(i, _)| DeviceId(i as u32))
            .collect();
        for id in gone {
            self.close_device(now, id, "removed");
        }
        let waiting = listed
            .iter()
            .any(|n| !open.contains(n) && !self.scan.ignored.contains(n));
        if listed == self.scan.listed && !waiting {
            return;
        }
        self.scan.listed.clone_from(&listed);
        self.scan.failures.retain(|n, _| listed.contains(n));
        if !waiting {
            return;
        }
        let found = match sysfs::discover(&self.sysfs_root) {
            Ok(f) => f,
            Err(e) => {
                self.say_failure("sysfs", e.to_string());
                return;
            }
        };
        for dev in &found.devices {
            if open.contains(&dev.name) {
                continue;
            }
            if !dev.has_infiniband_port() {
                self.scan.ignored.insert(dev.name.clone());
                continue;
            }
            self.add_device(now, dev);
        }
    }

    /// Logs why `what` failed, unless that was the last thing said about it.
    fn say_failure(&mut self, what: &str, why: String) {
        if self.scan.failures.get(what) != Some(&why) {
            self.log(Level::Basic, format!("{what}: not opened: {why}"));
            self.scan.failures.insert(what.to_owned(), why);
        }
    }

    /// Opens a device that appeared, registers its descriptors and tells the engine.
    fn add_device(&mut self, now: Instant, dev: &sysfs::IbDevice) {
        let id = match self.names.iter().position(|n| *n == dev.name) {
            Some(i) => DeviceId(i as u32),
            None => {
                self.names.push(dev.name.clone());
                self.devices.push(None);
                DeviceId((self.names.len() - 1) as u32)
            }
        };
        let opened = match open_device(dev, id, &self.dev_root, self.sm_events) {
            Ok(o) => o,
            Err(e) => {
                self.say_failure(&dev.name, e.to_string());
                return;
            }
        };
        self.scan.failures.remove(&dev.name);
        let mut fds = vec![
            opened.device.verbs.async_fd().as_raw_fd(),
            opened.device.verbs.completion_fd().as_raw_fd(),
        ];
        fds.extend(opened.umad.iter().map(|(_, u)| u.as_fd().as_raw_fd()));
        if let Err(e) = self.watch(&fds) {
            // Unwatched, nothing it reports would ever be read.
            self.unwatch(&fds);
            self.say_failure(&dev.name, format!("cannot watch its descriptors: {e}"));
            return;
        }
        for w in opened.warnings {
            self.log(Level::Basic, w);
        }
        self.log(Level::Basic, format!("{}: device added", dev.name));
        let desc = opened.device.desc.clone();
        // Before the engine tells the providers: they get this context, not a dead one.
        self.contexts
            .borrow_mut()
            .insert(desc.name.clone(), opened.device.verbs.provider_handle());
        self.umad.extend(opened.umad);
        self.devices[id.0 as usize] = Some(opened.device);
        self.input(now, Input::DeviceAdded(desc));
    }

    /// Closes device `id` (removed, or after a fatal error): its descriptors leave the
    /// event loop, its QPs and SA agents are destroyed, and the engine forgets it.
    pub(super) fn close_device(&mut self, now: Instant, id: DeviceId, why: &str) {
        let Some(dev) = self.devices.get_mut(id.0 as usize).and_then(Option::take) else {
            return;
        };
        let ports: Vec<PortId> = self
            .umad
            .keys()
            .copied()
            .filter(|p| p.device == id)
            .collect();
        let mut fds = vec![
            dev.verbs.async_fd().as_raw_fd(),
            dev.verbs.completion_fd().as_raw_fd(),
        ];
        fds.extend(
            ports
                .iter()
                .filter_map(|p| self.umad.get(p))
                .map(|u| u.as_fd().as_raw_fd()),
        );
        self.unwatch(&fds);
        self.endpoints.retain(|_, e| e.device != id);
        for p in ports {
            self.umad.remove(&p);
        }
        let name = dev.desc.name.clone();
        // A provider still holding the context keeps it open until the engine has told
        // it the device is gone.
        self.contexts.borrow_mut().remove(&name);
        drop(dev);
        self.log(Level::Basic, format!("{name}: {why}; closed"));
        self.input(now, Input::DeviceRemoved(id));
    }

    /// An endpoint's QP or CQ broke (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, CQ_ERR): the
    /// QP does no more work, and completions may be lost. Its port's endpoints are
    /// recreated as after the port went down and came back (new QPs, groups joined
    /// again), which is how the engine rebuilds an endpoint whole.
    pub(super) fn endpoint_broke(
        &mut self,
        now: Instant,
        kind: acm_io_verbs::event::AsyncEventKind,
        key: Option<u64>,
    ) {
        let Some(ep) = key.and_then(|k| u32::try_from(k).ok()).map(EndpointId) else {
            return;
        };
        let Some(e) = self.endpoints.get(&ep) else {
            return;
        };
        let port = PortId {
            device: e.device,
            port: e.port,
        };
        let Some(dev) = self
            .devices
            .get(e.device.0 as usize)
            .and_then(Option::as_ref)
        else {
            return;
        };
        let attrs = dev
            .verbs
            .query_port(port.port)
            .map(|i| super::convert::port_attrs(&i));
        self.log(
            Level::Basic,
            format!(
                "endpoint {}: {kind:?} on port {}; recreating the port's endpoints",
                ep.0, port.port
            ),
        );
        self.input(
            now,
            Input::Port {
                port,
                event: PortEvent::Down,
            },
        );
        match attrs {
            Ok(attrs) => self.input(
                now,
                Input::Port {
                    port,
                    event: PortEvent::Active(attrs),
                },
            ),
            Err(e) => self.log(Level::Basic, e.to_string()),
        }
    }

    /// A port's SA agent whose reads fail for good (the device is going): closed, so
    /// that it is not polled again; the port's SA queries fail until the device is
    /// reopened.
    pub(super) fn close_umad(&mut self, port: PortId) {
        if let Some(u) = self.umad.remove(&port) {
            self.unwatch(&[u.as_fd().as_raw_fd()]);
        }
    }

    fn watch(&self, fds: &[RawFd]) -> std::io::Result<()> {
        if let Some((registry, token)) = &self.registry {
            for fd in fds {
                registry.register(&mut SourceFd(fd), *token, Interest::READABLE)?;
            }
        }
        Ok(())
    }

    fn unwatch(&self, fds: &[RawFd]) {
        if let Some((registry, _)) = &self.registry {
            for fd in fds {
                // One never registered (a failed watch) is refused: nothing to undo.
                let _ = registry.deregister(&mut SourceFd(fd));
            }
        }
    }
}
