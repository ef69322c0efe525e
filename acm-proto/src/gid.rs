//! The 128-bit InfiniBand GID (also used for multicast GIDs).

use core::fmt;
use core::net::Ipv6Addr;

wire_bytes! {
    /// A GID exactly as it travels: 16 bytes, subnet prefix first, both halves big-endian.
    ///
    /// It prints in IPv6 notation (`fe80::2:c903:a0:b001`), as `ib_acme` and the reference
    /// logs do.
    pub struct Gid([u8; 16]);
}

impl Gid {
    /// A GID from its subnet prefix and interface id.
    #[must_use]
    pub const fn from_parts(subnet_prefix: u64, interface_id: u64) -> Self {
        let p = subnet_prefix.to_be_bytes();
        let i = interface_id.to_be_bytes();
        Self([
            p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], i[0], i[1], i[2], i[3], i[4], i[5],
            i[6], i[7],
        ])
    }

    /// The upper 64 bits.
    #[must_use]
    pub const fn subnet_prefix(&self) -> u64 {
        let b = &self.0;
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// The lower 64 bits (for a port GID, the port GUID).
    #[must_use]
    pub const fn interface_id(&self) -> u64 {
        let b = &self.0;
        u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
    }

    /// Whether every byte is zero.
    #[must_use]
    pub const fn is_zero(&self) -> bool {
        u128::from_be_bytes(self.0) == 0
    }

    /// Whether this is a multicast GID (first byte 0xFF).
    #[must_use]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xFF
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Self {
        Self(b)
    }
}

impl From<Ipv6Addr> for Gid {
    fn from(a: Ipv6Addr) -> Self {
        Self(a.octets())
    }
}

impl From<Gid> for Ipv6Addr {
    fn from(g: Gid) -> Self {
        Self::from(g.0)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl core::str::FromStr for Gid {
    type Err = core::net::AddrParseError;
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        s.parse::<Ipv6Addr>().map(Self::from)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Gid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_display() {
        let g = Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_00a0_b001);
        assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
        assert_eq!(g.interface_id(), 0x0002_c903_00a0_b001);
        assert_eq!(alloc::format!("{g}"), "fe80::2:c903:a0:b001");
        assert_eq!("fe80::2:c903:a0:b001".parse::<Gid>(), Ok(g));
        assert!(!g.is_zero() && !g.is_multicast());
        assert!(Gid::ZERO.is_zero());
        assert_eq!(Gid::read(&[1, 2, 3]), None);
        assert_eq!(Gid::read(&g.0), Some(g));
    }
}
