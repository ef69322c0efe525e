//! The fuzz targets' bodies (`fuzz/fuzz_targets/engine.rs` and `config.rs`, through
//! `support/engine_fuzz.rs`) on a few hundred inputs from a seeded generator, so that CI
//! exercises them on the stable toolchain; `cargo +nightly fuzz run engine` explores
//! far more (fuzz/README.md).

mod support;

/// xorshift64*: a fixed sequence of inputs, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Up to `max` bytes; every other input is biased towards the operations the
    /// harness reads (small values), to get past the first few.
    fn bytes(&mut self, max: usize) -> Vec<u8> {
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
}

#[test]
fn engine_fuzz_body_on_seeded_inputs() {
    let mut rng = Rng(0x15_f00d);
    for _ in 0..300 {
        support::engine_fuzz::run(&rng.bytes(600));
    }
}

#[test]
fn config_fuzz_body_on_seeded_inputs() {
    let mut rng = Rng(0x15_c0f);
    for _ in 0..300 {
        let mut text = rng.bytes(400);
        // Mostly printable, with option names and Latin-1 now and then.
        for b in &mut text {
            *b = match *b % 8 {
                0 => b'\n',
                1 => b' ',
                2 => 0xe9,
                _ => b'a' + *b % 26,
            };
        }
        let mut doc = b"timeout -5\nretries 99999999999\nx fakeib0 9 0x12345\n".to_vec();
        doc.extend_from_slice(&text);
        support::engine_fuzz::run_config(&doc);
    }
}
