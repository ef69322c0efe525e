//! A fixed, seedless hasher for the engine's hash tables.
//!
//! The engine must behave identically from run to run (the simulator replays seeds), so
//! it cannot use a randomly keyed hasher; and nothing it hashes is chosen by an attacker
//! in a way that matters for a daemon bounded by its own limits. This is the
//! multiply-rotate scheme of rustc's FxHasher, written out here.

use core::hash::{BuildHasher, Hasher};

const K: u64 = 0xf135_7aea_2e62_a9c5;

/// A fast, deterministic hasher.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FxHasher`]s.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxBuildHasher;

impl BuildHasher for FxBuildHasher {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher::default()
    }
}

/// A hasher for ids handed out in sequence (client connections), which keeps them in
/// order: consecutive ids land in consecutive buckets, so a driver that answers its
/// connections roughly in the order it opened them walks the table instead of
/// missing the cache on every lookup. The low bits are the id folded with its high
/// bits (ids that differ only there still spread); the top seven, which hashbrown
/// keeps as the tag it compares first, are a multiplicative hash of the id.
#[derive(Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut fx = FxHasher(self.0);
        fx.write(bytes);
        self.0 = fx.0;
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        let low = i ^ (i >> 16) ^ (i >> 32) ^ (i >> 48);
        let tag = (self.0 ^ i).wrapping_mul(K) & 0xFE00_0000_0000_0000;
        self.0 = (low & 0x01FF_FFFF_FFFF_FFFF) | tag;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`SeqHasher`]s: the hasher for tables keyed by ids handed out in sequence,
/// such as client connections (the engine's, and the daemon's own), which are never
/// chosen by a client.
#[derive(Default, Clone, Copy, Debug)]
pub struct SeqBuildHasher;

impl BuildHasher for SeqBuildHasher {
    type Hasher = SeqHasher;
    fn build_hasher(&self) -> SeqHasher {
        SeqHasher::default()
    }
}

/// A hash map for ids handed out in sequence ([`SeqHasher`]).
pub(crate) type SeqHashMap<K, V> = hashbrown::HashMap<K, V, SeqBuildHasher>;

/// Hashes one value with [`FxHasher`].
#[must_use]
pub(crate) fn fx_hash<T: core::hash::Hash + ?Sized>(v: &T) -> u64 {
    FxBuildHasher.hash_one(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_keep_their_order_and_tags_vary() {
        let h = |i: u64| SeqBuildHasher.hash_one(i);
        for i in 1..1000u64 {
            assert_eq!(h(i + 1) & 0xFFFF, (h(i) & 0xFFFF) + 1);
        }
        let tags: alloc::collections::BTreeSet<u64> = (0..64u64).map(|i| h(i) >> 57).collect();
        assert!(tags.len() > 32, "{tags:?}");
        // Ids apart only in their high bits do not share a bucket.
        assert_ne!(h(1 << 40) & 0xFFFF, h(2 << 40) & 0xFFFF);
    }
}
