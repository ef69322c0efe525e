//! The daemon's configuration files, parsed from text: the options file
//! (`ibacm_opts.cfg`), the address file (`ibacm_addr.cfg`), the address preload file
//! (`ibacm_hosts.data`) and the route preload file (OpenSM's full path-record dump).
//!
//! Why these parsers copy the reference's line rules so literally: administrators already
//! have these files, written for (and tested against) the C daemon. They must mean exactly
//! the same thing here, quirks included: lines are read in fixed-size `fgets` chunks, so a
//! very long line becomes several lines; fields are read as `sscanf("%Ns")` reads them, so
//! an over-long token spills into the next field; numbers go through `atoi`/`strtol`, so
//! junk reads as 0; and `route_timeout` is the one option whose name is case-sensitive.
//!
//! Nothing here fails on a file. The reference logs a bad line and carries on, so every
//! parser returns what it could read plus a list of [`Diagnostic`]s for the daemon to log.
//! The parsers never touch the file system; the caller reads the file and passes its
//! bytes and its name (used only in diagnostics). The text is bytes, not UTF-8, as the
//! reference reads it: a Latin-1 byte in a comment or a name must not cost the file
//! (names keep their bytes; messages show them lossily).

pub mod addr_file;
pub mod diagnostic;
pub mod hosts;
pub mod options;
pub mod reload;
pub mod route_data;

pub use addr_file::{AddrFile, AddrFileLine, PkeySpec};
pub use diagnostic::{Diagnostic, NOTICES_LOGGED, PROBLEMS_LOGGED, Severity, Summary, summarize};
pub use hosts::{HostEntry, parse_hosts};
pub use options::{
    AddrPreload, AddrProt, AddrProts, BUILTIN_PROVIDER, DAEMON_OPTIONS, DEFAULT_RESOLVE_DEPTH,
    LoopbackProt, OptionLine, Options, ProviderRule, ProviderTarget, RoutePreload, RouteProt,
    ServerMode, expiry_minutes,
};
pub use reload::{OptionChange, OptionLines, Reconfig, Takes};
pub use route_data::{RouteData, RoutePath, RouteSection};

/// The C library's text primitives (`fgets` chunks, `sscanf` fields, `atoi`, `strtol`,
/// `strtoull`), shared by every parser so each rule is written once.
mod lex {
    use crate::Address;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// The buffer length minus one of the reference's `fgets` calls for the options,
    /// address and hosts files (`char s[120]`).
    pub(super) const LINE_120: usize = 119;

    /// The same for the provider lines of the options file and the route preload file
    /// (`char s[128]`).
    pub(super) const LINE_128: usize = 127;

    /// C's `isspace` in the C locale: space, `\t`, `\n`, `\v`, `\f`, `\r`.
    pub(super) const fn is_c_space(b: u8) -> bool {
        matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
    }

    /// The text as repeated `fgets(buf, max_line_len + 1, file)` calls deliver it, each
    /// piece with the file's real (1-based) line number.
    ///
    /// A line longer than `max_line_len` bytes comes out as several chunks that share its
    /// line number, and each is parsed as a line of its own, as in the reference. Blank
    /// lines produce nothing (every parser ignores them anyway). A chunk is cut at its
    /// first NUL byte, because C sees the buffer as a NUL-terminated string. Chunks are
    /// bytes, not `str`, because a cut may fall inside a UTF-8 sequence.
    pub(super) fn chunks(text: &[u8], max_line_len: usize) -> impl Iterator<Item = (usize, &[u8])> {
        let max = max_line_len.max(1);
        text.split(|&b| b == b'\n')
            .enumerate()
            .flat_map(move |(i, line)| line.chunks(max).map(move |c| (i + 1, until_nul(c))))
    }

    /// The bytes before the first NUL.
    fn until_nul(s: &[u8]) -> &[u8] {
        match s.iter().position(|&b| b == 0) {
            Some(n) => s.get(..n).unwrap_or(s),
            None => s,
        }
    }

    /// Whether a chunk holds nothing but whitespace.
    pub(super) fn is_blank(s: &[u8]) -> bool {
        s.iter().all(|&b| is_c_space(b))
    }

    /// `s` without C whitespace at either end.
    pub(super) fn trim(s: &[u8]) -> &[u8] {
        let start = s.iter().position(|&b| !is_c_space(b)).unwrap_or(s.len());
        let end = s
            .iter()
            .rposition(|&b| !is_c_space(b))
            .map_or(start, |e| e + 1);
        s.get(start..end).unwrap_or(&[])
    }

    /// Field-by-field reading of one chunk, with `sscanf`'s conversion rules.
    pub(super) struct Scanner<'a> {
        rest: &'a [u8],
    }

    impl<'a> Scanner<'a> {
        /// A scanner at the start of `s`.
        pub(super) const fn new(s: &'a [u8]) -> Self {
            Self { rest: s }
        }

        fn skip_space(&mut self) {
            let n = self
                .rest
                .iter()
                .position(|&b| !is_c_space(b))
                .unwrap_or(self.rest.len());
            self.rest = self.rest.get(n..).unwrap_or(&[]);
        }

        /// `%<width>s`: skips whitespace, then takes up to `width` non-space bytes. A
        /// longer token is cut, and its remainder is what the next conversion reads.
        /// `None` when nothing is left (sscanf stops converting there).
        pub(super) fn string(&mut self, width: usize) -> Option<&'a [u8]> {
            self.skip_space();
            let len = self
                .rest
                .iter()
                .position(|&b| is_c_space(b))
                .unwrap_or(self.rest.len());
            let take = len.min(width);
            if take == 0 {
                return None;
            }
            let (tok, rest) = self.rest.split_at_checked(take)?;
            self.rest = rest;
            Some(tok)
        }

        /// `%d`: skips whitespace, then an optionally signed decimal number. `None` when
        /// there are no digits (a matching failure). Overflow saturates as glibc's
        /// `strtol` does on LP64; the caller casts the value as C would.
        pub(super) fn int(&mut self) -> Option<i64> {
            self.skip_space();
            let (value, end) = strtol(self.rest, 10);
            if end == 0 {
                return None;
            }
            self.rest = self.rest.get(end..).unwrap_or(&[]);
            Some(value)
        }

        /// The first whitespace-delimited token, with no width limit.
        pub(super) fn token(&mut self) -> Option<&'a [u8]> {
            self.string(usize::MAX)
        }

        /// What has not been read yet.
        pub(super) const fn rest(&self) -> &'a [u8] {
            self.rest
        }
    }

    /// The raw result of C's integer scanning: sign, magnitude (saturated at `u64::MAX`,
    /// with `overflow` set) and `end`, the index just past the last digit (0 when there
    /// are no digits, as `endptr == nptr` in C).
    struct RawNumber {
        negative: bool,
        magnitude: u64,
        overflow: bool,
        end: usize,
    }

    fn digit_value(b: u8) -> Option<u32> {
        char::from(b).to_digit(36)
    }

    /// The scanning that `strtol`/`strtoull` share: leading whitespace, an optional sign,
    /// then for base 16 an optional `0x`/`0X`, and for base 0 base detection (`0x` hex,
    /// a leading `0` octal, else decimal).
    fn scan_number(s: &[u8], base: u32) -> RawNumber {
        let mut i = s.iter().position(|&b| !is_c_space(b)).unwrap_or(s.len());
        let mut negative = false;
        if let Some(&sign @ (b'+' | b'-')) = s.get(i) {
            negative = sign == b'-';
            i += 1;
        }
        let hex_prefix = s.get(i) == Some(&b'0')
            && matches!(s.get(i + 1), Some(b'x' | b'X'))
            && s.get(i + 2)
                .and_then(|&b| char::from(b).to_digit(16))
                .is_some();
        let base = match base {
            0 if hex_prefix => 16,
            0 if s.get(i) == Some(&b'0') => 8,
            0 => 10,
            b => b,
        };
        if base == 16 && hex_prefix {
            i += 2;
        }
        let mut magnitude: u64 = 0;
        let mut overflow = false;
        let start = i;
        while let Some(d) = s.get(i).and_then(|&b| digit_value(b)).filter(|&d| d < base) {
            match magnitude
                .checked_mul(u64::from(base))
                .and_then(|m| m.checked_add(u64::from(d)))
            {
                Some(m) => magnitude = m,
                None => {
                    overflow = true;
                    magnitude = u64::MAX;
                }
            }
            i += 1;
        }
        let end = if i == start { 0 } else { i };
        RawNumber {
            negative,
            magnitude,
            overflow,
            end,
        }
    }

    /// C's `strtol` on LP64 (`long` is 64 bits): the value, saturated at the `i64`
    /// bounds on overflow, and the end index (0 when no digits were read).
    pub(super) fn strtol(s: &[u8], base: u32) -> (i64, usize) {
        let n = scan_number(s, base);
        let value = if n.negative {
            if n.overflow || n.magnitude > i64::MIN.unsigned_abs() {
                i64::MIN
            } else {
                0i64.wrapping_sub_unsigned(n.magnitude)
            }
        } else if n.overflow || n.magnitude > i64::MAX as u64 {
            i64::MAX
        } else {
            n.magnitude as i64
        };
        (value, n.end)
    }

    /// C's `strtoull`: the value (`u64::MAX` on overflow; a minus sign negates modulo
    /// 2^64) and the end index (0 when no digits were read).
    pub(super) fn strtoull(s: &[u8], base: u32) -> (u64, usize) {
        let n = scan_number(s, base);
        let value = if n.overflow {
            u64::MAX
        } else if n.negative {
            n.magnitude.wrapping_neg()
        } else {
            n.magnitude
        };
        (value, n.end)
    }

    /// glibc's `atoi`, which is `(int) strtol(s, NULL, 10)`: junk reads as 0, and an
    /// out-of-range number keeps the low 32 bits of the saturated `long`.
    pub(super) fn atoi(s: &[u8]) -> i32 {
        strtol(s, 10).0 as i32
    }

    /// Whether the whole of `s` is one number in `base` (what a careful reader of the
    /// file would call "numeric"); used only to decide whether to warn.
    pub(super) fn is_number(s: &[u8], base: u32) -> bool {
        let (_, end) = strtoull(s, base);
        end != 0 && end == s.len()
    }

    /// The address a token names, detected as the reference does: an IPv4 literal
    /// (`inet_pton(AF_INET)`), else an IPv6 literal, else a name (zero-padded to 64
    /// bytes, cut there).
    pub(super) fn detect_address(token: &[u8]) -> Address {
        let text = core::str::from_utf8(token).ok();
        if let Some(v4) = text.and_then(|t| t.parse::<Ipv4Addr>().ok()) {
            Address::ipv4(v4)
        } else if let Some(v6) = text.and_then(|t| t.parse::<Ipv6Addr>().ok()) {
            Address::ipv6(v6)
        } else {
            Address {
                ty: acm_proto::client::AddrType::NAME,
                bytes: acm_proto::Bytes64::zero_padded(token),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use alloc::vec::Vec;

        #[test]
        fn chunks_split_like_fgets() {
            let long = "a".repeat(250);
            let text = alloc::format!("x\n\n{long}\r\n# c\nlast");
            let got: Vec<(usize, &[u8])> = chunks(text.as_bytes(), 119).collect();
            assert_eq!(got.len(), 6);
            assert_eq!(got[0], (1, &b"x"[..]));
            assert_eq!(got[1].0, 3);
            assert_eq!(got[1].1.len(), 119);
            assert_eq!(got[2], (3, "a".repeat(119).as_bytes()));
            assert_eq!(got[3], (3, &b"aaaaaaaaaaaa\r"[..]));
            assert_eq!(got[4], (4, &b"# c"[..]));
            assert_eq!(got[5], (5, &b"last"[..]));
        }

        #[test]
        fn chunks_cut_at_nul_and_never_empty_width() {
            let got: Vec<_> = chunks(b"ab\0cd\n", 0).collect();
            assert_eq!(
                got,
                [
                    (1, &b"a"[..]),
                    (1, &b"b"[..]),
                    (1, &b""[..]),
                    (1, &b"c"[..]),
                    (1, &b"d"[..])
                ]
            );
            let got: Vec<_> = chunks(b"ab\0cd", 119).collect();
            assert_eq!(got, [(1, &b"ab"[..])]);
        }

        #[test]
        fn scanner_follows_sscanf() {
            let mut s = Scanner::new(b"  abcdef\tgh 12x");
            assert_eq!(s.string(4), Some(&b"abcd"[..]));
            assert_eq!(s.string(10), Some(&b"ef"[..]));
            assert_eq!(s.string(10), Some(&b"gh"[..]));
            assert_eq!(s.int(), Some(12));
            assert_eq!(s.rest(), b"x");
            assert_eq!(s.int(), None);
            assert_eq!(s.token(), Some(&b"x"[..]));
            assert_eq!(s.token(), None);
            assert_eq!(Scanner::new(b"-").int(), None);
            assert_eq!(Scanner::new(b" -7").int(), Some(-7));
        }

        #[test]
        fn integer_scanning_matches_c() {
            assert_eq!(atoi(b"42"), 42);
            assert_eq!(atoi(b"  -5x"), -5);
            assert_eq!(atoi(b"junk"), 0);
            assert_eq!(atoi(b"+7"), 7);
            assert_eq!(atoi(b"99999999999999999999"), -1);
            assert_eq!(atoi(b"4294967297"), 1);
            assert_eq!(strtol(b"0x1", 0), (1, 3));
            assert_eq!(strtol(b"010", 0), (8, 3));
            assert_eq!(strtol(b"0x", 0), (0, 1));
            assert_eq!(strtol(b"0xg", 16), (0, 1));
            assert_eq!(strtol(b"ffff", 16), (0xffff, 4));
            assert_eq!(strtol(b"0XFfFf", 16), (0xffff, 6));
            assert_eq!(strtol(b"-1", 16), (-1, 2));
            assert_eq!(strtol(b"-99999999999999999999", 10), (i64::MIN, 21));
            assert_eq!(strtol(b"", 0), (0, 0));
            assert_eq!(strtol(b"-", 0), (0, 0));
            assert_eq!(strtol(b"08", 0), (0, 1));
            assert_eq!(
                strtoull(b"0xfe80000000000000", 0),
                (0xfe80_0000_0000_0000, 18)
            );
            assert_eq!(strtoull(b"-1", 0), (u64::MAX, 2));
            assert_eq!(strtoull(b"0x1ffffffffffffffff", 0).0, u64::MAX);
            assert!(is_number(b"0x10", 0));
            assert!(!is_number(b"10k", 10));
            assert!(!is_number(b"", 10));
        }

        #[test]
        fn trim_and_blank() {
            assert_eq!(trim(b" \t a b \r"), b"a b");
            assert_eq!(trim(b"   "), b"");
            assert!(is_blank(b" \x0b\x0c\r\t"));
            assert!(!is_blank(b" x"));
        }

        #[test]
        fn address_detection() {
            use acm_proto::client::AddrType;
            assert_eq!(detect_address(b"10.0.0.1").ty, AddrType::IP);
            assert_eq!(detect_address(b"fd00::1").ty, AddrType::IP6);
            assert_eq!(detect_address(b"010.0.0.1").ty, AddrType::NAME);
            let n = detect_address(b"host\xff");
            assert_eq!(n.ty, AddrType::NAME);
            assert_eq!(n.bytes.until_nul(), b"host\xff");
        }
    }
}
