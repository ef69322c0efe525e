//! The multicast GIDs of ibacmp's groups.
//!
//! ibacmp names each group after its partition, type of service, rate and MTU:
//!
//! | byte | value |
//! |---|---|
//! | 0–1 | `FF 15`: multicast, transient, site-local scope |
//! | 2–3 | `40 01`: the signature |
//! | 4–5 | the pkey with the full-membership bit 0x8000 forced on |
//! | 6 | type of service (always 0) |
//! | 7 | `ibv_rate` code |
//! | 8 | `ibv_mtu` code |
//! | 9–15 | zero |
//!
//! See docs/protocol/sa.md §5, docs/test-vectors.md §16.

use crate::error::{ParseError, Reason, Result};
use crate::{Gid, Mtu, Rate};

/// The first four bytes of every ibacmp MGID.
pub const ACM_MGID_PREFIX: [u8; 4] = [0xFF, 0x15, 0x40, 0x01];

/// The partition-key membership bit that the MGID always carries.
pub const PKEY_FULL_MEMBER: u16 = 0x8000;

/// The parts of an ibacmp multicast GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AcmMgid {
    /// Partition key. [`AcmMgid::to_gid`] forces bit 0x8000 on, so 0x7FFF and 0xFFFF name
    /// the same group; a parsed value always has it set.
    pub pkey: u16,
    /// Type of service (ibacmp always uses 0).
    pub tos: u8,
    /// Rate code.
    pub rate: Rate,
    /// MTU code.
    pub mtu: Mtu,
}

impl AcmMgid {
    /// The group for `pkey`, `rate` and `mtu` with type of service 0, as ibacmp derives it.
    #[must_use]
    pub const fn new(pkey: u16, rate: Rate, mtu: Mtu) -> Self {
        Self {
            pkey,
            tos: 0,
            rate,
            mtu,
        }
    }

    /// The 16-byte multicast GID.
    #[must_use]
    pub const fn to_gid(&self) -> Gid {
        let pk = (self.pkey | PKEY_FULL_MEMBER).to_be_bytes();
        let p = ACM_MGID_PREFIX;
        Gid([
            p[0],
            p[1],
            p[2],
            p[3],
            pk[0],
            pk[1],
            self.tos,
            self.rate.0,
            self.mtu.0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ])
    }

    /// Splits an ibacmp MGID into its parts. Fails with a [`ParseError`] naming the first
    /// byte that does not follow the scheme: the multicast prefix and scope (bytes 0–1),
    /// the signature (bytes 2–3), a pkey without the 0x8000 bit (byte 4; the scheme
    /// forces it on), or a non-zero byte among 9–15. So whenever parsing succeeds,
    /// [`AcmMgid::to_gid`] gives back exactly `gid`.
    pub fn parse(gid: &Gid) -> Result<Self> {
        const FORMAT: &str = "ACM MGID";
        let b = &gid.0;
        let checks: [(&'static str, usize, &'static str); 4] = [
            ("prefix", 0, "not FF (multicast)"),
            ("flags_scope", 1, "not 15 (transient, site-local)"),
            ("signature", 2, "signature is not 4001"),
            ("signature", 3, "signature is not 4001"),
        ];
        for (field, i, why) in checks {
            if b[i] != ACM_MGID_PREFIX[i] {
                return Err(ParseError::new(
                    FORMAT,
                    field,
                    i,
                    Reason::BadValue {
                        value: u64::from(b[i]),
                        why,
                    },
                ));
            }
        }
        if b[4] & 0x80 == 0 {
            return Err(ParseError::new(
                FORMAT,
                "pkey",
                4,
                Reason::BadValue {
                    value: u64::from(u16::from_be_bytes([b[4], b[5]])),
                    why: "membership bit 0x8000 is clear",
                },
            ));
        }
        if let Some(i) = (9..16).find(|&i| b[i] != 0) {
            return Err(ParseError::new(
                FORMAT,
                "reserved",
                i,
                Reason::BadValue {
                    value: u64::from(b[i]),
                    why: "bytes 9-15 must be zero",
                },
            ));
        }
        Ok(Self {
            pkey: u16::from_be_bytes([b[4], b[5]]),
            tos: b[6],
            rate: Rate(b[7]),
            mtu: Mtu(b[8]),
        })
    }
}

impl From<AcmMgid> for Gid {
    fn from(m: AcmMgid) -> Self {
        m.to_gid()
    }
}

impl TryFrom<&Gid> for AcmMgid {
    type Error = ParseError;
    fn try_from(g: &Gid) -> Result<Self> {
        Self::parse(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for AcmMgid {
        fn arbitrary(g: &mut Gen) -> Self {
            Self {
                pkey: u16::arbitrary(g),
                tos: u8::arbitrary(g),
                rate: Rate(u8::arbitrary(g)),
                mtu: Mtu(u8::arbitrary(g)),
            }
        }
    }

    fn gid(s: &str) -> Gid {
        s.parse().unwrap()
    }

    /// docs/protocol/sa.md §5 and docs/test-vectors.md §16.
    #[test]
    fn spec_vectors() {
        let m = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
        assert_eq!(m.to_gid(), gid("ff15:4001:ffff:3:400::"));
        assert_eq!(
            m.to_gid().0,
            [
                0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0x00, 0x03, 0x04, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(
            AcmMgid::new(0x7FFF, Rate::RATE_10, Mtu::MTU_2048).to_gid(),
            gid("ff15:4001:ffff:3:400::")
        );
        let m = AcmMgid::new(0x8001, Rate::RATE_40, Mtu::MTU_4096);
        assert_eq!(m.to_gid(), gid("ff15:4001:8001:7:500::"));
        assert_eq!(
            AcmMgid::new(0x0001, Rate::RATE_40, Mtu::MTU_4096).to_gid(),
            gid("ff15:4001:8001:7:500::")
        );
        assert_eq!(Gid::from(m), m.to_gid());
    }

    #[test]
    fn parse_known_and_forced_membership_bit() {
        let m = AcmMgid::parse(&gid("ff15:4001:ffff:3:400::")).unwrap();
        assert_eq!(m, AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048));
        let m = AcmMgid::parse(&AcmMgid::new(0x0001, Rate(7), Mtu(5)).to_gid()).unwrap();
        assert_eq!(m.pkey, 0x8001);
        assert_eq!((m.rate, m.mtu, m.tos), (Rate::RATE_40, Mtu::MTU_4096, 0));
        assert_eq!(AcmMgid::try_from(&m.to_gid()), Ok(m));
    }

    #[test]
    fn parse_names_the_bad_byte() {
        let good = gid("ff15:4001:ffff:3:400::");
        let cases: [(usize, u8, &str, u64); 7] = [
            (0, 0xFE, "prefix", 0xFE),
            (1, 0x12, "flags_scope", 0x12),
            (2, 0x60, "signature", 0x60),
            (3, 0x1B, "signature", 0x1B),
            (4, 0x7F, "pkey", 0x7FFF),
            (9, 0x01, "reserved", 0x01),
            (15, 0x80, "reserved", 0x80),
        ];
        for (i, v, field, value) in cases {
            let mut g = good;
            g.0[i] = v;
            let e = AcmMgid::parse(&g).unwrap_err();
            assert_eq!((e.format, e.field, e.offset), ("ACM MGID", field, i));
            assert!(
                matches!(e.reason, Reason::BadValue { value: got, .. } if got == value),
                "{e:?}"
            );
        }
        // The IPoIB broadcast group is not an ibacmp group.
        let e = AcmMgid::parse(&gid("ff12:401b:ffff::ffff:ffff")).unwrap_err();
        assert_eq!((e.field, e.offset), ("flags_scope", 1));
    }

    quickcheck! {
        fn prop_gid_roundtrip(m: AcmMgid) -> bool {
            let g = m.to_gid();
            match AcmMgid::parse(&g) {
                Ok(back) => back.to_gid() == g
                    && back.pkey == m.pkey | PKEY_FULL_MEMBER
                    && (back.tos, back.rate, back.mtu) == (m.tos, m.rate, m.mtu),
                Err(_) => false,
            }
        }

        fn prop_repr_roundtrip_with_member_bit(m: AcmMgid) -> bool {
            let m = AcmMgid { pkey: m.pkey | PKEY_FULL_MEMBER, ..m };
            AcmMgid::parse(&m.to_gid()) == Ok(m)
        }

        fn prop_well_formed_gids_parse_exactly(g: Gid) -> bool {
            let mut b = g.0;
            b[..4].copy_from_slice(&ACM_MGID_PREFIX);
            b[4] |= 0x80;
            b[9..].fill(0);
            let g = Gid(b);
            AcmMgid::parse(&g).map(|m| m.to_gid()) == Ok(g)
        }

        fn prop_arbitrary_gids_never_panic(g: Gid) -> bool {
            match AcmMgid::parse(&g) {
                Ok(m) => m.to_gid() == g,
                Err(_) => {
                    g.0[..4] != ACM_MGID_PREFIX
                        || g.0[4] & 0x80 == 0
                        || g.0[9..].iter().any(|&x| x != 0)
                }
            }
        }
    }
}
