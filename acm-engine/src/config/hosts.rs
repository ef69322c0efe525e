//! The address preload file (`addr_preload acm_hosts`, `addr_data_file`,
//! docs/daemon.md §8): `<address> <IB GID>` lines that seed the destination cache when an
//! endpoint is created, so listed hosts resolve without a multicast query.

use super::diagnostic::{Diagnostic, Severity};
use super::lex::{self, Scanner};
use crate::Address;
use acm_proto::Gid;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One valid line of the hosts file: the destination `address` lives at `gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostEntry {
    /// The line number, from 1, for the engine's log messages.
    pub line: usize,
    /// The destination: IP for an IPv4 literal, IP6 for an IPv6 literal, else NAME.
    pub address: Address,
    /// The destination's GID.
    pub gid: Gid,
}

/// Parses the hosts file `text` (named `file`) by the reference's rules
/// (docs/daemon.md §8): 120-byte `fgets` chunks (a longer line is split), `#` in column 0
/// for comments, two fields read as `%45s %45s` (anything after them is ignored). The GID
/// must be IPv6 text, or the line is skipped with a [`Severity::Error`]. A line with a
/// single field is skipped with a [`Severity::Notice`]; blank lines silently.
#[must_use]
pub fn parse_hosts(
    file: &str,
    text: &(impl AsRef<[u8]> + ?Sized),
) -> (Vec<HostEntry>, Vec<Diagnostic>) {
    let text = text.as_ref();
    let mut entries = Vec::new();
    let mut diags = Vec::new();
    for (line, chunk) in lex::chunks(text, lex::LINE_120) {
        if chunk.first() == Some(&b'#') || lex::is_blank(chunk) {
            continue;
        }
        let mut sc = Scanner::new(chunk);
        let (Some(addr), Some(gid)) = (sc.string(45), sc.string(45)) else {
            diags.push(Diagnostic::new(
                file,
                line,
                Severity::Notice,
                String::from("line ignored: expected '<address> <IB GID>'"),
            ));
            continue;
        };
        let Some(gid) = core::str::from_utf8(gid)
            .ok()
            .and_then(|g| g.parse::<Gid>().ok())
        else {
            diags.push(Diagnostic::new(
                file,
                line,
                Severity::Error,
                format!(
                    "invalid GID '{}'; line skipped",
                    String::from_utf8_lossy(gid)
                ),
            ));
            continue;
        };
        entries.push(HostEntry {
            line,
            address: lex::detect_address(addr),
            gid,
        });
    }
    (entries, diags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Bytes64;
    use acm_proto::client::AddrType;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn parse(text: &str) -> (Vec<HostEntry>, Vec<Diagnostic>) {
        parse_hosts("ibacm_hosts.data", text)
    }

    #[test]
    fn reference_file() {
        let (e, d) = parse(include_str!(
            "../../../testdata/reference-fabric/ibacm_hosts.data"
        ));
        assert!(d.is_empty(), "{d:?}");
        let gid = Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_00a0_b002);
        assert_eq!(
            e,
            [
                HostEntry {
                    line: 2,
                    address: Address::ipv4(Ipv4Addr::new(10, 0, 0, 2)),
                    gid
                },
                HostEntry {
                    line: 3,
                    address: Address::ipv6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
                    gid
                },
                HostEntry {
                    line: 4,
                    address: Address::name("host2"),
                    gid
                },
            ]
        );
        let types: Vec<_> = e.iter().map(|e| e.address.ty).collect();
        assert_eq!(types, [AddrType::IP, AddrType::IP6, AddrType::NAME]);
    }

    #[test]
    fn bad_lines() {
        let text = "\
#10.0.0.9 fe80::9

   \t
lonely
h1 notagid
h2 fe80::1 trailing words
 h3\tfe80::3\r
h4 10.0.0.1
";
        let (e, d) = parse(text);
        let got: Vec<_> = e
            .iter()
            .map(|e| {
                (
                    e.line,
                    alloc::format!("{}", e.address),
                    alloc::format!("{}", e.gid),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (6, "h2".into(), "fe80::1".into()),
                (7, "h3".into(), "fe80::3".into())
            ]
        );
        let sev: Vec<_> = d.iter().map(|d| (d.line, d.severity)).collect();
        assert_eq!(
            sev,
            [
                (4, Severity::Notice),
                (5, Severity::Error),
                (8, Severity::Error)
            ]
        );
        assert_eq!(d[1].message, "invalid GID 'notagid'; line skipped");
    }

    #[test]
    fn widths_and_chunks() {
        // A 45-character name is whole.
        let name = "n".repeat(45);
        let (e, d) = parse(&alloc::format!("{name} fe80::1\n"));
        assert!(d.is_empty());
        assert_eq!(e[0].address.bytes, Bytes64::zero_padded(name.as_bytes()));
        // A 46-character one spills its last byte into the GID field.
        let (e, d) = parse(&alloc::format!("{name}n fe80::1\n"));
        assert!(e.is_empty());
        assert_eq!(d[0].message, "invalid GID 'n'; line skipped");
        // A GID token longer than 45 characters is cut: here the cut makes it valid.
        let gid = "0000:0000:0000:0000:0000:ffff:255.255.255.255";
        assert_eq!(gid.len(), 45);
        let (e, d) = parse(&alloc::format!("h {gid}5\n"));
        assert!(d.is_empty());
        assert_eq!(e[0].gid, Gid::from_parts(0, 0xffff_ffff_ffff));
        // Long lines split at 119 bytes.
        let (e, d) = parse(&alloc::format!("{}h fe80::5\n", " ".repeat(119)));
        assert!(d.is_empty());
        assert_eq!(e[0].line, 1);
        assert_eq!(e[0].gid, Gid::from_parts(0xfe80_0000_0000_0000, 5));
    }

    #[test]
    fn latin1_bytes_do_not_break_the_file() {
        let text = b"# h\xf4tes\nn\xe9ud fe80::1\nfakehost fe80::2\n";
        let (entries, d) = parse_hosts("ibacm_hosts.data", &text[..]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].address.bytes.until_nul(), b"n\xe9ud");
        assert_eq!(entries[1].line, 3);
    }

    quickcheck::quickcheck! {
        fn never_panics(text: String) -> bool {
            let _ = parse_hosts("f", &text);
            true
        }

        fn never_panics_on_pairs(pairs: Vec<(String, u8, String)>) -> bool {
            const G: [&str; 5] = ["fe80::1", "::", "ffff::ffff:1.2.3.4", "fe80::", "#"];
            let mut text = String::new();
            for (a, g, tail) in &pairs {
                text.push_str(&alloc::format!("{a} {}{tail}\n", G.get(usize::from(*g) % G.len()).copied().unwrap_or("")));
            }
            let (e, d) = parse_hosts("f", &text);
            e.iter().all(|e| e.line >= 1) && d.iter().all(|d| d.line >= 1)
        }
    }
}
