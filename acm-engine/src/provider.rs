//! The provider interface: how a resolution strategy plugs into the core.
//!
//! It mirrors the reference's provider lifecycle (open/close device, port and endpoint;
//! add/remove address; resolve; query; port events; perf), turned sans-IO: every call
//! gets a [`Ctx`] through which the provider sends MADs, answers clients, counts and logs,
//! and the I/O results that belong to a provider (UD receives and completions, SA
//! responses, its own timers) are routed back to it by the engine's dispatch
//! (`engine.rs`), the one place a provider hook is called.

use crate::addr::Address;
use crate::core::Core;
use crate::counters::{Counter, Counters};
use crate::device::{DeviceDesc, PortAttrs, PortId};
use crate::io::{
    EndpointId, FabricOp, Mad, McastGroup, NeighId, NeighResult, OpenQp, RecvInfo, SendToken,
    UdSend,
};
use crate::log::{Level, LogEvent};
pub use crate::request::{Outcome, PendingReply, Resolve};
use crate::time::Instant;
use acm_proto::client::Status;
use acm_proto::mad::UmadStatus;

/// A resolution strategy. The built-in one is [`crate::acmp::Acmp`].
///
/// Only [`Provider::name`], [`Provider::resolve`] and [`Provider::query`] are required:
/// every other hook defaults to doing nothing, for providers that need no device state,
/// QPs, SA traffic or timers. A provider that takes requests must answer each
/// [`PendingReply`] exactly once, through [`Ctx::complete`], including those it still
/// holds when their endpoint, port or device closes.
pub trait Provider {
    /// The name EP_QUERY reports and `provider` lines in the options file select.
    fn name(&self) -> &str;

    /// Resolve for a client or the kernel; answer (now or later) with
    /// [`Ctx::complete`] exactly once.
    fn resolve(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, req: Resolve, reply: PendingReply);

    /// Verify a path with the SA (QUERY_SA); answer with [`Outcome::Query`].
    fn query(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, path: &[u8; 64], reply: PendingReply);

    /// The engine starts (the reference loads the provider here, and it logs its
    /// options).
    fn start(&mut self, _cx: &mut Ctx<'_>) {}

    /// A device was opened (called once, before its first port).
    fn open_device(&mut self, _cx: &mut Ctx<'_>, _dev: &DeviceDesc) {}

    /// A device went away (fatal error or removal); its ports were closed first.
    fn close_device(&mut self, _cx: &mut Ctx<'_>, _dev: crate::DeviceId) {}

    /// A port came up, or its attributes changed; `attrs` are current.
    fn open_port(&mut self, _cx: &mut Ctx<'_>, _port: PortId, _attrs: &PortAttrs) {}

    /// A port went down: fail everything in flight on it and forget its state.
    fn close_port(&mut self, _cx: &mut Ctx<'_>, _port: PortId) {}

    /// An endpoint (port, pkey) got its first address.
    fn open_endpoint(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId, _port: PortId, _pkey: u16) {}

    /// An endpoint lost its last address or its pkey; fail its requests and drop it.
    fn close_endpoint(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId) {}

    /// A local address was added to an endpoint.
    fn add_address(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId, _addr: &Address) {}

    /// A local address was removed from an endpoint.
    fn remove_address(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId, _addr: &Address) {}

    /// The port's SM was re-registered: rejoin the multicast groups.
    fn client_reregister(&mut self, _cx: &mut Ctx<'_>, _port: PortId) {}

    /// The SA reported an SM event on `port` (docs/protocol/sa.md §9; only with
    /// `sm_events yes`): a port GID came into or went out of service, or a multicast
    /// group was created or deleted. The core has acknowledged it; a provider that
    /// caches what the event makes stale drops it here.
    fn sm_event(&mut self, _cx: &mut Ctx<'_>, _port: PortId, _event: &acm_proto::notice::SmTrap) {}

    /// A client connection closed while it had requests in a provider's hands. Its
    /// replies would be dropped anyway (the core no longer delivers them); a provider
    /// may also stop the work only that client was waiting for, and drop the client's
    /// [`PendingReply`]s with [`Ctx::discard`].
    fn client_closed(&mut self, _cx: &mut Ctx<'_>, _conn: crate::ConnId) {}

    /// The per-endpoint counters, if the provider keeps any.
    fn perf(&self, _ep: EndpointId) -> Option<Counters> {
        None
    }

    /// The size of the endpoint's destination cache, if the provider has one (for
    /// monitoring: [`crate::Engine::endpoint_stats`]).
    fn cache_stats(&self, _ep: EndpointId) -> Option<crate::CacheStats> {
        None
    }

    /// The endpoint's QP exists (or not).
    fn qp_opened(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId, _result: Result<u32, ()>) {}

    /// A MAD arrived on an endpoint's QP.
    fn ud_receive(
        &mut self,
        _cx: &mut Ctx<'_>,
        _ep: EndpointId,
        _wc: &RecvInfo,
        _grh: Option<&[u8]>,
        _mad: &[u8],
    ) {
    }

    /// A UD send completed.
    fn ud_send_done(&mut self, _cx: &mut Ctx<'_>, _ep: EndpointId, _token: SendToken, _ok: bool) {}

    /// The answer to an SA MAD this provider sent: the response MAD, or umad's error.
    fn sa_response(
        &mut self,
        _cx: &mut Ctx<'_>,
        _port: PortId,
        _tid: u64,
        _result: Result<&[u8], UmadStatus>,
    ) {
    }

    /// The answer to a neighbour-table lookup this provider asked for with
    /// [`Ctx::neigh_query`].
    fn neigh_answer(&mut self, _cx: &mut Ctx<'_>, _id: NeighId, _result: NeighResult) {}

    /// Fire every timer due at `cx.now()`.
    fn handle_timeout(&mut self, _cx: &mut Ctx<'_>) {}

    /// The earliest instant a timer is due.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// The driver was told that work for a provider arrived from outside the engine
    /// ([`crate::Input::ProviderWake`]): a provider that runs threads of its own (a C
    /// plugin) queues their results and hands them to the core here, where it has a
    /// context. Sans-IO providers never need it.
    fn wake(&mut self, _cx: &mut Ctx<'_>) {}

    /// The options were reloaded: `options` are the ones the engine now runs with (only
    /// the options [`crate::config::reload`] calls live differ from before). A provider
    /// that copied options at creation takes the new values here.
    fn reconfigure(&mut self, _cx: &mut Ctx<'_>, _options: &crate::config::Options) {}

    /// The provider as [`core::any::Any`], so that the engine can recognise its
    /// built-in `ibacmp`: it publishes the caches of the endpoints that one serves to
    /// the daemon's worker threads ([`crate::CacheView`]); a provider's own cache (a
    /// plugin's) is not readable there, and its resolves always reach it. Only the
    /// built-in provider answers.
    #[doc(hidden)]
    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        None
    }
}

/// The core's services, lent to a provider for the duration of one call.
pub struct Ctx<'a> {
    pub(crate) core: &'a mut Core,
    pub(crate) provider: usize,
}

impl Ctx<'_> {
    /// The current time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// Asks for an endpoint's UD QP; the answer comes to [`Provider::qp_opened`].
    pub fn open_qp(&mut self, qp: OpenQp) {
        self.core.push_fabric(FabricOp::OpenQp(qp));
    }

    /// Destroys an endpoint's QP.
    pub fn close_qp(&mut self, ep: EndpointId) {
        self.core.push_fabric(FabricOp::CloseQp(ep));
    }

    /// Posts a UD send on the endpoint's QP; its completion comes to
    /// [`Provider::ud_send_done`].
    pub fn ud_send(&mut self, send: UdSend) {
        self.core.push_fabric(FabricOp::UdSend(send));
    }

    /// Attaches an endpoint's QP to a multicast group.
    pub fn mcast_attach(&mut self, group: McastGroup) {
        self.core.push_fabric(FabricOp::McastAttach(group));
    }

    /// Detaches an endpoint's QP from a multicast group.
    pub fn mcast_detach(&mut self, group: McastGroup) {
        self.core.push_fabric(FabricOp::McastDetach(group));
    }

    /// The next transaction id, shared by ACM requests and SA MADs
    /// (docs/protocol/acm-mad.md §7), as the BE64 value with the counter in the low 32
    /// bits.
    pub fn next_tid(&mut self) -> u64 {
        self.core.next_tid()
    }

    /// Sends an SA MAD on `port` through the core's umad agent, which applies `sa_depth`
    /// and the kernel timeout/retries. The answer comes to
    /// [`Provider::sa_response`] with the MAD's TID. Returns `Err(status)` when the port
    /// cannot send (down, or its SA queue is full).
    pub fn send_sa(&mut self, port: PortId, mad: Mad) -> Result<(), Status> {
        self.core.send_sa(self.provider, port, mad)
    }

    /// Asks the host's IPoIB neighbour table for `dest`'s hardware address on the
    /// interface of `port` (whose GID is `gid`) in partition `pkey`; the answer comes
    /// to [`Provider::neigh_answer`] with the returned id.
    pub fn neigh_query(
        &mut self,
        port: PortId,
        gid: acm_proto::Gid,
        pkey: u16,
        dest: core::net::IpAddr,
    ) -> NeighId {
        self.core.neigh_query(self.provider, port, gid, pkey, dest)
    }

    /// Answers a pending request. Counts the status globally (No Data / Error Count).
    pub fn complete(&mut self, reply: PendingReply, outcome: Outcome<'_>) {
        self.core.complete(reply, outcome);
    }

    /// Adds one to a global counter.
    pub fn count(&mut self, c: Counter) {
        self.core.counters.bump(c);
    }

    /// Adds one to a lookup-bound counter ([`crate::Engine::lookup_counters`]).
    pub fn count_lookup(&mut self, ev: crate::LookupEvent) {
        self.core.lookup_counters.bump(ev);
    }

    /// Drops a pending reply whose client connection has closed, without answering or
    /// counting it.
    pub fn discard(&mut self, reply: PendingReply) {
        reply.discard();
    }

    /// The current attributes of a port, if it is known.
    #[must_use]
    pub fn port_attrs(&self, port: PortId) -> Option<&PortAttrs> {
        self.core.port(port).map(|p| &p.attrs)
    }

    /// Whether a log level is enabled (use before formatting anything expensive).
    #[must_use]
    pub fn log_enabled(&self, level: Level) -> bool {
        self.core.log_enabled(level)
    }

    /// Queues a log event.
    pub fn push_log(&mut self, ev: LogEvent) {
        self.core.push_log(ev);
    }
}
