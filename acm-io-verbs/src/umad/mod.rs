//! SA traffic through the kernel's user MAD interface, spoken directly.
//!
//! Why not libibumad: everything ibacm needs from it is four ioctls and read/write of a
//! 64-byte header, a stable kernel ABI (version 5 since 2.6.x). Speaking it directly
//! keeps the default build free of C libraries, lets the header encoding be tested
//! byte by byte without hardware, and leaves one owned non-blocking descriptor per
//! port for the daemon's poller instead of a library handle.

mod device;
mod error;
pub mod header;
pub mod register;

pub use device::{MadRecv, MadSend, UmadDevice};
pub use error::UmadError;
pub use header::{HEADER_LEN, MadGrh, UserMadHeader};

/// The user MAD ABI this crate speaks (`/sys/class/infiniband_mad/abi_version`).
pub const ABI_VERSION: u32 = 5;

/// Checks the kernel's ABI version, if sysfs told it.
///
/// # Errors
/// The kernel speaks another version.
pub fn check_abi(found: Option<u32>) -> Result<(), UmadError> {
    match found {
        Some(v) if v != ABI_VERSION => Err(UmadError::AbiVersion { found: v }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_abi_5_is_accepted() {
        assert!(check_abi(Some(5)).is_ok());
        assert!(check_abi(None).is_ok());
        assert_eq!(
            check_abi(Some(4)).unwrap_err().to_string(),
            "the kernel's user MAD ABI is version 4, this ibacm speaks version 5"
        );
    }
}
