//! The deterministic scheduler: many engines on one virtual clock, their outputs
//! carried by the fabric model (UD unicast and multicast with pkey and Q_Key checks,
//! umad sends with the kernel's timeout, retries and TID rewrite, the SA), faults, and
//! the invariants every scenario checks.
//!
//! Events are ordered by (time, sequence number), in one FIFO bucket per instant;
//! engine timers are kept in an ordered index so a step costs O(log n) however many
//! hosts there are. All randomness comes from the seed. A multicast on fault-free links
//! is one queue entry per latency, not one per receiver, and the runs to idle or to an
//! instant take a storm's multicasts in batches, host by host (module `batch`), with the
//! outcome of taking them one by one.

mod batch;
mod driven;
mod fasthash;
mod faults;
mod host;
mod invariants;
mod kept;
mod mcast;
mod nic;
mod sa_server;
mod seed;
mod submit;
mod trace;

pub use driven::{ProviderFactory, SUBMIT_CONN_BIT};
pub use faults::LinkFaults;
pub use host::{ARP_FAILURE, ARP_MIN, ARP_SPREAD};
pub use invariants::Violation;
pub use seed::{DEFAULT_SEED, run_seeded, seed_from_env};
pub use submit::{Outcome, RequestId, ResolveResult, requests};

use crate::sa::{SaMode, SubnetAdmin};
use crate::spec::{FabricSpec, HostId};
use crate::topology::{PortRef, Topology};
use acm_engine::{ConnId, Instant};
use acm_engine::{EndpointId, FabricEvent, PortEvent, RecvInfo};
use acm_proto::Gid;
use acm_proto::mad::MAD_LEN;
use acm_proto::notice::SmTrap;
use faults::Faults;
use host::SimHost;
use invariants::Invariants;
use kept::KeptByRun;
use mcast::Fanout;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::time::Duration;
use trace::Trace;

/// What happens at an instant.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A client writes a request on a new connection.
    Client {
        host: HostId,
        conn: ConnId,
        bytes: Vec<u8>,
    },
    /// A UD MAD arrives at an endpoint's QP.
    Ud {
        host: HostId,
        inc: u32,
        ep: EndpointId,
        wc: RecvInfo,
        payload: Rc<UdPayload>,
    },
    /// The copies of one multicast send that arrive at this instant, handed out one per
    /// step as [`Event::Ud`]s in receiver order ([`Fanout`]): what one [`Event::Ud`] per
    /// receiver would do, without one queue entry each (a storm on N hosts sends N²
    /// copies at once).
    UdFanout(Box<Fanout>),
    /// An SA MAD reaches the SM.
    SaAtSm {
        host: HostId,
        inc: u32,
        port: PortRef,
        dlid: u16,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// A limited SA (`[sa]`) is done serving a request it queued: it answers now.
    SaServed {
        host: HostId,
        inc: u32,
        port: PortRef,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// A UD MAD its host has finished taking in (after the ones before it, `[nic]
    /// recv_ns`) reaches the engine.
    UdAdmitted {
        host: HostId,
        inc: u32,
        ep: EndpointId,
        wc: RecvInfo,
        payload: Rc<UdPayload>,
    },
    /// The SA's answer reaches the host's umad agent.
    SaBack {
        host: HostId,
        inc: u32,
        port: PortRef,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// The kernel's per-try timeout of a umad send.
    UmadTimeout {
        host: HostId,
        inc: u32,
        tid: u64,
        attempt: u32,
    },
    /// A host's fabric, routing or neighbour table answers its engine at once or after
    /// a delay of its own (a QP made, a UD send completed, a source or neighbour lookup
    /// answered): the engine's own event, boxed because it has room for a MAD and most
    /// queued events are small. Received MADs and SA answers have events of their own,
    /// for the fan-out, the faults and umad's tries they go through first.
    Fabric {
        host: HostId,
        inc: u32,
        event: Box<FabricEvent>,
    },
    /// An SA Report (a trap, docs/protocol/sa.md §9) reaches a subscriber's umad agent.
    Report {
        port: PortRef,
        mad: Box<[u8; MAD_LEN]>,
    },
    /// The SM's wait for the ReportResp of Report `tid` ends.
    ReportTimeout { tid: u64 },
}

/// One UD MAD as sent: the GRH every copy carries, the MAD, and the MAD's trace digest
/// (a multicast is received by every host: shared, and digested once).
#[derive(Debug)]
pub(crate) struct UdPayload {
    pub(crate) grh: [u8; 40],
    pub(crate) mad: [u8; MAD_LEN],
    pub(crate) digest: u64,
    /// For an ACM request, the number of the requester's address, which every receiver
    /// learns (see [`invariants::Invariants::requester`]).
    pub(crate) requester: Option<u32>,
}

/// Counts for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records added to the trace hash: about two per event processed (its kind and
    /// host, then its payload), one per timer firing, two per client reply, one per
    /// scripted change. Events the scheduler skips (for a restarted host) add none.
    pub events: u64,
    /// ACM MADs sent on UD QPs (requests, retransmissions and responses).
    pub acm_mads: u64,
    /// SA PathRecord queries sent by engines (each umad send, not each try; a MAD an
    /// engine sends again after a BUSY answer or a timeout counts again).
    pub sa_path_queries: u64,
    /// MCMemberRecord joins sent by engines.
    pub sa_joins: u64,
    /// Other SA MADs sent by engines.
    pub sa_other: u64,
    /// umad retries: tries after the first, each after a per-try timeout.
    pub umad_retries: u64,
    /// umad sends given back unanswered after their last try (ETIMEDOUT).
    pub umad_timeouts: u64,
    /// Client replies received.
    pub replies: u64,
    /// SA Reports (traps) delivered to engines.
    pub sa_reports: u64,
}

/// A simulated fabric and the engines on it.
pub struct Sim {
    pub(crate) spec: FabricSpec,
    pub(crate) topo: Topology,
    pub(crate) sa: SubnetAdmin,
    /// The SA's queue, when `[sa]` limits it.
    pub(crate) sa_server: sa_server::SaServer,
    /// UD MADs each host has received (index: host).
    pub(crate) rx_mads: Vec<u64>,
    /// The SM's LID (its host is whichever port has it).
    pub(crate) sm_lid: u16,
    pub(crate) sm_sl: u8,
    pub(crate) hosts: Vec<SimHost>,
    /// QPs attached to each multicast group.
    pub(crate) mcast: BTreeMap<acm_proto::Gid, BTreeSet<(HostId, EndpointId)>>,
    /// Multicast receivers found so far; cleared whenever a QP, a group attachment, a
    /// port or a host changes.
    pub(crate) mcast_cache: mcast::McastCache,
    pub(crate) now: Instant,
    /// Events by (time, sequence number of the bucket): one FIFO bucket per instant,
    /// which is (time, sequence) order, since a later schedule call has a larger
    /// sequence number. Pushing and popping are O(1) within an instant; a storm puts
    /// millions of events on a few instants.
    queue: BTreeMap<(Instant, u64), VecDeque<Event>>,
    seq: u64,
    /// While a batch runs ([`batch`]), the events scheduled, by run.
    batched: KeptByRun<(Instant, Event)>,
    timers: BTreeSet<(Instant, HostId)>,
    pub(crate) seed: u64,
    pub(crate) faults: Faults,
    pub(crate) trace: Trace,
    pub(crate) stats: Stats,
    pub(crate) requests: Vec<submit::Request>,
    pub(crate) inv: Invariants,
    /// Who owns each address (for the path-truth invariant).
    pub(crate) owners: invariants::Owners,
    /// Whether host logs are kept (off for large runs).
    pub(crate) keep_logs: bool,
    pub(crate) logs: Vec<String>,
    /// Engine configurations that replace the spec's for some hosts (a daemon's own
    /// option and address files), kept for restarts.
    pub(crate) configs: BTreeMap<HostId, acm_engine::EngineConfig>,
    /// The host a program outside serves clients for, and what its engine said to them.
    pub(crate) driven: Option<driven::DrivenHost>,
    /// Makes the driven host's providers, when they are not just the built-in one (a
    /// daemon's plugins); kept for restarts.
    pub(crate) providers: Option<driven::ProviderFactory>,
}

impl Sim {
    /// A fabric from `spec`, every host's engine started, driven by `seed`.
    #[must_use]
    pub fn new(spec: FabricSpec, seed: u64) -> Self {
        Self::with_configs(spec, seed, BTreeMap::new())
    }

    /// [`Sim::new`], but the hosts named in `configs` run with that engine
    /// configuration instead of the one [`crate::fabric::engine_config`] derives from the
    /// spec (a daemon on the fabric brings its own files).
    #[must_use]
    pub fn with_configs(
        spec: FabricSpec,
        seed: u64,
        configs: BTreeMap<HostId, acm_engine::EngineConfig>,
    ) -> Self {
        Self::build(spec, seed, configs, None, None)
    }

    /// [`Sim::with_configs`], with host `driven` handed to a program outside from the start
    /// ([`Sim::drive_host`]), so that its engine's start-up log lines reach that program
    /// too.
    ///
    /// # Panics
    /// If `driven` is not a host of `spec`.
    #[must_use]
    pub fn driving(
        spec: FabricSpec,
        seed: u64,
        configs: BTreeMap<HostId, acm_engine::EngineConfig>,
        driven: HostId,
    ) -> Self {
        Self::build(spec, seed, configs, Some(driven), None)
    }

    /// [`Sim::driving`], with the driven host's engine running the providers `factory`
    /// makes (called with its configuration, again at each restart) instead of the
    /// built-in one alone.
    ///
    /// # Panics
    /// If `driven` is not a host of `spec`.
    #[must_use]
    pub fn driving_with_providers(
        spec: FabricSpec,
        seed: u64,
        configs: BTreeMap<HostId, acm_engine::EngineConfig>,
        driven: HostId,
        factory: driven::ProviderFactory,
    ) -> Self {
        Self::build(spec, seed, configs, Some(driven), Some(factory))
    }

    fn build(
        spec: FabricSpec,
        seed: u64,
        configs: BTreeMap<HostId, acm_engine::EngineConfig>,
        driven: Option<HostId>,
        providers: Option<driven::ProviderFactory>,
    ) -> Self {
        let topo = Topology::new(&spec);
        let mut sim = Self {
            sm_lid: spec.sm.lid,
            sm_sl: spec.sm.sl,
            topo,
            sa: SubnetAdmin::new(),
            sa_server: sa_server::SaServer::default(),
            rx_mads: vec![0; spec.hosts.len()],
            hosts: Vec::new(),
            mcast: BTreeMap::new(),
            mcast_cache: mcast::McastCache::default(),
            now: Instant::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            batched: KeptByRun::default(),
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
            configs,
            driven: None,
            providers,
            spec,
        };
        for h in sim.spec.host_ids() {
            let factory = sim.providers.as_mut().filter(|_| driven == Some(h));
            let config = sim.configs.get(&h).cloned();
            let host = SimHost::new(&sim.spec, h, seed, 0, config, factory);
            sim.hosts.push(host);
        }
        if let Some(h) = driven {
            sim.drive_host(h);
        }
        for h in sim.spec.host_ids() {
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

    /// The most UD MADs any one host has received so far (a multicast counts at every
    /// receiver).
    #[must_use]
    pub fn max_mads_received(&self) -> u64 {
        self.rx_mads.iter().copied().max().unwrap_or(0)
    }

    /// The most requests the SA held at once, waiting or in service (0 when `[sa]`
    /// limits nothing: the SA then holds none).
    #[must_use]
    pub fn sa_peak_queue(&self) -> usize {
        self.sa_server.peak
    }

    /// The host called `name`.
    ///
    /// # Panics
    /// If there is none (a scenario bug).
    #[must_use]
    pub fn host(&self, name: &str) -> HostId {
        self.spec
            .host_index(name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Host `h`'s engine, for counters and inspection.
    #[must_use]
    pub fn engine(&self, h: HostId) -> &acm_engine::Engine {
        &self.hosts[h.index()].engine
    }

    /// Host `h`'s engine, for what a driver asks of it directly rather than through an
    /// input (the cache view it publishes for worker threads). Inputs go through
    /// [`Sim::driven_input`], which carries out their outputs.
    pub fn engine_mut(&mut self, h: HostId) -> &mut acm_engine::Engine {
        &mut self.hosts[h.index()].engine
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
        let Some((at, ev)) = self.batched.keep((at, ev)) else {
            return;
        };
        self.seq += 1;
        match self.queue.range_mut((at, 0)..=(at, u64::MAX)).next_back() {
            Some((_, bucket)) => bucket.push_back(ev),
            None => {
                self.queue.insert((at, self.seq), VecDeque::from([ev]));
            }
        }
    }

    /// Takes the next event due (the front of the first bucket). A fan-out yields its
    /// next copy as an [`Event::Ud`] and stays in front until its last.
    fn pop_event(&mut self) -> Option<Event> {
        let mut first = self.queue.first_entry()?;
        let bucket = first.get_mut();
        let ev = match bucket.front_mut() {
            Some(Event::UdFanout(fan)) => {
                let (ev, more) = fan.take(&self.spec);
                if !more {
                    bucket.pop_front();
                }
                Some(ev)
            }
            _ => bucket.pop_front(),
        };
        if bucket.is_empty() {
            first.remove();
        } else if bucket.capacity() > 1024 && bucket.len() * 4 < bucket.capacity() {
            // A bucket gives its room back as it drains (halving when under a quarter
            // full): a storm's first instant holds one request per pair, and the
            // engines fill up as it empties.
            bucket.shrink_to(bucket.len() * 2);
        }
        ev
    }

    /// Re-files host `h`'s engine timer in the index.
    pub(crate) fn refile_timer(&mut self, h: HostId) {
        let next = self.hosts[h.index()].engine.poll_timeout();
        let host = &mut self.hosts[h.index()];
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
            if let Some(ev) = self.pop_event() {
                self.process(ev);
            }
        } else if let Some((_, h)) = self.timers.first().copied() {
            self.trace
                .add(&[0xEE, h.index() as u8, (h.index() >> 8) as u8]);
            self.input(h, acm_engine::Input::Tick);
        }
        true
    }

    /// Runs until nothing is scheduled and no engine timer is set.
    ///
    /// # Panics
    /// After `max_steps` steps ("livelock at t=…").
    pub fn run_until_idle(&mut self, max_steps: u64) {
        let mut steps = 0;
        while steps < max_steps {
            match self.step_batch(Instant::from_nanos(u64::MAX)) {
                0 => return,
                n => steps += n,
            }
        }
        panic!("livelock at {} after {max_steps} steps", self.now);
    }

    /// Runs everything due up to `t`, then moves the clock to `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.step_batch(t) > 0 {}
        self.now = self.now.max(t);
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Feeds an input to host `h` and carries out its outputs.
    pub(crate) fn input(&mut self, h: HostId, input: acm_engine::Input<'_>) {
        let now = self.now;
        self.hosts[h.index()].engine.handle(now, input);
        self.drain(h);
    }

    fn process(&mut self, ev: Event) {
        match ev {
            Event::Client { host, conn, bytes } => {
                self.trace.add(&[1, host.index() as u8]);
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
                payload,
            } => {
                if self.hosts[host.index()].incarnation != inc {
                    return;
                }
                if let Some(slot) = self.rx_slot(host) {
                    let ev = Event::UdAdmitted {
                        host,
                        inc,
                        ep,
                        wc,
                        payload,
                    };
                    self.schedule(slot, ev);
                    return;
                }
                self.deliver_ud(host, ep, wc, &payload);
            }
            Event::UdAdmitted {
                host,
                inc,
                ep,
                wc,
                payload,
            } => {
                if self.hosts[host.index()].incarnation == inc {
                    self.deliver_ud(host, ep, wc, &payload);
                }
            }
            // `pop_event` hands out a fan-out's copies one by one.
            Event::UdFanout(_) => {}
            Event::Fabric { host, inc, event } => {
                if self.hosts[host.index()].incarnation == inc {
                    self.fabric_event(host, &event);
                }
            }
            Event::SaAtSm {
                host,
                inc,
                port,
                dlid,
                mad,
            } => self.sa_arrival(host, inc, port, dlid, &mad),
            Event::SaServed {
                host,
                inc,
                port,
                mad,
            } => self.sa_serve(host, inc, port, &mad),
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
            Event::Report { port, mad } => self.report_arrival(port, &mad),
            Event::ReportTimeout { tid } => self.report_timeout(tid),
        }
    }

    /// Hands host `h`'s engine what its fabric answered (an [`Event::Fabric`] of the
    /// host's current incarnation), traced by kind.
    fn fabric_event(&mut self, h: HostId, event: &FabricEvent) {
        let kind = match event {
            FabricEvent::UdSendDone { .. } => 3,
            FabricEvent::QpOpened { .. } => 4,
            FabricEvent::SourceAnswer { .. } => 5,
            FabricEvent::NeighAnswer { .. } => 6,
            // Not scheduled this way (see `Event::Fabric`); traced apart should one be.
            FabricEvent::UdReceive { .. }
            | FabricEvent::SaResponse { .. }
            | FabricEvent::SaSendFailed { .. } => 21,
        };
        self.trace.add(&[kind, h.index() as u8]);
        if let FabricEvent::NeighAnswer { id, result } = event {
            let asked = self.hosts[h.index()].neigh_asked.remove(id);
            if let Some(dest) = asked {
                let found = matches!(result, acm_engine::NeighResult::Found { .. });
                let hosts = self.hosts.len();
                self.inv.on_neigh_answer(self.now, h, hosts, dest, found);
            }
        }
        self.input(h, event.as_input());
    }

    /// Hands a UD MAD to host `h`'s engine.
    fn deliver_ud(&mut self, h: HostId, ep: EndpointId, wc: RecvInfo, payload: &UdPayload) {
        self.rx_mads[h.index()] += 1;
        self.trace.add(&[2, h.index() as u8, ep.0 as u8]);
        self.trace.add(&payload.digest.to_le_bytes());
        self.on_ud_arrival(h, payload);
        self.input(
            h,
            acm_engine::Input::UdReceive {
                ep,
                wc,
                grh: Some(&payload.grh),
                mad: &payload.mad[..],
            },
        );
    }

    /// The host whose port has the SM LID, if it is up.
    pub(crate) fn sm_host(&self) -> Option<(HostId, PortRef)> {
        crate::fabric::sm_port(&self.topo, self.sm_lid).map(|p| (p.host, p))
    }

    /// Brings host `h`'s engine up: its IPs, then its devices. A host that runs no
    /// daemon (`daemon = false`) is left alone: its engine never hears of a device.
    fn boot(&mut self, h: HostId) {
        if !self.spec.hosts[h.index()].daemon {
            return;
        }
        let ips = self.hosts[h.index()].ips.clone();
        for ip in ips {
            self.input(h, acm_engine::Input::LocalIpAdded(ip));
        }
        let devices =
            self.hosts[h.index()].devices(&self.spec, &self.topo, self.sm_lid, self.sm_sl);
        for d in devices {
            self.input(h, acm_engine::Input::DeviceAdded(d));
        }
    }

    // --- scripted changes -------------------------------------------------------------

    /// Takes a port down (PORT_ERR on its host; the SM drops it from every group).
    ///
    /// The SM reports the port's GID out of service (trap 65), and the groups it leaves
    /// empty deleted (trap 67), to their subscribers.
    pub fn port_down(&mut self, p: PortRef) {
        let gid = self.set_port_up(p, false);
        self.sa.port_down(p);
        self.trace.add(&[10, p.host.index() as u8]);
        self.port_event(p, PortEvent::Down);
        let mut traps: Vec<SmTrap> = gid.map(SmTrap::GidOutOfService).into_iter().collect();
        traps.extend(self.sa.take_traps());
        self.send_traps(traps);
    }

    /// Gives a port a new base LID and, if `gid` is given, a new GID 0 (a host that comes
    /// back moved, or with another HCA): call it while the port is down, then
    /// [`Sim::port_up`]. The host's IPoIB addresses on the port follow the new GID (the
    /// engine hears them removed and added again).
    pub fn set_port_identity(&mut self, p: PortRef, lid: u16, gid: Option<Gid>) {
        self.mcast_cache.clear();
        let Some(lp) = self.topo.port_mut(p) else {
            return;
        };
        let old = lp.gid;
        lp.lid = lid;
        if let Some(g) = gid {
            lp.gid = g;
        }
        let new = lp.gid;
        self.topo.reindex();
        self.trace.add(&[17, p.host.index() as u8]);
        self.trace.add(&lid.to_le_bytes());
        self.trace.add(&new.0);
        if new == old {
            return;
        }
        let h = p.host;
        let moved: Vec<usize> = (0..self.hosts[h.index()].ips.len())
            .filter(|&i| self.hosts[h.index()].ips[i].gid == old)
            .collect();
        for i in moved {
            let addr = self.hosts[h.index()].ips[i].addr;
            self.input(h, acm_engine::Input::LocalIpRemoved(addr));
            self.hosts[h.index()].ips[i].gid = new;
            let ip = self.hosts[h.index()].ips[i].clone();
            self.input(h, acm_engine::Input::LocalIpAdded(ip));
        }
    }

    /// Brings a port back (PORT_ACTIVE). The SM reports its GID in service (trap 64).
    pub fn port_up(&mut self, p: PortRef) {
        let gid = self.set_port_up(p, true);
        self.trace.add(&[11, p.host.index() as u8]);
        if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
            self.port_event(p, PortEvent::Active(attrs));
        }
        self.send_traps(gid.map(SmTrap::GidInService).into_iter().collect());
    }

    /// Tells port `p`'s host that `event` happened on the port.
    fn port_event(&mut self, p: PortRef, event: PortEvent) {
        let port = host::engine_port(p);
        self.input(p.host, acm_engine::Input::Port { port, event });
    }

    /// Marks port `p` up or down in the topology (who receives multicast is worked out
    /// afresh); its GID, for the SM's trap, if the port exists.
    fn set_port_up(&mut self, p: PortRef, up: bool) -> Option<Gid> {
        self.mcast_cache.clear();
        let lp = self.topo.port_mut(p)?;
        lp.up = up;
        Some(lp.gid)
    }

    /// SM failover: the SM moves to the port with LID `new_lid`. The new SM knows no
    /// group memberships; every active port sees SM_CHANGE and CLIENT_REREGISTER.
    pub fn sm_failover(&mut self, new_lid: u16) {
        self.mcast_cache.clear();
        self.sm_lid = new_lid;
        self.sa.forget_all_members();
        self.trace.add(&[12, new_lid as u8]);
        for p in self.topo.ib_ports_up() {
            if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
                self.port_event(p, PortEvent::SmChange(attrs));
                self.port_event(p, PortEvent::ClientReregister);
            }
        }
    }

    /// CLIENT_REREGISTER on one port.
    pub fn client_reregister(&mut self, p: PortRef) {
        self.trace.add(&[13, p.host.index() as u8]);
        self.port_event(p, PortEvent::ClientReregister);
    }

    /// Replaces a port's pkey table (PKEY_CHANGE).
    pub fn set_pkeys(&mut self, p: PortRef, pkeys: Vec<u16>) {
        self.mcast_cache.clear();
        if let Some(lp) = self.topo.port_mut(p) {
            lp.pkeys = pkeys;
        }
        self.trace.add(&[14, p.host.index() as u8]);
        if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
            self.port_event(p, PortEvent::PkeyChange(attrs));
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

    /// The SA's service rates and queue from now on (`[sa]` of the fabric file); a
    /// request already queued keeps the instant it was given.
    pub fn set_sa_limits(&mut self, sa: crate::spec::SaSpec) {
        self.trace.add(&[17]);
        self.trace.add(&sa.path_rate.to_le_bytes());
        self.trace.add(&sa.queue.to_le_bytes());
        self.spec.sa = sa;
    }

    /// Cuts hosts `a` and `b` off from each other (both directions).
    pub fn partition(&mut self, a: HostId, b: HostId) {
        self.faults.partitions.insert((a.min(b), a.max(b)));
    }

    /// Undoes every partition.
    pub fn heal(&mut self) {
        self.faults.partitions.clear();
    }

    /// Restarts host `h`: a fresh engine (new seed, new QPNs); its clients' open
    /// connections are reset; everything in flight for the old engine is dropped.
    pub fn restart_host(&mut self, h: HostId) {
        self.mcast_cache.clear();
        let inc = self.hosts[h.index()].incarnation + 1;
        if let Some(t) = self.hosts[h.index()].timer.take() {
            self.timers.remove(&(t, h));
        }
        let driven = self.driven_host() == Some(h);
        let factory = self.providers.as_mut().filter(|_| driven);
        let config = self.configs.get(&h).cloned();
        let host = SimHost::new(&self.spec, h, self.seed, inc, config, factory);
        let old = std::mem::replace(&mut self.hosts[h.index()], host);
        for (ep, qp) in old.qps {
            for m in qp.mcast {
                if let Some(set) = self.mcast.get_mut(&m) {
                    set.remove(&(h, ep));
                }
            }
        }
        for (_, idx) in old.conns.into_open() {
            submit::finish(self, idx, Outcome::Reset);
        }
        self.inv.host_restarted(h);
        self.trace.add(&[16, h.index() as u8]);
        self.boot(h);
    }
}

/// The port of an engine output, as the topology names it.
pub(crate) fn port_ref(host: HostId, port: acm_engine::PortId) -> PortRef {
    crate::fabric::port_ref(host, port)
}

/// Durations from the spec's microsecond fields.
pub(crate) fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}
