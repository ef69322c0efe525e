//! The address file (`ibacm_addr.cfg`, docs/daemon.md §5): which names and addresses each
//! endpoint answers to.
//!
//! The file is parsed once into lines; the engine then picks, for each endpoint it
//! creates, the lines that [`AddrFileLine::matches`] it, in file order. IP literals are
//! kept here: whether they are allowed (`support_ips_in_addr_cfg`) is the engine's call.

use super::diagnostic::{Diagnostic, Severity};
use super::lex::{self, Scanner};
use crate::Address;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The pkey column of an address-file line, kept symbolic because `default` depends on
/// the port (its pkey at index 0), which is only known when an endpoint is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PkeySpec {
    /// `default` (any case): the port's pkey at index 0.
    Default,
    /// A hex value (`strtol` base 16, so `0x` is optional), cut to 16 bits.
    Value(u16),
}

/// One valid line of the address file, so the engine can assign it to endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrFileLine {
    /// The line number, from 1.
    pub line: usize,
    /// The name field as written (at most 46 bytes), for logs and display.
    pub text: String,
    /// The address: IP for an IPv4 literal, IP6 for an IPv6 literal, else NAME.
    pub address: Address,
    /// The device name (at most 31 bytes), compared case-insensitively.
    pub device: String,
    /// The port number: the decimal field converted to `u8` as the reference's cast does
    /// (the low 8 bits).
    pub port: u8,
    /// The pkey.
    pub pkey: PkeySpec,
}

impl AddrFileLine {
    /// Whether this line applies to the endpoint on `device` port `port` with pkey
    /// `ep_pkey`, by the reference's rule (docs/daemon.md §5): device names equal
    /// ignoring case, ports equal, and pkeys equal once the full-membership bit is set on
    /// both (`(line_pkey | 0x8000) == (ep_pkey | 0x8000)`). A `default` pkey stands for
    /// `default_pkey`, the port's pkey at index 0.
    #[must_use]
    pub fn matches(&self, device: &str, port: u8, ep_pkey: u16, default_pkey: u16) -> bool {
        let pkey = match self.pkey {
            PkeySpec::Default => default_pkey,
            PkeySpec::Value(v) => v,
        };
        self.device.eq_ignore_ascii_case(device)
            && self.port == port
            && (pkey | 0x8000) == (ep_pkey | 0x8000)
    }
}

/// The parsed address file: its valid lines, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddrFile {
    /// The file's name, for the engine's log messages.
    pub file: String,
    /// The valid lines.
    pub lines: Vec<AddrFileLine>,
}

impl AddrFile {
    /// Parses the address file `text` (named `file`) by the reference's rules
    /// (docs/daemon.md §5):
    ///
    /// * 120-byte `fgets` chunks (a longer line is split into several lines);
    /// * a `#` in column 0 makes a comment;
    /// * fields `%46s %31s %d %7s`: `<name> <device> <port> <pkey>`; a line without all
    ///   four (including a port that is not a number) is ignored with a
    ///   [`Severity::Notice`]; blank lines are skipped silently;
    /// * a pkey that is neither `default` nor entirely hex is an [`Severity::Error`], and
    ///   the line is skipped.
    #[must_use]
    pub fn parse(file: &str, text: &(impl AsRef<[u8]> + ?Sized)) -> (Self, Vec<Diagnostic>) {
        let text = text.as_ref();
        let mut lines = Vec::new();
        let mut diags = Vec::new();
        for (line, chunk) in lex::chunks(text, lex::LINE_120) {
            if chunk.first() == Some(&b'#') || lex::is_blank(chunk) {
                continue;
            }
            let Some(Fields {
                name,
                device,
                port,
                pkey,
            }) = fields(chunk)
            else {
                diags.push(Diagnostic::new(
                    file,
                    line,
                    Severity::Notice,
                    String::from("line ignored: expected '<name> <device> <port> <pkey>'"),
                ));
                continue;
            };
            let pkey = if pkey.eq_ignore_ascii_case(b"default") {
                PkeySpec::Default
            } else {
                let (value, end) = lex::strtol(pkey, 16);
                if end == 0 || end != pkey.len() {
                    diags.push(Diagnostic::new(
                        file,
                        line,
                        Severity::Error,
                        format!(
                            "invalid pkey '{}'; line skipped",
                            String::from_utf8_lossy(pkey)
                        ),
                    ));
                    continue;
                }
                // The reference keeps the `long` in a 16-bit pkey.
                PkeySpec::Value(value as u16)
            };
            lines.push(AddrFileLine {
                line,
                text: String::from_utf8_lossy(name).into_owned(),
                address: lex::detect_address(name),
                device: String::from_utf8_lossy(device).into_owned(),
                // `%d` stores an int; the reference compares it as a u8.
                port: port as u8,
                pkey,
            });
        }
        (
            Self {
                file: String::from(file),
                lines,
            },
            diags,
        )
    }
}

impl AddrFile {
    /// What is wrong with the lines naming device `device` (case-insensitively), whose
    /// ports' pkey tables are `pkeys` (port 1 first): a port it does not have, or a pkey
    /// none of that port's entries has (the membership bit ignored). Such lines never
    /// give an endpoint an address, and the reference drops them without a word.
    #[must_use]
    pub fn check_device(&self, device: &str, pkeys: &[&[u16]]) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for l in self
            .lines
            .iter()
            .filter(|l| l.device.eq_ignore_ascii_case(device))
        {
            let Some(table) = usize::from(l.port)
                .checked_sub(1)
                .and_then(|i| pkeys.get(i))
            else {
                out.push(Diagnostic::new(
                    &self.file,
                    l.line,
                    Severity::Warning,
                    format!(
                        "device {device} has no port {}; '{}' is not used",
                        l.port, l.text
                    ),
                ));
                continue;
            };
            if let PkeySpec::Value(v) = l.pkey
                && !table.iter().any(|p| (p | 0x8000) == (v | 0x8000))
            {
                out.push(Diagnostic::new(
                    &self.file,
                    l.line,
                    Severity::Warning,
                    format!(
                        "port {} of device {device} has no pkey {v:#06x}; '{}' is not used",
                        l.port, l.text
                    ),
                ));
            }
        }
        out
    }

    /// The lines naming none of `devices` (compared case-insensitively): for a caller
    /// that knows every device there is (the engine learns them one at a time).
    #[must_use]
    pub fn unknown_devices(&self, devices: &[&str]) -> Vec<Diagnostic> {
        self.lines
            .iter()
            .filter(|l| !devices.iter().any(|d| l.device.eq_ignore_ascii_case(d)))
            .map(|l| {
                Diagnostic::new(
                    &self.file,
                    l.line,
                    Severity::Warning,
                    format!(
                        "no device {}; '{}' is not used until it appears",
                        l.device, l.text
                    ),
                )
            })
            .collect()
    }
}

/// The four raw fields of a line.
struct Fields<'a> {
    name: &'a [u8],
    device: &'a [u8],
    port: i64,
    pkey: &'a [u8],
}

/// The reference's `sscanf(line, "%46s%31s%d%7s", ...)`, when it converts all four.
fn fields(chunk: &[u8]) -> Option<Fields<'_>> {
    let mut sc = Scanner::new(chunk);
    Some(Fields {
        name: sc.string(46)?,
        device: sc.string(31)?,
        port: sc.int()?,
        pkey: sc.string(7)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Bytes64;
    use acm_proto::client::AddrType;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn parse(text: &str) -> (AddrFile, Vec<Diagnostic>) {
        AddrFile::parse("ibacm_addr.cfg", text)
    }

    #[test]
    fn reference_file() {
        let (f, d) = parse(include_str!(
            "../../../testdata/reference-fabric/ibacm_addr.cfg"
        ));
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(f.file, "ibacm_addr.cfg");
        let line = |line, text: &str, address| AddrFileLine {
            line,
            text: text.into(),
            address,
            device: "fakeib0".into(),
            port: 1,
            pkey: PkeySpec::Default,
        };
        assert_eq!(
            f.lines,
            [
                line(2, "fakehost", Address::name("fakehost")),
                line(3, "10.0.0.1", Address::ipv4(Ipv4Addr::new(10, 0, 0, 1))),
                line(
                    4,
                    "fd00::1",
                    Address::ipv6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1))
                ),
            ]
        );
        assert_eq!(f.lines[0].address.ty, AddrType::NAME);
        assert_eq!(f.lines[1].address.ty, AddrType::IP);
        assert_eq!(f.lines[2].address.ty, AddrType::IP6);
        assert!(
            f.lines
                .iter()
                .all(|l| l.matches("FAKEIB0", 1, 0xffff, 0xffff))
        );
    }

    #[test]
    fn fields_and_pkeys() {
        let text = "\
node1 mlx5_0 1 default
node1-1 mlx5_0 2 DEFAULT
n2 mlx5_1 1 0x8001
n3 mlx5_1 1 7fff
n4 mlx5_1 1 0XFFFF
n5 mlx5_1 1 1ffff
n6 mlx5_1 -255 -1
";
        let (f, d) = parse(text);
        assert!(d.is_empty(), "{d:?}");
        let got: Vec<_> = f
            .lines
            .iter()
            .map(|l| (l.line, l.text.as_str(), l.device.as_str(), l.port, l.pkey))
            .collect();
        assert_eq!(
            got,
            [
                (1, "node1", "mlx5_0", 1, PkeySpec::Default),
                (2, "node1-1", "mlx5_0", 2, PkeySpec::Default),
                (3, "n2", "mlx5_1", 1, PkeySpec::Value(0x8001)),
                (4, "n3", "mlx5_1", 1, PkeySpec::Value(0x7fff)),
                (5, "n4", "mlx5_1", 1, PkeySpec::Value(0xffff)),
                (6, "n5", "mlx5_1", 1, PkeySpec::Value(0xffff)),
                (7, "n6", "mlx5_1", 1, PkeySpec::Value(0xffff)),
            ]
        );
    }

    #[test]
    fn bad_and_short_lines() {
        let text = "\
# comment line
 # not a comment, but only two fields
name dev 1
name dev x default

name dev 1 zz
name dev 1 0x
name dev 1 12345678
ok dev 1 default
";
        let (f, d) = parse(text);
        // Line 8: `%7s` takes "1234567" as the pkey, and the "8" is left over.
        let kept: Vec<_> = f.lines.iter().map(|l| (l.line, l.pkey)).collect();
        assert_eq!(kept, [(8, PkeySpec::Value(0x4567)), (9, PkeySpec::Default)]);
        let sev: Vec<_> = d.iter().map(|d| (d.line, d.severity)).collect();
        assert_eq!(
            sev,
            [
                (2, Severity::Notice),
                (3, Severity::Notice),
                (4, Severity::Notice),
                (6, Severity::Error),
                (7, Severity::Error),
            ]
        );
        assert_eq!(d[3].message, "invalid pkey 'zz'; line skipped");
        assert_eq!(
            alloc::format!("{}", d[3]),
            "ibacm_addr.cfg:6: invalid pkey 'zz'; line skipped"
        );
    }

    #[test]
    fn widths_and_types() {
        // A 50-character name: 46 go to the name, 4 to the device, and the rest shifts.
        let long = "n".repeat(50);
        let (f, d) = parse(&alloc::format!("{long} 7 default\n"));
        // name = 46 n's, device = "nnnn", port = 7, pkey = default.
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(f.lines[0].text, "n".repeat(46));
        assert_eq!(f.lines[0].device, "nnnn");
        assert_eq!(f.lines[0].port, 7);
        assert_eq!(
            f.lines[0].address.bytes,
            Bytes64::zero_padded("n".repeat(46).as_bytes())
        );
        // Types: a leading-zero IPv4 is a name, as inet_pton says; embedded v4 in v6 is IP6.
        let (f, _) =
            parse("010.0.0.1 d 1 default\n::ffff:10.0.0.1 d 1 default\n1.2.3 d 1 default\n");
        let types: Vec<_> = f.lines.iter().map(|l| l.address.ty).collect();
        assert_eq!(types, [AddrType::NAME, AddrType::IP6, AddrType::NAME]);
        // Port cast to u8.
        let (f, _) = parse("a d 257 default\n");
        assert_eq!(f.lines[0].port, 1);
    }

    #[test]
    fn long_lines_are_split() {
        let text = alloc::format!("{}a d 1 default\n", " ".repeat(119));
        let (f, d) = parse(&text);
        assert!(d.is_empty());
        assert_eq!(f.lines.len(), 1);
        assert_eq!(f.lines[0].line, 1);
        let text = alloc::format!("a d 1 default{}x y\n", " ".repeat(110));
        let (f, d) = parse(&text);
        assert_eq!(f.lines.len(), 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].line, 1);
    }

    #[test]
    fn matching_rule() {
        let (f, _) = parse("a mlx5_0 1 default\nb mlx5_0 1 7fff\nc mlx5_0 1 ffff\n");
        let [a, b, c] = [&f.lines[0], &f.lines[1], &f.lines[2]];
        assert!(a.matches("mlx5_0", 1, 0xffff, 0xffff));
        assert!(a.matches("MLX5_0", 1, 0x7fff, 0xffff));
        assert!(!a.matches("mlx5_0", 1, 0x8001, 0xffff));
        assert!(!a.matches("mlx5_1", 1, 0xffff, 0xffff));
        assert!(!a.matches("mlx5_0", 2, 0xffff, 0xffff));
        assert!(!a.matches("mlx5_", 1, 0xffff, 0xffff));
        assert!(b.matches("mlx5_0", 1, 0xffff, 0x1234));
        assert!(b.matches("mlx5_0", 1, 0x7fff, 0x1234));
        assert!(c.matches("mlx5_0", 1, 0x7fff, 0x1234));
        assert!(!c.matches("mlx5_0", 1, 0x7ffe, 0x1234));
    }

    #[test]
    fn lines_naming_a_missing_port_or_pkey_are_warned() {
        let text = "a mlx5_0 1 default\nb mlx5_0 99 default\nc MLX5_0 1 0x12345\nd mlx5_0 2 7fff\ne mlx5_9 1 default\n";
        let (f, d) = parse(text);
        assert!(d.is_empty());
        let got: Vec<String> = f
            .check_device("mlx5_0", &[&[0xffff], &[0xffff, 0x8001]])
            .iter()
            .map(|d| alloc::format!("{d}"))
            .collect();
        assert_eq!(
            got,
            [
                "ibacm_addr.cfg:2: device mlx5_0 has no port 99; 'b' is not used",
                "ibacm_addr.cfg:3: port 1 of device mlx5_0 has no pkey 0x2345; 'c' is not used",
            ]
        );
        let got: Vec<usize> = f
            .unknown_devices(&["mlx5_0"])
            .iter()
            .map(|d| d.line)
            .collect();
        assert_eq!(got, [5]);
        assert!(f.check_device("mlx5_9", &[&[0xffff]]).is_empty());
    }

    #[test]
    fn latin1_bytes_do_not_break_the_file() {
        let text =
            b"# \xe9quipe r\xe9seau\ncaf\xe9 fakeib0 1 default\nfakehost fakeib0 1 default\n";
        let (f, d) = AddrFile::parse("ibacm_addr.cfg", &text[..]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(f.lines.len(), 2);
        // The name keeps its bytes (what a client sends to resolve it).
        assert_eq!(f.lines[0].address.ty, AddrType::NAME);
        assert_eq!(f.lines[0].address.bytes.until_nul(), b"caf\xe9");
        assert_eq!(f.lines[1].address, Address::name("fakehost"));
    }

    quickcheck::quickcheck! {
        fn never_panics(text: String) -> bool {
            let _ = AddrFile::parse("f", &text);
            true
        }

        fn never_panics_on_bytes(bytes: Vec<u8>) -> bool {
            let (f, _) = AddrFile::parse("f", &bytes);
            let _ = f.check_device("dev", &[&[0xffff]]);
            true
        }

        fn never_panics_on_field_soup(words: Vec<(u8, String)>) -> bool {
            const W: [&str; 10] = ["default", "0x", "-1", "99999999999999999999", "10.0.0.1", "::1", "#", "\n", "dev", "\u{e9}\u{e9}"];
            let mut text = String::new();
            for (i, extra) in &words {
                text.push_str(W.get(usize::from(*i) % W.len()).copied().unwrap_or(""));
                text.push_str(extra);
                text.push(' ');
            }
            let (f, _) = AddrFile::parse("f", &text);
            f.lines.iter().all(|l| l.text.len() <= 46 * 3 && l.device.len() <= 31 * 3)
        }
    }
}
