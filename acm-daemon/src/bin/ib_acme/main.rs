//! `ib_acme`: query an ibacm service for path records, performance counters and
//! endpoints, or write its configuration files. A drop-in for rdma-core's tool; the
//! behaviour lives in [`acm_daemon::acme`].

use acm_daemon::acme;
use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(acme::main_from_env())
}
