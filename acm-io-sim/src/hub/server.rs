//! [`Hub`]: the fabric process. It owns the spec, the topology, the SA, every attached
//! host's QPs and multicast attachments and its umad sends, and carries the hosts'
//! outputs in real time. Its SM reports a host's ports in service (trap 64) when the
//! host attaches and out of service (trap 65) when it detaches, and groups created or
//! deleted (66/67), to the ports subscribed (docs/protocol/sa.md §9).

mod changes;

pub use changes::ChangeError;

use super::HubError;
use super::wire::{HostMsg, HostSetup, HubMsg, MAX_DATAGRAM, error_code};
use crate::fabric::{self, FabricQp, McastIndex, QpTable, QpTables, UmadExpiry, UmadSend};
use crate::sa::SubnetAdmin;
use crate::spec::{FabricSpec, HostId};
use crate::topology::{PortRef, Topology};
use acm_engine::{EndpointId, FabricEvent, FabricOp, MadBytes, McastGroup, NeighQuery, OpenQp};
use acm_engine::{RecvInfo, SourceQuery, UdSend};
use acm_proto::mad::MAD_LEN;
use acm_proto::notice::SmTrap;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the loop sleeps at most between looks at the shutdown flag.
const POLL: Duration = Duration::from_millis(50);

/// Waits shorter than this are slept rather than spent in `recv` (whose timeout has
/// kernel-tick granularity).
const SHORT_WAIT: Duration = Duration::from_millis(1);

/// How long one send to a host may block before the message waits in the host's
/// outbox for a later try.
const SEND_TIMEOUT: Duration = Duration::from_millis(2);

/// Messages a host may leave unread before the hub gives up on it and detaches it.
const OUTBOX_LIMIT: usize = 4096;

/// What the hub has done, for tests and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HubStats {
    /// Attachments made (re-attachments included).
    pub attaches: u64,
    /// Datagrams received from hosts.
    pub datagrams: u64,
    /// Datagrams that did not decode, or came from a socket that is not attached.
    pub rejected: u64,
    /// UD sends carried.
    pub ud_sends: u64,
    /// UD receives delivered (one per target QP).
    pub ud_deliveries: u64,
    /// SA MADs taken (each umad send, not each try).
    pub sa_sends: u64,
    /// SA responses handed back to their senders.
    pub sa_responses: u64,
    /// SA sends that timed out after their retries.
    pub sa_failures: u64,
    /// SA Reports (traps) sent to subscribers, repeats included.
    pub sa_reports: u64,
}

/// One host of the spec, attached or not.
#[derive(Debug, Default)]
struct HubHost {
    /// The socket path it is attached from.
    path: Option<PathBuf>,
    /// Bumped at every attachment: events for an earlier one are dropped.
    incarnation: u32,
    /// Attachments so far (the next incarnation).
    attaches: u32,
    qps: QpTable,
    /// QPNs reserved by CREATE_QP for endpoints not opened on a port yet.
    reserved: BTreeMap<EndpointId, u32>,
    next_qpn: u32,
    agent: u32,
    umad: BTreeMap<u64, UmadSend>,
    /// Encoded messages the host's socket did not take yet.
    outbox: VecDeque<Vec<u8>>,
}

impl QpTables for [HubHost] {
    fn host_qps(&self, host: HostId) -> Option<&QpTable> {
        self.get(host.index()).map(|h| &h.qps)
    }
}

/// Something due later.
#[derive(Debug)]
enum Event {
    /// A UD MAD reaches an endpoint's QP.
    Ud {
        host: HostId,
        inc: u32,
        ep: EndpointId,
        wc: RecvInfo,
        grh: [u8; 40],
        mad: Box<[u8; MAD_LEN]>,
    },
    /// An SA MAD reaches the SM.
    SaAtSm {
        host: HostId,
        inc: u32,
        port: PortRef,
        dlid: u16,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// The SA's answer reaches the host's umad agent.
    SaBack {
        host: HostId,
        inc: u32,
        port: PortRef,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// The per-try timeout of a umad send.
    UmadTimeout {
        host: HostId,
        inc: u32,
        tid: u64,
        attempt: u32,
    },
    /// An SA Report (a trap, docs/protocol/sa.md §9) reaches a subscriber.
    Report {
        port: PortRef,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// The SM's wait for the ReportResp of Report `tid` ends.
    ReportTimeout { tid: u64 },
}

/// How long the SM waits for a ReportResp before it sends a Report again (the
/// response time our subscriptions ask for, docs/protocol/sa.md §9).
const REPORT_RESP_WAIT: Duration = Duration::from_secs(1);

/// The fabric hub: a spec's fabric on a unix datagram socket, to which separate
/// processes attach as its hosts. See the [module docs](super) for the protocol.
///
/// Real time, not deterministic: link latencies and SA response times are the spec's,
/// measured on the wall clock; no faults are applied.
pub struct Hub {
    sock: UnixDatagram,
    path: PathBuf,
    spec: FabricSpec,
    topo: Topology,
    sa: SubnetAdmin,
    sm_lid: u16,
    sm_sl: u8,
    hosts: Vec<HubHost>,
    by_path: HashMap<PathBuf, HostId>,
    /// Sockets of hosts dropped because they vanished before their DETACH came.
    vanished: HashSet<PathBuf>,
    mcast: McastIndex,
    queue: BTreeMap<(Instant, u64), Event>,
    seq: u64,
    logging: bool,
    stats: HubStats,
    /// HCAs removed or dead now, by host and index ([`Hub::apply`]).
    gone: BTreeMap<(HostId, usize), changes::Gone>,
}

/// Binds a datagram socket at `path`, replacing a stale socket file nobody listens on.
pub(super) fn bind_fresh(path: &Path) -> Result<UnixDatagram, HubError> {
    let err = |source| HubError::Socket {
        what: "cannot bind",
        path: path.to_path_buf(),
        source,
    };
    match UnixDatagram::bind(path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            let probe = UnixDatagram::unbound().map_err(err)?;
            match probe.connect(path) {
                // Somebody is there: do not steal the path.
                Ok(()) => Err(HubError::Socket {
                    what: "another process listens on",
                    path: path.to_path_buf(),
                    source: e,
                }),
                Err(ce) if ce.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(err)?;
                    UnixDatagram::bind(path).map_err(err)
                }
                Err(_) => Err(err(e)),
            }
        }
        Err(e) => Err(err(e)),
    }
}

/// Whether a receive or send failed only because the socket had nothing to give or no
/// room to take right now (or a signal came first): the loop tries again later, where
/// any other error is the hub's or the host's end.
fn nothing_now(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl Hub {
    /// A hub for `spec` listening at `socket_path` (a stale socket file left by a dead
    /// hub is replaced; a live one is an error). Nothing is served until
    /// [`Hub::serve_until`] or [`Hub::run`]; hosts that attach earlier wait in the
    /// socket's queue.
    ///
    /// # Errors
    /// [`HubError::Socket`] when the socket cannot be bound.
    pub fn bind(spec: FabricSpec, socket_path: impl AsRef<Path>) -> Result<Self, HubError> {
        let path = socket_path.as_ref().to_path_buf();
        let sock = bind_fresh(&path)?;
        sock.set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(HubError::Io)?;
        let topo = Topology::new(&spec);
        let hosts = (0..spec.hosts.len()).map(|_| HubHost::default()).collect();
        Ok(Self {
            sock,
            path,
            sm_lid: spec.sm.lid,
            sm_sl: spec.sm.sl,
            topo,
            sa: SubnetAdmin::new(),
            hosts,
            by_path: HashMap::new(),
            vanished: HashSet::new(),
            mcast: McastIndex::new(),
            queue: BTreeMap::new(),
            seq: 0,
            logging: false,
            stats: HubStats::default(),
            gone: BTreeMap::new(),
            spec,
        })
    }

    /// Logs attachments, detachments and refusals to stderr (off by default).
    pub fn set_logging(&mut self, on: bool) {
        self.logging = on;
    }

    /// The socket path.
    #[must_use]
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// The fabric description.
    #[must_use]
    pub fn spec(&self) -> &FabricSpec {
        &self.spec
    }

    /// The SA (its groups and counters).
    #[must_use]
    pub fn sa(&self) -> &SubnetAdmin {
        &self.sa
    }

    /// Counts so far.
    #[must_use]
    pub fn stats(&self) -> HubStats {
        self.stats
    }

    /// Names of the hosts attached now, in spec order.
    #[must_use]
    pub fn attached(&self) -> Vec<&str> {
        self.hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.path.is_some())
            .map(|(i, _)| self.spec.hosts[i].name.as_str())
            .collect()
    }

    /// Serves forever.
    ///
    /// # Errors
    /// A socket error other than a timeout or an interrupted call.
    pub fn run(&mut self) -> Result<(), HubError> {
        self.serve_until(&AtomicBool::new(false))
    }

    /// Serves until `shutdown` is set (looked at least every 50 ms), then tells every
    /// attached host BYE.
    ///
    /// # Errors
    /// A socket error other than a timeout or an interrupted call.
    pub fn serve_until(&mut self, shutdown: &AtomicBool) -> Result<(), HubError> {
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        while !shutdown.load(Ordering::Relaxed) {
            self.fire_due();
            self.flush_all();
            let now = Instant::now();
            let mut wait = POLL;
            if let Some(&(at, _)) = self.queue.keys().next() {
                wait = wait.min(at.saturating_duration_since(now));
            }
            if self.hosts.iter().any(|h| !h.outbox.is_empty()) {
                wait = wait.min(Duration::from_millis(1));
            }
            if wait.is_zero() {
                continue;
            }
            if wait < SHORT_WAIT {
                // A socket timeout is rounded up to a kernel tick (1–10 ms); link
                // latencies are microseconds, so sleep those out precisely instead.
                std::thread::sleep(wait);
                continue;
            }
            self.sock.set_read_timeout(Some(wait))?;
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    self.stats.datagrams += 1;
                    if n > MAX_DATAGRAM {
                        self.stats.rejected += 1;
                        self.log(format_args!("dropped an oversized datagram"));
                        continue;
                    }
                    self.datagram(&buf[..n], &from);
                }
                Err(e) if nothing_now(&e) => {}
                Err(e) => return Err(HubError::Io(e)),
            }
        }
        for h in self.spec.host_ids() {
            if self.hosts[h.index()].path.is_some() {
                self.bye(h, "the hub is shutting down");
                self.detach(h);
            }
        }
        Ok(())
    }

    fn log(&self, args: std::fmt::Arguments<'_>) {
        if self.logging {
            eprintln!("acm-fabric-hub: {args}");
        }
    }

    fn schedule(&mut self, at: Instant, ev: Event) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    /// Processes every event due now.
    fn fire_due(&mut self) {
        loop {
            let now = Instant::now();
            match self.queue.first_key_value() {
                Some((&(at, _), _)) if at <= now => {}
                _ => return,
            }
            if let Some((_, ev)) = self.queue.pop_first() {
                self.process(ev);
            }
        }
    }

    /// Whether events for host `h`'s incarnation `inc` still matter.
    fn live(&self, h: HostId, inc: u32) -> bool {
        self.hosts
            .get(h.index())
            .is_some_and(|x| x.path.is_some() && x.incarnation == inc)
    }

    fn process(&mut self, ev: Event) {
        match ev {
            Event::Report { port, mad } => {
                self.stats.sa_reports += 1;
                let msg = HubMsg::Event(FabricEvent::SaResponse {
                    port: fabric::engine_port(port),
                    mad: MadBytes::new(&mad[..]),
                });
                self.send(port.host, &msg);
            }
            Event::ReportTimeout { tid } => {
                if let Some((to, mad)) = self.sa.report_again(tid) {
                    self.report_send(tid, to, mad);
                }
            }
            Event::Ud {
                host,
                inc,
                ep,
                wc,
                grh,
                mad,
            } => {
                if self.live(host, inc) && self.hosts[host.index()].qps.contains_key(&ep) {
                    self.stats.ud_deliveries += 1;
                    let ev = FabricEvent::UdReceive {
                        ep,
                        wc,
                        grh: Some(grh),
                        mad: MadBytes::new(&mad[..]),
                    };
                    self.send(host, &HubMsg::Event(ev));
                }
            }
            Event::SaAtSm {
                host,
                inc,
                port,
                dlid,
                mad,
            } => self.sa_arrival(host, inc, port, dlid, &mad),
            Event::SaBack {
                host,
                inc,
                port,
                mad,
            } => {
                if !self.live(host, inc) {
                    return;
                }
                let tid = fabric::mad_tid(&mad[..]);
                // A late or duplicate response matches no send and is dropped.
                if self.hosts[host.index()].umad.remove(&tid).is_some() {
                    self.stats.sa_responses += 1;
                    let msg = HubMsg::Event(FabricEvent::SaResponse {
                        port: fabric::engine_port(port),
                        mad: MadBytes::new(&mad[..]),
                    });
                    self.send(host, &msg);
                }
            }
            Event::UmadTimeout {
                host,
                inc,
                tid,
                attempt,
            } => {
                if !self.live(host, inc) {
                    return;
                }
                let Some(u) = self.hosts[host.index()].umad.get_mut(&tid) else {
                    return;
                };
                match u.expire(attempt) {
                    UmadExpiry::Stale => {}
                    UmadExpiry::Retry => self.sa_try(host, tid),
                    UmadExpiry::Failed => {
                        let port = u.port;
                        self.hosts[host.index()].umad.remove(&tid);
                        self.stats.sa_failures += 1;
                        let msg = HubMsg::Event(FabricEvent::SaSendFailed {
                            port: fabric::engine_port(port),
                            tid,
                            status: acm_proto::mad::UmadStatus::TIMED_OUT,
                        });
                        self.send(host, &msg);
                    }
                }
            }
        }
    }

    /// One datagram from a host socket.
    fn datagram(&mut self, bytes: &[u8], from: &SocketAddr) {
        let Some(path) = from.as_pathname().map(Path::to_path_buf) else {
            self.stats.rejected += 1;
            self.log(format_args!(
                "dropped a datagram from an unbound socket (bind one to attach)"
            ));
            return;
        };
        let msg = match HostMsg::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.rejected += 1;
                self.log(format_args!("{}: malformed datagram: {e}", path.display()));
                self.reply(
                    &path,
                    &HubMsg::Error {
                        code: error_code::MALFORMED,
                        message: e.to_string(),
                    },
                );
                return;
            }
        };
        if let HostMsg::Attach { name } = &msg {
            self.attach(&path, name);
            return;
        }
        // A change may come from any socket: a test or an operator's tool.
        if let HostMsg::Control(c) = &msg {
            let answer = match self.apply(c) {
                Ok(()) => HubMsg::Done,
                Err(e) => {
                    self.stats.rejected += 1;
                    HubMsg::Error {
                        code: error_code::BAD_CHANGE,
                        message: e.to_string(),
                    }
                }
            };
            self.reply(&path, &answer);
            return;
        }
        let Some(&h) = self.by_path.get(&path) else {
            // A host the hub already dropped says goodbye: its socket vanished while a
            // message (a Report, say) was on its way to it, before its DETACH came.
            if self.vanished.contains(&path) {
                // A host the hub dropped because its socket had vanished (it was
                // leaving when a Report or answer came for it): what it sent before
                // its DETACH is late, not an error.
                if matches!(msg, HostMsg::Detach) {
                    self.vanished.remove(&path);
                }
                return;
            }
            self.stats.rejected += 1;
            self.reply(
                &path,
                &HubMsg::Error {
                    code: error_code::NOT_ATTACHED,
                    message: "this socket is not attached (send ATTACH first)".into(),
                },
            );
            return;
        };
        self.host_msg(h, msg);
    }

    fn attach(&mut self, path: &Path, name: &str) {
        self.vanished.remove(path);
        let Some(h) = self.spec.host_index(name) else {
            self.stats.rejected += 1;
            self.log(format_args!(
                "{}: refused: no host {name:?} in the fabric",
                path.display()
            ));
            self.reply(
                path,
                &HubMsg::Error {
                    code: error_code::UNKNOWN_HOST,
                    message: format!("no host {name:?} in the fabric"),
                },
            );
            return;
        };
        // The socket may have been another host; the host may be attached elsewhere.
        if let Some(&old) = self.by_path.get(path) {
            self.detach(old);
        }
        if let Some(old_path) = self.hosts[h.index()].path.clone() {
            self.log(format_args!(
                "host {name} re-attaches from {} (was {})",
                path.display(),
                old_path.display()
            ));
            if old_path != path {
                self.bye(h, "replaced by a new attachment of this host");
            }
            self.detach(h);
        }
        let setup = HostSetup {
            host: h,
            name: name.to_owned(),
            sm_lid: self.sm_lid,
            sm_sl: self.sm_sl,
            devices: self.topo.devices(h, self.sm_lid, self.sm_sl),
            ips: fabric::local_ips(&self.spec, h),
            default_route: self.spec.hosts[h.index()].default_route,
        };
        let reply = HubMsg::Attached(setup).encode();
        if reply.len() > MAX_DATAGRAM {
            self.stats.rejected += 1;
            self.reply(
                path,
                &HubMsg::Error {
                    code: error_code::TOO_LARGE,
                    message: format!("host {name}'s setup needs {} bytes", reply.len()),
                },
            );
            return;
        }
        let host = &mut self.hosts[h.index()];
        let inc = host.attaches;
        host.attaches += 1;
        host.incarnation = inc;
        host.path = Some(path.to_path_buf());
        host.next_qpn = fabric::FIRST_QPN + inc.wrapping_mul(0x100);
        host.agent = fabric::umad_agent(h, inc);
        host.outbox.push_back(reply);
        self.by_path.insert(path.to_path_buf(), h);
        self.stats.attaches += 1;
        self.log(format_args!(
            "host {name} (index {h}) attached from {}",
            path.display()
        ));
        self.flush(h);
        self.tell_gone(h);
        // The host's ports come into service: trap 64 to the subscribers.
        let traps = self
            .host_ports(h)
            .into_iter()
            .filter_map(|p| self.topo.port(p).map(|lp| SmTrap::GidInService(lp.gid)))
            .collect();
        self.send_traps(traps);
    }

    fn host_ports(&self, h: HostId) -> Vec<PortRef> {
        self.topo
            .ports()
            .filter(|(p, lp)| p.host == h && lp.ib)
            .map(|(p, _)| p)
            .collect()
    }

    /// Reports `traps` to their subscribers, each Report repeated until acknowledged or
    /// its tries are spent (docs/protocol/sa.md §9).
    fn send_traps(&mut self, traps: Vec<SmTrap>) {
        let Some(sm) = fabric::sm_port(&self.topo, self.sm_lid) else {
            return;
        };
        let sm_gid = self.topo.port(sm).map(|p| p.gid).unwrap_or_default();
        for t in traps {
            for (tid, to, mad) in self.sa.trap(t, self.sm_lid, sm_gid, &self.topo) {
                self.report_send(tid, to, mad);
            }
        }
    }

    fn report_send(&mut self, tid: u64, to: PortRef, mad: [u8; MAD_LEN]) {
        let Some(sm) = fabric::sm_port(&self.topo, self.sm_lid) else {
            return;
        };
        let now = Instant::now();
        let delay =
            Duration::from_micros(self.spec.sm.response_us) + self.spec.latency(sm.host, to.host);
        self.schedule(
            now + delay,
            Event::Report {
                port: to,
                mad: Box::new(mad),
            },
        );
        self.schedule(now + REPORT_RESP_WAIT, Event::ReportTimeout { tid });
    }

    /// Forgets host `h`'s attachment: its QPs leave their groups, its SA sends and
    /// unsent messages are dropped.
    fn detach(&mut self, h: HostId) {
        let host = &mut self.hosts[h.index()];
        let Some(path) = host.path.take() else {
            return;
        };
        let eps: Vec<EndpointId> = host.qps.keys().copied().collect();
        for ep in eps {
            fabric::close_qp(&mut self.hosts[h.index()].qps, &mut self.mcast, h, ep);
        }
        let host = &mut self.hosts[h.index()];
        host.reserved.clear();
        host.umad.clear();
        host.outbox.clear();
        self.by_path.remove(&path);
        self.log(format_args!(
            "host {} detached ({})",
            self.spec.hosts[h.index()].name,
            path.display()
        ));
        // Its ports leave the fabric as far as the SM is concerned: memberships and
        // subscriptions go, and trap 65 (and 67 for groups left empty) is reported.
        let mut traps = Vec::new();
        for p in self.host_ports(h) {
            if let Some(lp) = self.topo.port(p) {
                traps.push(SmTrap::GidOutOfService(lp.gid));
            }
            self.sa.port_down(p);
        }
        traps.extend(self.sa.take_traps());
        self.send_traps(traps);
    }

    fn host_msg(&mut self, h: HostId, msg: HostMsg) {
        match msg {
            HostMsg::Attach { .. } | HostMsg::Control(_) => {}
            HostMsg::Detach => self.detach(h),
            HostMsg::CreateQp { ep } => {
                let host = &mut self.hosts[h.index()];
                let qpn = match host.reserved.get(&ep) {
                    Some(&qpn) => qpn,
                    None => {
                        let qpn = host.next_qpn;
                        host.next_qpn = host.next_qpn.wrapping_add(1);
                        host.reserved.insert(ep, qpn);
                        qpn
                    }
                };
                let ev = FabricEvent::QpOpened {
                    ep,
                    result: Ok(qpn),
                };
                self.send(h, &HubMsg::Event(ev));
            }
            HostMsg::Op(op) => self.fabric_op(h, &op),
        }
    }

    /// Carries out one of host `h`'s engine's fabric operations.
    fn fabric_op(&mut self, h: HostId, op: &FabricOp) {
        match *op {
            FabricOp::OpenQp(OpenQp {
                ep,
                port,
                pkey,
                pkey_index,
                ..
            }) => {
                let pr = fabric::port_ref(h, port);
                let result = if self.topo.port(pr).is_some() && !self.hca_gone(h, pr.hca) {
                    let host = &mut self.hosts[h.index()];
                    let qpn = host.reserved.remove(&ep).unwrap_or_else(|| {
                        let qpn = host.next_qpn;
                        host.next_qpn = host.next_qpn.wrapping_add(1);
                        qpn
                    });
                    host.qps.insert(
                        ep,
                        FabricQp {
                            port: pr,
                            qpn,
                            pkey,
                            pkey_index,
                            mcast: Vec::new(),
                        },
                    );
                    Ok(qpn)
                } else {
                    Err(())
                };
                self.send(h, &HubMsg::Event(FabricEvent::QpOpened { ep, result }));
            }
            FabricOp::SourceQuery(SourceQuery { id, dest }) => {
                let spec = &self.spec.hosts[h.index()];
                let result = fabric::route_with_default(
                    spec.ips.iter().map(|ip| (ip.addr, ip.prefix)),
                    spec.default_route,
                    dest,
                );
                self.send(h, &HubMsg::Event(FabricEvent::SourceAnswer { id, result }));
            }
            FabricOp::NeighQuery(NeighQuery {
                id,
                gid,
                pkey,
                dest,
                ..
            }) => {
                // The hub runs in real time and keeps no neighbour table: the spec
                // answers at once, as a table whose entry is already resolved.
                let result = fabric::ipoib_neighbour(&self.spec, &self.topo, h, gid, pkey, dest);
                self.send(h, &HubMsg::Event(FabricEvent::NeighAnswer { id, result }));
            }
            FabricOp::CloseQp(ep) => {
                self.hosts[h.index()].reserved.remove(&ep);
                fabric::close_qp(&mut self.hosts[h.index()].qps, &mut self.mcast, h, ep);
            }
            FabricOp::UdSend(ref send) => self.ud_send(h, send),
            FabricOp::McastAttach(McastGroup { ep, mgid, .. }) => {
                fabric::mcast_attach(&mut self.hosts[h.index()].qps, &mut self.mcast, h, ep, mgid);
            }
            FabricOp::McastDetach(McastGroup { ep, mgid, .. }) => {
                fabric::mcast_detach(&mut self.hosts[h.index()].qps, &mut self.mcast, h, ep, mgid);
            }
            FabricOp::SaSend(ref send) => {
                self.stats.sa_sends += 1;
                let port = send.port;
                let mad = &send.mad.0;
                // A response (the ReportResp of a Report) expects no answer: it reaches
                // the SA once, its TID as it is.
                if acm_proto::mad::MadHeaderPacket::new_unchecked(&mad[..])
                    .method()
                    .is_response()
                {
                    let pr = fabric::port_ref(h, port);
                    if send.dest.dlid == self.sm_lid && self.topo.port(pr).is_some_and(|p| p.up) {
                        let _ = self.sa.answer(&self.topo, pr, &mad[..]);
                    }
                    return;
                }
                let (full, umad) = UmadSend::new(
                    self.hosts[h.index()].agent,
                    fabric::port_ref(h, port),
                    send.tid,
                    send.dest.dlid,
                    send.timeout_ms,
                    send.retries,
                    *mad,
                );
                self.hosts[h.index()].umad.insert(full, umad);
                self.sa_try(h, full);
            }
        }
    }

    /// A UD send: each target QP gets it after the link latency; the completion comes
    /// back at once.
    fn ud_send(&mut self, h: HostId, send: &UdSend) {
        let (ep, av) = (send.ep, &send.av);
        self.stats.ud_sends += 1;
        let now = Instant::now();
        if let Some(d) = fabric::ud_delivery(&self.topo, &self.hosts[..], &self.mcast, h, ep, av) {
            for t in d.targets {
                let ev = Event::Ud {
                    host: t.host,
                    inc: self.hosts[t.host.index()].incarnation,
                    ep: t.ep,
                    wc: t.wc,
                    grh: d.grh,
                    mad: Box::new(send.mad.0),
                };
                let at = now + self.spec.latency(h, t.host);
                self.schedule(at, ev);
            }
        }
        let done = FabricEvent::UdSendDone {
            ep,
            token: send.token,
            ok: true,
        };
        self.send(h, &HubMsg::Event(done));
    }

    /// One try of a umad send: start its timeout, and send it to the SM if the port is
    /// up and there is an SM.
    fn sa_try(&mut self, h: HostId, tid: u64) {
        let inc = self.hosts[h.index()].incarnation;
        let Some(u) = self.hosts[h.index()].umad.get(&tid) else {
            return;
        };
        let (port, dlid, mad, attempt, timeout) =
            (u.port, u.dlid, u.mad.clone(), u.attempt, u.timeout);
        let now = Instant::now();
        self.schedule(
            now + timeout,
            Event::UmadTimeout {
                host: h,
                inc,
                tid,
                attempt,
            },
        );
        let up = self.topo.port(port).is_some_and(|p| p.up);
        let Some(sm) = fabric::sm_port(&self.topo, self.sm_lid) else {
            return;
        };
        if up {
            let at = now + self.spec.latency(h, sm.host);
            self.schedule(
                at,
                Event::SaAtSm {
                    host: h,
                    inc,
                    port,
                    dlid,
                    mad,
                },
            );
        }
    }

    fn sa_arrival(&mut self, h: HostId, inc: u32, port: PortRef, dlid: u16, mad: &[u8; MAD_LEN]) {
        // A MAD addressed to a LID that is not the SM's goes nowhere.
        if dlid != self.sm_lid {
            return;
        }
        let Some(sm) = fabric::sm_port(&self.topo, self.sm_lid) else {
            return;
        };
        let answer = self.sa.answer(&self.topo, port, mad);
        let traps = self.sa.take_traps();
        self.send_traps(traps);
        let Some(resp) = answer else {
            return;
        };
        let delay = Duration::from_micros(self.spec.sm.response_us) + self.spec.latency(sm.host, h);
        self.schedule(
            Instant::now() + delay,
            Event::SaBack {
                host: h,
                inc,
                port,
                mad: Box::new(resp),
            },
        );
    }

    /// Queues a message for host `h` and tries to send it.
    fn send(&mut self, h: HostId, msg: &HubMsg) {
        if self.hosts[h.index()].path.is_none() {
            return;
        }
        self.hosts[h.index()].outbox.push_back(msg.encode());
        if self.hosts[h.index()].outbox.len() > OUTBOX_LIMIT {
            self.log(format_args!(
                "host {} left {OUTBOX_LIMIT} messages unread; detaching it",
                self.spec.hosts[h.index()].name
            ));
            self.detach(h);
            return;
        }
        self.flush(h);
    }

    fn flush_all(&mut self) {
        for h in self.spec.host_ids() {
            if !self.hosts[h.index()].outbox.is_empty() {
                self.flush(h);
            }
        }
    }

    /// Sends what host `h`'s socket takes; a full socket keeps the rest for later, a
    /// vanished one detaches the host.
    fn flush(&mut self, h: HostId) {
        let Some(path) = self.hosts[h.index()].path.clone() else {
            return;
        };
        while let Some(front) = self.hosts[h.index()].outbox.front() {
            match self.sock.send_to(front, &path) {
                Ok(_) => {
                    self.hosts[h.index()].outbox.pop_front();
                }
                Err(e) if nothing_now(&e) => return,
                Err(e) => {
                    self.log(format_args!(
                        "host {} is gone ({}: {e})",
                        self.spec.hosts[h.index()].name,
                        path.display()
                    ));
                    self.vanished.insert(path);
                    self.detach(h);
                    return;
                }
            }
        }
    }

    /// A best-effort reply to a socket that may not be attached.
    fn reply(&self, path: &Path, msg: &HubMsg) {
        let _ = self.sock.send_to(&msg.encode(), path);
    }

    fn bye(&self, h: HostId, reason: &str) {
        if let Some(path) = &self.hosts[h.index()].path {
            self.reply(
                path,
                &HubMsg::Bye {
                    reason: reason.to_owned(),
                },
            );
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("path", &self.path)
            .field("hosts", &self.spec.hosts.len())
            .field("attached", &self.attached())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
