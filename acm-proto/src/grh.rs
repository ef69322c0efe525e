//! The 40-byte Global Route Header that precedes every UD receive (IBTA Vol 1 §8.3).
//!
//! ibacmp's receive buffers are 296 bytes: this header, then the 256-byte MAD. A
//! responder takes the requester's GID from the GRH's SGID
//! (docs/protocol/acm-mad.md §1, §5).

use crate::Gid;
use crate::error::{Layout, Result};
use byteorder::BigEndian;

/// Length of a GRH.
pub const GRH_LEN: usize = 40;

/// The IP version nibble of every GRH.
pub const GRH_IP_VERSION: u8 = 6;

mod field {
    use core::ops::Range;
    /// Bits 31:28 IP version, 27:20 traffic class, 19:0 flow label.
    pub(super) const VERSION_TCLASS_FLOW: Range<usize> = 0..4;
    pub(super) const PAY_LEN: Range<usize> = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SGID: Range<usize> = 8..24;
    pub(super) const DGID: Range<usize> = 24..40;
}

const LAYOUT: &Layout = &[
    ("version_tclass_flow", field::VERSION_TCLASS_FLOW),
    ("pay_len", field::PAY_LEN),
    ("next_header", 6..7),
    ("hop_limit", 7..8),
    ("sgid", field::SGID),
    ("dgid", field::DGID),
];

open_enum! {
    /// The GRH next-header code.
    pub struct NextHeader(u8) {
        /// An InfiniBand transport header follows (what every IB packet carries).
        IBA = 0x1B,
    }
}

/// A zero-copy view of a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrhPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GrhPacket<T> {
    view_constructors!("GRH", LAYOUT);
}

impl<'a, T: AsRef<[u8]> + ?Sized> GrhPacket<&'a T> {
    /// Everything after the 40-byte GRH (the MAD, in an ibacmp receive buffer).
    pub fn payload(&self) -> &'a [u8] {
        self.buffer.as_ref().get(GRH_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrhPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Everything after the GRH, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.bm().get_mut(GRH_LEN..).unwrap_or(&mut [])
    }
}

view_bits! {
    impl GrhPacket, BigEndian, field::VERSION_TCLASS_FLOW => u32 {
        /// IP version (bits 31:28), 6 in every valid GRH.
        ip_version, set_ip_version: u8 = 28, 4;
        /// Traffic class (bits 27:20).
        tclass, set_tclass: u8 = 20, 8;
        /// Flow label (bits 19:0).
        flow_label, set_flow_label: u32 = 0, 20;
    }
}

view_fields! {
    impl GrhPacket, BigEndian {
        /// The whole first word: version, traffic class and flow label.
        version_tclass_flow, set_version_tclass_flow: u32 = field::VERSION_TCLASS_FLOW;
        /// Payload length.
        pay_len, set_pay_len: u16 = field::PAY_LEN;
        /// Next header.
        next_header, set_next_header: NextHeader = field::NEXT_HEADER;
        /// Hop limit.
        hop_limit, set_hop_limit: u8 = field::HOP_LIMIT;
        /// Source GID.
        sgid, set_sgid: Gid = field::SGID;
        /// Destination GID.
        dgid, set_dgid: Gid = field::DGID;
    }
}

/// A GRH as typed values. Every bit is kept (the IP version is not checked), so parse
/// then emit reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GrhRepr {
    /// IP version, 4 bits (6).
    pub ip_version: u8,
    /// Traffic class.
    pub tclass: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Payload length.
    pub pay_len: u16,
    /// Next header.
    pub next_header: NextHeader,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: Gid,
    /// Destination GID.
    pub dgid: Gid,
}

impl GrhRepr {
    /// A GRH from `sgid` to `dgid` with version 6, next header IBA and everything else
    /// zero; set the other fields as needed.
    #[must_use]
    pub fn iba(sgid: Gid, dgid: Gid) -> Self {
        Self {
            ip_version: GRH_IP_VERSION,
            next_header: NextHeader::IBA,
            sgid,
            dgid,
            ..Self::default()
        }
    }

    /// Parses the first 40 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = GrhPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads a GRH from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &GrhPacket<T>) -> Self {
        Self {
            ip_version: p.ip_version(),
            tclass: p.tclass(),
            flow_label: p.flow_label(),
            pay_len: p.pay_len(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            sgid: p.sgid(),
            dgid: p.dgid(),
        }
    }

    /// Writes the GRH into the first 40 bytes of `buf`; the version and flow label are
    /// masked to 4 and 20 bits.
    ///
    /// # Panics
    /// If `buf` is shorter than 40 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = GrhPacket::new_unchecked(&mut buf[..GRH_LEN]);
        p.set_ip_version(self.ip_version);
        p.set_tclass(self.tclass);
        p.set_flow_label(self.flow_label);
        p.set_pay_len(self.pay_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_sgid(self.sgid);
        p.set_dgid(self.dgid);
    }

    emit_to_array!("GRH", GRH_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;
    use crate::testutil::{Garbage, bytes};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    const SGID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b001);
    const MGID: Gid = Gid::from_parts(0xff15_4001_ffff_0003, 0x0400_0000_0000_0000);

    impl Arbitrary for GrhRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<40>(g)).unwrap()
        }
    }

    /// A GRH on an ACM request to group 0: tclass 0x12, flow label 0xABCDE, 296-byte
    /// receive minus the GRH as payload length, hop limit 1.
    fn sample() -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&[0x61, 0x2A, 0xBC, 0xDE, 0x01, 0x18, 0x1B, 0x01]);
        b[8..24].copy_from_slice(&SGID.0);
        b[24..40].copy_from_slice(&MGID.0);
        b
    }

    #[test]
    fn deconstruct() {
        let mut buf = [0u8; 296];
        buf[..40].copy_from_slice(&sample());
        buf[40] = 0x01;
        let p = GrhPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.ip_version(), 6);
        assert_eq!(p.tclass(), 0x12);
        assert_eq!(p.flow_label(), 0xABCDE);
        assert_eq!(p.pay_len(), 0x118);
        assert_eq!(p.next_header(), NextHeader::IBA);
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.sgid(), SGID);
        assert_eq!(p.dgid(), "ff15:4001:ffff:3:400::".parse().unwrap());
        assert_eq!(p.payload().len(), crate::mad::MAD_LEN);
        assert_eq!(p.payload()[0], 0x01);
    }

    #[test]
    fn construct() {
        let mut b = [0xFFu8; 40];
        let mut p = GrhPacket::new_unchecked(&mut b[..]);
        p.set_version_tclass_flow(0);
        p.set_flow_label(0xFFF_FFFF); // masked to 20 bits
        p.set_ip_version(6);
        p.set_tclass(0x12);
        p.set_flow_label(0xABCDE);
        p.set_pay_len(0x118);
        p.set_next_header(NextHeader::IBA);
        p.set_hop_limit(1);
        p.set_sgid(SGID);
        p.set_dgid(MGID);
        assert!(p.payload_mut().is_empty());
        assert_eq!(b, sample());
    }

    #[test]
    fn parse_and_emit() {
        let r = GrhRepr::parse(&sample()).unwrap();
        assert_eq!(
            r,
            GrhRepr {
                tclass: 0x12,
                flow_label: 0xABCDE,
                pay_len: 0x118,
                hop_limit: 1,
                ..GrhRepr::iba(SGID, MGID)
            }
        );
        assert_eq!(r.to_bytes(), sample());
        assert_eq!(r.buffer_len(), GRH_LEN);
        let bare = GrhRepr::iba(SGID, MGID).to_bytes();
        assert_eq!(&bare[..8], &[0x60, 0, 0, 0, 0, 0, 0x1B, 0]);
    }

    #[test]
    fn truncated_names_first_missing_field() {
        let e = GrhRepr::parse(&sample()[..30]).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("GRH", "dgid", 24));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 40,
                available: 30
            }
        );
        let e = GrhRepr::parse(&sample()[..5]).unwrap_err();
        assert_eq!((e.field, e.offset), ("pay_len", 4));
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: GrhRepr) -> bool {
            GrhRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match GrhRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..40],
                Err(_) => b.len() < 40,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<40, 80>) -> bool {
            GrhRepr::parse(&b.0).is_ok() == (b.0.len() >= 40)
        }
    }
}
