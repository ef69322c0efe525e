//! `acm-daemon`: the user-facing binaries.
//!
//! Today: `acmdump`, which decodes raw ACM messages field by field. To come (issue 5):
//! `ibacm`, the daemon (mio event loop, client sockets, config, logging, systemd,
//! netlink) and `ib_acme`, both drop-in for rdma-core's.

pub mod daemon;
pub mod dump;
