//! `acm-daemon`: the user-facing binaries, drop-in for rdma-core's.
//!
//! - `ibacm` ([`daemon`]): the daemon; a mio event loop around the engine, its client
//!   sockets, files, log and systemd integration, on InfiniBand hardware (acm-io-verbs,
//!   feature `verbs`) or on a simulated or hub fabric.
//! - `ib_acme` ([`acme`]): the test and configuration tool.
//! - `acmdump` ([`dump`]): decodes raw ACM messages field by field.
//! - `acm-load` ([`load`]): a load generator for any ACM daemon, and the echo server
//!   that measures the socket's own limit.

pub mod acme;
pub mod daemon;
pub mod dump;
pub mod load;
