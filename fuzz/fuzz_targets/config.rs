//! The daemon's config parsers (options, address and hosts files) on arbitrary bytes:
//! no panic, every diagnostic on a line of the input, and the address file's device
//! check. The body is shared with acm-engine's stable smoke test.
#![no_main]

#[path = "../../acm-engine/tests/support/engine_fuzz.rs"]
mod engine_fuzz;
#[path = "../../acm-engine/tests/support/reference_fabric.rs"]
mod reference_fabric;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    engine_fuzz::run_config(data);
});
