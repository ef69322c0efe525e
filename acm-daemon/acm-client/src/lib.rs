//! What the tools that talk to an ibacm daemon share, as libacm is in rdma-core:
//! reaching a service named by `-S`, sending one request and reading its reply, building
//! request entries, reading addresses and bracket lists the way `ib_acme` reads them, and
//! the errno texts failures are reported with.
//!
//! The `ib_acme` and `acm-load` packages build on this library; it depends on neither of
//! them, nor on the daemon (`ibacm`), which speaks the same protocol from the other end
//! through acm-proto alone. The daemon uses one module of it, [`metrics`]: the
//! Prometheus text of a daemon's counters, which `ib_acme --format prometheus` prints
//! and the daemon's `--metrics-file` holds, so that both write the same families.
//!
//! | module | purpose |
//! |---|---|
//! | [`service`] | how `-S` names a service, the TCP port file |
//! | [`connection`] | connecting, one request / one reply, resolve / perf / endpoint calls |
//! | [`error`] | connect and request failures with the status and errno `ib_acme` reports |
//! | [`entries`] | request entries as libacm builds them (name, IP, LID and GID paths) |
//! | [`addr`] | address formats, auto-detection, glibc-style address text |
//! | [`brackets`] | `node[01-03,7]` lists |
//! | [`cnum`] | C number parsing (`atoi`, `%hu`) |
//! | [`errno`] | errno values and glibc's texts for them |
//! | [`metrics`] | the Prometheus text format of a daemon's counters |

pub mod addr;
pub mod brackets;
pub mod cnum;
pub mod connection;
pub mod entries;
pub mod errno;
pub mod error;
pub mod metrics;
pub mod service;

pub use connection::{Connection, ResolveReply, connect};
pub use entries::{gid_path_entry, ip_entry, lid_path_entry, name_entry};
pub use error::{ClientError, ConnectError};
pub use service::{
    DEFAULT_PORT, DEFAULT_SERVICE, PORT_FILE, PortFile, ServiceAddr, read_port_file,
};
