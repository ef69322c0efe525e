//! Bounded, fair resolution: what ibacmp does so that one local client
//! cannot hold every other client's new destination behind its own.
//!
//! The reference resolves one destination at a time per endpoint in arrival order and
//! goes on with a lookup after everyone who asked has gone, so 4,096 requests for
//! unreachable addresses from one connection held every other client's new destination
//! for hours. Here:
//!
//! * every client connection's distinct pending destinations are counted, and a request
//!   for one more than `max_pending_per_client` is answered ENOMEM at once;
//! * credits go round-robin over the clients waiting for lookups (by rounds,
//!   `ResolveQueue`), so another client's new destination waits for at most one lookup
//!   to finish;
//! * a NODELAY miss starts a background lookup only while the endpoint has fewer than
//!   `max_background_resolves`, and background lookups take credits last;
//! * when a connection closes, its replies are dropped from the destination queues, and
//!   an address lookup that no live client (or the kernel) still waits for is cancelled:
//!   taken out of the resolve queue, or, in flight, stopped and its credit given back.
//!   Route queries already handed to the SA are left to finish (they are short, and the
//!   kernel cannot take a umad send back).

use super::dest::DestIdx;
use super::endpoint::{Ep, Turn, WaitFor};
use super::{Acmp, Dest, DestState};
use crate::counters::LookupEvent;
use crate::fxhash::{FxBuildHasher, SeqBuildHasher};
use crate::io::{ConnId, EndpointId};
use crate::log::{Level, log};
use crate::provider::{Ctx, PendingReply};
use alloc::vec::Vec;
use hashbrown::{HashMap, HashSet};

/// A destination a client waits on: its endpoint and cache slot. A slot is not emptied
/// while requests are queued on it (its queue is taken first), so the pair names one
/// destination for as long as the wait lasts.
type Wait = (EndpointId, DestIdx);

/// The destinations one client connection waits on. Almost every client waits on one
/// (librdmacm and libacm ask one thing at a time), and a storm has one such client per
/// request, so one is kept inline: the table then costs a few dozen bytes per waiting
/// client and no allocation.
#[derive(Debug)]
enum Waits {
    One(Wait),
    // Boxed, so that the common case's table entry stays small.
    #[allow(clippy::box_collection)]
    Many(alloc::boxed::Box<Vec<Wait>>),
}

impl Waits {
    fn len(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Many(v) => v.len(),
        }
    }

    fn contains(&self, w: Wait) -> bool {
        match self {
            Self::One(x) => *x == w,
            Self::Many(v) => v.contains(&w),
        }
    }

    fn insert(&mut self, w: Wait) {
        match self {
            Self::One(x) if *x == w => {}
            Self::One(x) => *self = Self::Many(alloc::boxed::Box::new(alloc::vec![*x, w])),
            Self::Many(v) => {
                if !v.contains(&w) {
                    v.push(w);
                }
            }
        }
    }

    fn to_vec(&self) -> Vec<Wait> {
        match self {
            Self::One(x) => alloc::vec![*x],
            Self::Many(v) => v.to_vec(),
        }
    }
}

/// Every client connection that waits on something, and those whose refusal was logged.
///
/// Keyed by connection only: when a connection closes, its entry goes and its requests
/// leave every destination queue ([`Acmp::close_client`]), so nothing of an earlier
/// life of a reused id is left to be confused with the next.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    waits: HashMap<ConnId, Waits, SeqBuildHasher>,
    /// Connections told about `max_pending_per_client` (once each; the rest counted).
    warned: HashSet<ConnId, FxBuildHasher>,
}

/// Takes every request queued on destination `idx` (`d`) of endpoint `id` (to answer
/// them), and forgets that their clients wait on it.
pub(super) fn take_queue(
    clients: &mut Clients,
    id: EndpointId,
    idx: DestIdx,
    d: &mut Dest,
) -> Vec<PendingReply> {
    let queue = core::mem::take(&mut d.queue);
    for r in &queue {
        if let Some((conn, _)) = r.client() {
            clients.forget(conn, |w| w == (id, idx));
        }
    }
    queue
}

/// Takes every request queued on endpoint `id`'s destinations (it is going away).
pub(super) fn take_all_queues(
    clients: &mut Clients,
    id: EndpointId,
    ep: &mut Ep,
) -> Vec<PendingReply> {
    let mut replies = Vec::new();
    for d in ep.dests.iter_mut() {
        replies.append(&mut d.queue);
    }
    for r in &replies {
        if let Some((conn, _)) = r.client() {
            clients.forget(conn, |w| w.0 == id);
        }
    }
    replies
}

/// Notes that the client of `reply` waits on destination `idx` of endpoint `id`.
pub(super) fn note_wait(clients: &mut Clients, id: EndpointId, idx: DestIdx, reply: &PendingReply) {
    let Some((conn, _)) = reply.client() else {
        return;
    };
    match clients.waits.get_mut(&conn) {
        Some(w) => w.insert((id, idx)),
        None => {
            clients.waits.insert(conn, Waits::One((id, idx)));
        }
    }
}

impl Clients {
    /// `conn` no longer waits on the destinations `gone` selects.
    fn forget(&mut self, conn: ConnId, gone: impl Fn(Wait) -> bool) {
        let Some(w) = self.waits.get_mut(&conn) else {
            return;
        };
        let empty = match w {
            Waits::One(x) => gone(*x),
            Waits::Many(v) => {
                v.retain(|x| !gone(*x));
                v.is_empty()
            }
        };
        if empty {
            self.waits.remove(&conn);
        }
    }
}

impl Acmp {
    /// Whether the client of `reply` may wait on destination `idx` of endpoint `id`, and
    /// if so the round its lookup takes (`ResolveQueue`): the number of destinations it
    /// already waits on. It may when it already waits on this one, or on fewer than
    /// `max_pending_per_client`; otherwise the refusal is counted (and logged once per
    /// connection). The kernel is not bounded, and its lookups take the first round.
    pub(super) fn admit(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        idx: DestIdx,
        reply: &PendingReply,
    ) -> Option<u32> {
        let Some((conn, _)) = reply.client() else {
            return Some(0);
        };
        let limit = self.opts.max_pending_per_client;
        let Some(w) = self.clients.waits.get(&conn) else {
            return (limit > 0).then_some(0);
        };
        let n = w.len();
        if n < limit || w.contains((id, idx)) {
            return Some(n as u32);
        }
        cx.count_lookup(LookupEvent::Rejected);
        if self.clients.warned.insert(conn) {
            log!(
                cx,
                Level::Basic,
                "acmp_resolve",
                "client {} waits on {limit} destinations (max_pending_per_client); requests for more get ENOMEM",
                conn.0
            );
        }
        None
    }

    /// Background lookups of endpoint `ep`: in flight, or waiting with nobody queued on
    /// their destination. Drops the background turns that no longer are.
    pub(super) fn background_lookups(ep: &mut Ep) -> usize {
        let in_flight = ep.requests.values().filter(|r| r.background).count();
        let Ep {
            resolve_q, dests, ..
        } = ep;
        let waiting = |tid: &u64| {
            resolve_q
                .get(*tid)
                .filter(|w| w.turn == Turn::Background)
                .and_then(|w| match &w.dest {
                    WaitFor::Slot(i) => dests.get(*i),
                    WaitFor::Addr(a) => dests.find(a).and_then(|i| dests.get(i)),
                })
                .is_some_and(|d| d.queue.is_empty())
        };
        let live: Vec<u64> = resolve_q
            .background
            .iter()
            .copied()
            .filter(waiting)
            .collect();
        resolve_q.background = live.into();
        in_flight + resolve_q.background.len()
    }

    /// The first request someone waits for joined destination `idx`, whose address
    /// lookup may have been a NODELAY request's background one: it is now a lookup
    /// someone waits for (in flight, it stops counting as background; waiting, it gets
    /// a turn in `round`).
    pub(super) fn promote(ep: &mut Ep, idx: super::dest::DestIdx, round: u32) {
        let Some(addr) = ep.dests.get(idx).map(|d| d.addr) else {
            return;
        };
        for r in ep.requests.values_mut() {
            if r.background && r.dest == addr {
                r.background = false;
                return;
            }
        }
        let tid = ep.resolve_q.background.iter().copied().find(|tid| {
            ep.resolve_q
                .get(*tid)
                .is_some_and(|w| ep.waiting_dest(&w.dest).is_some_and(|(a, _)| a == addr))
        });
        if let Some(tid) = tid {
            ep.resolve_q.promote(tid, round);
        }
    }

    /// Client connection `conn` closed: drop its replies, cancel the address lookups
    /// nobody else waits for, and hand the turns of the others to a remaining waiter.
    pub(super) fn close_client(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        self.clients.warned.remove(&conn);
        let Some(waits) = self.clients.waits.remove(&conn) else {
            return;
        };
        let waits = waits.to_vec();
        let mut eps: Vec<EndpointId> = Vec::new();
        let mut orphans: Vec<Wait> = Vec::new();
        for &(id, idx) in &waits {
            if !eps.contains(&id) {
                eps.push(id);
            }
            let Some(d) = self.eps.get_mut(&id).and_then(|ep| ep.dests.get_mut(idx)) else {
                continue;
            };
            let mut kept = Vec::with_capacity(d.queue.len());
            for r in core::mem::take(&mut d.queue) {
                if r.client().is_some_and(|(c, _)| c == conn) {
                    cx.discard(r);
                } else {
                    kept.push(r);
                }
            }
            d.queue = kept;
            if d.queue.is_empty() && d.state == DestState::QueryAddr {
                orphans.push((id, idx));
            }
        }
        let mut cancelled = 0usize;
        // Lookups still waiting for a credit that nobody waits for: out of the queue.
        for &id in &eps {
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            // Those not in flight (a scan of at most `resolve_depth` requests) wait in
            // the queue: one pass over it finds them all.
            let gone: Vec<DestIdx> = orphans
                .iter()
                .filter(|(e, _)| *e == id)
                .map(|&(_, i)| i)
                .filter(|&i| {
                    let addr = ep.dests.get(i).map(|d| d.addr);
                    !ep.requests.values().any(|r| Some(r.dest) == addr)
                })
                .collect();
            if gone.is_empty() {
                continue;
            }
            cancelled += ep
                .resolve_q
                .remove_where(|w| matches!(w.dest, WaitFor::Slot(i) if gone.contains(&i)));
            // Neighbour-table lookups of those destinations stop too (their answers
            // and polls find the destination idle and are dropped).
            let addrs: Vec<_> = gone
                .iter()
                .filter_map(|&i| ep.dests.get(i).map(|d| d.addr))
                .collect();
            let before = self.neigh_waits.len();
            self.neigh_waits
                .retain(|_, w| !(w.ep == id && addrs.contains(&w.dest)));
            cancelled += before - self.neigh_waits.len();
            for &i in &gone {
                if let Some(d) = ep.dests.get_mut(i) {
                    d.state = DestState::Init;
                }
            }
        }
        // Lookups in flight that nobody waits for any more: stopped, their credit back.
        for (id, idx) in orphans {
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            let Some(addr) = ep
                .dests
                .get(idx)
                .filter(|d| d.state == DestState::QueryAddr)
                .map(|d| d.addr)
            else {
                continue;
            };
            let tid = ep
                .requests
                .iter()
                .find(|(_, r)| r.dest == addr && !r.background)
                .map(|(&tid, _)| tid);
            let Some(tid) = tid else { continue };
            let sending = ep.requests.remove(&tid).is_some_and(|r| r.sending);
            if let Some(d) = ep.dests.get_mut(idx) {
                d.state = DestState::Init;
            }
            cancelled += 1;
            // A send still posted gives its credit back when it completes.
            if !sending {
                self.release_request_credit(cx, id);
            }
        }
        for _ in 0..cancelled {
            cx.count_lookup(LookupEvent::Cancelled);
        }
        if cancelled > 0 {
            log!(
                cx,
                Level::Verbose,
                "acmp_client_closed",
                "client {}: {cancelled} lookup(s) nobody else waits for cancelled",
                conn.0
            );
        }
    }
}
