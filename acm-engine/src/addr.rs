//! Addresses as the engine stores them: a type and the 64 raw bytes of an entry's `info`.

use acm_proto::Bytes64;
use acm_proto::client::{AddrType, EpAddrRepr, EpAddress, EpFlags};
use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

/// An address of one of the ACM types (name, IPv4, IPv6, GID, LID): the destination cache
/// key and the form of every local address.
///
/// The bytes are kept exactly as a client or peer sent them: the reference compares all 64
/// bytes, so padding matters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    /// NAME, IP, IP6, GID or LID.
    pub ty: AddrType,
    /// The entry's `info` field.
    pub bytes: Bytes64,
}

impl Address {
    /// A name, zero-padded (cut at 64 bytes, as the reference's `strncpy` does).
    #[must_use]
    pub fn name(name: &str) -> Self {
        Self {
            ty: AddrType::NAME,
            bytes: Bytes64::zero_padded(name.as_bytes()),
        }
    }

    /// An IPv4 address in the first four bytes.
    #[must_use]
    pub fn ipv4(ip: Ipv4Addr) -> Self {
        Self {
            ty: AddrType::IP,
            bytes: Bytes64::zero_padded(&ip.octets()),
        }
    }

    /// An IPv6 address in the first sixteen bytes.
    #[must_use]
    pub fn ipv6(ip: Ipv6Addr) -> Self {
        Self {
            ty: AddrType::IP6,
            bytes: Bytes64::zero_padded(&ip.octets()),
        }
    }

    /// A GID in the first sixteen bytes.
    #[must_use]
    pub fn gid(gid: acm_proto::Gid) -> Self {
        Self {
            ty: AddrType::GID,
            bytes: Bytes64::zero_padded(&gid.0),
        }
    }

    /// A LID, big-endian, in the first two bytes.
    #[must_use]
    pub fn lid(lid: u16) -> Self {
        Self {
            ty: AddrType::LID,
            bytes: EpAddrRepr::lid(EpFlags::default(), lid).info,
        }
    }

    /// An IP literal of either family.
    #[must_use]
    pub fn ip(ip: core::net::IpAddr) -> Self {
        match ip {
            core::net::IpAddr::V4(v4) => Self::ipv4(v4),
            core::net::IpAddr::V6(v6) => Self::ipv6(v6),
        }
    }

    /// The IP address, for IP and IP6 addresses.
    #[must_use]
    pub fn as_ip(&self) -> Option<core::net::IpAddr> {
        match EpAddress::read(self.ty, &self.bytes) {
            EpAddress::Ipv4(v4) => Some(v4.into()),
            EpAddress::Ipv6(v6) => Some(v6.into()),
            _ => None,
        }
    }

    /// Whether `self`, a local address, is the address `other` names, by the rule the
    /// reference uses for local lookups: types equal; names case-insensitively over 64
    /// bytes (up to the first NUL); IPv4 over 4 bytes; IPv6 over 16; others all 64.
    #[must_use]
    pub fn matches_local(&self, other: &Self) -> bool {
        if self.ty != other.ty {
            return false;
        }
        match self.ty {
            // The same 64 bytes (a client spelling the name as configured, the common
            // case) match without the scan for the NUL and the case folding.
            AddrType::NAME if self.bytes == other.bytes => true,
            AddrType::NAME => {
                let a = self.bytes.until_nul();
                let b = other.bytes.until_nul();
                a.eq_ignore_ascii_case(b)
            }
            AddrType::IP | AddrType::IP6 => {
                let n = self.ty.info_len();
                self.bytes.0[..n] == other.bytes.0[..n]
            }
            _ => self.bytes == other.bytes,
        }
    }

    /// Whether the peer's request names this local address (docs/protocol/acm-mad.md §5,
    /// step 2): names case-insensitively, everything else over all 64 bytes.
    #[must_use]
    pub fn matches_peer(&self, other: &Self) -> bool {
        if self.ty != other.ty {
            return false;
        }
        if self.ty == AddrType::NAME {
            self.bytes
                .until_nul()
                .eq_ignore_ascii_case(other.bytes.until_nul())
        } else {
            self.bytes == other.bytes
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            AddrType::NAME => {
                for &c in self.bytes.until_nul() {
                    if c.is_ascii_graphic() || c == b' ' {
                        write!(f, "{}", c as char)?;
                    } else {
                        write!(f, "\\x{c:02x}")?;
                    }
                }
                Ok(())
            }
            AddrType::IP | AddrType::IP6 => match self.as_ip() {
                Some(ip) => write!(f, "{ip}"),
                None => Ok(()),
            },
            AddrType::GID | AddrType::LID => match EpAddress::read(self.ty, &self.bytes) {
                EpAddress::Gid(gid) => write!(f, "{gid}"),
                EpAddress::Lid(lid) => write!(f, "{lid}"),
                _ => Ok(()),
            },
            other => write!(f, "type {other}"),
        }
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({self})", self.ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn local_matching_follows_the_reference() {
        let name = Address::name("FakeHost");
        assert!(name.matches_local(&Address::name("fakehost")));
        assert!(name.matches_peer(&Address::name("FAKEHOST")));
        assert!(!name.matches_local(&Address::name("fakehost2")));
        let ip = Address::ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let mut padded = ip;
        padded.bytes.0[10] = 0xAA;
        // Local lookups compare the address bytes only; peers' requests all 64 bytes.
        assert!(ip.matches_local(&padded));
        assert!(!ip.matches_peer(&padded));
        assert!(!ip.matches_local(&Address::ipv6(Ipv6Addr::LOCALHOST)));
    }

    #[test]
    fn display_and_ip_round_trip() {
        let v6: core::net::IpAddr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).into();
        let a = Address::ip(v6);
        assert_eq!(a.as_ip(), Some(v6));
        assert_eq!(format!("{a}"), "fd00::1");
        assert_eq!(format!("{}", Address::lid(0x1234)), "4660");
        assert_eq!(format!("{}", Address::name("a\u{1}b")), "a\\x01b");
        assert_eq!(
            format!("{:?}", Address::ipv4(Ipv4Addr::new(1, 2, 3, 4))),
            "IP(1.2.3.4)"
        );
        assert_eq!(Address::name("x").as_ip(), None);
    }
}
