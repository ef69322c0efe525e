//! The ACM multicast protocol (docs/protocol/acm-mad.md): sending resolve requests
//! through the resolve queue, retransmission and timeout, answering peers' requests, and
//! matching responses.

use super::endpoint::{Ep, Request, SendKind, Turn, WaitFor, Waiting};
use super::{Acmp, DestState, Timer};
use crate::addr::Address;
use crate::counters::Counter;
use crate::io::{AddressVector, EndpointId, GlobalRoute, Mad, RecvInfo, SendToken, UdSend};
use crate::log::{Level, log};
use crate::provider::{Ctx, Outcome};
use crate::time::Instant;
use acm_proto::Gid;
use acm_proto::acm_mad::{AcmControl, AcmMadPacket, AcmMadRepr};
use acm_proto::client::Status;
use acm_proto::grh::GrhPacket;
use acm_proto::mad::{Method, MgmtClass};
use acm_proto::path_record::PathRecordPacket;
use alloc::vec::Vec;
use core::time::Duration;

impl Acmp {
    /// Starts an ACM resolve for `dest` from `src` (docs/protocol/acm-mad.md §4), in
    /// turn `round` (`None`: in the background, nobody waits for it). The request waits
    /// for a resolve-queue credit if none is free, and then for its turn
    /// (`ResolveQueue`).
    pub(super) fn send_request(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        src: &Address,
        dest: &Address,
        slot: super::dest::DestIdx,
        round: Option<u32>,
    ) -> Result<(), Status> {
        let limit = self.opts.send_queue;
        let Some(ep) = self.eps.get_mut(&id) else {
            return Err(Status::ENODATA);
        };
        if ep.resolve_q.credits == 0 && ep.resolve_q.pending.len() >= limit {
            return Err(Status::ENOMEM);
        }
        let tid = cx.next_tid();
        let joined = ep.joined_mask();
        cx.count(Counter::AddrQuery);
        ep.counters.bump(Counter::AddrQuery);
        log!(
            cx,
            Level::Verbose,
            "acmp_send_resolve",
            "{src} -> {dest} tid {tid:#x}"
        );
        if ep.resolve_q.credits > 0 {
            ep.resolve_q.credits -= 1;
            self.start_request(cx, id, tid, dest, src, joined, round.is_none());
        } else {
            let src = ep.shared_src(src);
            ep.resolve_q.push(
                round,
                Waiting {
                    tid,
                    dest: WaitFor::Slot(slot),
                    src,
                    joined,
                    turn: Turn::First,
                },
            );
        }
        Ok(())
    }

    /// Builds request `tid`'s MAD (for `dest` from `src`, advertising the groups in
    /// `joined`) and posts it; it holds a credit. `background`: nobody waits for it.
    #[allow(clippy::too_many_arguments)]
    fn start_request(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        tid: u64,
        dest: &Address,
        src: &Address,
        joined: u32,
        background: bool,
    ) {
        let tries = self.opts.retries + 1;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let (mgids, n) = ep.mgids(joined);
        let repr =
            AcmMadRepr::resolve_request(tid, dest.ty, dest.bytes, src.ty, src.bytes, &mgids[..n]);
        ep.requests.insert(
            tid,
            Request {
                dest: *dest,
                mad: Mad(repr.to_bytes()),
                tries,
                sending: false,
                expires: None,
                posted: cx.now(),
                background,
            },
        );
        self.post_request(cx, id, tid);
    }

    /// Posts (or re-posts) request `tid` to group 0; it already holds a credit.
    fn post_request(&mut self, cx: &mut Ctx<'_>, id: EndpointId, tid: u64) {
        let token = self.token();
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(av) = ep.groups.first().map(|g| g.av) else {
            return;
        };
        let Some(req) = ep.requests.get_mut(&tid) else {
            return;
        };
        req.sending = true;
        req.expires = None;
        req.posted = cx.now();
        let mad = req.mad.clone();
        ep.sends.insert(token, SendKind::Request(tid));
        cx.ud_send(UdSend {
            ep: id,
            token,
            av,
            mad,
        });
    }

    /// Queues a response MAD on the response queue.
    pub(super) fn send_response(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        av: AddressVector,
        tid: u64,
        mgid: Gid,
    ) {
        let limit = self.opts.send_queue;
        let mad = Mad(AcmMadRepr::resolve_response(tid, mgid).to_bytes());
        let token = self.token();
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        if ep.resp_q.credits > 0 {
            ep.resp_q.credits -= 1;
            ep.sends.insert(token, SendKind::Response);
            cx.ud_send(UdSend {
                ep: id,
                token,
                av,
                mad,
            });
        } else if ep.resp_q.pending.len() < limit {
            ep.resp_q.pending.push_back((av, mad));
        } else {
            log!(
                cx,
                Level::Basic,
                "acmp_send_addr_resp",
                "response queue full; response to tid {tid:#x} dropped"
            );
        }
    }

    /// Gives a resolve-queue credit back and posts the next waiting request, in turn
    /// (`ResolveQueue::next_turn`).
    pub(super) fn release_request_credit(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        while let Some(w) = ep.resolve_q.next_turn() {
            // While it waited for a credit, the destination may have become known (a
            // peer's request taught us its address): then there is nothing to ask. The
            // reference sends it anyway; on a large fabric that is most of the traffic.
            let Some((dest, slot)) = ep.waiting_dest(&w.dest) else {
                continue;
            };
            let Some(d) = slot
                .and_then(|i| ep.dests.get(i))
                .filter(|d| d.state == DestState::QueryAddr)
            else {
                continue;
            };
            let background = d.queue.is_empty();
            self.start_request(cx, id, w.tid, &dest, &w.src, w.joined, background);
            return;
        }
        ep.resolve_q.credits += 1;
    }

    pub(super) fn send_done(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        token: SendToken,
        ok: bool,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        // The reference waits `timeout` after the subnet timeout; ours waits longer when
        // the responses measured come later than that (slow receivers), never less.
        let wait_ms = ep
            .rtt
            .timeout_ms(self.opts.timeout_ms, self.opts.acm_timeout_max_ms);
        let wait = Duration::from_millis(wait_ms.into());
        let Some(kind) = ep.sends.remove(&token) else {
            return;
        };
        if !ok {
            log!(
                cx,
                Level::Basic,
                "acmp_send_handler",
                "send failed on pkey {:#06x}",
                ep.pkey
            );
        }
        match kind {
            SendKind::Response => {
                if let Some((av, mad)) = ep.resp_q.pending.pop_front() {
                    let token = self.token();
                    let Some(ep) = self.eps.get_mut(&id) else {
                        return;
                    };
                    ep.sends.insert(token, SendKind::Response);
                    cx.ud_send(UdSend {
                        ep: id,
                        token,
                        av,
                        mad,
                    });
                } else {
                    ep.resp_q.credits += 1;
                }
            }
            SendKind::Request(tid) => {
                let subnet_ms = self
                    .ports
                    .get(&ep.port)
                    .map_or(0, |a| a.subnet_timeout_ms());
                let Some(req) = ep.requests.get_mut(&tid) else {
                    // Answered while the send was in flight: its credit comes back now.
                    self.release_request_credit(cx, id);
                    return;
                };
                req.sending = false;
                let at = cx.now() + Duration::from_millis(subnet_ms) + wait;
                req.expires = Some(at);
                self.set_timer(at, Timer::Retry { ep: id, tid });
            }
        }
    }

    /// A request's wait ran out: send it again, or give up with ETIMEDOUT.
    pub(super) fn retry_due(&mut self, cx: &mut Ctx<'_>, id: EndpointId, tid: u64, at: Instant) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(req) = ep.requests.get_mut(&tid) else {
            return;
        };
        if req.expires != Some(at) || req.sending {
            return;
        }
        req.tries = req.tries.saturating_sub(1);
        if req.tries > 0 {
            log!(
                cx,
                Level::Verbose,
                "acmp_process_wait_queue",
                "retrying tid {tid:#x}"
            );
            self.post_request(cx, id, tid);
            return;
        }
        let dest = req.dest;
        let src = request_src(&req.mad);
        ep.requests.remove(&tid);
        log!(
            cx,
            Level::Verbose,
            "acmp_process_wait_queue",
            "tid {tid:#x} for {dest} timed out"
        );
        self.release_request_credit(cx, id);
        self.address_answer(cx, id, &dest, src, None);
    }

    /// A MAD arrived on the endpoint's QP (docs/protocol/acm-mad.md §5).
    pub(super) fn receive(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        wc: &RecvInfo,
        grh: Option<&[u8]>,
        mad: &[u8],
    ) {
        let Ok(p) = AcmMadPacket::new_checked(mad) else {
            log!(
                cx,
                Level::Verbose,
                "acmp_process_recv",
                "short MAD ({} bytes) dropped",
                mad.len()
            );
            return;
        };
        if p.mgmt_class() != MgmtClass::ACM {
            log!(
                cx,
                Level::Verbose,
                "acmp_process_recv",
                "class {} MAD on the ACM QP dropped",
                p.mgmt_class()
            );
            return;
        }
        if p.base_version() != 1 || p.class_version() != 1 || p.control() != AcmControl::RESOLVE {
            log!(
                cx,
                Level::Verbose,
                "acmp_process_acm_recv",
                "bad version or control; dropped"
            );
            return;
        }
        let repr = AcmMadRepr::from_packet(&p);
        if repr.is_response() {
            self.response_received(cx, id, wc, grh, &repr);
        } else {
            self.request_received(cx, id, wc, grh, &repr);
        }
    }

    fn response_received(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        wc: &RecvInfo,
        grh: Option<&[u8]>,
        repr: &AcmMadRepr,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let now = cx.now();
        let (dest, sending, src) = match ep.requests.remove(&repr.tid) {
            Some(req) => {
                ep.rtt.sample(now.saturating_duration_since(req.posted));
                (req.dest, req.sending, request_src(&req.mad))
            }
            None => match ep.answer_waiting(repr.tid) {
                // A request still waiting for a credit was never sent, but its TID
                // matches: it is answered all the same, as any outstanding one.
                Some(dest) => (dest, false, None),
                None => {
                    log!(
                        cx,
                        Level::Basic,
                        "acmp_process_acm_recv",
                        "notice - response did not match an active request"
                    );
                    return;
                }
            },
        };
        // Answered before its send completed, its credit comes back with the completion.
        if !sending {
            self.release_request_credit(cx, id);
        }
        let Some(sgid) = grh_sgid(grh) else {
            log!(
                cx,
                Level::Basic,
                "acmp_process_acm_recv",
                "response without GRH dropped"
            );
            self.address_answer(
                cx,
                id,
                &dest,
                src,
                Some((Status::ENODATA, wc, Gid::ZERO, &[])),
            );
            return;
        };
        let gids: Vec<Gid> = repr.rec.valid_gids().to_vec();
        self.address_answer(
            cx,
            id,
            &dest,
            src,
            Some((Status(repr.acm_status()), wc, sgid, &gids)),
        );
    }

    /// Records what a peer's MAD says about it (docs/protocol/acm-mad.md §6,
    /// `record_acm_addr`): the chosen group, its AV with the peer's LID and GID, the QPN.
    /// `false` if no group is shared.
    fn record_addr(
        ep: &mut Ep,
        idx: super::dest::DestIdx,
        wc: &RecvInfo,
        sgid: Gid,
        peer_gids: &[Gid],
    ) -> bool {
        let Some(gi) = ep.best_group(peer_gids) else {
            return false;
        };
        let Some(g) = ep.groups.get(gi) else {
            return false;
        };
        let (gav, gpath) = (g.av, g.path);
        let Some(d) = ep.dests.get_mut(idx) else {
            return false;
        };
        d.av = AddressVector {
            dlid: wc.slid,
            src_path_bits: wc.dlid_path_bits,
            grh: GlobalRoute {
                dgid: sgid,
                ..gav.grh
            },
            remote_qpn: wc.src_qp,
            ..gav
        };
        d.group = gi as u8;
        let gp = PathRecordPacket::new_unchecked(&gpath[..]);
        let mut p = PathRecordPacket::new_unchecked(&mut d.path[..]);
        p.set_sgid(gp.sgid());
        p.set_tclass(gp.tclass());
        p.set_pkey(gp.pkey());
        p.set_dgid(sgid);
        d.remote_qpn = wc.src_qp;
        d.state = DestState::AddrResolved;
        true
    }

    /// The route built from the group (docs/ibacmp.md §5, `route_prot acm`).
    fn route_from_group(ep: &mut Ep, idx: super::dest::DestIdx, addr_exp: u64, route_exp: u64) {
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        let Some(g) = ep.groups.get(usize::from(d.group)) else {
            return;
        };
        let mut path = g.path;
        let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
        p.set_dgid(d.av.grh.dgid);
        p.set_dlid(d.av.dlid);
        d.path = path;
        d.addr_expiry = addr_exp;
        d.route_expiry = route_exp;
        d.state = DestState::Ready;
    }

    /// Our request for `dest` (from `src`, when known) was answered (`Some`) or timed
    /// out (`None`) (docs/ibacmp.md §3). A failure goes on to the next address
    /// protocol of `addr_prot`, if any (docs/protocol/ipoib-neigh.md §3).
    fn address_answer(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        dest: &Address,
        src: Option<Address>,
        answer: Option<(Status, &RecvInfo, Gid, &[Gid])>,
    ) {
        let now = cx.now();
        let (addr_exp, route_exp) = (
            Self::expiry(now, self.opts.addr_timeout),
            Self::expiry(now, self.opts.route_timeout),
        );
        let route_acm = self.opts.route_acm;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(idx) = ep.dests.find(dest) else {
            return;
        };
        if ep.dests.get(idx).map(|d| d.state) != Some(DestState::QueryAddr) {
            return;
        }
        let status = match answer {
            None => Status::ETIMEDOUT,
            Some((Status::SUCCESS, wc, sgid, gids)) => {
                if Self::record_addr(ep, idx, wc, sgid, gids) {
                    Status::SUCCESS
                } else {
                    Status::ENODATA
                }
            }
            Some((s, ..)) => s,
        };
        if status == Status::SUCCESS && route_acm {
            Self::route_from_group(ep, idx, addr_exp, route_exp);
            self.complete_queue(cx, id, idx, Status::SUCCESS);
        } else if status == Status::SUCCESS {
            if let Err(e) = self.query_route(cx, id, dest, None) {
                self.set_state(id, idx, DestState::Init);
                self.complete_queue(cx, id, idx, e);
            }
        } else {
            self.addr_failed(cx, id, idx, src, status);
        }
    }

    fn set_state(&mut self, id: EndpointId, idx: super::dest::DestIdx, state: DestState) {
        if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
            d.state = state;
        }
    }

    /// Answers every request queued on a destination, in order (docs/ibacmp.md §3).
    pub(super) fn complete_queue(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        status: Status,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        let queue = super::fair::take_queue(&mut self.clients, id, idx, d);
        let path = d.path;
        for r in queue {
            let outcome = if status == Status::SUCCESS {
                Outcome::Path(&path)
            } else {
                Outcome::Failed(status)
            };
            Self::finish(Some(ep), cx, r, outcome);
        }
    }

    /// A peer's resolve request (docs/protocol/acm-mad.md §5, the request case).
    fn request_received(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        wc: &RecvInfo,
        grh: Option<&[u8]>,
        repr: &AcmMadRepr,
    ) {
        if repr.method != Method::GET || !repr.rec.src_type.is_address() {
            log!(
                cx,
                Level::Verbose,
                "acmp_process_addr_req",
                "invalid request dropped"
            );
            return;
        }
        let Some(sgid) = grh_sgid(grh) else {
            log!(
                cx,
                Level::Basic,
                "acmp_process_addr_req",
                "request without GRH dropped"
            );
            return;
        };
        let now = cx.now();
        let (addr_exp, route_exp) = (
            Self::expiry(now, self.opts.addr_timeout),
            Self::expiry(now, self.opts.route_timeout),
        );
        let route_acm = self.opts.route_acm;
        let limit = self.opts.dest_limit;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let src = Address {
            ty: repr.rec.src_type,
            bytes: repr.rec.src,
        };
        let target = Address {
            ty: repr.rec.dest_type,
            bytes: repr.rec.dest,
        };
        // Every receiver caches the requester: a full cache evicts an idle entry for it.
        let Some(idx) = ep.acquire_dest(&src, limit) else {
            log!(
                cx,
                Level::Basic,
                "acmp_process_addr_req",
                "cache full of entries in use; request from {src} dropped"
            );
            return;
        };
        let ours = ep.owns(&target);
        let gids: Vec<Gid> = repr.rec.valid_gids().to_vec();
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        if ours {
            d.req_id = repr.tid;
        }
        log!(
            cx,
            Level::Verbose,
            "acmp_process_addr_req",
            "{src} asks for {target}{}",
            if ours { " (us)" } else { "" }
        );
        let mut state = d.state;
        let same_qp = state == DestState::Ready && d.remote_qpn == wc.src_qp;
        let mut status = Status::SUCCESS;
        if !same_qp
            && matches!(
                state,
                DestState::Ready | DestState::Init | DestState::QueryAddr
            )
        {
            if Self::record_addr(ep, idx, wc, sgid, &gids) {
                state = DestState::AddrResolved;
            } else {
                status = Status::ENODATA;
                self.set_state(id, idx, DestState::Init);
                return self.finish_request(cx, id, idx, ours, status);
            }
        }
        match state {
            DestState::AddrResolved if route_acm => {
                if let Some(ep) = self.eps.get_mut(&id) {
                    Self::route_from_group(ep, idx, addr_exp, route_exp);
                }
            }
            DestState::AddrResolved => {
                let queued = self
                    .eps
                    .get(&id)
                    .and_then(|e| e.dests.get(idx))
                    .is_some_and(|d| !d.queue.is_empty());
                if ours || queued {
                    let respond = ours.then_some(repr.tid);
                    match self.query_route(cx, id, &src, respond) {
                        Ok(()) => return,
                        Err(e) => status = e,
                    }
                } else {
                    return;
                }
            }
            DestState::QueryRoute => return,
            _ => {}
        }
        self.finish_request(cx, id, idx, ours, status);
    }

    /// The "finish" step of a peer's request: answer our queued clients, and the peer
    /// if the request was for us and succeeded.
    fn finish_request(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        ours: bool,
        status: Status,
    ) {
        self.complete_queue(cx, id, idx, status);
        if !ours || status != Status::SUCCESS {
            return;
        }
        let Some(ep) = self.eps.get(&id) else { return };
        let Some(d) = ep.dests.get(idx) else { return };
        let Some(mgid) = ep.groups.get(usize::from(d.group)).map(|g| g.mgid) else {
            return;
        };
        let (av, tid) = (d.av, d.req_id);
        self.send_response(cx, id, av, tid, mgid);
    }
}

/// The source address a resolve request of ours names (its MAD is ours, so it
/// parses).
fn request_src(mad: &Mad) -> Option<Address> {
    let p = AcmMadPacket::new_checked(&mad.0[..]).ok()?;
    let rec = AcmMadRepr::from_packet(&p).rec;
    Some(Address {
        ty: rec.src_type,
        bytes: rec.src,
    })
}

/// The sender's GID from a received GRH: the receiver requires it
/// (docs/protocol/acm-mad.md §1).
fn grh_sgid(grh: Option<&[u8]>) -> Option<Gid> {
    grh.and_then(|g| GrhPacket::new_checked(g).ok())
        .map(|g| g.sgid())
}
