//! `acm-proto`: every byte the InfiniBand Communication Management Assistant speaks.
//!
//! This crate turns wire bytes into typed values and back, exactly as the rdma-core
//! reference (`ibacm`, `ibacmp`, `ib_acme`, librdmacm and the kernel) writes them. It
//! performs no I/O, reads no clock, and allocates only where a message is unbounded (the
//! EP_QUERY reply's address list).
//!
//! # Formats
//!
//! | module | format |
//! |---|---|
//! | [`client`] | the client protocol (`struct acm_msg`): header, address entries, RESOLVE, PERF_QUERY, EP_QUERY |
//! | [`path_record`] | the 64-byte SA PathRecord (`struct ibv_path_record`) |
//! | [`mad`] | the 24-byte common MAD header |
//! | [`sa`] | the SA MAD header (RMPP, SM_Key, attribute offset, component mask) |
//! | [`mcmember`] | the 56-byte MCMemberRecord |
//! | [`acm_mad`] | the ACM MAD (class 0x2C) and its resolve record |
//! | [`grh`] | the 40-byte Global Route Header |
//! | [`ipoib`] | the 20-byte IPoIB hardware address (a neighbour table's link-layer address) |
//! | [`mgid`] | the multicast GID scheme of ibacm's groups |
//! | [`netlink`] | RDMA netlink local-service (RDMA_NL_LS) requests and replies |
//! | [`notice`] | the SA's InformInfo (trap subscription) and Notice (the trap reported) |
//! | [`errno`] | the Linux errno values libacm reports and umad gives a MAD back with |
//!
//! # The wire pattern
//!
//! Each format has two faces, after smoltcp:
//!
//! * a **view**, `XxxPacket<T: AsRef<[u8]>>`, over a byte buffer, with getters (and, for
//!   `T: AsMut<[u8]>`, setters) for every field, including each bit field;
//! * an owned **`XxxRepr`**, the validated high-level value, with `parse`, `emit` and
//!   `buffer_len`.
//!
//! The contract:
//!
//! * `new_unchecked` never fails; after `check_len` (or `new_checked`) succeeds, no
//!   accessor panics.
//! * `Repr::parse` never panics, whatever the bytes; it fails with a [`ParseError`] naming
//!   the format, the field, its offset and the reason.
//! * `Repr::emit` never panics when the buffer is at least `buffer_len()` bytes long.
//! * Never use `new_checked` to wrap a buffer for emission: its result depends on stale
//!   bytes in a reused buffer. Use `new_unchecked`.
//!
//! Code points (opcodes, statuses, methods, attribute ids, rates …) are *open enums*:
//! transparent newtypes with named constants, so unknown values still parse and are
//! re-emitted unchanged. Deciding what an unknown value means is the engine's job.
//!
//! ```
//! use acm_proto::client::{AddrType, Direction, EpAddrRepr, EpFlags, HeaderRepr, Opcode, ResolveRepr};
//! use core::net::Ipv4Addr;
//!
//! let mut req = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
//! req.push(EpAddrRepr::ipv4(EpFlags::SOURCE, Ipv4Addr::new(10, 0, 0, 1))).unwrap();
//! req.push(EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::new(10, 0, 0, 2))).unwrap();
//! let mut buf = [0u8; 592];
//! let n = req.emit(&mut buf, Direction::Request);
//! assert_eq!(n, 160);
//! assert_eq!(&buf[..8], &[1, 1, 0, 0, 0, 0, 0xA0, 0]);
//! let back = ResolveRepr::parse(&buf[..n], Direction::Request).unwrap();
//! assert_eq!(back, req);
//! assert_eq!(back.entries[1].addr_type, AddrType::IP);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

extern crate alloc;
#[cfg(test)]
extern crate std;

#[macro_use]
mod macros;

mod bytes64;
mod error;
mod gid;
mod units;
mod wire_value;

pub mod acm_mad;
pub mod client;
pub mod errno;
pub mod grh;
pub mod ipoib;
pub mod mad;
pub mod mcmember;
pub mod mgid;
pub mod netlink;
pub mod notice;
pub mod path_record;
pub mod sa;

pub use bytes64::{BYTES64_LEN, Bytes64};
pub use error::{ParseError, Reason, Result};
pub use gid::Gid;
pub use units::{Mtu, Rate, Selected, Selector};

/// The first multicast LID (IBTA Vol 1 §4.1.3): LIDs from here up to 0xFFFE name
/// multicast groups, below it (from 1) ports. Senders and the fabric tell a multicast
/// destination from a unicast one by it.
pub const MULTICAST_LID_BASE: u16 = 0xC000;

#[cfg(test)]
mod testutil;
