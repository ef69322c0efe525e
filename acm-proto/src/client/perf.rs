//! PERF_QUERY (opcode 0x02): the request (global, by endpoint index, or by address) and
//! the reply carrying big-endian u64 counters. See docs/protocol/client-messages.md §9,
//! docs/daemon.md §12.

use super::{
    Direction, ENTRY_LEN, EpAddrRepr, HEADER_LEN, HeaderRepr, MAX_BODY_LEN, MAX_REQUEST_LEN,
    Status, check_message_len,
};
use crate::error::{ParseError, Reason, Result};
use byteorder::{BigEndian, ByteOrder};

/// Most counters a reply may carry here (the reference sends 7).
pub const MAX_COUNTERS: usize = 64;

/// A PERF_QUERY request.
///
/// `header.data[1]` is the endpoint index (0: global or by address). With a body of at
/// least 72 bytes, its first 72 are the address entry (flags and type in host order,
/// docs/reference-quirks.md §36); anything else is kept in `trailing` so the message
/// re-emits unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PerfQueryRepr {
    /// The header; `emit` rewrites its length.
    pub header: HeaderRepr,
    /// The address entry, when the body holds one.
    pub entry: Option<EpAddrRepr>,
    /// Body bytes not part of the entry.
    pub trailing: heapless::Vec<u8, MAX_BODY_LEN>,
}

impl PerfQueryRepr {
    /// A request for the global counters (`index` 0) or for endpoint `index`'s, or, with
    /// `entry`, for the endpoint that owns that source address.
    #[must_use]
    pub fn new(index: u8, entry: Option<EpAddrRepr>) -> Self {
        let mut header = HeaderRepr::new(super::Opcode::PERF_QUERY);
        header.data = [0, index, 0];
        Self {
            header,
            entry,
            trailing: heapless::Vec::new(),
        }
    }

    /// The endpoint index a PERF_QUERY with header `header` names (`data[1]`; 0 for
    /// global / by address).
    #[must_use]
    pub const fn index_in(header: &HeaderRepr) -> u8 {
        header.data[1]
    }

    /// The endpoint index the request names (`data[1]`; 0 for global / by address).
    #[must_use]
    pub const fn index(&self) -> u8 {
        Self::index_in(&self.header)
    }

    /// Parses a whole request (length = `buf.len()`, 16..=592).
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        let header = HeaderRepr::parse(buf, direction)?;
        check_message_len(
            "acm_msg PERF_QUERY",
            &header,
            buf.len(),
            Some(MAX_REQUEST_LEN),
        )?;
        let body = &buf[HEADER_LEN..];
        let (entry, rest) = if body.len() >= ENTRY_LEN {
            let e = EpAddrRepr::parse(body).map_err(|e| e.at_base(HEADER_LEN))?;
            (Some(e), &body[ENTRY_LEN..])
        } else {
            (None, body)
        };
        let mut trailing = heapless::Vec::new();
        // The body is at most 576 bytes, checked above.
        let _ = trailing.extend_from_slice(rest);
        Ok(Self {
            header,
            entry,
            trailing,
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.entry.map_or(0, |_| ENTRY_LEN) + self.trailing.len()
    }

    /// Writes the request with its true length; returns the length.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) -> usize {
        let len = self.buffer_len();
        let mut header = self.header;
        header.length = len as u16;
        header.emit(buf, direction);
        let mut at = HEADER_LEN;
        if let Some(e) = &self.entry {
            e.emit(&mut buf[at..]);
            at += ENTRY_LEN;
        }
        buf[at..len].copy_from_slice(&self.trailing);
        len
    }
}

/// A PERF_QUERY reply: `data[0]` is the counter count; the body is that many BE u64s
/// (none on error).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PerfReplyRepr {
    /// The header; `emit` rewrites its length (`data[0]` is kept as given).
    pub header: HeaderRepr,
    /// The counters, in the order of docs/daemon.md §12.
    pub counters: heapless::Vec<u64, MAX_COUNTERS>,
}

impl PerfReplyRepr {
    /// The reply to a PERF_QUERY with header `request`: the ACK opcode, status
    /// `status`, and `counters` (none with an error status), whose count the header
    /// announces in `data[0]`; the request's index (`data[1]`) is kept and `data[2]`
    /// cleared, as the reference answers.
    #[must_use]
    pub fn answer(request: &HeaderRepr, status: Status, counters: &[u64]) -> Self {
        let counters: heapless::Vec<u64, MAX_COUNTERS> =
            counters.iter().take(MAX_COUNTERS).copied().collect();
        let mut header = *request;
        header.opcode = header.opcode.with_ack();
        header.status = status;
        header.data = [counters.len() as u8, request.data[1], 0];
        Self { header, counters }
    }

    /// The counters the reply carries that its header announces (`data[0]`): never more
    /// than the body holds.
    #[must_use]
    pub fn announced_counters(&self) -> &[u64] {
        let n = usize::from(self.header.data[0]).min(self.counters.len());
        &self.counters[..n]
    }

    /// Parses a whole reply (length = `buf.len()`; the body a whole number of u64s).
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        const FORMAT: &str = "acm_msg PERF_QUERY reply";
        let header = HeaderRepr::parse(buf, direction)?;
        check_message_len(FORMAT, &header, buf.len(), None)?;
        let body = &buf[HEADER_LEN..];
        if !body.len().is_multiple_of(8) {
            return Err(ParseError::new(
                FORMAT,
                "counters",
                HEADER_LEN,
                Reason::BadValue {
                    value: body.len() as u64,
                    why: "body length is not a multiple of 8",
                },
            ));
        }
        if body.len() / 8 > MAX_COUNTERS {
            return Err(ParseError::new(
                FORMAT,
                "counters",
                HEADER_LEN,
                Reason::TooLong {
                    declared: body.len(),
                    maximum: MAX_COUNTERS * 8,
                },
            ));
        }
        let counters = body
            .chunks_exact(8)
            .map(BigEndian::read_u64)
            .collect::<heapless::Vec<u64, MAX_COUNTERS>>();
        Ok(Self { header, counters })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + 8 * self.counters.len()
    }

    /// Writes the reply with its true length; returns the length.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) -> usize {
        let len = self.buffer_len();
        let mut header = self.header;
        header.length = len as u16;
        header.emit(buf, direction);
        for (chunk, c) in buf[HEADER_LEN..len].chunks_exact_mut(8).zip(&self.counters) {
            BigEndian::write_u64(chunk, *c);
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{EpFlags, Opcode, Status};
    use crate::testutil::Garbage;
    use alloc::vec;
    use alloc::vec::Vec;
    use core::net::Ipv4Addr;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for PerfQueryRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let entry = bool::arbitrary(g).then(|| EpAddrRepr::arbitrary(g));
            let mut m = Self {
                header: HeaderRepr::arbitrary(g),
                entry,
                trailing: heapless::Vec::new(),
            };
            // A trailing run only when it cannot be mistaken for an entry.
            let max = if m.entry.is_some() { 8 } else { ENTRY_LEN - 1 };
            for _ in 0..usize::arbitrary(g) % max {
                let _ = m.trailing.push(u8::arbitrary(g));
            }
            m.header.length = m.buffer_len() as u16;
            m
        }
    }

    impl Arbitrary for PerfReplyRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let mut m = Self {
                header: HeaderRepr::arbitrary(g),
                counters: (0..usize::arbitrary(g) % 10)
                    .map(|_| u64::arbitrary(g))
                    .collect(),
            };
            m.header.length = m.buffer_len() as u16;
            m
        }
    }

    fn emit_query(m: &PerfQueryRepr) -> Vec<u8> {
        let mut b = vec![0u8; m.buffer_len()];
        m.emit(&mut b, Direction::Request);
        b
    }

    fn emit_reply(m: &PerfReplyRepr) -> Vec<u8> {
        let mut b = vec![0u8; m.buffer_len()];
        m.emit(&mut b, Direction::Response);
        b
    }

    #[test]
    fn spec_vector_11_by_address() {
        let m = PerfQueryRepr {
            header: HeaderRepr::new(Opcode::PERF_QUERY),
            entry: Some(EpAddrRepr::ipv4(
                EpFlags::SOURCE,
                Ipv4Addr::new(10, 0, 0, 1),
            )),
            trailing: heapless::Vec::new(),
        };
        let b = emit_query(&m);
        assert_eq!(&b[..8], &[1, 2, 0, 0, 0, 0, 0, 0x58]);
        assert_eq!(&b[16..28], &[1, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 1]);
        let mut expect = m.clone();
        expect.header.length = 88;
        assert_eq!(PerfQueryRepr::parse(&b, Direction::Request), Ok(expect));
    }

    #[test]
    fn spec_vector_10_and_12_replies() {
        let mut h = HeaderRepr::new(Opcode::PERF_QUERY_ACK);
        h.data = [7, 1, 0];
        let m = PerfReplyRepr {
            header: h,
            counters: [1u64, 17, 2, 3, 3, 9, 7].into_iter().collect(),
        };
        let b = emit_reply(&m);
        assert_eq!(&b[..8], &[1, 0x82, 0, 7, 1, 0, 0, 0x48]);
        assert_eq!(&b[16..24], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            PerfReplyRepr::parse(&b, Direction::Response)
                .unwrap()
                .counters,
            m.counters
        );
        // ESRCADDR reply for index 2 (docs/reference-quirks.md §1).
        let e = [1, 0x82, 7, 0, 2, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
        let r = PerfReplyRepr::parse(&e, Direction::Response).unwrap();
        assert_eq!(r.header.status, Status::ESRCADDR);
        assert!(r.counters.is_empty());
    }

    #[test]
    fn odd_reply_body_is_an_error() {
        let mut b = vec![0u8; 20];
        b[..8].copy_from_slice(&[1, 0x82, 0, 0, 0, 0, 0, 20]);
        let e = PerfReplyRepr::parse(&b, Direction::Response).unwrap_err();
        assert_eq!(e.field, "counters");
    }

    quickcheck! {
        fn prop_query_roundtrip(m: PerfQueryRepr) -> bool {
            let b = emit_query(&m);
            PerfQueryRepr::parse(&b, Direction::Request) == Ok(m)
        }

        fn prop_reply_roundtrip(m: PerfReplyRepr) -> bool {
            let b = emit_reply(&m);
            PerfReplyRepr::parse(&b, Direction::Response) == Ok(m)
        }

        fn prop_garbage(b: Garbage<88, 600>) -> bool {
            let q = PerfQueryRepr::parse(&b.0, Direction::Request).map(|m| emit_query(&m) == b.0);
            let r = PerfReplyRepr::parse(&b.0, Direction::Response).map(|m| emit_reply(&m) == b.0);
            q.unwrap_or(true) && r.unwrap_or(true)
        }
    }
}
