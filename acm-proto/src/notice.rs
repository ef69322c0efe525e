//! The SA's event subscription formats: InformInfo (attribute 0x0003, 36 bytes), with
//! which a port asks the SA to report a trap, and Notice (attribute 0x0002, 80 bytes),
//! the trap the SA then reports.
//!
//! ibacm (the reference) never subscribes; ours does, so that its caches follow the
//! fabric: traps 64/65 (a GID came into or went out of service) and 66/67 (a multicast
//! group was created or deleted) carry the GID concerned in the Notice's data details.
//! See docs/protocol/sa.md §9; IBTA Vol 1 §13.4.8.2 (Notice), IBTA Vol 1 §13.4.8.3
//! (InformInfo), IBTA Vol 1 §14.2.5.1 (the SM's traps 64–67).

use crate::Gid;
use crate::error::{Layout, Result};
use byteorder::{BigEndian, ByteOrder};

/// Length of an InformInfo.
pub const INFORM_INFO_LEN: usize = 36;

/// Length of a Notice.
pub const NOTICE_LEN: usize = 80;

/// Length of a Notice's data details.
pub const DATA_DETAILS_LEN: usize = 54;

/// What [`InformInfoRepr::subscribe`] puts in the QPN field: reports go to the port's
/// GSI queue pair, where the umad agent that subscribed receives them.
pub const REPORT_QPN: u32 = 1;

/// The response-time value of our subscriptions (4.096 µs × 2^18, about 1 s): how long
/// the SA should allow for our ReportResp before it repeats a Report.
pub const REPORT_RESP_TIME: u8 = 18;

mod inform {
    use core::ops::Range;
    pub(super) const GID: Range<usize> = 0..16;
    pub(super) const LID_BEGIN: Range<usize> = 16..18;
    pub(super) const LID_END: Range<usize> = 18..20;
    pub(super) const RESERVED: Range<usize> = 20..22;
    pub(super) const IS_GENERIC: usize = 22;
    pub(super) const SUBSCRIBE: usize = 23;
    pub(super) const TYPE: Range<usize> = 24..26;
    pub(super) const TRAP_NUMBER: Range<usize> = 26..28;
    /// Bits 31:8 QPN, 7:5 reserved, 4:0 response-time value.
    pub(super) const QPN_RESP_TIME: Range<usize> = 28..32;
    pub(super) const RESERVED2: usize = 32;
    pub(super) const PRODUCER: Range<usize> = 33..36;
}

const INFORM_LAYOUT: &Layout = &[
    ("gid", inform::GID),
    ("lid_range_begin", inform::LID_BEGIN),
    ("lid_range_end", inform::LID_END),
    ("reserved", inform::RESERVED),
    ("is_generic", 22..23),
    ("subscribe", 23..24),
    ("type", inform::TYPE),
    ("trap_number", inform::TRAP_NUMBER),
    ("qpn_resp_time", inform::QPN_RESP_TIME),
    ("reserved", 32..33),
    ("producer_type", inform::PRODUCER),
];

mod nfield {
    use core::ops::Range;
    /// Bit 7 IsGeneric, 6:0 type.
    pub(super) const GENERIC_TYPE: usize = 0;
    pub(super) const PRODUCER: Range<usize> = 1..4;
    pub(super) const TRAP_NUMBER: Range<usize> = 4..6;
    pub(super) const ISSUER_LID: Range<usize> = 6..8;
    /// Bit 15 NoticeToggle, 14:0 NoticeCount.
    pub(super) const TOGGLE_COUNT: Range<usize> = 8..10;
    pub(super) const DATA_DETAILS: Range<usize> = 10..64;
    pub(super) const ISSUER_GID: Range<usize> = 64..80;
    /// Traps 64–67: six reserved bytes, then the GID (IBTA Vol 1 §14.2.5.1).
    pub(super) const TRAP_GID_IN_DETAILS: Range<usize> = 6..22;
}

const NOTICE_LAYOUT: &Layout = &[
    ("generic_type", 0..1),
    ("producer_type", nfield::PRODUCER),
    ("trap_number", nfield::TRAP_NUMBER),
    ("issuer_lid", nfield::ISSUER_LID),
    ("toggle_count", nfield::TOGGLE_COUNT),
    ("data_details", nfield::DATA_DETAILS),
    ("issuer_gid", nfield::ISSUER_GID),
];

open_enum! {
    /// A generic trap number (Notice TrapNumber, InformInfo TrapNumber when IsGeneric).
    pub struct TrapNumber(u16) {
        /// Trap 64: a GID is now in service (a port joined the fabric).
        GID_IN_SERVICE = 64,
        /// Trap 65: a GID is out of service (a port left the fabric).
        GID_OUT_OF_SERVICE = 65,
        /// Trap 66: a multicast group was created.
        MCAST_GROUP_CREATED = 66,
        /// Trap 67: a multicast group was deleted.
        MCAST_GROUP_DELETED = 67,
    }
}

impl TrapNumber {
    /// The traps ibacm-rs subscribes to, in the order it subscribes.
    pub const SM_EVENTS: [Self; 4] = [
        Self::GID_IN_SERVICE,
        Self::GID_OUT_OF_SERVICE,
        Self::MCAST_GROUP_CREATED,
        Self::MCAST_GROUP_DELETED,
    ];
}

open_enum! {
    /// A Notice's type (7 bits in a Notice, 16 in an InformInfo where 0xFFFF is "all").
    pub struct NoticeType(u16) {
        /// Fatal.
        FATAL = 0,
        /// Urgent.
        URGENT = 1,
        /// Security.
        SECURITY = 2,
        /// Subnet management.
        SUBNET_MANAGEMENT = 3,
        /// Informational (traps 64–67).
        INFO = 4,
        /// Every type (InformInfo only).
        ALL = 0xFFFF,
    }
}

open_enum! {
    /// The producer of a generic notice (24 bits; 0xFFFFFF in an InformInfo is "all").
    pub struct ProducerType(u32) {
        /// A channel adapter.
        CA = 1,
        /// A switch.
        SWITCH = 2,
        /// A router.
        ROUTER = 3,
        /// A class manager (the SM, for traps 64–67).
        CLASS_MANAGER = 4,
        /// Every producer (InformInfo only).
        ALL = 0xFF_FFFF,
    }
}

/// A zero-copy view of an InformInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InformInfoPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> InformInfoPacket<T> {
    view_constructors!("InformInfo", INFORM_LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn qpn_word(&self) -> u32 {
        BigEndian::read_u32(&self.b()[inform::QPN_RESP_TIME])
    }
    /// QPN (24 bits).
    pub fn qpn(&self) -> u32 {
        self.qpn_word() >> 8
    }
    /// The 3 reserved bits between the QPN and the response time.
    pub fn qpn_reserved(&self) -> u8 {
        ((self.qpn_word() >> 5) & 0x7) as u8
    }
    /// RespTimeValue (5 bits).
    pub fn resp_time_value(&self) -> u8 {
        (self.qpn_word() & 0x1F) as u8
    }
    /// ProducerType (VendorID when not generic), 24 bits.
    pub fn producer_type(&self) -> ProducerType {
        ProducerType(BigEndian::read_u24(&self.b()[inform::PRODUCER]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> InformInfoPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the QPN (masked to 24 bits), its 3 reserved bits and RespTimeValue (masked
    /// to 5 bits) in one word.
    pub fn set_qpn_resp_time(&mut self, qpn: u32, reserved: u8, resp_time: u8) {
        let w = ((qpn & 0xFF_FFFF) << 8)
            | (u32::from(reserved & 0x7) << 5)
            | u32::from(resp_time & 0x1F);
        BigEndian::write_u32(&mut self.bm()[inform::QPN_RESP_TIME], w);
    }
    /// Sets ProducerType (masked to 24 bits).
    pub fn set_producer_type(&mut self, v: ProducerType) {
        BigEndian::write_u24(&mut self.bm()[inform::PRODUCER], v.0 & 0xFF_FFFF);
    }
}

view_fields! {
    impl InformInfoPacket, BigEndian {
        /// The GID the subscription is about (0: any, the LID range applies).
        gid, set_gid: Gid = inform::GID;
        /// LIDRangeBegin (0xFFFF: every LID).
        lid_range_begin, set_lid_range_begin: u16 = inform::LID_BEGIN;
        /// LIDRangeEnd.
        lid_range_end, set_lid_range_end: u16 = inform::LID_END;
        /// The reserved word after the LID range.
        reserved, set_reserved: u16 = inform::RESERVED;
        /// IsGeneric (the whole byte; 1 for generic traps).
        is_generic, set_is_generic: u8 = inform::IS_GENERIC;
        /// Subscribe (the whole byte): 1 subscribes, 0 unsubscribes.
        subscribe, set_subscribe: u8 = inform::SUBSCRIBE;
        /// Type.
        notice_type, set_notice_type: NoticeType = inform::TYPE;
        /// TrapNumber (DeviceID when not generic).
        trap_number, set_trap_number: TrapNumber = inform::TRAP_NUMBER;
        /// The reserved byte before the producer type.
        reserved2, set_reserved2: u8 = inform::RESERVED2;
    }
}

/// An InformInfo as typed values. Every bit is kept, so parse then emit reproduces the
/// input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InformInfoRepr {
    /// The GID concerned (0: any).
    pub gid: Gid,
    /// LIDRangeBegin (0xFFFF: every LID).
    pub lid_range_begin: u16,
    /// LIDRangeEnd.
    pub lid_range_end: u16,
    /// Reserved word (kept for exact round trips).
    pub reserved: u16,
    /// IsGeneric.
    pub is_generic: u8,
    /// Subscribe (1) or unsubscribe (0).
    pub subscribe: u8,
    /// The notice type.
    pub notice_type: NoticeType,
    /// TrapNumber (or DeviceID).
    pub trap_number: TrapNumber,
    /// QPN reports go to, 24 bits.
    pub qpn: u32,
    /// The 3 reserved bits after the QPN (kept for exact round trips).
    pub qpn_reserved: u8,
    /// RespTimeValue, 5 bits.
    pub resp_time_value: u8,
    /// The reserved byte before the producer (kept for exact round trips).
    pub reserved2: u8,
    /// ProducerType (or VendorID), 24 bits.
    pub producer_type: ProducerType,
}

impl InformInfoRepr {
    /// Our subscription to one generic trap (docs/protocol/sa.md §9): any GID, every
    /// LID (range begin 0xFFFF), generic, every type and every producer, reports to
    /// QP1 ([`REPORT_QPN`]) with [`REPORT_RESP_TIME`].
    #[must_use]
    pub fn subscribe(trap: TrapNumber) -> Self {
        Self {
            lid_range_begin: 0xFFFF,
            is_generic: 1,
            subscribe: 1,
            notice_type: NoticeType::ALL,
            trap_number: trap,
            qpn: REPORT_QPN,
            resp_time_value: REPORT_RESP_TIME,
            producer_type: ProducerType::ALL,
            ..Self::default()
        }
    }

    /// Parses the first 36 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = InformInfoPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads the record from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &InformInfoPacket<T>) -> Self {
        Self {
            gid: p.gid(),
            lid_range_begin: p.lid_range_begin(),
            lid_range_end: p.lid_range_end(),
            reserved: p.reserved(),
            is_generic: p.is_generic(),
            subscribe: p.subscribe(),
            notice_type: p.notice_type(),
            trap_number: p.trap_number(),
            qpn: p.qpn(),
            qpn_reserved: p.qpn_reserved(),
            resp_time_value: p.resp_time_value(),
            reserved2: p.reserved2(),
            producer_type: p.producer_type(),
        }
    }

    /// Writes the record into the first 36 bytes of `buf`; bit fields are masked to
    /// their widths.
    ///
    /// # Panics
    /// If `buf` is shorter than 36 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = InformInfoPacket::new_unchecked(&mut buf[..INFORM_INFO_LEN]);
        p.set_gid(self.gid);
        p.set_lid_range_begin(self.lid_range_begin);
        p.set_lid_range_end(self.lid_range_end);
        p.set_reserved(self.reserved);
        p.set_is_generic(self.is_generic);
        p.set_subscribe(self.subscribe);
        p.set_notice_type(self.notice_type);
        p.set_trap_number(self.trap_number);
        p.set_qpn_resp_time(self.qpn, self.qpn_reserved, self.resp_time_value);
        p.set_reserved2(self.reserved2);
        p.set_producer_type(self.producer_type);
    }

    emit_to_array!("record", INFORM_INFO_LEN);
}

/// A zero-copy view of a Notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoticePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NoticePacket<T> {
    view_constructors!("Notice", NOTICE_LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// IsGeneric (bit 7 of byte 0).
    pub fn is_generic(&self) -> bool {
        self.b()[nfield::GENERIC_TYPE] & 0x80 != 0
    }
    /// Type (bits 6:0 of byte 0).
    pub fn notice_type(&self) -> NoticeType {
        NoticeType(u16::from(self.b()[nfield::GENERIC_TYPE] & 0x7F))
    }
    /// ProducerType (VendorID when not generic), 24 bits.
    pub fn producer_type(&self) -> ProducerType {
        ProducerType(BigEndian::read_u24(&self.b()[nfield::PRODUCER]))
    }
    /// NoticeToggle (bit 15 of bytes 8–9).
    pub fn toggle(&self) -> bool {
        self.b()[nfield::TOGGLE_COUNT.start] & 0x80 != 0
    }
    /// NoticeCount (bits 14:0 of bytes 8–9).
    pub fn count(&self) -> u16 {
        BigEndian::read_u16(&self.b()[nfield::TOGGLE_COUNT]) & 0x7FFF
    }
    /// The 54 bytes of data details.
    pub fn data_details(&self) -> [u8; DATA_DETAILS_LEN] {
        let mut d = [0; DATA_DETAILS_LEN];
        d.copy_from_slice(&self.b()[nfield::DATA_DETAILS]);
        d
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NoticePacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets IsGeneric and the type (masked to 7 bits).
    pub fn set_generic_type(&mut self, generic: bool, ty: NoticeType) {
        self.bm()[nfield::GENERIC_TYPE] = if generic { 0x80 } else { 0 } | (ty.0 as u8 & 0x7F);
    }
    /// Sets ProducerType (masked to 24 bits).
    pub fn set_producer_type(&mut self, v: ProducerType) {
        BigEndian::write_u24(&mut self.bm()[nfield::PRODUCER], v.0 & 0xFF_FFFF);
    }
    /// Sets NoticeToggle and NoticeCount (masked to 15 bits).
    pub fn set_toggle_count(&mut self, toggle: bool, count: u16) {
        let w = if toggle { 0x8000 } else { 0 } | (count & 0x7FFF);
        BigEndian::write_u16(&mut self.bm()[nfield::TOGGLE_COUNT], w);
    }
    /// Sets the data details.
    pub fn set_data_details(&mut self, v: &[u8; DATA_DETAILS_LEN]) {
        self.bm()[nfield::DATA_DETAILS].copy_from_slice(v);
    }
}

view_fields! {
    impl NoticePacket, BigEndian {
        /// TrapNumber (DeviceID when not generic).
        trap_number, set_trap_number: TrapNumber = nfield::TRAP_NUMBER;
        /// IssuerLID.
        issuer_lid, set_issuer_lid: u16 = nfield::ISSUER_LID;
        /// IssuerGID.
        issuer_gid, set_issuer_gid: Gid = nfield::ISSUER_GID;
    }
}

/// A Notice as typed values. Every bit is kept (the data details as raw bytes), so
/// parse then emit reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NoticeRepr {
    /// IsGeneric.
    pub is_generic: bool,
    /// Type, 7 bits.
    pub notice_type: NoticeType,
    /// ProducerType (or VendorID), 24 bits.
    pub producer_type: ProducerType,
    /// TrapNumber (or DeviceID).
    pub trap_number: TrapNumber,
    /// IssuerLID.
    pub issuer_lid: u16,
    /// NoticeToggle.
    pub toggle: bool,
    /// NoticeCount, 15 bits.
    pub count: u16,
    /// The data details, whose layout depends on the trap.
    #[cfg_attr(feature = "serde", serde(with = "serde_details"))]
    pub data_details: [u8; DATA_DETAILS_LEN],
    /// IssuerGID.
    pub issuer_gid: Gid,
}

#[cfg(feature = "serde")]
mod serde_details {
    pub(super) fn serialize<S: serde::Serializer>(v: &[u8; 54], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
}

impl Default for NoticeRepr {
    fn default() -> Self {
        Self {
            is_generic: false,
            notice_type: NoticeType::FATAL,
            producer_type: ProducerType::default(),
            trap_number: TrapNumber::default(),
            issuer_lid: 0,
            toggle: false,
            count: 0,
            data_details: [0; DATA_DETAILS_LEN],
            issuer_gid: Gid::default(),
        }
    }
}

/// What a generic SM trap says happened, for the traps ibacm-rs subscribes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SmTrap {
    /// Trap 64: this port GID is now in service.
    GidInService(Gid),
    /// Trap 65: this port GID is out of service.
    GidOutOfService(Gid),
    /// Trap 66: the multicast group with this MGID was created.
    McastGroupCreated(Gid),
    /// Trap 67: the multicast group with this MGID was deleted.
    McastGroupDeleted(Gid),
}

impl SmTrap {
    /// The trap's number.
    #[must_use]
    pub const fn number(&self) -> TrapNumber {
        match self {
            Self::GidInService(_) => TrapNumber::GID_IN_SERVICE,
            Self::GidOutOfService(_) => TrapNumber::GID_OUT_OF_SERVICE,
            Self::McastGroupCreated(_) => TrapNumber::MCAST_GROUP_CREATED,
            Self::McastGroupDeleted(_) => TrapNumber::MCAST_GROUP_DELETED,
        }
    }

    /// The GID (or MGID) the trap is about.
    #[must_use]
    pub const fn gid(&self) -> Gid {
        match self {
            Self::GidInService(g)
            | Self::GidOutOfService(g)
            | Self::McastGroupCreated(g)
            | Self::McastGroupDeleted(g) => *g,
        }
    }
}

impl NoticeRepr {
    /// The Notice an SM sends for `trap` (IBTA Vol 1 §14.2.5.1): generic, informational,
    /// from a class manager, issued by `issuer_lid`/`issuer_gid`, the GID at data
    /// offset 6.
    #[must_use]
    pub fn sm_trap(trap: SmTrap, issuer_lid: u16, issuer_gid: Gid) -> Self {
        let mut data_details = [0; DATA_DETAILS_LEN];
        data_details[nfield::TRAP_GID_IN_DETAILS].copy_from_slice(&trap.gid().0);
        Self {
            is_generic: true,
            notice_type: NoticeType::INFO,
            producer_type: ProducerType::CLASS_MANAGER,
            trap_number: trap.number(),
            issuer_lid,
            data_details,
            issuer_gid,
            ..Self::default()
        }
    }

    /// The SM event this Notice reports, if it is a generic trap 64–67. The producer
    /// and type are not checked: the trap number alone names the event.
    #[must_use]
    pub fn sm_event(&self) -> Option<SmTrap> {
        if !self.is_generic {
            return None;
        }
        let gid = Gid::read(&self.data_details[nfield::TRAP_GID_IN_DETAILS]).unwrap_or_default();
        match self.trap_number {
            TrapNumber::GID_IN_SERVICE => Some(SmTrap::GidInService(gid)),
            TrapNumber::GID_OUT_OF_SERVICE => Some(SmTrap::GidOutOfService(gid)),
            TrapNumber::MCAST_GROUP_CREATED => Some(SmTrap::McastGroupCreated(gid)),
            TrapNumber::MCAST_GROUP_DELETED => Some(SmTrap::McastGroupDeleted(gid)),
            _ => None,
        }
    }

    /// Parses the first 80 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = NoticePacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads the notice from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &NoticePacket<T>) -> Self {
        Self {
            is_generic: p.is_generic(),
            notice_type: p.notice_type(),
            producer_type: p.producer_type(),
            trap_number: p.trap_number(),
            issuer_lid: p.issuer_lid(),
            toggle: p.toggle(),
            count: p.count(),
            data_details: p.data_details(),
            issuer_gid: p.issuer_gid(),
        }
    }

    /// Writes the notice into the first 80 bytes of `buf`; the type, producer and count
    /// are masked to their widths.
    ///
    /// # Panics
    /// If `buf` is shorter than 80 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = NoticePacket::new_unchecked(&mut buf[..NOTICE_LEN]);
        p.set_generic_type(self.is_generic, self.notice_type);
        p.set_producer_type(self.producer_type);
        p.set_trap_number(self.trap_number);
        p.set_issuer_lid(self.issuer_lid);
        p.set_toggle_count(self.toggle, self.count);
        p.set_data_details(&self.data_details);
        p.set_issuer_gid(self.issuer_gid);
    }

    emit_to_array!("notice", NOTICE_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;
    use crate::mad::{AttrId, MAD_LEN, Method, MgmtClass};
    use crate::sa::{SaHeaderRepr, SaPacket};
    use crate::testutil::{Garbage, bytes};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    const PORT_GID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b002);
    const SM_GID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b0ff);

    impl Arbitrary for InformInfoRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<36>(g)).unwrap()
        }
    }

    impl Arbitrary for NoticeRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<80>(g)).unwrap()
        }
    }

    #[test]
    fn subscription_layout() {
        let b = InformInfoRepr::subscribe(TrapNumber::GID_OUT_OF_SERVICE).to_bytes();
        assert!(b[..16].iter().all(|&x| x == 0), "any GID");
        assert_eq!(&b[16..20], &[0xFF, 0xFF, 0, 0], "every LID");
        assert_eq!(&b[20..24], &[0, 0, 1, 1], "generic, subscribe");
        assert_eq!(&b[24..28], &[0xFF, 0xFF, 0x00, 0x41], "every type, trap 65");
        assert_eq!(&b[28..32], &[0, 0, 1, 18], "QP1, resp time 18");
        assert_eq!(&b[32..36], &[0, 0xFF, 0xFF, 0xFF], "every producer");
    }

    #[test]
    fn inform_info_deconstruct_and_masking() {
        let mut b = [0u8; 36];
        b[..16].copy_from_slice(&PORT_GID.0);
        b[16..36].copy_from_slice(&[
            0, 5, 0, 9, 0xAB, 0xCD, 1, 0, 0, 4, 0, 0x43, 0x12, 0x34, 0x56, 0xFF, 0x77, 0, 0, 4,
        ]);
        let p = InformInfoPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.gid(), PORT_GID);
        assert_eq!((p.lid_range_begin(), p.lid_range_end()), (5, 9));
        assert_eq!(p.reserved(), 0xABCD);
        assert_eq!((p.is_generic(), p.subscribe()), (1, 0));
        assert_eq!(p.notice_type(), NoticeType::INFO);
        assert_eq!(p.trap_number(), TrapNumber::MCAST_GROUP_DELETED);
        assert_eq!(p.qpn(), 0x12_3456);
        assert_eq!(p.qpn_reserved(), 7);
        assert_eq!(p.resp_time_value(), 0x1F);
        assert_eq!(p.reserved2(), 0x77);
        assert_eq!(p.producer_type(), ProducerType::CLASS_MANAGER);
        let r = InformInfoRepr::parse(&b).unwrap();
        assert_eq!(r.to_bytes(), b);
        assert_eq!(r.buffer_len(), INFORM_INFO_LEN);
        let wild = InformInfoRepr {
            qpn: 0xFFFF_FFFF,
            qpn_reserved: 0xFF,
            resp_time_value: 0xFF,
            producer_type: ProducerType(u32::MAX),
            ..r
        };
        assert_eq!(
            &wild.to_bytes()[28..36],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0x77, 0xFF, 0xFF, 0xFF]
        );
    }

    /// A Report(Notice) as an SM sends it for trap 65 on PORT_GID, in a whole SA MAD.
    fn report_mad() -> [u8; MAD_LEN] {
        let mut mad = [0u8; MAD_LEN];
        let mut hdr = SaHeaderRepr::default();
        hdr.mad.base_version = 1;
        hdr.mad.mgmt_class = MgmtClass::SA;
        hdr.mad.class_version = 2;
        hdr.mad.method = Method::REPORT;
        hdr.mad.tid = 0x55;
        hdr.mad.attr_id = AttrId::NOTICE;
        hdr.emit(&mut mad);
        let n = NoticeRepr::sm_trap(SmTrap::GidOutOfService(PORT_GID), 1, SM_GID);
        n.emit(SaPacket::new_unchecked(&mut mad[..]).data_mut());
        mad
    }

    #[test]
    fn trap_65_layout() {
        let mad = report_mad();
        assert_eq!(&mad[..4], &[1, 3, 2, 6]);
        assert_eq!(&mad[16..18], &[0, 2]);
        let d = &mad[56..];
        assert_eq!(&d[..10], &[0x84, 0, 0, 4, 0, 65, 0, 1, 0, 0]);
        assert!(d[10..16].iter().all(|&x| x == 0));
        assert_eq!(&d[16..32], &PORT_GID.0);
        assert!(d[32..64].iter().all(|&x| x == 0));
        assert_eq!(&d[64..80], &SM_GID.0);
        let p = SaPacket::new_checked(&mad[..]).unwrap();
        let n = NoticeRepr::parse(p.data()).unwrap();
        assert!(n.is_generic);
        assert_eq!(n.notice_type, NoticeType::INFO);
        assert_eq!(n.producer_type, ProducerType::CLASS_MANAGER);
        assert_eq!(n.issuer_gid, SM_GID);
        assert_eq!(n.sm_event(), Some(SmTrap::GidOutOfService(PORT_GID)));
    }

    #[test]
    fn sm_events_of_each_trap_and_others() {
        for t in [
            SmTrap::GidInService(PORT_GID),
            SmTrap::GidOutOfService(PORT_GID),
            SmTrap::McastGroupCreated(SM_GID),
            SmTrap::McastGroupDeleted(SM_GID),
        ] {
            let n = NoticeRepr::parse(&NoticeRepr::sm_trap(t, 7, SM_GID).to_bytes()).unwrap();
            assert_eq!(n.sm_event(), Some(t));
            assert_eq!(t.number(), n.trap_number);
        }
        let mut n = NoticeRepr::sm_trap(SmTrap::GidInService(PORT_GID), 1, SM_GID);
        n.trap_number = TrapNumber(128);
        assert_eq!(n.sm_event(), None, "link state change is not ours");
        n.trap_number = TrapNumber::GID_IN_SERVICE;
        n.is_generic = false;
        assert_eq!(n.sm_event(), None, "a vendor notice");
        assert_eq!(TrapNumber::SM_EVENTS.map(|t| t.0), [64, 65, 66, 67]);
    }

    #[test]
    fn notice_toggle_count_and_masking() {
        let n = NoticeRepr {
            toggle: true,
            count: 0xFFFF,
            notice_type: NoticeType(0xFF),
            producer_type: ProducerType(0xFF12_3456),
            ..NoticeRepr::default()
        };
        let b = n.to_bytes();
        assert_eq!(&b[..4], &[0x7F, 0x12, 0x34, 0x56]);
        assert_eq!(&b[8..10], &[0xFF, 0xFF]);
        let back = NoticeRepr::parse(&b).unwrap();
        assert!(back.toggle);
        assert_eq!(back.count, 0x7FFF);
    }

    #[test]
    fn truncated() {
        let e = NoticeRepr::parse(&[0u8; 70]).unwrap_err();
        assert_eq!((e.format, e.field, e.offset), ("Notice", "issuer_gid", 64));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 80,
                available: 70
            }
        );
        let e = InformInfoRepr::parse(&[0u8; 30]).unwrap_err();
        assert_eq!(
            (e.format, e.field, e.offset),
            ("InformInfo", "qpn_resp_time", 28)
        );
    }

    quickcheck! {
        fn prop_inform_roundtrip(r: InformInfoRepr) -> bool {
            InformInfoRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_notice_roundtrip(r: NoticeRepr) -> bool {
            NoticeRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_inform_bytes_exactly(b: Vec<u8>) -> bool {
            match InformInfoRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..36],
                Err(_) => b.len() < 36,
            }
        }

        fn prop_notice_bytes_exactly(b: Vec<u8>) -> bool {
            match NoticeRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..80],
                Err(_) => b.len() < 80,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<80, 120>) -> bool {
            NoticeRepr::parse(&b.0).is_ok() == (b.0.len() >= 80)
                && InformInfoRepr::parse(&b.0).is_ok() == (b.0.len() >= 36)
        }
    }
}
