//! One engine, configured as the reference fabric, fed an arbitrary sequence of timed
//! inputs: client bytes on four connections, closes, peers' ACM MADs, SA answers and
//! failures, send completions, routing answers, port and address events, device loss,
//! netlink bytes and ticks. No panic; every request answered at most once;
//! `poll_timeout` never in the past after a drain; every emitted MAD parses with
//! acm-proto; the kernel acts on every message the engine sends it. The body is shared with acm-engine's stable smoke test
//! (`acm-engine/tests/fuzz_smoke.rs`).
#![no_main]

#[path = "../../acm-engine/tests/support/engine_fuzz.rs"]
mod engine_fuzz;
#[path = "../../acm-engine/tests/support/kernel_model.rs"]
mod kernel_model;
#[path = "../../acm-engine/tests/support/reference_fabric.rs"]
mod reference_fabric;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    engine_fuzz::run(data);
});
