//! One simulated host: its engine and what a real host's I/O layer would hold (QPs, multicast
//! attachments, client connections, umad sends in the kernel's hands), and how the
//! engine's outputs turn into fabric events.

use super::mcast::Receivers;
use super::sa_server::Admission;
use super::submit::{self, Outcome};
use super::{Event, Sim, UdPayload, port_ref, us};
use crate::fabric::{self, FabricQp, QpTable, QpTables, UmadExpiry, UmadSend};
use crate::rng::SimRng;
use crate::sa::SaMode;
use crate::spec::SaOverflow;
use crate::spec::{FabricSpec, HostId};
use crate::topology::{PortRef, Topology};
use acm_engine::HostOutput;
use acm_engine::driver::{self, Fabric};
use acm_engine::{
    AddressVector, ClientOutput, EndpointId, FabricEvent, LocalIp, Mad, McastGroup, NeighId,
    NeighQuery, NeighResult, OpenQp, SaSend, SourceQuery, UdSend,
};
use acm_engine::{ConnId, DeviceDesc, DeviceId, Engine, Instant};
use acm_proto::mad::{AttrId, MAD_LEN, MadHeaderPacket};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

/// How long the SM waits for a ReportResp before it sends a Report again: about the
/// response time our subscriptions ask for (docs/protocol/sa.md §9, RespTimeValue 18).
const REPORT_RESP_WAIT: Duration = Duration::from_secs(1);

pub(crate) use crate::fabric::engine_port;

pub(crate) struct SimHost {
    /// Which host of the spec it is.
    pub(crate) index: HostId,
    pub(crate) engine: Engine,
    pub(crate) incarnation: u32,
    pub(crate) timer: Option<Instant>,
    pub(crate) qps: QpTable,
    next_qpn: u32,
    /// Open client connections and the request each carries.
    pub(crate) conns: submit::ConnTable,
    pub(crate) next_conn: u64,
    /// umad sends by TID as rewritten with the agent id.
    pub(crate) umad: BTreeMap<u64, UmadSend>,
    agent: u32,
    pub(crate) ips: Vec<LocalIp>,
    pub(crate) sa_depth: u32,
    /// `addr_timeout` in minutes, `None` for never.
    pub(crate) addr_timeout: Option<u32>,
    /// Addresses its hosts file preloads (not learned over the network).
    pub(crate) preloaded: Vec<acm_engine::Address>,
    /// The kernel's IPoIB neighbour table: each address asked for, with what
    /// resolution finds and when it has found it.
    pub(crate) neigh: BTreeMap<IpAddr, SimNeigh>,
    /// The address of each neighbour lookup whose answer is on its way, for the
    /// invariants' record of what the host learned.
    pub(crate) neigh_asked: BTreeMap<NeighId, IpAddr>,
    /// Draws the ARP exchanges' durations.
    neigh_rng: SimRng,
    /// When each port's last send is off the wire (`[nic] send_ns`).
    pub(crate) tx_free: BTreeMap<PortRef, Instant>,
    /// When the host is done receiving the UD MADs handed to it (`[nic] recv_ns`).
    pub(crate) rx_free: Instant,
    /// The number of the next umad send's first try (see `Sim::sa_send`).
    next_try: u32,
}

/// An entry of a simulated host's neighbour table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SimNeigh {
    /// When resolution ends.
    pub(crate) ready_at: Instant,
    /// What it ends with: found, or failed.
    pub(crate) result: NeighResult,
}

/// The shortest IPoIB ARP exchange the model draws (request out, reply back).
pub const ARP_MIN: Duration = Duration::from_micros(100);
/// How much longer than [`ARP_MIN`] an exchange may take, at most.
pub const ARP_SPREAD: Duration = Duration::from_micros(1900);
/// How long the kernel tries before an entry fails: Linux's defaults of 3 probes
/// (`mcast_solicit`) one second apart (`retrans_time_ms`).
pub const ARP_FAILURE: Duration = Duration::from_secs(3);

/// The simulator's hosts hold the fabric's QP tables.
impl QpTables for [SimHost] {
    fn host_qps(&self, host: HostId) -> Option<&QpTable> {
        self.get(host.index()).map(|h| &h.qps)
    }
}

impl SimHost {
    pub(crate) fn new(
        spec: &FabricSpec,
        h: HostId,
        seed: u64,
        incarnation: u32,
        config: Option<acm_engine::EngineConfig>,
        providers: Option<&mut super::driven::ProviderFactory>,
    ) -> Self {
        let config = config.unwrap_or_else(|| fabric::engine_config(spec, h));
        let sa_depth = config.options.sa_depth.max(1);
        let addr_timeout = u32::try_from(config.options.addr_timeout).ok();
        let preloaded = config.hosts.iter().map(|e| e.address).collect();
        let engine_seed =
            SimRng::derive(seed, ((h.index() as u64) << 20) | u64::from(incarnation)).next_u64();
        let ips = fabric::local_ips(spec, h);
        let engine = match providers {
            Some(make) => {
                let list = make(&config);
                Engine::with_providers(config, engine_seed, Instant::ZERO, list)
            }
            None => Engine::new(config, engine_seed, Instant::ZERO),
        };
        Self {
            index: h,
            engine,
            incarnation,
            timer: None,
            qps: BTreeMap::new(),
            next_qpn: fabric::FIRST_QPN + incarnation * 0x100,
            conns: submit::ConnTable::default(),
            next_conn: 1,
            umad: BTreeMap::new(),
            agent: fabric::umad_agent(h, incarnation),
            ips,
            sa_depth,
            addr_timeout,
            preloaded,
            neigh: BTreeMap::new(),
            neigh_asked: BTreeMap::new(),
            neigh_rng: SimRng::derive(engine_seed, 0x4e31_6768),
            tx_free: BTreeMap::new(),
            rx_free: Instant::ZERO,
            next_try: 0,
        }
    }

    /// The host's HCAs as the I/O layer describes them to the engine.
    pub(crate) fn devices(
        &self,
        spec: &FabricSpec,
        topo: &Topology,
        sm_lid: u16,
        sm_sl: u8,
    ) -> Vec<DeviceDesc> {
        spec_devices(spec, topo, self.index, sm_lid, sm_sl)
    }
}

fn spec_devices(
    spec: &FabricSpec,
    topo: &Topology,
    h: HostId,
    sm_lid: u16,
    sm_sl: u8,
) -> Vec<DeviceDesc> {
    spec.hosts[h.index()]
        .hcas
        .iter()
        .enumerate()
        .map(|(i, hca)| DeviceDesc {
            id: DeviceId(i as u32),
            name: hca.name.clone(),
            guid: hca.guid,
            ports: (1..=hca.ports.len() as u8)
                .filter_map(|port| {
                    topo.attrs(
                        PortRef {
                            host: h,
                            hca: i,
                            port,
                        },
                        sm_lid,
                        sm_sl,
                    )
                })
                .collect(),
        })
        .collect()
}

/// Host `h` of the simulator as its engine's fabric: what the driver asks of it turns
/// into fabric events on the simulator's clock.
struct HostFabric<'a> {
    sim: &'a mut Sim,
    h: HostId,
}

impl HostFabric<'_> {
    /// Attaches or detaches (`change`) one of the host's QPs; the receivers of every
    /// group are worked out afresh afterwards.
    fn change_membership(&mut self, change: fabric::MembershipChange, g: McastGroup) {
        let (sim, h) = (&mut *self.sim, self.h);
        sim.mcast_cache.clear();
        change(
            &mut sim.hosts[h.index()].qps,
            &mut sim.mcast,
            h,
            g.ep,
            g.mgid,
        );
    }
}

impl Fabric for HostFabric<'_> {
    fn engine(&mut self) -> &mut Engine {
        &mut self.sim.hosts[self.h.index()].engine
    }

    fn open_qp(&mut self, qp: OpenQp) {
        let (sim, h) = (&mut *self.sim, self.h);
        sim.mcast_cache.clear();
        let host = &mut sim.hosts[h.index()];
        let qpn = host.next_qpn;
        host.next_qpn += 1;
        host.qps.insert(
            qp.ep,
            FabricQp {
                port: port_ref(h, qp.port),
                qpn,
                pkey: qp.pkey,
                pkey_index: qp.pkey_index,
                mcast: Vec::new(),
            },
        );
        let event = FabricEvent::QpOpened {
            ep: qp.ep,
            result: Ok(qpn),
        };
        sim.schedule_fabric(sim.now, h, event);
    }

    fn close_qp(&mut self, ep: EndpointId) {
        let (sim, h) = (&mut *self.sim, self.h);
        sim.mcast_cache.clear();
        fabric::close_qp(&mut sim.hosts[h.index()].qps, &mut sim.mcast, h, ep);
    }

    fn ud_send(&mut self, send: &UdSend) {
        let (sim, h) = (&mut *self.sim, self.h);
        let depart = sim.ud_send(h, send.ep, &send.av, &send.mad);
        let done = FabricEvent::UdSendDone {
            ep: send.ep,
            token: send.token,
            ok: true,
        };
        sim.schedule_fabric(sim.now + depart.max(Duration::from_micros(1)), h, done);
    }

    fn mcast_attach(&mut self, g: McastGroup) {
        self.change_membership(fabric::mcast_attach, g);
    }

    fn mcast_detach(&mut self, g: McastGroup) {
        self.change_membership(fabric::mcast_detach, g);
    }

    fn sa_send(&mut self, send: &SaSend) {
        let h = self.h;
        self.sim.sa_send(h, port_ref(h, send.port), send);
    }

    fn source_query(&mut self, q: SourceQuery) {
        let (sim, h) = (&mut *self.sim, self.h);
        let result = sim.route(h, q.dest);
        sim.schedule_fabric(sim.now, h, FabricEvent::SourceAnswer { id: q.id, result });
    }

    fn neigh_query(&mut self, q: NeighQuery) {
        let (sim, h) = (&mut *self.sim, self.h);
        let result = sim.neighbour(h, &q);
        sim.hosts[h.index()].neigh_asked.insert(q.id, q.dest);
        sim.schedule_fabric(sim.now, h, FabricEvent::NeighAnswer { id: q.id, result });
    }
}

impl Sim {
    /// Schedules `event` for host `h` at `at`, for the host as it is now: a restart in
    /// between drops it, as the restarted host's I/O layer would never hear of it.
    pub(crate) fn schedule_fabric(&mut self, at: Instant, h: HostId, event: FabricEvent) {
        let inc = self.hosts[h.index()].incarnation;
        let event = Box::new(event);
        self.schedule(
            at,
            Event::Fabric {
                host: h,
                inc,
                event,
            },
        );
    }

    /// Host `h`'s neighbour table asked for `q.dest` (docs/protocol/ipoib-neigh.md §4):
    /// an entry whose resolution has ended gives its result (a failed one is dropped,
    /// so the next question starts again, as the kernel forgets failed entries); one
    /// under way is incomplete; a missing one starts resolution, which ends after a
    /// drawn ARP exchange when some host has the address in the partition, or after
    /// [`ARP_FAILURE`] when none has. A host without an interface on the port and
    /// partition is answered at once.
    fn neighbour(&mut self, h: HostId, q: &NeighQuery) -> NeighResult {
        if !fabric::has_ipoib_interface(&self.spec, h, q.gid, q.pkey) {
            return NeighResult::Unreachable;
        }
        let now = self.now;
        match self.hosts[h.index()].neigh.get(&q.dest).copied() {
            Some(e) if now >= e.ready_at => {
                if e.result == NeighResult::Unreachable {
                    self.hosts[h.index()].neigh.remove(&q.dest);
                }
                e.result
            }
            Some(_) => NeighResult::Incomplete,
            None => {
                let found =
                    fabric::ipoib_neighbour(&self.spec, &self.topo, h, q.gid, q.pkey, q.dest);
                let host = &mut self.hosts[h.index()];
                let took = match found {
                    NeighResult::Found { .. } => {
                        ARP_MIN + us(host.neigh_rng.below(ARP_SPREAD.as_micros() as u64 + 1))
                    }
                    _ => ARP_FAILURE,
                };
                host.neigh.insert(
                    q.dest,
                    SimNeigh {
                        ready_at: now + took,
                        result: found,
                    },
                );
                NeighResult::Incomplete
            }
        }
    }

    /// Carries out everything host `h`'s engine asked for.
    pub(crate) fn drain(&mut self, h: HostId) {
        // Outputs are carried out as they are drained (nothing here feeds host `h`'s
        // engine, so its queue holds exactly what a collected batch would); the
        // connections replied to are closed once the batch is done.
        let mut closed = Vec::new();
        loop {
            while let Some(out) = driver::poll_output(&mut HostFabric { sim: self, h }) {
                self.host_output(h, out, &mut closed);
            }
            if closed.is_empty() {
                break;
            }
            let now = self.now;
            for conn in closed.drain(..) {
                self.hosts[h.index()]
                    .engine
                    .handle(now, acm_engine::Input::ClientClosed(conn));
            }
        }
        self.refile_timer(h);
    }

    /// A reply, close or log line of host `h`: to the program serving the host (its connections and log),
    /// or to the test client API.
    fn host_output(&mut self, h: HostId, out: HostOutput, closed: &mut Vec<ConnId>) {
        let now = self.now;
        let out = match out {
            HostOutput::Client(
                ClientOutput::Reply { conn, .. } | ClientOutput::Close { conn, .. },
            ) if self.is_driven_conn(h, conn) => {
                return self.push_driven_output(out);
            }
            HostOutput::Log(_) if self.is_driven_host(h) => return self.push_driven_output(out),
            HostOutput::Client(c) => c,
            HostOutput::Log(ev) => {
                if self.keep_logs {
                    self.logs.push(format!("{now} host{h}: {ev}"));
                }
                return;
            }
        };
        match out {
            ClientOutput::Reply { conn, reply } => {
                self.trace.add(&[20, h.index() as u8]);
                self.trace.add(reply.as_bytes());
                self.stats.replies += 1;
                match self.hosts[h.index()].conns.remove(&conn) {
                    Some(idx) => submit::finish(
                        self,
                        idx,
                        Outcome::Reply {
                            bytes: reply.as_bytes().to_vec(),
                            at: now,
                        },
                    ),
                    None => self.inv.violate(
                        now,
                        format!("host {h}: reply on unknown connection {}", conn.0),
                    ),
                }
                closed.push(conn);
            }
            ClientOutput::Close { conn, reason } => {
                if let Some(idx) = self.hosts[h.index()].conns.remove(&conn) {
                    submit::finish(self, idx, Outcome::Closed(reason.to_string()));
                }
                closed.push(conn);
            }
            // The kernel has no simulated devices, so it never asks about them.
            ClientOutput::Netlink(_) | ClientOutput::KernelTimeout { .. } => {}
        }
    }

    /// The source the host's routing picks for `dest` ([`fabric::route_source`]).
    fn route(&self, h: HostId, dest: IpAddr) -> Result<IpAddr, u8> {
        let host = &self.spec.hosts[h.index()];
        fabric::route_with_default(
            host.ips.iter().map(|ip| (ip.addr, ip.prefix)),
            host.default_route,
            dest,
        )
    }

    /// A UD send: to every QP attached to the group (multicast), or to the QP the AV
    /// names (unicast), if the partitions, Q_Key and ports allow
    /// ([`fabric::ud_delivery`]); each copy then meets the link's faults.
    ///
    /// Returns how long after now the MAD is off the wire (`[nic] send_ns`; zero by
    /// default).
    fn ud_send(&mut self, h: HostId, ep: EndpointId, av: &AddressVector, mad: &Mad) -> Duration {
        self.stats.acm_mads += 1;
        let Some((grh, targets)) = self.receivers(h, ep, av) else {
            return Duration::ZERO;
        };
        let depart = match self.hosts[h.index()].qps.get(&ep) {
            Some(qp) => {
                let port = qp.port;
                self.tx_depart(h, port)
            }
            None => Duration::ZERO,
        };
        self.inv.on_acm_send(self.now, h, &mad.0);
        let payload = Rc::new(UdPayload {
            grh,
            mad: mad.0,
            digest: super::trace::digest(&mad.0),
            requester: self.inv.requester(&mad.0),
        });
        // On fault-free links every copy arrives once, after the link's latency, and no
        // random draw is made: a multicast's copies due at one instant go in one
        // fan-out entry.
        if matches!(targets, Receivers::Members { .. })
            && self.faults.perfect()
            && targets.iter().nth(1).is_some()
        {
            self.schedule_fanouts(&payload, &targets, depart);
            return depart;
        }
        for r in targets.iter() {
            let (t, inc) = (r.target, r.inc);
            let base = depart + self.spec.latency(h, t.host);
            for delay in self.faults.judge(h, t.host, base) {
                let ev = Event::Ud {
                    host: t.host,
                    inc,
                    ep: t.ep,
                    wc: t.wc,
                    payload: Rc::clone(&payload),
                };
                self.schedule(self.now + delay, ev);
            }
        }
        depart
    }

    /// The kernel takes an SA MAD: rewrite the TID's upper half with the agent id, send
    /// the first try, and start its timeout.
    fn sa_send(&mut self, h: HostId, port: PortRef, send: &SaSend) {
        let SaSend {
            tid,
            dest,
            timeout_ms,
            retries,
            ref mad,
            ..
        } = *send;
        let hdr = MadHeaderPacket::new_unchecked(&mad.0[..]);
        let attr = hdr.attr_id();
        match attr {
            AttrId::PATH_RECORD => self.stats.sa_path_queries += 1,
            AttrId::MC_MEMBER_RECORD => self.stats.sa_joins += 1,
            _ => self.stats.sa_other += 1,
        }
        // A response (the ReportResp of an SA Report) expects no answer: the kernel sends
        // it once, with its TID as it is, and forgets it.
        if hdr.method().is_response() {
            self.sa_oneway(h, port, dest.dlid, mad.0);
            return;
        }
        // Subscriptions (docs/protocol/sa.md §9) go outside `sa_depth` (a renewal may
        // send one while an older one is still in the kernel's hands).
        let credited = |u: &&UmadSend| {
            MadHeaderPacket::new_unchecked(&u.mad[..]).attr_id() != AttrId::INFORM_INFO
        };
        let outstanding = self.hosts[h.index()]
            .umad
            .values()
            .filter(|u| u.port == port)
            .filter(credited)
            .count() as u32;
        if attr != AttrId::INFORM_INFO && outstanding >= self.hosts[h.index()].sa_depth {
            self.inv.violate(
                self.now,
                format!(
                    "host {h}: {} SA MADs outstanding with sa_depth {}",
                    outstanding + 1,
                    self.hosts[h.index()].sa_depth
                ),
            );
        }
        let low = tid as u32;
        if self.hosts[h.index()].umad.keys().any(|&t| t as u32 == low) {
            self.inv.violate(
                self.now,
                format!("host {h}: SA TID {low:#x} reused while in flight"),
            );
        }
        let (full, mut send) = UmadSend::new(
            self.hosts[h.index()].agent,
            port,
            tid,
            dest.dlid,
            timeout_ms,
            retries,
            mad.0,
        );
        // The kernel's timer belongs to the send, not to its TID: an engine sends a MAD
        // again with the same TID after a BUSY answer, and the earlier send's timers,
        // still scheduled, must not time the new one out. Each send numbers its tries
        // from where the host's previous send stopped, so those timers are stale.
        let host = &mut self.hosts[h.index()];
        send.attempt = host.next_try;
        host.next_try = host.next_try.wrapping_add(retries.saturating_add(1));
        host.umad.insert(full, send);
        self.sa_try(h, full);
    }

    /// A MAD the kernel sends once without waiting for an answer (a ReportResp).
    fn sa_oneway(&mut self, h: HostId, port: PortRef, dlid: u16, mad: [u8; MAD_LEN]) {
        let up = self.topo.port(port).is_some_and(|p| p.up);
        let Some((smh, _)) = self.sm_host() else {
            return;
        };
        if !up {
            return;
        }
        let inc = self.hosts[h.index()].incarnation;
        let base = self.spec.latency(h, smh);
        for delay in self.faults.judge(h, smh, base) {
            let ev = Event::SaAtSm {
                host: h,
                inc,
                port,
                dlid,
                mad: Box::new(mad),
            };
            self.schedule(self.now + delay, ev);
        }
    }

    /// Reports `traps` to their subscribers (docs/protocol/sa.md §9), each Report
    /// repeated until acknowledged or [`crate::sa::REPORT_TRIES`] are spent.
    pub(crate) fn send_traps(&mut self, traps: Vec<acm_proto::notice::SmTrap>) {
        let Some((_, smp)) = self.sm_host() else {
            return;
        };
        let sm_gid = self.topo.port(smp).map(|p| p.gid).unwrap_or_default();
        for t in traps {
            for (tid, to, mad) in self.sa.trap(t, self.sm_lid, sm_gid, &self.topo) {
                self.report_send(tid, to, mad);
            }
        }
    }

    fn report_send(&mut self, tid: u64, to: PortRef, mad: [u8; MAD_LEN]) {
        let Some((smh, _)) = self.sm_host() else {
            return;
        };
        let base = us(self.spec.sm.response_us) + self.spec.latency(smh, to.host);
        for delay in self.faults.judge(smh, to.host, base) {
            self.schedule(
                self.now + delay,
                Event::Report {
                    port: to,
                    mad: Box::new(mad),
                },
            );
        }
        self.schedule(self.now + REPORT_RESP_WAIT, Event::ReportTimeout { tid });
    }

    /// A Report reaches its subscriber: the umad agent hands it to the engine.
    pub(crate) fn report_arrival(&mut self, port: PortRef, mad: &[u8; MAD_LEN]) {
        if !self.topo.port(port).is_some_and(|p| p.up) {
            return;
        }
        self.trace.add(&[18, port.host.index() as u8]);
        self.trace.add(mad);
        self.stats.sa_reports += 1;
        self.input(
            port.host,
            acm_engine::Input::SaResponse {
                port: engine_port(port),
                mad,
            },
        );
    }

    /// No ReportResp came in time: the SM sends the Report again, if it has tries left.
    pub(crate) fn report_timeout(&mut self, tid: u64) {
        if let Some((to, mad)) = self.sa.report_again(tid) {
            self.report_send(tid, to, mad);
        }
    }

    fn sa_try(&mut self, h: HostId, tid: u64) {
        let inc = self.hosts[h.index()].incarnation;
        let Some(u) = self.hosts[h.index()].umad.get(&tid).cloned() else {
            return;
        };
        let now = self.now;
        self.schedule(
            now + u.timeout,
            Event::UmadTimeout {
                host: h,
                inc,
                tid,
                attempt: u.attempt,
            },
        );
        let up = self.topo.port(u.port).is_some_and(|p| p.up);
        let Some((smh, _)) = self.sm_host() else {
            return;
        };
        if !up {
            return;
        }
        let base = self.tx_depart(h, u.port) + self.spec.latency(h, smh);
        for delay in self.faults.judge(h, smh, base) {
            let ev = Event::SaAtSm {
                host: h,
                inc,
                port: u.port,
                dlid: u.dlid,
                mad: u.mad.clone(),
            };
            self.schedule(now + delay, ev);
        }
    }

    pub(crate) fn sa_arrival(
        &mut self,
        h: HostId,
        inc: u32,
        port: PortRef,
        dlid: u16,
        mad: &[u8; MAD_LEN],
    ) {
        // A MAD addressed to a LID that is no longer the SM's goes nowhere.
        if dlid != self.sm_lid || self.sm_host().is_none() {
            return;
        }
        self.trace.add(&[6, h.index() as u8]);
        // An SA that is not up answers (or not) at once, whatever its limits.
        if self.spec.sa.is_unlimited() || self.sa.mode != SaMode::Up {
            return self.sa_serve(h, inc, port, mad);
        }
        let spec = self.spec.sa;
        match self
            .sa_server
            .admit(&spec, self.now, super::sa_server::kind(mad))
        {
            Admission::DoneAt(at) => {
                let ev = Event::SaServed {
                    host: h,
                    inc,
                    port,
                    mad: Box::new(*mad),
                };
                self.schedule(at, ev);
            }
            Admission::Overflow => {
                let busy = spec.overflow == SaOverflow::Busy;
                if let Some(resp) = self.sa.overflow(mad, busy) {
                    self.sa_reply(h, inc, port, resp);
                }
            }
        }
    }

    /// The SA answers a request now (its turn has come, or it has no queue).
    pub(crate) fn sa_serve(&mut self, h: HostId, inc: u32, port: PortRef, mad: &[u8; MAD_LEN]) {
        let answer = self.sa.answer(&self.topo, port, mad);
        // Groups the request created or deleted are reported to their subscribers.
        let traps = self.sa.take_traps();
        self.send_traps(traps);
        let Some(resp) = answer else {
            return;
        };
        self.sa_reply(h, inc, port, resp);
    }

    /// The SA's answer leaves for host `h`: it arrives after `sm.response_us` and the
    /// link's latency.
    fn sa_reply(&mut self, h: HostId, inc: u32, port: PortRef, resp: [u8; MAD_LEN]) {
        let Some((smh, _)) = self.sm_host() else {
            return;
        };
        let base = us(self.spec.sm.response_us) + self.spec.latency(smh, h);
        for delay in self.faults.judge(smh, h, base) {
            self.schedule(
                self.now + delay,
                Event::SaBack {
                    host: h,
                    inc,
                    port,
                    mad: Box::new(resp),
                },
            );
        }
    }

    pub(crate) fn sa_back(&mut self, h: HostId, inc: u32, port: PortRef, mad: [u8; MAD_LEN]) {
        if self.hosts[h.index()].incarnation != inc {
            return;
        }
        let tid = fabric::mad_tid(&mad);
        // The kernel matches the response to its send; a late or duplicate one is dropped.
        if self.hosts[h.index()].umad.remove(&tid).is_none() {
            return;
        }
        self.trace.add(&[7, h.index() as u8]);
        self.trace.add(&mad);
        self.input(
            h,
            acm_engine::Input::SaResponse {
                port: engine_port(port),
                mad: &mad,
            },
        );
    }

    pub(crate) fn umad_timeout(&mut self, h: HostId, inc: u32, tid: u64, attempt: u32) {
        if self.hosts[h.index()].incarnation != inc {
            return;
        }
        let Some(u) = self.hosts[h.index()].umad.get_mut(&tid) else {
            return;
        };
        match u.expire(attempt) {
            UmadExpiry::Stale => return,
            UmadExpiry::Retry => {
                self.stats.umad_retries += 1;
                self.sa_try(h, tid);
                return;
            }
            UmadExpiry::Failed => self.stats.umad_timeouts += 1,
        }
        let port = u.port;
        self.hosts[h.index()].umad.remove(&tid);
        self.trace.add(&[8, h.index() as u8]);
        self.input(
            h,
            acm_engine::Input::SaSendFailed {
                port: engine_port(port),
                tid,
                status: acm_proto::mad::UmadStatus::TIMED_OUT,
            },
        );
    }

    /// Records what a UD MAD arriving at host `h` teaches it (for the cache invariant).
    pub(crate) fn on_ud_arrival(&mut self, h: HostId, payload: &UdPayload) {
        let hosts = self.hosts.len();
        match payload.requester {
            Some(id) => self.inv.learn_number(h, hosts, id, self.now),
            None => self.inv.on_acm_arrival(self.now, h, hosts, &payload.mad),
        }
    }
}
