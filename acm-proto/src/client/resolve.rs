//! RESOLVE messages, requests and responses alike: the header then up to eight 72-byte
//! entries (docs/protocol/client-messages.md §7, §8).

use super::{
    Direction, ENTRY_LEN, EpAddrRepr, HEADER_LEN, HeaderPacket, HeaderRepr, MAX_ENTRIES,
    MAX_REQUEST_LEN, check_message_len,
};
use crate::error::Result;

/// A RESOLVE message.
///
/// The count of entries is `(length − 16) / 72`, as the daemon computes it; a remainder of
/// fewer than 72 bytes is kept in `trailing` (the daemon ignores it) so the message
/// re-emits unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResolveRepr {
    /// The header; `emit` rewrites its length from the contents.
    pub header: HeaderRepr,
    /// The entries, in wire order.
    pub entries: heapless::Vec<EpAddrRepr, MAX_ENTRIES>,
    /// Bytes after the last whole entry.
    pub trailing: heapless::Vec<u8, { ENTRY_LEN - 1 }>,
}

impl ResolveRepr {
    /// A message with no entries yet.
    #[must_use]
    pub fn new(header: HeaderRepr) -> Self {
        let mut m = Self {
            header,
            entries: heapless::Vec::new(),
            trailing: heapless::Vec::new(),
        };
        m.header.length = m.buffer_len() as u16;
        m
    }

    /// Appends an entry (and updates the header length); gives it back when all eight
    /// slots are taken.
    pub fn push(&mut self, entry: EpAddrRepr) -> core::result::Result<(), EpAddrRepr> {
        self.entries.push(entry)?;
        self.header.length = self.buffer_len() as u16;
        Ok(())
    }

    /// Parses a whole message: the header's length must equal `buf.len()` and be
    /// between 16 and 592.
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        let header = HeaderRepr::parse(buf, direction)?;
        check_message_len("acm_msg RESOLVE", &header, buf.len(), Some(MAX_REQUEST_LEN))?;
        let body = &buf[HEADER_LEN..];
        let mut entries = heapless::Vec::new();
        let mut chunks = body.chunks_exact(ENTRY_LEN);
        for (i, chunk) in chunks.by_ref().enumerate() {
            let entry =
                EpAddrRepr::parse(chunk).map_err(|e| e.at_base(HEADER_LEN + i * ENTRY_LEN))?;
            // At most 8 whole entries fit in 592 bytes, checked above.
            let _ = entries.push(entry);
        }
        let mut trailing = heapless::Vec::new();
        // The remainder of `chunks_exact` is shorter than one entry.
        let _ = trailing.extend_from_slice(chunks.remainder());
        Ok(Self {
            header,
            entries,
            trailing,
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.entries.len() * ENTRY_LEN + self.trailing.len()
    }

    /// Writes the message with its true length in the header; returns the length.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        let mut header = self.header;
        header.length = len as u16;
        header.emit(buf, direction);
        for (i, e) in self.entries.iter().enumerate() {
            e.emit(&mut buf[HEADER_LEN + i * ENTRY_LEN..]);
        }
        buf[len - self.trailing.len()..].copy_from_slice(&self.trailing);
        debug_assert_eq!(
            HeaderPacket::new_unchecked(&buf[..]).length(direction) as usize,
            len
        );
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Bytes64;
    use crate::client::{AddrType, EpFlags, Opcode, Status};
    use crate::testutil::Garbage;
    use alloc::vec;
    use alloc::vec::Vec;
    use core::net::Ipv4Addr;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for ResolveRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let mut m = Self::new(HeaderRepr::arbitrary(g));
            for _ in 0..usize::arbitrary(g) % (MAX_ENTRIES + 1) {
                let _ = m.push(EpAddrRepr::arbitrary(g));
            }
            if m.entries.len() < MAX_ENTRIES {
                for _ in 0..usize::arbitrary(g) % ENTRY_LEN {
                    let _ = m.trailing.push(u8::arbitrary(g));
                }
            }
            m.header.length = m.buffer_len() as u16;
            m
        }
    }

    fn emit_vec(m: &ResolveRepr, d: Direction) -> Vec<u8> {
        let mut b = vec![0u8; m.buffer_len()];
        m.emit(&mut b, d);
        b
    }

    #[test]
    fn spec_vector_1_request() {
        let mut m = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        m.push(EpAddrRepr::ipv4(
            EpFlags::SOURCE,
            Ipv4Addr::new(10, 0, 0, 1),
        ))
        .unwrap();
        m.push(EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::new(10, 0, 0, 2)))
            .unwrap();
        let b = emit_vec(&m, Direction::Request);
        assert_eq!(b.len(), 160);
        assert_eq!(&b[..8], &[1, 1, 0, 0, 0, 0, 0xA0, 0]);
        assert_eq!(&b[16..28], &[1, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 1]);
        assert_eq!(&b[88..100], &[2, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 2]);
        assert_eq!(ResolveRepr::parse(&b, Direction::Request), Ok(m));
    }

    #[test]
    fn spec_vector_2_nodelay_miss_reply() {
        let b = [1, 1, 3, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let m = ResolveRepr::parse(&b, Direction::Response).unwrap();
        assert_eq!(m.header.status, Status::ENODATA);
        assert!(m.entries.is_empty());
    }

    #[test]
    fn trailing_bytes_are_kept() {
        let mut b = vec![0u8; 16 + 72 + 5];
        b[0] = 1;
        b[1] = 1;
        let n = b.len() as u16;
        b[6..8].copy_from_slice(&n.to_ne_bytes());
        b[88..].copy_from_slice(&[1, 2, 3, 4, 5]);
        let m = ResolveRepr::parse(&b, Direction::Request).unwrap();
        assert_eq!(m.entries.len(), 1);
        assert_eq!(&m.trailing[..], &[1, 2, 3, 4, 5]);
        assert_eq!(emit_vec(&m, Direction::Request), b);
    }

    #[test]
    fn length_errors() {
        // Declares 160 but carries 88 (docs/test-vectors.md §14).
        let mut b = vec![0u8; 88];
        b[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 0xA0, 0]);
        let e = ResolveRepr::parse(&b, Direction::Request).unwrap_err();
        assert_eq!((e.field, e.offset), ("length", 6));
        // Over 592.
        let mut b = vec![0u8; 600];
        b[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 0x58, 0x02]);
        assert!(ResolveRepr::parse(&b, Direction::Request).is_err());
        // Below 16.
        let b = [1, 1, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(ResolveRepr::parse(&b, Direction::Request).is_err());
    }

    #[test]
    fn opcode_0x81_request_has_big_endian_length() {
        let mut m = ResolveRepr::new(HeaderRepr::new(Opcode(0x81)));
        m.push(EpAddrRepr::new(EpFlags::DEST, AddrType::IP, Bytes64::ZERO))
            .unwrap();
        let b = emit_vec(&m, Direction::Request);
        assert_eq!(&b[6..8], &[0, 88]);
        assert_eq!(ResolveRepr::parse(&b, Direction::Request), Ok(m));
    }

    #[test]
    fn full_message_refuses_a_ninth_entry() {
        let mut m = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        let e = EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::LOCALHOST);
        for _ in 0..MAX_ENTRIES {
            m.push(e).unwrap();
        }
        assert_eq!(m.push(e), Err(e));
        assert_eq!(m.buffer_len(), MAX_REQUEST_LEN);
    }

    quickcheck! {
        fn prop_emit_parse_emit(m: ResolveRepr, d: Direction) -> bool {
            let b = emit_vec(&m, d);
            let back = ResolveRepr::parse(&b, d).unwrap();
            back == m && emit_vec(&back, d) == b
        }

        fn prop_garbage(b: Garbage<160, 600>, d: Direction) -> bool {
            match ResolveRepr::parse(&b.0, d) {
                Ok(m) => emit_vec(&m, d) == b.0,
                Err(_) => true,
            }
        }
    }
}
