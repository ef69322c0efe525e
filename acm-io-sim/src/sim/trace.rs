//! The run's fingerprint: a hash over every event in order, so two runs with one seed
//! can be compared cheaply (madsim's determinism check).

/// FNV-1a over the bytes of every event description.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    hash: u64,
    events: u64,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            events: 0,
        }
    }

    pub(crate) fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
        self.events += 1;
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    pub(crate) fn events(&self) -> u64 {
        self.events
    }
}
