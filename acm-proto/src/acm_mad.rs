//! The ACM MAD (management class 0x2C) that ibacmp endpoints exchange over their own UD
//! QPs to resolve an address to a GID, and its `acm_resolve_rec` payload.
//!
//! 256 bytes, big-endian: a 16-byte header (the first half of the common MAD header, with
//! a `control` word in place of the class-specific one) and the resolve record from
//! offset 16. See docs/protocol/acm-mad.md §1–§7, docs/test-vectors.md §15,
//! docs/reference-quirks.md §30.

use crate::client::AddrType;
use crate::error::{Layout, Result, extend_layout};
use crate::mad::{MAD_LEN, MAD_START_LAYOUT, Method, MgmtClass};
use crate::{BYTES64_LEN, Bytes64, Gid};
use byteorder::BigEndian;

/// Length of an ACM MAD: a whole MAD.
pub const ACM_MAD_LEN: usize = MAD_LEN;

/// The ACM class version (ACM MADs with any other are dropped,
/// docs/protocol/acm-mad.md §5).
pub const ACM_CLASS_VERSION: u8 = 1;

/// The Q_Key of ACM endpoints' QPs, also used for SA traffic and in MCMemberRecords.
pub const ACM_QKEY: u32 = 0x8001_0000;

/// The remote QPN of a multicast send.
pub const MULTICAST_QPN: u32 = 0x00FF_FFFF;

/// GIDs that fit whole in a 256-byte MAD. The C structure declares 10: the seventh
/// starts 8 bytes before the end of the MAD and the rest lie wholly beyond it.
pub const ACM_MAD_MAX_GIDS: usize = 6;

/// Offset of the resolve record in the MAD.
pub const RESOLVE_REC_OFFSET: usize = 16;

mod field {
    /// The common MAD header's fields, its class-specific word the control word (the
    /// versions, class and method are read by `mad_common_fields!`).
    pub(super) use crate::mad::field::{CLASS_SPECIFIC as CONTROL, STATUS, TID};
    use core::ops::Range;
    pub(super) const DEST_TYPE: usize = 16;
    pub(super) const DEST_LENGTH: usize = 17;
    pub(super) const SRC_TYPE: usize = 18;
    pub(super) const SRC_LENGTH: usize = 19;
    pub(super) const GID_CNT: usize = 20;
    pub(super) const RESP_RESOURCES: usize = 21;
    pub(super) const INIT_DEPTH: usize = 22;
    pub(super) const RESERVED: usize = 23;
    pub(super) const DEST: Range<usize> = 24..88;
    pub(super) const SRC: Range<usize> = 88..152;
    /// The GID list up to the end of the MAD: six whole GIDs and 8 bytes of a seventh.
    pub(super) const GIDS: Range<usize> = 152..super::ACM_MAD_LEN;
    /// The 8 bytes after the sixth GID slot.
    pub(super) const GID_TAIL: Range<usize> = 248..super::ACM_MAD_LEN;
    pub(super) const GID_LEN: usize = 16;
}

/// The common MAD header's rows up to the status word, then the ACM MAD's own.
const LAYOUT: &Layout = &extend_layout::<18>(
    MAD_START_LAYOUT,
    &[
        ("control", field::CONTROL),
        ("tid", field::TID),
        ("dest_type", 16..17),
        ("dest_length", 17..18),
        ("src_type", 18..19),
        ("src_length", 19..20),
        ("gid_cnt", 20..21),
        ("resp_resources", 21..22),
        ("init_depth", 22..23),
        ("reserved", 23..24),
        ("dest", field::DEST),
        ("src", field::SRC),
        ("gid", field::GIDS),
    ],
);

open_enum! {
    /// The ACM MAD control word (bytes 6–7).
    pub struct AcmControl(u16) {
        /// ACM_CTRL_RESOLVE: the only value ibacmp sends or accepts.
        RESOLVE = 0x0001,
        /// ACM_CTRL_ACK: defined, never used.
        ACK = 0x8000,
    }
}

/// A zero-copy view of an ACM MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcmMadPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AcmMadPacket<T> {
    view_constructors!("ACM MAD", LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The upper status byte, which is all a receiver reads, as the ACM status.
    pub fn acm_status(&self) -> u8 {
        self.b()[field::STATUS.start]
    }
    /// Destination address type.
    pub fn dest_type(&self) -> AddrType {
        AddrType(u16::from(self.b()[field::DEST_TYPE]))
    }
    /// Source address type.
    pub fn src_type(&self) -> AddrType {
        AddrType(u16::from(self.b()[field::SRC_TYPE]))
    }
    /// Destination address.
    pub fn dest(&self) -> Bytes64 {
        Bytes64::read(&self.b()[field::DEST]).unwrap_or_default()
    }
    /// Source address.
    pub fn src(&self) -> Bytes64 {
        Bytes64::read(&self.b()[field::SRC]).unwrap_or_default()
    }
    /// GID slot `i` (whatever `gid_cnt` says), or `None` for `i >= 6`.
    pub fn gid(&self, i: usize) -> Option<Gid> {
        if i >= ACM_MAD_MAX_GIDS {
            return None;
        }
        let start = field::GIDS.start + i * field::GID_LEN;
        Gid::read(&self.b()[start..start + field::GID_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AcmMadPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the destination address type. The MAD holds it in one byte: only the low
    /// byte is written (the ACM_ADDRESS_* types are 0..=5).
    pub fn set_dest_type(&mut self, v: AddrType) {
        self.bm()[field::DEST_TYPE] = v.0 as u8;
    }
    /// Sets the source address type (low byte only, as `set_dest_type`).
    pub fn set_src_type(&mut self, v: AddrType) {
        self.bm()[field::SRC_TYPE] = v.0 as u8;
    }
    /// Sets the destination address.
    pub fn set_dest(&mut self, v: &Bytes64) {
        self.bm()[field::DEST].copy_from_slice(&v.0);
    }
    /// Sets the source address.
    pub fn set_src(&mut self, v: &Bytes64) {
        self.bm()[field::SRC].copy_from_slice(&v.0);
    }
    /// Sets GID slot `i`.
    ///
    /// # Panics
    /// If `i >= 6` (no further whole GID fits in the MAD).
    pub fn set_gid(&mut self, i: usize, v: Gid) {
        assert!(i < ACM_MAD_MAX_GIDS, "ACM MAD GID slot {i} out of range");
        let start = field::GIDS.start + i * field::GID_LEN;
        self.bm()[start..start + field::GID_LEN].copy_from_slice(&v.0);
    }
}

// Management class 0x2C, class version 1; method GET for a request, GET_RESP for a
// response.
mad_common_fields!(AcmMadPacket);

view_fields! {
    impl AcmMadPacket, BigEndian {
        /// The whole status word.
        status, set_status: u16 = field::STATUS;
        /// Control word.
        control, set_control: AcmControl = field::CONTROL;
        /// Destination address length (64 in a request).
        dest_length, set_dest_length: u8 = field::DEST_LENGTH;
        /// Source address length (64 in a request).
        src_length, set_src_length: u8 = field::SRC_LENGTH;
        /// The number of GIDs the sender claims, as sent (may exceed what fits).
        gid_cnt, set_gid_cnt: u8 = field::GID_CNT;
        /// Responder resources.
        resp_resources, set_resp_resources: u8 = field::RESP_RESOURCES;
        /// Initiator depth.
        init_depth, set_init_depth: u8 = field::INIT_DEPTH;
        /// Reserved byte 23.
        reserved, set_reserved: u8 = field::RESERVED;
        /// The 8 bytes after the sixth GID slot (the first half of a seventh GID).
        gid_tail, set_gid_tail: [u8; 8] = field::GID_TAIL;
    }
}

/// The resolve record (`acm_resolve_rec`) as typed values.
///
/// `gid_cnt` is kept exactly as received: a peer may claim up to 255 even though only six
/// GIDs fit in the MAD (the reference trusts up to 10 and reads past the MAD,
/// docs/reference-quirks.md §30). `gids` holds the first `min(gid_cnt, 6)` GID slots. GID
/// slots beyond those and the 8 bytes after the sixth slot are not represented: parse
/// ignores them and emit writes zeros there, so `emit` normalises a MAD that had garbage
/// in them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResolveRecRepr {
    /// Destination address type: the client protocol's ACM_ADDRESS_* code point, carried
    /// in one byte here (emit writes the low byte).
    pub dest_type: AddrType,
    /// Destination address length.
    pub dest_length: u8,
    /// Source address type.
    pub src_type: AddrType,
    /// Source address length.
    pub src_length: u8,
    /// The GID count as sent.
    pub gid_cnt: u8,
    /// Responder resources.
    pub resp_resources: u8,
    /// Initiator depth.
    pub init_depth: u8,
    /// Reserved byte.
    pub reserved: u8,
    /// Destination address (64 bytes, as in the cache key).
    pub dest: Bytes64,
    /// Source address (64 bytes, as in the client's entry).
    pub src: Bytes64,
    /// The MGIDs, lowest priority first. Emit writes only the first `gid_cnt` of them.
    #[cfg_attr(feature = "serde", serde(serialize_with = "serialize_gids"))]
    pub gids: heapless::Vec<Gid, ACM_MAD_MAX_GIDS>,
}

#[cfg(feature = "serde")]
fn serialize_gids<S: serde::Serializer>(
    gids: &heapless::Vec<Gid, ACM_MAD_MAX_GIDS>,
    s: S,
) -> core::result::Result<S::Ok, S::Error> {
    s.collect_seq(gids.iter())
}

impl ResolveRecRepr {
    /// The GIDs that count: the first `min(gid_cnt, gids.len())` of `gids`. This is what
    /// emit writes and what a receiver should choose a group from.
    #[must_use]
    pub fn valid_gids(&self) -> &[Gid] {
        let n = usize::from(self.gid_cnt).min(self.gids.len());
        &self.gids[..n]
    }

    /// Whether the peer claimed more GIDs than fit in the MAD.
    #[must_use]
    pub fn gid_cnt_overflows(&self) -> bool {
        usize::from(self.gid_cnt) > ACM_MAD_MAX_GIDS
    }

    fn from_packet<T: AsRef<[u8]>>(p: &AcmMadPacket<T>) -> Self {
        let n = usize::from(p.gid_cnt()).min(ACM_MAD_MAX_GIDS);
        Self {
            dest_type: p.dest_type(),
            dest_length: p.dest_length(),
            src_type: p.src_type(),
            src_length: p.src_length(),
            gid_cnt: p.gid_cnt(),
            resp_resources: p.resp_resources(),
            init_depth: p.init_depth(),
            reserved: p.reserved(),
            dest: p.dest(),
            src: p.src(),
            gids: (0..n).filter_map(|i| p.gid(i)).collect(),
        }
    }

    fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut AcmMadPacket<T>) {
        p.set_dest_type(self.dest_type);
        p.set_dest_length(self.dest_length);
        p.set_src_type(self.src_type);
        p.set_src_length(self.src_length);
        p.set_gid_cnt(self.gid_cnt);
        p.set_resp_resources(self.resp_resources);
        p.set_init_depth(self.init_depth);
        p.set_reserved(self.reserved);
        p.set_dest(&self.dest);
        p.set_src(&self.src);
        p.bm()[field::GIDS].fill(0);
        for (i, g) in self.valid_gids().iter().enumerate() {
            p.set_gid(i, *g);
        }
    }
}

/// An ACM MAD as typed values. Everything but the unused GID area is kept bit for bit
/// (see [`ResolveRecRepr`] for what is normalised).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AcmMadRepr {
    /// Base version (1).
    pub base_version: u8,
    /// Management class (0x2C).
    pub mgmt_class: MgmtClass,
    /// Class version (1).
    pub class_version: u8,
    /// Method.
    pub method: Method,
    /// The whole status word; a receiver reads only the upper byte.
    pub status: u16,
    /// Control word.
    pub control: AcmControl,
    /// Transaction id.
    pub tid: u64,
    /// The resolve record.
    pub rec: ResolveRecRepr,
}

impl AcmMadRepr {
    /// A resolve request (docs/protocol/acm-mad.md §4, docs/test-vectors.md §15): method
    /// GET, control RESOLVE, both lengths 64, `gid_cnt` the number of `gids` (the
    /// endpoint's MGIDs, lowest priority first). Only the first six GIDs fit; any more
    /// are left out.
    #[must_use]
    pub fn resolve_request(
        tid: u64,
        dest_type: AddrType,
        dest: Bytes64,
        src_type: AddrType,
        src: Bytes64,
        gids: &[Gid],
    ) -> Self {
        let gids: heapless::Vec<Gid, ACM_MAD_MAX_GIDS> =
            gids.iter().take(ACM_MAD_MAX_GIDS).copied().collect();
        Self {
            method: Method::GET,
            rec: ResolveRecRepr {
                dest_type,
                dest_length: BYTES64_LEN as u8,
                src_type,
                src_length: BYTES64_LEN as u8,
                gid_cnt: gids.len() as u8,
                dest,
                src,
                gids,
                ..ResolveRecRepr::default()
            },
            ..Self::header_only(tid)
        }
    }

    /// A resolve response (docs/protocol/acm-mad.md §5, "finish";
    /// docs/test-vectors.md §15): method GET_RESP, the request's `tid`, `gid_cnt` 1,
    /// `gid[0]` the chosen group's MGID, all else zero.
    #[must_use]
    pub fn resolve_response(tid: u64, mgid: Gid) -> Self {
        let mut gids = heapless::Vec::new();
        // Capacity is 6, so one push always fits.
        let _ = gids.push(mgid);
        Self {
            method: Method::GET_RESP,
            rec: ResolveRecRepr {
                gid_cnt: 1,
                gids,
                ..ResolveRecRepr::default()
            },
            ..Self::header_only(tid)
        }
    }

    fn header_only(tid: u64) -> Self {
        Self {
            base_version: 1,
            mgmt_class: MgmtClass::ACM,
            class_version: ACM_CLASS_VERSION,
            method: Method::GET,
            status: 0,
            control: AcmControl::RESOLVE,
            tid,
            rec: ResolveRecRepr::default(),
        }
    }

    /// The ACM status: the upper byte of the status word, the only part ibacmp reads.
    #[must_use]
    pub const fn acm_status(&self) -> u8 {
        (self.status >> 8) as u8
    }

    /// Whether the method's response bit is set.
    #[must_use]
    pub const fn is_response(&self) -> bool {
        self.method.is_response()
    }

    /// Parses the first 256 bytes of `buf` (anything after them is ignored).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = AcmMadPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads a MAD from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &AcmMadPacket<T>) -> Self {
        Self {
            base_version: p.base_version(),
            mgmt_class: p.mgmt_class(),
            class_version: p.class_version(),
            method: p.method(),
            status: p.status(),
            control: p.control(),
            tid: p.tid(),
            rec: ResolveRecRepr::from_packet(p),
        }
    }

    /// Writes the whole 256-byte MAD into the start of `buf`, zero-filling the GID area
    /// past the first `min(gid_cnt, gids.len())` GIDs.
    ///
    /// # Panics
    /// If `buf` is shorter than 256 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = AcmMadPacket::new_unchecked(&mut buf[..ACM_MAD_LEN]);
        p.set_base_version(self.base_version);
        p.set_mgmt_class(self.mgmt_class);
        p.set_class_version(self.class_version);
        p.set_method(self.method);
        p.set_status(self.status);
        p.set_control(self.control);
        p.set_tid(self.tid);
        self.rec.emit(&mut p);
    }

    emit_to_array!("MAD", ACM_MAD_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mgid::AcmMgid;
    use crate::testutil::{Garbage, bytes};
    use crate::{Mtu, Rate, Reason};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    fn mgid0() -> Gid {
        AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid()
    }

    /// docs/test-vectors.md §15, the request: IPv4 10.0.0.1 → 10.0.0.2, TID 5, one group.
    fn spec_request() -> [u8; ACM_MAD_LEN] {
        let mut b = [0u8; ACM_MAD_LEN];
        b[0..8].copy_from_slice(&[0x01, 0x2C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01]);
        b[8..16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
        b[16..24].copy_from_slice(&[0x02, 0x40, 0x02, 0x40, 0x01, 0x00, 0x00, 0x00]);
        b[24..28].copy_from_slice(&[0x0A, 0, 0, 0x02]);
        b[88..92].copy_from_slice(&[0x0A, 0, 0, 0x01]);
        b[152..168].copy_from_slice(&[
            0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0x00, 0x03, 0x04, 0, 0, 0, 0, 0, 0, 0,
        ]);
        b
    }

    /// docs/test-vectors.md §15, the peer's reply.
    fn spec_reply() -> [u8; ACM_MAD_LEN] {
        let mut b = [0u8; ACM_MAD_LEN];
        b[0..8].copy_from_slice(&[0x01, 0x2C, 0x01, 0x81, 0x00, 0x00, 0x00, 0x01]);
        b[8..16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
        b[20] = 0x01;
        b[152..168].copy_from_slice(&mgid0().0);
        b
    }

    /// Arbitrary MADs whose `gids` agree with `gid_cnt`, so parse(emit(x)) == x.
    impl Arbitrary for AcmMadRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<ACM_MAD_LEN>(g)).unwrap()
        }
    }

    /// An arbitrary, possibly inconsistent record (gids and gid_cnt chosen independently).
    #[derive(Debug, Clone)]
    struct Wild(AcmMadRepr);

    impl Arbitrary for Wild {
        fn arbitrary(g: &mut Gen) -> Self {
            let mut r = AcmMadRepr::arbitrary(g);
            r.rec.gid_cnt = u8::arbitrary(g);
            r.rec.gids.clear();
            for _ in 0..usize::arbitrary(g) % (ACM_MAD_MAX_GIDS + 1) {
                let _ = r.rec.gids.push(Gid::arbitrary(g));
            }
            Self(r)
        }
    }

    #[test]
    fn deconstruct_spec_request() {
        let b = spec_request();
        let p = AcmMadPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), MgmtClass::ACM);
        assert_eq!(p.class_version(), ACM_CLASS_VERSION);
        assert_eq!(p.method(), Method::GET);
        assert_eq!((p.status(), p.acm_status()), (0, 0));
        assert_eq!(p.control(), AcmControl::RESOLVE);
        assert_eq!(p.tid(), 5);
        assert_eq!(p.dest_type(), AddrType::IP);
        assert_eq!(p.dest_length(), 64);
        assert_eq!(p.src_type(), AddrType::IP);
        assert_eq!(p.src_length(), 64);
        assert_eq!(p.gid_cnt(), 1);
        assert_eq!(
            (p.resp_resources(), p.init_depth(), p.reserved()),
            (0, 0, 0)
        );
        assert_eq!(p.dest(), Bytes64::zero_padded(&[10, 0, 0, 2]));
        assert_eq!(p.src(), Bytes64::zero_padded(&[10, 0, 0, 1]));
        assert_eq!(p.gid(0), Some("ff15:4001:ffff:3:400::".parse().unwrap()));
        assert_eq!(p.gid(5), Some(Gid::ZERO));
        assert_eq!(p.gid(6), None);
        assert_eq!(p.gid_tail(), [0; 8]);
    }

    #[test]
    fn construct_with_setters() {
        let mut b = [0u8; ACM_MAD_LEN];
        let mut p = AcmMadPacket::new_unchecked(&mut b[..]);
        p.set_base_version(1);
        p.set_mgmt_class(MgmtClass::ACM);
        p.set_class_version(1);
        p.set_method(Method::GET);
        p.set_status(0);
        p.set_control(AcmControl::RESOLVE);
        p.set_tid(5);
        p.set_dest_type(AddrType::IP);
        p.set_dest_length(64);
        p.set_src_type(AddrType::IP);
        p.set_src_length(64);
        p.set_gid_cnt(1);
        p.set_resp_resources(0);
        p.set_init_depth(0);
        p.set_reserved(0);
        p.set_dest(&Bytes64::zero_padded(&[10, 0, 0, 2]));
        p.set_src(&Bytes64::zero_padded(&[10, 0, 0, 1]));
        p.set_gid(0, mgid0());
        assert_eq!(b, spec_request());
        let mut p = AcmMadPacket::new_unchecked(&mut b[..]);
        p.set_gid(5, Gid([0xEE; 16]));
        p.set_gid_tail([0xDD; 8]);
        assert_eq!(&b[232..248], &[0xEE; 16]);
        assert_eq!(&b[248..], &[0xDD; 8]);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn set_gid_past_the_mad_panics() {
        let mut b = [0u8; ACM_MAD_LEN];
        AcmMadPacket::new_unchecked(&mut b[..]).set_gid(6, Gid::ZERO);
    }

    /// docs/test-vectors.md §15, both directions, byte for byte.
    #[test]
    fn spec_item_15_request_and_reply() {
        let req = AcmMadRepr::resolve_request(
            5,
            AddrType::IP,
            Bytes64::zero_padded(&[10, 0, 0, 2]),
            AddrType::IP,
            Bytes64::zero_padded(&[10, 0, 0, 1]),
            &[mgid0()],
        );
        assert_eq!(req.to_bytes(), spec_request());
        assert_eq!(AcmMadRepr::parse(&spec_request()), Ok(req.clone()));
        assert!(!req.is_response());

        let resp = AcmMadRepr::resolve_response(5, mgid0());
        assert_eq!(resp.to_bytes(), spec_reply());
        let parsed = AcmMadRepr::parse(&spec_reply()).unwrap();
        assert_eq!(parsed, resp);
        assert!(parsed.is_response());
        assert_eq!(parsed.rec.valid_gids(), &[mgid0()]);
    }

    #[test]
    fn parse_reads_min_gid_cnt_six_and_normalises() {
        let mut b = spec_request();
        b[20] = 255; // a peer claiming 255 GIDs
        for i in 0..6 {
            b[152 + 16 * i] = 0xF0 + i as u8;
        }
        b[250] = 0x77; // inside the half-slot after gid[5]
        let r = AcmMadRepr::parse(&b).unwrap();
        assert_eq!(r.rec.gid_cnt, 255);
        assert!(r.rec.gid_cnt_overflows());
        assert_eq!(r.rec.gids.len(), 6);
        assert_eq!(r.rec.gids[5].0[0], 0xF5);
        let out = r.to_bytes();
        assert_eq!(out[20], 255);
        assert_eq!(&out[..248], &b[..248]);
        assert_eq!(out[250], 0, "the tail is zero-filled");

        // gid_cnt 1 with junk in slot 2: the junk is not kept.
        let mut b = spec_request();
        b[152 + 32] = 0x99;
        let r = AcmMadRepr::parse(&b).unwrap();
        assert_eq!(r.rec.gids.len(), 1);
        assert_eq!(r.to_bytes(), spec_request());

        // gid_cnt 0: no GIDs at all.
        let mut b = spec_request();
        b[20] = 0;
        let r = AcmMadRepr::parse(&b).unwrap();
        assert!(r.rec.gids.is_empty());
        assert!(r.to_bytes()[152..].iter().all(|&x| x == 0));
    }

    #[test]
    fn parse_ignores_bytes_past_256() {
        let mut b = [0xABu8; 296];
        b[..ACM_MAD_LEN].copy_from_slice(&spec_request());
        assert_eq!(AcmMadRepr::parse(&b), AcmMadRepr::parse(&spec_request()));
    }

    #[test]
    fn truncated_names_first_missing_field() {
        let b = spec_request();
        let e = AcmMadRepr::parse(&b[..100]).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("ACM MAD", "src", 88));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: ACM_MAD_LEN,
                available: 100
            }
        );
        let e = AcmMadRepr::parse(&b[..255]).unwrap_err();
        assert_eq!((e.field, e.offset), ("gid", 152));
        let e = AcmMadRepr::parse(&b[..7]).unwrap_err();
        assert_eq!((e.field, e.offset), ("control", 6));
        let e = AcmMadRepr::parse(&b[..20]).unwrap_err();
        assert_eq!((e.field, e.offset), ("gid_cnt", 20));
    }

    #[test]
    fn constructors_and_code_points() {
        let many: Vec<Gid> = (0..8u8).map(|i| Gid([i; 16])).collect();
        let r = AcmMadRepr::resolve_request(
            1,
            AddrType::NAME,
            Bytes64::c_string("node2"),
            AddrType::NAME,
            Bytes64::c_string("node1"),
            &many,
        );
        assert_eq!(r.rec.gid_cnt, 6);
        assert_eq!(r.rec.gids.as_slice(), &many[..6]);
        assert_eq!(r.acm_status(), 0);
        let mut s = r.clone();
        s.status = 0x0700;
        assert_eq!(s.acm_status(), 7);
        assert_eq!(
            AcmMadPacket::new_checked(&s.to_bytes()[..])
                .unwrap()
                .acm_status(),
            7
        );
        assert!(AddrType::LID.is_address());
        assert!(!AddrType::INVALID.is_address());
        assert!(!AddrType(6).is_address());
        assert_eq!(AcmControl::ACK.0, 0x8000);
        assert_eq!((ACM_QKEY, MULTICAST_QPN), (0x8001_0000, 0xFF_FFFF));
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: AcmMadRepr) -> bool {
            AcmMadRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_emit_parse_emit_is_stable(w: Wild) -> bool {
            let once = w.0.to_bytes();
            AcmMadRepr::parse(&once).map(|r| r.to_bytes()) == Ok(once)
        }

        fn prop_bytes_roundtrip_up_to_normalisation(g: Garbage<ACM_MAD_LEN, 300>) -> bool {
            let b = g.0;
            match AcmMadRepr::parse(&b) {
                Ok(r) => {
                    let out = r.to_bytes();
                    let used = 152 + 16 * usize::from(b[20]).min(ACM_MAD_MAX_GIDS);
                    out[..used] == b[..used] && out[used..].iter().all(|&x| x == 0)
                }
                Err(_) => b.len() < ACM_MAD_LEN,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<ACM_MAD_LEN, 300>) -> bool {
            AcmMadRepr::parse(&b.0).is_ok() == (b.0.len() >= ACM_MAD_LEN)
        }
    }
}
