//! `acm-fabric-hub`: serves one simulated fabric to separate daemon processes, each
//! attached as one host of the fabric file (see `acm_io_sim::hub` for the protocol),
//! and changes a running hub's fabric from the command line.
//!
//! ```text
//! acm-fabric-hub --fabric testdata/fabrics/demo.toml --socket /tmp/acm-fabric.sock
//! acm-fabric-hub change --socket /tmp/acm-fabric.sock port-down node2
//! acm-fabric-hub change --socket /tmp/acm-fabric.sock set-lid node2 66
//! ```
//!
//! Attachments, detachments and refusals are logged to stderr. The hub runs until it is
//! killed; a socket file left behind is replaced by the next hub started on that path.
//! `change` returns once the hub has told every attached host concerned (an emulated
//! HCA then raises the async events), or fails with the hub's reason.

use acm_io_sim::FabricSpec;
use acm_io_sim::hub::Hub;
use acm_io_sim::hub::wire::{Control, PortName};
use clap::{Args as ClapArgs, Parser, Subcommand};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Serve a simulated InfiniBand fabric to ibacm daemons over a unix datagram socket.
#[derive(Debug, Parser)]
#[command(version, about, subcommand_negates_reqs = true)]
struct Args {
    /// The fabric description (TOML, see acm_io_sim::spec).
    #[arg(long, value_name = "FILE.toml", required = true)]
    fabric: Option<PathBuf>,
    /// Where to listen (a unix datagram socket path).
    #[arg(long, value_name = "PATH", required = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Change the fabric of the hub listening at --socket.
    Change {
        /// The running hub's socket.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[command(subcommand)]
        change: Change,
    },
}

/// One port: its host's name, HCA index and port number.
#[derive(Debug, ClapArgs)]
struct Port {
    /// The host's name in the fabric file.
    host: String,
    /// The HCA's index among the host's.
    #[arg(long, default_value_t = 0)]
    hca: u32,
    /// The port number.
    #[arg(long, default_value_t = 1)]
    port: u8,
}

impl Port {
    fn name(self) -> PortName {
        PortName {
            host: self.host,
            hca: self.hca,
            port: self.port,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Change {
    /// The port goes down (the SM drops it from every group).
    PortDown(Port),
    /// The port comes back up.
    PortUp(Port),
    /// The port gets a new base LID (and LMC).
    SetLid {
        #[command(flatten)]
        port: Port,
        /// The new base LID.
        lid: u16,
        /// The new LMC.
        #[arg(long, default_value_t = 0)]
        lmc: u8,
    },
    /// The port's pkey table is replaced (hexadecimal, in order, e.g. 0xffff 0x8001).
    SetPkeys {
        #[command(flatten)]
        port: Port,
        /// The new table.
        #[arg(required = true, value_parser = parse_pkey)]
        pkeys: Vec<u16>,
    },
    /// The port's GID 0 is replaced.
    SetGid {
        #[command(flatten)]
        port: Port,
        /// The new GID, written as an IPv6 address.
        gid: Ipv6Addr,
    },
    /// The SM moves to the port with this LID and forgets every group.
    SmMove {
        /// The new SM's LID.
        lid: u16,
    },
    /// The SM asks the port to register again (CLIENT_REREGISTER).
    ClientReregister(Port),
    /// Every QP the host has on the port breaks (QP_FATAL).
    QpError(Port),
    /// The HCA leaves its host (its contexts get DEVICE_FATAL).
    DeviceRemove {
        /// The host's name in the fabric file.
        host: String,
        /// The HCA's index among the host's.
        #[arg(long, default_value_t = 0)]
        hca: u32,
        /// Dead but still listed, as after a fatal error, rather than removed.
        #[arg(long)]
        fatal: bool,
    },
    /// The HCA comes back, its ports as before.
    DeviceAdd {
        /// The host's name in the fabric file.
        host: String,
        /// The HCA's index among the host's.
        #[arg(long, default_value_t = 0)]
        hca: u32,
    },
}

fn parse_pkey(s: &str) -> Result<u16, String> {
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u16::from_str_radix(hex, 16).map_err(|_| format!("{s}: not a 16-bit hexadecimal pkey"))
}

impl Change {
    fn control(self) -> Control {
        match self {
            Self::PortDown(p) => Control::PortDown(p.name()),
            Self::PortUp(p) => Control::PortUp(p.name()),
            Self::SetLid { port, lid, lmc } => Control::SetLid {
                port: port.name(),
                lid,
                lmc,
            },
            Self::SetPkeys { port, pkeys } => Control::SetPkeys {
                port: port.name(),
                pkeys,
            },
            Self::SetGid { port, gid } => Control::SetGid {
                port: port.name(),
                gid: gid.into(),
            },
            Self::SmMove { lid } => Control::SmMove { lid },
            Self::ClientReregister(p) => Control::ClientReregister(p.name()),
            Self::QpError(p) => Control::QpError(p.name()),
            Self::DeviceRemove { host, hca, fatal } => Control::DeviceRemove { host, hca, fatal },
            Self::DeviceAdd { host, hca } => Control::DeviceAdd { host, hca },
        }
    }
}

/// Asks the hub at `hub` for `change`, from a socket of this process beside it.
fn change(hub: &Path, change: Change) -> ExitCode {
    let me = hub.with_file_name(format!(
        ".acm-fabric-hub-change-{}.sock",
        std::process::id()
    ));
    match acm_io_sim::hub::control::change(hub, &me, &change.control()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acm-fabric-hub: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Change { socket, change: c }) = args.command {
        return change(&socket, c);
    }
    let (Some(fabric), Some(socket)) = (args.fabric, args.socket) else {
        // clap requires both without a subcommand; said again for a future change.
        eprintln!("acm-fabric-hub: --fabric and --socket are required to serve");
        return ExitCode::FAILURE;
    };
    serve(&fabric, &socket)
}

/// Serves the fabric described at `fabric` on `socket` until killed.
fn serve(fabric: &Path, socket: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(fabric) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("acm-fabric-hub: {}: {e}", fabric.display());
            return ExitCode::FAILURE;
        }
    };
    let spec = match FabricSpec::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("acm-fabric-hub: {}: {e}", fabric.display());
            return ExitCode::FAILURE;
        }
    };
    let mut hosts: Vec<&str> = spec.hosts.iter().take(8).map(|h| h.name.as_str()).collect();
    if spec.hosts.len() > hosts.len() {
        hosts.push("…");
    }
    eprintln!(
        "acm-fabric-hub: {} ({} hosts: {}) on {}",
        fabric.display(),
        spec.hosts.len(),
        hosts.join(", "),
        socket.display()
    );
    let mut hub = match Hub::bind(spec, socket) {
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
