//! Verbs failures, naming the device and the call.

use std::io;

/// A verbs failure.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// libibverbs could not list devices at all (no kernel support, say).
    #[error("cannot list RDMA devices: {0}{hint}", hint = list_hint(.0))]
    List(io::Error),
    /// libibverbs knows no device of that name.
    #[error("no RDMA device named {0} (libibverbs does not list it)")]
    NoSuchDevice(String),
    /// A verbs call failed.
    #[error("{device}: {call} failed: {source}")]
    Call {
        /// The device.
        device: String,
        /// The call (`ibv_create_qp`, …).
        call: &'static str,
        /// errno.
        source: io::Error,
    },
    /// Every send slot of an endpoint is in use.
    #[error("{device}: all {slots} send slots of QP {qpn:#x} are in use")]
    SendQueueFull {
        /// The device.
        device: String,
        /// The QP.
        qpn: u32,
        /// How many slots it has.
        slots: usize,
    },
}

fn list_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::ENOSYS) {
        " (the kernel has no RDMA support: is ib_uverbs loaded?)"
    } else {
        ""
    }
}

/// Nothing for a call that returned 0, or the error of a failed one (see
/// [`call_error`]): the check every verbs call that answers with a status needs.
pub(crate) fn check_call(device: &str, call: &'static str, ret: i32) -> Result<(), VerbsError> {
    if ret == 0 {
        Ok(())
    } else {
        Err(call_error(device, call, ret))
    }
}

/// The error for a failed call, from errno (or from the return value, which verbs
/// calls that return an errno use).
pub(crate) fn call_error(device: &str, call: &'static str, ret: i32) -> VerbsError {
    let source = if ret > 0 {
        io::Error::from_raw_os_error(ret)
    } else {
        io::Error::last_os_error()
    };
    VerbsError::Call {
        device: device.to_owned(),
        call,
        source,
    }
}
