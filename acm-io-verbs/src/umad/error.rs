//! Why a umad device cannot be used, in words an administrator can act on.

use std::io;
use std::path::PathBuf;

/// A umad failure.
#[derive(Debug, thiserror::Error)]
pub enum UmadError {
    /// The device node could not be opened.
    #[error("cannot open {}: {source}{}", path.display(), open_hint(source))]
    Open {
        /// The device node.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The kernel refused the SA agent.
    #[error("cannot register an SA agent on {}: {source}", path.display())]
    Register {
        /// The device node.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The kernel's user MAD ABI is not the one this crate speaks.
    #[error(
        "the kernel's user MAD ABI is version {found}, this ibacm speaks version {}",
        super::ABI_VERSION
    )]
    AbiVersion {
        /// What `/sys/class/infiniband_mad/abi_version` says.
        found: u32,
    },
}

/// What to check for the usual reasons an open fails.
fn open_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => " (is the ib_umad module loaded?)",
        io::ErrorKind::PermissionDenied => {
            " (ibacm needs read and write access to the umad devices: run it as root)"
        }
        _ => "",
    }
}
