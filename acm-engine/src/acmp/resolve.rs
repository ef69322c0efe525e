//! Client resolves on ibacmp (docs/ibacmp.md §3): the destination state machine as a
//! client lookup walks it, coalescing, NODELAY.

use super::endpoint::EpState;
use super::{Acmp, DestState, fair};
use crate::addr::Address;
use crate::counters::Counter;
use crate::counters::LookupEvent;
use crate::io::EndpointId;
use crate::log::{Level, log};
use crate::provider::{Ctx, Outcome, PendingReply, Resolve};
use acm_proto::client::{EpFlags, Status};
use acm_proto::path_record::PathRecordPacket;

impl Acmp {
    pub(super) fn resolve_request(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        req: Resolve,
        reply: PendingReply,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return cx.complete(reply, Outcome::Failed(Status::ENODATA));
        };
        if ep.state != EpState::Ready {
            log!(
                cx,
                Level::Verbose,
                "acmp_resolve",
                "endpoint pkey {:#06x} not ready",
                ep.pkey
            );
            return Self::finish(Some(ep), cx, reply, Outcome::Failed(Status::ENODATA));
        }
        ep.counters.bump(Counter::Resolve);
        match req {
            Resolve::Dest { src, dest, flags } => {
                self.resolve_dest(cx, id, src, dest, flags, reply)
            }
            Resolve::Path { path, flags } => self.resolve_path(cx, id, &path, flags, reply),
        }
    }

    /// The destination's cache slot and whether it was cached before this request; `None`
    /// when the cache is full and nothing in it may be evicted (logged here; the request
    /// then fails with ENOMEM). One lookup for a cached destination: the cache hit is
    /// the path every client request takes most, and the request's reply stays with the
    /// caller rather than travel through here and back.
    fn slot(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        key: &Address,
    ) -> Option<(super::dest::DestIdx, bool)> {
        let limit = self.opts.dest_limit;
        let ep = self.eps.get_mut(&id)?;
        if let Some(i) = ep.dests.find(key) {
            return Some((i, true));
        }
        let fresh = ep.acquire_dest(key, limit);
        if fresh.is_none() {
            log!(
                cx,
                Level::Basic,
                "acmp_acquire_dest",
                "destination cache full of entries in use; {key} not cached"
            );
        }
        fresh.map(|i| (i, false))
    }

    /// The path to answer with from the cache when the destination is READY and fresh
    /// (counted as a route-cache hit); otherwise its state, after stale entries move
    /// back (address expired → INIT, route expired → ADDR_RESOLVED). The caller keeps
    /// the request's reply and answers it. Inlined: it is the cache hit's path.
    #[inline(always)]
    fn check_ready(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
    ) -> Option<Result<[u8; 64], DestState>> {
        let now_min = cx.now().as_minutes();
        let ep = self.eps.get_mut(&id)?;
        // Read first, and borrow the entry for writing only to move a stale one back:
        // a hit changes nothing the published cache view shows, and `get_mut` notes
        // the entry as changed for it.
        let d = ep.dests.get(idx)?;
        if d.state != DestState::Ready {
            return Some(Err(d.state));
        }
        if now_min <= d.addr_expiry && now_min <= d.route_expiry {
            cx.count(Counter::RouteCache);
            ep.counters.bump(Counter::RouteCache);
            return Some(Ok(d.path));
        }
        let d = ep.dests.get_mut(idx)?;
        if now_min > d.addr_expiry {
            d.state = DestState::Init;
            d.path = [0; 64];
        } else {
            d.state = DestState::AddrResolved;
        }
        Some(Err(d.state))
    }

    fn resolve_dest(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        src: Address,
        dest: Address,
        flags: EpFlags,
        reply: PendingReply,
    ) {
        let Some((idx, existed)) = self.slot(cx, id, &dest) else {
            return self.fail(cx, id, reply, Status::ENOMEM);
        };
        let state = match self.check_ready(cx, id, idx) {
            Some(Ok(path)) => return cx.complete(reply, Outcome::Path(&path)),
            Some(Err(state)) => state,
            None => return,
        };
        let nodelay = flags.contains(EpFlags::NODELAY);
        let Ok(round) = self.round(cx, id, (idx, existed), flags, &reply) else {
            return self.fail(cx, id, reply, Status::ENOMEM);
        };
        match state {
            DestState::AddrResolved => {
                cx.count(Counter::AddrCache);
                if let Some(ep) = self.eps.get_mut(&id) {
                    ep.counters.bump(Counter::AddrCache);
                    self.fill_sgid(id, idx);
                }
                if let Err(e) = self.query_route(cx, id, &dest, None) {
                    self.set_init(id, idx);
                    return self.fail(cx, id, reply, e);
                }
            }
            DestState::Init => {
                let neigh = self.neigh_background(id);
                if nodelay
                    && self.eps.get_mut(&id).is_some_and(|ep| {
                        Self::background_lookups(ep) + neigh >= self.opts.max_background_resolves
                    })
                {
                    // The NODELAY answer (ENODATA) as always, without the warm-up.
                    cx.count_lookup(LookupEvent::BackgroundDropped);
                    self.forget_fresh(id, idx, existed);
                    return self.enqueue(cx, id, idx, flags, reply, round);
                }
                if let Err(e) = self.start_addr_lookup(cx, id, &src, &dest, idx, round) {
                    return self.fail(cx, id, reply, e);
                }
            }
            _ => {}
        }
        self.enqueue(cx, id, idx, flags, reply, round);
    }

    fn resolve_path(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        path: &[u8; 64],
        flags: EpFlags,
        reply: PendingReply,
    ) {
        let p = PathRecordPacket::new_unchecked(&path[..]);
        let key = if p.dlid() != 0 {
            Address::lid(p.dlid())
        } else {
            Address::gid(p.dgid())
        };
        let Some((idx, existed)) = self.slot(cx, id, &key) else {
            return self.fail(cx, id, reply, Status::ENOMEM);
        };
        let state = match self.check_ready(cx, id, idx) {
            Some(Ok(path)) => return cx.complete(reply, Outcome::Path(&path)),
            Some(Err(state)) => state,
            None => return,
        };
        let Ok(round) = self.round(cx, id, (idx, existed), flags, &reply) else {
            return self.fail(cx, id, reply, Status::ENOMEM);
        };
        match state {
            DestState::Init | DestState::AddrResolved => {
                if state == DestState::Init {
                    self.record_path_addr(id, idx, path);
                }
                if let Err(e) = self.query_route(cx, id, &key, None) {
                    self.set_init(id, idx);
                    return self.fail(cx, id, reply, e);
                }
            }
            _ => {}
        }
        self.enqueue(cx, id, idx, flags, reply, round);
    }

    /// INIT path resolve (docs/ibacmp.md §3): the query record from the request and the
    /// port.
    fn record_path_addr(&mut self, id: EndpointId, idx: super::dest::DestIdx, req: &[u8; 64]) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        let group_sgid = ep
            .groups
            .first()
            .map(|g| PathRecordPacket::new_unchecked(&g.path[..]).sgid())
            .filter(|g| !g.is_zero())
            .unwrap_or_else(|| attrs.gid0());
        let pkey = ep.pkey;
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        let r = PathRecordPacket::new_unchecked(&req[..]);
        let mut path = [0u8; 64];
        let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
        p.set_dgid(r.dgid());
        p.set_dlid(r.dlid());
        p.set_slid(if r.slid() != 0 { r.slid() } else { attrs.lid });
        p.set_sgid(if r.sgid().is_zero() {
            group_sgid
        } else {
            r.sgid()
        });
        p.set_pkey(pkey);
        d.path = path;
        d.state = DestState::AddrResolved;
    }

    /// ADDR_RESOLVED IP entries without a source GID get the endpoint port's GID.
    ///
    /// The reference searches the host's interfaces for one whose address *begins with*
    /// the source IP's text (docs/reference-quirks.md §8) and leaves the GID zero when
    /// none matches; the port GID is what such an interface would have given.
    fn fill_sgid(&mut self, id: EndpointId, idx: super::dest::DestIdx) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        if d.addr.as_ip().is_none() {
            return;
        }
        let mut p = PathRecordPacket::new_unchecked(&mut d.path[..]);
        if p.sgid().is_zero() {
            p.set_sgid(attrs.gid0());
        }
    }

    /// Removes cache entry `idx`, made for a request that was then refused, so that a
    /// flood of refused requests leaves no entries behind (`existed`: it was there
    /// before the request).
    /// The fairness round a request waits in: `None` for NODELAY, answered at once and
    /// waiting on nothing. `Err` when its client is over its bound (the request then
    /// fails with ENOMEM, and a destination made for it alone is forgotten).
    fn round(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        (idx, existed): (super::dest::DestIdx, bool),
        flags: EpFlags,
        reply: &PendingReply,
    ) -> Result<Option<u32>, ()> {
        if flags.contains(EpFlags::NODELAY) {
            return Ok(None);
        }
        match self.admit(cx, id, idx, reply) {
            Some(r) => Ok(Some(r)),
            None => {
                self.forget_fresh(id, idx, existed);
                Err(())
            }
        }
    }

    fn forget_fresh(&mut self, id: EndpointId, idx: super::dest::DestIdx, existed: bool) {
        if existed {
            return;
        }
        if let Some(ep) = self.eps.get_mut(&id)
            && ep
                .dests
                .get(idx)
                .is_some_and(|d| d.state == DestState::Init && d.queue.is_empty())
        {
            ep.dests.remove(idx);
        }
    }

    fn set_init(&mut self, id: EndpointId, idx: super::dest::DestIdx) {
        if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
            d.state = DestState::Init;
        }
    }

    fn fail(&mut self, cx: &mut Ctx<'_>, id: EndpointId, reply: PendingReply, status: Status) {
        Self::finish(self.eps.get_mut(&id), cx, reply, Outcome::Failed(status));
    }

    /// The *queue* step: NODELAY answers ENODATA now (the lookup goes on in the
    /// background); otherwise the request waits on the destination, its client's lookup
    /// in turn `round` (`Acmp::admit`).
    fn enqueue(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        flags: EpFlags,
        reply: PendingReply,
        round: Option<u32>,
    ) {
        let limit = self.opts.queued_per_dest;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        if flags.contains(EpFlags::NODELAY) {
            return Self::finish(Some(ep), cx, reply, Outcome::Failed(Status::ENODATA));
        }
        let full = ep.dests.get(idx).is_none_or(|d| d.queue.len() >= limit);
        if full {
            return Self::finish(Some(ep), cx, reply, Outcome::Failed(Status::ENOMEM));
        }
        if let Some(d) = ep.dests.get_mut(idx) {
            let first = d.queue.is_empty();
            let querying = d.state == DestState::QueryAddr;
            fair::note_wait(&mut self.clients, id, idx, &reply);
            // Most destinations only ever have one request waiting: room for one, not
            // the four a first push allocates.
            if d.queue.capacity() == 0 {
                d.queue.reserve_exact(1);
            }
            d.queue.push(reply);
            if first && querying {
                Self::promote(ep, idx, round.unwrap_or(0));
            }
        }
    }
}
