//! The SA MCMemberRecord (attribute 0x0038): 56 bytes, big-endian.
//!
//! ibacmp joins its multicast groups by sending one in an SA SET and reads the group's
//! MLID, SL, flow label and so on back from the response. See docs/protocol/sa.md §5;
//! IBTA Vol 1 §15.2.5.17.

use crate::error::{Layout, Result};
use crate::{Gid, Mtu, Rate, Selected};
use byteorder::BigEndian;

/// Length of an MCMemberRecord.
pub const MCMEMBER_RECORD_LEN: usize = 56;

mod field {
    use core::ops::Range;
    pub(super) const MGID: Range<usize> = 0..16;
    pub(super) const PORT_GID: Range<usize> = 16..32;
    pub(super) const QKEY: Range<usize> = 32..36;
    pub(super) const MLID: Range<usize> = 36..38;
    pub(super) const MTU: usize = 38;
    pub(super) const TCLASS: usize = 39;
    pub(super) const PKEY: Range<usize> = 40..42;
    pub(super) const RATE: usize = 42;
    pub(super) const PACKET_LIFETIME: usize = 43;
    /// Bits 31:28 SL, 27:8 flow label, 7:0 hop limit.
    pub(super) const SL_FLOW_HOP: Range<usize> = 44..48;
    /// Bits 7:4 scope, 3:0 join state.
    pub(super) const SCOPE_JOIN_STATE: usize = 48;
    /// Bit 7 proxy join, 6:0 reserved.
    pub(super) const PROXY_JOIN: usize = 49;
    pub(super) const RESERVED: Range<usize> = 50..56;
}

const LAYOUT: &Layout = &[
    ("mgid", field::MGID),
    ("port_gid", field::PORT_GID),
    ("qkey", field::QKEY),
    ("mlid", field::MLID),
    ("mtu", 38..39),
    ("tclass", 39..40),
    ("pkey", field::PKEY),
    ("rate", 42..43),
    ("packet_lifetime", 43..44),
    ("sl_flow_hop", field::SL_FLOW_HOP),
    ("scope_join_state", 48..49),
    ("proxy_join", 49..50),
    ("reserved", field::RESERVED),
];

flag_set! {
    /// MCMemberRecord component-mask bits (IBTA Vol 1 Table 209 order).
    pub struct McCompMask(u64) {
        /// MGID.
        MGID = 1 << 0,
        /// PortGID.
        PORT_GID = 1 << 1,
        /// Q_Key.
        QKEY = 1 << 2,
        /// MLID.
        MLID = 1 << 3,
        /// MTU selector.
        MTU_SELECTOR = 1 << 4,
        /// MTU.
        MTU = 1 << 5,
        /// Traffic class.
        TCLASS = 1 << 6,
        /// P_Key.
        PKEY = 1 << 7,
        /// Rate selector.
        RATE_SELECTOR = 1 << 8,
        /// Rate.
        RATE = 1 << 9,
        /// Packet-lifetime selector.
        PACKET_LIFETIME_SELECTOR = 1 << 10,
        /// Packet lifetime.
        PACKET_LIFETIME = 1 << 11,
        /// SL.
        SL = 1 << 12,
        /// Flow label.
        FLOW_LABEL = 1 << 13,
        /// Hop limit.
        HOP_LIMIT = 1 << 14,
        /// Scope.
        SCOPE = 1 << 15,
        /// JoinState.
        JOIN_STATE = 1 << 16,
        /// ProxyJoin.
        PROXY_JOIN = 1 << 17,
    }
}

impl McCompMask {
    /// The mask of every ibacmp join (docs/protocol/sa.md §5): MGID, PortGID, QKey,
    /// MTUSelector, MTU, TClass, PKey, RateSelector, Rate, SL, FlowLabel, Scope and
    /// JoinState.
    pub const IBACM_JOIN: Self = Self(0x1_B3F7);
}

flag_set! {
    /// JoinState (bits 3:0 of byte 48): which memberships are requested or held.
    pub struct JoinState(u8) {
        /// Full member (what ibacmp joins as).
        FULL_MEMBER = 0x1,
        /// Non member.
        NON_MEMBER = 0x2,
        /// Send-only non member.
        SEND_ONLY_NON_MEMBER = 0x4,
        /// Send-only full member (IBTA 1.3; unused by ibacm).
        SEND_ONLY_FULL_MEMBER = 0x8,
    }
}

open_enum! {
    /// Multicast address scope (bits 7:4 of byte 48; the same code as in the MGID).
    pub struct McScope(u8) {
        /// Link local.
        LINK_LOCAL = 0x2,
        /// Site local (what ibacmp uses).
        SITE_LOCAL = 0x5,
        /// Organisation local.
        ORGANIZATION_LOCAL = 0x8,
        /// Global.
        GLOBAL = 0xE,
    }
}

/// A zero-copy view of an MCMemberRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McMemberRecordPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> McMemberRecordPacket<T> {
    view_constructors!("MCMemberRecord", LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Scope (bits 7:4 of byte 48).
    pub fn scope(&self) -> McScope {
        McScope(self.b()[field::SCOPE_JOIN_STATE] >> 4)
    }
    /// JoinState (bits 3:0 of byte 48).
    pub fn join_state(&self) -> JoinState {
        JoinState(self.b()[field::SCOPE_JOIN_STATE] & 0xF)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> McMemberRecordPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the scope (masked to 4 bits).
    pub fn set_scope(&mut self, v: McScope) {
        let b = &mut self.bm()[field::SCOPE_JOIN_STATE];
        *b = (*b & 0x0F) | ((v.0 & 0xF) << 4);
    }
    /// Sets the JoinState (masked to 4 bits).
    pub fn set_join_state(&mut self, v: JoinState) {
        let b = &mut self.bm()[field::SCOPE_JOIN_STATE];
        *b = (*b & 0xF0) | (v.0 & 0xF);
    }
}

view_bits! {
    impl McMemberRecordPacket, BigEndian, field::SL_FLOW_HOP => u32 {
        /// Service level (bits 31:28).
        sl, set_sl: u8 = 28, 4;
        /// 20-bit flow label (bits 27:8).
        flow_label, set_flow_label: u32 = 8, 20;
        /// Hop limit (bits 7:0).
        hop_limit, set_hop_limit: u8 = 0, 8;
    }
}

view_bits! {
    impl McMemberRecordPacket, BigEndian, field::PROXY_JOIN => u8 {
        /// ProxyJoin (bit 7 of byte 49).
        proxy_join, set_proxy_join: bool = 7, 1;
        /// The 7 reserved bits after ProxyJoin (bits 6:0 of byte 49).
        proxy_join_reserved, set_proxy_join_reserved: u8 = 0, 7;
    }
}

view_fields! {
    impl McMemberRecordPacket, BigEndian {
        /// Multicast GID.
        mgid, set_mgid: Gid = field::MGID;
        /// Port GID of the member.
        port_gid, set_port_gid: Gid = field::PORT_GID;
        /// Q_Key.
        qkey, set_qkey: u32 = field::QKEY;
        /// Multicast LID.
        mlid, set_mlid: u16 = field::MLID;
        /// MTU selector and value.
        mtu, set_mtu: Selected<Mtu> = field::MTU;
        /// Traffic class.
        tclass, set_tclass: u8 = field::TCLASS;
        /// Partition key.
        pkey, set_pkey: u16 = field::PKEY;
        /// Rate selector and value.
        rate, set_rate: Selected<Rate> = field::RATE;
        /// Packet-lifetime selector and value.
        packet_lifetime, set_packet_lifetime: Selected<u8> = field::PACKET_LIFETIME;
        /// The whole SL/flow-label/hop-limit word.
        sl_flow_hop, set_sl_flow_hop: u32 = field::SL_FLOW_HOP;
        /// The six reserved bytes at the end.
        reserved, set_reserved: [u8; 6] = field::RESERVED;
    }
}

/// An MCMemberRecord as typed values. Every bit of the 56 bytes is kept (reserved ones
/// too), so parse then emit reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct McMemberRecordRepr {
    /// Multicast GID.
    pub mgid: Gid,
    /// Port GID of the member.
    pub port_gid: Gid,
    /// Q_Key.
    pub qkey: u32,
    /// Multicast LID.
    pub mlid: u16,
    /// MTU selector and value.
    pub mtu: Selected<Mtu>,
    /// Traffic class.
    pub tclass: u8,
    /// Partition key.
    pub pkey: u16,
    /// Rate selector and value.
    pub rate: Selected<Rate>,
    /// Packet-lifetime selector and value.
    pub packet_lifetime: Selected<u8>,
    /// Service level, 4 bits.
    pub sl: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Scope, 4 bits.
    pub scope: McScope,
    /// JoinState, 4 bits.
    pub join_state: JoinState,
    /// ProxyJoin.
    pub proxy_join: bool,
    /// The 7 reserved bits after ProxyJoin (kept for exact round trips).
    pub proxy_join_reserved: u8,
    /// The six reserved trailing bytes (kept for exact round trips).
    pub reserved: [u8; 6],
}

impl McMemberRecordRepr {
    /// The record ibacmp sends to join a group (docs/protocol/sa.md §5,
    /// docs/test-vectors.md §17): Q_Key 0x80010000, MTU and rate with the "exactly"
    /// selector, `pkey` exactly as in the port's table (not ORed with 0x8000), scope
    /// site-local, full member, everything else zero.
    #[must_use]
    pub fn ibacm_join(mgid: Gid, port_gid: Gid, pkey: u16, rate: Rate, mtu: Mtu) -> Self {
        Self {
            mgid,
            port_gid,
            qkey: crate::acm_mad::ACM_QKEY,
            mtu: Selected::exactly(mtu),
            pkey,
            rate: Selected::exactly(rate),
            scope: McScope::SITE_LOCAL,
            join_state: JoinState::FULL_MEMBER,
            ..Self::default()
        }
    }

    /// Parses the first 56 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = McMemberRecordPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads a record from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &McMemberRecordPacket<T>) -> Self {
        Self {
            mgid: p.mgid(),
            port_gid: p.port_gid(),
            qkey: p.qkey(),
            mlid: p.mlid(),
            mtu: p.mtu(),
            tclass: p.tclass(),
            pkey: p.pkey(),
            rate: p.rate(),
            packet_lifetime: p.packet_lifetime(),
            sl: p.sl(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            scope: p.scope(),
            join_state: p.join_state(),
            proxy_join: p.proxy_join(),
            proxy_join_reserved: p.proxy_join_reserved(),
            reserved: p.reserved(),
        }
    }

    /// Writes the record into the first 56 bytes of `buf`. Bit fields are masked to their
    /// widths.
    ///
    /// # Panics
    /// If `buf` is shorter than 56 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = McMemberRecordPacket::new_unchecked(&mut buf[..MCMEMBER_RECORD_LEN]);
        p.set_mgid(self.mgid);
        p.set_port_gid(self.port_gid);
        p.set_qkey(self.qkey);
        p.set_mlid(self.mlid);
        p.set_mtu(self.mtu);
        p.set_tclass(self.tclass);
        p.set_pkey(self.pkey);
        p.set_rate(self.rate);
        p.set_packet_lifetime(self.packet_lifetime);
        p.set_sl(self.sl);
        p.set_flow_label(self.flow_label);
        p.set_hop_limit(self.hop_limit);
        p.set_scope(self.scope);
        p.set_join_state(self.join_state);
        p.set_proxy_join(self.proxy_join);
        p.set_proxy_join_reserved(self.proxy_join_reserved);
        p.set_reserved(self.reserved);
    }

    emit_to_array!("record", MCMEMBER_RECORD_LEN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::{AttrId, MAD_LEN, Method, MgmtClass};
    use crate::mgid::AcmMgid;
    use crate::sa::{SaHeaderRepr, SaPacket};
    use crate::testutil::{Garbage, bytes};
    use crate::{Reason, Selector};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    const PORT_GID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b001);

    impl Arbitrary for McMemberRecordRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<56>(g)).unwrap()
        }
    }

    /// A join response as an SM might send it: MLID 0xC001, SL 3, flow label 0x12345,
    /// hop limit 0x40, packet lifetime "exactly 18", tclass 0x20.
    fn response_bytes() -> [u8; 56] {
        let mut b = [0u8; 56];
        b[0..16].copy_from_slice(&[
            0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0,
        ]);
        b[16..32].copy_from_slice(&PORT_GID.0);
        b[32..48].copy_from_slice(&[
            0x80, 0x01, 0x00, 0x00, 0xC0, 0x01, 0x84, 0x20, 0xFF, 0xFF, 0x83, 0x92, 0x31, 0x23,
            0x45, 0x40,
        ]);
        b[48] = 0x51;
        b[49] = 0x80;
        b
    }

    #[test]
    fn deconstruct() {
        let b = response_bytes();
        let p = McMemberRecordPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.mgid(), "ff15:4001:ffff:3:400::".parse().unwrap());
        assert_eq!(p.port_gid(), PORT_GID);
        assert_eq!(p.qkey(), 0x8001_0000);
        assert_eq!(p.mlid(), 0xC001);
        assert_eq!(p.mtu(), Selected::exactly(Mtu::MTU_2048));
        assert_eq!(p.tclass(), 0x20);
        assert_eq!(p.pkey(), 0xFFFF);
        assert_eq!(p.rate(), Selected::exactly(Rate::RATE_10));
        assert_eq!(p.packet_lifetime().selector, Selector::EXACTLY);
        assert_eq!(p.packet_lifetime().value, 18);
        assert_eq!(p.sl_flow_hop(), 0x3123_4540);
        assert_eq!(p.sl(), 3);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.hop_limit(), 0x40);
        assert_eq!(p.scope(), McScope::SITE_LOCAL);
        assert_eq!(p.join_state(), JoinState::FULL_MEMBER);
        assert!(p.proxy_join());
        assert_eq!(p.proxy_join_reserved(), 0);
        assert_eq!(p.reserved(), [0; 6]);
    }

    #[test]
    fn bit_field_setters_do_not_disturb_neighbours() {
        let mut b = [0u8; 56];
        let mut p = McMemberRecordPacket::new_unchecked(&mut b[..]);
        p.set_sl(0xF);
        p.set_flow_label(0xFFFFF);
        p.set_hop_limit(0xFF);
        p.set_flow_label(0xABCDE);
        p.set_sl(0x1A); // masked to 0xA
        p.set_scope(McScope::GLOBAL);
        p.set_join_state(JoinState(0xFF));
        p.set_join_state(JoinState::NON_MEMBER | JoinState::SEND_ONLY_NON_MEMBER);
        p.set_proxy_join_reserved(0x7F);
        p.set_proxy_join(true);
        p.set_proxy_join_reserved(0x55);
        p.set_reserved([1, 2, 3, 4, 5, 6]);
        assert_eq!(p.sl(), 0xA);
        assert_eq!(p.flow_label(), 0xABCDE);
        assert_eq!(p.hop_limit(), 0xFF);
        assert_eq!(p.scope(), McScope::GLOBAL);
        assert_eq!(p.join_state().0, 6);
        assert!(p.proxy_join());
        assert_eq!(p.proxy_join_reserved(), 0x55);
        assert_eq!(
            &b[44..56],
            &[0xAA, 0xBC, 0xDE, 0xFF, 0xE6, 0xD5, 1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn parse_and_emit() {
        let b = response_bytes();
        let r = McMemberRecordRepr::parse(&b).unwrap();
        assert_eq!(r.mlid, 0xC001);
        assert_eq!((r.sl, r.flow_label, r.hop_limit), (3, 0x12345, 0x40));
        assert!(r.proxy_join);
        assert_eq!(r.to_bytes(), b);
        assert_eq!(r.buffer_len(), MCMEMBER_RECORD_LEN);
        let mut odd = b;
        odd[49] = 0x7F;
        odd[55] = 0x99;
        let r = McMemberRecordRepr::parse(&odd).unwrap();
        assert!(!r.proxy_join);
        assert_eq!(r.proxy_join_reserved, 0x7F);
        assert_eq!(r.reserved[5], 0x99);
        assert_eq!(r.to_bytes(), odd);
    }

    #[test]
    fn truncated_names_first_missing_field() {
        let e = McMemberRecordRepr::parse(&response_bytes()[..45]).unwrap_err();
        assert_eq!(
            (e.format, e.field, e.offset),
            ("MCMemberRecord", "sl_flow_hop", 44)
        );
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 56,
                available: 45
            }
        );
        let e = McMemberRecordRepr::parse(&[0; 20]).unwrap_err();
        assert_eq!((e.field, e.offset), ("port_gid", 16));
        let e = McMemberRecordRepr::parse(&[0; 55]).unwrap_err();
        assert_eq!((e.field, e.offset), ("reserved", 50));
    }

    #[test]
    fn ibacm_join_mask_is_the_thirteen_named_bits() {
        let named = McCompMask::MGID
            | McCompMask::PORT_GID
            | McCompMask::QKEY
            | McCompMask::MTU_SELECTOR
            | McCompMask::MTU
            | McCompMask::TCLASS
            | McCompMask::PKEY
            | McCompMask::RATE_SELECTOR
            | McCompMask::RATE
            | McCompMask::SL
            | McCompMask::FLOW_LABEL
            | McCompMask::SCOPE
            | McCompMask::JOIN_STATE;
        assert_eq!(named, McCompMask::IBACM_JOIN);
        assert_eq!(McCompMask::IBACM_JOIN.0, 0x0001_B3F7);
        assert_eq!(McCompMask::IBACM_JOIN.0.count_ones(), 13);
    }

    /// docs/test-vectors.md §17: the whole join MAD, with pkey 0xFFFF, rate enum 3 and
    /// MTU enum 4.
    #[test]
    fn spec_item_17_join_mad() {
        let mgid = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        let rec =
            McMemberRecordRepr::ibacm_join(mgid, PORT_GID, 0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
        let hdr = SaHeaderRepr::mcmember_join(3, McCompMask::IBACM_JOIN);
        let mut mad = [0u8; MAD_LEN];
        hdr.emit(&mut mad);
        rec.emit(SaPacket::new_unchecked(&mut mad[..]).data_mut());

        assert_eq!(&mad[0..4], &[0x01, 0x03, 0x02, 0x02]);
        assert_eq!(&mad[16..18], &[0x00, 0x38]);
        assert_eq!(&mad[48..56], &[0, 0, 0, 0, 0, 0x01, 0xB3, 0xF7]);
        let d = &mad[56..];
        assert_eq!(
            &d[0..16],
            &[
                0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(&d[16..32], &PORT_GID.0);
        assert_eq!(
            &d[32..56],
            &[
                0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x84, 0x00, 0xFF, 0xFF, 0x83, 0x00, 0x00, 0x00,
                0x00, 0x00, 0x51, 0x00, 0, 0, 0, 0, 0, 0
            ]
        );
        assert!(d[56..].iter().all(|&x| x == 0));

        let p = SaPacket::new_checked(&mad[..]).unwrap();
        assert_eq!(p.mad_header().mgmt_class(), MgmtClass::SA);
        assert_eq!(p.method(), Method::SET);
        assert_eq!(p.attr_id(), AttrId::MC_MEMBER_RECORD);
        assert_eq!(McMemberRecordRepr::parse(p.data()), Ok(rec));
    }

    /// docs/test-vectors.md §16: pkey 0x7FFF yields the 0xFFFF MGID but the record keeps
    /// 7F FF.
    #[test]
    fn spec_item_16_pkey_not_ored_in_record() {
        let mgid = AcmMgid::new(0x7FFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        assert_eq!(mgid, "ff15:4001:ffff:3:400::".parse().unwrap());
        let rec =
            McMemberRecordRepr::ibacm_join(mgid, PORT_GID, 0x7FFF, Rate::RATE_10, Mtu::MTU_2048);
        assert_eq!(&rec.to_bytes()[40..42], &[0x7F, 0xFF]);
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: McMemberRecordRepr) -> bool {
            McMemberRecordRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match McMemberRecordRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..56],
                Err(_) => b.len() < 56,
            }
        }

        fn prop_emit_masks_out_of_range_fields(r: McMemberRecordRepr, sl: u8, fl: u32, sc: u8, js: u8, pr: u8) -> bool {
            let wild = McMemberRecordRepr {
                sl,
                flow_label: fl,
                scope: McScope(sc),
                join_state: JoinState(js),
                proxy_join_reserved: pr,
                ..r
            };
            let once = wild.to_bytes();
            McMemberRecordRepr::parse(&once).map(|x| x.to_bytes()) == Ok(once)
        }

        fn prop_garbage_never_panics(b: Garbage<56, 100>) -> bool {
            McMemberRecordRepr::parse(&b.0).is_ok() == (b.0.len() >= 56)
        }
    }
}
