//! `acm-daemon`: the user-facing binaries, drop-in for rdma-core's.
//!
//! - `ibacm` ([`daemon`]): the daemon; a mio event loop around the engine, its client
//!   sockets, files, log and systemd integration, on a simulated or hub fabric (the
//!   hardware backend comes with acm-io-verbs).
//! - `ib_acme` ([`acme`]): the test and configuration tool.
//! - `acmdump` ([`dump`]): decodes raw ACM messages field by field.

pub mod acme;
pub mod daemon;
pub mod dump;
