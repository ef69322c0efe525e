//! The 16-byte message header (`struct acm_hdr`), docs/protocol/client-messages.md §3.
//!
//! Its one trap is the `length` field's byte order: host order when the opcode byte of a
//! request is exactly 0x01, big-endian otherwise — and RESOLVE responses (provider
//! success with opcode 0x01, core errors with 0x81) always carry it in host order.
//! [`LengthOrder::of`] encodes that rule; every parse and emit takes a [`Direction`].

use crate::error::{Layout, Result};
use byteorder::{BigEndian, ByteOrder, NativeEndian};

/// Header length.
pub const HEADER_LEN: usize = 16;
/// The only protocol version (ACM_VERSION).
pub const ACM_VERSION: u8 = 1;
/// Most entries a message can hold.
pub const MAX_ENTRIES: usize = 8;
/// Longest body a request can have: 8 entries.
pub const MAX_BODY_LEN: usize = MAX_ENTRIES * super::ENTRY_LEN;
/// Longest request the daemon reads (`sizeof(struct acm_msg)`).
pub const MAX_REQUEST_LEN: usize = HEADER_LEN + MAX_BODY_LEN;

mod field {
    use core::ops::Range;
    pub(super) const VERSION: usize = 0;
    pub(super) const OPCODE: usize = 1;
    pub(super) const STATUS: usize = 2;
    pub(super) const DATA: Range<usize> = 3..6;
    pub(super) const LENGTH: Range<usize> = 6..8;
    pub(super) const TID: Range<usize> = 8..16;
}

const LAYOUT: &Layout = &[
    ("version", 0..1),
    ("opcode", 1..2),
    ("status", 2..3),
    ("data", field::DATA),
    ("length", field::LENGTH),
    ("tid", field::TID),
];

open_enum! {
    /// The operation: the opcode's low nibble (what the daemon dispatches on).
    pub struct Operation(u8) {
        /// Resolve an address or path.
        RESOLVE = 0x01,
        /// Read performance counters.
        PERF_QUERY = 0x02,
        /// Enumerate endpoints.
        EP_QUERY = 0x03,
    }
}

open_enum! {
    /// The whole opcode byte: operation plus the ACK bit (0x80) set in most responses.
    pub struct Opcode(u8) {
        /// RESOLVE request — and also a provider's RESOLVE response
        /// (docs/reference-quirks.md §2).
        RESOLVE = 0x01,
        /// PERF_QUERY request.
        PERF_QUERY = 0x02,
        /// EP_QUERY request.
        EP_QUERY = 0x03,
        /// RESOLVE response from the core (errors) or an SA query (`-v`).
        RESOLVE_ACK = 0x81,
        /// PERF_QUERY response.
        PERF_QUERY_ACK = 0x82,
        /// EP_QUERY response.
        EP_QUERY_ACK = 0x83,
    }
}

impl Opcode {
    /// The ACK bit.
    pub const ACK_BIT: u8 = 0x80;
    /// Mask of the operation nibble.
    pub const OP_MASK: u8 = 0x0F;

    /// The operation the daemon dispatches on (`opcode & 0x0F`).
    #[must_use]
    pub const fn operation(self) -> Operation {
        Operation(self.0 & Self::OP_MASK)
    }

    /// Whether the ACK bit is set.
    #[must_use]
    pub const fn is_ack(self) -> bool {
        self.0 & Self::ACK_BIT != 0
    }

    /// This opcode with the ACK bit set.
    #[must_use]
    pub const fn with_ack(self) -> Self {
        Self(self.0 | Self::ACK_BIT)
    }
}

open_enum! {
    /// `hdr.status` (ACM_STATUS_*). Raw errno values and SA class status bytes also
    /// appear here (docs/reference-quirks.md §5, §6), so it is open.
    pub struct Status(u8) {
        /// Success.
        SUCCESS = 0,
        /// Out of memory (also SA ERR_NO_RESOURCES).
        ENOMEM = 1,
        /// Invalid request (also SA ERR_REQ_INVALID).
        EINVAL = 2,
        /// No data: not cached, or not ready (also SA ERR_NO_RECORDS).
        ENODATA = 3,
        /// Not connected (also SA ERR_REQ_INVALID_GID).
        ENOTCONN = 5,
        /// Timed out.
        ETIMEDOUT = 6,
        /// No local endpoint has the source address.
        ESRCADDR = 7,
        /// Bad source address type.
        ESRCTYPE = 8,
        /// Bad or duplicate destination.
        EDESTADDR = 9,
        /// Bad or missing destination type.
        EDESTTYPE = 10,
    }
}

impl Status {
    /// The Linux errno libacm (`ib_acme`) turns this status into.
    #[must_use]
    pub const fn libacm_errno(self) -> i32 {
        use crate::errno::{EADDRNOTAVAIL, EINVAL, ENODATA, ENOMEM, ENOTCONN, ETIMEDOUT};
        match self.0 {
            0 => 0,
            1 => ENOMEM,
            3 => ENODATA,
            5 => ENOTCONN,
            6 => ETIMEDOUT,
            7 | 9 => EADDRNOTAVAIL,
            _ => EINVAL,
        }
    }
}

/// Which way a message travels; it decides the length field's byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Direction {
    /// Client to daemon.
    Request,
    /// Daemon to client.
    Response,
}

/// Byte order of the header's length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LengthOrder {
    /// The CPU's order (little-endian on every Debian architecture we target).
    Host,
    /// Big-endian.
    Big,
}

impl LengthOrder {
    /// The order for a message with this opcode going this way
    /// (docs/protocol/client-messages.md §2, §3, §8.1): a request is host order only when
    /// its opcode byte is exactly 0x01 (so 0x81 is a RESOLVE with a big-endian length); a
    /// RESOLVE response is always host order.
    #[must_use]
    pub const fn of(opcode: Opcode, direction: Direction) -> Self {
        let host = match direction {
            Direction::Request => opcode.0 == Opcode::RESOLVE.0,
            Direction::Response => opcode.operation().0 == Operation::RESOLVE.0,
        };
        if host { Self::Host } else { Self::Big }
    }

    #[inline]
    fn read(self, b: &[u8]) -> u16 {
        match self {
            Self::Host => NativeEndian::read_u16(b),
            Self::Big => BigEndian::read_u16(b),
        }
    }

    #[inline]
    fn write(self, b: &mut [u8], v: u16) {
        match self {
            Self::Host => NativeEndian::write_u16(b, v),
            Self::Big => BigEndian::write_u16(b, v),
        }
    }
}

/// A zero-copy view of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> HeaderPacket<T> {
    view_constructors!("acm_hdr", LAYOUT);

    /// `data[0..3]`: src_out, src_index, dst_index (meaning depends on the opcode).
    pub fn data(&self) -> [u8; 3] {
        let b = &self.buffer.as_ref()[field::DATA];
        [b[0], b[1], b[2]]
    }
    /// The length field read in the order this message's opcode and direction imply.
    pub fn length(&self, direction: Direction) -> u16 {
        LengthOrder::of(self.opcode(), direction).read(&self.buffer.as_ref()[field::LENGTH])
    }
    /// The length field in a given order.
    pub fn length_in(&self, order: LengthOrder) -> u16 {
        order.read(&self.buffer.as_ref()[field::LENGTH])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> HeaderPacket<T> {
    /// Sets `data[0..3]`.
    pub fn set_data(&mut self, v: [u8; 3]) {
        self.buffer.as_mut()[field::DATA].copy_from_slice(&v);
    }
    /// Sets the length in the order the current opcode and `direction` imply (set the
    /// opcode first).
    pub fn set_length(&mut self, direction: Direction, v: u16) {
        let order = LengthOrder::of(self.opcode(), direction);
        order.write(&mut self.buffer.as_mut()[field::LENGTH], v);
    }
}

view_fields! {
    impl HeaderPacket, NativeEndian {
        /// Protocol version (must be 1).
        version, set_version: u8 = field::VERSION;
        /// Opcode byte.
        opcode, set_opcode: Opcode = field::OPCODE;
        /// Status.
        status, set_status: Status = field::STATUS;
        /// Transaction id: opaque, echoed unchanged (read in host order).
        tid, set_tid: u64 = field::TID;
    }
}

/// The header as typed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HeaderRepr {
    /// Protocol version; kept raw (the daemon closes the connection when it is not 1).
    pub version: u8,
    /// Opcode byte.
    pub opcode: Opcode,
    /// Status.
    pub status: Status,
    /// `data[0..3]` (src_out, src_index, dst_index, or the perf/EP index and port).
    pub data: [u8; 3],
    /// Total message length including the header. The message Reprs recompute it on
    /// emit, so it always matches what is written.
    pub length: u16,
    /// Transaction id (echoed unchanged).
    pub tid: u64,
}

impl HeaderRepr {
    /// A version-1 header with status 0, zero data and tid, and length 16.
    #[must_use]
    pub const fn new(opcode: Opcode) -> Self {
        Self {
            version: ACM_VERSION,
            opcode,
            status: Status::SUCCESS,
            data: [0; 3],
            length: HEADER_LEN as u16,
            tid: 0,
        }
    }

    /// Parses the first 16 bytes of `buf`.
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        let p = HeaderPacket::new_checked(buf)?;
        Ok(Self {
            version: p.version(),
            opcode: p.opcode(),
            status: p.status(),
            data: p.data(),
            length: p.length(direction),
            tid: p.tid(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 16 bytes.
    ///
    /// # Panics
    /// If `buf` is shorter than 16 bytes.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) {
        let mut p = HeaderPacket::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version(self.version);
        p.set_opcode(self.opcode);
        p.set_status(self.status);
        p.set_data(self.data);
        p.set_length(direction, self.length);
        p.set_tid(self.tid);
    }

    /// The length order of this header going `direction`.
    #[must_use]
    pub const fn length_order(&self, direction: Direction) -> LengthOrder {
        LengthOrder::of(self.opcode, direction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for HeaderRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self {
                version: u8::arbitrary(g),
                opcode: Opcode(u8::arbitrary(g)),
                status: Status(u8::arbitrary(g)),
                data: crate::testutil::bytes(g),
                length: u16::arbitrary(g),
                tid: u64::arbitrary(g),
            }
        }
    }

    impl Arbitrary for Direction {
        fn arbitrary(g: &mut Gen) -> Self {
            if bool::arbitrary(g) {
                Self::Request
            } else {
                Self::Response
            }
        }
    }

    #[test]
    fn length_order_rule() {
        use Direction::*;
        assert_eq!(LengthOrder::of(Opcode::RESOLVE, Request), LengthOrder::Host);
        assert_eq!(LengthOrder::of(Opcode(0x81), Request), LengthOrder::Big);
        assert_eq!(
            LengthOrder::of(Opcode::PERF_QUERY, Request),
            LengthOrder::Big
        );
        assert_eq!(
            LengthOrder::of(Opcode::RESOLVE, Response),
            LengthOrder::Host
        );
        assert_eq!(LengthOrder::of(Opcode(0x81), Response), LengthOrder::Host);
        assert_eq!(LengthOrder::of(Opcode(0x83), Response), LengthOrder::Big);
    }

    #[test]
    fn deconstruct_perf_request() {
        // docs/test-vectors.md §10: global perf query.
        let b = [1, 2, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
        let h = HeaderRepr::parse(&b, Direction::Request).unwrap();
        assert_eq!(h.opcode.operation(), Operation::PERF_QUERY);
        assert_eq!(h.length, 16);
        let mut out = [0u8; 16];
        h.emit(&mut out, Direction::Request);
        assert_eq!(out, b);
    }

    #[test]
    fn core_error_reply_is_host_order() {
        // docs/test-vectors.md §5: `01 81 0A 00 00 00 10 00` + tid.
        let b = [1, 0x81, 10, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let h = HeaderRepr::parse(&b, Direction::Response).unwrap();
        assert!(h.opcode.is_ack());
        assert_eq!(h.status, Status::EDESTTYPE);
        assert_eq!(h.length, 16);
    }

    #[test]
    fn truncated_header_names_field() {
        let e = HeaderRepr::parse(&[1, 1, 0, 0, 0, 0, 0x58], Direction::Request).unwrap_err();
        assert_eq!((e.field, e.offset), ("length", 6));
    }

    #[test]
    fn errno_mapping() {
        assert_eq!(Status::ESRCADDR.libacm_errno(), 99);
        assert_eq!(Status::ENODATA.libacm_errno(), 61);
        assert_eq!(Status(4).libacm_errno(), 22);
        assert_eq!(Status(0x65).libacm_errno(), 22);
        assert_eq!(Opcode::RESOLVE.with_ack(), Opcode::RESOLVE_ACK);
    }

    quickcheck! {
        fn prop_roundtrip(h: HeaderRepr, d: Direction) -> bool {
            let mut b = [0u8; 16];
            h.emit(&mut b, d);
            HeaderRepr::parse(&b, d) == Ok(h)
        }

        fn prop_garbage(b: Garbage<16, 20>, d: Direction) -> bool {
            HeaderRepr::parse(&b.0, d).is_ok() == (b.0.len() >= 16)
        }
    }
}
