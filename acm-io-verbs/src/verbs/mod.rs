//! Verbs through rdma-sys (feature `verbs`): devices, port queries, async events, and
//! one UD queue pair per endpoint.
//!
//! Ownership follows the verbs object tree: a [`VerbsDevice`] owns its context,
//! protection domain and completion channel; each [`UdEndpoint`] owns its CQ, QP,
//! memory region and in-flight address handles and keeps its device's handles alive.
//! Everything is single-threaded and non-blocking: the daemon polls the device's
//! async-event and completion descriptors and calls back in.

mod device;
mod error;
mod port_query;
mod ud;

pub use device::{DeviceEntry, VerbsDevice, list_devices};
pub use error::VerbsError;
pub use ud::{Completion, GRH_LEN, RECV_LEN, RecvMeta, SEND_LEN, UdConfig, UdEndpoint};
