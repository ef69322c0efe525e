//! `ib_acme`: query an ibacm service for path records, performance counters and
//! endpoints, or write its configuration files. A drop-in for rdma-core's tool; the
//! behaviour lives in [`ib_acme`].

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(ib_acme::main_from_env())
}
