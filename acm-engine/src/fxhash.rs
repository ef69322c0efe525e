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

/// A deterministic hash map.
pub(crate) type FxHashMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// Hashes one value with [`FxHasher`].
#[must_use]
pub(crate) fn fx_hash<T: core::hash::Hash + ?Sized>(v: &T) -> u64 {
    FxBuildHasher.hash_one(v)
}
