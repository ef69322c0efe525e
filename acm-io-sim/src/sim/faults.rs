//! Fault rules (turmoil's shape): what happens to each packet on a link, decided from
//! that link's own random stream.

use crate::rng::SimRng;
use crate::spec::HostId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How links misbehave. Applies to every packet between two hosts (UD MADs, and SA
/// MADs between a host and the SM's host); the same host talking to itself is exempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkFaults {
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Extra fixed delay.
    pub delay: Duration,
    /// Extra uniform random delay in `[0, jitter)`.
    pub jitter: Duration,
    /// Probability that a packet arrives twice.
    pub duplicate: f64,
    /// Probability that a packet is held back (by up to 10 × the jitter, at least
    /// 1 ms), so later packets overtake it.
    pub reorder: f64,
}

/// What the rules decided for one packet: deliver it after each of these delays
/// (empty: lost; two: duplicated).
pub(crate) type Verdict = Vec<Duration>;

/// All fault state: the rules, partitions, and one random stream per directed link.
#[derive(Debug, Clone)]
pub(crate) struct Faults {
    pub(crate) rules: LinkFaults,
    /// Host pairs that cannot reach each other (stored with the smaller first).
    pub(crate) partitions: BTreeSet<(HostId, HostId)>,
    seed: u64,
    links: BTreeMap<(HostId, HostId), SimRng>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rules: LinkFaults::default(),
            partitions: BTreeSet::new(),
            seed,
            links: BTreeMap::new(),
        }
    }

    pub(crate) fn partitioned(&self, a: HostId, b: HostId) -> bool {
        self.partitions.contains(&(a.min(b), a.max(b)))
    }

    /// Whether every link is perfect (no rule, no partition): then every packet
    /// arrives once after its fault-free travel time, and [`Faults::judge`] draws
    /// nothing.
    pub(crate) fn perfect(&self) -> bool {
        let r = &self.rules;
        self.partitions.is_empty()
            && r.loss <= 0.0
            && r.delay.is_zero()
            && r.jitter.is_zero()
            && r.duplicate <= 0.0
            && r.reorder <= 0.0
    }

    /// The fate of one packet from `a` to `b` whose fault-free travel time is `base`.
    pub(crate) fn judge(&mut self, a: HostId, b: HostId, base: Duration) -> Verdict {
        if a == b {
            return vec![base];
        }
        if self.partitioned(a, b) {
            return Vec::new();
        }
        let r = &self.rules;
        if r.loss <= 0.0
            && r.delay.is_zero()
            && r.jitter.is_zero()
            && r.duplicate <= 0.0
            && r.reorder <= 0.0
        {
            return vec![base];
        }
        let seed = self.seed;
        let rng = self
            .links
            .entry((a, b))
            .or_insert_with(|| SimRng::derive(seed, ((a.index() as u64) << 32) | b.index() as u64));
        if rng.chance(r.loss) {
            return Vec::new();
        }
        let jitter_ns = u64::try_from(r.jitter.as_nanos()).unwrap_or(u64::MAX);
        let one = |rng: &mut SimRng| {
            let mut d = base + r.delay + Duration::from_nanos(rng.below(jitter_ns));
            if rng.chance(r.reorder) {
                let hold = (jitter_ns.saturating_mul(10)).max(1_000_000);
                d += Duration::from_nanos(rng.below(hold));
            }
            d
        };
        let first = one(rng);
        if rng.chance(r.duplicate) {
            let second = one(rng);
            vec![first, second]
        } else {
            vec![first]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host `i`.
    const fn h(i: usize) -> HostId {
        HostId(i)
    }

    #[test]
    fn clean_links_pass_and_partitions_drop() {
        let mut f = Faults::new(1);
        let base = Duration::from_micros(3);
        assert_eq!(f.judge(h(0), h(1), base), vec![base]);
        f.partitions.insert((h(0), h(1)));
        assert!(f.judge(h(1), h(0), base).is_empty());
        assert_eq!(
            f.judge(h(1), h(1), base),
            vec![base],
            "a host always reaches itself"
        );
    }

    #[test]
    fn loss_and_duplication_follow_their_rates() {
        let mut f = Faults::new(9);
        f.rules = LinkFaults {
            loss: 0.3,
            duplicate: 0.5,
            jitter: Duration::from_micros(10),
            ..LinkFaults::default()
        };
        let mut lost = 0;
        let mut twice = 0;
        for _ in 0..10_000 {
            match f.judge(h(0), h(1), Duration::ZERO).len() {
                0 => lost += 1,
                2 => twice += 1,
                _ => {}
            }
        }
        assert!((2_700..3_300).contains(&lost), "{lost}");
        assert!((3_200..3_800).contains(&twice), "{twice}");
        // Determinism: same seed, same verdicts.
        let mut a = Faults::new(5);
        let mut b = Faults::new(5);
        a.rules.loss = 0.5;
        b.rules.loss = 0.5;
        let va: Vec<_> = (0..100)
            .map(|_| a.judge(h(2), h(3), Duration::ZERO))
            .collect();
        let vb: Vec<_> = (0..100)
            .map(|_| b.judge(h(2), h(3), Duration::ZERO))
            .collect();
        assert_eq!(va, vb);
    }
}
