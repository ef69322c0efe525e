//! `acmdump` end to end: every capture re-encodes byte for byte, bad input fails with an
//! offset and never panics.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn acmdump(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_acmdump"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/captures");
    let mut out = Vec::new();
    for set in ["real-ibacm", "ib_acme-requests"] {
        for e in std::fs::read_dir(root.join(set)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".requests.bin") || name.ends_with(".responses.bin") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_capture_stream_roundtrips() {
    let files = captures();
    assert!(
        files.len() >= 120,
        "found only {} capture streams",
        files.len()
    );
    for f in files {
        let out = acmdump(&["--roundtrip", f.to_str().unwrap()], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", f.display());
        assert!(stderr.contains("re-encoded identically"), "{stderr}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn truncated_file_fails_with_offset() {
    let f = captures()
        .into_iter()
        .find(|p| p.ends_with("real-ibacm/resolve_preloaded_ip.requests.bin"))
        .unwrap();
    let bytes = std::fs::read(f).unwrap();
    let out = acmdump(&["--roundtrip"], Some(&bytes[..100]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("offset 16"), "{stderr}");
    assert!(
        stderr.contains("160 bytes needed, 100 available"),
        "{stderr}"
    );
}

#[test]
fn garbage_never_panics() {
    // A fixed xorshift stream: reproducible garbage of many lengths, every kind.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    };
    for len in [0usize, 1, 15, 16, 17, 88, 100, 255, 256, 296, 600, 1000] {
        let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
        if len >= 8 {
            // Make the header plausible half the time so deeper parsers run.
            bytes[0] = 1;
            bytes[6..8].copy_from_slice(&(len as u16).to_le_bytes());
        }
        for kind in ["client", "mad", "grh-mad", "netlink"] {
            for extra in [&[][..], &["--json"], &["--roundtrip"]] {
                let mut args = vec!["--kind", kind];
                args.extend_from_slice(extra);
                let out = acmdump(&args, Some(&bytes));
                let code = out.status.code();
                assert!(
                    matches!(code, Some(0 | 1)),
                    "{kind} len {len}: {code:?} {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

#[test]
fn hex_input_and_mad_kind() {
    // docs/test-vectors.md §15: the ACM resolve request MAD, as hex text.
    let mut mad = vec![0u8; acm_proto::mad::MAD_LEN];
    mad[..8].copy_from_slice(&[0x01, 0x2C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01]);
    mad[15] = 5;
    mad[16..24].copy_from_slice(&[0x02, 0x40, 0x02, 0x40, 0x01, 0, 0, 0]);
    mad[24..28].copy_from_slice(&[10, 0, 0, 2]);
    mad[88..92].copy_from_slice(&[10, 0, 0, 1]);
    mad[152..161].copy_from_slice(&[0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0x00, 0x03, 0x04]);
    let hex: String = mad.iter().map(|b| format!("{b:02x} ")).collect();
    let out = acmdump(
        &["--kind", "mad", "--hex", "--roundtrip"],
        Some(hex.as_bytes()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ACM MAD"), "{stdout}");
    assert!(stdout.contains("ff15:4001:ffff:3:400::"), "{stdout}");

    let bad = acmdump(&["--hex"], Some(b"01 0g"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("character 4"));
}

#[test]
fn json_output_is_valid() {
    let out = acmdump(
        &["--hex", "--json"],
        Some(b"01020000 00000010 0000000000000000"),
    );
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["kind"], "client PERF_QUERY request");
    assert_eq!(v[0]["fields"]["header"]["length"], 16);
}
