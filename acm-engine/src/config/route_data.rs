//! The route preload file (`route_preload opensm_full_v1`, `route_data_file`,
//! docs/daemon.md §9): OpenSM's full path-record dump, which lets an endpoint fill its
//! cache with paths at creation time instead of asking the SA.
//!
//! The reference reads the file twice: once for a LID→GUID table built from every
//! section header, once for the path lines of the one section that describes the port.
//! Here one pass builds both the table and every section, and the engine picks the
//! section with [`RouteData::section_for`] and the GUIDs with [`RouteData::guid_for_lid`].
//!
//! ```text
//! Channel Adapter 0x0002c90300a0b001, base LID 1, "node1 mlx5_0", port 1
//! 0x0001 : 0 : 4 : 3
//! 0x0005 : UNREACHABLE
//! ```

use super::diagnostic::{Diagnostic, Severity};
use super::lex::{self, Scanner};
use alloc::collections::BTreeMap;
use alloc::collections::btree_map::Entry;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// LIDs at or above this are multicast (and outside the reference's table).
const MULTICAST_LID_BASE: u16 = 0xC000;

/// One path line: how the section's port reaches `dlid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoutePath {
    /// The line number, from 1.
    pub line: usize,
    /// The destination LID. A value ≥ 0xC000 is kept, but it is never in the LID table
    /// (the reference reads past its table there; here the lookup simply fails).
    pub dlid: u16,
    /// The service level.
    pub sl: u8,
    /// The MTU enum, exactly as written (no selector).
    pub mtu: u8,
    /// The rate enum, exactly as written (no selector).
    pub rate: u8,
}

/// One section: the header line of a port and the path lines after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteSection {
    /// The header's line number, from 1.
    pub line: usize,
    /// The port GUID from the header.
    pub guid: u64,
    /// The base LID from the header.
    pub base_lid: u16,
    /// The reachable destinations, in file order.
    pub paths: Vec<RoutePath>,
}

/// The whole file, parsed: what the engine needs to preload any port's routes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteData {
    /// Every header's base LID (below 0xC000) → its port GUID; for a duplicate LID, the
    /// first header's GUID.
    pub lid_to_guid: BTreeMap<u16, u64>,
    /// Every valid section, in file order.
    pub sections: Vec<RouteSection>,
}

impl RouteData {
    /// The section of the port with GUID `guid` (GID 0's interface id) and LID
    /// `base_lid`: the first such header in the file, as the reference stops at the
    /// first match.
    #[must_use]
    pub fn section_for(&self, guid: u64, base_lid: u16) -> Option<&RouteSection> {
        self.sections
            .iter()
            .find(|s| s.guid == guid && s.base_lid == base_lid)
    }

    /// The port GUID that the LID table gives for `lid`; `None` for a LID that no header
    /// names (including every LID ≥ 0xC000), which the reference logs and skips.
    #[must_use]
    pub fn guid_for_lid(&self, lid: u16) -> Option<u64> {
        self.lid_to_guid.get(&lid).copied()
    }

    /// Parses the dump `text` (named `file`) by the reference's rules
    /// (docs/daemon.md §9):
    ///
    /// * 128-byte `fgets` chunks (lines of up to 127 bytes; a longer one is split);
    /// * `#` in column 0 makes a comment; blank lines are skipped;
    /// * a line whose first word starts with `Switch`, `Channel` or `Router` (case
    ///   matters) is a section header, `<type> 0x<guid>, base LID <lid>, ...`; after
    ///   `Channel` one more word is skipped; the GUID is hex, the LID has its base
    ///   detected (`0x` hex, leading `0` octal, else decimal). A header that cannot be
    ///   read is a [`Severity::Warning`] and its path lines are ignored;
    /// * other lines are path lines `<dlid> : <sl> : <mtu> : <rate>` (numbers with base
    ///   detection); `<dlid> : UNREACHABLE` lines are skipped silently, malformed ones
    ///   with a warning, and lines before the first header with a notice.
    #[must_use]
    pub fn parse(file: &str, text: &(impl AsRef<[u8]> + ?Sized)) -> (Self, Vec<Diagnostic>) {
        let text = text.as_ref();
        /// Where the parse is: before any header, in a section, or after a bad header.
        enum State {
            Outside,
            In,
            BadHeader,
        }
        let mut data = Self::default();
        let mut diags = Vec::new();
        let mut state = State::Outside;
        for (line, chunk) in lex::chunks(text, lex::LINE_128) {
            if chunk.first() == Some(&b'#') || lex::is_blank(chunk) {
                continue;
            }
            let mut diag =
                |severity, message| diags.push(Diagnostic::new(file, line, severity, message));
            let first = Scanner::new(chunk).token().unwrap_or_default();
            if [&b"Switch"[..], b"Channel", b"Router"]
                .iter()
                .any(|k| first.starts_with(k))
            {
                match parse_header(chunk) {
                    Ok((guid, base_lid)) => {
                        if base_lid < MULTICAST_LID_BASE {
                            match data.lid_to_guid.entry(base_lid) {
                                Entry::Vacant(v) => {
                                    v.insert(guid);
                                }
                                Entry::Occupied(o) => diag(
                                    Severity::Warning,
                                    format!(
                                        "duplicate LID {base_lid} (GUID {guid:#018x}); keeping GUID {:#018x}",
                                        o.get()
                                    ),
                                ),
                            }
                        }
                        data.sections.push(RouteSection {
                            line,
                            guid,
                            base_lid,
                            paths: Vec::new(),
                        });
                        state = State::In;
                    }
                    Err(why) => {
                        diag(Severity::Warning, format!("section header ignored: {why}"));
                        state = State::BadHeader;
                    }
                }
                continue;
            }
            match state {
                State::BadHeader => {}
                State::Outside => {
                    diag(
                        Severity::Notice,
                        String::from("line before the first section header ignored"),
                    );
                }
                State::In => match parse_path(line, chunk) {
                    PathLine::Path(path) => {
                        if let Some(section) = data.sections.last_mut() {
                            section.paths.push(path);
                        }
                    }
                    PathLine::Unreachable => {}
                    PathLine::Malformed(why) => {
                        diag(Severity::Warning, format!("path line ignored: {why}"))
                    }
                },
            }
        }
        (data, diags)
    }
}

/// A whole-token number with base detection, or `None`.
fn number(token: &[u8], base: u32, max: u64) -> Option<u64> {
    let (value, end) = lex::strtoull(token, base);
    (end != 0 && end == token.len() && value <= max && !token.starts_with(b"-")).then_some(value)
}

/// `<type> 0x<guid>, base LID <lid>, "<desc>", port <n>` → (GUID, LID).
fn parse_header(chunk: &[u8]) -> Result<(u64, u16), &'static str> {
    let mut sc = Scanner::new(chunk);
    let kind = sc.token().unwrap_or_default();
    if kind.starts_with(b"Channel") && sc.token().is_none() {
        return Err("nothing after 'Channel'");
    }
    let (guid_text, after) = split_at_comma(sc.rest()).ok_or("no comma after the port GUID")?;
    let guid = number(lex::trim(guid_text), 16, u64::MAX).ok_or("invalid port GUID")?;
    let mut sc = Scanner::new(after);
    let base = sc.token().is_some_and(|t| t.eq_ignore_ascii_case(b"base"));
    let lid_word = sc.token().is_some_and(|t| t.eq_ignore_ascii_case(b"LID"));
    if !(base && lid_word) {
        return Err("no 'base LID' after the port GUID");
    }
    let lid_text = split_at_comma(sc.rest()).map_or(sc.rest(), |(l, _)| l);
    let lid = number(lex::trim(lid_text), 0, u64::from(u16::MAX)).ok_or("invalid base LID")?;
    Ok((guid, lid as u16))
}

/// The bytes before the first comma, and those after it.
fn split_at_comma(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = s.iter().position(|&b| b == b',')?;
    let (before, rest) = s.split_at_checked(at)?;
    Some((before, rest.get(1..).unwrap_or_default()))
}

/// What a line inside a section turned out to be.
enum PathLine {
    Path(RoutePath),
    Unreachable,
    Malformed(&'static str),
}

/// `<dlid> : <sl> : <mtu> : <rate>` or `<dlid> : UNREACHABLE`.
fn parse_path(line: usize, chunk: &[u8]) -> PathLine {
    let parts: Vec<&[u8]> = chunk.split(|&b| b == b':').map(lex::trim).collect();
    match parts.as_slice() {
        [_, u] if u.eq_ignore_ascii_case(b"UNREACHABLE") => PathLine::Unreachable,
        [dlid, sl, mtu, rate] => {
            let byte = |t: &[u8]| number(t, 0, 0xFF).map(|v| v as u8);
            let Some(dlid) = number(dlid, 0, u64::from(u16::MAX)) else {
                return PathLine::Malformed("invalid destination LID");
            };
            match (byte(sl), byte(mtu), byte(rate)) {
                (Some(sl), Some(mtu), Some(rate)) => PathLine::Path(RoutePath {
                    line,
                    dlid: dlid as u16,
                    sl,
                    mtu,
                    rate,
                }),
                _ => PathLine::Malformed("invalid SL, MTU or rate"),
            }
        }
        _ => PathLine::Malformed("expected '<dlid> : <sl> : <mtu> : <rate>'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# SA path record dump
Channel Adapter 0x0002c90300a0b001, base LID 1, \"node1 mlx5_0\", port 1
0x0001 : 0 : 4 : 3
0x0002 : 1 : 5 : 7
0x0003 : UNREACHABLE
0xC001 : 0 : 4 : 3

Switch 0x0002c90300a0c000, base LID 0x3, \"switch\", port 0
0x0001 : 0 : 4 : 3
Channel Adapter 0x0002c90300a0b002, base LID 02, \"node2 mlx5_0\", port 1
0x0002 : 0 : 4 : 3
Router 0x0002c90300a0d000, base LID 0xC005, \"router\", port 1
0x0001 : 2 : 3 : 6
";

    #[test]
    fn sample_dump() {
        let (r, d) = RouteData::parse("route.data", SAMPLE);
        assert!(d.is_empty(), "{d:?}");
        let table: Vec<_> = r.lid_to_guid.iter().map(|(l, g)| (*l, *g)).collect();
        assert_eq!(
            table,
            [
                (1, 0x0002_c903_00a0_b001),
                (2, 0x0002_c903_00a0_b002),
                (3, 0x0002_c903_00a0_c000)
            ]
        );
        let heads: Vec<_> = r
            .sections
            .iter()
            .map(|s| (s.line, s.guid, s.base_lid, s.paths.len()))
            .collect();
        assert_eq!(
            heads,
            [
                (2, 0x0002_c903_00a0_b001, 1, 3),
                (8, 0x0002_c903_00a0_c000, 3, 1),
                (10, 0x0002_c903_00a0_b002, 2, 1),
                (12, 0x0002_c903_00a0_d000, 0xC005, 1),
            ]
        );
        let s = r.section_for(0x0002_c903_00a0_b001, 1).expect("section");
        assert_eq!(
            s.paths,
            [
                RoutePath {
                    line: 3,
                    dlid: 1,
                    sl: 0,
                    mtu: 4,
                    rate: 3
                },
                RoutePath {
                    line: 4,
                    dlid: 2,
                    sl: 1,
                    mtu: 5,
                    rate: 7
                },
                RoutePath {
                    line: 6,
                    dlid: 0xC001,
                    sl: 0,
                    mtu: 4,
                    rate: 3
                },
            ]
        );
        // The multicast-range dlid is kept but has no GUID.
        assert_eq!(r.guid_for_lid(0xC001), None);
        assert_eq!(r.guid_for_lid(2), Some(0x0002_c903_00a0_b002));
        assert_eq!(r.guid_for_lid(0xFFFF), None);
        assert!(r.section_for(0x0002_c903_00a0_b001, 2).is_none());
        assert!(r.section_for(0x0002_c903_00a0_d000, 0xC005).is_some());
    }

    #[test]
    fn duplicates_and_first_match() {
        let text = "\
Switch 0x10, base LID 5, \"a\", port 0
0x5 : 0 : 4 : 3
Switch 0x20, base LID 5, \"b\", port 0
Switch 0x10, base LID 5, \"a again\", port 0
0x6 : 0 : 4 : 3
";
        let (r, d) = RouteData::parse("f", text);
        assert_eq!(r.guid_for_lid(5), Some(0x10));
        let sev: Vec<_> = d.iter().map(|d| (d.line, d.severity)).collect();
        assert_eq!(sev, [(3, Severity::Warning), (4, Severity::Warning)]);
        assert!(d[0].message.starts_with("duplicate LID 5"));
        // The first matching section wins.
        assert_eq!(r.section_for(0x10, 5).map(|s| s.line), Some(1));
        assert_eq!(r.sections.len(), 3);
    }

    #[test]
    fn malformed_lines() {
        let text = "\
0x1 : 0 : 4 : 3
Channel Adapter 0xZZ, base LID 1, \"x\", port 1
0x1 : 0 : 4 : 3
Channel
Switch 0x1 base LID 1
Switch 0x1, base 1
Switch 0x1, base LID 0x10000,
Switch 0x1, base LID junk,
switch 0x2, base LID 2
Switch 0x1, base lid 010
0x1 : 0 : 4
0x1 : 0 : 4 : 256
0x10000 : 0 : 4 : 3
x : 0 : 4 : 3
0x1 : 0 : 4 : 3 : 9
0x1 : -1 : 4 : 3
0x2 : unreachable
  0x3 : 1 : 2 : 3\r
";
        let (r, d) = RouteData::parse("f", text);
        let sev: Vec<_> = d.iter().map(|d| (d.line, d.severity)).collect();
        assert_eq!(
            sev,
            [
                (1, Severity::Notice),
                (2, Severity::Warning),
                (4, Severity::Warning),
                (5, Severity::Warning),
                (6, Severity::Warning),
                (7, Severity::Warning),
                (8, Severity::Warning),
                // line 9: "switch" is not a header (case), and the state is "bad header"
                (11, Severity::Warning),
                (12, Severity::Warning),
                (13, Severity::Warning),
                (14, Severity::Warning),
                (15, Severity::Warning),
                (16, Severity::Warning),
            ]
        );
        assert_eq!(r.sections.len(), 1);
        let s = &r.sections[0];
        assert_eq!((s.line, s.guid, s.base_lid), (10, 1, 8));
        assert_eq!(
            s.paths,
            [RoutePath {
                line: 18,
                dlid: 3,
                sl: 1,
                mtu: 2,
                rate: 3
            }]
        );
        assert_eq!(d[1].message, "section header ignored: invalid port GUID");
    }

    #[test]
    fn long_lines_use_128_byte_chunks() {
        let desc = "d".repeat(100);
        let text = alloc::format!("Switch 0x1, base LID 1, \"{desc}\", port 0\n0x1 : 0 : 4 : 3\n");
        let (r, d) = RouteData::parse("f", &text);
        // The header is 134 bytes: its last 7 bytes (` port 0`) are a malformed line of their own.
        let sev: Vec<_> = d.iter().map(|d| (d.line, d.severity)).collect();
        assert_eq!(sev, [(1, Severity::Warning)]);
        assert_eq!(r.sections[0].paths.len(), 1);
        // A 127-byte header is whole.
        let desc = "d".repeat(127 - "Switch 0x1, base LID 1, \"\", port 0".len());
        let text = alloc::format!("Switch 0x1, base LID 1, \"{desc}\", port 0\n");
        assert_eq!(text.len(), 128);
        let (_, d) = RouteData::parse("f", &text);
        assert!(d.is_empty());
    }

    quickcheck::quickcheck! {
        fn never_panics(text: String) -> bool {
            let _ = RouteData::parse("f", &text);
            true
        }

        fn never_panics_on_dump_soup(words: Vec<(u8, String)>) -> bool {
            const W: [&str; 12] = [
                "Switch", "Channel Adapter", "Router", "0x1,", "base", "LID", "0xC000,", ":", "UNREACHABLE",
                "\n", "#", "0x0001 : 0 : 4 : 3\n",
            ];
            let mut text = String::new();
            for (i, extra) in &words {
                text.push_str(W.get(usize::from(*i) % W.len()).copied().unwrap_or(""));
                text.push_str(extra);
                text.push(' ');
            }
            let (r, _) = RouteData::parse("f", &text);
            r.lid_to_guid.keys().all(|&l| l < MULTICAST_LID_BASE)
        }
    }
}
