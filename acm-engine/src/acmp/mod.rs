//! `ibacmp`, the built-in provider (the reference's `acmp.c`): ACM multicast address
//! resolution between daemons, SA PathRecord routes, multicast joins, the destination
//! cache, retries and credits, loopback and preloaded entries.
//!
//! Requests for one destination share one resolution (coalescing); the only other
//! serialization is the reference's credits (`resolve_depth`, `send_depth`), which are
//! options, not built-in limits. Address lookups take those credits in fair turns
//! across clients, bounded per client and for NODELAY warm-ups, and are cancelled when
//! nobody waits for them any more (`fair.rs`).

mod dest;
mod endpoint;
mod fair;
mod neigh;
mod path_av;
mod preload;
mod protocol;
mod resolve;
mod sa;

use crate::EngineConfig;
use crate::addr::Address;
use crate::config::{AddrPreload, HostEntry, LoopbackProt, RouteData, RoutePreload, RouteProt};
use crate::counters::Counters;
use crate::device::{DeviceDesc, PortAttrs, PortId};
use crate::io::{EndpointId, McastGroup, RecvInfo, SendToken};
use crate::log::{Level, log};
use crate::provider::{Ctx, Outcome, PendingReply, Provider, Resolve};
use crate::time::Instant;
use acm_proto::client::Status;
use acm_proto::mad::UmadStatus;
use acm_proto::{Mtu, Rate};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use endpoint::Ep;

pub(crate) use dest::{CHUNK, Dest, DestCache, DestState};

/// The options ibacmp reads (docs/ibacmp.md §6).
#[derive(Debug, Clone)]
struct AcmpOptions {
    addr_prot: crate::config::AddrProts,
    addr_timeout: i32,
    route_timeout: i32,
    route_acm: bool,
    loopback_local: bool,
    timeout_ms: u32,
    /// `acm_timeout_max`: the ceiling of the adaptive ACM retry wait (0: off).
    acm_timeout_max_ms: u32,
    retries: u32,
    resolve_depth: u32,
    max_pending_per_client: usize,
    max_background_resolves: usize,
    send_depth: u32,
    recv_depth: u32,
    min_mtu: Mtu,
    min_rate: Rate,
    route_preload: bool,
    addr_preload: bool,
    queued_per_dest: usize,
    /// The entries an endpoint's destination cache may hold: `max_dest_cache_bytes`
    /// over what one entry costs at most (`dest::entry_limit`).
    dest_limit: usize,
    send_queue: usize,
    route_data_file: alloc::string::String,
    addr_data_file: alloc::string::String,
}

/// What an SA MAD of ours was for.
#[derive(Debug)]
enum SaWhat {
    /// Joining group `group` of endpoint `ep`.
    Join { ep: EndpointId, group: usize },
    /// The route to a destination; `respond` is the TID of the peer's request to answer
    /// once the route is known (only when that request was addressed to us).
    Route {
        ep: EndpointId,
        dest: Address,
        respond: Option<u64>,
    },
    /// A client's QUERY_SA.
    Query { reply: PendingReply, path: [u8; 64] },
}

/// What a timer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// An ACM request's retransmission or final timeout.
    Retry { ep: EndpointId, tid: u64 },
    /// Retrying failed multicast joins.
    Join { ep: EndpointId },
    /// Asking the neighbour table again for neighbour lookup `wait`.
    Neigh { wait: u64 },
    /// Neighbour lookup `wait`'s last chance of an answer.
    NeighGiveUp { wait: u64 },
}

/// The built-in provider.
pub struct Acmp {
    opts: AcmpOptions,
    hosts: Vec<HostEntry>,
    route_data: Option<RouteData>,
    ports: BTreeMap<PortId, PortAttrs>,
    eps: BTreeMap<EndpointId, Ep>,
    sa: BTreeMap<(PortId, u32), SaWhat>,
    timers: BTreeMap<(Instant, u64), Timer>,
    timer_seq: u64,
    next_token: u64,
    /// Neighbour lookups under way, by number (`neigh.rs`).
    neigh_waits: BTreeMap<u64, neigh::NeighWait>,
    /// The lookup each neighbour question in the fabric's hands serves.
    neigh_ids: BTreeMap<crate::NeighId, u64>,
    next_neigh_wait: u64,
    /// What each client connection waits on (`fair.rs`).
    clients: fair::Clients,
}

/// How long to wait before retrying a failed join.
const JOIN_RETRY: core::time::Duration = core::time::Duration::from_secs(10);

impl Acmp {
    /// `provider` if it is the built-in `ibacmp` (the engine publishes its caches for
    /// the daemon's worker threads: [`crate::CacheView`]).
    pub(crate) fn of(provider: &mut dyn Provider) -> Option<&mut Self> {
        provider.as_any_mut()?.downcast_mut::<Self>()
    }

    /// The provider as configured by the options file and the preload data.
    #[must_use]
    pub fn new(config: &EngineConfig) -> Self {
        let o = &config.options;
        let opts = AcmpOptions {
            addr_prot: o.addr_prot,
            addr_timeout: o.addr_timeout,
            route_timeout: o.route_timeout,
            route_acm: o.route_prot == RouteProt::Acm,
            loopback_local: o.loopback_prot == LoopbackProt::Local,
            timeout_ms: o.timeout_ms,
            acm_timeout_max_ms: o.acm_timeout_max_ms,
            retries: o.retries,
            resolve_depth: o.resolve_depth.max(1),
            max_pending_per_client: o.max_pending_per_client as usize,
            max_background_resolves: o.max_background_resolves as usize,
            send_depth: o.send_depth.max(1),
            recv_depth: o.recv_depth,
            min_mtu: o.min_mtu,
            min_rate: o.min_rate,
            route_preload: o.route_preload == RoutePreload::OpensmFullV1,
            addr_preload: o.addr_preload == AddrPreload::AcmHosts,
            queued_per_dest: config.limits.queued_per_dest,
            dest_limit: dest::entry_limit(o.max_dest_cache_bytes),
            send_queue: config.limits.send_queue,
            route_data_file: o.route_data_file.clone(),
            addr_data_file: o.addr_data_file.clone(),
        };
        Self {
            opts,
            hosts: config.hosts.clone(),
            route_data: config.route_data.clone(),
            ports: BTreeMap::new(),
            eps: BTreeMap::new(),
            sa: BTreeMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            next_token: 1,
            neigh_waits: BTreeMap::new(),
            neigh_ids: BTreeMap::new(),
            next_neigh_wait: 1,
            clients: fair::Clients::default(),
        }
    }

    /// The minute an address or route set now expires (`u64::MAX`-like for -1): the
    /// reference adds the option as an unsigned 32-bit number of minutes.
    fn expiry(now: Instant, minutes: i32) -> u64 {
        now.as_minutes() + u64::from(minutes as u32)
    }

    fn set_timer(&mut self, at: Instant, t: Timer) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), t);
    }

    fn token(&mut self) -> SendToken {
        let t = SendToken(self.next_token);
        self.next_token += 1;
        t
    }

    /// The endpoints on `port`.
    fn eps_on(&self, port: PortId) -> Vec<EndpointId> {
        self.eps
            .iter()
            .filter(|(_, e)| e.port == port)
            .map(|(&i, _)| i)
            .collect()
    }

    /// Answers a request and counts its status on the endpoint.
    fn finish(ep: Option<&mut Ep>, cx: &mut Ctx<'_>, reply: PendingReply, outcome: Outcome<'_>) {
        if let (Some(ep), Outcome::Failed(status)) = (ep, outcome) {
            ep.counters.count_status(status);
        }
        cx.complete(reply, outcome);
    }

    /// Fails every request waiting on an endpoint's destinations (it is going away).
    fn fail_endpoint(&mut self, cx: &mut Ctx<'_>, id: EndpointId, status: Status) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let replies = fair::take_all_queues(&mut self.clients, id, ep);
        for r in replies {
            Self::finish(Some(ep), cx, r, Outcome::Failed(status));
        }
    }

    /// Endpoint `id`'s state (whether it answers resolves: ready) and destination
    /// cache, for the engine's published cache view (`crate::view`).
    pub(crate) fn view_endpoint(&mut self, id: EndpointId) -> Option<(bool, &mut DestCache)> {
        let ep = self.eps.get_mut(&id)?;
        Some((ep.state == endpoint::EpState::Ready, &mut ep.dests))
    }

    /// Counts `hits` cache hits answered from the published view on endpoint `id`, as
    /// `resolve_request` and `check_ready` count one of their own.
    pub(crate) fn count_view_hits(&mut self, id: EndpointId, hits: u64) {
        if let Some(ep) = self.eps.get_mut(&id) {
            ep.counters.add(crate::Counter::Resolve, hits);
            ep.counters.add(crate::Counter::RouteCache, hits);
        }
    }

    fn drop_endpoint(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        self.fail_endpoint(cx, id, Status::ENODATA);
        let Some(ep) = self.eps.remove(&id) else {
            return;
        };
        if let Some(g) = ep.groups.first()
            && g.attached
        {
            cx.mcast_detach(McastGroup {
                ep: id,
                mgid: g.mgid,
                mlid: g.mlid,
            });
        }
        cx.close_qp(id);
        self.timers.retain(|_, t| match t {
            Timer::Retry { ep, .. } | Timer::Join { ep } => *ep != id,
            // Its lookup is dropped below; the timer then finds nothing to do.
            Timer::Neigh { .. } | Timer::NeighGiveUp { .. } => true,
        });
        self.neigh_waits.retain(|_, w| w.ep != id);
        self.sa.retain(|_, w| match w {
            SaWhat::Join { ep, .. } | SaWhat::Route { ep, .. } => *ep != id,
            SaWhat::Query { .. } => true,
        });
    }
}

impl Provider for Acmp {
    fn name(&self) -> &str {
        "ibacmp"
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }

    /// Takes the options a reload may change (`crate::config::reload`); the depths,
    /// protocols and preloads that shaped the open endpoints stay. A lowered
    /// `max_dest_cache_bytes` evicts the entries over it at once.
    fn reconfigure(&mut self, cx: &mut Ctx<'_>, o: &crate::config::Options) {
        self.opts.timeout_ms = o.timeout_ms;
        self.opts.retries = o.retries;
        self.opts.addr_prot = o.addr_prot;
        self.opts.acm_timeout_max_ms = o.acm_timeout_max_ms;
        self.opts.addr_timeout = o.addr_timeout;
        self.opts.route_timeout = o.route_timeout;
        self.opts.max_pending_per_client = o.max_pending_per_client as usize;
        self.opts.max_background_resolves = o.max_background_resolves as usize;
        let limit = dest::entry_limit(o.max_dest_cache_bytes);
        if limit != self.opts.dest_limit {
            self.opts.dest_limit = limit;
            let evicted: usize = self.eps.values_mut().map(|ep| ep.shrink_dests(limit)).sum();
            log!(
                cx,
                Level::Basic,
                "acmp_reconfigure",
                "destination caches hold at most {limit} entries each now; {evicted} evicted"
            );
        }
    }

    fn start(&mut self, cx: &mut Ctx<'_>) {
        let o = &self.opts;
        let lines = [
            // The reference's line says 0 for its only protocol, ACM; other lists are
            // named as the file spells them.
            if o.addr_prot == crate::config::AddrProts::default() {
                alloc::format!("address resolution {}", 0)
            } else {
                alloc::format!("address resolution {}", o.addr_prot)
            },
            alloc::format!("address timeout {}", o.addr_timeout),
            alloc::format!("route resolution {}", if o.route_acm { 0 } else { 1 }),
            alloc::format!("route timeout {}", o.route_timeout),
            alloc::format!("loopback resolution {}", u8::from(o.loopback_local)),
            alloc::format!("timeout {} ms", o.timeout_ms),
            alloc::format!("retries {}", o.retries),
            alloc::format!("resolve depth {}", o.resolve_depth),
            // Ours: the bounds on what one client and NODELAY can start, and on each
            // endpoint's cache.
            alloc::format!("maximum pending per client {}", o.max_pending_per_client),
            alloc::format!("maximum background resolves {}", o.max_background_resolves),
            alloc::format!("destination cache entries per endpoint {}", o.dest_limit),
            alloc::format!("send depth {}", o.send_depth),
            alloc::format!("receive depth {}", o.recv_depth),
            alloc::format!("minimum mtu {}", o.min_mtu.0),
            alloc::format!("minimum rate {}", o.min_rate.0),
            alloc::format!("route preload {}", u8::from(o.route_preload)),
            alloc::format!("route data file {}", o.route_data_file),
            alloc::format!("address preload {}", u8::from(o.addr_preload)),
            alloc::format!("address data file {}", o.addr_data_file),
        ];
        for message in lines {
            cx.push_log(crate::log::LogEvent {
                level: Level::Basic,
                origin: "acmp_log_options",
                message,
            });
        }
    }

    fn close_device(&mut self, cx: &mut Ctx<'_>, dev: crate::DeviceId) {
        log!(
            cx,
            Level::Basic,
            "acmp_close_dev",
            "device {} closed",
            dev.0
        );
    }

    fn open_device(&mut self, cx: &mut Ctx<'_>, dev: &DeviceDesc) {
        log!(
            cx,
            Level::Basic,
            "acmp_open_dev",
            "dev_guid {:#x} {}",
            dev.guid,
            dev.name
        );
    }

    fn open_port(&mut self, cx: &mut Ctx<'_>, port: PortId, attrs: &PortAttrs) {
        let old = self.ports.insert(port, attrs.clone());
        let Some(old) = old else {
            log!(cx, Level::Basic, "acmp_port_up", "port {} is up", port.port);
            return;
        };
        if old.lid != attrs.lid || old.sm_lid != attrs.sm_lid || old.gids != attrs.gids {
            self.port_changed(cx, port);
        }
    }

    fn close_port(&mut self, cx: &mut Ctx<'_>, port: PortId) {
        let ids = self.eps_on(port);
        for id in ids {
            self.drop_endpoint(cx, id);
        }
        // Client queries in flight on the port fail too.
        let keys: Vec<(PortId, u32)> = self
            .sa
            .keys()
            .filter(|(p, _)| *p == port)
            .copied()
            .collect();
        for k in keys {
            if let Some(SaWhat::Query { reply, .. }) = self.sa.remove(&k) {
                cx.complete(reply, Outcome::Failed(Status::ENODATA));
            }
        }
        self.ports.remove(&port);
    }

    fn open_endpoint(&mut self, cx: &mut Ctx<'_>, id: EndpointId, port: PortId, pkey: u16) {
        self.open_ep(cx, id, port, pkey);
    }

    fn close_endpoint(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        self.drop_endpoint(cx, id);
    }

    fn add_address(&mut self, cx: &mut Ctx<'_>, id: EndpointId, addr: &Address) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        ep.addrs.insert(*addr);
        if self.opts.loopback_local {
            self.add_loopback(cx, id, addr);
        }
    }

    fn remove_address(&mut self, cx: &mut Ctx<'_>, id: EndpointId, addr: &Address) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        ep.addrs.remove(addr);
        if self.opts.loopback_local
            && let Some(i) = ep.dests.find(addr)
        {
            if let Some(mut d) = ep.dests.remove(i) {
                ep.unlink_waiting(i, &d.addr);
                let queue = fair::take_queue(&mut self.clients, id, i, &mut d);
                for r in queue {
                    Self::finish(Some(ep), cx, r, Outcome::Failed(Status::ENODATA));
                }
            }
            log!(
                cx,
                Level::Verbose,
                "acmp_remove_addr",
                "removed loopback dest {addr}"
            );
        }
    }

    fn resolve(&mut self, cx: &mut Ctx<'_>, id: EndpointId, req: Resolve, reply: PendingReply) {
        self.resolve_request(cx, id, req, reply);
    }

    fn query(&mut self, cx: &mut Ctx<'_>, id: EndpointId, path: &[u8; 64], reply: PendingReply) {
        self.sa_query(cx, id, path, reply);
    }

    fn client_reregister(&mut self, cx: &mut Ctx<'_>, port: PortId) {
        let ids = self.eps_on(port);
        for id in ids {
            self.rejoin(cx, id);
        }
    }

    fn sm_event(&mut self, cx: &mut Ctx<'_>, port: PortId, event: &acm_proto::notice::SmTrap) {
        self.sm_trap(cx, port, event);
    }

    fn client_closed(&mut self, cx: &mut Ctx<'_>, conn: crate::ConnId) {
        self.close_client(cx, conn);
    }

    fn perf(&self, id: EndpointId) -> Option<Counters> {
        self.eps.get(&id).map(|e| e.counters)
    }

    fn cache_stats(&self, id: EndpointId) -> Option<crate::CacheStats> {
        let ep = self.eps.get(&id)?;
        let mut s = crate::CacheStats {
            limit: self.opts.dest_limit,
            evictions: ep.dests.evictions(),
            ..crate::CacheStats::default()
        };
        for d in ep.dests.iter() {
            *match d.state {
                DestState::Init => &mut s.init,
                DestState::QueryAddr => &mut s.query_addr,
                DestState::AddrResolved => &mut s.addr_resolved,
                DestState::QueryRoute => &mut s.query_route,
                DestState::Ready => &mut s.ready,
            } += 1;
        }
        Some(s)
    }

    fn qp_opened(&mut self, cx: &mut Ctx<'_>, id: EndpointId, result: Result<u32, ()>) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        match result {
            Ok(qpn) => {
                ep.qpn = Some(qpn);
                // Loopback entries name our own QP.
                let addrs = ep.addrs.clone();
                for a in addrs.iter() {
                    if let Some(i) = ep.dests.find(a)
                        && let Some(d) = ep.dests.get_mut(i)
                    {
                        d.remote_qpn = qpn;
                    }
                }
            }
            Err(()) => {
                log!(
                    cx,
                    Level::Basic,
                    "acmp_open_endpoint",
                    "could not create the QP for pkey {:#06x}",
                    ep.pkey
                );
            }
        }
    }

    fn ud_receive(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        wc: &RecvInfo,
        grh: Option<&[u8]>,
        mad: &[u8],
    ) {
        self.receive(cx, id, wc, grh, mad);
    }

    fn ud_send_done(&mut self, cx: &mut Ctx<'_>, id: EndpointId, token: SendToken, ok: bool) {
        self.send_done(cx, id, token, ok);
    }

    fn sa_response(
        &mut self,
        cx: &mut Ctx<'_>,
        port: PortId,
        tid: u64,
        result: Result<&[u8], UmadStatus>,
    ) {
        self.sa_answer(cx, port, tid, result);
    }

    fn neigh_answer(&mut self, cx: &mut Ctx<'_>, id: crate::NeighId, result: crate::NeighResult) {
        self.neigh_answered(cx, id, result);
    }

    fn handle_timeout(&mut self, cx: &mut Ctx<'_>) {
        let now = cx.now();
        while let Some((&(at, seq), &t)) = self.timers.first_key_value() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, seq));
            match t {
                Timer::Retry { ep, tid } => self.retry_due(cx, ep, tid, at),
                Timer::Join { ep } => self.join_retry_due(cx, ep, at),
                Timer::Neigh { wait } => self.neigh_poll_due(cx, wait),
                Timer::NeighGiveUp { wait } => self.neigh_give_up(cx, wait),
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first_key_value().map(|(&(at, _), _)| at)
    }
}
