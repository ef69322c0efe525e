//! Address formats for `-s` / `-d` (`-f i|n|l|g`), their auto-detection when `-f` is left
//! out (docs/ib-acme.md §3), and address text exactly as glibc writes it.
//!
//! Output compatibility is the point of the printing half: GIDs and IPv6 addresses are
//! printed with glibc's `inet_ntop` rules, which differ from Rust's `Ipv6Addr` display for
//! IPv4-compatible addresses (`::1:2` prints as `::0.1.0.2`).

use dns_lookup::{AddrInfoHints, SockType};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The `-f` address format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrFormat {
    /// `i`: an IPv4 or IPv6 address.
    Ip,
    /// `n`: a name the daemon knows from its address file.
    Name,
    /// `l`: a LID (a number, read with `atoi`).
    Lid,
    /// `g`: a GID written as an IPv6 address.
    Gid,
    /// No `-f`: detect per destination ([`detect`]).
    Unspecified,
}

impl AddrFormat {
    /// The format named by a `-f` argument. Like Debian, only the first character counts
    /// (`-f ip` is `i`), and `u` is refused although the manual lists it.
    #[must_use]
    pub fn from_flag(arg: &str) -> Option<Self> {
        match arg.as_bytes().first() {
            Some(b'i') => Some(Self::Ip),
            Some(b'n') => Some(Self::Name),
            Some(b'l') => Some(Self::Lid),
            Some(b'g') => Some(Self::Gid),
            _ => None,
        }
    }

    /// The format's letter (`Unsupported src_type 108` prints it as a number).
    #[must_use]
    pub const fn letter(self) -> u8 {
        match self {
            Self::Ip => b'i',
            Self::Name => b'n',
            Self::Lid => b'l',
            Self::Gid => b'g',
            Self::Unspecified => b'u',
        }
    }

    /// A word for JSON output.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ip => "ip",
            Self::Name => "name",
            Self::Lid => "lid",
            Self::Gid => "gid",
            Self::Unspecified => "unspecified",
        }
    }
}

/// `inet_pton(AF_INET)`: four decimal parts, each 0..=255, no leading zeros. Rust's parser
/// applies the same rules.
#[must_use]
pub fn parse_ipv4(text: &str) -> Option<Ipv4Addr> {
    text.parse().ok()
}

/// `inet_pton(AF_INET6)`, including an embedded dotted IPv4 tail.
#[must_use]
pub fn parse_ipv6(text: &str) -> Option<Ipv6Addr> {
    text.parse().ok()
}

/// An IP literal of either family: IPv4 is tried first, as `ib_acme` does.
#[must_use]
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    parse_ipv4(text)
        .map(IpAddr::V4)
        .or_else(|| parse_ipv6(text).map(IpAddr::V6))
}

/// `inet_ntop(AF_INET6)` as glibc writes it: lower-case hex words without leading zeros,
/// the first longest run of two or more zero words as `::`, and a dotted IPv4 tail for
/// IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`, with a non-zero
/// seventh word) addresses.
#[must_use]
pub fn ntop6(bytes: &[u8; 16]) -> String {
    let words: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    // The first longest run of zero words.
    let (mut best, mut best_len) = (None::<usize>, 0usize);
    let mut i = 0;
    while i < 8 {
        if words[i] == 0 {
            let start = i;
            while i < 8 && words[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best = Some(start);
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = None;
    }
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if let Some(b) = best
            && (b..b + best_len).contains(&i)
        {
            if i == b {
                out.push(':');
            }
            continue;
        }
        if i != 0 {
            out.push(':');
        }
        let ipv4_tail = best == Some(0) && (best_len == 6 || (best_len == 5 && words[5] == 0xffff));
        if i == 6 && ipv4_tail {
            let v4 = Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]);
            out.push_str(&v4.to_string());
            break;
        }
        out.push_str(&format!("{w:x}"));
    }
    if best.is_some_and(|b| b + best_len == 8) {
        out.push(':');
    }
    out
}

/// An IP address as `inet_ntop` writes it.
#[must_use]
pub fn ip_to_string(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => ntop6(&v6.octets()),
    }
}

/// Auto-detection for an address given without `-f` (docs/ib-acme.md §3): an IP literal
/// is format `i` as written; otherwise a name that `getaddrinfo` (any family, TCP)
/// resolves becomes format `i` with its first address in numeric form (so `5` becomes
/// `0.0.0.5`, as glibc reads it); anything else is taken as a LID (format `l`), which
/// `atoi` turns into 0 for junk and the daemon then refuses.
#[must_use]
pub fn detect(text: &str) -> (AddrFormat, String) {
    if parse_ip(text).is_some() {
        return (AddrFormat::Ip, text.to_owned());
    }
    match lookup_numeric(text) {
        Some(numeric) => (AddrFormat::Ip, numeric),
        None => (AddrFormat::Lid, text.to_owned()),
    }
}

/// `getaddrinfo(name, AF_UNSPEC, SOCK_STREAM)` then `getnameinfo(NI_NUMERICHOST)` of the
/// first answer.
fn lookup_numeric(name: &str) -> Option<String> {
    let hints = AddrInfoHints {
        socktype: SockType::Stream.into(),
        ..AddrInfoHints::default()
    };
    let first = dns_lookup::getaddrinfo(Some(name), None, Some(hints))
        .ok()?
        .next()?
        .ok()?;
    /// glibc's NI_NUMERICHOST.
    const NI_NUMERICHOST: i32 = 1;
    match dns_lookup::getnameinfo(&first.sockaddr, NI_NUMERICHOST) {
        Ok((host, _)) => Some(host),
        Err(_) => Some(ip_to_string(first.sockaddr.ip())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ntop(text: &str) -> String {
        ntop6(&text.parse::<Ipv6Addr>().unwrap().octets())
    }

    #[test]
    fn formats_from_the_first_letter() {
        assert_eq!(AddrFormat::from_flag("i"), Some(AddrFormat::Ip));
        assert_eq!(AddrFormat::from_flag("ip"), Some(AddrFormat::Ip));
        assert_eq!(AddrFormat::from_flag("name"), Some(AddrFormat::Name));
        assert_eq!(AddrFormat::from_flag("l"), Some(AddrFormat::Lid));
        assert_eq!(AddrFormat::from_flag("g"), Some(AddrFormat::Gid));
        assert_eq!(AddrFormat::from_flag("u"), None);
        assert_eq!(AddrFormat::from_flag(""), None);
        assert_eq!(AddrFormat::from_flag("x"), None);
        assert_eq!(AddrFormat::Lid.letter(), 108);
        assert_eq!(AddrFormat::Gid.letter(), 103);
    }

    #[test]
    fn pton_rules() {
        assert_eq!(
            parse_ip("10.0.0.1"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
        assert!(parse_ip("fd00::1").is_some_and(|a| a.is_ipv6()));
        assert!(parse_ip("::ffff:1.2.3.4").is_some());
        // inet_pton refuses these (inet_aton would not).
        for bad in [
            "01.2.3.4",
            "1.2.3",
            "5",
            "1.2.3.256",
            "host2",
            "",
            "fe80::1%eth0",
            "1::2::3",
        ] {
            assert_eq!(parse_ip(bad), None, "{bad}");
        }
        assert_eq!(parse_ipv6("10.0.0.1"), None);
    }

    #[test]
    fn ntop_matches_glibc() {
        assert_eq!(ntop("fe80::2:c903:a0:b002"), "fe80::2:c903:a0:b002");
        assert_eq!(ntop("::"), "::");
        assert_eq!(ntop("::1"), "::1");
        assert_eq!(ntop("fe80::"), "fe80::");
        assert_eq!(ntop("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
        assert_eq!(ntop("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4");
        assert_eq!(ntop("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
        assert_eq!(ntop("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
        // IPv4-compatible: glibc keeps the dotted tail, Rust's Display does not.
        assert_eq!(ntop("::1:2"), "::0.1.0.2");
        assert_eq!(ntop("::102:304"), "::1.2.3.4");
        assert_eq!(ntop("FD00::A"), "fd00::a");
        assert_eq!(ip_to_string("10.0.0.2".parse().unwrap()), "10.0.0.2");
    }

    #[test]
    fn detection_of_literals_and_junk() {
        assert_eq!(detect("10.0.0.2"), (AddrFormat::Ip, "10.0.0.2".into()));
        assert_eq!(detect("fd00::2"), (AddrFormat::Ip, "fd00::2".into()));
        // glibc's getaddrinfo reads a bare number as an IPv4 address without any lookup.
        assert_eq!(detect("5"), (AddrFormat::Ip, "0.0.0.5".into()));
        // Brackets are not valid in host names, so this fails without asking DNS.
        assert_eq!(
            detect("10.0.0.[2-3]"),
            (AddrFormat::Lid, "10.0.0.[2-3]".into())
        );
    }
}
