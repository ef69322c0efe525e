//! `acm-fabric-hub`: serves one simulated fabric to separate daemon processes, each
//! attached as one host of the fabric file (see `acm_io_sim::hub` for the protocol).
//!
//! ```text
//! acm-fabric-hub --fabric testdata/fabrics/demo.toml --socket /tmp/acm-fabric.sock
//! ```
//!
//! Attachments, detachments and refusals are logged to stderr. The hub runs until it is
//! killed; a socket file left behind is replaced by the next hub started on that path.

use acm_io_sim::FabricSpec;
use acm_io_sim::hub::Hub;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Serve a simulated InfiniBand fabric to ibacm daemons over a unix datagram socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The fabric description (TOML, see acm_io_sim::spec).
    #[arg(long, value_name = "FILE.toml")]
    fabric: PathBuf,
    /// Where to listen (a unix datagram socket path).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let text = match std::fs::read_to_string(&args.fabric) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("acm-fabric-hub: {}: {e}", args.fabric.display());
            return ExitCode::FAILURE;
        }
    };
    let spec = match FabricSpec::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("acm-fabric-hub: {}: {e}", args.fabric.display());
            return ExitCode::FAILURE;
        }
    };
    let mut hosts: Vec<&str> = spec.hosts.iter().take(8).map(|h| h.name.as_str()).collect();
    if spec.hosts.len() > hosts.len() {
        hosts.push("…");
    }
    eprintln!(
        "acm-fabric-hub: {} ({} hosts: {}) on {}",
        args.fabric.display(),
        spec.hosts.len(),
        hosts.join(", "),
        args.socket.display()
    );
    let mut hub = match Hub::bind(spec, &args.socket) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("acm-fabric-hub: {e}");
            return ExitCode::FAILURE;
        }
    };
    hub.set_logging(true);
    match hub.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acm-fabric-hub: {e}");
            ExitCode::FAILURE
        }
    }
}
