//! The SA PathRecord (attribute 0x0035), byte-identical to `struct ibv_path_record`.
//!
//! 64 bytes, big-endian, copied unchanged between client messages, SA MADs and netlink
//! replies. See docs/protocol/client-messages.md §5 (layout), docs/protocol/sa.md §4
//! (component mask); IBTA Vol 1 §15.2.5.16.

use crate::error::{Layout, Result, check_layout};
use crate::{Gid, Mtu, Rate, Selected};
use byteorder::{BigEndian, ByteOrder, NativeEndian};

/// Length of a PathRecord.
pub const PATH_RECORD_LEN: usize = 64;

mod field {
    use core::ops::Range;
    pub(super) const SERVICE_ID: Range<usize> = 0..8;
    pub(super) const DGID: Range<usize> = 8..24;
    pub(super) const SGID: Range<usize> = 24..40;
    pub(super) const DLID: Range<usize> = 40..42;
    pub(super) const SLID: Range<usize> = 42..44;
    /// Bits 31:28 raw-traffic/reserved, 27:8 flow label, 7:0 hop limit.
    pub(super) const FLOWLABEL_HOPLIMIT: Range<usize> = 44..48;
    pub(super) const TCLASS: usize = 48;
    /// Bit 7 reversible, bits 6:0 numpath.
    pub(super) const REVERSIBLE_NUMPATH: usize = 49;
    pub(super) const PKEY: Range<usize> = 50..52;
    /// Bits 15:4 QoS class, 3:0 SL.
    pub(super) const QOSCLASS_SL: Range<usize> = 52..54;
    pub(super) const MTU: usize = 54;
    pub(super) const RATE: usize = 55;
    pub(super) const PACKET_LIFETIME: usize = 56;
    pub(super) const PREFERENCE: usize = 57;
    pub(super) const RESERVED: Range<usize> = 58..64;
}

const LAYOUT: &Layout = &[
    ("service_id", field::SERVICE_ID),
    ("dgid", field::DGID),
    ("sgid", field::SGID),
    ("dlid", field::DLID),
    ("slid", field::SLID),
    ("flowlabel_hoplimit", field::FLOWLABEL_HOPLIMIT),
    ("tclass", 48..49),
    ("reversible_numpath", 49..50),
    ("pkey", field::PKEY),
    ("qosclass_sl", field::QOSCLASS_SL),
    ("mtu", 54..55),
    ("rate", 55..56),
    ("packetlifetime", 56..57),
    ("preference", 57..58),
    ("reserved", field::RESERVED),
];

/// A zero-copy view of a PathRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRecordPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PathRecordPacket<T> {
    view_constructors!("PathRecord", LAYOUT);
}

view_bits! {
    impl PathRecordPacket, BigEndian, field::FLOWLABEL_HOPLIMIT => u32 {
        /// Bits 31:28 of the flow-label word (RawTraffic and reserved bits).
        raw_traffic_bits, set_raw_traffic_bits: u8 = 28, 4;
        /// The 20-bit flow label.
        flow_label, set_flow_label: u32 = 8, 20;
        /// The hop limit.
        hop_limit, set_hop_limit: u8 = 0, 8;
    }
}

view_bits! {
    impl PathRecordPacket, BigEndian, field::REVERSIBLE_NUMPATH => u8 {
        /// Whether the path is reversible (bit 7).
        reversible, set_reversible: bool = 7, 1;
        /// NumbPath (bits 6:0).
        numpath, set_numpath: u8 = 0, 7;
    }
}

view_bits! {
    impl PathRecordPacket, BigEndian, field::QOSCLASS_SL => u16 {
        /// The 12-bit QoS class.
        qos_class, set_qos_class: u16 = 4, 12;
        /// The 4-bit service level.
        sl, set_sl: u8 = 0, 4;
    }
}

view_fields! {
    impl PathRecordPacket, BigEndian {
        /// ServiceID.
        service_id, set_service_id: u64 = field::SERVICE_ID;
        /// Destination GID.
        dgid, set_dgid: Gid = field::DGID;
        /// Source GID.
        sgid, set_sgid: Gid = field::SGID;
        /// Destination LID.
        dlid, set_dlid: u16 = field::DLID;
        /// Source LID.
        slid, set_slid: u16 = field::SLID;
        /// The whole flow-label/hop-limit word.
        flowlabel_hoplimit, set_flowlabel_hoplimit: u32 = field::FLOWLABEL_HOPLIMIT;
        /// Traffic class.
        tclass, set_tclass: u8 = field::TCLASS;
        /// Partition key.
        pkey, set_pkey: u16 = field::PKEY;
        /// MTU selector and value.
        mtu, set_mtu: Selected<Mtu> = field::MTU;
        /// Rate selector and value.
        rate, set_rate: Selected<Rate> = field::RATE;
        /// Packet-lifetime selector and value.
        packet_lifetime, set_packet_lifetime: Selected<u8> = field::PACKET_LIFETIME;
        /// Preference.
        preference, set_preference: u8 = field::PREFERENCE;
        /// The six reserved bytes at the end.
        reserved, set_reserved: [u8; 6] = field::RESERVED;
    }
}

/// A PathRecord as typed values. Every bit of the 64 bytes is represented, so parse then
/// emit reproduces the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathRecordRepr {
    /// ServiceID.
    pub service_id: u64,
    /// Destination GID.
    pub dgid: Gid,
    /// Source GID.
    pub sgid: Gid,
    /// Destination LID.
    pub dlid: u16,
    /// Source LID.
    pub slid: u16,
    /// Bits 31:28 of the flow-label word (RawTraffic and reserved).
    pub raw_traffic_bits: u8,
    /// 20-bit flow label.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub tclass: u8,
    /// Reversible bit.
    pub reversible: bool,
    /// NumbPath, 7 bits.
    pub numpath: u8,
    /// Partition key.
    pub pkey: u16,
    /// 12-bit QoS class.
    pub qos_class: u16,
    /// 4-bit service level.
    pub sl: u8,
    /// MTU selector and value.
    pub mtu: Selected<Mtu>,
    /// Rate selector and value.
    pub rate: Selected<Rate>,
    /// Packet-lifetime selector and value.
    pub packet_lifetime: Selected<u8>,
    /// Preference.
    pub preference: u8,
    /// Reserved trailing bytes (kept so that a record is re-emitted unchanged).
    pub reserved: [u8; 6],
}

impl PathRecordRepr {
    /// Parses the first 64 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = PathRecordPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads a record from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &PathRecordPacket<T>) -> Self {
        Self {
            service_id: p.service_id(),
            dgid: p.dgid(),
            sgid: p.sgid(),
            dlid: p.dlid(),
            slid: p.slid(),
            raw_traffic_bits: p.raw_traffic_bits(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            tclass: p.tclass(),
            reversible: p.reversible(),
            numpath: p.numpath(),
            pkey: p.pkey(),
            qos_class: p.qos_class(),
            sl: p.sl(),
            mtu: p.mtu(),
            rate: p.rate(),
            packet_lifetime: p.packet_lifetime(),
            preference: p.preference(),
            reserved: p.reserved(),
        }
    }

    /// Writes the record into the first 64 bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 64 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = PathRecordPacket::new_unchecked(&mut buf[..PATH_RECORD_LEN]);
        p.set_service_id(self.service_id);
        p.set_dgid(self.dgid);
        p.set_sgid(self.sgid);
        p.set_dlid(self.dlid);
        p.set_slid(self.slid);
        p.set_raw_traffic_bits(self.raw_traffic_bits);
        p.set_flow_label(self.flow_label);
        p.set_hop_limit(self.hop_limit);
        p.set_tclass(self.tclass);
        p.set_reversible(self.reversible);
        p.set_numpath(self.numpath);
        p.set_pkey(self.pkey);
        p.set_qos_class(self.qos_class);
        p.set_sl(self.sl);
        p.set_mtu(self.mtu);
        p.set_rate(self.rate);
        p.set_packet_lifetime(self.packet_lifetime);
        p.set_preference(self.preference);
        p.set_reserved(self.reserved);
    }

    emit_to_array!("record", PATH_RECORD_LEN);

    /// The SA component mask ibacm derives from a record before querying the SA with it:
    /// each bit is set only when its field is non-zero (docs/protocol/sa.md §4).
    /// NumbPath, RawTraffic and Preference are never set.
    #[must_use]
    pub fn sa_comp_mask(&self) -> PathCompMask {
        let mut m = PathCompMask::EMPTY;
        let mut set = |cond: bool, bit: PathCompMask| {
            if cond {
                m |= bit;
            }
        };
        set(self.service_id != 0, PathCompMask::SERVICE_ID);
        set(!self.dgid.is_zero(), PathCompMask::DGID);
        set(!self.sgid.is_zero(), PathCompMask::SGID);
        set(self.dlid != 0, PathCompMask::DLID);
        set(self.slid != 0, PathCompMask::SLID);
        // The reference tests (flowlabel_hoplimit >> 8), which includes the top 4 bits.
        set(
            self.flow_label != 0 || self.raw_traffic_bits != 0,
            PathCompMask::FLOW_LABEL,
        );
        set(self.hop_limit != 0, PathCompMask::HOP_LIMIT);
        set(self.tclass != 0, PathCompMask::TCLASS);
        set(self.reversible, PathCompMask::REVERSIBLE);
        set(self.pkey != 0, PathCompMask::PKEY);
        set(self.qos_class != 0, PathCompMask::QOS_CLASS);
        set(self.sl != 0, PathCompMask::SL);
        set(self.mtu.selector.0 != 0, PathCompMask::MTU_SELECTOR);
        set(self.mtu.value.0 & 0x3F != 0, PathCompMask::MTU);
        set(self.rate.selector.0 != 0, PathCompMask::RATE_SELECTOR);
        set(self.rate.value.0 & 0x3F != 0, PathCompMask::RATE);
        set(
            self.packet_lifetime.selector.0 != 0,
            PathCompMask::PACKET_LIFETIME_SELECTOR,
        );
        set(
            self.packet_lifetime.value & 0x3F != 0,
            PathCompMask::PACKET_LIFETIME,
        );
        m
    }
}

flag_set! {
    /// PathRecord component-mask bits (IBTA Vol 1 Table 205 order).
    pub struct PathCompMask(u64) {
        /// ServiceID, first half (bit 0); ibacm always sets both halves together.
        SERVICE_ID_8MSB = 1 << 0,
        /// ServiceID, second half (bit 1).
        SERVICE_ID_8LSB = 1 << 1,
        /// Destination GID.
        DGID = 1 << 2,
        /// Source GID.
        SGID = 1 << 3,
        /// Destination LID.
        DLID = 1 << 4,
        /// Source LID.
        SLID = 1 << 5,
        /// RawTraffic.
        RAW_TRAFFIC = 1 << 6,
        /// Flow label.
        FLOW_LABEL = 1 << 8,
        /// Hop limit.
        HOP_LIMIT = 1 << 9,
        /// Traffic class.
        TCLASS = 1 << 10,
        /// Reversible.
        REVERSIBLE = 1 << 11,
        /// NumbPath.
        NUMB_PATH = 1 << 12,
        /// P_Key.
        PKEY = 1 << 13,
        /// QoS class.
        QOS_CLASS = 1 << 14,
        /// SL.
        SL = 1 << 15,
        /// MTU selector.
        MTU_SELECTOR = 1 << 16,
        /// MTU.
        MTU = 1 << 17,
        /// Rate selector.
        RATE_SELECTOR = 1 << 18,
        /// Rate.
        RATE = 1 << 19,
        /// Packet-lifetime selector.
        PACKET_LIFETIME_SELECTOR = 1 << 20,
        /// Packet lifetime.
        PACKET_LIFETIME = 1 << 21,
        /// Preference.
        PREFERENCE = 1 << 22,
    }
}

impl PathCompMask {
    /// Both ServiceID bits, as ibacm sets them.
    pub const SERVICE_ID: Self = Self(0b11);
}

flag_set! {
    /// `IBV_PATH_FLAG_*`: what a path in a reply (client `ibv_path_data` or netlink
    /// `ib_path_rec_data`) is good for.
    pub struct PathFlags(u32) {
        /// Usable for general management packets.
        GMP = 0x01,
        /// The primary path.
        PRIMARY = 0x02,
        /// An alternate path.
        ALTERNATE = 0x04,
        /// Usable outbound.
        OUTBOUND = 0x08,
        /// Usable inbound.
        INBOUND = 0x10,
        /// Usable inbound in reverse.
        INBOUND_REVERSE = 0x20,
    }
}

impl PathFlags {
    /// OUTBOUND | INBOUND_REVERSE.
    pub const BIDIRECTIONAL: Self = Self(0x28);
    /// What ibacmp puts on every returned path: GMP|PRIMARY|OUTBOUND|INBOUND_REVERSE.
    pub const IBACMP_REPLY: Self = Self(0x2B);
    /// What a netlink reply carries for a unidirectional request: PRIMARY|OUTBOUND.
    pub const UNIDIRECTIONAL_REPLY: Self = Self(0x0A);
}

/// Length of an `ibv_path_data` / `ib_path_rec_data`: flags, reserved, path.
pub const PATH_DATA_LEN: usize = 72;

/// `ibv_path_data` (librdmacm) and the kernel's `ib_path_rec_data`: flags (host order),
/// a reserved word, then the PathRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PathDataRepr {
    /// What the path is good for.
    pub flags: PathFlags,
    /// Reserved (host order).
    pub reserved: u32,
    /// The path.
    pub path: PathRecordRepr,
}

impl PathDataRepr {
    /// Parses the first 72 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        const DATA_LAYOUT: &Layout = &[("flags", 0..4), ("reserved", 4..8), ("path", 8..72)];
        check_layout("ibv_path_data", DATA_LAYOUT, buf.len())?;
        Ok(Self {
            flags: PathFlags(NativeEndian::read_u32(&buf[0..4])),
            reserved: NativeEndian::read_u32(&buf[4..8]),
            path: PathRecordRepr::parse(&buf[8..PATH_DATA_LEN]).map_err(|e| e.at_base(8))?,
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        PATH_DATA_LEN
    }

    /// Writes the 72 bytes.
    ///
    /// # Panics
    /// If `buf` is shorter than 72 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        NativeEndian::write_u32(&mut buf[0..4], self.flags.0);
        NativeEndian::write_u32(&mut buf[4..8], self.reserved);
        self.path.emit(&mut buf[8..PATH_DATA_LEN]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Garbage, bytes};
    use crate::{Reason, Selector};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    /// The path the reference daemon returned for 10.0.0.1 -> 10.0.0.2 (real capture).
    const CAPTURED: &str = "0000000000000000fe800000000000000002c90300a0b002fe800000000000000002c90300a0b00100020001000000000081ffff000084839200000000000000";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    impl Arbitrary for PathRecordRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<64>(g)).unwrap()
        }
    }

    #[test]
    fn deconstruct_captured_path() {
        let b = hex(CAPTURED);
        let p = PathRecordPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.dgid(), "fe80::2:c903:a0:b002".parse().unwrap());
        assert_eq!(p.sgid(), "fe80::2:c903:a0:b001".parse().unwrap());
        assert_eq!((p.dlid(), p.slid()), (2, 1));
        assert!(p.reversible());
        assert_eq!(p.numpath(), 1);
        assert_eq!(p.pkey(), 0xffff);
        assert_eq!(p.mtu(), Selected::exactly(Mtu::MTU_2048));
        assert_eq!(p.rate(), Selected::exactly(Rate::RATE_10));
        assert_eq!(p.packet_lifetime().value, 18);
        assert_eq!(p.packet_lifetime().selector, Selector::EXACTLY);
        let r = PathRecordRepr::parse(&b).unwrap();
        assert_eq!(r.to_bytes().to_vec(), b);
    }

    #[test]
    fn bit_field_setters_do_not_disturb_neighbours() {
        let mut b = [0u8; 64];
        let mut p = PathRecordPacket::new_unchecked(&mut b[..]);
        p.set_raw_traffic_bits(0xF);
        p.set_flow_label(0xABCDE);
        p.set_hop_limit(0x42);
        p.set_qos_class(0xFFF);
        p.set_sl(0x5);
        p.set_reversible(true);
        p.set_numpath(0x7F);
        p.set_reversible(false);
        assert_eq!(p.raw_traffic_bits(), 0xF);
        assert_eq!(p.flow_label(), 0xABCDE);
        assert_eq!(p.hop_limit(), 0x42);
        assert_eq!(p.qos_class(), 0xFFF);
        assert_eq!(p.sl(), 5);
        assert_eq!(p.numpath(), 0x7F);
        assert!(!p.reversible());
        assert_eq!(&b[44..48], &[0xFA, 0xBC, 0xDE, 0x42]);
        assert_eq!(&b[52..54], &[0xFF, 0xF5]);
    }

    #[test]
    fn truncated_names_first_missing_field() {
        let e = PathRecordRepr::parse(&[0; 41]).unwrap_err();
        assert_eq!(e.field, "dlid");
        assert_eq!(e.offset, 40);
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 64,
                available: 41
            }
        );
    }

    #[test]
    fn comp_mask_matches_spec_cases() {
        // Case A (route_prot sa after ACM resolution): DGID|SGID|PKEY.
        let mut r = PathRecordRepr {
            dgid: Gid::from_parts(0xfe80 << 48, 2),
            sgid: Gid::from_parts(0xfe80 << 48, 1),
            pkey: 0xffff,
            ..Default::default()
        };
        assert_eq!(r.sa_comp_mask().0, 0x200C);
        // `-f l`: SGID|DLID|SLID|PKEY (+ reversible as the client sends 0x81).
        r.dgid = Gid::ZERO;
        r.dlid = 5;
        r.slid = 1;
        assert_eq!(r.sa_comp_mask().0, 0x2038);
        r.reversible = true;
        assert_eq!(r.sa_comp_mask().0, 0x2838);
        r.service_id = 1;
        r.mtu = Selected::exactly(Mtu::MTU_2048);
        assert_eq!(r.sa_comp_mask().0, 0x2838 | 0b11 | (3 << 16));
    }

    #[test]
    fn path_data_roundtrip() {
        let mut b = [0u8; 72];
        b[0] = 0x2B;
        b[8..].copy_from_slice(&hex(CAPTURED));
        let d = PathDataRepr::parse(&b).unwrap();
        assert_eq!(d.flags, PathFlags::IBACMP_REPLY);
        assert!(d.flags.contains(PathFlags::BIDIRECTIONAL));
        let mut out = [0u8; 72];
        d.emit(&mut out);
        assert_eq!(out, b);
        let e = PathDataRepr::parse(&b[..50]).unwrap_err();
        assert_eq!(e.field, "path");
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: PathRecordRepr) -> bool {
            PathRecordRepr::parse(&r.to_bytes()) == Ok(r)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match PathRecordRepr::parse(&b) {
                Ok(r) => r.to_bytes()[..] == b[..64],
                Err(_) => b.len() < 64,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<72, 100>) -> bool {
            let data_ok = PathDataRepr::parse(&b.0).is_ok();
            let rec_ok = PathRecordRepr::parse(&b.0).is_ok();
            data_ok == (b.0.len() >= 72) && rec_ok == (b.0.len() >= 64)
        }
    }
}
