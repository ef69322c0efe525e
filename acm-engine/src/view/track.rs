//! What one destination cache keeps for the published view: the keys changed since the
//! last publication, and the used marks the view's hits leave for the eviction clock.

use crate::acmp::CHUNK;
use crate::addr::Address;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// The used marks of one chunk of cache slots, a bit per slot: set by the view's hits
/// (on any thread), taken by the engine's eviction clock.
pub(crate) type MarkBlock = [AtomicU64; CHUNK / 64];

/// How many changed keys a cache notes before it gives up listing them and has the
/// next publication read it whole: beyond this many (and a quarter of the cache),
/// reading the whole cache costs no more than looking each key up.
const DIRTY_MIN: usize = 64;

/// The changes of one destination cache since the view last took them.
#[derive(Debug, Default)]
pub(crate) struct DestTrack {
    /// Keys whose entries may have changed, in the order they did (repeats allowed).
    dirty: Vec<Address>,
    /// Anything may have changed: the next publication reads the whole cache.
    all: bool,
    /// The view's used marks, one block per chunk of slots.
    marks: Vec<Arc<MarkBlock>>,
}

impl DestTrack {
    /// Tracking that has everything to publish (a cache the view has not read yet).
    pub(crate) fn new_all() -> Self {
        Self {
            all: true,
            ..Self::default()
        }
    }

    /// The entry of `addr` may have changed (in a cache of `len` entries).
    #[inline]
    pub(crate) fn note(&mut self, addr: &Address, len: usize) {
        if self.all {
            return;
        }
        if self.dirty.len() >= DIRTY_MIN + len / 4 {
            self.note_all();
        } else {
            self.dirty.push(*addr);
        }
    }

    /// Every entry may have changed.
    pub(crate) fn note_all(&mut self) {
        self.all = true;
        self.dirty.clear();
    }

    /// Whether anything changed since the changes were last taken.
    pub(crate) fn is_dirty(&self) -> bool {
        self.all || !self.dirty.is_empty()
    }

    /// The changes to publish: `None` when the whole cache is to be read, else the
    /// keys changed. Tracking starts afresh; hand the list back with
    /// [`Self::recycle`] to keep its room.
    pub(crate) fn take(&mut self) -> Option<Vec<Address>> {
        if core::mem::take(&mut self.all) {
            self.dirty.clear();
            return None;
        }
        Some(core::mem::take(&mut self.dirty))
    }

    /// Gives back the list [`Self::take`] returned, emptied.
    pub(crate) fn recycle(&mut self, mut list: Vec<Address>) {
        if self.dirty.is_empty() {
            list.clear();
            self.dirty = list;
        }
    }

    /// The used marks of a cache of `chunks` chunks of slots (made as the cache grows).
    pub(crate) fn marks(&mut self, chunks: usize) -> &[Arc<MarkBlock>] {
        while self.marks.len() < chunks {
            self.marks
                .push(Arc::new(core::array::from_fn(|_| AtomicU64::new(0))));
        }
        &self.marks
    }

    /// Takes slot `slot`'s used mark: whether the view answered a hit from the slot
    /// since the mark was last taken.
    #[inline]
    pub(crate) fn take_mark(&self, slot: u32) -> bool {
        let Some((word, bit)) = self.mark_of(slot) else {
            return false;
        };
        // Read before writing: most slots are unmarked, and a read leaves the line
        // shared with the readers that mark it.
        word.load(Ordering::Relaxed) & bit != 0
            && word.fetch_and(!bit, Ordering::Relaxed) & bit != 0
    }

    fn mark_of(&self, slot: u32) -> Option<(&AtomicU64, u64)> {
        mark_in(&self.marks, slot)
    }
}

/// Slot `slot`'s word and bit among `marks`.
#[inline]
pub(crate) fn mark_in(marks: &[Arc<MarkBlock>], slot: u32) -> Option<(&AtomicU64, u64)> {
    let slot = slot as usize;
    let block = marks.get(slot / CHUNK)?;
    let word = block.get(slot % CHUNK / 64)?;
    Some((word, 1u64 << (slot % 64)))
}

/// Marks slot `slot` used (a hit answered from the view).
#[inline]
pub(crate) fn mark_used(marks: &[Arc<MarkBlock>], slot: u32) {
    if let Some((word, bit)) = mark_in(marks, slot)
        && word.load(Ordering::Relaxed) & bit == 0
    {
        word.fetch_or(bit, Ordering::Relaxed);
    }
}
