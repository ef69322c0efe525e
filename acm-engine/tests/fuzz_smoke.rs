//! The fuzz targets' bodies (`fuzz/fuzz_targets/engine.rs` and `config.rs`, through
//! `support/engine_fuzz.rs`) on a few hundred inputs from a seeded generator, so that CI
//! exercises them on the stable toolchain; `cargo +nightly fuzz run engine` explores
//! far more (fuzz/README.md).

mod support;

use support::seeded::Rng;

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
        // Mostly printable, with option names and Latin-1 now and then.
        let text = rng.config_text(400);
        let mut doc = b"timeout -5\nretries 99999999999\nx fakeib0 9 0x12345\n".to_vec();
        doc.extend_from_slice(&text);
        support::engine_fuzz::run_config(&doc);
    }
}
