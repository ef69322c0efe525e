//! A loaded C provider as an engine [`Provider`]: the engine's lifecycle calls become
//! the library's callbacks on objects owned here, requests get an id and wait in
//! `pending` until the provider answers (from any thread, through [`Shared`]) or their
//! time budget runs out, and the provider's SA MADs go through the core's SA agent.
//!
//! Safe code: every C call goes through acm-io-verbs' wrapper. A failing callback is
//! logged with the library's file and reason and leaves that object unused; nothing a
//! provider does can stop the daemon, short of crashing inside its own code.

use super::message::{self, Answer};
use super::services::{Event, Shared, Slot, endpoint_key, request_id};
use acm_engine::log::{Level, LogEvent};
use acm_engine::provider::{Ctx, PendingReply, Provider, Resolve};
use acm_engine::{
    Address, Counter, Counters, DeviceDesc, DeviceId, EndpointId, Instant, Mad, PortAttrs, PortId,
};
use acm_io_verbs::provider::abi::{AcmMsg, IBV_EVENT_CLIENT_REREGISTER};
use acm_io_verbs::provider::{
    CallError, Context, Device, Endpoint, LocalAddress, Port, ProviderLibrary, SaToken,
    VerbsHandle, deliver_sa,
};
use acm_proto::client::Status;
use acm_proto::mad::{MadHeaderPacket, UmadStatus};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Finds a device's verbs context by name (hardware only).
pub(crate) type VerbsLookup = Rc<dyn Fn(&str) -> Option<VerbsHandle>>;

struct DeviceState {
    obj: Rc<Device>,
    ctx: Option<Context>,
}

struct PortState {
    obj: Rc<Port>,
    ctx: Option<Context>,
}

struct AddrState {
    addr: Address,
    _obj: LocalAddress,
    ctx: Option<Context>,
}

struct EpState {
    obj: Rc<Endpoint>,
    ctx: Option<Context>,
    port: PortId,
    addrs: Vec<AddrState>,
}

struct Pending {
    reply: PendingReply,
    ep: EndpointId,
    deadline: Instant,
    /// A QUERY_SA's record, echoed if it times out; `None` for a resolve.
    query: Option<[u8; 64]>,
}

struct SaInFlight {
    token: SaToken,
    port: PortId,
    /// The TID the provider gave the MAD, restored in the answer it sees.
    provider_tid: u64,
}

/// One C provider library serving the ports the options file gives it.
pub(crate) struct CProvider {
    lib: Rc<ProviderLibrary>,
    shared: Arc<Shared>,
    slot: Slot,
    budget: Duration,
    verbs: VerbsLookup,
    devices: HashMap<DeviceId, DeviceState>,
    ports: HashMap<PortId, PortState>,
    endpoints: HashMap<EndpointId, EpState>,
    next_seq: u64,
    pending: BTreeMap<u64, Pending>,
    /// By the low 32 bits of the TID the core gave the MAD.
    sa: HashMap<u32, SaInFlight>,
}

impl CProvider {
    /// `lib` in `slot` of `shared`; a request it has not answered after `budget` is
    /// answered ETIMEDOUT by the core.
    #[must_use]
    pub(crate) fn new(
        lib: Rc<ProviderLibrary>,
        shared: Arc<Shared>,
        slot: Slot,
        budget: Duration,
        verbs: VerbsLookup,
    ) -> Self {
        Self {
            lib,
            shared,
            slot,
            budget,
            verbs,
            devices: HashMap::new(),
            ports: HashMap::new(),
            endpoints: HashMap::new(),
            next_seq: 1,
            pending: BTreeMap::new(),
            sa: HashMap::new(),
        }
    }

    fn log(cx: &mut Ctx<'_>, level: Level, origin: &'static str, message: String) {
        if cx.log_enabled(level) {
            cx.push_log(LogEvent {
                level,
                origin,
                message,
            });
        }
    }

    /// Logs a failed callback with the library's file, after what the provider logged
    /// during the call.
    fn failed(&mut self, cx: &mut Ctx<'_>, e: &CallError) {
        self.drain(cx);
        let file = self.lib.path().display().to_string();
        Self::log(cx, Level::Basic, "acm_provider", format!("{file}: {e}"));
    }

    /// What a library call that opens something gave: its context, or `None` when it
    /// failed (logged).
    fn opened(&mut self, cx: &mut Ctx<'_>, call: Result<Context, CallError>) -> Option<Context> {
        call.inspect_err(|e| self.failed(cx, e)).ok()
    }

    /// Hands everything the provider queued to the core.
    fn drain(&mut self, cx: &mut Ctx<'_>) {
        while let Some(ev) = self.shared.pop(self.slot) {
            match ev {
                Event::Answered { id, msg, query } => self.answer(cx, id, query, &msg),
                Event::Sa(req) => self.send_sa(cx, *req),
                Event::Counter(i) => {
                    if let Some(c) = counter(i) {
                        cx.count(c);
                    }
                }
                Event::Log {
                    level,
                    origin,
                    text,
                } => Self::log(cx, level_of(level), origin, text),
            }
        }
    }

    fn answer(&mut self, cx: &mut Ctx<'_>, id: u64, query: bool, msg: &[u8]) {
        let Some(p) = self.pending.remove(&id) else {
            let what = if query { "query" } else { "resolve" };
            Self::log(
                cx,
                Level::Basic,
                "acm_resolve_response",
                format!(
                    "{}: late or unknown {what} answer (id {id:#x}) dropped",
                    self.lib.name()
                ),
            );
            return;
        };
        let answer = if p.query.is_some() {
            message::query_answer(msg)
        } else {
            message::resolve_answer(msg)
        };
        cx.complete(p.reply, answer.outcome());
    }

    fn send_sa(&mut self, cx: &mut Ctx<'_>, req: acm_io_verbs::provider::SaRequest) {
        let ep = EndpointId((req.endpoint & 0xFFFF_FFFF) as u32);
        let Some(port) = self.endpoints.get(&ep).map(|e| e.port) else {
            deliver_sa(req.token, Err(UmadStatus::TIMED_OUT));
            return;
        };
        let mut mad = req.mad;
        let mut hdr = MadHeaderPacket::new_unchecked(&mut mad[..]);
        let provider_tid = hdr.tid();
        let tid = cx.next_tid();
        hdr.set_tid(tid);
        self.sa.insert(
            tid as u32,
            SaInFlight {
                token: req.token,
                port,
                provider_tid,
            },
        );
        if let Err(status) = cx.send_sa(port, Mad(mad)) {
            self.sa.remove(&(tid as u32));
            Self::log(
                cx,
                Level::Verbose,
                "acm_send_sa_mad",
                format!("port {} cannot send (status {})", port.port, status.0),
            );
            deliver_sa(req.token, Err(UmadStatus::TIMED_OUT));
        }
    }

    fn hold(
        &mut self,
        cx: &Ctx<'_>,
        ep: EndpointId,
        reply: PendingReply,
        query: Option<[u8; 64]>,
    ) -> u64 {
        let id = request_id(self.slot, self.next_seq);
        self.next_seq += 1;
        self.pending.insert(
            id,
            Pending {
                reply,
                ep,
                deadline: cx.now() + self.budget,
                query,
            },
        );
        id
    }

    /// The address context a request on `ep` goes to: the address matching `src`, else
    /// the endpoint's first (a path resolve names no source address).
    fn addr_ctx(&self, ep: EndpointId, src: Option<&Address>) -> Option<&Context> {
        let e = self.endpoints.get(&ep)?;
        let a = match src {
            Some(src) => e.addrs.iter().find(|a| a.addr.matches_local(src)),
            None => e.addrs.first(),
        }?;
        a.ctx.as_ref()
    }

    /// Hands the held request `id`, as `msg`, to the library's entry point `call`
    /// (`resolve` or `query`) on the address context of `ep` and `src`; a call the
    /// library fails answers the request now (ENODATA).
    fn submit(
        &mut self,
        cx: &mut Ctx<'_>,
        ep: EndpointId,
        src: Option<&Address>,
        id: u64,
        mut msg: AcmMsg,
        call: fn(&ProviderLibrary, &Context, &mut AcmMsg, u64) -> Result<(), CallError>,
    ) {
        let result = match self.addr_ctx(ep, src) {
            Some(ctx) => call(&self.lib, ctx, &mut msg, id),
            None => Ok(()),
        };
        if let Err(e) = result {
            self.failed(cx, &e);
            if let Some(p) = self.pending.remove(&id) {
                finish(cx, p, Status::ENODATA);
            }
        }
        self.drain(cx);
    }

    /// Answers the requests still pending on `ep` now (ENODATA, as the built-in
    /// provider answers those of a closing endpoint); a late answer is dropped.
    fn fail_pending(&mut self, cx: &mut Ctx<'_>, ep: EndpointId) {
        for id in keys_where(&self.pending, |p| p.ep == ep) {
            if let Some(p) = self.pending.remove(&id) {
                finish(cx, p, Status::ENODATA);
            }
        }
    }

    fn close_ep_state(&self, e: EpState) {
        for a in e.addrs {
            if let Some(ctx) = a.ctx {
                self.lib.remove_address(ctx);
            }
        }
        if let Some(ctx) = e.ctx {
            self.lib.close_endpoint(ctx);
        }
    }
}

/// The keys of the entries whose values `hit` picks, collected so that the map can
/// change while they are handled.
fn keys_where<'a, K: Copy + 'a, V: 'a>(
    entries: impl IntoIterator<Item = (&'a K, &'a V)>,
    hit: impl Fn(&V) -> bool,
) -> Vec<K> {
    entries
        .into_iter()
        .filter(|(_, v)| hit(v))
        .map(|(&k, _)| k)
        .collect()
}

/// Answers `p` with `status` (a QUERY_SA echoes its record).
fn finish(cx: &mut Ctx<'_>, p: Pending, status: Status) {
    let answer = match p.query {
        Some(path) => Answer::Query { status, path },
        None => Answer::Failed(status),
    };
    cx.complete(p.reply, answer.outcome());
}

/// `acm_increment_counter`'s index as a counter.
fn counter(i: usize) -> Option<Counter> {
    Some(match i {
        0 => Counter::Error,
        1 => Counter::Resolve,
        2 => Counter::NoData,
        3 => Counter::AddrQuery,
        4 => Counter::AddrCache,
        5 => Counter::RouteQuery,
        6 => Counter::RouteCache,
        _ => return None,
    })
}

/// `acm_write`'s level as the engine's.
fn level_of(level: i32) -> Level {
    match level {
        i32::MIN..=0 => Level::Basic,
        1 => Level::Config,
        _ => Level::Verbose,
    }
}

fn gids(attrs: &PortAttrs) -> Vec<[u8; 16]> {
    attrs.gids.iter().map(|g| g.0).collect()
}

impl Provider for CProvider {
    fn name(&self) -> &str {
        self.lib.name()
    }

    fn resolve(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, req: Resolve, reply: PendingReply) {
        let src = match &req {
            Resolve::Dest { src, .. } => Some(*src),
            Resolve::Path { .. } => None,
        };
        if self.addr_ctx(ep, src.as_ref()).is_none() {
            cx.complete(
                reply,
                acm_engine::provider::Outcome::Failed(Status::ENODATA),
            );
            return;
        }
        let id = self.hold(cx, ep, reply, None);
        let msg = message::resolve(&req, id);
        self.submit(cx, ep, src.as_ref(), id, msg, ProviderLibrary::resolve);
    }

    fn query(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, path: &[u8; 64], reply: PendingReply) {
        if self.addr_ctx(ep, None).is_none() {
            cx.complete(
                reply,
                acm_engine::provider::Outcome::Query {
                    status: Status::ENODATA,
                    path,
                },
            );
            return;
        }
        let id = self.hold(cx, ep, reply, Some(*path));
        let msg = message::query(path, id);
        self.submit(cx, ep, None, id, msg, ProviderLibrary::query);
    }

    fn open_device(&mut self, cx: &mut Ctx<'_>, dev: &DeviceDesc) {
        let obj = Device::new(dev.guid, (self.verbs)(&dev.name));
        let ctx = self.opened(cx, self.lib.open_device(&obj));
        self.devices.insert(dev.id, DeviceState { obj, ctx });
        self.drain(cx);
    }

    fn close_device(&mut self, cx: &mut Ctx<'_>, dev: DeviceId) {
        if let Some(d) = self.devices.remove(&dev)
            && let Some(ctx) = d.ctx
        {
            self.lib.close_device(ctx);
        }
        self.drain(cx);
    }

    fn open_port(&mut self, cx: &mut Ctx<'_>, port: PortId, attrs: &PortAttrs) {
        if let Some(p) = self.ports.get(&port) {
            // Attributes changed on a port already open: the GID table is all the core
            // API shows of them.
            p.obj.set_gids(gids(attrs));
            return;
        }
        let Some(dev) = self.devices.get(&port.device) else {
            return;
        };
        let obj = Port::new(&dev.obj, port.port, gids(attrs));
        let ctx = match &dev.ctx {
            Some(dev_ctx) => self.opened(cx, self.lib.open_port(&obj, dev_ctx)),
            None => None,
        };
        self.ports.insert(port, PortState { obj, ctx });
        self.drain(cx);
    }

    fn close_port(&mut self, cx: &mut Ctx<'_>, port: PortId) {
        for ep in keys_where(&self.endpoints, |e| e.port == port) {
            self.close_endpoint(cx, ep);
        }
        for (_, s) in self.sa.extract_if(|_, s| s.port == port) {
            deliver_sa(s.token, Err(UmadStatus::TIMED_OUT));
        }
        if let Some(p) = self.ports.remove(&port)
            && let Some(ctx) = p.ctx
        {
            self.lib.close_port(ctx);
        }
        self.drain(cx);
    }

    fn open_endpoint(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, port: PortId, pkey: u16) {
        let Some(p) = self.ports.get(&port) else {
            return;
        };
        let obj = Endpoint::new(&p.obj, pkey, endpoint_key(self.slot, ep.0));
        let ctx = match &p.ctx {
            Some(port_ctx) => self.opened(cx, self.lib.open_endpoint(&obj, port_ctx)),
            None => None,
        };
        self.endpoints.insert(
            ep,
            EpState {
                obj,
                ctx,
                port,
                addrs: Vec::new(),
            },
        );
        self.drain(cx);
    }

    fn close_endpoint(&mut self, cx: &mut Ctx<'_>, ep: EndpointId) {
        if let Some(e) = self.endpoints.remove(&ep) {
            self.close_ep_state(e);
        }
        self.drain(cx);
        self.fail_pending(cx, ep);
    }

    fn add_address(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, addr: &Address) {
        let Some(e) = self.endpoints.get(&ep) else {
            return;
        };
        let (ty, info) = message::address_parts(addr);
        let obj = LocalAddress::new(&e.obj, ty, info, &addr.to_string());
        let ctx = match &e.ctx {
            Some(ep_ctx) => self.opened(cx, self.lib.add_address(&obj, ep_ctx)),
            None => None,
        };
        if let Some(e) = self.endpoints.get_mut(&ep) {
            e.addrs.push(AddrState {
                addr: *addr,
                _obj: obj,
                ctx,
            });
        }
        self.drain(cx);
    }

    fn remove_address(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, addr: &Address) {
        let Some(e) = self.endpoints.get_mut(&ep) else {
            return;
        };
        if let Some(i) = e.addrs.iter().position(|a| a.addr == *addr) {
            let a = e.addrs.remove(i);
            if let Some(ctx) = a.ctx {
                self.lib.remove_address(ctx);
            }
        }
        self.drain(cx);
    }

    fn client_reregister(&mut self, cx: &mut Ctx<'_>, port: PortId) {
        if let Some(ctx) = self.ports.get(&port).and_then(|p| p.ctx.as_ref())
            && let Err(e) = self.lib.handle_event(ctx, IBV_EVENT_CLIENT_REREGISTER)
        {
            self.failed(cx, &e);
        }
        self.drain(cx);
    }

    fn perf(&self, ep: EndpointId) -> Option<Counters> {
        let ctx = self.endpoints.get(&ep)?.ctx.as_ref()?;
        let values = self.lib.query_perf(ctx).ok()?;
        let mut c = Counters::default();
        for (slot, v) in c.0.iter_mut().zip(values) {
            *slot = v;
        }
        Some(c)
    }

    fn sa_response(
        &mut self,
        cx: &mut Ctx<'_>,
        _port: PortId,
        tid: u64,
        result: Result<&[u8], UmadStatus>,
    ) {
        let Some(s) = self.sa.remove(&(tid as u32)) else {
            return;
        };
        match result {
            Ok(resp) => {
                let mut copy = resp.to_vec();
                let mut header = MadHeaderPacket::new_unchecked(&mut copy[..]);
                if header.try_tid().is_some() {
                    header.set_tid(s.provider_tid);
                }
                deliver_sa(s.token, Ok(&copy));
            }
            Err(status) => {
                deliver_sa(s.token, Err(status));
            }
        }
        self.drain(cx);
    }

    fn handle_timeout(&mut self, cx: &mut Ctx<'_>) {
        self.drain(cx);
        let now = cx.now();
        for id in keys_where(&self.pending, |p| p.deadline <= now) {
            if let Some(p) = self.pending.remove(&id) {
                Self::log(
                    cx,
                    Level::Basic,
                    "acm_resolve_response",
                    format!(
                        "{}: no answer to request {id:#x} in {} ms; ETIMEDOUT",
                        self.lib.name(),
                        self.budget.as_millis()
                    ),
                );
                finish(cx, p, Status::ETIMEDOUT);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    fn wake(&mut self, cx: &mut Ctx<'_>) {
        self.drain(cx);
    }
}

impl Drop for CProvider {
    /// Closes what is still open, children first, as the interface expects; the
    /// provider's threads may still hold pointers to these objects until then.
    fn drop(&mut self) {
        for (_, e) in std::mem::take(&mut self.endpoints) {
            self.close_ep_state(e);
        }
        for (_, p) in std::mem::take(&mut self.ports) {
            if let Some(ctx) = p.ctx {
                self.lib.close_port(ctx);
            }
        }
        for (_, d) in std::mem::take(&mut self.devices) {
            if let Some(ctx) = d.ctx {
                self.lib.close_device(ctx);
            }
        }
        // Replies still pending are dropped with the engine that owns their clients.
        for (_, p) in std::mem::take(&mut self.pending) {
            drop(p.reply);
        }
    }
}
