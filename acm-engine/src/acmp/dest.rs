//! The destination cache (docs/ibacmp.md §2): one entry per (address type, 64 address
//! bytes), each with its state, path, address vector and queue of waiting requests.
//!
//! Memory: entries live in fixed chunks of slots indexed by a hash table of slot
//! numbers, so the 66-byte key is stored once and growth never doubles the storage.
//! `size_of::<Option<Dest>>()` plus the index's share is what one cached destination
//! costs; `tests::entry_fits_budget` checks it against the 256-byte budget, and
//! `BENCHMARKS.md` gives the figure measured with a counting allocator over large
//! caches (`examples/dest_memory.rs`).
//!
//! Speed: a lookup reads one cache line of the index (eight entries, each a slot
//! number with 32 bits of its key's hash) and then the slot. With many large caches
//! (a simulated fabric runs one per host, each with an entry per host) neither is in
//! the cache, and a table whose tags and slot numbers live apart missed twice.

use crate::addr::Address;
use crate::fxhash::fx_hash;
use crate::io::AddressVector;
use crate::provider::PendingReply;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

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
        }
    }
}

/// A slot number in the cache.
pub(crate) type DestIdx = u32;

/// Slots per chunk. Entries live in fixed chunks rather than one doubling vector, so a
/// large cache never carries up to twice its size in growth slack, and growing never
/// copies the entries already there.
const CHUNK: usize = 256;

/// Fixed-size chunks of slots, handed out in order.
#[derive(Debug, Default)]
struct Slots {
    chunks: Vec<Box<[Option<Dest>]>>,
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

    fn push(&mut self, dest: Dest) -> DestIdx {
        if self.used == self.chunks.len() * CHUNK {
            let chunk: Vec<Option<Dest>> = (0..CHUNK).map(|_| None).collect();
            self.chunks.push(chunk.into_boxed_slice());
        }
        let idx = self.used as DestIdx;
        self.used += 1;
        if let Some(slot) = self.get_mut(idx) {
            *slot = Some(dest);
        }
        idx
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Dest> {
        self.chunks.iter_mut().flat_map(|c| c.iter_mut()).flatten()
    }

    fn iter(&self) -> impl Iterator<Item = &Dest> {
        self.chunks.iter().flat_map(|c| c.iter()).flatten()
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
    fn insert(&mut self, hash: u64, idx: DestIdx) {
        if (self.used + 1) * 8 > self.groups.len() * 8 * 7 {
            self.rebuild((self.len + 1) * 8 / 7 + 1);
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
}

impl DestCache {
    /// The slot of `addr`, if cached.
    ///
    /// Lookups often come in the order the entries were made (a host that asked for
    /// many destinations in turn hears from them in turn, and its waiting requests are
    /// in that order too), or repeat the last one, so the last slot found and the one
    /// after it are tried first: the index, which every other lookup reads, is then not
    /// touched.
    pub(crate) fn find(&self, addr: &Address) -> Option<DestIdx> {
        let last = self.last.get();
        for guess in [last, last.wrapping_add(1)] {
            if self.slots.get(guess).is_some_and(|d| d.addr == *addr) {
                self.last.set(guess);
                return Some(guess);
            }
        }
        let slots = &self.slots;
        let found = self.index.find(fx_hash(addr), |i| {
            slots.get(i).is_some_and(|d| d.addr == *addr)
        });
        if let Some(i) = found {
            self.last.set(i);
        }
        found
    }

    /// Caches a new entry (the caller checked it is absent and under the limit).
    pub(crate) fn insert(&mut self, dest: Dest) -> DestIdx {
        let hash = fx_hash(&dest.addr);
        let idx = match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.slots.get_mut(i) {
                    *slot = Some(dest);
                }
                i
            }
            None => self.slots.push(dest),
        };
        self.index.insert(hash, idx);
        self.last.set(idx);
        idx
    }

    /// The slot of `addr`, created in INIT if absent; `None` when the cache is full.
    pub(crate) fn acquire(&mut self, addr: &Address, limit: usize) -> Option<DestIdx> {
        if let Some(i) = self.find(addr) {
            return Some(i);
        }
        if self.len() >= limit {
            return None;
        }
        Some(self.insert(Dest::new(*addr)))
    }

    /// Removes an entry, returning it.
    pub(crate) fn remove(&mut self, idx: DestIdx) -> Option<Dest> {
        let dest = self.slots.get_mut(idx)?.take()?;
        self.index.remove(fx_hash(&dest.addr), idx);
        self.free.push(idx);
        Some(dest)
    }

    pub(crate) fn get(&self, idx: DestIdx) -> Option<&Dest> {
        self.slots.get(idx)
    }

    pub(crate) fn get_mut(&mut self, idx: DestIdx) -> Option<&mut Dest> {
        self.slots.get_mut(idx)?.as_mut()
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.used - self.free.len()
    }

    /// Every entry (for monitoring: a walk over the whole cache).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Dest> {
        self.slots.iter()
    }

    /// Mutable access to every entry.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Dest> {
        self.slots.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_fits_budget() {
        // The slot, plus the index: an 8-byte entry per place, at the table's worst load
        // just after it doubles (7/16 full: under 2.3 places per entry).
        let per_entry = core::mem::size_of::<Option<Dest>>() + (23usize * 8).div_ceil(10);
        assert!(
            per_entry <= 256,
            "one cached destination costs {per_entry} bytes"
        );
    }

    #[test]
    fn insert_find_remove_reuse() {
        let mut c = DestCache::default();
        let a = Address::name("host-a");
        let b = Address::name("Host-A");
        let ia = c.acquire(&a, 10).expect("room");
        let ib = c.acquire(&b, 10).expect("room");
        assert_ne!(
            ia, ib,
            "the cache key is case-sensitive (docs/reference-quirks.md §7)"
        );
        assert_eq!(c.find(&a), Some(ia));
        assert_eq!(c.len(), 2);
        assert_eq!(c.remove(ia).map(|d| d.addr), Some(a));
        assert_eq!(c.find(&a), None);
        assert_eq!(c.find(&b), Some(ib));
        let again = c.acquire(&a, 10).expect("room");
        assert_eq!(again, ia, "freed slots are reused");
        assert_eq!(c.acquire(&Address::name("c"), 2), None, "full");
        assert_eq!(c.iter_mut().count(), 2);
    }

    #[test]
    fn index_grows_and_forgets() {
        let mut c = DestCache::default();
        let n = 5000u16;
        for i in 0..n {
            assert_eq!(
                c.acquire(&Address::lid(i), usize::MAX),
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
            let idx = c.acquire(&Address::name(&alloc::format!("n{i}")), usize::MAX);
            assert!(idx.is_some_and(|x| x < DestIdx::from(n)), "{idx:?}");
        }
        assert_eq!(c.len(), usize::from(n));
        for i in 0..n / 2 {
            assert!(c.find(&Address::name(&alloc::format!("n{i}"))).is_some());
        }
        assert_eq!(c.find(&Address::lid(1)), Some(1));
    }
}
