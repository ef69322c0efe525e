//! `acm-io-verbs`: the real InfiniBand backend of the ibacm daemon, I/O only.
//!
//! It carries what the engine asks for and reports what the hardware says, and makes no
//! protocol decision of its own: no retries, no timers, no interpretation of MADs.
//!
//! - [`sysfs`]: device and port discovery from `/sys/class/infiniband` and
//!   `/sys/class/infiniband_mad`, as a parser over a directory root so that tests read
//!   fixture trees.
//! - [`umad`]: SA traffic through the kernel's user MAD interface
//!   (`/dev/infiniband/umadN`), spoken directly (no libibumad): agent registration,
//!   the user MAD header, non-blocking reads and writes on an owned descriptor.
//! - `verbs` (feature `verbs`, rdma-sys): device contexts, port queries, a UD queue
//!   pair per endpoint with its completion channel, address handles, multicast attach,
//!   and async events.
//!
//! - [`provider`]: C provider plugins (`acm_prov.h`): loading them, calling them, and
//!   the core's functions they call back.
//!
//! - [`heap`]: giving the allocator's free pages back to the system.
//!
//! - [`poll_set`] and [`sock_io`]: the daemon's busy clients waited on with `ppoll`,
//!   and their sockets read and written with the system calls themselves.
//!
//! Every `unsafe` block in the workspace lives here and says why it is sound.

pub mod av;
pub mod event;
pub mod heap;
pub mod poll_set;
pub mod port;
pub mod provider;
pub mod sock_io;
pub mod sysfs;
pub mod umad;
#[cfg(feature = "verbs")]
pub mod verbs;

pub use av::{GrhSpec, UdAddress};
pub use event::{AsyncEvent, AsyncEventKind};
pub use port::{LinkLayer, PortInfo, PortState};
