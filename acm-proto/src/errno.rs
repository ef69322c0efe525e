//! The Linux errno values that travel in ibacm's bytes: what libacm turns an ACM status
//! into ([`Status::libacm_errno`](crate::client::Status::libacm_errno)) and the status
//! umad gives a sent MAD back with ([`UmadStatus`](crate::mad::UmadStatus)). They are
//! the kernel's numbers on every Linux architecture ibacm runs on, so they are wire
//! facts here, not a libc binding.

/// Out of memory.
pub const ENOMEM: i32 = 12;
/// Invalid argument.
pub const EINVAL: i32 = 22;
/// No data available.
pub const ENODATA: i32 = 61;
/// Cannot assign the requested address.
pub const EADDRNOTAVAIL: i32 = 99;
/// Not connected.
pub const ENOTCONN: i32 = 107;
/// Timed out: what umad gives a MAD back with after its last retry.
pub const ETIMEDOUT: i32 = 110;
