//! The 64-byte fixed field that ACM uses for addresses, names and strings.

use core::fmt;

/// Length of every ACM address / name / string field (ACM_MAX_ADDRESS, ACM_MAX_PROV_NAME).
pub const BYTES64_LEN: usize = 64;

wire_bytes! {
    /// Sixty-four raw bytes: an address union, a NUL-padded name, or a display string.
    ///
    /// Kept as raw bytes so that whatever a peer sent is emitted back unchanged (the
    /// reference compares all 64 bytes of an address, so trailing garbage is significant).
    /// `Debug` shows printable NUL-terminated text as a string and anything else as hex.
    pub struct Bytes64([u8; BYTES64_LEN]);
}

impl Bytes64 {
    /// `prefix` followed by zeros; a prefix longer than 64 bytes is cut at 64.
    #[must_use]
    pub fn zero_padded(prefix: &[u8]) -> Self {
        let mut b = Self::ZERO;
        let n = prefix.len().min(BYTES64_LEN);
        b.0[..n].copy_from_slice(&prefix[..n]);
        b
    }

    /// A NUL-terminated string field: at most 63 bytes of `s`, then zeros.
    #[must_use]
    pub fn c_string(s: &str) -> Self {
        let bytes = s.as_bytes();
        Self::zero_padded(&bytes[..bytes.len().min(BYTES64_LEN - 1)])
    }

    /// The bytes before the first NUL (all 64 if there is none).
    #[must_use]
    pub fn until_nul(&self) -> &[u8] {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(BYTES64_LEN);
        &self.0[..end]
    }

    /// The text before the first NUL, if it is UTF-8.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        core::str::from_utf8(self.until_nul()).ok()
    }

    /// Whether every byte from `offset` on is zero.
    #[must_use]
    pub fn is_zero_from(&self, offset: usize) -> bool {
        self.0
            .get(offset..)
            .is_none_or(|t| t.iter().all(|&b| b == 0))
    }

    /// Whether this is printable text followed only by NUL padding.
    #[must_use]
    pub fn is_clean_text(&self) -> bool {
        let text = self.until_nul();
        !text.is_empty()
            && text.iter().all(|b| b.is_ascii_graphic() || *b == b' ')
            && self.is_zero_from(text.len())
    }
}

impl fmt::Debug for Bytes64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean_text() {
            // Checked printable ASCII above.
            write!(f, "{:?}", self.as_str().unwrap_or(""))
        } else if self.is_zero_from(0) {
            f.write_str("zero(64)")
        } else {
            // Hex up to the last non-zero byte, then the count of zero bytes.
            let last = self.0.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            f.write_str("hex:")?;
            for b in &self.0[..last] {
                write!(f, "{b:02x}")?;
            }
            if last < BYTES64_LEN {
                write!(f, "+zero({})", BYTES64_LEN - last)?;
            }
            Ok(())
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Bytes64 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{self:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn text_and_hex_debug() {
        assert_eq!(format!("{:?}", Bytes64::c_string("ibacmp")), "\"ibacmp\"");
        assert_eq!(format!("{:?}", Bytes64::ZERO), "zero(64)");
        assert_eq!(
            format!("{:?}", Bytes64::zero_padded(&[10, 0, 0, 1])),
            "hex:0a000001+zero(60)"
        );
        let long = "x".repeat(100);
        assert_eq!(Bytes64::c_string(&long).until_nul().len(), 63);
        assert_eq!(Bytes64::c_string("node1").as_str(), Some("node1"));
        assert!(Bytes64::zero_padded(&[1]).is_zero_from(1));
        assert!(Bytes64::ZERO.is_zero_from(64));
        assert_eq!(Bytes64::read(&[0; 10]), None);
    }
}
