//! Address lookups through the address protocols of `addr_prot`, in order
//! (docs/protocol/ipoib-neigh.md §3): ACM multicast (`protocol.rs`) and the host's
//! IPoIB neighbour table (here). A destination's lookup starts with the list's first
//! protocol; when one fails or times out, the next one starts, and only the last one's
//! failure reaches the clients.
//!
//! A neighbour lookup asks the fabric ([`crate::FabricOp::NeighQuery`]). While the
//! table's entry is incomplete (the kernel is resolving it), the lookup asks again,
//! each time after twice the wait before ([`FIRST_POLL`] up to [`MAX_POLL`]), the last
//! time at `timeout` × (`retries` + 1) after the first, the bound an ACM lookup has
//! too; an entry still incomplete then fails the lookup with ETIMEDOUT, and so does a
//! fabric that has not answered [`MAX_POLL`] after the bound. A found entry gives
//! the peer's GID; the route then comes from the SA, whatever `route_prot` says: the
//! neighbour table has no LID to build a route from the multicast group with.

use super::{Acmp, DestState, Timer};
use crate::addr::Address;
use crate::config::AddrProt;
use crate::counters::Counter;
use crate::io::{AddressVector, EndpointId, GlobalRoute, NeighId, NeighResult};
use crate::log::{Level, log};
use crate::provider::Ctx;
use crate::time::Instant;
use acm_proto::Gid;
use acm_proto::client::Status;
use acm_proto::path_record::PathRecordPacket;
use core::time::Duration;

/// The wait before asking the neighbour table again the first time: an IPoIB ARP
/// exchange takes well under a millisecond, so the second question usually finds the
/// entry.
pub(super) const FIRST_POLL: Duration = Duration::from_millis(10);

/// The longest wait between two questions.
pub(super) const MAX_POLL: Duration = Duration::from_millis(500);

/// A neighbour lookup under way.
#[derive(Debug, Clone)]
pub(super) struct NeighWait {
    pub(super) ep: EndpointId,
    pub(super) dest: Address,
    /// The request's source, for an ACM lookup that may follow.
    pub(super) src: Address,
    /// The place in the destination's protocol list it fills.
    pub(super) step: u8,
    /// When it gives up with ETIMEDOUT.
    pub(super) deadline: Instant,
    /// The wait before the next question.
    pub(super) delay: Duration,
}

impl Acmp {
    /// Starts destination `idx`'s address lookup with the first protocol of
    /// `addr_prot` that can start (`round`: its ACM turn, `None` in the background).
    pub(super) fn start_addr_lookup(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        src: &Address,
        dest: &Address,
        idx: super::dest::DestIdx,
        round: Option<u32>,
    ) -> Result<(), Status> {
        let prots = self.opts.addr_prot;
        if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
            d.addr_prots = prots;
        }
        self.try_addr_from(cx, id, src, dest, idx, round, 0)
    }

    /// Tries the destination's protocols from place `step` on, until one starts; the
    /// last one's error if none does.
    #[allow(clippy::too_many_arguments)]
    fn try_addr_from(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        src: &Address,
        dest: &Address,
        idx: super::dest::DestIdx,
        round: Option<u32>,
        step: usize,
    ) -> Result<(), Status> {
        let Some(prots) = self
            .eps
            .get(&id)
            .and_then(|e| e.dests.get(idx))
            .map(|d| d.addr_prots)
        else {
            return Err(Status::ENODATA);
        };
        let mut last = Err(Status::ENODATA);
        for (i, &p) in prots.as_slice().iter().enumerate().skip(step) {
            let place = i as u8;
            // The place is set first: an ACM request may be answered (or refused) at
            // once, and its answer must find the destination at this place.
            if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
                d.addr_step = place;
                d.state = DestState::QueryAddr;
            }
            let started = match p {
                AddrProt::Acm => self.send_request(cx, id, src, dest, idx, round),
                AddrProt::Neigh => self.neigh_start(cx, id, src, dest, place),
            };
            match started {
                Ok(()) => return Ok(()),
                Err(e) => {
                    log!(
                        cx,
                        Level::Verbose,
                        "acmp_addr_prot",
                        "{dest}: {} could not start (status {}){}",
                        p.name(),
                        e.0,
                        if i + 1 < prots.as_slice().len() {
                            "; trying the next protocol"
                        } else {
                            ""
                        }
                    );
                    last = Err(e);
                }
            }
        }
        if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
            d.state = DestState::Init;
        }
        last
    }

    /// The protocol at destination `idx`'s current place failed with `status`: the
    /// next protocol of its list starts, or, with none left (or none that starts),
    /// every request waiting on it is answered with the failure. `src`: the request's
    /// source, when the failed protocol knows it.
    pub(super) fn addr_failed(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        src: Option<Address>,
        status: Status,
    ) {
        let Some(ep) = self.eps.get(&id) else {
            return;
        };
        let Some(d) = ep.dests.get(idx) else {
            return;
        };
        let (dest, next, waiting) = (d.addr, usize::from(d.addr_step) + 1, !d.queue.is_empty());
        let failed = d.addr_prots.get(next - 1);
        if let Some(then) = d.addr_prots.get(next) {
            log!(
                cx,
                Level::Verbose,
                "acmp_addr_prot",
                "{dest}: {} failed (status {}); trying {}",
                failed.map_or("?", AddrProt::name),
                status.0,
                then.name()
            );
            // Without the request's source (an ACM lookup that timed out), an ACM
            // request that follows names the endpoint's first address.
            let src = src.or_else(|| ep.addrs.first()).unwrap_or(dest);
            let round = waiting.then_some(0);
            match self.try_addr_from(cx, id, &src, &dest, idx, round, next) {
                Ok(()) => return,
                Err(e) => return self.addr_give_up(cx, id, idx, e),
            }
        }
        self.addr_give_up(cx, id, idx, status);
    }

    fn addr_give_up(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        status: Status,
    ) {
        if let Some(d) = self.eps.get_mut(&id).and_then(|e| e.dests.get_mut(idx)) {
            d.state = DestState::Init;
        }
        self.complete_queue(cx, id, idx, status);
    }

    /// Starts a neighbour lookup for `dest` (place `step` of its list); ENODATA for a
    /// destination that is not an IP address.
    fn neigh_start(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        src: &Address,
        dest: &Address,
        step: u8,
    ) -> Result<(), Status> {
        let Some(ip) = dest.as_ip() else {
            return Err(Status::ENODATA);
        };
        let bound = Duration::from_millis(
            u64::from(self.opts.timeout_ms) * (u64::from(self.opts.retries) + 1),
        );
        let Some(ep) = self.eps.get_mut(&id) else {
            return Err(Status::ENODATA);
        };
        let Some(gid) = self.ports.get(&ep.port).map(crate::PortAttrs::gid0) else {
            return Err(Status::ENODATA);
        };
        let (port, pkey) = (ep.port, ep.pkey);
        cx.count(Counter::AddrQuery);
        ep.counters.bump(Counter::AddrQuery);
        let wait = NeighWait {
            ep: id,
            dest: *dest,
            src: *src,
            step,
            deadline: cx.now() + bound,
            delay: FIRST_POLL,
        };
        let n = self.next_neigh_wait;
        self.next_neigh_wait += 1;
        // A backend that never answers must not hold the clients for ever: past the
        // bound, and the longest wait for an answer after it, the lookup fails.
        self.set_timer(wait.deadline + MAX_POLL, Timer::NeighGiveUp { wait: n });
        self.neigh_waits.insert(n, wait);
        let q = cx.neigh_query(port, gid, pkey, ip);
        self.neigh_ids.insert(q, n);
        log!(
            cx,
            Level::Verbose,
            "acmp_neigh",
            "{dest}: asking the neighbour table"
        );
        Ok(())
    }

    /// Neighbour lookups of endpoint `id` that nobody waits for (a NODELAY request's
    /// warm-up): they count against `max_background_resolves` with the ACM ones.
    pub(super) fn neigh_background(&self, id: EndpointId) -> usize {
        let Some(ep) = self.eps.get(&id) else {
            return 0;
        };
        self.neigh_waits
            .values()
            .filter(|w| w.ep == id)
            .filter(|w| {
                ep.dests
                    .find(&w.dest)
                    .and_then(|i| ep.dests.get(i))
                    .is_some_and(|d| d.queue.is_empty())
            })
            .count()
    }

    /// The destination slot a neighbour lookup still serves: its destination is still
    /// looking its address up, at the lookup's place.
    fn neigh_slot(&self, w: &NeighWait) -> Option<super::dest::DestIdx> {
        let ep = self.eps.get(&w.ep)?;
        let idx = ep.dests.find(&w.dest)?;
        let d = ep.dests.get(idx)?;
        (d.state == DestState::QueryAddr && d.addr_step == w.step).then_some(idx)
    }

    /// The neighbour table answered question `q`.
    pub(super) fn neigh_answered(&mut self, cx: &mut Ctx<'_>, q: NeighId, result: NeighResult) {
        let Some(n) = self.neigh_ids.remove(&q) else {
            return;
        };
        let Some(w) = self.neigh_waits.get(&n).cloned() else {
            return;
        };
        let Some(idx) = self.neigh_slot(&w) else {
            // Resolved meanwhile (a peer's ACM request taught us), or cancelled.
            self.neigh_waits.remove(&n);
            return;
        };
        let now = cx.now();
        match result {
            NeighResult::Found { qpn, gid } => {
                self.neigh_waits.remove(&n);
                log!(
                    cx,
                    Level::Verbose,
                    "acmp_neigh",
                    "{}: qpn {qpn:#x} gid {gid}",
                    w.dest
                );
                self.neigh_found(cx, w.ep, idx, qpn, gid);
            }
            NeighResult::Incomplete if now < w.deadline => {
                // The last wait ends at the bound, where the last question is asked.
                let at = (now + w.delay).min(w.deadline);
                if let Some(w) = self.neigh_waits.get_mut(&n) {
                    w.delay = (w.delay * 2).min(MAX_POLL);
                }
                self.set_timer(at, Timer::Neigh { wait: n });
            }
            NeighResult::Incomplete => {
                self.neigh_waits.remove(&n);
                log!(
                    cx,
                    Level::Verbose,
                    "acmp_neigh",
                    "{}: still incomplete at the bound; timed out",
                    w.dest
                );
                self.addr_failed(cx, w.ep, idx, Some(w.src), Status::ETIMEDOUT);
            }
            NeighResult::Unreachable => {
                self.neigh_waits.remove(&n);
                log!(cx, Level::Verbose, "acmp_neigh", "{}: unreachable", w.dest);
                self.addr_failed(cx, w.ep, idx, Some(w.src), Status::ENODATA);
            }
        }
    }

    /// Lookup `n` is past its bound and the answer to its last question: if it is still
    /// waiting (the fabric never answered), it fails with ETIMEDOUT.
    pub(super) fn neigh_give_up(&mut self, cx: &mut Ctx<'_>, n: u64) {
        let Some(w) = self.neigh_waits.remove(&n) else {
            return;
        };
        self.neigh_ids.retain(|_, &mut x| x != n);
        if let Some(idx) = self.neigh_slot(&w) {
            log!(
                cx,
                Level::Basic,
                "acmp_neigh",
                "{}: the neighbour table did not answer; timed out",
                w.dest
            );
            self.addr_failed(cx, w.ep, idx, Some(w.src), Status::ETIMEDOUT);
        }
    }

    /// Time to ask the neighbour table again for lookup `n`.
    pub(super) fn neigh_poll_due(&mut self, cx: &mut Ctx<'_>, n: u64) {
        let Some(w) = self.neigh_waits.get(&n).cloned() else {
            return;
        };
        if self.neigh_slot(&w).is_none() {
            self.neigh_waits.remove(&n);
            return;
        }
        let (Some(ip), Some(ep)) = (w.dest.as_ip(), self.eps.get(&w.ep)) else {
            self.neigh_waits.remove(&n);
            return;
        };
        let Some(gid) = self.ports.get(&ep.port).map(crate::PortAttrs::gid0) else {
            self.neigh_waits.remove(&n);
            return;
        };
        let q = cx.neigh_query(ep.port, gid, ep.pkey, ip);
        self.neigh_ids.insert(q, n);
    }

    /// The neighbour table gave destination `idx`'s peer: its GID, and the QPN of its
    /// IPoIB interface. The address is recorded as an ACM answer records it, on the
    /// endpoint's first group (there is no peer to choose a group with), and the route
    /// is asked of the SA.
    fn neigh_found(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: super::dest::DestIdx,
        qpn: u32,
        gid: Gid,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some((gav, gpath)) = ep.groups.first().map(|g| (g.av, g.path)) else {
            return self.addr_give_up(cx, id, idx, Status::ENODATA);
        };
        let Some(d) = ep.dests.get_mut(idx) else {
            return;
        };
        d.av = AddressVector {
            dlid: 0,
            src_path_bits: 0,
            grh: GlobalRoute {
                dgid: gid,
                ..gav.grh
            },
            remote_qpn: qpn,
            ..gav
        };
        d.group = 0;
        let gp = PathRecordPacket::new_unchecked(&gpath[..]);
        let mut p = PathRecordPacket::new_unchecked(&mut d.path[..]);
        p.set_sgid(gp.sgid());
        p.set_tclass(gp.tclass());
        p.set_pkey(gp.pkey());
        p.set_dgid(gid);
        d.remote_qpn = qpn;
        d.state = DestState::AddrResolved;
        let dest = d.addr;
        if let Err(e) = self.query_route(cx, id, &dest, None) {
            self.addr_give_up(cx, id, idx, e);
        }
    }
}
