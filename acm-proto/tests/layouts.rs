//! ARCHITECTURE.md says that no code outside acm-proto reads or writes a message by byte
//! offset: every format has a view and a `Repr` here, and a second copy of a layout
//! elsewhere drifts from this one unnoticed. This test checks the mechanical part of that
//! claim over the source of every other crate of the workspace.
//!
//! What is scanned: every `.rs` file under the workspace root, except `target/`, `fuzz/`,
//! hidden directories, acm-proto itself, and `tests/`, `benches/` and `examples/`
//! directories (tests may craft malformed bytes on purpose); inside a file, the
//! `#[cfg(test)] mod … { … }` blocks are skipped too, and so is everything after `//` on a
//! line.
//!
//! What is flagged, on what remains:
//!
//! * **literal-offset slicing**: an index by a range with an integer-literal bound,
//!   `[4..6]`, `[8..]`, `[..16]`, `[0..4]`, `[2..=3]` (`[0..]` and ranges of names, such as
//!   `[HEADER_LEN..]`, are not flagged);
//! * **a byte-order read at literal indices**: `from_be_bytes`, `from_le_bytes` or
//!   `from_ne_bytes` whose arguments index a buffer with a literal, as in
//!   `u16::from_be_bytes([mad[4], mad[5]])`.
//!
//! A flagged line passes only when [`ALLOWED`] names it (its file, and a fragment of the
//! line, or the whole file) with the reason it is not a message of acm-proto's. An
//! entry that no longer matches anything fails the test too, so the list stays exact.

use std::fs;
use std::path::{Path, PathBuf};

/// Justified exceptions: (file relative to the workspace root, a fragment of the flagged
/// line or `None` for every line of the file, why).
const ALLOWED: &[(&str, Option<&str>, &str)] = &[
    (
        "acm-io-verbs/src/umad/header.rs",
        None,
        "umad's `struct ib_user_mad` header is the kernel's ABI, not a wire format; \
         this file is its one definition (ARCHITECTURE.md, formats table)",
    ),
    (
        "acm-io-verbs/src/umad/register.rs",
        None,
        "the umad agent-registration ioctl structures: the kernel's ABI, defined once here",
    ),
    (
        "acm-io-verbs/fake-hca/src/umad/file.rs",
        None,
        "the emulated HCA's side of the same umad ioctl ABI (it plays the kernel)",
    ),
    (
        "acm-daemon/ibacm/src/kernel/rtnl.rs",
        None,
        "rtnetlink route, address and link messages: the kernel's ABI, read only by the \
         daemon's kernel module",
    ),
    (
        "acm-daemon/ibacm/src/kernel/neigh.rs",
        None,
        "rtnetlink neighbour messages: the kernel's ABI, read and written only here",
    ),
    (
        "acm-io-sim/src/hub/wire.rs",
        None,
        "the fabric hub's own datagram format, private to the hub and its hosts; this \
         file is its one definition",
    ),
    (
        "acm-io-verbs/fake-hca/src/bin/rdmacm_probe.rs",
        None,
        "a `struct sockaddr_in`/`sockaddr_in6` handed to librdmacm: libc's ABI",
    ),
    (
        "acm-io-verbs/fake-hca/src/verbs/async_event.rs",
        Some("rec["),
        "the emulated HCA's 16-byte async-event record, written and read only in this \
         file, through its own pipe",
    ),
    (
        "acm-io-verbs/src/sysfs/device.rs",
        Some("(&a[1..], &b[1..])"),
        "stepping through two device names in a natural sort, not a message",
    ),
    (
        "acm-engine/src/config/options.rs",
        Some("&items[1..]"),
        "the tail of a list of options, not a message",
    ),
    (
        "acm-daemon/acm-client/src/cnum.rs",
        Some("&s[1..]"),
        "a number's text after its sign, not a message",
    ),
    (
        "acm-daemon/acm-client/src/addr.rs",
        Some("u16::from_be_bytes([w[0], w[1]])"),
        "the 16-bit groups of an IPv6 address being printed, not a message",
    ),
];

/// Directories never scanned (see the module doc).
const SKIPPED_DIRS: &[&str] = &[
    "target",
    "fuzz",
    "acm-proto",
    "tests",
    "benches",
    "examples",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("acm-proto lives in the workspace")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name) {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` outside `#[cfg(test)] mod … { … }` blocks, numbered from 1.
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().is_empty() {
                j += 1;
            }
            if j < lines.len() && opens_module(lines[j]) {
                let mut depth = 0i64;
                let mut k = j;
                while k < lines.len() {
                    depth += braces(lines[k]);
                    k += 1;
                    if depth <= 0 {
                        break;
                    }
                }
                i = k;
                continue;
            }
        }
        out.push((i + 1, lines[i]));
        i += 1;
    }
    out
}

fn opens_module(line: &str) -> bool {
    let t = line.trim();
    let t = t
        .strip_prefix("pub(crate) ")
        .or_else(|| t.strip_prefix("pub "))
        .unwrap_or(t);
    t.starts_with("mod ") && t.ends_with('{')
}

/// Opening minus closing braces on a line, outside string and character literals.
fn braces(line: &str) -> i64 {
    let b = line.as_bytes();
    let (mut depth, mut i, mut in_str) = (0, 0, false);
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'\'' if !in_str => {
                if b.get(i + 1) == Some(&b'\\') {
                    // '\n', '\'', '\u{7f}': on to the closing quote.
                    if let Some(end) = b
                        .get(i + 3..)
                        .and_then(|r| r.iter().position(|&c| c == b'\''))
                    {
                        i += end + 3;
                    }
                } else if b.get(i + 2) == Some(&b'\'') {
                    // '{': the character is no brace.
                    i += 2;
                }
            }
            b'{' if !in_str => depth += 1,
            b'}' if !in_str => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    depth
}

/// Digits starting at `at`, and where they end.
fn digits(b: &[u8], at: usize) -> (&[u8], usize) {
    let mut end = at;
    while end < b.len() && b[end].is_ascii_digit() {
        end += 1;
    }
    (&b[at..end], end)
}

fn skip_spaces(b: &[u8], mut at: usize) -> usize {
    while at < b.len() && b[at] == b' ' {
        at += 1;
    }
    at
}

/// Whether `code` indexes by a range with an integer-literal bound.
fn has_literal_range(code: &str) -> bool {
    let b = code.as_bytes();
    for (open, _) in code.match_indices('[') {
        let at = skip_spaces(b, open + 1);
        let (start, at) = digits(b, at);
        let at = skip_spaces(b, at);
        if !b[at..].starts_with(b"..") {
            continue;
        }
        let mut at = at + 2;
        if b.get(at) == Some(&b'=') {
            at += 1;
        }
        let at = skip_spaces(b, at);
        let (end, at) = digits(b, at);
        let at = skip_spaces(b, at);
        if b.get(at) != Some(&b']') {
            continue;
        }
        if !end.is_empty() || (!start.is_empty() && start != b"0") {
            return true;
        }
    }
    false
}

/// Whether `code` converts bytes taken at literal indices (`x[4]`) to an integer.
fn has_literal_byte_order_read(code: &str) -> bool {
    ["from_be_bytes(", "from_le_bytes(", "from_ne_bytes("]
        .iter()
        .filter_map(|f| code.find(f).map(|i| &code[i + f.len()..]))
        .any(|args| {
            let b = args.as_bytes();
            (1..b.len()).any(|i| {
                let before = b[i - 1];
                b[i] == b'['
                    && (before.is_ascii_alphanumeric() || matches!(before, b'_' | b']' | b')'))
                    && {
                        let (d, end) = digits(b, i + 1);
                        !d.is_empty() && b.get(end) == Some(&b']')
                    }
            })
        })
}

/// Every flagged line: (path relative to the root, line number, the line).
fn flagged(root: &Path) -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut out = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rel = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        for (n, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or("");
            if has_literal_range(code) || has_literal_byte_order_read(code) {
                out.push((rel.clone(), n, line.trim().to_string()));
            }
        }
    }
    out
}

fn allowance(path: &str, line: &str) -> Option<usize> {
    ALLOWED
        .iter()
        .position(|(p, fragment, _)| *p == path && fragment.is_none_or(|f| line.contains(f)))
}

#[test]
fn no_literal_offsets_outside_acm_proto() {
    let hits = flagged(&workspace_root());
    let mut used = vec![false; ALLOWED.len()];
    let mut offending = Vec::new();
    for (path, n, line) in &hits {
        match allowance(path, line) {
            Some(i) => used[i] = true,
            None => offending.push(format!("  {path}:{n}: {line}")),
        }
    }
    assert!(
        offending.is_empty(),
        "byte offsets of a message outside acm-proto; read and write it through acm-proto's \
         view or Repr (add an accessor there if one is missing), or, if the bytes are no \
         message of acm-proto's, add the line to ALLOWED in acm-proto/tests/layouts.rs \
         with the reason:\n{}",
        offending.join("\n")
    );
    let stale: Vec<_> = ALLOWED
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|((p, f, _), _)| format!("  {p} {f:?}"))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED entries that match nothing any more (remove them):\n{}",
        stale.join("\n")
    );
    println!(
        "{} flagged lines, all justified by {} allowances",
        hits.len(),
        ALLOWED.len()
    );
}

#[test]
fn the_patterns_flag_what_they_say() {
    for code in [
        "let s = u16::from_be_bytes([mad[4], mad[5]]);",
        "msg[8..16].copy_from_slice(&tid.to_ne_bytes());",
        "let h = &buf[..16];",
        "let d = &mad[56..];",
        "let w = &b[0..4];",
        "let r = &b[2..=3];",
        "u32::from_le_bytes([d[4], d[5], d[6], d[7]])",
    ] {
        assert!(
            has_literal_range(code) || has_literal_byte_order_read(code),
            "{code}"
        );
    }
    for code in [
        "let all = &buf[..];",
        "let rest = &buf[0..];",
        "let h = &buf[..HEADER_LEN];",
        "let d = &mad[SA_HEADER_LEN..SA_HEADER_LEN + n];",
        "let x = u64::from_be_bytes(t);",
        "let a = [0u8; 16];",
        "let first = items[0];",
    ] {
        assert!(
            !has_literal_range(code) && !has_literal_byte_order_read(code),
            "{code}"
        );
    }
    let text = "fn a() { x[4..6]; }\n#[cfg(test)]\nmod tests {\n    fn b() { let c = '{'; y[1..2]; }\n}\nfn z() {}\n";
    let kept: Vec<usize> = non_test_lines(text).iter().map(|(n, _)| *n).collect();
    assert_eq!(
        kept,
        [1, 6],
        "the test module is skipped, the code after it is not"
    );
}
