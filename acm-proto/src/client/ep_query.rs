//! EP_QUERY (opcode 0x03): enumerate endpoints one index at a time. See
//! docs/protocol/client-messages.md §10.

use super::{
    Direction, HEADER_LEN, HeaderRepr, MAX_BODY_LEN, MAX_REQUEST_LEN, Status, check_message_len,
};
use crate::error::{ParseError, Reason, Result};
use crate::{BYTES64_LEN, Bytes64};
use alloc::vec::Vec;
use byteorder::{BigEndian, ByteOrder};

/// Fixed part of a successful reply body (`struct acm_ep_config_data` before the
/// address strings).
pub const EP_CONFIG_LEN: usize = 80;

/// An EP_QUERY request: `data[0]` is the 1-based endpoint index, `data[1]` the port.
/// The daemon does not look past the header; any body is kept in `trailing`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EpQueryRepr {
    /// The header; `emit` rewrites its length.
    pub header: HeaderRepr,
    /// Body bytes (none from real clients).
    pub trailing: heapless::Vec<u8, MAX_BODY_LEN>,
}

impl EpQueryRepr {
    /// A request for endpoint `index` (1-based) on port `port`.
    #[must_use]
    pub fn new(index: u8, port: u8) -> Self {
        let mut header = HeaderRepr::new(super::Opcode::EP_QUERY);
        header.data = [index, port, 0];
        Self {
            header,
            trailing: heapless::Vec::new(),
        }
    }

    /// The request whose header is `header` (the daemon reads no further).
    #[must_use]
    pub fn from_header(header: HeaderRepr) -> Self {
        Self {
            header,
            trailing: heapless::Vec::new(),
        }
    }

    /// The endpoint index asked for (1-based).
    #[must_use]
    pub const fn index(&self) -> u8 {
        self.header.data[0]
    }

    /// The port number filter.
    #[must_use]
    pub const fn port(&self) -> u8 {
        self.header.data[1]
    }

    /// Parses a whole request (length = `buf.len()`, 16..=592).
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        let header = HeaderRepr::parse(buf, direction)?;
        check_message_len(
            "acm_msg EP_QUERY",
            &header,
            buf.len(),
            Some(MAX_REQUEST_LEN),
        )?;
        let mut trailing = heapless::Vec::new();
        // At most 576 body bytes, checked above.
        let _ = trailing.extend_from_slice(&buf[HEADER_LEN..]);
        Ok(Self { header, trailing })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.trailing.len()
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
        buf[HEADER_LEN..len].copy_from_slice(&self.trailing);
        len
    }
}

/// One endpoint's description in a successful EP_QUERY reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EpConfigRepr {
    /// Node GUID (BE).
    pub dev_guid: u64,
    /// Port number.
    pub port_num: u8,
    /// Physical port count of the device.
    pub phys_port_cnt: u8,
    /// Reserved (BE), normally 0.
    pub reserved: u16,
    /// The endpoint's pkey, membership bit included (BE).
    pub pkey: u16,
    /// The address count as sent (BE). `emit` writes it as given; it equals
    /// `addrs.len()` in every reply the reference sends.
    pub addr_cnt: u16,
    /// Provider name, NUL-terminated (e.g. `ibacmp`).
    pub prov_name: Bytes64,
    /// One 64-byte display string per address.
    pub addrs: Vec<Bytes64>,
}

/// An EP_QUERY reply: the header, then on success the endpoint config.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EpQueryReplyRepr {
    /// The header; `emit` rewrites its length.
    pub header: HeaderRepr,
    /// The endpoint, absent in error replies (length 16).
    pub config: Option<EpConfigRepr>,
}

impl EpQueryReplyRepr {
    /// The reply to `request`: the ACK opcode, the endpoint's description (status 0) or
    /// none (EINVAL); the index is kept, the port and `data[2]` cleared, as the reference
    /// answers. The request's status byte is not echoed.
    #[must_use]
    pub fn answer(request: &EpQueryRepr, config: Option<EpConfigRepr>) -> Self {
        let mut header = request.header;
        header.opcode = header.opcode.with_ack();
        header.data = [request.index(), 0, 0];
        header.status = if config.is_some() {
            Status::SUCCESS
        } else {
            Status::EINVAL
        };
        Self { header, config }
    }

    /// Parses a whole reply (length = `buf.len()`; body empty or 80 + 64·n bytes).
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        const FORMAT: &str = "acm_msg EP_QUERY reply";
        let header = HeaderRepr::parse(buf, direction)?;
        check_message_len(FORMAT, &header, buf.len(), None)?;
        let body = &buf[HEADER_LEN..];
        if body.is_empty() {
            return Ok(Self {
                header,
                config: None,
            });
        }
        if body.len() < EP_CONFIG_LEN {
            return Err(ParseError::truncated(
                FORMAT,
                "ep_config",
                HEADER_LEN,
                HEADER_LEN + EP_CONFIG_LEN,
                buf.len(),
            ));
        }
        let strings = &body[EP_CONFIG_LEN..];
        if !strings.len().is_multiple_of(BYTES64_LEN) {
            return Err(ParseError::new(
                FORMAT,
                "addrs",
                HEADER_LEN + EP_CONFIG_LEN,
                Reason::BadValue {
                    value: strings.len() as u64,
                    why: "address strings are not a whole number of 64-byte slots",
                },
            ));
        }
        let config = EpConfigRepr {
            dev_guid: BigEndian::read_u64(&body[0..8]),
            port_num: body[8],
            phys_port_cnt: body[9],
            reserved: BigEndian::read_u16(&body[10..12]),
            pkey: BigEndian::read_u16(&body[12..14]),
            addr_cnt: BigEndian::read_u16(&body[14..16]),
            prov_name: Bytes64::read(&body[16..80]).unwrap_or_default(),
            addrs: strings
                .chunks_exact(BYTES64_LEN)
                .filter_map(Bytes64::read)
                .collect(),
        };
        Ok(Self {
            header,
            config: Some(config),
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + self
                .config
                .as_ref()
                .map_or(0, |c| EP_CONFIG_LEN + BYTES64_LEN * c.addrs.len())
    }

    /// Writes the reply with its true length; returns the length.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or that length exceeds 65535.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) -> usize {
        let len = self.buffer_len();
        let mut header = self.header;
        header.length = u16::try_from(len).expect("EP_QUERY reply longer than 65535 bytes");
        header.emit(buf, direction);
        if let Some(c) = &self.config {
            let body = &mut buf[HEADER_LEN..len];
            BigEndian::write_u64(&mut body[0..8], c.dev_guid);
            body[8] = c.port_num;
            body[9] = c.phys_port_cnt;
            BigEndian::write_u16(&mut body[10..12], c.reserved);
            BigEndian::write_u16(&mut body[12..14], c.pkey);
            BigEndian::write_u16(&mut body[14..16], c.addr_cnt);
            body[16..80].copy_from_slice(&c.prov_name.0);
            for (slot, a) in body[EP_CONFIG_LEN..]
                .chunks_exact_mut(BYTES64_LEN)
                .zip(&c.addrs)
            {
                slot.copy_from_slice(&a.0);
            }
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Opcode, Status};
    use crate::testutil::Garbage;
    use alloc::vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for EpQueryRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let mut m = Self::new(u8::arbitrary(g), u8::arbitrary(g));
            m.header = HeaderRepr::arbitrary(g);
            for _ in 0..usize::arbitrary(g) % 8 {
                let _ = m.trailing.push(u8::arbitrary(g));
            }
            m.header.length = m.buffer_len() as u16;
            m
        }
    }

    impl Arbitrary for EpQueryReplyRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let config = bool::arbitrary(g).then(|| {
                let addrs: Vec<Bytes64> = (0..usize::arbitrary(g) % 5)
                    .map(|_| Bytes64::arbitrary(g))
                    .collect();
                EpConfigRepr {
                    dev_guid: u64::arbitrary(g),
                    port_num: u8::arbitrary(g),
                    phys_port_cnt: u8::arbitrary(g),
                    reserved: u16::arbitrary(g),
                    pkey: u16::arbitrary(g),
                    addr_cnt: u16::arbitrary(g),
                    prov_name: Bytes64::arbitrary(g),
                    addrs,
                }
            });
            let mut m = Self {
                header: HeaderRepr::arbitrary(g),
                config,
            };
            m.header.length = m.buffer_len() as u16;
            m
        }
    }

    fn emit_reply(m: &EpQueryReplyRepr) -> Vec<u8> {
        let mut b = vec![0u8; m.buffer_len()];
        m.emit(&mut b, Direction::Response);
        b
    }

    #[test]
    fn spec_vector_13_request_and_reply() {
        let q = EpQueryRepr::new(1, 1);
        let mut b = [0u8; 16];
        q.emit(&mut b, Direction::Request);
        assert_eq!(&b[..8], &[1, 3, 0, 1, 1, 0, 0, 0x10]);
        assert_eq!((q.index(), q.port()), (1, 1));

        let mut h = HeaderRepr::new(Opcode::EP_QUERY_ACK);
        h.data = [1, 0, 0];
        let r = EpQueryReplyRepr {
            header: h,
            config: Some(EpConfigRepr {
                dev_guid: 0x0002_c903_00a0_b000,
                port_num: 1,
                phys_port_cnt: 1,
                reserved: 0,
                pkey: 0xffff,
                addr_cnt: 3,
                prov_name: Bytes64::c_string("ibacmp"),
                addrs: vec![
                    Bytes64::c_string("fakehost"),
                    Bytes64::c_string("10.0.0.1"),
                    Bytes64::c_string("fd00::1"),
                ],
            }),
        };
        let b = emit_reply(&r);
        assert_eq!(b.len(), 96 + 3 * 64);
        assert_eq!(&b[..8], &[1, 0x83, 0, 1, 0, 0, 0x01, 0x20]);
        assert_eq!(
            &b[16..32],
            &[
                0, 2, 0xc9, 3, 0, 0xa0, 0xb0, 0, 1, 1, 0, 0, 0xff, 0xff, 0, 3
            ]
        );
        assert_eq!(&b[32..39], b"ibacmp\0");
        let mut expect = r.clone();
        expect.header.length = b.len() as u16;
        assert_eq!(EpQueryReplyRepr::parse(&b, Direction::Response), Ok(expect));
    }

    #[test]
    fn error_reply_and_bad_bodies() {
        let e = [1, 0x83, 2, 1, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
        let r = EpQueryReplyRepr::parse(&e, Direction::Response).unwrap();
        assert_eq!(r.header.status, Status::EINVAL);
        assert!(r.config.is_none());
        let mut short = vec![0u8; 16 + 40];
        short[..8].copy_from_slice(&[1, 0x83, 0, 1, 0, 0, 0, 56]);
        assert_eq!(
            EpQueryReplyRepr::parse(&short, Direction::Response)
                .unwrap_err()
                .field,
            "ep_config"
        );
        let mut ragged = vec![0u8; 16 + 80 + 10];
        ragged[..8].copy_from_slice(&[1, 0x83, 0, 1, 0, 0, 0, 106]);
        assert_eq!(
            EpQueryReplyRepr::parse(&ragged, Direction::Response)
                .unwrap_err()
                .field,
            "addrs"
        );
    }

    quickcheck! {
        fn prop_request_roundtrip(m: EpQueryRepr) -> bool {
            let mut b = vec![0u8; m.buffer_len()];
            m.emit(&mut b, Direction::Request);
            EpQueryRepr::parse(&b, Direction::Request) == Ok(m)
        }

        fn prop_reply_roundtrip(m: EpQueryReplyRepr) -> bool {
            EpQueryReplyRepr::parse(&emit_reply(&m), Direction::Response) == Ok(m)
        }

        fn prop_garbage(b: Garbage<288, 700>) -> bool {
            match EpQueryReplyRepr::parse(&b.0, Direction::Response) {
                Ok(m) => emit_reply(&m) == b.0,
                Err(_) => true,
            }
        }
    }
}
