//! The destination cache (docs/ibacmp.md §2): one entry per (address type, 64 address
//! bytes), each with its state, path, address vector and queue of waiting requests.
//!
//! Memory: entries live in fixed chunks of slots indexed by a hash table of slot
//! numbers, so the 66-byte key is stored once and growth never doubles the storage.
//! [`ENTRY_BYTES`] is the most one cached destination costs; the cache of one endpoint
//! holds at most `max_dest_cache_bytes / ENTRY_BYTES` entries ([`entry_limit`]), so
//! that a peer that makes up requesters (every receiver of an ACM request caches its
//! requester) cannot make the cache grow past its bound. `tests::entry_fits_budget`
//! checks the slot and the index against the 256-byte budget, and `BENCHMARKS.md` gives
//! the figures measured with a counting allocator (`examples/dest_memory.rs`,
//! `tests/cache_memory.rs`).
//!
//! Eviction: a full cache makes room by evicting an idle entry, chosen by a clock, the
//! second-chance approximation of least-recently-used (see [`DestCache::acquire`]). A
//! lookup that finds an entry sets its *used* mark, a store into the slot it has just
//! read: a cache hit reads no more memory for it and runs three more instructions
//! (BENCHMARKS.md, "Destination cache: memory and its bound"). Entries that requests
//! wait on, entries whose address or route lookup is under way, and
//! [pinned](DestCache::pin) entries (the host's own addresses and the administrator's
//! preloaded hosts and routes) are never evicted.
//!
//! Speed: a lookup reads one cache line of the index (eight entries, each a slot
//! number with 32 bits of its key's hash) and then the slot. With many large caches
//! (a simulated fabric runs one per host, each with an entry per host) neither is in
//! the cache, and a table whose tags and slot numbers live apart missed twice.

use crate::addr::Address;
use crate::fxhash::fx_hash;
use crate::io::AddressVector;
use crate::provider::PendingReply;
use crate::view::DestTrack;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::mem::size_of;

/// Where a destination stands (docs/ibacmp.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DestState {
    /// Nothing known.
    Init,
    /// An ACM multicast resolve is out.
    QueryAddr,
    /// The peer's GID and LID are known; the route is not.
    AddrResolved,
    /// An SA PathRecord query is out.
    QueryRoute,
    /// The path is known.
    Ready,
}

/// One cached destination.
#[derive(Debug)]
pub(crate) struct Dest {
    pub(crate) addr: Address,
    pub(crate) state: DestState,
    /// Index of the multicast group chosen with the peer.
    pub(crate) group: u8,
    /// Where the address lookup stands in `addr_prots` (the protocol under way, or
    /// the last one tried).
    pub(crate) addr_step: u8,
    /// The address protocols of the latest lookup, as `addr_prot` was when it started
    /// (a reload changes the list for lookups started afterwards only).
    pub(crate) addr_prots: crate::config::AddrProts,
    /// The PathRecord, as it goes on the wire.
    pub(crate) path: [u8; 64],
    pub(crate) av: AddressVector,
    pub(crate) remote_qpn: u32,
    /// The TID of the peer's latest request addressed to us (answered with it).
    pub(crate) req_id: u64,
    /// Minute after which the address binding is stale (`u64::MAX`: never).
    pub(crate) addr_expiry: u64,
    /// Minute after which the route is stale.
    pub(crate) route_expiry: u64,
    /// Requests waiting for this resolution, in arrival order.
    pub(crate) queue: Vec<PendingReply>,
    /// The address binding came from the hosts preload file (the administrator's), not
    /// from an ACM answer: an SM event re-asks its route but keeps its GID.
    pub(crate) preloaded: bool,
    /// Found by a lookup since the eviction clock last passed it: its second chance.
    /// (A cell, so that lookups, which only read the cache, can mark it; it lives in
    /// the struct's padding and costs no memory.)
    used: Cell<bool>,
    /// Never evicted ([`DestCache::pin`]).
    pinned: bool,
}

impl Dest {
    pub(crate) fn new(addr: Address) -> Self {
        Self {
            addr,
            state: DestState::Init,
            group: 0,
            addr_step: 0,
            addr_prots: crate::config::AddrProts::default(),
            path: [0; 64],
            av: AddressVector::default(),
            remote_qpn: 0,
            req_id: 0,
            addr_expiry: u64::MAX,
            route_expiry: u64::MAX,
            queue: Vec::new(),
            preloaded: false,
            used: Cell::new(false),
            pinned: false,
        }
    }

    /// Whether the entry may be evicted: nothing waits on it and nothing is under way
    /// for it (an ACM request, a neighbour lookup or an SA query names it, and its
    /// answer must find it), and it is not pinned.
    fn evictable(&self) -> bool {
        !self.pinned
            && self.queue.is_empty()
            && matches!(
                self.state,
                DestState::Init | DestState::AddrResolved | DestState::Ready
            )
    }
}

/// A slot number in the cache.
pub(crate) type DestIdx = u32;

/// Slots per chunk. Entries live in fixed chunks rather than one doubling vector, so a
/// large cache never carries up to twice its size in growth slack, and growing never
/// copies the entries already there.
pub(crate) const CHUNK: usize = 256;

/// The index's most bytes per entry: 8 bytes per place, and at most `2 × 9/7` places
/// per entry (a rebuild sizes the table for 9/8 of its entries at a load of 7/8, and
/// rounds the number of groups up to a power of two), so 20.6, rounded up.
const INDEX_BYTES_PER_ENTRY: usize = 21;

/// The most one cached destination costs, in bytes, in a cache at its bound: its slot
/// (`size_of::<Option<Dest>>()`, 232 bytes on 64-bit targets), the index's share at its
/// sparsest ([`INDEX_BYTES_PER_ENTRY`]), and two slot numbers for the free list (whose
/// vector may hold twice the places it uses). An idle entry's request queue holds no
/// heap memory (its buffer goes when the requests are answered); the requests waiting
/// on entries are bounded by their own limits (`Limits::queued_per_dest`,
/// `max_pending_per_client`). Beyond the entries, a cache holds at most one partly
/// used chunk of slots, the chunk list and a few groups of the index: under 64 KiB.
pub(crate) const ENTRY_BYTES: usize =
    size_of::<Option<Dest>>() + INDEX_BYTES_PER_ENTRY + 2 * size_of::<DestIdx>();

/// How many entries an endpoint's cache may hold for a bound of `bytes`
/// (`max_dest_cache_bytes`): `bytes / ENTRY_BYTES`, at least one.
#[must_use]
pub(crate) fn entry_limit(bytes: u64) -> usize {
    let n = bytes / ENTRY_BYTES as u64;
    usize::try_from(n).unwrap_or(usize::MAX).max(1)
}

/// The most slots one eviction looks at (a chunk without evictable entries counts as
/// one). Only a cache whose entries are nearly all busy or pinned needs more than a
/// few; the bound keeps one request's work small there, at the price of refusing it.
const EVICTION_SCAN: usize = 256;

/// Fixed-size chunks of slots, handed out in order.
#[derive(Debug, Default)]
struct Slots {
    chunks: Vec<Box<[Option<Dest>]>>,
    /// How many entries of each chunk are evictable candidates (there and not pinned):
    /// the clock skips a chunk with none at once, so the preloaded entries, which come
    /// first and fill whole chunks, cost it nothing.
    unpinned: Vec<u16>,
    /// Slots handed out so far (occupied or on the free list).
    used: usize,
}

impl Slots {
    fn get(&self, i: DestIdx) -> Option<&Dest> {
        let i = i as usize;
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)?.as_ref()
    }

    fn get_mut(&mut self, i: DestIdx) -> Option<&mut Option<Dest>> {
        let i = i as usize;
        self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)
    }

    /// Puts `dest` (not pinned) in slot `i`, which is empty.
    fn fill(&mut self, i: DestIdx, dest: Dest) {
        if let Some(slot) = self.get_mut(i) {
            *slot = Some(dest);
            self.count(i, true);
        }
    }

    /// Empties slot `i`, returning its entry.
    fn take(&mut self, i: DestIdx) -> Option<Dest> {
        let dest = self.get_mut(i)?.take()?;
        if !dest.pinned {
            self.count(i, false);
        }
        Some(dest)
    }

    /// One more (`up`) or one fewer unpinned entry in slot `i`'s chunk.
    fn count(&mut self, i: DestIdx, up: bool) {
        if let Some(n) = self.unpinned.get_mut(i as usize / CHUNK) {
            *n = if up { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    /// A new slot at the end.
    fn push(&mut self, dest: Dest) -> DestIdx {
        if self.used == self.chunks.len() * CHUNK {
            let chunk: Vec<Option<Dest>> = (0..CHUNK).map(|_| None).collect();
            self.chunks.push(chunk.into_boxed_slice());
            self.unpinned.push(0);
        }
        let idx = self.used as DestIdx;
        self.used += 1;
        self.fill(idx, dest);
        idx
    }

    /// Whether slot `i`'s chunk holds no evictable candidate.
    fn chunk_pinned(&self, i: DestIdx) -> bool {
        self.unpinned
            .get(i as usize / CHUNK)
            .is_none_or(|&n| n == 0)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Dest> {
        self.chunks.iter_mut().flat_map(|c| c.iter_mut()).flatten()
    }

    fn iter(&self) -> impl Iterator<Item = &Dest> {
        self.chunks.iter().flat_map(|c| c.iter()).flatten()
    }

    fn iter_indexed(&self) -> impl Iterator<Item = (DestIdx, &Dest)> {
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .enumerate()
            .filter_map(|(i, d)| Some((i as DestIdx, d.as_ref()?)))
    }
}

/// Eight index entries: one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
struct Group([u64; 8]);

/// The hash index of the slots: open addressing over groups of eight entries, probed
/// group after group from the one the hash picks. An entry is the upper 32 bits of
/// its key's hash (which also pick its home group, so a table can grow without
/// rehashing keys) and its slot number plus two: 0 is empty, 1 a removed entry.
#[derive(Debug, Default)]
struct Index {
    groups: Vec<Group>,
    /// Entries, and entries plus removed ones (the load that decides growth).
    len: usize,
    used: usize,
}

const EMPTY: u64 = 0;
const REMOVED: u64 = 1;

impl Index {
    fn tag(hash: u64) -> u32 {
        (hash >> 32) as u32
    }

    /// The groups to probe for `tag`, in order (all of them, once).
    fn probe(&self, tag: u32) -> impl Iterator<Item = usize> + use<> {
        let n = self.groups.len();
        let home = tag as usize & n.wrapping_sub(1);
        (0..n).map(move |i| (home + i) & (n - 1))
    }

    fn find(&self, hash: u64, mut eq: impl FnMut(DestIdx) -> bool) -> Option<DestIdx> {
        let tag = Self::tag(hash);
        for g in self.probe(tag) {
            for &e in &self.groups[g].0 {
                if e == EMPTY {
                    return None;
                }
                if e != REMOVED && (e >> 32) as u32 == tag {
                    let i = (e as u32).wrapping_sub(2);
                    if eq(i) {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    /// Adds slot `idx` (not in the index) under `hash`.
    ///
    /// A rebuild makes room for an eighth more entries than there are: a full cache
    /// that evicts one entry for each it adds leaves a removed place per insertion,
    /// and without that headroom a table just under its load limit would be rebuilt
    /// every few insertions.
    fn insert(&mut self, hash: u64, idx: DestIdx) {
        if (self.used + 1) * 8 > self.groups.len() * 8 * 7 {
            let room = self.len + 1 + self.len / 8;
            self.rebuild(room * 8 / 7 + 1);
        }
        if Self::place(&mut self.groups, hash, idx) {
            self.used += 1;
        }
        self.len += 1;
    }

    /// Puts the entry in the first free place of its probe sequence; whether that
    /// place was empty (not a removed entry's).
    fn place(groups: &mut [Group], hash: u64, idx: DestIdx) -> bool {
        let tag = Self::tag(hash);
        let entry = (u64::from(tag) << 32) | u64::from(idx + 2);
        let n = groups.len();
        let home = tag as usize & (n - 1);
        for i in 0..n {
            let g = &mut groups[(home + i) & (n - 1)];
            if let Some(e) = g.0.iter_mut().find(|e| **e == EMPTY || **e == REMOVED) {
                let was_empty = *e == EMPTY;
                *e = entry;
                return was_empty;
            }
        }
        unreachable!("the index is never full")
    }

    /// Rebuilds the table with room for `entries` (dropping removed entries).
    fn rebuild(&mut self, entries: usize) {
        let groups = entries.div_ceil(8).next_power_of_two().max(1);
        let old = core::mem::replace(&mut self.groups, vec![Group::default(); groups]);
        for g in &old {
            for &e in &g.0 {
                if e != EMPTY && e != REMOVED {
                    Self::place(&mut self.groups, e, (e as u32).wrapping_sub(2));
                }
            }
        }
        self.used = self.len;
    }

    /// Removes slot `idx`'s entry (filed under `hash`).
    fn remove(&mut self, hash: u64, idx: DestIdx) {
        let tag = Self::tag(hash);
        let entry = (u64::from(tag) << 32) | u64::from(idx + 2);
        for g in self.probe(tag) {
            for e in &mut self.groups[g].0 {
                if *e == EMPTY {
                    return;
                }
                if *e == entry {
                    *e = REMOVED;
                    self.len -= 1;
                    return;
                }
            }
        }
    }
}

/// The cache of one endpoint.
#[derive(Debug, Default)]
pub(crate) struct DestCache {
    index: Index,
    slots: Slots,
    free: Vec<DestIdx>,
    /// The slot last found or inserted.
    last: Cell<DestIdx>,
    /// The eviction clock's hand: the next slot it looks at.
    hand: DestIdx,
    /// Entries evicted to make room, since the endpoint opened.
    evictions: u64,
    /// What changed since the engine last published its cache view, and the view's
    /// used marks (`crate::view`); `None` until a view is published. Kept here, by
    /// the methods that hand out or change entries, so that no change can reach the
    /// cache without reaching the next view.
    track: Option<Box<DestTrack>>,
}

impl DestCache {
    /// The slot of `addr`, if cached; it is marked used (a second chance against
    /// eviction).
    ///
    /// Lookups often come in the order the entries were made (a host that asked for
    /// many destinations in turn hears from them in turn, and its waiting requests are
    /// in that order too), or repeat the last one, so the last slot found and the one
    /// after it are tried first: the index, which every other lookup reads, is then not
    /// touched.
    pub(crate) fn find(&self, addr: &Address) -> Option<DestIdx> {
        let last = self.last.get();
        for guess in [last, last.wrapping_add(1)] {
            if let Some(d) = self.slots.get(guess).filter(|d| d.addr == *addr) {
                d.used.set(true);
                self.last.set(guess);
                return Some(guess);
            }
        }
        let slots = &self.slots;
        let found = self.index.find(fx_hash(addr), |i| {
            slots.get(i).is_some_and(|d| d.addr == *addr)
        });
        if let Some(i) = found {
            if let Some(d) = slots.get(i) {
                d.used.set(true);
            }
            self.last.set(i);
        }
        found
    }

    /// Caches a new entry (the caller checked it is absent), whatever the bound: the
    /// host's own addresses, which are [pinned](Self::pin) at once.
    pub(crate) fn insert(&mut self, dest: Dest) -> DestIdx {
        let hash = fx_hash(&dest.addr);
        let len = self.len();
        if let Some(t) = &mut self.track {
            t.note(&dest.addr, len);
        }
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots.fill(i, dest);
                i
            }
            None => self.slots.push(dest),
        };
        self.index.insert(hash, idx);
        self.last.set(idx);
        if let Some(t) = &self.track {
            // A mark a view left on the slot's previous entry is not this one's.
            t.take_mark(idx);
        }
        idx
    }

    /// The slot of `addr`, created in INIT if absent. When the cache already holds
    /// `limit` entries, one is evicted first ([`Self::evict_one`]; `evicted` is told
    /// its slot and address); `None` when none can be.
    pub(crate) fn acquire(
        &mut self,
        addr: &Address,
        limit: usize,
        evicted: impl FnMut(DestIdx, &Address),
    ) -> Option<DestIdx> {
        if let Some(i) = self.find(addr) {
            return Some(i);
        }
        if self.len() >= limit && !self.evict_one(evicted) {
            return None;
        }
        Some(self.insert(Dest::new(*addr)))
    }

    /// Evicts entries until at most `limit` are left or none more can be (a lowered
    /// bound); how many went.
    pub(crate) fn shrink_to(
        &mut self,
        limit: usize,
        mut evicted: impl FnMut(DestIdx, &Address),
    ) -> usize {
        let mut gone = 0;
        // Every failed try moved the hand `EVICTION_SCAN` slots on: after a whole turn
        // of them, nothing more is evictable.
        let mut tries = self.slots.used / EVICTION_SCAN + 1;
        while self.len() > limit && tries > 0 {
            if self.evict_one(&mut evicted) {
                gone += 1;
            } else {
                tries -= 1;
            }
        }
        gone
    }

    /// Evicts one entry: the clock's hand walks the slots in turn, skipping entries
    /// that may not be evicted ([`Dest::evictable`]) and giving each entry marked used
    /// a second chance (the mark is cleared, the hand moves on); the first unmarked
    /// evictable entry goes. The hand stops after [`EVICTION_SCAN`] slots; the first
    /// evictable entry it passed (marked) then goes instead, and if there was none
    /// nothing is evicted. A new entry takes the evicted entry's slot, behind the hand:
    /// it is looked at last.
    fn evict_one(&mut self, mut evicted: impl FnMut(DestIdx, &Address)) -> bool {
        let n = self.slots.used;
        if n == 0 {
            return false;
        }
        let mut victim = None;
        let mut fallback = None;
        for _ in 0..EVICTION_SCAN {
            let i = self.hand;
            if (i as usize) >= n {
                self.hand = 0;
                continue;
            }
            if self.slots.chunk_pinned(i) {
                let next = (i as usize / CHUNK + 1) * CHUNK;
                self.hand = if next >= n { 0 } else { next as DestIdx };
                continue;
            }
            self.hand = i + 1;
            let Some(d) = self.slots.get(i).filter(|d| d.evictable()) else {
                continue;
            };
            // Used by the engine's own lookups, or by the daemon's workers answering
            // from the published view: both marks are cleared, either gives the chance.
            let viewed = self.track.as_ref().is_some_and(|t| t.take_mark(i));
            if !d.used.replace(false) && !viewed {
                victim = Some(i);
                break;
            }
            fallback.get_or_insert(i);
        }
        let Some(i) = victim.or(fallback) else {
            return false;
        };
        let Some(d) = self.remove(i) else {
            return false;
        };
        self.evictions += 1;
        evicted(i, &d.addr);
        true
    }

    /// Makes entry `idx` permanent: never evicted. For the entries that cannot be
    /// learned again if they went: the host's own addresses (loopback) and the
    /// administrator's preloaded hosts and routes. They still count against the bound,
    /// and are bounded by the address file and the preload files.
    pub(crate) fn pin(&mut self, idx: DestIdx) {
        let Some(Some(d)) = self.slots.get_mut(idx) else {
            return;
        };
        if !d.pinned {
            d.pinned = true;
            self.slots.count(idx, false);
        }
    }

    /// Removes an entry, returning it.
    pub(crate) fn remove(&mut self, idx: DestIdx) -> Option<Dest> {
        let dest = self.slots.take(idx)?;
        self.index.remove(fx_hash(&dest.addr), idx);
        self.free.push(idx);
        let len = self.len();
        if let Some(t) = &mut self.track {
            t.note(&dest.addr, len);
        }
        Some(dest)
    }

    pub(crate) fn get(&self, idx: DestIdx) -> Option<&Dest> {
        self.slots.get(idx)
    }

    /// The entry in slot `idx`, to change: noted as changed for the published view
    /// (read with [`Self::get`] what is only read).
    pub(crate) fn get_mut(&mut self, idx: DestIdx) -> Option<&mut Dest> {
        let len = self.len();
        let d = self.slots.get_mut(idx)?.as_mut()?;
        if let Some(t) = &mut self.track {
            t.note(&d.addr, len);
        }
        Some(d)
    }

    /// The slot and entry of `addr`, if cached, without marking it used: the view's
    /// publication reads entries, it does not use them.
    pub(crate) fn peek(&self, addr: &Address) -> Option<(DestIdx, &Dest)> {
        let slots = &self.slots;
        let i = self.index.find(fx_hash(addr), |i| {
            slots.get(i).is_some_and(|d| d.addr == *addr)
        })?;
        Some((i, slots.get(i)?))
    }

    /// Every entry with its slot.
    pub(crate) fn iter_indexed(&self) -> impl Iterator<Item = (DestIdx, &Dest)> {
        self.slots.iter_indexed()
    }

    /// How many chunks of slots the cache has (slot `i` is in chunk `i / CHUNK`).
    pub(crate) fn chunks(&self) -> usize {
        self.slots.chunks.len()
    }

    /// The change tracking of the published view, made (with everything to publish)
    /// when it was not there.
    pub(crate) fn track(&mut self) -> &mut DestTrack {
        self.track
            .get_or_insert_with(|| Box::new(DestTrack::new_all()))
    }

    /// Whether something changed since the view last took the changes (always, for
    /// a cache not tracked yet).
    pub(crate) fn view_dirty(&self) -> bool {
        self.track.as_ref().is_none_or(|t| t.is_dirty())
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.used - self.free.len()
    }

    /// Entries evicted to make room since the cache was made.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Every entry (for monitoring: a walk over the whole cache).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Dest> {
        self.slots.iter()
    }

    /// Mutable access to every entry (all noted as changed for the published view).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Dest> {
        if let Some(t) = &mut self.track {
            t.note_all();
        }
        self.slots.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `acquire` with no one to tell about evictions.
    fn acquire(c: &mut DestCache, a: &Address, limit: usize) -> Option<DestIdx> {
        c.acquire(a, limit, |_, _| {})
    }

    #[test]
    fn entry_fits_budget() {
        // The slot, plus the index at its sparsest.
        let per_entry = size_of::<Option<Dest>>() + INDEX_BYTES_PER_ENTRY;
        assert!(
            per_entry <= 256,
            "one cached destination costs {per_entry} bytes"
        );
        // The eviction marks live in padding: the slot is as large as it was.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(size_of::<Option<Dest>>(), 232);
            assert_eq!(ENTRY_BYTES, 261);
            // The default bound, 64 MiB, holds a quarter of a million destinations.
            assert_eq!(entry_limit(64 << 20), 257_122);
        }
        assert_eq!(entry_limit(0), 1);
    }

    #[test]
    fn index_stays_within_its_share_at_the_bound() {
        // A cache held at its bound, evicting one entry per insertion, for several
        // times its size: the index's places stay within its share per entry, and
        // every live entry stays findable.
        for limit in [100usize, 399, 447, 448, 1000, 3583] {
            let mut c = DestCache::default();
            for i in 0..limit * 6 {
                let a = Address::name(&alloc::format!("d{i}"));
                assert!(acquire(&mut c, &a, limit).is_some());
            }
            assert_eq!(c.len(), limit);
            let bytes = c.index.groups.len() * size_of::<Group>();
            assert!(
                bytes <= limit * INDEX_BYTES_PER_ENTRY + 2 * size_of::<Group>(),
                "{limit} entries: index of {bytes} bytes"
            );
            assert_eq!(c.slots.used, limit, "slots are reused, never added");
            let found = (0..limit * 6)
                .filter(|i| c.find(&Address::name(&alloc::format!("d{i}"))).is_some())
                .count();
            assert_eq!(found, limit);
        }
    }

    #[test]
    fn full_cache_evicts_the_entry_not_used_for_longest() {
        let mut c = DestCache::default();
        let names: Vec<Address> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| Address::name(n))
            .collect();
        for a in &names {
            acquire(&mut c, a, 5).expect("room");
        }
        // a and c are used again: each keeps its place once more.
        c.find(&names[0]);
        c.find(&names[2]);
        let mut gone = Vec::new();
        for n in ["f", "g", "h", "i"] {
            c.acquire(&Address::name(n), 5, |_, a| gone.push(*a))
                .expect("room made");
            assert_eq!(c.len(), 5);
        }
        assert_eq!(
            gone,
            [names[1], names[3], names[4], names[0]],
            "b, d and e, never used again, then a, whose use was one turn ago"
        );
        assert_eq!(c.evictions(), 4);
        assert!(c.find(&names[2]).is_some(), "c was used: still cached");
    }

    #[test]
    fn busy_and_pinned_entries_are_never_evicted() {
        let mut c = DestCache::default();
        let (a, b, d) = (Address::name("a"), Address::name("b"), Address::name("d"));
        let ia = acquire(&mut c, &a, 3).expect("room");
        let ib = acquire(&mut c, &b, 3).expect("room");
        let id = acquire(&mut c, &d, 3).expect("room");
        c.pin(ia);
        // b has a lookup under way, d a route query.
        c.get_mut(ib).expect("b").state = DestState::QueryAddr;
        c.get_mut(id).expect("d").state = DestState::QueryRoute;
        assert_eq!(acquire(&mut c, &Address::name("x"), 3), None, "no room");
        assert_eq!(c.evictions(), 0);
        // d's query answered: it may go now.
        c.get_mut(id).expect("d").state = DestState::Ready;
        let mut gone = Vec::new();
        let ix = c
            .acquire(&Address::name("x"), 3, |i, addr| gone.push((i, *addr)))
            .expect("d evicted");
        assert_eq!(gone, [(id, d)]);
        assert_eq!(ix, id, "the new entry takes the evicted slot");
        assert!(c.find(&a).is_some() && c.find(&b).is_some());
        // A bound lowered under the pinned and busy entries leaves them.
        assert_eq!(c.shrink_to(0, |_, _| {}), 1, "only x could go");
        assert_eq!(c.len(), 2);
        assert_eq!(c.evictions(), 2);
    }

    #[test]
    fn whole_chunks_of_pinned_entries_cost_the_clock_one_step() {
        // Preloaded entries first (as an endpoint opens), then learned ones.
        let mut c = DestCache::default();
        let pinned = CHUNK * 40;
        for i in 0..pinned {
            let idx = c.insert(Dest::new(Address::name(&alloc::format!("p{i}"))));
            c.pin(idx);
        }
        let limit = pinned + 10;
        for i in 0..10 {
            acquire(&mut c, &Address::name(&alloc::format!("l{i}")), limit).expect("room");
        }
        // The clock starts at slot 0: forty pinned chunks, then the learned entries,
        // all within one scan.
        for i in 0..100 {
            let a = Address::name(&alloc::format!("n{i}"));
            assert!(acquire(&mut c, &a, limit).is_some(), "n{i}");
        }
        assert_eq!(c.evictions(), 100);
        assert_eq!(c.len(), limit);
        assert!((0..pinned).all(|i| c.find(&Address::name(&alloc::format!("p{i}"))).is_some()));
    }

    #[test]
    fn insert_find_remove_reuse() {
        let mut c = DestCache::default();
        let a = Address::name("host-a");
        let b = Address::name("Host-A");
        let ia = acquire(&mut c, &a, 10).expect("room");
        let ib = acquire(&mut c, &b, 10).expect("room");
        assert_ne!(
            ia, ib,
            "the cache key is case-sensitive (docs/reference-quirks.md §7)"
        );
        assert_eq!(c.find(&a), Some(ia));
        assert_eq!(c.len(), 2);
        assert_eq!(c.remove(ia).map(|d| d.addr), Some(a));
        assert_eq!(c.find(&a), None);
        assert_eq!(c.find(&b), Some(ib));
        let again = acquire(&mut c, &a, 10).expect("room");
        assert_eq!(again, ia, "freed slots are reused");
        assert_eq!(c.iter_mut().count(), 2);
    }

    #[test]
    fn index_grows_and_forgets() {
        let mut c = DestCache::default();
        let n = 5000u16;
        for i in 0..n {
            assert_eq!(
                acquire(&mut c, &Address::lid(i), usize::MAX),
                Some(DestIdx::from(i))
            );
        }
        // In order, in reverse (the slot after the last found is tried first), and
        // absent keys.
        for i in (0..n).chain((0..n).rev()) {
            assert_eq!(c.find(&Address::lid(i)), Some(DestIdx::from(i)));
        }
        assert_eq!(c.find(&Address::lid(n)), None);
        // Removing every other entry keeps the rest findable; freed slots are reused.
        for i in (0..n).step_by(2) {
            assert!(c.remove(DestIdx::from(i)).is_some());
        }
        for i in 0..n {
            let found = c.find(&Address::lid(i));
            assert_eq!(found.is_some(), i % 2 == 1, "lid {i}: {found:?}");
        }
        assert_eq!(c.len(), usize::from(n / 2));
        for i in 0..n / 2 {
            let idx = acquire(&mut c, &Address::name(&alloc::format!("n{i}")), usize::MAX);
            assert!(idx.is_some_and(|x| x < DestIdx::from(n)), "{idx:?}");
        }
        assert_eq!(c.len(), usize::from(n));
        for i in 0..n / 2 {
            assert!(c.find(&Address::name(&alloc::format!("n{i}"))).is_some());
        }
        assert_eq!(c.find(&Address::lid(1)), Some(1));
    }
}
