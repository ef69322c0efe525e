//! The destination cache (spec 4.2): one entry per (address type, 64 address bytes),
//! each with its state, path, address vector and queue of waiting requests.
//!
//! Memory: entries live in fixed chunks of slots indexed by a hash table of `u32` slot
//! numbers, so the 66-byte key is stored once and growth never doubles the storage.
//! `size_of::<Option<Dest>>()` plus the index's share is what one cached destination
//! costs; `tests::entry_fits_budget` checks it against the 256-byte budget, and
//! `BENCHMARKS.md` gives the figure measured with a counting allocator over large
//! caches (`examples/dest_memory.rs`).

use crate::addr::Address;
use crate::fxhash::fx_hash;
use crate::io::AddressVector;
use crate::provider::PendingReply;
use alloc::boxed::Box;
use alloc::vec::Vec;
use hashbrown::HashTable;

/// Where a destination stands (spec 4.3).
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
#[derive(Debug, Clone)]
pub(crate) struct Dest {
    pub(crate) addr: Address,
    pub(crate) state: DestState,
    /// Index of the multicast group chosen with the peer.
    pub(crate) group: u8,
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
}

impl Dest {
    pub(crate) fn new(addr: Address) -> Self {
        Self {
            addr,
            state: DestState::Init,
            group: 0,
            path: [0; 64],
            av: AddressVector::default(),
            remote_qpn: 0,
            req_id: 0,
            addr_expiry: u64::MAX,
            route_expiry: u64::MAX,
            queue: Vec::new(),
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
}

/// The cache of one endpoint.
#[derive(Debug, Default)]
pub(crate) struct DestCache {
    index: HashTable<DestIdx>,
    slots: Slots,
    free: Vec<DestIdx>,
}

impl DestCache {
    /// The slot of `addr`, if cached.
    pub(crate) fn find(&self, addr: &Address) -> Option<DestIdx> {
        let slots = &self.slots;
        self.index
            .find(fx_hash(addr), |&i| {
                slots.get(i).is_some_and(|d| d.addr == *addr)
            })
            .copied()
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
        let slots = &self.slots;
        self.index
            .insert_unique(hash, idx, |&i| slots.get(i).map_or(0, |d| fx_hash(&d.addr)));
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
        if let Ok(e) = self.index.find_entry(fx_hash(&dest.addr), |&i| i == idx) {
            e.remove();
        }
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
        // The slot, plus the index: a u32 and a control byte per bucket, at the table's
        // worst load just after it doubles (7/16 full: under 2.3 buckets per entry).
        let per_entry = core::mem::size_of::<Option<Dest>>() + (23usize * (4 + 1)).div_ceil(10);
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
        assert_ne!(ia, ib, "the cache key is case-sensitive (quirk 7)");
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
}
