//! `ibacm`: the InfiniBand Communication Management Assistant daemon, drop-in for
//! rdma-core's. See `ibacm` and `ibacm --help`.

use ibacm::args;
use std::process::ExitCode;

fn main() -> ExitCode {
    match args::parse(std::env::args().skip(1)) {
        Ok(args::Command::Run(a)) => ibacm::run(*a),
        Ok(args::Command::Help) => {
            println!("{}", args::USAGE);
            ExitCode::SUCCESS
        }
        Ok(args::Command::Version) => {
            println!("ibacm {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibacm: {e}");
            eprintln!("{}", args::USAGE);
            ExitCode::FAILURE
        }
    }
}
