//! `acm-load`: load an ACM daemon with many concurrent clients and report throughput,
//! errors and latency, or serve fixed replies as the yardstick for such a load. The
//! behaviour lives in [`acm_load`].

use std::process::ExitCode;

fn main() -> ExitCode {
    acm_load::main_from_env()
}
