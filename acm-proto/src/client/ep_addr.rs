//! The 72-byte endpoint-address entry (`struct acm_ep_addr_data`),
//! docs/protocol/client-messages.md §4.
//!
//! flags (u32) and type (u16) are host order; `info` is a 64-byte union of a name, an
//! IPv4/IPv6 address, a GID, a BE LID or a PathRecord. The reference compares all 64
//! bytes of an address, so `info` is kept raw and typed views are derived from it.

use crate::error::{Layout, Result};
use crate::path_record::{PathFlags, PathRecordRepr};
use crate::{Bytes64, Gid};
use byteorder::{BigEndian, ByteOrder, NativeEndian};
use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

/// Length of one entry.
pub const ENTRY_LEN: usize = 72;

mod field {
    use core::ops::Range;
    pub(super) const FLAGS: Range<usize> = 0..4;
    pub(super) const TYPE: Range<usize> = 4..6;
    pub(super) const RESERVED: Range<usize> = 6..8;
    pub(super) const INFO: Range<usize> = 8..72;
}

const LAYOUT: &Layout = &[
    ("flags", field::FLAGS),
    ("type", field::TYPE),
    ("reserved", field::RESERVED),
    ("info", field::INFO),
];

open_enum! {
    /// What `info` holds (ACM_EP_INFO_* / ACM_ADDRESS_*).
    pub struct AddrType(u16) {
        /// Unset; rejected as a source or destination.
        INVALID = 0,
        /// A NUL-padded name.
        NAME = 1,
        /// IPv4, network order, in the first 4 bytes.
        IP = 2,
        /// IPv6, network order, in the first 16 bytes.
        IP6 = 3,
        /// A GID (resolvable only when already cached).
        GID = 4,
        /// A big-endian LID in the first 2 bytes (resolvable only when already cached).
        LID = 5,
        /// A 64-byte PathRecord.
        PATH = 0x10,
    }
}

impl AddrType {
    /// Whether the type may be a source or destination of a destination resolve (1..=5;
    /// docs/protocol/client-messages.md §7 rejects 0 and ≥ 6).
    #[must_use]
    pub const fn is_address(self) -> bool {
        matches!(self.0, 1..=5)
    }

    /// How many bytes of `info` the address occupies (the rest should be zero).
    #[must_use]
    pub const fn info_len(self) -> usize {
        match self.0 {
            2 => 4,
            3 | 4 => 16,
            5 => 2,
            _ => 64,
        }
    }
}

flag_set! {
    /// Request flags of an entry (ACM_EP_FLAG_* and ACM_FLAGS_*). In responses, PATH
    /// entries carry [`PathFlags`] in the same field instead.
    pub struct EpFlags(u32) {
        /// The source address (request), or the source the daemon chose (response).
        SOURCE = 0x0000_0001,
        /// The destination address.
        DEST = 0x0000_0002,
        /// Answer only from the cache.
        NODELAY = 0x4000_0000,
        /// Send the path as it is to the SA (`ib_acme -v`).
        QUERY_SA = 0x8000_0000,
    }
}

impl EpFlags {
    /// The same bits read as `ibv_path_data` flags (meaningful on response PATH entries).
    #[must_use]
    pub const fn as_path_flags(self) -> PathFlags {
        PathFlags(self.0)
    }
}

/// A view of one 72-byte entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpAddrPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EpAddrPacket<T> {
    view_constructors!("acm_ep_addr_data", LAYOUT);

    /// The 64 info bytes.
    pub fn info(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INFO]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EpAddrPacket<T> {
    /// The 64 info bytes, writable.
    pub fn info_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::INFO]
    }
}

view_fields! {
    impl EpAddrPacket, NativeEndian {
        /// Flags (host order).
        flags, set_flags: EpFlags = field::FLAGS;
        /// Address type (host order).
        addr_type, set_addr_type: AddrType = field::TYPE;
        /// Reserved (host order).
        reserved, set_reserved: u16 = field::RESERVED;
    }
}

/// A typed view of an entry's `info`, chosen by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpAddress<'a> {
    /// A name: the bytes before the first NUL.
    Name(&'a [u8]),
    /// An IPv4 address.
    Ipv4(Ipv4Addr),
    /// An IPv6 address.
    Ipv6(Ipv6Addr),
    /// A GID.
    Gid(Gid),
    /// A LID.
    Lid(u16),
    /// A PathRecord.
    Path(PathRecordRepr),
    /// A type with no defined encoding (0 or 6..15, 0x11..).
    Other,
}

impl<'a> EpAddress<'a> {
    /// An entry's 64-byte `info` read as an address of type `ty`.
    #[must_use]
    pub fn read(ty: AddrType, info: &'a Bytes64) -> Self {
        let b = &info.0;
        match ty {
            AddrType::NAME => Self::Name(info.until_nul()),
            AddrType::IP => Self::Ipv4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
            AddrType::IP6 | AddrType::GID => {
                let gid = Gid::read(b).unwrap_or_default();
                if ty == AddrType::IP6 {
                    Self::Ipv6(Ipv6Addr::from(gid.0))
                } else {
                    Self::Gid(gid)
                }
            }
            AddrType::LID => Self::Lid(BigEndian::read_u16(b)),
            AddrType::PATH => Self::Path(PathRecordRepr::parse(b).unwrap_or_default()),
            _ => Self::Other,
        }
    }
}

/// An entry as typed values; `info` stays raw so the entry re-emits unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EpAddrRepr {
    /// Flags (host order).
    pub flags: EpFlags,
    /// Address type (host order).
    pub addr_type: AddrType,
    /// Reserved (host order); librdmacm reuses it
    /// (docs/protocol/client-messages.md §8.6), so kept raw.
    pub reserved: u16,
    /// The 64-byte address / name / path.
    pub info: Bytes64,
}

impl EpAddrRepr {
    /// An entry of any type over raw info bytes.
    #[must_use]
    pub const fn new(flags: EpFlags, addr_type: AddrType, info: Bytes64) -> Self {
        Self {
            flags,
            addr_type,
            reserved: 0,
            info,
        }
    }

    /// An IPv4 entry.
    #[must_use]
    pub fn ipv4(flags: EpFlags, addr: Ipv4Addr) -> Self {
        Self::new(flags, AddrType::IP, Bytes64::zero_padded(&addr.octets()))
    }

    /// An IPv6 entry.
    #[must_use]
    pub fn ipv6(flags: EpFlags, addr: Ipv6Addr) -> Self {
        Self::new(flags, AddrType::IP6, Bytes64::zero_padded(&addr.octets()))
    }

    /// A name entry (at most 63 bytes are kept, as clients do).
    #[must_use]
    pub fn name(flags: EpFlags, name: &str) -> Self {
        Self::new(flags, AddrType::NAME, Bytes64::c_string(name))
    }

    /// A GID entry.
    #[must_use]
    pub fn gid(flags: EpFlags, gid: Gid) -> Self {
        Self::new(flags, AddrType::GID, Bytes64::zero_padded(&gid.0))
    }

    /// A LID entry (big-endian in the first two bytes).
    #[must_use]
    pub fn lid(flags: EpFlags, lid: u16) -> Self {
        Self::new(
            flags,
            AddrType::LID,
            Bytes64::zero_padded(&lid.to_be_bytes()),
        )
    }

    /// A PATH entry.
    #[must_use]
    pub fn path(flags: EpFlags, path: &PathRecordRepr) -> Self {
        Self::new(flags, AddrType::PATH, Bytes64(path.to_bytes()))
    }

    /// Parses the first 72 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = EpAddrPacket::new_checked(buf)?;
        Ok(Self {
            flags: p.flags(),
            addr_type: p.addr_type(),
            reserved: p.reserved(),
            info: Bytes64::read(p.info()).unwrap_or_default(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        ENTRY_LEN
    }

    /// Writes the 72 bytes.
    ///
    /// # Panics
    /// If `buf` is shorter than 72 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = EpAddrPacket::new_unchecked(&mut buf[..ENTRY_LEN]);
        p.set_flags(self.flags);
        p.set_addr_type(self.addr_type);
        p.set_reserved(self.reserved);
        p.info_mut().copy_from_slice(&self.info.0);
    }

    /// `info` read according to the type.
    #[must_use]
    pub fn address(&self) -> EpAddress<'_> {
        EpAddress::read(self.addr_type, &self.info)
    }

    /// Whether the bytes after the address proper are all zero (clients must zero-fill
    /// them, or the daemon's cache treats the entry as a different address).
    #[must_use]
    pub fn is_zero_padded(&self) -> bool {
        match self.addr_type {
            AddrType::NAME => self.info.is_zero_from(self.info.until_nul().len()),
            t => self.info.is_zero_from(t.info_len()),
        }
    }
}

impl fmt::Debug for EpAddrRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("EpAddr");
        d.field("flags", &self.flags);
        if self.addr_type == AddrType::PATH && self.flags.0 & !EpFlags::QUERY_SA.0 != 0 {
            d.field("as_path_flags", &self.flags.as_path_flags());
        }
        d.field("type", &self.addr_type);
        if self.reserved != 0 {
            d.field("reserved", &self.reserved);
        }
        match self.address() {
            EpAddress::Name(_) | EpAddress::Other => d.field("info", &self.info),
            EpAddress::Ipv4(a) => d.field("addr", &a),
            EpAddress::Ipv6(a) => d.field("addr", &a),
            EpAddress::Gid(g) => d.field("gid", &g),
            EpAddress::Lid(l) => d.field("lid", &l),
            EpAddress::Path(p) => d.field("path", &p),
        };
        if !self.is_zero_padded() && !matches!(self.address(), EpAddress::Name(_)) {
            d.field("info_raw", &self.info);
        }
        d.finish()
    }
}

/// Serialises like `Debug`: flags, type, reserved, the address decoded by type, and the
/// raw info only when it holds more than the address.
#[cfg(feature = "serde")]
impl serde::Serialize for EpAddrRepr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("flags", &self.flags)?;
        if self.addr_type == AddrType::PATH && self.flags.0 & !EpFlags::QUERY_SA.0 != 0 {
            m.serialize_entry("as_path_flags", &self.flags.as_path_flags())?;
        }
        m.serialize_entry("type", &self.addr_type)?;
        m.serialize_entry("reserved", &self.reserved)?;
        match self.address() {
            EpAddress::Name(_) | EpAddress::Other => m.serialize_entry("info", &self.info)?,
            EpAddress::Ipv4(a) => m.serialize_entry("addr", &Shown(a))?,
            EpAddress::Ipv6(a) => m.serialize_entry("addr", &Shown(a))?,
            EpAddress::Gid(g) => m.serialize_entry("gid", &g)?,
            EpAddress::Lid(l) => m.serialize_entry("lid", &l)?,
            EpAddress::Path(p) => m.serialize_entry("path", &p)?,
        }
        if !self.is_zero_padded() && !matches!(self.address(), EpAddress::Name(_)) {
            m.serialize_entry("info_raw", &self.info)?;
        }
        m.end()
    }
}

/// Serialises any `Display` value as its text.
#[cfg(feature = "serde")]
struct Shown<T>(T);

#[cfg(feature = "serde")]
impl<T: fmt::Display> serde::Serialize for Shown<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use alloc::format;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for EpAddrRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let addr_type = AddrType(*g.choose(&[0, 1, 2, 3, 4, 5, 6, 0x10, 0xffff]).unwrap());
            Self {
                flags: EpFlags(u32::arbitrary(g)),
                addr_type,
                reserved: u16::arbitrary(g),
                info: Bytes64::arbitrary(g),
            }
        }
    }

    #[test]
    fn spec_vector_ipv4_source() {
        // docs/test-vectors.md §1, entry 0:
        // `01 00 00 00`, `02 00`, `00 00`, `0A 00 00 01`, z(60).
        let e = EpAddrRepr::ipv4(EpFlags::SOURCE, Ipv4Addr::new(10, 0, 0, 1));
        let mut b = [0u8; 72];
        e.emit(&mut b);
        assert_eq!(&b[..12], &[1, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 1]);
        assert!(b[12..].iter().all(|&x| x == 0));
        assert_eq!(EpAddrRepr::parse(&b), Ok(e));
        assert_eq!(e.address(), EpAddress::Ipv4(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(e.is_zero_padded());
    }

    #[test]
    fn typed_views() {
        let n = EpAddrRepr::name(EpFlags::DEST, "node2");
        assert_eq!(n.address(), EpAddress::Name(b"node2"));
        let l = EpAddrRepr::lid(EpFlags::DEST, 5);
        assert_eq!(&l.info.0[..2], &[0, 5]);
        assert_eq!(l.address(), EpAddress::Lid(5));
        let g: Gid = "fe80::2:c903:a0:b002".parse().unwrap();
        assert_eq!(
            EpAddrRepr::gid(EpFlags::DEST, g).address(),
            EpAddress::Gid(g)
        );
        let v6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        assert_eq!(
            EpAddrRepr::ipv6(EpFlags::DEST, v6).address(),
            EpAddress::Ipv6(v6)
        );
        let path = PathRecordRepr {
            dlid: 5,
            ..Default::default()
        };
        assert_eq!(
            EpAddrRepr::path(EpFlags::EMPTY, &path).address(),
            EpAddress::Path(path)
        );
        assert_eq!(
            EpAddrRepr::new(EpFlags::DEST, AddrType(6), Bytes64::ZERO).address(),
            EpAddress::Other
        );
        assert!(
            AddrType::LID.is_address() && !AddrType::PATH.is_address() && !AddrType(0).is_address()
        );
    }

    #[test]
    fn debug_flags_trailing_garbage() {
        let mut e = EpAddrRepr::ipv4(EpFlags::SOURCE, Ipv4Addr::new(10, 0, 0, 1));
        assert!(!format!("{e:?}").contains("info_raw"));
        e.info.0[10] = 1;
        assert!(!e.is_zero_padded());
        assert!(format!("{e:?}").contains("info_raw"));
    }

    #[test]
    fn truncated_entry() {
        let e = EpAddrRepr::parse(&[0; 70]).unwrap_err();
        assert_eq!((e.field, e.offset), ("info", 8));
    }

    quickcheck! {
        fn prop_roundtrip(e: EpAddrRepr) -> bool {
            let mut b = [0u8; 72];
            e.emit(&mut b);
            EpAddrRepr::parse(&b) == Ok(e)
        }

        fn prop_garbage(b: Garbage<72, 80>) -> bool {
            match EpAddrRepr::parse(&b.0) {
                Ok(e) => {
                    let _ = format!("{e:?}");
                    let mut out = [0u8; 72];
                    e.emit(&mut out);
                    out[..] == b.0[..72]
                }
                Err(_) => b.0.len() < 72,
            }
        }
    }
}
