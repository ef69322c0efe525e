//! Numbers read the way the C library reads them.
//!
//! `ib_acme` reads option values with `atoi` (junk is 0, `-P 5x` is endpoint 5) and the
//! daemon's TCP port file with `scanf("%hu")`; matching those rules keeps our command
//! lines and port files interchangeable with Debian's.

/// C's `atoi`: skips leading white space, reads an optional sign and decimal digits, stops
/// at the first other character; the value is computed like `strtol` (clamped to the
/// 64-bit range) and then truncated to `int`, as glibc's `atoi` does.
#[must_use]
pub fn atoi(text: &str) -> i32 {
    // Truncation to int is what glibc's atoi does with the long strtol returns.
    strtol(text).map_or(0, |v| v as i32)
}

/// `scanf("%hu")`: like `atoi` but the conversion fails (`None`) when no digit follows
/// the optional sign, and the value wraps to 16 bits (`-1` reads as 65535).
#[must_use]
pub fn scan_hu(text: &str) -> Option<u16> {
    // strtoul semantics: a negative number is negated in unsigned arithmetic; the
    // conversion to unsigned short keeps the low 16 bits.
    strtol(text).map(|v| v as u16)
}

/// Leading white space, sign and digits; `None` without any digit.
fn strtol(text: &str) -> Option<i64> {
    let s = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut value: i64 = 0;
    let mut any = false;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        any = true;
        let d = i64::from(b - b'0');
        value = if negative {
            value.saturating_mul(10).saturating_sub(d)
        } else {
            value.saturating_mul(10).saturating_add(d)
        };
    }
    any.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_matches_c() {
        assert_eq!(atoi("42"), 42);
        assert_eq!(atoi("  -7x"), -7);
        assert_eq!(atoi("+3"), 3);
        assert_eq!(atoi("x3"), 0);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("5x"), 5);
        assert_eq!(atoi("70000"), 70_000);
        // 99999999999 fits in a long; truncated to int as glibc does.
        assert_eq!(atoi("99999999999"), 1_215_752_191);
        assert_eq!(atoi("-1"), -1);
        assert_eq!(atoi("\t\n12"), 12);
    }

    #[test]
    fn scan_hu_matches_scanf() {
        assert_eq!(scan_hu("16125\n"), Some(16125));
        assert_eq!(scan_hu("  7777 junk"), Some(7777));
        assert_eq!(scan_hu("70000"), Some(4464));
        assert_eq!(scan_hu("-1"), Some(65535));
        assert_eq!(scan_hu("+12"), Some(12));
        assert_eq!(scan_hu("0x10"), Some(0));
        assert_eq!(scan_hu("junk"), None);
        assert_eq!(scan_hu(""), None);
        assert_eq!(scan_hu("-"), None);
    }
}
