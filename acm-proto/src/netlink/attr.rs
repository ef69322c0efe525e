//! Netlink attributes (`struct nlattr`): a 4-byte header (`nla_len` u16, `nla_type` u16,
//! host order), the payload, then zero padding up to the next multiple of 4.
//!
//! `nla_len` counts the header and the payload but not the padding. The top three bits of
//! `nla_type` are flags; RDMA netlink dispatches on the type with all three masked off.

use super::codes::LsAttrType;
use crate::ParseError;
use crate::error::{Layout, Reason, Result, check_layout};
use byteorder::NativeEndian;

/// Length of the attribute header (NLA_HDRLEN).
pub const NLA_HDRLEN: usize = 4;

/// Attributes start at multiples of this (NLA_ALIGNTO).
pub const NLA_ALIGNTO: usize = 4;

/// `nla_type` flag: the payload is itself a list of attributes.
pub const NLA_F_NESTED: u16 = 0x8000;

/// `nla_type` flag: the payload is in network byte order.
pub const NLA_F_NET_BYTEORDER: u16 = 0x4000;

/// `nla_type` flag (RDMA netlink): the receiver must understand this attribute. The kernel
/// sets it on every attribute of an LS request.
pub const RDMA_NLA_F_MANDATORY: u16 = 0x2000;

/// The bits of `nla_type` that remain once the three flags are masked off
/// (`!(0x8000 | 0x4000 | 0x2000)` = 0x1FFF).
pub const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER | RDMA_NLA_F_MANDATORY);

/// `len` rounded up to a multiple of 4 (NLA_ALIGN), saturating near `usize::MAX`.
#[must_use]
pub const fn nla_align(len: usize) -> usize {
    match len.checked_add(NLA_ALIGNTO - 1) {
        Some(n) => n & !(NLA_ALIGNTO - 1),
        None => usize::MAX & !(NLA_ALIGNTO - 1),
    }
}

const FORMAT: &str = "nlattr";

/// Moves an error from a parser that ran on `buf[base..]` to `buf`'s coordinates: the
/// offset and, for `Truncated`, the needed and available byte counts.
pub(super) fn rebase(e: ParseError, base: usize) -> ParseError {
    let mut e = e.at_base(base);
    if let Reason::Truncated { needed, available } = &mut e.reason {
        *needed += base;
        *available += base;
    }
    e
}

/// Writes `count` empty attributes of type 0 (no mandatory bit) at the start of `buf` and
/// returns their length: what a parsed message's skipped attributes re-emit as, so that it
/// parses the same again.
pub(super) fn put_empty_attrs(buf: &mut [u8], count: u16) -> usize {
    let mut pos = 0;
    for _ in 0..count {
        pos += put_attr(&mut buf[pos..], 0, &[]);
    }
    pos
}

mod field {
    use core::ops::Range;
    pub(super) const LEN: Range<usize> = 0..2;
    pub(super) const TYPE: Range<usize> = 2..4;
}

const LAYOUT: &Layout = &[("nla_len", field::LEN), ("nla_type", field::TYPE)];

/// The error for an `nla_len` that cannot frame an attribute starting at `offset` in an
/// area of `available` bytes.
fn bad_nla_len(offset: usize, declared: usize, available: usize) -> ParseError {
    let reason = if declared < NLA_HDRLEN {
        Reason::TooShort {
            declared,
            minimum: NLA_HDRLEN,
        }
    } else {
        Reason::LengthMismatch {
            declared,
            actual: available,
        }
    };
    ParseError::new(FORMAT, "nla_len", offset, reason)
}

/// A zero-copy view of one attribute at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NlAttrPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NlAttrPacket<T> {
    view_constructors!(own check_len);

    /// Checks the header is present and `4 <= nla_len <= buffer length`, so no accessor
    /// can panic. Padding after the payload is not required.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_layout(FORMAT, LAYOUT, len)?;
        let declared = usize::from(self.nla_len());
        if declared < NLA_HDRLEN || declared > len {
            return Err(bad_nla_len(0, declared, len));
        }
        Ok(())
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The type with the three flag bits masked off: what RDMA netlink dispatches on.
    pub fn kind(&self) -> u16 {
        self.nla_type() & NLA_TYPE_MASK
    }
    /// Whether [`RDMA_NLA_F_MANDATORY`] is set.
    pub fn is_mandatory(&self) -> bool {
        self.nla_type() & RDMA_NLA_F_MANDATORY != 0
    }
    /// The payload: bytes 4 to `nla_len` (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        let end = usize::from(self.nla_len()).clamp(NLA_HDRLEN, b.len());
        &b[NLA_HDRLEN..end]
    }
    /// `nla_len` rounded up to 4: where the next attribute starts.
    pub fn total_len(&self) -> usize {
        nla_align(usize::from(self.nla_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NlAttrPacket<T> {
    /// The payload, mutably: bytes 4 to `nla_len` (clamped to the buffer).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.nla_len()).clamp(NLA_HDRLEN, self.buffer.as_ref().len());
        &mut self.buffer.as_mut()[NLA_HDRLEN..end]
    }
}

view_fields! {
    impl NlAttrPacket, NativeEndian {
        /// `nla_len`: header plus payload, without padding.
        nla_len, set_nla_len: u16 = field::LEN;
        /// `nla_type` as on the wire, flag bits included.
        nla_type, set_nla_type: u16 = field::TYPE;
    }
}

/// Writes one attribute at the start of `buf`: header, `payload`, zero padding to 4 bytes.
/// Returns the bytes written, `nla_align(4 + payload.len())`.
///
/// # Panics
/// If `buf` is shorter than that, or `payload` is longer than `u16::MAX - 4` bytes.
pub fn put_attr(buf: &mut [u8], nla_type: u16, payload: &[u8]) -> usize {
    let len = NLA_HDRLEN + payload.len();
    let total = nla_align(len);
    let nla_len = u16::try_from(len).expect("netlink attribute payload over 65531 bytes");
    let area = &mut buf[..total];
    let mut p = NlAttrPacket::new_unchecked(&mut area[..len]);
    p.set_nla_len(nla_len);
    p.set_nla_type(nla_type);
    p.payload_mut().copy_from_slice(payload);
    area[len..].fill(0);
    total
}

/// One attribute found by [`NlAttrIter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NlAttr<'a> {
    /// Offset of the attribute's header in the area that was iterated.
    pub offset: usize,
    /// `nla_type` as on the wire, flag bits included.
    pub nla_type: u16,
    /// The payload (`nla_len - 4` bytes, padding excluded).
    pub payload: &'a [u8],
}

impl NlAttr<'_> {
    /// The type with the three flag bits masked off.
    #[must_use]
    pub const fn kind(&self) -> u16 {
        self.nla_type & NLA_TYPE_MASK
    }
    /// The masked type as an LS attribute type.
    #[must_use]
    pub const fn ls_type(&self) -> LsAttrType {
        LsAttrType(self.kind())
    }
    /// Whether [`RDMA_NLA_F_MANDATORY`] is set.
    #[must_use]
    pub const fn is_mandatory(&self) -> bool {
        self.nla_type & RDMA_NLA_F_MANDATORY != 0
    }
    /// Whether [`NLA_F_NESTED`] is set.
    #[must_use]
    pub const fn is_nested(&self) -> bool {
        self.nla_type & NLA_F_NESTED != 0
    }
    /// Whether [`NLA_F_NET_BYTEORDER`] is set.
    #[must_use]
    pub const fn is_net_byteorder(&self) -> bool {
        self.nla_type & NLA_F_NET_BYTEORDER != 0
    }
    /// `nla_len` (header plus payload).
    #[must_use]
    pub const fn nla_len(&self) -> usize {
        NLA_HDRLEN + self.payload.len()
    }

    /// The error of `format` for this attribute, found at `at` in the message, when its
    /// payload is not the size its type needs: `BadValue` on the type's name, the value
    /// `nla_len`, the reason [`LsAttrType::size_rule`].
    pub(super) fn wrong_size(&self, format: &'static str, at: usize) -> ParseError {
        let kind = self.ls_type();
        ParseError::new(
            format,
            kind.name().unwrap_or("nla_len"),
            at,
            Reason::BadValue {
                value: self.nla_len() as u64,
                why: kind.size_rule(),
            },
        )
    }
}

/// Iterates over an attribute area (the bytes after a message's fixed header, up to
/// `nlmsg_len`), yielding each attribute or the first framing error.
///
/// Attribute *i+1* starts at attribute *i*'s offset plus `nla_align(nla_len)`; the area may
/// end right after the last payload without its padding. Framing errors, with offsets
/// relative to the area:
///
/// * 1 to 3 bytes left over, too few for a header: `Truncated` on `nla_len` or `nla_type`;
/// * `nla_len` < 4: `TooShort` on `nla_len`;
/// * `nla_len` past the end of the area: `LengthMismatch` on `nla_len` (declared vs bytes
///   left).
///
/// After an error the iterator is finished. It never panics.
#[derive(Debug, Clone)]
pub struct NlAttrIter<'a> {
    area: &'a [u8],
    pos: usize,
}

impl<'a> NlAttrIter<'a> {
    /// Iterates over `area`.
    #[must_use]
    pub const fn new(area: &'a [u8]) -> Self {
        Self { area, pos: 0 }
    }

    fn next_attr(&self) -> Result<NlAttr<'a>> {
        let rest = self.area.get(self.pos..).unwrap_or(&[]);
        let p = NlAttrPacket::new_unchecked(rest);
        check_layout(FORMAT, LAYOUT, rest.len()).map_err(|e| rebase(e, self.pos))?;
        let declared = usize::from(p.nla_len());
        if declared < NLA_HDRLEN || declared > rest.len() {
            return Err(bad_nla_len(self.pos, declared, rest.len()));
        }
        Ok(NlAttr {
            offset: self.pos,
            nla_type: p.nla_type(),
            payload: &rest[NLA_HDRLEN..declared],
        })
    }
}

impl<'a> Iterator for NlAttrIter<'a> {
    type Item = Result<NlAttr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.area.len() {
            return None;
        }
        let item = self.next_attr();
        self.pos = match &item {
            Ok(a) => a.offset.saturating_add(nla_align(a.nla_len())),
            Err(_) => self.area.len(),
        };
        Some(item)
    }
}

impl core::iter::FusedIterator for NlAttrIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use alloc::vec::Vec;
    use quickcheck::quickcheck;

    fn attrs(area: &[u8]) -> Vec<Result<NlAttr<'_>>> {
        NlAttrIter::new(area).collect()
    }

    #[test]
    fn type_mask_and_flags() {
        assert_eq!(NLA_TYPE_MASK, 0x1FFF);
        let a = NlAttr {
            offset: 0,
            nla_type: 0xE004,
            payload: &[],
        };
        assert_eq!(a.kind(), 4);
        assert_eq!(a.ls_type(), LsAttrType::DGID);
        assert!(a.is_mandatory() && a.is_nested() && a.is_net_byteorder());
        assert_eq!(nla_align(5), 8);
        assert_eq!(nla_align(8), 8);
        assert_eq!(nla_align(0), 0);
        assert_eq!(nla_align(usize::MAX), usize::MAX & !3);
    }

    #[test]
    fn put_attr_pads_with_zeros() {
        let mut b = [0xAAu8; 12];
        assert_eq!(put_attr(&mut b, 0x2006, &[7]), 8);
        let mut expect = Vec::new();
        expect.extend_from_slice(&5u16.to_ne_bytes());
        expect.extend_from_slice(&0x2006u16.to_ne_bytes());
        expect.extend_from_slice(&[7, 0, 0, 0]);
        assert_eq!(&b[..8], &expect[..]);
        assert_eq!(&b[8..], &[0xAA; 4]);
        let p = NlAttrPacket::new_checked(&b[..8]).unwrap();
        assert_eq!((p.nla_len(), p.kind(), p.payload()), (5, 6, &[7u8][..]));
        assert!(p.is_mandatory());
        assert_eq!(p.total_len(), 8);
    }

    #[test]
    fn iterates_aligned_attributes() {
        let mut b = [0u8; 28];
        let mut n = put_attr(&mut b, 0x2007, &0xFFFFu16.to_ne_bytes());
        n += put_attr(&mut b[n..], 0x2004, &[1; 16]);
        assert_eq!(n, 28);
        let got = attrs(&b);
        assert_eq!(got.len(), 2);
        let a0 = got[0].unwrap();
        let a1 = got[1].unwrap();
        assert_eq!(
            (a0.offset, a0.ls_type(), a0.payload),
            (0, LsAttrType::PKEY, &[0xFF, 0xFF][..])
        );
        assert_eq!(
            (a1.offset, a1.ls_type(), a1.nla_len()),
            (8, LsAttrType::DGID, 20)
        );
        // The last attribute may lack its padding.
        let mut c = [0u8; 9];
        put_attr(&mut c[..], 3, &[]);
        c[4..6].copy_from_slice(&5u16.to_ne_bytes());
        c[6..8].copy_from_slice(&6u16.to_ne_bytes());
        let got = attrs(&c);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].unwrap().payload, &[0]);
        assert!(attrs(&[]).is_empty());
    }

    #[test]
    fn bad_lengths_are_errors_with_offsets() {
        // nla_len 3 in the second attribute.
        let mut b = [0u8; 12];
        put_attr(&mut b, 1, &[0; 4]);
        b[8..10].copy_from_slice(&3u16.to_ne_bytes());
        let got = attrs(&b);
        assert_eq!(got.len(), 2);
        let e = got[1].unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("nlattr", "nla_len", 8));
        assert_eq!(
            e.reason,
            Reason::TooShort {
                declared: 3,
                minimum: 4
            }
        );

        // nla_len past the end.
        b[8..10].copy_from_slice(&9u16.to_ne_bytes());
        let e = attrs(&b)[1].unwrap_err();
        assert_eq!((e.field, e.offset), ("nla_len", 8));
        assert_eq!(
            e.reason,
            Reason::LengthMismatch {
                declared: 9,
                actual: 4
            }
        );

        // Three stray bytes after an attribute.
        let e = attrs(&b[..11])[1].unwrap_err();
        assert_eq!((e.field, e.offset), ("nla_type", 10));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 12,
                available: 11
            }
        );
        let e = attrs(&b[..9])[1].unwrap_err();
        assert_eq!((e.field, e.offset), ("nla_len", 8));

        // nla_len 0 must not loop forever.
        assert_eq!(attrs(&[0; 8]).len(), 1);

        let e = NlAttrPacket::new_checked(&[8u8, 0, 1, 0][..]).unwrap_err();
        assert_eq!(
            e.reason,
            Reason::LengthMismatch {
                declared: 8,
                actual: 4
            }
        );
    }

    quickcheck! {
        fn prop_iter_never_panics_and_tiles_area(b: Garbage<24, 64>) -> bool {
            let mut next = 0;
            let mut errors = 0;
            for item in NlAttrIter::new(&b.0) {
                match item {
                    Ok(a) => {
                        if a.offset != next || a.offset + a.nla_len() > b.0.len() {
                            return false;
                        }
                        next = a.offset + nla_align(a.nla_len());
                    }
                    Err(e) => {
                        errors += 1;
                        // The error names nla_len (at the attribute) or, when only 2 or 3
                        // bytes are left, nla_type (2 bytes in).
                        let expected = if e.field == "nla_type" { next + 2 } else { next };
                        if e.offset != expected {
                            return false;
                        }
                    }
                }
            }
            errors <= 1
        }

        fn prop_put_then_iterate(payloads: Vec<(u16, Vec<u8>)>) -> bool {
            let mut buf = Vec::new();
            for (t, p) in &payloads {
                let start = buf.len();
                buf.resize(start + nla_align(4 + p.len()), 0xFF);
                put_attr(&mut buf[start..], *t, p);
            }
            let got: Vec<_> = NlAttrIter::new(&buf).collect();
            got.len() == payloads.len()
                && got.iter().zip(&payloads).all(|(g, (t, p))| {
                    g.as_ref().is_ok_and(|a| a.nla_type == *t && a.payload == &p[..])
                })
        }
    }
}
