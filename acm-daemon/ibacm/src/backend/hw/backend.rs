//! The hardware backend: this host's engine on its real InfiniBand ports.
//!
//! It is the engine's [`Fabric`]: the driver carries out the engine's operations with
//! acm-io-verbs (UD QPs, multicast, umad) and the host's kernel (source routing). The
//! backend turns what those report (receives,
//! send completions, SA responses, async port events, address changes) into engine
//! inputs. Every descriptor is registered with the event loop under the backend's one
//! token; [`Backend::advance`] drains them all, so nothing depends on which one woke
//! the loop. Devices come and go while it runs ([`hotplug`]): each is opened,
//! registered, closed and deregistered on its own.

mod hotplug;

use super::convert;
use super::open::{HwDevice, OpenedHardware};
use crate::backend::{Backend, BackendError};
use crate::kernel::rtnl::{AddrEvent, RouteMonitor};
use crate::kernel::{addrs, ipoib, neigh, source};
use acm_engine::HostOutput;
use acm_engine::driver::{self, Fabric};
use acm_engine::log::{Level, LogEvent};
use acm_engine::{DeviceId, EndpointId, Engine, Input, Instant, PortId};
use acm_engine::{
    FabricEvent, LocalIp, McastGroup, NeighQuery, NeighResult, OpenQp, RecvInfo, SaSend, SendToken,
    SourceQuery, UdSend,
};
use acm_io_verbs::event::AsyncEventKind;
use acm_io_verbs::provider::VerbsHandle;
use acm_io_verbs::umad::UmadDevice;
use acm_io_verbs::verbs::{Completion, UdConfig, UdEndpoint, VerbsDevice};
use acm_proto::acm_mad::ACM_QKEY;
use acm_proto::mad::{MadHeaderPacket, UmadStatus};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::rc::Rc;

/// The verbs context of each open device, by name, for the C providers'
/// `acm_device.verbs` ([`crate::plugins::adapter::VerbsLookup`] reads it when
/// a provider is told of a device). The backend keeps it current: a device opened
/// after start, or opened again after it died, is there with its new context before
/// the engine hears of it, and a closed one leaves it.
pub(crate) type ProviderContexts = Rc<RefCell<HashMap<String, VerbsHandle>>>;

/// An endpoint's queue pair and the port it lives on.
struct HwEndpoint {
    device: DeviceId,
    port: u8,
    qp: UdEndpoint,
}

/// This host's engine on its InfiniBand hardware.
pub(crate) struct HwBackend {
    engine: Engine,
    /// By engine [`DeviceId`]: the open devices, `None` while one is closed (removed,
    /// dead, or not reopened yet).
    devices: Vec<Option<HwDevice>>,
    /// The device name of every `DeviceId` handed out: a device that comes back gets
    /// its old id.
    names: Vec<String>,
    umad: BTreeMap<PortId, UmadDevice>,
    endpoints: BTreeMap<EndpointId, HwEndpoint>,
    routes: Option<RouteMonitor>,
    sysfs_root: PathBuf,
    dev_root: PathBuf,
    /// Whether the SA agents of devices opened later ask for Reports.
    sm_events: bool,
    /// The event loop's registry (a clone) and the backend's token, for the
    /// descriptors of devices opened and closed after start.
    registry: Option<(Registry, Token)>,
    /// Device scans: when the next is due, and what the last one found.
    scan: hotplug::Scan,
    /// The addresses the engine has been told about, for resyncs.
    local_ips: BTreeSet<IpAddr>,
    /// The open devices' verbs contexts, shared with the C providers' adapters.
    contexts: ProviderContexts,
    /// What carrying out an operation reported at once, fed back by the driver.
    feedback: VecDeque<FabricEvent>,
    /// The kernel's IPoIB neighbour table (`addr_prot neigh`).
    neigh: neigh::NeighTable,
    out: VecDeque<HostOutput>,
    label: String,
}

impl HwBackend {
    /// Brings the engine up on the opened hardware: the host's IPoIB addresses first,
    /// then every device (its active ports come up at once). `contexts` is kept
    /// current with the open devices' verbs contexts (the providers' lookup reads it).
    #[must_use]
    pub(crate) fn new(
        hw: OpenedHardware,
        engine: Engine,
        now: Instant,
        contexts: ProviderContexts,
    ) -> Self {
        let names: Vec<String> = hw
            .devices
            .iter()
            .map(|d| d.verbs.name().to_owned())
            .collect();
        let label = if names.is_empty() {
            "InfiniBand: no device yet".to_owned()
        } else {
            format!("InfiniBand: {}", names.join(", "))
        };
        let mut b = Self {
            engine,
            devices: hw.devices.into_iter().map(Some).collect(),
            names,
            umad: hw.umad,
            endpoints: BTreeMap::new(),
            routes: hw.routes,
            sysfs_root: hw.sysfs_root,
            dev_root: hw.dev_root,
            sm_events: hw.sm_events,
            registry: None,
            scan: hotplug::Scan::new(now),
            local_ips: BTreeSet::new(),
            contexts,
            feedback: VecDeque::new(),
            neigh: neigh::NeighTable::default(),
            out: VecDeque::new(),
            label,
        };
        for w in hw.warnings {
            b.log(Level::Basic, w);
        }
        for ip in hw.local_ips {
            b.local_ips.insert(ip.addr);
            b.input(now, Input::LocalIpAdded(ip));
        }
        let descs: Vec<_> = b.devices.iter().flatten().map(|d| d.desc.clone()).collect();
        {
            let mut contexts = b.contexts.borrow_mut();
            for d in b.devices.iter().flatten() {
                contexts.insert(d.desc.name.clone(), d.verbs.provider_handle());
            }
        }
        for desc in descs {
            b.input(now, Input::DeviceAdded(desc));
        }
        b
    }

    fn log(&mut self, level: Level, message: String) {
        self.out.push_back(HostOutput::Log(LogEvent {
            level,
            origin: "acm_hw",
            message,
        }));
    }

    /// Feeds one input, then carries out everything the engine has to say, and what
    /// that reports back, until the engine is quiet.
    fn input(&mut self, now: Instant, input: Input<'_>) {
        self.engine.handle(now, input);
        self.settle();
    }

    /// Drains the engine through the driver, which carries out its operations on
    /// this backend's hardware; keeps what is for the event loop.
    fn settle(&mut self) {
        while let Some(out) = driver::poll_output(self) {
            self.out.push_back(out);
        }
    }

    /// The next event open device `d` has queued, read with `next` (from its async or
    /// its completion channel): `None` when it is closed, has none queued, or the read
    /// failed (logged, naming `what`).
    fn next_event<T>(
        &mut self,
        d: usize,
        what: &str,
        next: fn(&VerbsDevice) -> io::Result<Option<T>>,
    ) -> Option<T> {
        let dev = self.devices[d].as_ref()?;
        match next(&dev.verbs) {
            Ok(ev) => ev,
            Err(e) => {
                let name = dev.verbs.name().to_owned();
                self.log(Level::Basic, format!("{name}: {what} read failed: {e}"));
                None
            }
        }
    }

    /// Async events of every open device.
    fn device_events(&mut self, now: Instant) {
        for d in 0..self.devices.len() {
            while let Some(ev) = self.next_event(d, "async event", VerbsDevice::next_async_event) {
                let id = DeviceId(d as u32);
                if ev.kind == AsyncEventKind::DeviceFatal {
                    // Closed now; the scans reopen it when it is back.
                    self.close_device(now, id, "fatal device error");
                    break;
                }
                if matches!(ev.kind, AsyncEventKind::QpError | AsyncEventKind::CqError) {
                    self.endpoint_broke(now, ev.kind, ev.key);
                    continue;
                }
                if !ev.kind.is_port_event() {
                    continue;
                }
                let Some(dev) = &self.devices[d] else { break };
                let attrs = match ev.kind {
                    AsyncEventKind::PortError | AsyncEventKind::ClientReregister => None,
                    _ => match dev.verbs.query_port(ev.port) {
                        Ok(info) => Some(convert::port_attrs(&info)),
                        Err(e) => {
                            self.log(Level::Basic, e.to_string());
                            None
                        }
                    },
                };
                if let Some(event) = convert::port_event(ev.kind, attrs) {
                    let port = PortId {
                        device: id,
                        port: ev.port,
                    };
                    self.input(now, Input::Port { port, event });
                }
            }
        }
    }

    /// Completions of every endpoint whose CQ raised an event.
    fn completions(&mut self, now: Instant) {
        for d in 0..self.devices.len() {
            while let Some(key) =
                self.next_event(d, "completion event", VerbsDevice::next_completion_event)
            {
                let ep = EndpointId(key as u32);
                self.poll_endpoint(now, ep);
            }
        }
    }

    fn poll_endpoint(&mut self, now: Instant, ep: EndpointId) {
        let Some(e) = self.endpoints.get_mut(&ep) else {
            return;
        };
        let engine = &mut self.engine;
        let r = e.qp.poll(|c| match c {
            Completion::Recv { meta, grh, mad } => engine.handle(
                now,
                Input::UdReceive {
                    ep,
                    wc: RecvInfo {
                        slid: meta.slid,
                        src_qp: meta.src_qp,
                        dlid_path_bits: meta.dlid_path_bits,
                        pkey_index: meta.pkey_index,
                    },
                    grh,
                    mad,
                },
            ),
            Completion::Send { token, ok } => engine.handle(
                now,
                Input::UdSendDone {
                    ep,
                    token: SendToken(token),
                    ok,
                },
            ),
        });
        if let Err(err) = r {
            self.log(Level::Basic, format!("endpoint {}: {err}", ep.0));
        }
        self.settle();
    }

    /// SA responses, and sends umad gave back, on every port.
    fn sa_traffic(&mut self, now: Instant) {
        let ports: Vec<PortId> = self.umad.keys().copied().collect();
        for port in ports {
            while let Some(u) = self.umad.get_mut(&port) {
                match u.recv() {
                    Ok(Some(m)) => {
                        if m.header.status != 0 {
                            let tid = MadHeaderPacket::new_unchecked(m.mad).try_tid().unwrap_or(0);
                            let status = UmadStatus(m.header.status as i32);
                            self.engine
                                .handle(now, Input::SaSendFailed { port, tid, status });
                        } else {
                            self.engine
                                .handle(now, Input::SaResponse { port, mad: m.mad });
                        }
                        self.settle();
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let path = u.path().display().to_string();
                        let gone =
                            matches!(e.raw_os_error(), Some(nix::libc::EIO | nix::libc::ENODEV));
                        if gone {
                            // The device is going (its DEVICE_FATAL or its removal
                            // closes the rest): not read again.
                            self.close_umad(port);
                            self.log(Level::Basic, format!("{path}: device gone ({e}); closed"));
                        } else {
                            self.log(Level::Basic, format!("{path}: read failed: {e}"));
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Address changes on the host's IPoIB interfaces.
    fn address_changes(&mut self, now: Instant) {
        let Some(routes) = self.routes.as_mut() else {
            return;
        };
        let mut events = Vec::new();
        if let Err(e) = routes.read_events(&mut events) {
            self.log(Level::Basic, format!("netlink route monitor: {e}"));
        }
        for ev in events {
            match ev {
                AddrEvent::Added { ifindex, addr, .. } => {
                    match ipoib::link_by_index(&self.sysfs_root, ifindex) {
                        Ok(Some(link)) => {
                            self.local_ips.insert(addr);
                            // Runtime additions are shown without a prefix
                            // (docs/daemon.md §6).
                            let ip = addrs::local_ip(&link, addr, None);
                            self.input(now, Input::LocalIpAdded(ip));
                        }
                        Ok(None) => {}
                        Err(e) => self.log(
                            Level::Basic,
                            format!("address {addr} on interface {ifindex}: {e}"),
                        ),
                    }
                }
                AddrEvent::Removed { addr, .. } => {
                    if self.local_ips.remove(&addr) {
                        self.input(now, Input::LocalIpRemoved(addr));
                    }
                }
                AddrEvent::Link {
                    ifindex, change, ..
                } => self.log(
                    Level::Config,
                    format!("interface {ifindex}: link {change:?}"),
                ),
                AddrEvent::Overflow => self.resync(now),
            }
        }
    }

    /// Events were lost: walk the system's addresses again and tell the engine what
    /// changed (the reference drops every address and re-adds what it finds; a diff
    /// keeps the endpoints that did not change untouched).
    fn resync(&mut self, now: Instant) {
        let found: Vec<LocalIp> = match addrs::walk(&self.sysfs_root) {
            Ok(f) => f,
            Err(e) => {
                self.log(Level::Basic, format!("address resync failed: {e}"));
                return;
            }
        };
        let now_set: BTreeSet<IpAddr> = found.iter().map(|ip| ip.addr).collect();
        let gone: Vec<IpAddr> = self.local_ips.difference(&now_set).copied().collect();
        for addr in gone {
            self.local_ips.remove(&addr);
            self.input(now, Input::LocalIpRemoved(addr));
        }
        for ip in found {
            if self.local_ips.insert(ip.addr) {
                self.input(now, Input::LocalIpAdded(ip));
            }
        }
    }
}

/// The engine's fabric operations on this host's hardware: QPs and multicast through
/// verbs, SA MADs through umad, source lookups through the kernel's routing. Failures
/// that happen at once are logged and reported back as events.
impl Fabric for HwBackend {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn open_qp(&mut self, qp: OpenQp) {
        let OpenQp {
            ep,
            port,
            pkey,
            pkey_index,
            recv_depth,
            send_depth,
        } = qp;
        let device = port.device.0 as usize;
        let result = match self.devices.get(device).and_then(Option::as_ref) {
            Some(d) => UdEndpoint::open(
                &d.verbs,
                UdConfig {
                    port_num: port.port,
                    pkey_index,
                    qkey: ACM_QKEY,
                    recv_depth,
                    send_depth,
                    key: u64::from(ep.0),
                },
            )
            .map_err(|e| e.to_string()),
            None => Err(format!("no device {}", port.device.0)),
        };
        let result = match result {
            Ok(qp) => {
                let qpn = qp.qpn();
                self.endpoints.insert(
                    ep,
                    HwEndpoint {
                        device: port.device,
                        port: port.port,
                        qp,
                    },
                );
                Ok(qpn)
            }
            Err(e) => {
                self.log(
                    Level::Basic,
                    format!(
                        "cannot open the QP of pkey {pkey:#06x} on port {}: {e}",
                        port.port
                    ),
                );
                Err(())
            }
        };
        self.feedback
            .push_back(FabricEvent::QpOpened { ep, result });
    }

    fn close_qp(&mut self, ep: EndpointId) {
        self.endpoints.remove(&ep);
    }

    fn ud_send(&mut self, send: &UdSend) {
        let UdSend {
            ep,
            token,
            av,
            ref mad,
        } = *send;
        let ok = match self.endpoints.get_mut(&ep) {
            Some(e) => {
                let dest = convert::ud_address(&av, e.port);
                match e.qp.post_send(token.0, &dest, &mad.0) {
                    // The completion reports it.
                    Ok(()) => return,
                    Err(err) => {
                        self.log(Level::Basic, format!("endpoint {}: {err}", ep.0));
                        false
                    }
                }
            }
            None => false,
        };
        self.feedback
            .push_back(FabricEvent::UdSendDone { ep, token, ok });
    }

    fn mcast_attach(&mut self, g: McastGroup) {
        if let Some(e) = self.endpoints.get_mut(&g.ep)
            && let Err(err) = e.qp.attach_mcast(&g.mgid, g.mlid)
        {
            self.log(Level::Basic, format!("endpoint {}: {err}", g.ep.0));
        }
    }

    fn mcast_detach(&mut self, g: McastGroup) {
        if let Some(e) = self.endpoints.get_mut(&g.ep)
            && let Err(err) = e.qp.detach_mcast(&g.mgid, g.mlid)
        {
            self.log(Level::Basic, format!("endpoint {}: {err}", g.ep.0));
        }
    }

    fn sa_send(&mut self, send: &SaSend) {
        let SaSend {
            port,
            tid,
            dest,
            timeout_ms,
            retries,
            ref mad,
        } = *send;
        let sent = match self.umad.get_mut(&port) {
            Some(u) => u
                .send(&convert::sa_send(&dest, timeout_ms, retries, &mad.0))
                .map_err(|e| e.raw_os_error().unwrap_or(nix::libc::EIO)),
            // No umad device on this port: it cannot reach the SA.
            None => Err(nix::libc::ENODEV),
        };
        if let Err(status) = sent {
            // A response (the ReportResp of an SA Report, docs/protocol/sa.md §9) has
            // nobody waiting for it, and its TID is the SA's: handing the failure back
            // could only match one of our own requests by accident.
            if acm_proto::mad::MadHeaderPacket::new_unchecked(&mad.0[..])
                .method()
                .is_response()
            {
                self.log(
                    Level::Basic,
                    format!(
                        "port {}: SA response tid {tid:#x} not sent: errno {status}",
                        port.port
                    ),
                );
                return;
            }
            self.feedback.push_back(FabricEvent::SaSendFailed {
                port,
                tid,
                status: UmadStatus(status),
            });
        }
    }

    fn source_query(&mut self, q: SourceQuery) {
        let result = source::route_source(q.dest);
        self.feedback
            .push_back(FabricEvent::SourceAnswer { id: q.id, result });
    }

    /// The interface is the IPoIB one on the query's port GID and partition; the
    /// kernel answers at once, so the answer is fed back at once too.
    fn neigh_query(&mut self, q: NeighQuery) {
        let link = ipoib::links(&self.sysfs_root).ok().and_then(|links| {
            links
                .into_iter()
                .find(|l| l.gid == q.gid && (l.pkey | 0x8000) == (q.pkey | 0x8000))
        });
        let result = match link {
            None => {
                self.log(
                    Level::Verbose,
                    format!(
                        "no IPoIB interface on gid {} pkey {:#06x} to resolve {}",
                        q.gid, q.pkey, q.dest
                    ),
                );
                NeighResult::Unreachable
            }
            Some(l) => match self.neigh.lookup(l.ifindex, q.dest) {
                Ok(r) => r,
                Err(e) => {
                    self.log(
                        Level::Basic,
                        format!("neighbour table of {} for {}: {e}", l.name, q.dest),
                    );
                    NeighResult::Unreachable
                }
            },
        };
        self.feedback
            .push_back(FabricEvent::NeighAnswer { id: q.id, result });
    }

    fn poll_event(&mut self) -> Option<FabricEvent> {
        self.feedback.pop_front()
    }
}

impl Backend for HwBackend {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let mut fds = Vec::new();
        for d in self.devices.iter().flatten() {
            fds.push(d.verbs.async_fd().as_raw_fd());
            fds.push(d.verbs.completion_fd().as_raw_fd());
        }
        fds.extend(self.umad.values().map(|u| u.as_fd().as_raw_fd()));
        if let Some(r) = &self.routes {
            fds.push(r.as_fd().as_raw_fd());
        }
        for fd in fds {
            registry.register(&mut SourceFd(&fd), token, Interest::READABLE)?;
        }
        self.registry = Some((registry.try_clone()?, token));
        Ok(())
    }

    /// Leaves the engine's outputs where they are: the event loop drains them with
    /// [`Backend::lend_outputs`] before it waits again, which carries out the fabric's
    /// share in order, and a cache hit's reply goes to the client without a stop in
    /// this backend's queue.
    fn handle(&mut self, now: Instant, input: Input<'_>) {
        if matches!(input, Input::ClientRequest { .. }) {
            // The hot path: the replies stay in the engine's queue until
            // `lend_outputs` lends them where they lie.
            driver::handle(self, now, input);
        } else {
            self.input(now, input);
        }
    }

    fn advance(&mut self, now: Instant, io_ready: bool) -> Result<(), BackendError> {
        if io_ready {
            // Every descriptor shares one token: drain them all (edge-triggered).
            self.device_events(now);
            self.completions(now);
            self.sa_traffic(now);
            self.address_changes(now);
        }
        if self.scan.due(now) {
            self.rescan(now);
        }
        self.input(now, Input::Tick);
        Ok(())
    }

    fn lend_outputs(
        &mut self,
        mut f: impl FnMut(&HostOutput) -> ControlFlow<()>,
    ) -> Option<HostOutput> {
        // What was drained earlier comes first: it is older than what the engine holds.
        if let Some(out) = crate::backend::lend_queued(&mut self.out, &mut f) {
            return Some(out);
        }
        driver::lend_outputs(self, f)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let scan = self.scan.next();
        Some(self.engine.poll_timeout().map_or(scan, |t| t.min(scan)))
    }

    fn engine(&self) -> &Engine {
        &self.engine
    }

    fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn serves_kernel(&self) -> bool {
        true
    }
}
