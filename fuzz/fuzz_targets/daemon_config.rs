//! The daemon's reading of its configuration on arbitrary bytes: the options file
//! through the engine's parser and the daemon's own settings, then (after the first NUL
//! byte) the address file as the daemon hands it to the engine. The body is shared with
//! the ibacm package's stable smoke test.
#![no_main]

#[path = "../../acm-daemon/ibacm/tests/support/daemon_config_fuzz.rs"]
mod daemon_config_fuzz;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = daemon_config_fuzz::run(data);
});
