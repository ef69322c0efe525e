//! The run's fingerprint: a hash over every event in order, so two runs with one seed
//! can be compared cheaply (madsim's determinism check).

use super::kept::KeptByRun;

/// Multiplier of the word mix (the one rustc's FxHasher uses).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// A running hash over every record added, plus the number of records. Each record is
/// digested on its own, word by word (eight bytes per multiply: large runs add
/// gigabytes, which a byte-at-a-time hash took one multiply per byte for), and its
/// digest mixed into the running hash; so a batch of events processed out of order
/// ([`super::batch`]) can keep its records' digests and mix them in in order later.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    sum: Sum,
    /// While a batch runs, the digests of the records added, by run.
    kept: KeptByRun<u64>,
}

/// The running hash and the number of records mixed into it.
#[derive(Debug, Clone)]
struct Sum {
    hash: u64,
    events: u64,
}

impl Sum {
    fn add(&mut self, d: u64) {
        self.hash = mix(self.hash, d);
        self.events += 1;
    }
}

/// The mix of one word into `h`.
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(23) ^ w).wrapping_mul(K)
}

/// A digest of `bytes`: their length, every whole word, then the zero-padded rest. A
/// payload delivered many times (a multicast MAD) is digested once.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    let mut h = mix(0xcbf2_9ce4_8422_2325, bytes.len() as u64);
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

impl Trace {
    pub(crate) fn new() -> Self {
        Self {
            sum: Sum {
                hash: 0xcbf2_9ce4_8422_2325,
                events: 0,
            },
            kept: KeptByRun::default(),
        }
    }

    /// Adds one record.
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        if let Some(d) = self.kept.keep(digest(bytes)) {
            self.sum.add(d);
        }
    }

    /// Keeps the records added from now on in run `run` instead of adding them.
    pub(crate) fn capture(&mut self, run: usize) {
        self.kept.capture(run);
    }

    /// Stops keeping records, and adds those kept run after run, each run's in the
    /// order they came.
    pub(crate) fn release(&mut self) {
        self.kept.release(|d| self.sum.add(d));
    }

    pub(crate) fn hash(&self) -> u64 {
        self.sum.hash
    }

    /// Records added so far.
    pub(crate) fn events(&self) -> u64 {
        self.sum.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(records: &[&[u8]]) -> u64 {
        let mut t = Trace::new();
        for r in records {
            t.add(r);
        }
        t.hash()
    }

    #[test]
    fn records_are_delimited_and_ordered() {
        assert_eq!(run(&[b"abc", b"def"]), run(&[b"abc", b"def"]));
        assert_ne!(run(&[b"abc", b"def"]), run(&[b"abcdef"]));
        assert_ne!(run(&[b"abc", b"def"]), run(&[b"def", b"abc"]));
        assert_ne!(run(&[b"ab"]), run(&[b"ab\0"]));
        assert_ne!(digest(&[0; 256]), digest(&[0; 255]));
    }

    #[test]
    fn captured_records_are_added_run_after_run() {
        let mut t = Trace::new();
        t.add(b"first");
        t.capture(2);
        t.add(b"c1");
        t.capture(1);
        t.add(b"b");
        t.capture(2);
        t.add(b"c2");
        t.capture(3);
        t.add(b"d");
        assert_eq!(t.events(), 1);
        t.release();
        assert_eq!(t.events(), 5);
        assert_eq!(t.hash(), run(&[b"first", b"b", b"c1", b"c2", b"d"]));
        t.add(b"e");
        assert_eq!(t.hash(), run(&[b"first", b"b", b"c1", b"c2", b"d", b"e"]));
    }
}
