//! A small deterministic random number generator (splitmix64): every random choice in
//! the simulation (loss, jitter, duplication) comes from generators seeded from the one
//! master seed, so a seed replays a run exactly.

/// splitmix64: tiny, fast, and good enough for fault injection.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A child generator for one purpose (a link, a host): `seed ^ salt`, mixed, so
    /// adding traffic on one link does not change another's draws.
    #[must_use]
    pub fn derive(seed: u64, salt: u64) -> Self {
        let mut r = Self(seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let _ = r.next_u64();
        r
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A uniform number in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws_and_children_differ() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut l1 = SimRng::derive(7, 1);
        let mut l2 = SimRng::derive(7, 2);
        assert_ne!(l1.next_u64(), l2.next_u64());
        let mut r = SimRng::new(3);
        let hits = (0..10_000).filter(|_| r.chance(0.3)).count();
        assert!((2_700..3_300).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| r.below(5) < 5));
        assert!(!r.chance(0.0));
    }
}
