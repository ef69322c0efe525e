//! The daemon's ties to the host kernel, one purpose per module:
//!
//! - [`ls`]: the NETLINK_RDMA socket carrying the kernel's RDMA_NL_LS path requests
//!   (docs/protocol/netlink-ls.md), [`channel`], its place in the event loop, and
//!   [`caps`], whether this process may answer them at all;
//! - [`rtnl`]: NETLINK_ROUTE monitoring of address and link changes (docs/daemon.md §6);
//! - [`ipoib`]: the IPoIB interfaces in sysfs (port GID, pkey);
//! - [`addrs`]: the start-up walk of the IP addresses on those interfaces;
//! - [`source`]: the kernel's choice of source address for a destination;
//! - [`neigh`]: the IPoIB neighbour table, for `addr_prot neigh`.
//!
//! The engine does all the parsing of what the kernel asks and builds every answer;
//! these modules only move bytes and read the system. `rtnl`, `ipoib`, `addrs` and
//! `source` serve the hardware backend.

pub(crate) mod caps;
pub(crate) mod channel;
pub(crate) mod ls;

// Used by the hardware backend alone; their unit tests run in every build.
#[cfg(any(feature = "verbs", test))]
pub(crate) mod addrs;
#[cfg(any(feature = "verbs", test))]
pub(crate) mod ipoib;
#[cfg(any(feature = "verbs", test))]
pub(crate) mod neigh;
#[cfg(any(feature = "verbs", test))]
pub(crate) mod rtnl;
#[cfg(any(feature = "verbs", test))]
pub(crate) mod source;
