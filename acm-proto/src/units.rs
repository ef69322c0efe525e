//! IB MTU and rate code points, and the 2-bit selector that SA records put in front of
//! MTU, rate and packet lifetime.

open_enum! {
    /// IB MTU enum (`ibv_mtu`): 1 = 256 bytes … 5 = 4096 bytes.
    pub struct Mtu(u8) {
        /// 256 bytes.
        MTU_256 = 1,
        /// 512 bytes.
        MTU_512 = 2,
        /// 1024 bytes.
        MTU_1024 = 3,
        /// 2048 bytes.
        MTU_2048 = 4,
        /// 4096 bytes.
        MTU_4096 = 5,
    }
}

impl Mtu {
    /// The MTU in bytes, for a known code.
    #[must_use]
    pub const fn bytes(self) -> Option<u32> {
        match self.0 {
            1..=5 => Some(128 << self.0),
            _ => None,
        }
    }

    /// The code for an exact MTU in bytes.
    #[must_use]
    pub const fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Self::MTU_256),
            512 => Some(Self::MTU_512),
            1024 => Some(Self::MTU_1024),
            2048 => Some(Self::MTU_2048),
            4096 => Some(Self::MTU_4096),
            _ => None,
        }
    }
}

open_enum! {
    /// IB static rate enum (`ibv_rate`). The numbering is historical, not ordered by speed.
    pub struct Rate(u8) {
        /// 2.5 Gb/s.
        RATE_2_5 = 2,
        /// 5 Gb/s.
        RATE_5 = 5,
        /// 10 Gb/s.
        RATE_10 = 3,
        /// 20 Gb/s.
        RATE_20 = 6,
        /// 30 Gb/s.
        RATE_30 = 4,
        /// 40 Gb/s.
        RATE_40 = 7,
        /// 60 Gb/s.
        RATE_60 = 8,
        /// 80 Gb/s.
        RATE_80 = 9,
        /// 120 Gb/s.
        RATE_120 = 10,
        /// 14 Gb/s.
        RATE_14 = 11,
        /// 56 Gb/s.
        RATE_56 = 12,
        /// 112 Gb/s.
        RATE_112 = 13,
        /// 168 Gb/s.
        RATE_168 = 14,
        /// 25 Gb/s.
        RATE_25 = 15,
        /// 100 Gb/s.
        RATE_100 = 16,
        /// 200 Gb/s.
        RATE_200 = 17,
        /// 300 Gb/s.
        RATE_300 = 18,
        /// 28 Gb/s.
        RATE_28 = 19,
        /// 50 Gb/s.
        RATE_50 = 20,
        /// 400 Gb/s.
        RATE_400 = 21,
        /// 600 Gb/s.
        RATE_600 = 22,
        /// 800 Gb/s.
        RATE_800 = 23,
        /// 1200 Gb/s.
        RATE_1200 = 24,
    }
}

/// (code, Mb/s) for every known rate; Mb/s keeps 2.5 Gb/s exact without floats.
const RATE_MBPS: [(u8, u32); 23] = [
    (2, 2_500),
    (5, 5_000),
    (3, 10_000),
    (6, 20_000),
    (4, 30_000),
    (7, 40_000),
    (8, 60_000),
    (9, 80_000),
    (10, 120_000),
    (11, 14_000),
    (12, 56_000),
    (13, 112_000),
    (14, 168_000),
    (15, 25_000),
    (16, 100_000),
    (17, 200_000),
    (18, 300_000),
    (19, 28_000),
    (20, 50_000),
    (21, 400_000),
    (22, 600_000),
    (23, 800_000),
    (24, 1_200_000),
];

impl Rate {
    /// The rate in Mb/s, for a known code.
    #[must_use]
    pub fn mbps(self) -> Option<u32> {
        RATE_MBPS
            .iter()
            .find(|(c, _)| *c == self.0)
            .map(|(_, m)| *m)
    }

    /// The rate in Gb/s, for a known code.
    #[must_use]
    pub fn gbps(self) -> Option<f64> {
        self.mbps().map(|m| f64::from(m) / 1000.0)
    }

    /// The code for an exact rate in Mb/s.
    #[must_use]
    pub fn from_mbps(mbps: u32) -> Option<Self> {
        RATE_MBPS
            .iter()
            .find(|(_, m)| *m == mbps)
            .map(|(c, _)| Self(*c))
    }

    /// The code for an exact rate in Gb/s (2.5, 10, 40, …).
    #[must_use]
    pub fn from_gbps(gbps: f64) -> Option<Self> {
        if !(gbps > 0.0 && gbps < 10_000.0) {
            return None;
        }
        let mbps = gbps * 1000.0;
        // Exact rates only: 2.5 → 2500, not 2499.9.
        let rounded = (mbps + 0.5) as u32;
        if (f64::from(rounded) - mbps).abs() > 1e-6 {
            return None;
        }
        Self::from_mbps(rounded)
    }
}

open_enum! {
    /// The 2-bit selector in the top bits of SA MTU, rate and packet-lifetime bytes.
    pub struct Selector(u8) {
        /// Greater than the value.
        GREATER_THAN = 0,
        /// Less than the value.
        LESS_THAN = 1,
        /// Exactly the value.
        EXACTLY = 2,
        /// The largest available.
        LARGEST_AVAILABLE = 3,
    }
}

/// A selector plus a 6-bit value, packed as `selector << 6 | value` in one byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Selected<T> {
    /// Bits 7:6.
    pub selector: Selector,
    /// Bits 5:0.
    pub value: T,
}

impl<T: From<u8> + Into<u8> + Copy> Selected<T> {
    /// `value` with the "exactly" selector, as ibacm writes MTU and rate.
    pub fn exactly(value: T) -> Self {
        Self {
            selector: Selector::EXACTLY,
            value,
        }
    }

    /// Unpacks the wire byte.
    pub fn from_byte(b: u8) -> Self {
        Self {
            selector: Selector(b >> 6),
            value: T::from(b & 0x3F),
        }
    }

    /// Packs into the wire byte (the selector and value are masked to their widths).
    pub fn to_byte(self) -> u8 {
        ((self.selector.0 & 0x3) << 6) | (self.value.into() & 0x3F)
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Selected<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} {:?}", self.selector, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_conversions() {
        assert_eq!(Mtu::MTU_2048.bytes(), Some(2048));
        assert_eq!(Mtu(0).bytes(), None);
        assert_eq!(Mtu::from_bytes(4096), Some(Mtu::MTU_4096));
        assert_eq!(Mtu::from_bytes(3000), None);
        for m in Mtu::KNOWN {
            assert_eq!(Mtu::from_bytes(m.bytes().unwrap()), Some(*m));
        }
    }

    #[test]
    fn rate_conversions() {
        assert_eq!(Rate::RATE_10.gbps(), Some(10.0));
        assert_eq!(Rate::RATE_2_5.mbps(), Some(2500));
        assert_eq!(Rate::from_gbps(2.5), Some(Rate::RATE_2_5));
        assert_eq!(Rate::from_gbps(40.0), Some(Rate(7)));
        assert_eq!(Rate::from_gbps(41.0), None);
        assert_eq!(Rate::from_gbps(f64::NAN), None);
        assert_eq!(Rate(0).gbps(), None);
        for r in Rate::KNOWN {
            assert_eq!(Rate::from_mbps(r.mbps().unwrap()), Some(*r));
        }
    }

    #[test]
    fn selected_packing() {
        let s = Selected::<Mtu>::from_byte(0x84);
        assert_eq!(s.selector, Selector::EXACTLY);
        assert_eq!(s.value, Mtu::MTU_2048);
        assert_eq!(s.to_byte(), 0x84);
        assert_eq!(Selected::exactly(Rate::RATE_10).to_byte(), 0x83);
        assert_eq!(Selected::<u8>::from_byte(0x92).value, 18);
        assert_eq!(alloc::format!("{s:?}"), "EXACTLY MTU_2048");
    }
}
