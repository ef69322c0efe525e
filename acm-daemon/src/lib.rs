//! `acm-daemon`: the user-facing binaries, drop-in for rdma-core's.
//!
//! - `ibacm` ([`daemon`]): the daemon; a mio event loop around the engine, its client
//!   sockets, files, log and systemd integration, on InfiniBand hardware (acm-io-verbs,
//!   feature `verbs`) or on a simulated or hub fabric.
//! - `ib_acme` ([`acme`]): the test and configuration tool.
//! - `acmdump` ([`dump`]): decodes raw ACM messages field by field.
//! - `acm-load` ([`load`]): a load generator for any ACM daemon, and the echo server
//!   that measures the socket's own limit.
//! - [`client`]: what the tools that talk to a daemon share (libacm's part in
//!   rdma-core): connecting, request entries, address and bracket-list parsing, errno
//!   texts.
//! - [`metrics`]: the Prometheus text format of a daemon's counters, written by both
//!   `ib_acme --format prometheus` and the daemon's `--metrics-file`.
//!
//! Dependencies run one way: the tools use [`client`]; the daemon uses none of the
//! tools' modules nor [`client`], and no tool uses the daemon's modules; [`metrics`]
//! uses none of them and is used by `ib_acme` and the daemon alike.

pub mod acme;
pub mod client;
pub mod daemon;
pub mod dump;
pub mod load;
pub mod metrics;

#[cfg(test)]
mod test_dir;
