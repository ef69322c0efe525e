//! The core daemon's decisions (the reference's `acm.c`): devices, ports, endpoints and
//! their addresses, client request validation and dispatch, the per-port SA agent, global
//! counters, and the kernel netlink path. Provider-specific resolution lives behind
//! [`crate::provider::Provider`].
//!
//! The core decides; it never calls a provider. What a provider must be told comes
//! back to [`crate::Engine`] as a [`ProviderCall`] (or a [`Plan`] of them), and the
//! engine makes the call (see `provider_call.rs`).

mod client;
mod kernel_wait;
mod netlink;
mod provider_call;
mod queries;
mod reconfigure;
mod sa_agent;
mod sa_control;
mod sa_flow;
mod sm_events;
mod topology;

use crate::counters::Counters;
use crate::device::{DeviceId, PortAttrs, PortId};
use crate::fxhash::SeqHashMap;
use crate::io::{ClientOutput, ConnId, EndpointId, FabricOp, HostOutput, LookupId, Output, Reply};
use crate::log::{Level, LogEvent, log};
use crate::request::{Outcome, PendingReply, ReplyKind, ReplyTo};

use crate::time::Instant;
use crate::{EngineConfig, Limits};
use acm_proto::Gid;
use acm_proto::client::{ENTRY_LEN, HEADER_LEN, HeaderRepr, Status};
use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;

pub(crate) use client::{
    DestEntries, ParkedResolve, ResolveShape, dest_entries, entry_addr, resolve_shape,
};
pub(crate) use provider_call::{Call, Plan, ProviderCall, Step};
pub(crate) use sa_agent::SaAgent;
pub(crate) use sm_events::is_sub_tid;

/// A local address on an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalAddr {
    pub(crate) addr: crate::Address,
    /// What EP_QUERY shows: the name as written, `a.b.c.d/len`, or a bare IP.
    pub(crate) display: String,
    /// Whether it came from the host (an IP) rather than the address file.
    pub(crate) system: bool,
}

/// An endpoint: one (port, pkey) with at least one address.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) port: PortId,
    pub(crate) pkey: u16,
    pub(crate) addrs: Vec<LocalAddr>,
    pub(crate) provider: usize,
}

/// A port and what the core knows of it.
#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub(crate) num: u8,
    pub(crate) attrs: PortAttrs,
    pub(crate) active: bool,
    /// Index of the provider serving it, when it is active and has one.
    pub(crate) provider: Option<usize>,
    /// Endpoints in walk order (newest first, as the reference pushes on the front).
    pub(crate) endpoints: Vec<EndpointId>,
    /// A client-reregister that arrived while the port was down.
    pub(crate) rereg_pending: bool,
    pub(crate) sa: SaAgent,
    /// Its SA event subscriptions (docs/protocol/sa.md §9).
    pub(crate) sm: sm_events::SmSubs,
}

/// A device.
#[derive(Debug, Clone)]
pub(crate) struct Device {
    pub(crate) id: DeviceId,
    pub(crate) name: String,
    pub(crate) guid: u64,
    pub(crate) ports: Vec<Port>,
    /// Providers that have had `open_device` for it.
    pub(crate) opened_by: Vec<usize>,
}

/// Book-keeping for one open client connection.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnState {
    /// Distinguishes this connection from earlier ones with the same id.
    pub(crate) epoch: u64,
    /// Requests in a provider's hands or waiting for a source lookup.
    pub(crate) pending: u32,
}

/// Everything but the providers, so a provider can borrow it mutably as its context.
pub(crate) struct Core {
    pub(crate) now: Instant,
    pub(crate) config: EngineConfig,
    pub(crate) log_level: Level,
    pub(crate) out: VecDeque<Output>,
    pub(crate) counters: Counters,
    /// What the providers' lookup bounds did ([`crate::Engine::lookup_counters`]).
    pub(crate) lookup_counters: crate::LookupCounters,
    pub(crate) tid: u32,
    /// The next TID of an SA event subscription (bit 31 set, docs/protocol/sa.md §9).
    pub(crate) sub_tid: u32,
    /// The engine's random stream (splitmix64 state, from the seed): the jitter of
    /// SA back-offs.
    pub(crate) rng: u64,
    /// Devices in discovery order (walks go in reverse).
    pub(crate) devices: Vec<Device>,
    /// Every endpoint ever made, by id; `None` once closed.
    pub(crate) endpoints: Vec<Option<Endpoint>>,
    /// By id, kept in id order ([`crate::fxhash::SeqHasher`]).
    pub(crate) conns: SeqHashMap<ConnId, ConnState>,
    pub(crate) next_epoch: u64,
    pub(crate) lookups: BTreeMap<LookupId, ParkedResolve>,
    pub(crate) next_lookup: u64,
    /// Neighbour-table lookups in the fabric's hands, with the provider that asked.
    pub(crate) neighs: BTreeMap<crate::io::NeighId, usize>,
    pub(crate) next_neigh: u64,
    /// IPoIB addresses the host has, in discovery order.
    pub(crate) local_ips: Vec<crate::io::LocalIp>,
    /// Provider names, by index, for EP_QUERY.
    pub(crate) provider_names: Vec<String>,
    pub(crate) netlink_warned: bool,
    /// The kernel's requests not answered yet, with the deadline of each.
    pub(crate) kernel_waits: kernel_wait::KernelWaits,
    /// Replies providers dropped unanswered (debug builds log a warning).
    #[cfg(debug_assertions)]
    pub(crate) dropped: crate::request::DropCount,
}

impl Core {
    pub(crate) fn new(config: EngineConfig, seed: u64, now: Instant, names: Vec<String>) -> Self {
        let log_level = level_of(config.options.log_level);
        let kernel_waits = kernel_wait::KernelWaits::new();
        Self {
            now,
            config,
            log_level,
            out: VecDeque::new(),
            counters: Counters::default(),
            lookup_counters: crate::LookupCounters::default(),
            tid: first_tid(seed),
            sub_tid: sm_events::SUB_TID_BIT | 1,
            rng: seed ^ 0x5a5a_0ace_5eed_0001,
            devices: Vec::new(),
            endpoints: Vec::new(),
            conns: SeqHashMap::default(),
            next_epoch: 1,
            lookups: BTreeMap::new(),
            next_lookup: 1,
            neighs: BTreeMap::new(),
            next_neigh: 1,
            local_ips: Vec::new(),
            provider_names: names,
            netlink_warned: false,
            kernel_waits,
            #[cfg(debug_assertions)]
            dropped: crate::request::DropCount::default(),
        }
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.config.limits
    }

    pub(crate) fn log_enabled(&self, level: Level) -> bool {
        level <= self.log_level
    }

    #[inline]
    pub(crate) fn push_log(&mut self, ev: LogEvent) {
        self.out.push_back(Output::Host(HostOutput::Log(ev)));
    }

    #[inline]
    pub(crate) fn push_client(&mut self, out: ClientOutput) {
        self.out.push_back(Output::Host(HostOutput::Client(out)));
    }

    #[inline]
    pub(crate) fn push_fabric(&mut self, op: FabricOp) {
        self.out.push_back(Output::Fabric(op));
    }

    /// The next TID: a 32-bit counter in the low half of a BE64, never 0. Unlike the
    /// reference's signed counter (docs/reference-quirks.md §18) it wraps cleanly.
    pub(crate) fn next_tid(&mut self) -> u64 {
        let t = self.tid;
        self.tid = self.tid.wrapping_add(1).max(1);
        u64::from(t)
    }

    /// The next number of the engine's random stream (splitmix64).
    pub(crate) fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn device(&self, id: DeviceId) -> Option<&Device> {
        self.devices.iter().find(|d| d.id == id)
    }

    pub(crate) fn device_mut(&mut self, id: DeviceId) -> Option<&mut Device> {
        self.devices.iter_mut().find(|d| d.id == id)
    }

    pub(crate) fn port(&self, id: PortId) -> Option<&Port> {
        self.device(id.device)?
            .ports
            .iter()
            .find(|p| p.num == id.port)
    }

    pub(crate) fn port_mut(&mut self, id: PortId) -> Option<&mut Port> {
        port_in(&mut self.devices, id)
    }

    /// The ports for which `due` says a timer has fired (it may update the port as it
    /// looks), in device and port order; the caller then acts on each, which needs the
    /// whole core.
    pub(crate) fn ports_due(
        &mut self,
        mut due: impl FnMut(&mut Port) -> bool,
    ) -> alloc::vec::Vec<PortId> {
        let mut ids = alloc::vec::Vec::new();
        for d in &mut self.devices {
            for p in &mut d.ports {
                if due(p) {
                    ids.push(PortId {
                        device: d.id,
                        port: p.num,
                    });
                }
            }
        }
        ids
    }

    pub(crate) fn endpoint(&self, id: EndpointId) -> Option<&Endpoint> {
        self.endpoints.get(id.0 as usize)?.as_ref()
    }

    /// Active ports in the reference's walk order: devices newest first, ports
    /// ascending.
    pub(crate) fn active_ports(&self) -> impl Iterator<Item = (&Device, &Port)> {
        self.devices
            .iter()
            .rev()
            .flat_map(|d| d.ports.iter().filter(|p| p.active).map(move |p| (d, p)))
    }

    /// Builds and routes the reply of a pending request.
    pub(crate) fn complete(&mut self, reply: PendingReply, outcome: Outcome<'_>) {
        let resolve = reply.is_resolve();
        let mut buf = [0u8; REPLY_MAX];
        let (to, len, path, status) = reply.answer(outcome, &mut buf);
        if resolve {
            self.counters.count_status(status);
        }
        match to {
            ReplyTo::Client { conn, epoch } => {
                self.deliver(conn, epoch, Reply::from_array(buf, len));
            }
            ReplyTo::Kernel { nl_type, seq, ask } => {
                let path = if status == Status::SUCCESS {
                    path
                } else {
                    None
                };
                self.netlink_reply(nl_type, seq, ask, path);
            }
        }
    }

    /// A pending reply for a request handed to a provider.
    pub(crate) fn pending_reply(
        &self,
        to: ReplyTo,
        hdr: HeaderRepr,
        entry: Option<[u8; ENTRY_LEN]>,
        kind: ReplyKind,
    ) -> PendingReply {
        PendingReply::new(
            to,
            hdr,
            entry,
            kind,
            #[cfg(debug_assertions)]
            &self.dropped,
        )
    }

    /// Logs a warning for replies a provider dropped unanswered (debug builds).
    pub(crate) fn check_dropped_replies(&mut self) {
        #[cfg(debug_assertions)]
        {
            let n = self.dropped.replace(0);
            if n > 0 {
                log!(
                    self,
                    Level::Basic,
                    "acm_engine",
                    "warning: {n} request(s) dropped by a provider without an answer"
                );
            }
        }
    }

    /// The state of `conn` a new request belongs to: its life (a new one if it was
    /// closed) and how many of its requests wait, in one lookup.
    pub(crate) fn conn_state(&mut self, conn: ConnId) -> ConnState {
        let next = &mut self.next_epoch;
        *self.conns.entry(conn).or_insert_with(|| {
            *next += 1;
            ConnState {
                epoch: *next,
                pending: 0,
            }
        })
    }

    /// Whether the connection a request came on is still open.
    pub(crate) fn client_live(&self, conn: ConnId, epoch: u64) -> bool {
        self.conns.get(&conn).is_some_and(|s| s.epoch == epoch)
    }

    /// Hands a reply to a client that had a request in a provider's hands, unless that
    /// connection has gone (the reference logs "connection lost").
    pub(crate) fn deliver(&mut self, conn: ConnId, epoch: u64, reply: Reply) {
        match self.conns.get_mut(&conn) {
            Some(st) if st.epoch == epoch => {
                st.pending = st.pending.saturating_sub(1);
                self.push_client(ClientOutput::Reply { conn, reply });
            }
            _ => log!(
                self,
                Level::Verbose,
                "acm_resolve_response",
                "connection lost (client {})",
                conn.0
            ),
        }
    }

    /// The first endpoint with a local address matching `addr`
    /// (docs/protocol/client-messages.md §8.2, step 3).
    pub(crate) fn find_ep_by_addr(&self, addr: &crate::Address) -> Option<EndpointId> {
        for (_, port) in self.active_ports() {
            for &ep in &port.endpoints {
                if let Some(e) = self.endpoint(ep)
                    && e.addrs.iter().any(|a| a.addr.matches_local(addr))
                {
                    return Some(ep);
                }
            }
        }
        None
    }

    /// Whether a port owns `gid`.
    pub(crate) fn port_has_gid(port: &Port, gid: &Gid) -> bool {
        port.attrs.gids.iter().any(|g| g == gid)
    }

    /// Sends a neighbour-table lookup for `provider` (answered to it by
    /// [`crate::Engine`]'s dispatch of [`crate::Input::NeighAnswer`]).
    pub(crate) fn neigh_query(
        &mut self,
        provider: usize,
        port: crate::PortId,
        gid: Gid,
        pkey: u16,
        dest: core::net::IpAddr,
    ) -> crate::io::NeighId {
        let id = crate::io::NeighId(self.next_neigh);
        self.next_neigh += 1;
        self.neighs.insert(id, provider);
        self.push_fabric(FabricOp::NeighQuery(crate::io::NeighQuery {
            id,
            port,
            gid,
            pkey,
            dest,
        }));
        id
    }

    pub(crate) fn alloc_lookup(&mut self) -> LookupId {
        let id = LookupId(self.next_lookup);
        self.next_lookup += 1;
        id
    }

    /// IPoIB addresses known on `gid` in partition `pkey` (membership bit ignored).
    pub(crate) fn system_ips_for(&self, gids: &[Gid], pkey: u16) -> Vec<crate::io::LocalIp> {
        self.local_ips
            .iter()
            .filter(|ip| gids.contains(&ip.gid) && (ip.pkey | 0x8000) == (pkey | 0x8000))
            .cloned()
            .collect()
    }

    pub(crate) fn ip_display(ip: &crate::io::LocalIp) -> String {
        match ip.prefix_len {
            Some(len) => alloc::format!("{}/{}", ip.addr, len),
            None => alloc::format!("{}", ip.addr),
        }
    }

    pub(crate) fn ip_known(&self, addr: &IpAddr) -> bool {
        self.local_ips.iter().any(|i| &i.addr == addr)
    }
}

/// The engine's log level for the `log_level` option.
pub(crate) const fn level_of(log_level: i32) -> Level {
    match log_level {
        i32::MIN..=0 => Level::Basic,
        1 => Level::Config,
        _ => Level::Verbose,
    }
}

/// The largest reply a pending request becomes: a path and the echoed source (the size
/// a [`Reply`] keeps inline, so that it is built in place).
const REPLY_MAX: usize = HEADER_LEN + 2 * ENTRY_LEN;

/// The TID counter's first value. Seed 0 starts at 1, as the reference does; other
/// Port `id` among `devices` (a borrow of the devices alone, so the options can be
/// read beside it).
pub(crate) fn port_in(devices: &mut [Device], id: PortId) -> Option<&mut Port> {
    devices
        .iter_mut()
        .find(|d| d.id == id.device)?
        .ports
        .iter_mut()
        .find(|p| p.num == id.port)
}

/// seeds start elsewhere so that a restarted engine does not reuse the TIDs its previous
/// life had in flight.
fn first_tid(seed: u64) -> u32 {
    if seed == 0 {
        return 1;
    }
    // splitmix64 finaliser, low 24 bits: keeps TIDs readable and far from wrapping.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z & 0x00FF_FFFF) as u32).max(1)
}
