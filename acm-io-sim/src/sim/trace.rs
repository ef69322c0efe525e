//! The run's fingerprint: a hash over every event in order, so two runs with one seed
//! can be compared cheaply (madsim's determinism check).

/// Multiplier of the word mix (the one rustc's FxHasher uses).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// A running hash over every record added, word by word (eight bytes per multiply:
/// large runs add hundreds of millions of bytes, and a byte-at-a-time hash was a tenth
/// of their time), plus the number of records.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    hash: u64,
    events: u64,
}

/// The mix of one word into `h`.
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(23) ^ w).wrapping_mul(K)
}

/// `h` extended by `bytes`: their length, every whole word, then the zero-padded rest.
fn extend(mut h: u64, bytes: &[u8]) -> u64 {
    h = mix(h, bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = mix(h, u64::from_le_bytes(b));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(b));
    }
    h
}

/// A digest of `bytes` on its own: a payload delivered many times (a multicast MAD) is
/// digested once and the digest added per delivery.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    extend(0xcbf2_9ce4_8422_2325, bytes)
}

impl Trace {
    pub(crate) fn new() -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            events: 0,
        }
    }

    /// Adds one record.
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        self.hash = extend(self.hash, bytes);
        self.events += 1;
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// Records added so far.
    pub(crate) fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_delimited_and_ordered() {
        let run = |records: &[&[u8]]| {
            let mut t = Trace::new();
            for r in records {
                t.add(r);
            }
            t.hash()
        };
        assert_eq!(run(&[b"abc", b"def"]), run(&[b"abc", b"def"]));
        assert_ne!(run(&[b"abc", b"def"]), run(&[b"abcdef"]));
        assert_ne!(run(&[b"abc", b"def"]), run(&[b"def", b"abc"]));
        assert_ne!(run(&[b"ab"]), run(&[b"ab\0"]));
        assert_ne!(digest(&[0; 256]), digest(&[0; 255]));
    }
}
