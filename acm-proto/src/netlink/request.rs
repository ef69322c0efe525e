//! A kernel LS request: nlmsghdr, resolve header, attributes merged into typed fields.
//! See docs/protocol/netlink-ls.md §2, §3.

use super::attr::{
    NLA_HDRLEN, NlAttr, NlAttrIter, RDMA_NLA_F_MANDATORY, nla_align, put_attr, put_empty_attrs,
    rebase,
};
use super::codes::{LsAttrType, LsOp};
use super::header::{NLMSG_HDRLEN, NlMsgHeaderRepr};
use super::message::read_ls_message;
use super::resolve_header::{RESOLVE_HEADER_LEN, ResolveHeaderRepr};
use crate::error::{Reason, Result};
use crate::{Gid, ParseError};
use byteorder::{ByteOrder, NativeEndian};

/// Offset of the first attribute in a request: 16-byte nlmsghdr + 68-byte resolve header.
pub const LS_ATTRS_OFFSET: usize = NLMSG_HDRLEN + RESOLVE_HEADER_LEN;

/// The smallest payload (bytes after the nlmsghdr) ibacm accepts: the 66 meaningful bytes of
/// the resolve header plus one attribute header.
pub const LS_REQUEST_MIN_PAYLOAD: usize = 66 + NLA_HDRLEN;

const FORMAT: &str = "RDMA_NL_LS request";

/// A kernel LS request, parsed the way ibacm reads a RESOLVE.
///
/// # Parsing rules (docs/protocol/netlink-ls.md §2–§4)
///
/// [`parse`](Self::parse) fails, with a distinct field and reason each, when:
///
/// * the buffer is shorter than the 16-byte nlmsghdr (`Truncated`, naming the first missing
///   header field);
/// * `nlmsg_len` < 16 (`TooShort`) or > the buffer (`LengthMismatch`), both on `nlmsg_len`.
///   Bytes after `nlmsg_len` are not part of the message and are never read;
/// * the type's client (bits 15:10) is not RDMA_NL_LS = 4 (`BadValue` on `nlmsg_type`);
/// * the payload after the nlmsghdr is shorter than 66 + 4 = 70 bytes (`TooShort` on
///   `payload`, offset 16);
/// * an attribute is badly framed ([`NlAttrIter`] errors, format `nlattr`);
/// * one of the six known attributes has the wrong size (`BadValue` with the value
///   `nla_len`, on a field named after the attribute, e.g. `DGID`, at the attribute's
///   offset). Sizes: SERVICE_ID 8, DGID 16, SGID 16, TCLASS 1, PKEY 2, QOS_CLASS 2;
/// * any other attribute type (after masking the three flag bits) has
///   [`RDMA_NLA_F_MANDATORY`] set (`BadValue` on `nla_type`, at the attribute's offset + 2).
///
/// Other attribute types without the mandatory bit are skipped and counted in
/// [`ignored_attrs`](Self::ignored_attrs). This includes PATH_RECORD, TIMEOUT, IPV4 and
/// IPV6: they mean nothing in a RESOLVE. The NESTED and NET_BYTEORDER flag bits are ignored;
/// payloads are always read in host order. If an attribute appears more than once, the last
/// one wins.
///
/// Every reason ibacm answers with an error reply is a parse error here, except the op:
/// `parse` accepts any LS op and reads its payload with the RESOLVE layout. The reference
/// answers every op other than [`LsOp::RESOLVE`] with an error reply without reading the
/// payload (docs/reference-quirks.md §29), so the engine should look at
/// [`header.op()`](NlMsgHeaderRepr::op) first; [`NlMsgHeaderRepr::parse`] reads the
/// header of any message, even a malformed one.
///
/// # Emitting
///
/// [`emit`](Self::emit) writes the nlmsghdr (with `nlmsg_len` computed), the resolve header,
/// then the present attributes in type order: SERVICE_ID, DGID, SGID, TCLASS, PKEY,
/// QOS_CLASS, each with [`RDMA_NLA_F_MANDATORY`] set as the kernel does, each zero-padded
/// to 4 bytes. Then come `ignored_attrs` empty attributes of type 0 without the mandatory
/// bit, so a parsed request re-emits to one that parses the same. `parse(emit(x)) == x`
/// whenever the header's client is 4 and at least one attribute is written; a request with
/// no attribute at all is 84 bytes, which `parse` rejects as ibacm does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LsRequestRepr {
    /// The nlmsghdr. The kernel sends type 0x1000 (RESOLVE), flags NLM_F_REQUEST, its
    /// request number as seq, and pid 0.
    pub header: NlMsgHeaderRepr,
    /// Device, port and path use.
    pub resolve: ResolveHeaderRepr,
    /// SERVICE_ID (u64, host order on the wire).
    pub service_id: Option<u64>,
    /// DGID.
    pub dgid: Option<Gid>,
    /// SGID.
    pub sgid: Option<Gid>,
    /// TCLASS.
    pub tclass: Option<u8>,
    /// PKEY (u16, host order on the wire).
    pub pkey: Option<u16>,
    /// QOS_CLASS (u16, host order on the wire).
    pub qos_class: Option<u16>,
    /// How many unknown attributes without the mandatory bit were skipped (saturating).
    pub ignored_attrs: u16,
}

impl LsRequestRepr {
    /// A RESOLVE request as the kernel sends it (type 0x1000, flags NLM_F_REQUEST, pid 0),
    /// with no attributes yet.
    #[must_use]
    pub const fn resolve(seq: u32, resolve: ResolveHeaderRepr) -> Self {
        Self {
            header: NlMsgHeaderRepr::ls_request(LsOp::RESOLVE, seq, 0),
            resolve,
            service_id: None,
            dgid: None,
            sgid: None,
            tclass: None,
            pkey: None,
            qos_class: None,
            ignored_attrs: 0,
        }
    }

    /// The op of the header's type.
    #[must_use]
    pub const fn op(&self) -> LsOp {
        self.header.op()
    }

    /// Parses the message at the start of `buf` (see the type's documentation for the
    /// rules).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (header, msg) = read_ls_message(buf, FORMAT)?;
        let payload_len = msg.len() - NLMSG_HDRLEN;
        if payload_len < LS_REQUEST_MIN_PAYLOAD {
            return Err(ParseError::new(
                FORMAT,
                "payload",
                NLMSG_HDRLEN,
                Reason::TooShort {
                    declared: payload_len,
                    minimum: LS_REQUEST_MIN_PAYLOAD,
                },
            ));
        }
        let resolve =
            ResolveHeaderRepr::parse(&msg[NLMSG_HDRLEN..]).map_err(|e| rebase(e, NLMSG_HDRLEN))?;
        let mut r = Self {
            header,
            resolve,
            ..Self::default()
        };
        for item in NlAttrIter::new(&msg[LS_ATTRS_OFFSET..]) {
            let a = item.map_err(|e| rebase(e, LS_ATTRS_OFFSET))?;
            r.merge(&a, LS_ATTRS_OFFSET + a.offset)?;
        }
        Ok(r)
    }

    /// Folds one attribute, found at `offset` in the message, into `self`.
    fn merge(&mut self, a: &NlAttr<'_>, offset: usize) -> Result<()> {
        let t = a.ls_type();
        let Some(want) = t.request_payload_len() else {
            if a.is_mandatory() {
                return Err(ParseError::new(
                    FORMAT,
                    "nla_type",
                    offset + 2,
                    Reason::BadValue {
                        value: a.nla_type.into(),
                        why: "unknown attribute type with RDMA_NLA_F_MANDATORY set",
                    },
                ));
            }
            self.ignored_attrs = self.ignored_attrs.saturating_add(1);
            return Ok(());
        };
        let p = a.payload;
        if p.len() != want {
            return Err(a.wrong_size(FORMAT, offset));
        }
        match t {
            LsAttrType::SERVICE_ID => self.service_id = Some(NativeEndian::read_u64(p)),
            LsAttrType::DGID => self.dgid = Gid::read(p),
            LsAttrType::SGID => self.sgid = Gid::read(p),
            LsAttrType::TCLASS => self.tclass = Some(p[0]),
            LsAttrType::PKEY => self.pkey = Some(NativeEndian::read_u16(p)),
            LsAttrType::QOS_CLASS => self.qos_class = Some(NativeEndian::read_u16(p)),
            _ => {}
        }
        Ok(())
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        let attr = |present: bool, payload: usize| {
            if present {
                nla_align(NLA_HDRLEN + payload)
            } else {
                0
            }
        };
        LS_ATTRS_OFFSET
            + attr(self.service_id.is_some(), 8)
            + attr(self.dgid.is_some(), 16)
            + attr(self.sgid.is_some(), 16)
            + attr(self.tclass.is_some(), 1)
            + attr(self.pkey.is_some(), 2)
            + attr(self.qos_class.is_some(), 2)
            + usize::from(self.ignored_attrs) * NLA_HDRLEN
    }

    /// Writes the request (layout and attribute order in the type's documentation) and
    /// returns its length, `buffer_len()`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let total = self.buffer_len();
        let buf = &mut buf[..total];
        self.header.emit(buf, total - NLMSG_HDRLEN);
        self.resolve.emit(&mut buf[NLMSG_HDRLEN..]);
        let mut pos = LS_ATTRS_OFFSET;
        let mut put = |t: LsAttrType, payload: &[u8]| {
            pos += put_attr(&mut buf[pos..], t.0 | RDMA_NLA_F_MANDATORY, payload);
        };
        if let Some(v) = self.service_id {
            put(LsAttrType::SERVICE_ID, &v.to_ne_bytes());
        }
        if let Some(v) = self.dgid {
            put(LsAttrType::DGID, &v.0);
        }
        if let Some(v) = self.sgid {
            put(LsAttrType::SGID, &v.0);
        }
        if let Some(v) = self.tclass {
            put(LsAttrType::TCLASS, &[v]);
        }
        if let Some(v) = self.pkey {
            put(LsAttrType::PKEY, &v.to_ne_bytes());
        }
        if let Some(v) = self.qos_class {
            put(LsAttrType::QOS_CLASS, &v.to_ne_bytes());
        }
        pos += put_empty_attrs(&mut buf[pos..], self.ignored_attrs);
        debug_assert_eq!(pos, total);
        total
    }

    emit_to_vec!("request");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{NlMsgFlags, PathUse};
    use crate::testutil::{Garbage, ls_header};
    use alloc::vec;
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for LsRequestRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let header = ls_header(g);
            let mut r = Self {
                header,
                resolve: ResolveHeaderRepr::arbitrary(g),
                service_id: Option::arbitrary(g),
                dgid: Option::arbitrary(g),
                sgid: Option::arbitrary(g),
                tclass: Option::arbitrary(g),
                pkey: Option::arbitrary(g),
                qos_class: Option::arbitrary(g),
                ignored_attrs: u16::arbitrary(g) % 4,
            };
            if r.buffer_len() == LS_ATTRS_OFFSET {
                r.dgid = Some(Gid::arbitrary(g));
            }
            r
        }
    }

    fn gid(s: &str) -> Gid {
        s.parse().unwrap()
    }

    /// Builds a request by hand, attribute by attribute, as the kernel lays it out.
    fn raw_request(msg_type: u16, path_use: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; LS_ATTRS_OFFSET];
        for (t, p) in attrs {
            let start = b.len();
            b.resize(start + nla_align(4 + p.len()), 0);
            put_attr(&mut b[start..], *t, p);
        }
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        b[4..6].copy_from_slice(&msg_type.to_ne_bytes());
        b[6..8].copy_from_slice(&1u16.to_ne_bytes());
        b[8..12].copy_from_slice(&77u32.to_ne_bytes());
        b[16..22].copy_from_slice(b"mlx5_0");
        b[80] = 1;
        b[81] = path_use;
        b
    }

    const DGID: &str = "fe80::2:c903:a0:b002";
    const SGID: &str = "fe80::2:c903:a0:b001";

    fn vector19(path_use: u8) -> Vec<u8> {
        raw_request(
            0x1000,
            path_use,
            &[
                (0x2004, &gid(DGID).0),
                (0x2005, &gid(SGID).0),
                (0x2007, &0xFFFFu16.to_ne_bytes()),
            ],
        )
    }

    #[test]
    fn spec_vector_19_request_parses() {
        for path_use in [2, 0, 1] {
            let b = vector19(path_use);
            assert_eq!(b.len(), 84 + 20 + 20 + 8);
            let r = LsRequestRepr::parse(&b).unwrap();
            assert_eq!(r.header.msg_type, 0x1000);
            assert_eq!(r.header.flags, NlMsgFlags::REQUEST);
            assert_eq!((r.header.seq, r.header.pid), (77, 0));
            assert_eq!(r.op(), LsOp::RESOLVE);
            assert_eq!(r.resolve.device_name.as_str(), Some("mlx5_0"));
            assert_eq!(r.resolve.port_num, 1);
            assert_eq!(r.resolve.path_use, PathUse(path_use));
            assert_eq!(r.dgid, Some(gid(DGID)));
            assert_eq!(r.sgid, Some(gid(SGID)));
            assert_eq!(r.pkey, Some(0xFFFF));
            assert_eq!((r.service_id, r.tclass, r.qos_class), (None, None, None));
            assert_eq!(r.ignored_attrs, 0);
            // Our emitter lays the same request out byte for byte.
            assert_eq!(r.to_vec(), b);
        }
    }

    #[test]
    fn every_attribute_in_host_order() {
        let b = raw_request(
            0x1000,
            0,
            &[
                (0x2003, &0x1122_3344_5566_7788u64.to_ne_bytes()),
                (0x2006, &[0x42]),
                (0x2008, &0x0ABCu16.to_ne_bytes()),
                // NET_BYTEORDER/NESTED flags do not change dispatch or byte order.
                (0x4007, &0x8001u16.to_ne_bytes()),
            ],
        );
        let r = LsRequestRepr::parse(&b).unwrap();
        assert_eq!(r.service_id, Some(0x1122_3344_5566_7788));
        assert_eq!(r.tclass, Some(0x42));
        assert_eq!(r.qos_class, Some(0x0ABC));
        assert_eq!(r.pkey, Some(0x8001));
    }

    #[test]
    fn last_duplicate_wins() {
        let b = raw_request(
            0x1000,
            0,
            &[
                (0x2007, &0x7FFFu16.to_ne_bytes()),
                (0x2007, &0xFFFFu16.to_ne_bytes()),
            ],
        );
        assert_eq!(LsRequestRepr::parse(&b).unwrap().pkey, Some(0xFFFF));
    }

    #[test]
    fn unknown_mandatory_attribute_is_an_error() {
        let b = raw_request(
            0x1000,
            2,
            &[(0x2004, &gid(DGID).0), (0x2009, &[10, 0, 0, 2])],
        );
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!(e.format, "RDMA_NL_LS request");
        assert_eq!((e.field, e.offset), ("nla_type", 84 + 20 + 2));
        assert_eq!(
            e.reason,
            Reason::BadValue {
                value: 0x2009,
                why: "unknown attribute type with RDMA_NLA_F_MANDATORY set"
            }
        );
        // Known names that mean nothing in a RESOLVE are unknown too.
        for t in [0x2001, 0x2002, 0x200A, 0x3FFF] {
            let b = raw_request(0x1000, 0, &[(t, &[0; 4])]);
            assert!(LsRequestRepr::parse(&b).is_err(), "{t:#x}");
        }
    }

    #[test]
    fn unknown_optional_attributes_are_ignored() {
        let b = raw_request(
            0x1000,
            0,
            &[
                (0x0009, &[10, 0, 0, 2]),
                (0x2004, &gid(DGID).0),
                (0x1FFF, &[]),
                (0x8001, &[0; 72]),
            ],
        );
        let r = LsRequestRepr::parse(&b).unwrap();
        assert_eq!(r.ignored_attrs, 3);
        assert_eq!(r.dgid, Some(gid(DGID)));
        // They re-emit as empty type-0 attributes, which parse the same.
        let again = r.to_vec();
        assert_eq!(again.len(), 84 + 20 + 3 * 4);
        let mut empty_type0 = Vec::new();
        empty_type0.extend_from_slice(&4u16.to_ne_bytes());
        empty_type0.extend_from_slice(&0u16.to_ne_bytes());
        assert_eq!(&again[104..108], &empty_type0[..]);
        assert_eq!(LsRequestRepr::parse(&again), Ok(r));
    }

    #[test]
    fn wrong_size_of_each_known_attribute() {
        let cases: [(u16, &str, usize, usize); 6] = [
            (0x2003, "SERVICE_ID", 8, 4),
            (0x2004, "DGID", 16, 15),
            (0x2005, "SGID", 16, 17),
            (0x2006, "TCLASS", 1, 2),
            (0x2007, "PKEY", 2, 4),
            (0x2008, "QOS_CLASS", 2, 1),
        ];
        for (t, name, good, bad) in cases {
            let ok = raw_request(0x1000, 0, &[(t, &vec![0u8; good])]);
            assert!(LsRequestRepr::parse(&ok).is_ok(), "{name} good size");
            let b = raw_request(0x1000, 0, &[(0x2007, &[1, 2]), (t, &vec![0u8; bad])]);
            let e = LsRequestRepr::parse(&b).unwrap_err();
            assert_eq!((e.field, e.offset), (name, 92), "{name}");
            match e.reason {
                Reason::BadValue { value, why } => {
                    assert_eq!(value, 4 + bad as u64);
                    assert!(why.starts_with(name), "{why}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn framing_errors() {
        let good = vector19(2);

        // Truncated inside the nlmsghdr.
        let e = LsRequestRepr::parse(&good[..5]).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("nlmsghdr", "nlmsg_type", 4));

        // Buffer shorter than nlmsg_len.
        let e = LsRequestRepr::parse(&good[..good.len() - 1]).unwrap_err();
        assert_eq!((e.field, e.offset), ("nlmsg_len", 0));
        assert_eq!(
            e.reason,
            Reason::LengthMismatch {
                declared: 132,
                actual: 131
            }
        );

        // Buffer longer than nlmsg_len: the tail is not read.
        let mut longer = good.clone();
        longer.extend_from_slice(&[0xFF; 40]);
        assert_eq!(LsRequestRepr::parse(&longer), LsRequestRepr::parse(&good));

        // Client is not LS.
        let mut b = good.clone();
        b[4..6].copy_from_slice(&0x0C00u16.to_ne_bytes());
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("nlmsg_type", 4));
        assert!(matches!(e.reason, Reason::BadValue { value: 0x0C00, .. }));

        // Payload shorter than 66 + 4, judged by nlmsg_len.
        let mut b = good.clone();
        b[0..4].copy_from_slice(&(16u32 + 69).to_ne_bytes());
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("payload", 16));
        assert_eq!(
            e.reason,
            Reason::TooShort {
                declared: 69,
                minimum: 70
            }
        );
        // A request with no attributes at all is refused too.
        let bare = LsRequestRepr::resolve(1, ResolveHeaderRepr::new("mlx5_0", 1, PathUse::ALL));
        assert_eq!(bare.buffer_len(), 84);
        let e = LsRequestRepr::parse(&bare.to_vec()).unwrap_err();
        assert_eq!(e.field, "payload");

        // 70 bytes of payload: two stray bytes where an attribute header should be.
        let mut b = good[..86].to_vec();
        b[0..4].copy_from_slice(&86u32.to_ne_bytes());
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("nlattr", "nla_type", 86));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 88,
                available: 86
            }
        );

        // Bad nla_len: too small, and past nlmsg_len.
        let mut b = good.clone();
        b[104..106].copy_from_slice(&2u16.to_ne_bytes());
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("nla_len", 104));
        assert_eq!(
            e.reason,
            Reason::TooShort {
                declared: 2,
                minimum: 4
            }
        );
        b[104..106].copy_from_slice(&29u16.to_ne_bytes());
        let e = LsRequestRepr::parse(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("nla_len", 104));
        assert_eq!(
            e.reason,
            Reason::LengthMismatch {
                declared: 29,
                actual: 28
            }
        );
    }

    #[test]
    fn other_ops_parse_and_expose_the_op() {
        let b = raw_request(0x1002, 0, &[(0x2004, &gid(DGID).0)]);
        let r = LsRequestRepr::parse(&b).unwrap();
        assert_eq!(r.op(), LsOp::IP_RESOLVE);
        assert_eq!(r.header.client(), 4);
    }

    #[test]
    fn emitter_layout() {
        let mut r = LsRequestRepr::resolve(
            5,
            ResolveHeaderRepr::new("mlx4_1", 2, PathUse::UNIDIRECTIONAL),
        );
        r.service_id = Some(1);
        r.tclass = Some(3);
        r.qos_class = Some(0x123);
        let b = r.to_vec();
        assert_eq!(b.len(), 84 + 12 + 8 + 8);
        assert_eq!(&b[0..4], &112u32.to_ne_bytes());
        assert_eq!(&b[84..86], &12u16.to_ne_bytes());
        assert_eq!(&b[86..88], &0x2003u16.to_ne_bytes());
        assert_eq!(&b[88..96], &1u64.to_ne_bytes());
        assert_eq!(&b[96..98], &5u16.to_ne_bytes());
        assert_eq!(&b[98..100], &0x2006u16.to_ne_bytes());
        assert_eq!(&b[100..104], &[3, 0, 0, 0]);
        assert_eq!(&b[104..106], &6u16.to_ne_bytes());
        assert_eq!(&b[106..108], &0x2008u16.to_ne_bytes());
        assert_eq!(&b[108..110], &0x123u16.to_ne_bytes());
        assert_eq!(&b[110..112], &[0, 0]);
        let mut dirty = [0xEEu8; 120];
        assert_eq!(r.emit(&mut dirty), 112);
        assert_eq!(&dirty[..112], &b[..]);
        assert_eq!(&dirty[112..], &[0xEE; 8]);
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: LsRequestRepr) -> bool {
            let b = r.to_vec();
            b.len() == r.buffer_len() && LsRequestRepr::parse(&b) == Ok(r)
        }

        fn prop_garbage_never_panics(b: Garbage<132, 200>) -> bool {
            // Whatever the bytes, parse returns; success implies a sane frame.
            match LsRequestRepr::parse(&b.0) {
                Ok(r) => r.header.is_ls() && b.0.len() >= 86,
                Err(e) => e.offset <= b.0.len(),
            }
        }

        fn prop_valid_frame_with_garbage_attrs_never_panics(
            attrs: Garbage<48, 120>,
            path_use: u8
        ) -> bool {
            let mut b = vector19(path_use)[..84].to_vec();
            b.extend_from_slice(&attrs.0);
            let len = b.len() as u32;
            b[0..4].copy_from_slice(&len.to_ne_bytes());
            match LsRequestRepr::parse(&b) {
                Ok(r) => r.resolve.path_use == PathUse(path_use),
                Err(e) => e.offset >= 16 && e.offset <= b.len(),
            }
        }
    }
}
