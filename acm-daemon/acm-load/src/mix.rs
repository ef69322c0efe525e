//! The request mix: which kinds of request a run sends, in what proportion
//! (`--mix hit=90,miss=5,nodelay=3,perf=2`), and the order each client sends them in.

use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// A kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// RESOLVE of a destination that resolves (`--dst`), repeated: a cache hit once the
    /// warm-up has resolved it.
    Hit,
    /// RESOLVE of a destination the daemon does not know (`--miss-dst`), a different one
    /// each time.
    Miss,
    /// RESOLVE of a `--dst` destination with the NODELAY flag: answered from the cache
    /// only, never by a resolution.
    NoDelay,
    /// PERF_QUERY of the global counters.
    Perf,
    /// EP_QUERY of endpoint 1.
    Ep,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Self; 5] = [Self::Hit, Self::Miss, Self::NoDelay, Self::Perf, Self::Ep];

    /// The name used in `--mix` and in reports.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::NoDelay => "nodelay",
            Self::Perf => "perf",
            Self::Ep => "ep",
        }
    }

    /// The kind a `--mix` name stands for.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Position in [`Kind::ALL`] (an array index).
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a `--mix` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MixError {
    /// A name that is no kind.
    #[error("unknown request kind '{0}' (kinds: hit, miss, nodelay, perf, ep)")]
    UnknownKind(String),
    /// `kind=` followed by something that is not a whole number.
    #[error("'{0}' is not KIND=WEIGHT with a whole-number weight")]
    BadWeight(String),
    /// One kind named twice.
    #[error("request kind '{0}' is given twice")]
    Duplicate(String),
    /// Every weight is zero.
    #[error("the mix sends nothing (every weight is 0)")]
    Empty,
}

/// Relative weights of the kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    weights: [u32; Kind::ALL.len()],
}

impl Mix {
    /// The mix of one kind only.
    #[must_use]
    pub fn only(kind: Kind) -> Self {
        let mut weights = [0; Kind::ALL.len()];
        weights[kind.index()] = 1;
        Self { weights }
    }

    /// The weight of `kind`.
    #[must_use]
    pub const fn weight(&self, kind: Kind) -> u32 {
        self.weights[kind.index()]
    }

    /// Whether `kind` is ever sent.
    #[must_use]
    pub const fn uses(&self, kind: Kind) -> bool {
        self.weight(kind) > 0
    }

    /// The kinds with a non-zero weight, in report order.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        Kind::ALL.into_iter().filter(|k| self.uses(*k))
    }

    /// The sum of the weights.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.weights.iter().map(|w| u64::from(*w)).sum()
    }
}

impl FromStr for Mix {
    type Err = MixError;

    /// `KIND=WEIGHT[,KIND=WEIGHT…]`; a bare `KIND` is weight 1. Kinds left out are not
    /// sent.
    fn from_str(s: &str) -> Result<Self, MixError> {
        let mut weights = [0u32; Kind::ALL.len()];
        let mut seen = [false; Kind::ALL.len()];
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, weight) = match item.split_once('=') {
                Some((n, w)) => (
                    n.trim(),
                    w.trim()
                        .parse::<u32>()
                        .map_err(|_| MixError::BadWeight(item.to_owned()))?,
                ),
                None => (item, 1),
            };
            let kind =
                Kind::from_name(name).ok_or_else(|| MixError::UnknownKind(name.to_owned()))?;
            if std::mem::replace(&mut seen[kind.index()], true) {
                return Err(MixError::Duplicate(name.to_owned()));
            }
            weights[kind.index()] = weight;
        }
        let mix = Self { weights };
        if mix.total() == 0 {
            return Err(MixError::Empty);
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for k in self.kinds() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{}={}", k.name(), self.weight(k))?;
        }
        Ok(())
    }
}

/// Picks the kind of each next request: smooth weighted round-robin, so every window of
/// `total` requests holds each kind in exact proportion, evenly spread (`hit=2,miss=1`
/// gives hit, miss, hit, hit, miss, hit …), with no randomness to make runs differ.
#[derive(Debug, Clone)]
pub(crate) struct Picker {
    weights: [i64; Kind::ALL.len()],
    current: [i64; Kind::ALL.len()],
    total: i64,
}

impl Picker {
    /// A picker for `mix`, advanced `offset` steps so that clients do not all send the
    /// same kind at the same moment.
    #[must_use]
    pub(crate) fn new(mix: &Mix, offset: u64) -> Self {
        let weights = mix.weights.map(i64::from);
        let mut p = Self {
            weights,
            current: [0; Kind::ALL.len()],
            total: weights.iter().sum(),
        };
        let steps = offset % mix.total().max(1);
        for _ in 0..steps {
            p.next_kind();
        }
        p
    }

    /// The kind of the next request.
    pub(crate) fn next_kind(&mut self) -> Kind {
        let mut best = 0;
        for i in 0..self.current.len() {
            self.current[i] += self.weights[i];
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        Kind::ALL[best]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_weights_and_refuses_junk() {
        let m: Mix = "hit=90,miss=5,nodelay=3,perf=2".parse().unwrap();
        assert_eq!(m.weight(Kind::Hit), 90);
        assert_eq!(m.weight(Kind::Perf), 2);
        assert_eq!(m.weight(Kind::Ep), 0);
        assert_eq!(m.total(), 100);
        assert_eq!(m.to_string(), "hit=90,miss=5,nodelay=3,perf=2");
        assert_eq!("perf".parse::<Mix>().unwrap(), Mix::only(Kind::Perf));
        assert_eq!(
            "hit=1,bogus=2".parse::<Mix>(),
            Err(MixError::UnknownKind("bogus".into()))
        );
        assert_eq!(
            "hit=x".parse::<Mix>(),
            Err(MixError::BadWeight("hit=x".into()))
        );
        assert_eq!(
            "hit=-1".parse::<Mix>(),
            Err(MixError::BadWeight("hit=-1".into()))
        );
        assert_eq!(
            "hit=1,hit=2".parse::<Mix>(),
            Err(MixError::Duplicate("hit".into()))
        );
        assert_eq!("hit=0".parse::<Mix>(), Err(MixError::Empty));
        assert_eq!("".parse::<Mix>(), Err(MixError::Empty));
    }

    #[test]
    fn picker_keeps_exact_proportions_evenly_spread() {
        let m: Mix = "hit=90,miss=5,nodelay=3,perf=2".parse().unwrap();
        for offset in [0, 1, 37] {
            let mut p = Picker::new(&m, offset);
            let mut counts = [0u32; 5];
            for _ in 0..1000 {
                counts[p.next_kind().index()] += 1;
            }
            assert_eq!(counts, [900, 50, 30, 20, 0], "offset {offset}");
        }
        let mut p = Picker::new(&"hit=2,miss=1".parse().unwrap(), 0);
        let seq: Vec<Kind> = (0..6).map(|_| p.next_kind()).collect();
        assert_eq!(
            seq,
            [
                Kind::Hit,
                Kind::Miss,
                Kind::Hit,
                Kind::Hit,
                Kind::Miss,
                Kind::Hit
            ]
        );
    }
}
