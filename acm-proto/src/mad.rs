//! The 24-byte common MAD header that starts every management datagram.
//!
//! Every MAD is 256 bytes on the wire; the first 24 are the common header
//! (IBTA Vol 1 §13.4.2), all fields big-endian. The SA header ([`crate::sa`]) and the ACM MAD
//! ([`crate::acm_mad`]) both begin with it (the ACM MAD uses only its first 16 bytes).
//! See docs/protocol/acm-mad.md §2 and docs/protocol/sa.md §3, §6.

use crate::error::{Layout, Result, extend_layout};
use byteorder::{BigEndian, ByteOrder};

/// Length of every MAD ibacm sends (and of the receive area after the GRH).
pub const MAD_LEN: usize = 256;

/// Length of the common MAD header.
pub const MAD_HEADER_LEN: usize = 24;

/// The byte positions of the common header's fields, which the ACM MAD shares up to `TID`.
pub(crate) mod field {
    use core::ops::Range;
    pub(crate) const BASE_VERSION: usize = 0;
    pub(crate) const MGMT_CLASS: usize = 1;
    pub(crate) const CLASS_VERSION: usize = 2;
    pub(crate) const METHOD: usize = 3;
    pub(crate) const STATUS: Range<usize> = 4..6;
    /// The class-specific word: the ACM MAD's control word.
    pub(crate) const CLASS_SPECIFIC: Range<usize> = 6..8;
    pub(crate) const TID: Range<usize> = 8..16;
    pub(super) const ATTR_ID: Range<usize> = 16..18;
    pub(super) const RESERVED: Range<usize> = 18..20;
    pub(super) const ATTR_MOD: Range<usize> = 20..24;
    pub(super) const PAYLOAD: core::ops::RangeFrom<usize> = 24..;
}

/// The rows every MAD begins with, up to its status word; the ACM MAD names the
/// class-specific word after them differently, so the rows from there are each format's.
pub(crate) const MAD_START_LAYOUT: &Layout = &[
    ("base_version", 0..1),
    ("mgmt_class", 1..2),
    ("class_version", 2..3),
    ("method", 3..4),
    ("status", field::STATUS),
];

/// The common header's layout, which the SA header's extends.
pub(crate) const MAD_HEADER_LAYOUT: &Layout = &extend_layout::<10>(
    MAD_START_LAYOUT,
    &[
        ("class_specific", field::CLASS_SPECIFIC),
        ("tid", field::TID),
        ("attr_id", field::ATTR_ID),
        ("reserved", field::RESERVED),
        ("attr_mod", field::ATTR_MOD),
    ],
);

open_enum! {
    /// Management class (MAD byte 1).
    pub struct MgmtClass(u8) {
        /// Subnet management, LID routed.
        SUBN_LID_ROUTED = 0x01,
        /// Subnet management, directed route.
        SUBN_DIRECTED_ROUTE = 0x81,
        /// Subnet administration (SA queries and joins).
        SA = 0x03,
        /// Performance management.
        PERF = 0x04,
        /// Baseboard management.
        BM = 0x05,
        /// Device management.
        DEV_MGT = 0x06,
        /// Communication management.
        CM = 0x07,
        /// SNMP tunnelling.
        SNMP = 0x08,
        /// ibacm's own address-resolution class (ACM_MGMT_CLASS).
        ACM = 0x2C,
    }
}

open_enum! {
    /// MAD method (MAD byte 3). Bit 7 marks a response.
    pub struct Method(u8) {
        /// Get.
        GET = 0x01,
        /// Set.
        SET = 0x02,
        /// Send.
        SEND = 0x03,
        /// Trap.
        TRAP = 0x05,
        /// Report.
        REPORT = 0x06,
        /// TrapRepress.
        TRAP_REPRESS = 0x07,
        /// GetTable (SA).
        GET_TABLE = 0x12,
        /// GetTraceTable (SA).
        GET_TRACE_TABLE = 0x13,
        /// GetMulti (SA).
        GET_MULTI = 0x14,
        /// Delete (SA).
        DELETE = 0x15,
        /// GetResp.
        GET_RESP = 0x81,
        /// ReportResp.
        REPORT_RESP = 0x86,
        /// GetTableResp (SA).
        GET_TABLE_RESP = 0x92,
        /// GetMultiResp (SA).
        GET_MULTI_RESP = 0x94,
        /// DeleteResp (SA).
        DELETE_RESP = 0x95,
    }
}

/// The method's response bit.
const METHOD_RESPONSE_BIT: u8 = 0x80;

impl Method {
    /// Whether bit 7 (the response bit) is set; this is how ibacmp tells an ACM response
    /// from a request (docs/protocol/acm-mad.md §5).
    #[must_use]
    pub const fn is_response(self) -> bool {
        self.0 & METHOD_RESPONSE_BIT != 0
    }

    /// The method with the response bit set (GET → GET_RESP).
    #[must_use]
    pub const fn response(self) -> Self {
        Self(self.0 | METHOD_RESPONSE_BIT)
    }
}

open_enum! {
    /// Attribute id (MAD bytes 16–17).
    pub struct AttrId(u16) {
        /// ClassPortInfo.
        CLASS_PORT_INFO = 0x0001,
        /// Notice.
        NOTICE = 0x0002,
        /// InformInfo.
        INFORM_INFO = 0x0003,
        /// NodeRecord (SA).
        NODE_RECORD = 0x0011,
        /// PortInfoRecord (SA).
        PORT_INFO_RECORD = 0x0012,
        /// ServiceRecord (SA).
        SERVICE_RECORD = 0x0031,
        /// PathRecord (SA).
        PATH_RECORD = 0x0035,
        /// MCMemberRecord (SA).
        MC_MEMBER_RECORD = 0x0038,
        /// MultiPathRecord (SA).
        MULTI_PATH_RECORD = 0x003A,
    }
}

/// The 16-bit MAD status word (IBTA Vol 1 Table 113).
///
/// Bits 15:8 are class specific; for SA they carry an
/// [`SaClassStatus`](crate::sa::SaClassStatus), which ibacm hands to clients unchanged as
/// the ACM status (docs/protocol/sa.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MadStatus(pub u16);

impl MadStatus {
    /// All clear.
    pub const OK: Self = Self(0);

    /// Only the busy bit (bit 0): what an overloaded SA answers, the request discarded.
    pub const BUSY: Self = Self(0x0001);

    /// Whether every bit is zero (how an SA join response is judged,
    /// docs/protocol/sa.md §5).
    #[must_use]
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// Bit 0: busy, the request was discarded.
    #[must_use]
    pub const fn busy(self) -> bool {
        self.0 & 0x1 != 0
    }

    /// Bit 1: redirection required.
    #[must_use]
    pub const fn redirect(self) -> bool {
        self.0 & 0x2 != 0
    }

    /// Bits 4:2: the invalid-field code (0 none, 1 bad base/class version, 2 method not
    /// supported, 3 method/attribute combination not supported, 7 invalid attribute or
    /// modifier value).
    #[must_use]
    pub const fn invalid_field(self) -> u8 {
        ((self.0 >> 2) & 0x7) as u8
    }

    /// Bits 7:0, the generic status (busy, redirect, invalid field), the class byte left
    /// out.
    #[must_use]
    pub const fn generic(self) -> u8 {
        (self.0 & 0x00FF) as u8
    }

    /// Bits 15:8, the class-specific status: `status >> 8`, exactly what ibacm passes to
    /// clients as the ACM status (docs/protocol/sa.md §6). Generic bits 7:0 are not
    /// included.
    #[must_use]
    pub const fn class_status(self) -> u8 {
        (self.0 >> 8) as u8
    }
}

impl crate::wire_value::WireValue for MadStatus {
    #[inline]
    fn read<E: ByteOrder>(b: &[u8]) -> Self {
        Self(u16::read::<E>(b))
    }
    #[inline]
    fn write<E: ByteOrder>(self, b: &mut [u8]) {
        self.0.write::<E>(b);
    }
}

impl From<u16> for MadStatus {
    fn from(v: u16) -> Self {
        Self(v)
    }
}

impl From<MadStatus> for u16 {
    fn from(v: MadStatus) -> Self {
        v.0
    }
}

open_enum! {
    /// The status umad gives a sent MAD back with (`ib_user_mad_hdr.status`): 0 for a
    /// response, else the errno of the send, [`TIMED_OUT`](Self::TIMED_OUT) once its
    /// last retry went unanswered. A receiver treats every non-zero value as the send's
    /// failure.
    pub struct UmadStatus(i32) {
        /// A response (or a send that succeeded).
        OK = 0,
        /// ETIMEDOUT: no response after the last retry.
        TIMED_OUT = crate::errno::ETIMEDOUT,
    }
}

/// A zero-copy view of the common MAD header (and whatever follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MadHeaderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MadHeaderPacket<T> {
    view_constructors!("MAD header", MAD_HEADER_LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The method, or `None` when the buffer ends before it. For a receiver that must
    /// route a MAD shorter than the header (to drop it with a log line naming it) before
    /// `check_len` could accept it.
    pub fn try_method(&self) -> Option<Method> {
        self.b().get(field::METHOD).copied().map(Method)
    }

    /// The transaction id, or `None` when the buffer ends before it; see
    /// [`try_method`](Self::try_method).
    pub fn try_tid(&self) -> Option<u64> {
        self.b().get(field::TID).map(BigEndian::read_u64)
    }
}

mad_common_fields!(MadHeaderPacket);

view_fields! {
    impl MadHeaderPacket, BigEndian {
        /// Status word.
        status, set_status: MadStatus = field::STATUS;
        /// Class-specific word (bytes 6–7).
        class_specific, set_class_specific: u16 = field::CLASS_SPECIFIC;
        /// Attribute id.
        attr_id, set_attr_id: AttrId = field::ATTR_ID;
        /// Reserved word (bytes 18–19).
        reserved, set_reserved: u16 = field::RESERVED;
        /// Attribute modifier.
        attr_mod, set_attr_mod: u32 = field::ATTR_MOD;
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> MadHeaderPacket<&'a T> {
    /// Everything after the 24-byte header (empty if the buffer is no longer).
    pub fn payload(&self) -> &'a [u8] {
        self.buffer.as_ref().get(field::PAYLOAD).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MadHeaderPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.bm().get_mut(field::PAYLOAD).unwrap_or(&mut [])
    }
}

/// The common MAD header as typed values. Every bit of the 24 bytes is kept, so parse
/// then emit reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MadHeaderRepr {
    /// Base version (1).
    pub base_version: u8,
    /// Management class.
    pub mgmt_class: MgmtClass,
    /// Class version.
    pub class_version: u8,
    /// Method.
    pub method: Method,
    /// Status word.
    pub status: MadStatus,
    /// Class-specific word.
    pub class_specific: u16,
    /// Transaction id.
    pub tid: u64,
    /// Attribute id.
    pub attr_id: AttrId,
    /// Reserved word.
    pub reserved: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl MadHeaderRepr {
    /// Parses the first 24 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = MadHeaderPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads a header from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &MadHeaderPacket<T>) -> Self {
        Self {
            base_version: p.base_version(),
            mgmt_class: p.mgmt_class(),
            class_version: p.class_version(),
            method: p.method(),
            status: p.status(),
            class_specific: p.class_specific(),
            tid: p.tid(),
            attr_id: p.attr_id(),
            reserved: p.reserved(),
            attr_mod: p.attr_mod(),
        }
    }

    /// Writes the header into the first 24 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 24 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = MadHeaderPacket::new_unchecked(&mut buf[..MAD_HEADER_LEN]);
        p.set_base_version(self.base_version);
        p.set_mgmt_class(self.mgmt_class);
        p.set_class_version(self.class_version);
        p.set_method(self.method);
        p.set_status(self.status);
        p.set_class_specific(self.class_specific);
        p.set_tid(self.tid);
        p.set_attr_id(self.attr_id);
        p.set_reserved(self.reserved);
        p.set_attr_mod(self.attr_mod);
    }

    emit_to_array!("header", MAD_HEADER_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;
    use crate::testutil::{Garbage, bytes};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    /// An SA PathRecord GET header: base 1, class SA, version 2, tid 5.
    const SA_GET: [u8; 24] = [
        0x01, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x05, 0x00, 0x35, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    impl Arbitrary for MadHeaderRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<24>(g)).unwrap()
        }
    }

    #[test]
    fn deconstruct() {
        let p = MadHeaderPacket::new_checked(&SA_GET[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), MgmtClass::SA);
        assert_eq!(p.class_version(), 2);
        assert_eq!(p.method(), Method::GET);
        assert!(!p.method().is_response());
        assert_eq!(p.status(), MadStatus::OK);
        assert_eq!(p.class_specific(), 0);
        assert_eq!(p.tid(), 5);
        assert_eq!(p.attr_id(), AttrId::PATH_RECORD);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.attr_mod(), 0);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn truncated_headers_answer_what_they_reach() {
        let p = MadHeaderPacket::new_unchecked(&SA_GET[..3]);
        assert_eq!((p.try_method(), p.try_tid()), (None, None));
        let p = MadHeaderPacket::new_unchecked(&SA_GET[..15]);
        assert_eq!((p.try_method(), p.try_tid()), (Some(Method::GET), None));
        let p = MadHeaderPacket::new_unchecked(&SA_GET[..16]);
        assert_eq!((p.try_method(), p.try_tid()), (Some(Method::GET), Some(5)));
    }

    #[test]
    fn status_by_class() {
        use crate::sa::SaClassStatus;
        let s = SaClassStatus::NO_RECORDS.mad_status();
        assert_eq!(s, MadStatus(0x0300));
        assert_eq!((s.class_status(), s.generic()), (3, 0));
        assert_eq!(SaClassStatus::from(s), SaClassStatus::NO_RECORDS);
        assert_eq!(
            MadStatus::from(SaClassStatus::REQ_INVALID),
            MadStatus(0x0200)
        );
        assert_eq!(
            (
                MadStatus(0x0201).class_status(),
                MadStatus(0x0201).generic()
            ),
            (2, 1)
        );
    }

    #[test]
    fn construct() {
        let mut b = [0u8; 30];
        let mut p = MadHeaderPacket::new_unchecked(&mut b[..]);
        p.set_base_version(1);
        p.set_mgmt_class(MgmtClass::ACM);
        p.set_class_version(1);
        p.set_method(Method::GET.response());
        p.set_status(MadStatus(0x0300));
        p.set_class_specific(0x0001);
        p.set_tid(0x0102_0304_0506_0708);
        p.set_attr_id(AttrId::MC_MEMBER_RECORD);
        p.set_reserved(0xBEEF);
        p.set_attr_mod(0xDEAD_0001);
        p.payload_mut().copy_from_slice(&[9; 6]);
        assert_eq!(
            &b[..],
            &[
                0x01, 0x2C, 0x01, 0x81, 0x03, 0x00, 0x00, 0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
                0x07, 0x08, 0x00, 0x38, 0xBE, 0xEF, 0xDE, 0xAD, 0x00, 0x01, 9, 9, 9, 9, 9, 9
            ]
        );
        let p = MadHeaderPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &[9; 6]);
    }

    #[test]
    fn parse_and_emit() {
        let r = MadHeaderRepr::parse(&SA_GET).unwrap();
        assert_eq!(
            r,
            MadHeaderRepr {
                base_version: 1,
                mgmt_class: MgmtClass::SA,
                class_version: 2,
                method: Method::GET,
                tid: 5,
                attr_id: AttrId::PATH_RECORD,
                ..Default::default()
            }
        );
        assert_eq!(r.buffer_len(), MAD_HEADER_LEN);
        assert_eq!(r.to_bytes(), SA_GET);
        // Extra bytes are ignored by parse and untouched by emit.
        let mut long = [0xAAu8; 40];
        r.emit(&mut long);
        assert_eq!(&long[..24], &SA_GET);
        assert_eq!(&long[24..], &[0xAA; 16]);
        assert_eq!(MadHeaderRepr::parse(&long), Ok(r));
    }

    #[test]
    fn truncated_names_first_missing_field() {
        let e = MadHeaderRepr::parse(&SA_GET[..10]).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("MAD header", "tid", 8));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 24,
                available: 10
            }
        );
        let e = MadHeaderRepr::parse(&[]).unwrap_err();
        assert_eq!((e.field, e.offset), ("base_version", 0));
        let e = MadHeaderRepr::parse(&SA_GET[..23]).unwrap_err();
        assert_eq!((e.field, e.offset), ("attr_mod", 20));
    }

    #[test]
    fn status_bits() {
        let s = MadStatus(0x0300);
        assert_eq!(s.class_status(), 3);
        assert!(!s.busy() && !s.redirect() && !s.is_ok());
        assert_eq!(s.invalid_field(), 0);
        let s = MadStatus(0x0001 | 0x0002 | (7 << 2));
        assert!(s.busy() && s.redirect());
        assert_eq!(s.invalid_field(), 7);
        assert_eq!(s.class_status(), 0);
        assert_eq!(MadStatus(0x0C).invalid_field(), 3);
        assert!(MadStatus::OK.is_ok());
    }

    #[test]
    fn method_response_bit() {
        for m in Method::KNOWN {
            assert_eq!(m.is_response(), m.0 >= 0x80, "{m:?}");
        }
        assert_eq!(Method::GET.response(), Method::GET_RESP);
        assert_eq!(Method::GET_TABLE.response(), Method::GET_TABLE_RESP);
        assert_eq!(Method::DELETE.response(), Method::DELETE_RESP);
        assert_eq!(alloc::format!("{:?}", Method(0x42)), "Method(0x42)");
        assert_eq!(MgmtClass::ACM.0, 0x2C);
        assert_eq!(AttrId::MULTI_PATH_RECORD.0, 0x3A);
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: MadHeaderRepr) -> bool {
            MadHeaderRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match MadHeaderRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..24],
                Err(_) => b.len() < 24,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<24, 64>) -> bool {
            let ok = MadHeaderRepr::parse(&b.0).is_ok();
            let view = MadHeaderPacket::new_checked(&b.0[..]).map(|p| p.payload().len());
            ok == (b.0.len() >= 24) && view.map_or(true, |n| n == b.0.len() - 24)
        }
    }
}
