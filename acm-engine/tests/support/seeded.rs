//! A seeded generator of fuzz-like inputs, for the stable smoke tests that run the fuzz
//! targets' bodies (`acm-engine/tests/fuzz_smoke.rs`, and acm-daemon's
//! `tests/daemon_config_fuzz_smoke.rs`, which includes this file by path): the same
//! inputs on every run.

/// xorshift64*: a fixed sequence of inputs, the same on every run.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Up to `max` bytes; every other input is biased towards the operations the
    /// harness reads (small values), to get past the first few.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = (self.next() % max as u64) as usize;
        let small = self.next() & 1 == 0;
        (0..n)
            .map(|_| {
                let v = self.next();
                if small {
                    (v % 24) as u8
                } else {
                    (v >> 24) as u8
                }
            })
            .collect()
    }

    /// Up to `max` bytes of configuration-file-like text: mostly lower-case words,
    /// spaces and line ends, with a Latin-1 byte (0xe9) now and then.
    pub fn config_text(&mut self, max: usize) -> Vec<u8> {
        let mut text = self.bytes(max);
        for b in &mut text {
            *b = match *b % 8 {
                0 => b'\n',
                1 => b' ',
                2 => 0xe9,
                _ => b'a' + *b % 26,
            };
        }
        text
    }
}
