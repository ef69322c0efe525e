//! Bounded, fair resolution (issue 15): what ibacmp does so that one local client
//! cannot hold every other client's new destination behind its own.
//!
//! The reference resolves one destination at a time per endpoint in arrival order and
//! goes on with a lookup after everyone who asked has gone, so 4,096 requests for
//! unreachable addresses from one connection held every other client's new destination
//! for hours. Here:
//!
//! * every client connection's distinct pending destinations are counted, and a request
//!   for one more than `max_pending_per_client` is answered ENOMEM at once;
//! * credits go round-robin over the owners of waiting lookups ([`Owner`]), so another
//!   client's new destination waits for at most one lookup to finish;
//! * a NODELAY miss starts a background lookup only while the endpoint has fewer than
//!   `max_background_resolves`, and background lookups take credits last;
//! * when a connection closes, its replies are dropped from the destination queues, and
//!   an address lookup that no live client (or the kernel) still waits for is cancelled:
//!   taken out of the resolve queue, or, in flight, stopped and its credit given back.
//!   Route queries already handed to the SA are left to finish (they are short, and the
//!   kernel cannot take a umad send back).

use super::endpoint::{Ep, Owner};
use super::{Acmp, Dest, DestState};
use crate::addr::Address;
use crate::counters::LookupEvent;
use crate::fxhash::FxBuildHasher;
use crate::io::{ConnId, EndpointId};
use crate::log::{Level, log};
use crate::provider::{Ctx, PendingReply};
use alloc::vec::Vec;
use hashbrown::{HashMap, HashSet};

/// What one client connection waits on.
#[derive(Debug, Default)]
pub(crate) struct ClientWaits {
    /// The life of the connection these are for (ids are reused after a close).
    epoch: u64,
    /// The destinations (by endpoint) it has requests queued on.
    dests: HashSet<(EndpointId, Address), FxBuildHasher>,
    /// Whether its first refusal was logged (the rest are only counted).
    warned: bool,
}

/// Every client connection that waits on something.
pub(crate) type Clients = HashMap<ConnId, ClientWaits, FxBuildHasher>;

/// Who a request's lookup is charged to: its client, or the kernel.
pub(super) fn owner_of(reply: &PendingReply) -> Owner {
    match reply.client() {
        Some((conn, _)) => Owner::Client(conn),
        None => Owner::Kernel,
    }
}

/// Takes every request queued on destination `d` of endpoint `id` (to answer them), and
/// forgets that their clients wait on it.
pub(super) fn take_queue(clients: &mut Clients, id: EndpointId, d: &mut Dest) -> Vec<PendingReply> {
    let queue = core::mem::take(&mut d.queue);
    for r in &queue {
        forget_wait(clients, id, &d.addr, r);
    }
    queue
}

/// Notes that the client of `reply` waits on `dest` of endpoint `id`.
pub(super) fn note_wait(
    clients: &mut Clients,
    id: EndpointId,
    dest: &Address,
    reply: &PendingReply,
) {
    let Some((conn, epoch)) = reply.client() else {
        return;
    };
    let c = clients.entry(conn).or_default();
    if c.epoch != epoch {
        *c = ClientWaits {
            epoch,
            ..ClientWaits::default()
        };
    }
    c.dests.insert((id, *dest));
}

/// The client of `r` no longer waits on `addr` of endpoint `id`.
fn forget_wait(clients: &mut Clients, id: EndpointId, addr: &Address, r: &PendingReply) {
    let Some((conn, epoch)) = r.client() else {
        return;
    };
    if let Some(c) = clients.get_mut(&conn)
        && c.epoch == epoch
    {
        c.dests.remove(&(id, *addr));
        if c.dests.is_empty() {
            clients.remove(&conn);
        }
    }
}

impl Acmp {
    /// Whether the client of `reply` may wait on `dest` of endpoint `id`: it already
    /// does, or it waits on fewer than `max_pending_per_client` destinations. The
    /// kernel is not bounded.
    pub(super) fn may_wait(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        dest: &Address,
        reply: &PendingReply,
    ) -> bool {
        let Some((conn, epoch)) = reply.client() else {
            return true;
        };
        let limit = self.opts.max_pending_per_client;
        let Some(c) = self.clients.get_mut(&conn).filter(|c| c.epoch == epoch) else {
            return limit > 0;
        };
        if c.dests.len() < limit || c.dests.contains(&(id, *dest)) {
            return true;
        }
        cx.count_lookup(LookupEvent::Rejected);
        if !c.warned {
            c.warned = true;
            log!(
                cx,
                Level::Basic,
                "acmp_resolve",
                "client {} waits on {limit} destinations (max_pending_per_client); requests for more get ENOMEM",
                conn.0
            );
        }
        false
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
                .and_then(|w| match &w.dest {
                    super::endpoint::WaitFor::Slot(i) => dests.get(*i),
                    super::endpoint::WaitFor::Addr(a) => dests.find(a).and_then(|i| dests.get(i)),
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
    /// lookup may have been a NODELAY request's background one: it is now charged to
    /// `owner` (a lookup in flight stops counting as background; a waiting one gets a
    /// turn with `owner`).
    pub(super) fn promote(ep: &mut Ep, idx: super::dest::DestIdx, owner: Owner) {
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
            ep.resolve_q.give_turn(owner, tid);
        }
    }

    /// Client connection `conn` closed: drop its replies, cancel the address lookups
    /// nobody else waits for, and hand the turns of the others to a remaining waiter.
    pub(super) fn close_client(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        let Some(waits) = self.clients.remove(&conn) else {
            return;
        };
        let mut eps: Vec<EndpointId> = Vec::new();
        let mut orphans: Vec<(EndpointId, Address)> = Vec::new();
        for &(id, addr) in &waits.dests {
            if !eps.contains(&id) {
                eps.push(id);
            }
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            let Some(d) = ep.dests.find(&addr).and_then(|i| ep.dests.get_mut(i)) else {
                continue;
            };
            let mut kept = Vec::with_capacity(d.queue.len());
            for r in core::mem::take(&mut d.queue) {
                if r.client() == Some((conn, waits.epoch)) {
                    cx.discard(r);
                } else {
                    kept.push(r);
                }
            }
            d.queue = kept;
            if d.queue.is_empty() && d.state == DestState::QueryAddr {
                orphans.push((id, addr));
            }
        }
        let mut cancelled = 0usize;
        // Lookups still waiting for a credit: charged to `conn`, they move to a
        // remaining waiter, or leave the queue when there is none.
        for &id in &eps {
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            for tid in ep.resolve_q.take_turns(Owner::Client(conn)) {
                let Some(w) = ep.resolve_q.get(tid) else {
                    continue;
                };
                let Some((_, Some(idx))) = ep.waiting_dest(&w.dest) else {
                    ep.resolve_q.remove(tid);
                    continue;
                };
                let next = ep
                    .dests
                    .get(idx)
                    .and_then(|d| d.queue.first())
                    .map(owner_of);
                match next {
                    Some(owner) => ep.resolve_q.give_turn(owner, tid),
                    None => {
                        ep.resolve_q.remove(tid);
                        if let Some(d) = ep.dests.get_mut(idx) {
                            d.state = DestState::Init;
                        }
                        cancelled += 1;
                    }
                }
            }
        }
        // Lookups in flight that nobody waits for any more: stopped, their credit back.
        for (id, addr) in orphans {
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            let Some(idx) = ep.dests.find(&addr) else {
                continue;
            };
            if ep.dests.get(idx).map(|d| d.state) != Some(DestState::QueryAddr) {
                continue;
            }
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
