//! A zero-copy view of a whole client message, for code that reads a field or two
//! without building a Repr (the daemon's request path, for one).

use super::{Direction, ENTRY_LEN, EpAddrPacket, HEADER_LEN, HeaderPacket};
use crate::error::Result;
use byteorder::{BigEndian, ByteOrder};

/// A view of a whole message: its header, its body as entries, or as BE u64 counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MessagePacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer, checking that it holds at least a header (the body accessors
    /// below are bounded by the buffer, not by the length field).
    pub fn new_checked(buffer: T) -> Result<Self> {
        HeaderPacket::new_checked(buffer.as_ref())?;
        Ok(Self { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header view.
    pub fn header(&self) -> HeaderPacket<&[u8]> {
        HeaderPacket::new_unchecked(&self.buffer.as_ref()[..HEADER_LEN])
    }

    /// Whether the header's length field (read as `direction` implies) equals the buffer.
    pub fn length_matches(&self, direction: Direction) -> bool {
        usize::from(self.header().length(direction)) == self.buffer.as_ref().len()
    }

    /// The bytes after the header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whole entries in the body: `(len − 16) / 72`.
    pub fn entry_count(&self) -> usize {
        self.body().len() / ENTRY_LEN
    }

    /// Entry `i`, if the body holds it whole.
    pub fn entry(&self, i: usize) -> Option<EpAddrPacket<&[u8]>> {
        let start = i.checked_mul(ENTRY_LEN)?;
        self.body()
            .get(start..start.checked_add(ENTRY_LEN)?)
            .map(EpAddrPacket::new_unchecked)
    }

    /// Counter `i` of a PERF_QUERY reply body (BE u64), if present.
    pub fn counter(&self, i: usize) -> Option<u64> {
        let start = i.checked_mul(8)?;
        self.body()
            .get(start..start.checked_add(8)?)
            .map(BigEndian::read_u64)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MessagePacket<T> {
    /// The header view, writable.
    pub fn header_mut(&mut self) -> HeaderPacket<&mut [u8]> {
        HeaderPacket::new_unchecked(&mut self.buffer.as_mut()[..HEADER_LEN])
    }

    /// Entry `i`, writable, if the body holds it whole.
    pub fn entry_mut(&mut self, i: usize) -> Option<EpAddrPacket<&mut [u8]>> {
        let start = HEADER_LEN.checked_add(i.checked_mul(ENTRY_LEN)?)?;
        self.buffer
            .as_mut()
            .get_mut(start..start.checked_add(ENTRY_LEN)?)
            .map(EpAddrPacket::new_unchecked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{
        AddrType, ClientMessage, EpAddrRepr, EpFlags, HeaderRepr, Opcode, ResolveRepr,
    };
    use crate::testutil::Garbage;
    use core::net::Ipv4Addr;
    use quickcheck::quickcheck;

    #[test]
    fn views_agree_with_reprs() {
        let mut m = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        m.push(EpAddrRepr::ipv4(
            EpFlags::SOURCE,
            Ipv4Addr::new(10, 0, 0, 1),
        ))
        .unwrap();
        m.push(EpAddrRepr::name(EpFlags::DEST | EpFlags::NODELAY, "host2"))
            .unwrap();
        let mut b = ClientMessage::Resolve(m).to_vec(Direction::Request);
        let p = MessagePacket::new_checked(&b[..]).unwrap();
        assert!(p.length_matches(Direction::Request));
        assert_eq!(p.entry_count(), 2);
        let e1 = p.entry(1).unwrap();
        assert_eq!(e1.flags(), EpFlags::DEST | EpFlags::NODELAY);
        assert_eq!(e1.addr_type(), AddrType::NAME);
        assert_eq!(&e1.info()[..6], b"host2\0");
        assert!(p.entry(2).is_none());
        assert!(p.entry(usize::MAX).is_none());

        let mut pm = MessagePacket::new_unchecked(&mut b[..]);
        let mut e0 = pm.entry_mut(0).unwrap();
        e0.set_flags(EpFlags::SOURCE | EpFlags::DEST);
        e0.set_addr_type(AddrType::IP6);
        e0.set_reserved(7);
        e0.info_mut()[0] = 0xfd;
        pm.header_mut().set_status(crate::client::Status::ENODATA);
        let back = EpAddrRepr::parse(&b[16..88]).unwrap();
        assert_eq!(back.flags, EpFlags::SOURCE | EpFlags::DEST);
        assert_eq!(
            (back.addr_type, back.reserved, back.info.0[0]),
            (AddrType::IP6, 7, 0xfd)
        );
        assert_eq!(b[2], 3);
    }

    #[test]
    fn counters() {
        let mut b = [0u8; 32];
        b[16..24].copy_from_slice(&5u64.to_be_bytes());
        let p = MessagePacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.counter(0), Some(5));
        assert_eq!(p.counter(2), None);
        assert!(MessagePacket::new_checked(&b[..10]).is_err());
        assert!(EpAddrPacket::new_checked(&b[..]).is_err());
    }

    quickcheck! {
        fn prop_views_never_panic(b: Garbage<160, 700>) -> bool {
            if let Ok(p) = MessagePacket::new_checked(&b.0[..]) {
                for i in 0..=p.entry_count() {
                    if let Some(e) = p.entry(i) {
                        let _ = (e.flags(), e.addr_type(), e.reserved(), e.info());
                    }
                    let _ = p.counter(i);
                }
                let _ = p.length_matches(Direction::Request);
            }
            true
        }
    }
}
