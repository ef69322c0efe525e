//! ibacmp's per-endpoint state: multicast groups, the destination cache, the two send
//! queues with their credits, outstanding ACM requests and counters.

use super::dest::{DestCache, DestIdx};
use crate::addr::Address;
use crate::counters::Counters;
use crate::device::PortId;
use crate::io::{AddressVector, Mad, SendToken};
use crate::time::Instant;
use acm_proto::acm_mad::ACM_MAD_MAX_GIDS;
use acm_proto::{Gid, Mtu, Rate};
use alloc::boxed::Box;
use alloc::collections::BinaryHeap;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cmp::Reverse;

/// Whether the endpoint can resolve: READY once group 0 is joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpState {
    /// Group 0 not joined (yet, or the join failed).
    Init,
    /// Group 0 joined and attached.
    Ready,
}

/// A multicast group the endpoint joins.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) mgid: Gid,
    pub(crate) rate: Rate,
    pub(crate) mtu: Mtu,
    /// Joined: the SA answered.
    pub(crate) joined: bool,
    /// The join MAD in flight, if any.
    pub(crate) join_tid: Option<u64>,
    pub(crate) mlid: u16,
    /// Where sends to the group go (and the template of unicast responses).
    pub(crate) av: AddressVector,
    /// The group's path (docs/protocol/sa.md §5): used by `route_prot acm` and for
    /// sgid/tclass/pkey.
    pub(crate) path: [u8; 64],
    pub(crate) attached: bool,
}

impl Group {
    pub(crate) fn new(mgid: Gid, rate: Rate, mtu: Mtu) -> Self {
        Self {
            mgid,
            rate,
            mtu,
            joined: false,
            join_tid: None,
            mlid: 0,
            av: AddressVector::default(),
            path: [0; 64],
            attached: false,
        }
    }
}

/// What a UD send is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendKind {
    /// An ACM request with this TID (retried until answered).
    Request(u64),
    /// An ACM response (sent once).
    Response,
}

/// An ACM resolve request of ours that holds a resolve-queue credit: sent, and
/// retransmitted until answered or out of tries.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The destination it resolves.
    pub(crate) dest: Address,
    pub(crate) mad: Mad,
    /// Transmissions left, counting the one in progress.
    pub(crate) tries: u32,
    /// A send is posted and not yet completed.
    pub(crate) sending: bool,
    /// When the current transmission times out (set at send completion).
    pub(crate) expires: Option<Instant>,
    /// When the current transmission was posted (its response's round trip).
    pub(crate) posted: Instant,
    /// Nobody waits for it (a NODELAY request's warm-up): counted against
    /// `max_background_resolves`.
    pub(crate) background: bool,
}

/// A resolve request waiting for a credit. It keeps what its MAD is made of, not the
/// MAD: the MAD is built when a credit frees. A storm queues one per cold destination
/// (most are then dropped unsent: a peer's request taught the address meanwhile), and
/// a 256-byte MAD each was most of the engine's memory.
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    /// Its TID, taken when it was queued (TIDs stay in queue order).
    pub(crate) tid: u64,
    /// The destination it resolves.
    pub(crate) dest: WaitFor,
    /// The source the client named, shared with the other requests naming it.
    pub(crate) src: Rc<Address>,
    /// The groups joined when it was queued (bit `i`: `groups[i]`), which it advertises.
    pub(crate) joined: u32,
    /// Which turns it takes ([`ResolveQueue`]).
    pub(crate) turn: Turn,
}

/// Which turns a waiting lookup takes ([`ResolveQueue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Round 0: its client waited on nothing else. Served first, in arrival order.
    First,
    /// A later round: served by round, then arrival (`ResolveQueue::later`).
    Later,
    /// Nobody waits for it: served last (`ResolveQueue::background`).
    Background,
}

/// The destination a waiting request resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WaitFor {
    /// The cache entry it was queued for, which holds its address: an entry that is
    /// removed first gives its waiting requests their address ([`Ep::unlink_waiting`]),
    /// so this never names a slot that was emptied or reused since.
    Slot(DestIdx),
    /// Its address, once its cache entry was removed.
    Addr(Box<Address>),
}

/// An entry of the resolve queue.
#[derive(Debug, Clone)]
pub(crate) enum Queued {
    /// A request waiting for a credit.
    Request(Waiting),
    /// A request that left the queue out of its place (answered while it waited,
    /// started on its owner's turn, or cancelled), kept by its TID so that the queue
    /// stays in TID order; dropped when it reaches the front.
    Answered(u64),
}

/// The resolve queue (the reference's `resolve_queue`, credits `resolve_depth`) with
/// fair turns. Every waiting lookup is in `pending` in TID order, as before (a response
/// may answer one that was never sent, docs/protocol/acm-mad.md §5); a free credit goes
/// to the lookup with the lowest *round*, then the oldest.
///
/// A lookup's round is how many other destinations its client already waited on when
/// it was queued (`Acmp::admit`): a client's first destination is round 0,
/// its second round 1, and so on. So credits go round-robin over the clients: one
/// client's flood of new destinations takes rounds 1, 2, 3, … while another client's
/// next destination, round 0 (librdmacm and libacm ask one thing at a time), waits only
/// for the lookups already holding credits — where a single FIFO made it wait behind
/// the whole flood.
///
/// Round 0 is served in `pending`'s own order, so a storm (thousands of one-request
/// connections, all in round 0) costs nothing beyond the FIFO it always had; only later
/// rounds have entries in `later`. Lookups nobody waits for (a NODELAY request's
/// warm-up) are in `background`, served only when no round is waiting.
#[derive(Debug, Default)]
pub(crate) struct ResolveQueue {
    /// Credits free: lookups that may be started now.
    pub(crate) credits: u32,
    /// Lookups waiting for a credit, in TID order.
    pub(crate) pending: VecDeque<Queued>,
    /// `pending[..first]` holds no round-0 lookup still waiting.
    first: usize,
    /// `round << 32 | TID` of the lookups in later rounds (TIDs are 32-bit counters, in
    /// arrival order but across a wrap); some may have left `pending` (skipped).
    later: BinaryHeap<Reverse<u64>>,
    /// Background lookups' TIDs, oldest first; some may have left `pending` or been
    /// given a turn since (skipped).
    pub(crate) background: VecDeque<u64>,
}

impl ResolveQueue {
    /// A queue with `credits` credits.
    pub(crate) fn new(credits: u32) -> Self {
        Self {
            credits,
            ..Self::default()
        }
    }

    /// Queues `w` (its TID the newest) in `round`, or in the background (`None`).
    pub(crate) fn push(&mut self, round: Option<u32>, mut w: Waiting) {
        let tid = w.tid;
        w.turn = Self::turn_of(round);
        self.pending.push_back(Queued::Request(w));
        if let Some(r) = round.filter(|&r| r > 0) {
            self.later.push(Reverse(key(r, tid)));
        } else if round.is_none() {
            self.background.push_back(tid);
        }
    }

    fn turn_of(round: Option<u32>) -> Turn {
        match round {
            Some(0) => Turn::First,
            Some(_) => Turn::Later,
            None => Turn::Background,
        }
    }

    /// A background lookup `tid` that a client now waits for takes turns in `round`.
    pub(crate) fn promote(&mut self, tid: u64, round: u32) {
        let Some(i) = position_in(&self.pending, tid) else {
            return;
        };
        let Some(Queued::Request(w)) = self.pending.get_mut(i) else {
            return;
        };
        if w.turn != Turn::Background {
            return;
        }
        if round == 0 {
            w.turn = Turn::First;
            self.first = self.first.min(i);
        } else {
            w.turn = Turn::Later;
            self.later.push(Reverse(key(round, tid)));
        }
    }

    /// The next lookup to start: the oldest of round 0, else the oldest of the lowest
    /// later round, else the oldest background one. It leaves the queue.
    pub(crate) fn next_turn(&mut self) -> Option<Waiting> {
        let found = self
            .next_first()
            .or_else(|| self.next_later())
            .or_else(|| self.next_background());
        self.trim();
        found
    }

    fn next_first(&mut self) -> Option<Waiting> {
        while let Some(e) = self.pending.get_mut(self.first) {
            self.first += 1;
            if let Queued::Request(w) = e
                && w.turn == Turn::First
            {
                let tid = w.tid;
                if let Queued::Request(w) = core::mem::replace(e, Queued::Answered(tid)) {
                    return Some(w);
                }
            }
        }
        None
    }

    fn next_later(&mut self) -> Option<Waiting> {
        while let Some(Reverse(k)) = self.later.pop() {
            if let Some(w) = self.take_if(k & 0xFFFF_FFFF, Turn::Later) {
                return Some(w);
            }
        }
        None
    }

    fn next_background(&mut self) -> Option<Waiting> {
        while let Some(tid) = self.background.pop_front() {
            if let Some(w) = self.take_if(tid, Turn::Background) {
                return Some(w);
            }
        }
        None
    }

    /// Takes lookup `tid` out if it still waits with turns `turn`.
    fn take_if(&mut self, tid: u64, turn: Turn) -> Option<Waiting> {
        let i = position_in(&self.pending, tid)?;
        let e = self.pending.get_mut(i)?;
        if !matches!(e, Queued::Request(w) if w.turn == turn) {
            return None;
        }
        match core::mem::replace(e, Queued::Answered(tid)) {
            Queued::Request(w) => Some(w),
            Queued::Answered(_) => None,
        }
    }

    /// Takes the waiting lookup `tid` out of the queue (answered, or cancelled).
    pub(crate) fn remove(&mut self, tid: u64) -> Option<Waiting> {
        let w = take_in(&mut self.pending, tid);
        self.trim();
        w
    }

    /// Takes out every waiting lookup `cancel` selects; how many.
    pub(crate) fn remove_where(&mut self, cancel: impl Fn(&Waiting) -> bool) -> usize {
        let mut n = 0;
        for e in &mut self.pending {
            if let Queued::Request(w) = e
                && cancel(w)
            {
                *e = Queued::Answered(w.tid);
                n += 1;
            }
        }
        self.trim();
        n
    }

    /// The waiting lookup `tid`, if it still waits.
    pub(crate) fn get(&self, tid: u64) -> Option<&Waiting> {
        match self.pending.get(position_in(&self.pending, tid)?)? {
            Queued::Request(w) => Some(w),
            Queued::Answered(_) => None,
        }
    }

    /// Drops the entries that left the queue from its front, and gives back the room of
    /// an emptied queue unless it is small: a burst of cold destinations can queue
    /// thousands, and the queue would keep room for them.
    fn trim(&mut self) {
        while matches!(self.pending.front(), Some(Queued::Answered(_))) {
            self.pending.pop_front();
            self.first = self.first.saturating_sub(1);
        }
        if self.pending.is_empty() {
            if self.pending.capacity() > 64 {
                self.pending = VecDeque::new();
                self.later = BinaryHeap::new();
            }
            self.first = 0;
            self.background.clear();
            self.later.clear();
        }
    }
}

/// The `later` key of lookup `tid` in `round`.
fn key(round: u32, tid: u64) -> u64 {
    (u64::from(round) << 32) | (tid & 0xFFFF_FFFF)
}

impl Queued {
    pub(crate) fn tid(&self) -> u64 {
        match self {
            Self::Request(w) => w.tid,
            Self::Answered(tid) => *tid,
        }
    }
}

/// A queue that hands out send credits (the reference's `acmp_send_queue`).
#[derive(Debug, Clone)]
pub(crate) struct SendQueue<T> {
    pub(crate) credits: u32,
    /// Waiting for a credit, FIFO.
    pub(crate) pending: VecDeque<T>,
}

/// One endpoint as ibacmp sees it.
#[derive(Debug)]
pub(crate) struct Ep {
    pub(crate) port: PortId,
    pub(crate) pkey: u16,
    pub(crate) state: EpState,
    pub(crate) qpn: Option<u32>,
    /// Lowest priority first: index 0 is the min-rate/min-MTU group.
    pub(crate) groups: Vec<Group>,
    pub(crate) dests: DestCache,
    pub(crate) addrs: OwnAddrs,
    pub(crate) counters: Counters,
    pub(crate) resolve_q: ResolveQueue,
    /// Responses waiting for a credit: where to, and the MAD.
    pub(crate) resp_q: SendQueue<(AddressVector, Mad)>,
    /// Requests holding a credit, by TID.
    pub(crate) requests: BTreeMap<u64, Request>,
    /// The source address of the latest request queued, shared by the next ones that
    /// name it (a host's clients name one or two).
    pub(crate) last_src: Option<Rc<Address>>,
    /// Posted sends by token.
    pub(crate) sends: BTreeMap<SendToken, SendKind>,
    /// When to retry failed joins.
    pub(crate) join_retry: Option<Instant>,
    /// Round trips of the endpoint's ACM requests (request posted to response), which
    /// the retry wait follows (`acm_timeout_max`, docs/ibacmp.md §10).
    pub(crate) rtt: crate::rtt::RttEstimator,
}

impl Ep {
    /// The joined groups as a bit set (bit `i`: `groups[i]`). An endpoint has at most
    /// two groups (the minimum-rate one and the port's own, `open_ep`).
    pub(crate) fn joined_mask(&self) -> u32 {
        self.groups
            .iter()
            .take(32)
            .enumerate()
            .filter(|(_, g)| g.joined)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// MGIDs of the groups in `mask`, lowest priority first (what a request advertises),
    /// and how many there are.
    pub(crate) fn mgids(&self, mask: u32) -> ([Gid; ACM_MAD_MAX_GIDS], usize) {
        let mut out = [Gid::ZERO; ACM_MAD_MAX_GIDS];
        let mut n = 0;
        for (i, g) in self.groups.iter().take(32).enumerate() {
            if mask & (1 << i) != 0 && n < ACM_MAD_MAX_GIDS {
                out[n] = g.mgid;
                n += 1;
            }
        }
        (out, n)
    }

    /// Marks the waiting request `tid` answered, returning its destination. The queue
    /// is in TID order (TIDs are taken as requests are queued) except across a wrap
    /// of the counter, where it is searched in full.
    pub(crate) fn answer_waiting(&mut self, tid: u64) -> Option<Address> {
        let w = self.resolve_q.remove(tid)?;
        self.waiting_dest(&w.dest).map(|(a, _)| a)
    }

    /// The address a waiting request resolves, and its cache entry if it has one.
    pub(crate) fn waiting_dest(&self, dest: &WaitFor) -> Option<(Address, Option<DestIdx>)> {
        match dest {
            WaitFor::Slot(i) => self.dests.get(*i).map(|d| (d.addr, Some(*i))),
            WaitFor::Addr(a) => Some((**a, self.dests.find(a))),
        }
    }

    /// Cache entry `idx`, for `addr`, was removed: the requests waiting for it keep
    /// the address instead.
    pub(crate) fn unlink_waiting(&mut self, idx: DestIdx, addr: &Address) {
        unlink_in(&mut self.resolve_q.pending, idx, addr);
    }

    /// The cache slot of `addr`, made if absent; a full cache (`limit` entries) evicts
    /// an idle entry for it ([`DestCache::acquire`]), and `None` when it has none.
    ///
    /// An evicted entry may still be named by a lookup waiting for a credit whose
    /// destination a peer's request taught meanwhile: the lookup keeps the address
    /// instead (a walk over the resolve queue, which `Limits::send_queue` bounds and
    /// which is empty unless lookups wait for credits), so it never names the slot's
    /// next entry.
    pub(crate) fn acquire_dest(&mut self, addr: &Address, limit: usize) -> Option<DestIdx> {
        let Self {
            dests, resolve_q, ..
        } = self;
        dests.acquire(addr, limit, |i, gone| {
            unlink_in(&mut resolve_q.pending, i, gone);
        })
    }

    /// Evicts entries down to `limit` (a lowered bound); how many went.
    pub(crate) fn shrink_dests(&mut self, limit: usize) -> usize {
        let Self {
            dests, resolve_q, ..
        } = self;
        dests.shrink_to(limit, |i, gone| {
            unlink_in(&mut resolve_q.pending, i, gone);
        })
    }

    /// `src`, shared with the latest request's source when it is the same.
    pub(crate) fn shared_src(&mut self, src: &Address) -> Rc<Address> {
        match &self.last_src {
            Some(s) if **s == *src => Rc::clone(s),
            _ => {
                let s = Rc::new(*src);
                self.last_src = Some(Rc::clone(&s));
                s
            }
        }
    }

    /// Whether `addr` is one of this endpoint's addresses as a peer names it.
    pub(crate) fn owns(&self, addr: &Address) -> bool {
        self.addrs.iter().any(|a| a.matches_peer(addr))
    }

    /// The local group the peer's list shares with highest priority
    /// (docs/protocol/acm-mad.md §6): walk the peer's MGIDs from last to first and take
    /// the first one we have joined.
    pub(crate) fn best_group(&self, peer: &[Gid]) -> Option<usize> {
        peer.iter()
            .rev()
            .find_map(|m| self.groups.iter().position(|g| g.joined && g.mgid == *m))
    }
}

/// The requests of queue `q` waiting for cache entry `idx` wait for `addr` instead
/// ([`Ep::unlink_waiting`]).
fn unlink_in(q: &mut VecDeque<Queued>, idx: DestIdx, addr: &Address) {
    for e in q {
        if let Queued::Request(w) = e
            && w.dest == WaitFor::Slot(idx)
        {
            w.dest = WaitFor::Addr(Box::new(*addr));
        }
    }
}

/// Where the entry of TID `tid` is in queue `q`. The queue is in TID order (TIDs are
/// taken as requests are queued) except across a wrap of the counter, where it is
/// searched in full.
fn position_in(q: &VecDeque<Queued>, tid: u64) -> Option<usize> {
    let sorted = q
        .front()
        .zip(q.back())
        .is_none_or(|(f, b)| f.tid() <= b.tid());
    if sorted {
        q.binary_search_by_key(&tid, Queued::tid).ok()
    } else {
        q.iter().position(|e| e.tid() == tid)
    }
}

/// Takes the waiting request `tid` out of queue `q`, leaving its place marked; the
/// request, if it still waited.
fn take_in(q: &mut VecDeque<Queued>, tid: u64) -> Option<Waiting> {
    let i = position_in(q, tid)?;
    match core::mem::replace(q.get_mut(i)?, Queued::Answered(tid)) {
        Queued::Request(w) => Some(w),
        Queued::Answered(_) => None,
    }
}

/// [`take_in`], for what the request waited for ([`Ep::answer_waiting`]).
/// An endpoint's own addresses, in the order they were added, with an index: adding,
/// removing and finding one costs the logarithm of their number, so that a reload that
/// adds or removes many names costs their number, not its square. The order is kept
/// because the first is the source an ACM request names when it has none of its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnAddrs {
    /// Each address under the number of its arrival.
    by_arrival: BTreeMap<u64, Address>,
    /// Each address's number of arrival.
    arrival: BTreeMap<Address, u64>,
    /// The next number of arrival.
    next: u64,
}

impl OwnAddrs {
    /// Adds `addr` last; false if it is there already.
    pub(crate) fn insert(&mut self, addr: Address) -> bool {
        if self.arrival.contains_key(&addr) {
            return false;
        }
        self.arrival.insert(addr, self.next);
        self.by_arrival.insert(self.next, addr);
        self.next += 1;
        true
    }

    /// Removes `addr`; false if it was not there.
    pub(crate) fn remove(&mut self, addr: &Address) -> bool {
        match self.arrival.remove(addr) {
            Some(n) => self.by_arrival.remove(&n).is_some(),
            None => false,
        }
    }

    /// Whether `addr` is one of them.
    pub(crate) fn contains(&self, addr: &Address) -> bool {
        self.arrival.contains_key(addr)
    }

    /// The one added first of those still there.
    pub(crate) fn first(&self) -> Option<Address> {
        self.by_arrival.values().next().copied()
    }

    /// Them, in the order they were added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Address> {
        self.by_arrival.values()
    }
}

#[cfg(test)]
fn answer_in(q: &mut VecDeque<Queued>, tid: u64) -> Option<WaitFor> {
    take_in(q, tid).map(|w| w.dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(tids: &[u64]) -> VecDeque<Queued> {
        tids.iter()
            .map(|&tid| Queued::Request(waiting(tid)))
            .collect()
    }

    fn waiting(tid: u64) -> Waiting {
        Waiting {
            tid,
            dest: WaitFor::Slot(tid as DestIdx),
            src: Rc::new(Address::name("src")),
            joined: 1,
            turn: Turn::First,
        }
    }

    #[test]
    fn turns_go_by_round_then_arrival_and_background_last() {
        let mut q = ResolveQueue::new(0);
        // TIDs 1..=7 in arrival order, with their rounds (None: background).
        for (tid, round) in [
            (1, Some(2)),
            (2, None),
            (3, Some(0)),
            (4, Some(1)),
            (5, None),
            (6, Some(0)),
            (7, Some(1)),
        ] {
            q.push(round, waiting(tid));
        }
        // A client comes to wait for background lookup 5, in round 0.
        q.promote(5, 0);
        // One answered while it waited leaves its turn.
        assert!(q.remove(6).is_some());
        let order: Vec<u64> = core::iter::from_fn(|| q.next_turn().map(|w| w.tid)).collect();
        assert_eq!(order, [3, 5, 4, 7, 1, 2]);
        assert!(q.pending.is_empty());
        assert!(q.background.is_empty());
    }

    #[test]
    fn cancelled_lookups_leave_every_turn() {
        let mut q = ResolveQueue::new(0);
        q.push(Some(0), waiting(1));
        q.push(Some(3), waiting(2));
        q.push(None, waiting(3));
        q.push(Some(0), waiting(4));
        assert_eq!(q.remove_where(|w| w.tid != 4), 3);
        assert_eq!(q.next_turn().map(|w| w.tid), Some(4));
        assert!(q.next_turn().is_none());
    }

    #[test]
    fn waiting_requests_are_found_by_tid_once() {
        let mut q = queue(&[5, 6, 9, 12]);
        assert_eq!(answer_in(&mut q, 9), Some(WaitFor::Slot(9)));
        assert!(matches!(q[2], Queued::Answered(9)));
        assert_eq!(answer_in(&mut q, 9), None, "answered already");
        assert_eq!(answer_in(&mut q, 7), None);
        assert_eq!(q.len(), 4, "answered requests keep their place");
        // Across a wrap of the TID counter the queue is searched in full.
        let mut q = queue(&[0xFFFF_FFFE, 0xFFFF_FFFF, 1, 2]);
        assert_eq!(answer_in(&mut q, 1), Some(WaitFor::Slot(1)));
        assert_eq!(
            answer_in(&mut q, 0xFFFF_FFFF),
            Some(WaitFor::Slot(u32::MAX))
        );
        assert_eq!(answer_in(&mut VecDeque::new(), 1), None);
    }

    #[test]
    fn removed_entries_leave_their_address_to_waiting_requests() {
        let mut q = queue(&[3, 4, 3]);
        q.push_back(Queued::Answered(3));
        let a = Address::name("gone");
        unlink_in(&mut q, 3, &a);
        let dests: Vec<Option<WaitFor>> = q
            .iter()
            .map(|e| match e {
                Queued::Request(w) => Some(w.dest.clone()),
                Queued::Answered(_) => None,
            })
            .collect();
        let gone = Some(WaitFor::Addr(Box::new(a)));
        assert_eq!(dests, [gone.clone(), Some(WaitFor::Slot(4)), gone, None]);
    }
}
