//! The 20-byte IPoIB hardware address (RFC 4391, section 9.1.1): what the kernel's neighbour
//! table holds for an IP on an IPoIB interface, and what `addr_prot neigh` reads to
//! learn a peer's GID without asking the peer's ibacm (docs/protocol/ipoib-neigh.md §1).
//!
//! The first byte carries flags (Linux sets the top bits when the interface can do
//! connected mode), the next three the peer interface's UD QPN, big-endian, and the
//! last sixteen the peer port's GID.

use crate::Gid;
use crate::error::{Layout, Result};
use byteorder::{BigEndian, ByteOrder};

/// Length of an IPoIB hardware address.
pub const IPOIB_HW_ADDR_LEN: usize = 20;

mod field {
    use core::ops::Range;
    pub(super) const FLAGS: usize = 0;
    /// Byte 0 is the flags; bytes 1..4 the QPN. Read as one word and masked.
    pub(super) const FLAGS_QPN: Range<usize> = 0..4;
    pub(super) const GID: Range<usize> = 4..20;
}

const LAYOUT: &Layout = &[("flags", 0..1), ("qpn", 1..4), ("gid", field::GID)];

/// A zero-copy view of an IPoIB hardware address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpoibHwAddrPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IpoibHwAddrPacket<T> {
    view_constructors!("IPoIB hardware address", LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }
    /// The peer interface's QPN (24 bits).
    pub fn qpn(&self) -> u32 {
        BigEndian::read_u32(&self.b()[field::FLAGS_QPN]) & 0x00FF_FFFF
    }
    /// The peer port's GID.
    pub fn gid(&self) -> Gid {
        Gid::read(&self.b()[field::GID]).unwrap_or_default()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IpoibHwAddrPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the flags byte.
    pub fn set_flags(&mut self, v: u8) {
        self.bm()[field::FLAGS] = v;
    }
    /// Sets the QPN (masked to 24 bits; the flags byte is kept).
    pub fn set_qpn(&mut self, v: u32) {
        let flags = self.flags();
        BigEndian::write_u32(
            &mut self.bm()[field::FLAGS_QPN],
            (u32::from(flags) << 24) | (v & 0x00FF_FFFF),
        );
    }
    /// Sets the GID.
    pub fn set_gid(&mut self, v: Gid) {
        self.bm()[field::GID].copy_from_slice(&v.0);
    }
}

/// An IPoIB hardware address as typed values. Every bit is kept, so parse then emit
/// reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IpoibHwAddrRepr {
    /// The flags byte.
    pub flags: u8,
    /// The peer interface's UD QPN, 24 bits.
    pub qpn: u32,
    /// The peer port's GID.
    pub gid: Gid,
}

impl IpoibHwAddrRepr {
    /// Parses the first 20 bytes of `buf` (a neighbour table's link-layer address is
    /// exactly that long on IPoIB; anything shorter is refused, naming the field).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = IpoibHwAddrPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads an address from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &IpoibHwAddrPacket<T>) -> Self {
        Self {
            flags: p.flags(),
            qpn: p.qpn(),
            gid: p.gid(),
        }
    }

    /// Writes the address into the first 20 bytes of `buf`; the QPN is masked to 24
    /// bits.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = IpoibHwAddrPacket::new_unchecked(&mut buf[..IPOIB_HW_ADDR_LEN]);
        p.set_flags(self.flags);
        p.set_qpn(self.qpn);
        p.set_gid(self.gid);
    }

    emit_to_array!("address", IPOIB_HW_ADDR_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;
    use crate::testutil::{Garbage, bytes};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    const GID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b001);

    impl Arbitrary for IpoibHwAddrRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<20>(g)).unwrap()
        }
    }

    /// What `ip neigh` shows for a connected-mode-capable peer whose IPoIB QP is
    /// 0x000048: `80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a0:b0:01`.
    fn sample() -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&[0x80, 0x00, 0x00, 0x48]);
        b[4..].copy_from_slice(&GID.0);
        b
    }

    #[test]
    fn deconstruct() {
        let b = sample();
        let p = IpoibHwAddrPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.flags(), 0x80);
        assert_eq!(p.qpn(), 0x48);
        assert_eq!(p.gid(), GID);
    }

    #[test]
    fn construct() {
        let mut b = [0xFFu8; 20];
        let mut p = IpoibHwAddrPacket::new_unchecked(&mut b[..]);
        p.set_flags(0x80);
        p.set_qpn(0xFF00_0048); // masked to 24 bits, the flags byte kept
        p.set_gid(GID);
        assert_eq!(b, sample());
    }

    #[test]
    fn parse_and_emit() {
        let r = IpoibHwAddrRepr::parse(&sample()).unwrap();
        assert_eq!(
            r,
            IpoibHwAddrRepr {
                flags: 0x80,
                qpn: 0x48,
                gid: GID
            }
        );
        assert_eq!(r.to_bytes(), sample());
        assert_eq!(r.buffer_len(), IPOIB_HW_ADDR_LEN);
    }

    #[test]
    fn an_ethernet_address_is_too_short() {
        let e = IpoibHwAddrRepr::parse(&[0x52, 0x54, 0, 0x12, 0x34, 0x56]).unwrap_err();
        assert_eq!(
            (e.format, e.field, e.offset),
            ("IPoIB hardware address", "gid", 4)
        );
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 20,
                available: 6
            }
        );
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: IpoibHwAddrRepr) -> bool {
            IpoibHwAddrRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match IpoibHwAddrRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..20],
                Err(_) => b.len() < 20,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<20, 40>) -> bool {
            IpoibHwAddrRepr::parse(&b.0).is_ok() == (b.0.len() >= 20)
        }
    }
}
