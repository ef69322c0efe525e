//! The destinations of one endpoint as the view holds them: a persistent map that a
//! publication changes by copying only the part a change lies in.
//!
//! The map is a two-level tree of fixed fan-out: a root of [`FAN`] directories, each of
//! [`FAN`] leaves, each leaf a small hash table. Every level is behind an `Arc`. A
//! published view shares all of them with the engine's next one; changing one entry
//! copies its leaf (the cache's entries over `FAN * FAN`, about 60 at the default
//! bound of a quarter of a million), its directory and the root (`FAN` pointers each),
//! so that the cost of a publication follows the number of entries changed, not the
//! size of the cache. A part no reader holds any more is changed in place.

use super::CopyCount;
use crate::addr::Address;
use crate::fxhash::fx_hash;
use alloc::sync::Arc;
use hashbrown::HashTable;

/// Directories in the root, and leaves in a directory.
const FAN: usize = 64;

/// A destination the view answers: READY, with the path the engine answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ViewDest {
    /// The cache key (address type and its 64 bytes).
    pub(crate) addr: Address,
    /// The PathRecord, as it goes on the wire.
    pub(crate) path: [u8; 64],
    /// The minute after which the entry is stale: the earlier of its address and
    /// route expiries (the engine moves it back, so a request then goes there).
    pub(crate) expiry: u64,
    /// Its slot in the engine's cache, whose used mark a hit sets.
    pub(crate) slot: u32,
}

type Leaf = HashTable<ViewDest>;
type Dir = [Arc<Leaf>; FAN];

/// One endpoint's READY destinations.
#[derive(Debug, Clone)]
pub(crate) struct DestMap {
    root: Arc<[Arc<Dir>; FAN]>,
}

impl DestMap {
    /// An empty map (its directories and leaves all one shared empty part).
    pub(crate) fn new() -> Self {
        let leaf: Arc<Leaf> = Arc::new(HashTable::new());
        let dir: Arc<Dir> = Arc::new(core::array::from_fn(|_| Arc::clone(&leaf)));
        Self {
            root: Arc::new(core::array::from_fn(|_| Arc::clone(&dir))),
        }
    }

    /// The directory and leaf of a key's hash: bits the leaf's own table uses
    /// neither for its buckets (the low ones) nor for its tags (the top seven).
    #[inline]
    fn place(hash: u64) -> (usize, usize) {
        let bits = (hash >> 40) as usize;
        (bits % FAN, (bits / FAN) % FAN)
    }

    /// The entry of `addr`.
    #[inline]
    pub(crate) fn get(&self, addr: &Address) -> Option<&ViewDest> {
        let hash = fx_hash(addr);
        let (d, l) = Self::place(hash);
        self.root[d][l].find(hash, |e| e.addr == *addr)
    }

    /// Sets the entry of `addr` (`None`: removes it), copying the parts other views
    /// share.
    pub(crate) fn set(&mut self, addr: &Address, entry: Option<ViewDest>, copies: &mut CopyCount) {
        let hash = fx_hash(addr);
        let (d, l) = Self::place(hash);
        let leaf = &self.root[d][l];
        let present = leaf.find(hash, |e| e.addr == *addr);
        if present == entry.as_ref() {
            return;
        }
        let dir = &mut unshare(&mut self.root, copies, 0)[d];
        let leaf = &mut unshare(dir, copies, 0)[l];
        let len = leaf.len();
        let leaf = unshare(leaf, copies, len);
        match (leaf.find_entry(hash, |e| e.addr == *addr), entry) {
            (Ok(mut slot), Some(entry)) => *slot.get_mut() = entry,
            (Ok(slot), None) => {
                slot.remove();
            }
            (Err(_), Some(entry)) => {
                leaf.insert_unique(hash, entry, |e| fx_hash(&e.addr));
            }
            (Err(_), None) => {}
        }
    }

    /// How many entries the map holds (a walk of every leaf: for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.root
            .iter()
            .flat_map(|d| d.iter())
            .map(|l| l.len())
            .sum()
    }
}

/// The part behind `arc` for writing: copied first when another view shares it
/// (counted in `copies`, with `entries`, the entries the copy holds).
fn unshare<'a, T: Clone>(arc: &'a mut Arc<T>, copies: &mut CopyCount, entries: usize) -> &'a mut T {
    if Arc::get_mut(arc).is_none() {
        copies.parts += 1;
        copies.entries += entries;
    }
    Arc::make_mut(arc)
}
