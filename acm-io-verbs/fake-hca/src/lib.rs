//! `acm-fake-hca`: an emulated InfiniBand HCA for tests, loaded with `LD_PRELOAD`.
//!
//! Loaded into a process (our `ibacm` built with the `verbs` feature, or any verbs
//! program), it answers the libibverbs calls and the kernel user-MAD device as one
//! host of an [`acm-fabric-hub`](acm_io_sim::hub) fabric: devices, ports, LIDs, GIDs
//! and pkeys are the host's in the fabric description, UD sends and multicast travel
//! between the hub's hosts, and SA MADs reach the hub's SA/SM. Nothing else of the
//! process changes: every other file and descriptor is the real one, except that
//! source-address lookups of datagram sockets follow the emulated host's routing.
//!
//! Configuration is by environment ([`config`]): `ACM_FAKE_HCA_HUB` (the hub's
//! socket) and `ACM_FAKE_HCA_HOST` (the host's name) turn it on. The host's sysfs
//! tree, which the daemon reads for discovery, is written by the
//! `acm-fake-hca-sysfs` binary of this package from the same fabric description.
//!
//! - [`verbs`]: the libibverbs entry points and the context ops of the data path;
//! - [`umad`]: `/dev/infiniband/umad<N>` and the `open`, `read`, `write`, `ioctl`
//!   and `close` wrappers it needs;
//! - [`link`]: the hub connection and its thread; [`deliver`]: what the hub sends,
//!   to the verbs objects and umad descriptors;
//! - [`net`]: the host's IP routing, for a program that asks the kernel which source
//!   address it would use (`connect` and `getsockname` of a datagram socket);
//! - [`layout`]: what the library and the sysfs generator agree on.
//!
//! Known limits: no IPoIB interfaces (`getifaddrs` is the machine's; the host's
//! addresses come from its address file); UD QPs only; a QP's port is fixed at its first INIT; `dup` of a umad
//! descriptor is not followed; a process that forks after its first verbs or umad
//! call has no hub thread in the child.

pub mod config;
pub mod deliver;
pub mod fdset;
pub mod ffi;
pub mod layout;
pub mod link;
pub mod net;
pub mod umad;
pub mod verbs;
