//! The deterministic scheduler: many engines on one virtual clock, their outputs
//! carried by the fabric model (UD unicast and multicast with pkey and Q_Key checks,
//! umad sends with the kernel's timeout, retries and TID rewrite, the SA), faults, and
//! the invariants every scenario checks.
//!
//! Events are ordered by (time, sequence number); engine timers are kept in an ordered
//! index so a step costs O(log n) however many hosts there are. All randomness comes
//! from the seed.

mod client;
mod faults;
mod host;
mod invariants;
mod seed;
mod trace;

pub use client::{Outcome, RequestId, ResolveResult, requests};
pub use faults::LinkFaults;
pub use invariants::Violation;
pub use seed::{DEFAULT_SEED, run_seeded, seed_from_env};

use crate::sa::{SaMode, SubnetAdmin};
use crate::spec::FabricSpec;
use crate::topology::{PortRef, Topology};
use acm_engine::io::{EndpointId, LookupId, PortEvent, RecvInfo, SendToken};
use acm_engine::{ConnId, Instant};
use faults::Faults;
use host::SimHost;
use invariants::Invariants;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;
use trace::Trace;

/// What happens at an instant.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A client writes a request on a new connection.
    Client {
        host: usize,
        conn: ConnId,
        bytes: Vec<u8>,
    },
    /// A UD MAD arrives at an endpoint's QP.
    Ud {
        host: usize,
        inc: u32,
        ep: EndpointId,
        wc: RecvInfo,
        grh: [u8; 40],
        mad: Box<[u8; 256]>,
    },
    /// A UD send completes.
    UdDone {
        host: usize,
        inc: u32,
        ep: EndpointId,
        token: SendToken,
    },
    /// An SA MAD reaches the SM.
    SaAtSm {
        host: usize,
        inc: u32,
        port: PortRef,
        dlid: u16,
        mad: Box<[u8; 256]>,
    },
    /// The SA's answer reaches the host's umad agent.
    SaBack {
        host: usize,
        inc: u32,
        port: PortRef,
        mad: Box<[u8; 256]>,
    },
    /// The kernel's per-try timeout of a umad send.
    UmadTimeout {
        host: usize,
        inc: u32,
        tid: u64,
        attempt: u32,
    },
    /// A QP the engine asked for exists.
    QpOpened {
        host: usize,
        inc: u32,
        ep: EndpointId,
        qpn: u32,
    },
    /// The host's routing answered a source lookup.
    Source {
        host: usize,
        inc: u32,
        id: LookupId,
        result: Result<IpAddr, u8>,
    },
}

/// Counts for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed (deliveries, completions, timer firings, requests).
    pub events: u64,
    /// ACM MADs sent on UD QPs (requests, retransmissions and responses).
    pub acm_mads: u64,
    /// SA PathRecord queries sent by engines (each umad send, not each try).
    pub sa_path_queries: u64,
    /// MCMemberRecord joins sent by engines.
    pub sa_joins: u64,
    /// Client replies received.
    pub replies: u64,
}

/// A simulated fabric and the engines on it.
pub struct Sim {
    pub(crate) spec: FabricSpec,
    pub(crate) topo: Topology,
    pub(crate) sa: SubnetAdmin,
    /// The SM's LID (its host is whichever port has it).
    pub(crate) sm_lid: u16,
    pub(crate) sm_sl: u8,
    pub(crate) hosts: Vec<SimHost>,
    /// QPs attached to each multicast group.
    pub(crate) mcast: BTreeMap<acm_proto::Gid, BTreeSet<(usize, EndpointId)>>,
    pub(crate) now: Instant,
    queue: BTreeMap<(Instant, u64), Event>,
    seq: u64,
    timers: BTreeSet<(Instant, usize)>,
    pub(crate) seed: u64,
    pub(crate) faults: Faults,
    pub(crate) trace: Trace,
    pub(crate) stats: Stats,
    pub(crate) requests: Vec<client::Request>,
    pub(crate) inv: Invariants,
    /// Who owns each address (for the path-truth invariant).
    pub(crate) owners: invariants::Owners,
    /// Whether host logs are kept (off for large runs).
    pub(crate) keep_logs: bool,
    pub(crate) logs: Vec<String>,
}

impl Sim {
    /// A fabric from `spec`, every host's engine started, driven by `seed`.
    #[must_use]
    pub fn new(spec: FabricSpec, seed: u64) -> Self {
        let topo = Topology::new(&spec);
        let mut sim = Self {
            sm_lid: spec.sm.lid,
            sm_sl: spec.sm.sl,
            topo,
            sa: SubnetAdmin::new(),
            hosts: Vec::new(),
            mcast: BTreeMap::new(),
            now: Instant::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            timers: BTreeSet::new(),
            seed,
            faults: Faults::new(seed),
            trace: Trace::new(),
            stats: Stats::default(),
            requests: Vec::new(),
            inv: Invariants::default(),
            owners: invariants::Owners::new(&spec),
            keep_logs: false,
            logs: Vec::new(),
            spec,
        };
        for h in 0..sim.spec.hosts.len() {
            let host = SimHost::new(&sim.spec, h, seed, 0);
            sim.hosts.push(host);
        }
        for h in 0..sim.hosts.len() {
            sim.boot(h);
        }
        sim
    }

    /// Keeps every engine log line (for small scenarios and debugging).
    pub fn keep_logs(&mut self, on: bool) {
        self.keep_logs = on;
    }

    /// The log lines kept so far.
    #[must_use]
    pub fn logs(&self) -> &[String] {
        &self.logs
    }

    /// The current simulated time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The fabric description.
    #[must_use]
    pub fn spec(&self) -> &FabricSpec {
        &self.spec
    }

    /// The live topology.
    #[must_use]
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The subnet administrator.
    #[must_use]
    pub fn sa(&self) -> &SubnetAdmin {
        &self.sa
    }

    /// The index of the host called `name`.
    ///
    /// # Panics
    /// If there is none (a scenario bug).
    #[must_use]
    pub fn host(&self, name: &str) -> usize {
        self.spec
            .host_index(name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Host `h`'s engine, for counters and inspection.
    #[must_use]
    pub fn engine(&self, h: usize) -> &acm_engine::Engine {
        &self.hosts[h].engine
    }

    /// Counts so far.
    #[must_use]
    pub fn stats(&self) -> Stats {
        Stats {
            events: self.trace.events(),
            ..self.stats
        }
    }

    /// The trace hash: equal for two runs with one seed and one script.
    #[must_use]
    pub fn trace_hash(&self) -> u64 {
        self.trace.hash()
    }

    /// The fault rules every link applies from now on.
    pub fn faults_mut(&mut self) -> &mut LinkFaults {
        &mut self.faults.rules
    }

    pub(crate) fn schedule(&mut self, at: Instant, ev: Event) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    /// Re-files host `h`'s engine timer in the index.
    pub(crate) fn refile_timer(&mut self, h: usize) {
        let next = self.hosts[h].engine.poll_timeout();
        let host = &mut self.hosts[h];
        if host.timer != next {
            if let Some(t) = host.timer {
                self.timers.remove(&(t, h));
            }
            if let Some(t) = next {
                self.timers.insert((t, h));
            }
            host.timer = next;
        }
    }

    /// Processes the next event or timer due by `limit`. False when nothing is left
    /// before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        let next_ev = self.queue.first_key_value().map(|(&(t, _), _)| t);
        let next_timer = self.timers.first().map(|&(t, _)| t);
        // An event due at the same instant as a timer goes first.
        let (t, take_event) = match (next_ev, next_timer) {
            (None, None) => return false,
            (Some(te), Some(tt)) => (te.min(tt), te <= tt),
            (Some(te), None) => (te, true),
            (None, Some(tt)) => (tt, false),
        };
        if t > limit {
            return false;
        }
        self.now = self.now.max(t);
        if take_event {
            if let Some((_, ev)) = self.queue.pop_first() {
                self.process(ev);
            }
        } else if let Some((_, h)) = self.timers.first().copied() {
            self.trace.add(&[0xEE, h as u8, (h >> 8) as u8]);
            self.input(h, acm_engine::Input::Tick);
        }
        true
    }

    /// Runs until nothing is scheduled and no engine timer is set.
    ///
    /// # Panics
    /// After `max_steps` steps ("livelock at t=…").
    pub fn run_until_idle(&mut self, max_steps: u64) {
        for _ in 0..max_steps {
            if !self.step(Instant::from_nanos(u64::MAX)) {
                return;
            }
        }
        panic!("livelock at {} after {max_steps} steps", self.now);
    }

    /// Runs everything due up to `t`, then moves the clock to `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.step(t) {}
        self.now = self.now.max(t);
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Feeds an input to host `h` and carries out its outputs.
    pub(crate) fn input(&mut self, h: usize, input: acm_engine::Input<'_>) {
        let now = self.now;
        self.hosts[h].engine.handle(now, input);
        self.drain(h);
    }

    fn process(&mut self, ev: Event) {
        match ev {
            Event::Client { host, conn, bytes } => {
                self.trace.add(&[1, host as u8]);
                self.trace.add(&bytes);
                self.input(
                    host,
                    acm_engine::Input::ClientRequest {
                        conn,
                        bytes: &bytes,
                    },
                );
            }
            Event::Ud {
                host,
                inc,
                ep,
                wc,
                grh,
                mad,
            } => {
                if self.hosts[host].incarnation != inc {
                    return;
                }
                self.trace.add(&[2, host as u8, ep.0 as u8]);
                self.trace.add(&mad[..]);
                self.on_ud_arrival(host, &mad[..]);
                self.input(
                    host,
                    acm_engine::Input::UdReceive {
                        ep,
                        wc,
                        grh: Some(&grh),
                        mad: &mad[..],
                    },
                );
            }
            Event::UdDone {
                host,
                inc,
                ep,
                token,
            } => {
                if self.hosts[host].incarnation == inc {
                    self.trace.add(&[3, host as u8]);
                    self.input(
                        host,
                        acm_engine::Input::UdSendDone {
                            ep,
                            token,
                            ok: true,
                        },
                    );
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
            } => self.sa_back(host, inc, port, *mad),
            Event::UmadTimeout {
                host,
                inc,
                tid,
                attempt,
            } => self.umad_timeout(host, inc, tid, attempt),
            Event::QpOpened { host, inc, ep, qpn } => {
                if self.hosts[host].incarnation == inc {
                    self.trace.add(&[4, host as u8]);
                    self.input(
                        host,
                        acm_engine::Input::QpOpened {
                            ep,
                            result: Ok(qpn),
                        },
                    );
                }
            }
            Event::Source {
                host,
                inc,
                id,
                result,
            } => {
                if self.hosts[host].incarnation == inc {
                    self.trace.add(&[5, host as u8]);
                    self.input(host, acm_engine::Input::SourceAnswer { id, result });
                }
            }
        }
    }

    /// The host whose port has the SM LID, if it is up.
    pub(crate) fn sm_host(&self) -> Option<(usize, PortRef)> {
        crate::fabric::sm_port(&self.topo, self.sm_lid).map(|p| (p.host, p))
    }

    /// Brings host `h`'s engine up: its IPs, then its devices.
    fn boot(&mut self, h: usize) {
        let ips = self.hosts[h].ips.clone();
        for ip in ips {
            self.input(h, acm_engine::Input::LocalIpAdded(ip));
        }
        let devices = self.hosts[h].devices(&self.spec, &self.topo, self.sm_lid, self.sm_sl);
        for d in devices {
            self.input(h, acm_engine::Input::DeviceAdded(d));
        }
    }

    // --- scripted changes -------------------------------------------------------------

    /// Takes a port down (PORT_ERR on its host; the SM drops it from every group).
    pub fn port_down(&mut self, p: PortRef) {
        if let Some(lp) = self.topo.port_mut(p) {
            lp.up = false;
        }
        self.sa.port_down(p);
        self.trace.add(&[10, p.host as u8]);
        self.input(
            p.host,
            acm_engine::Input::Port {
                port: host::engine_port(p),
                event: PortEvent::Down,
            },
        );
    }

    /// Brings a port back (PORT_ACTIVE).
    pub fn port_up(&mut self, p: PortRef) {
        if let Some(lp) = self.topo.port_mut(p) {
            lp.up = true;
        }
        self.trace.add(&[11, p.host as u8]);
        if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
            self.input(
                p.host,
                acm_engine::Input::Port {
                    port: host::engine_port(p),
                    event: PortEvent::Active(attrs),
                },
            );
        }
    }

    /// SM failover: the SM moves to the port with LID `new_lid`. The new SM knows no
    /// group memberships; every active port sees SM_CHANGE and CLIENT_REREGISTER.
    pub fn sm_failover(&mut self, new_lid: u16) {
        self.sm_lid = new_lid;
        self.sa.forget_all_members();
        self.trace.add(&[12, new_lid as u8]);
        let ports: Vec<PortRef> = self
            .topo
            .ports()
            .filter(|(_, lp)| lp.up && lp.ib)
            .map(|(p, _)| p)
            .collect();
        for p in ports {
            if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
                let port = host::engine_port(p);
                self.input(
                    p.host,
                    acm_engine::Input::Port {
                        port,
                        event: PortEvent::SmChange(attrs),
                    },
                );
                self.input(
                    p.host,
                    acm_engine::Input::Port {
                        port,
                        event: PortEvent::ClientReregister,
                    },
                );
            }
        }
    }

    /// CLIENT_REREGISTER on one port.
    pub fn client_reregister(&mut self, p: PortRef) {
        self.trace.add(&[13, p.host as u8]);
        self.input(
            p.host,
            acm_engine::Input::Port {
                port: host::engine_port(p),
                event: PortEvent::ClientReregister,
            },
        );
    }

    /// Replaces a port's pkey table (PKEY_CHANGE).
    pub fn set_pkeys(&mut self, p: PortRef, pkeys: Vec<u16>) {
        if let Some(lp) = self.topo.port_mut(p) {
            lp.pkeys = pkeys;
        }
        self.trace.add(&[14, p.host as u8]);
        if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
            self.input(
                p.host,
                acm_engine::Input::Port {
                    port: host::engine_port(p),
                    event: PortEvent::PkeyChange(attrs),
                },
            );
        }
    }

    /// The SA answers, drops everything, or answers busy.
    pub fn set_sa_mode(&mut self, mode: SaMode) {
        self.trace.add(&[15]);
        self.sa.mode = mode;
    }

    /// How long the SA takes to answer from now on (a slow SA: longer than the umad
    /// timeout makes every try time out).
    pub fn set_sa_response_time(&mut self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.trace.add(&micros.to_le_bytes());
        self.spec.sm.response_us = micros;
    }

    /// Cuts hosts `a` and `b` off from each other (both directions).
    pub fn partition(&mut self, a: usize, b: usize) {
        self.faults.partitions.insert((a.min(b), a.max(b)));
    }

    /// Undoes every partition.
    pub fn heal(&mut self) {
        self.faults.partitions.clear();
    }

    /// Restarts host `h`: a fresh engine (new seed, new QPNs); its clients' open
    /// connections are reset; everything in flight for the old engine is dropped.
    pub fn restart_host(&mut self, h: usize) {
        let inc = self.hosts[h].incarnation + 1;
        if let Some(t) = self.hosts[h].timer.take() {
            self.timers.remove(&(t, h));
        }
        let old = std::mem::replace(
            &mut self.hosts[h],
            SimHost::new(&self.spec, h, self.seed, inc),
        );
        for (ep, qp) in old.qps {
            for m in qp.mcast {
                if let Some(set) = self.mcast.get_mut(&m) {
                    set.remove(&(h, ep));
                }
            }
        }
        for (_, idx) in old.conns {
            client::finish(self, idx, Outcome::Reset);
        }
        self.inv.host_restarted(h);
        self.trace.add(&[16, h as u8]);
        self.boot(h);
    }
}

/// The port of an engine output, as the topology names it.
pub(crate) fn port_ref(host: usize, port: acm_engine::PortId) -> PortRef {
    crate::fabric::port_ref(host, port)
}

/// Durations from the spec's microsecond fields.
pub(crate) fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}
