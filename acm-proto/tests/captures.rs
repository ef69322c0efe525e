//! Every message of every shared real capture (testdata/captures/, copied from the
//! reference runs) must split, parse and re-emit byte for byte; the decoded form of each
//! capture is pinned with an insta snapshot so any change in decoding shows as a diff.

use acm_proto::client::{ClientMessage, Direction, split_stream};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn captures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/captures")
}

/// Every `(set, label)` with a `LABEL.requests.bin`, sorted.
fn labels() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for set in ["real-ibacm", "ib_acme-requests"] {
        let dir = captures_root().join(set);
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if let Some(label) = name.strip_suffix(".requests.bin") {
                out.push((set.to_owned(), label.to_owned()));
            }
        }
    }
    out.sort();
    out
}

/// One line per part of a decoded message (compact `Debug` of each part), so the
/// snapshots stay readable and a diff points at the part that changed.
fn describe(msg: &ClientMessage, out: &mut String) {
    let header = msg.header();
    writeln!(out, "  header: {header:?}").unwrap();
    match msg {
        ClientMessage::Resolve(m) => {
            for (i, e) in m.entries.iter().enumerate() {
                writeln!(out, "  entry[{i}]: {e:?}").unwrap();
            }
            if !m.trailing.is_empty() {
                writeln!(out, "  trailing: {:02x?}", m.trailing).unwrap();
            }
        }
        ClientMessage::PerfQuery(m) => {
            if let Some(e) = &m.entry {
                writeln!(out, "  entry: {e:?}").unwrap();
            }
            if !m.trailing.is_empty() {
                writeln!(out, "  trailing: {:02x?}", m.trailing).unwrap();
            }
        }
        ClientMessage::PerfReply(m) => writeln!(out, "  counters: {:?}", m.counters).unwrap(),
        ClientMessage::EpQuery(m) => {
            if !m.trailing.is_empty() {
                writeln!(out, "  trailing: {:02x?}", m.trailing).unwrap();
            }
        }
        ClientMessage::EpReply(m) => {
            if let Some(c) = &m.config {
                writeln!(
                    out,
                    "  ep: guid={:#018x} port={} phys_port_cnt={} reserved={} pkey={:#06x} addr_cnt={} prov={:?}",
                    c.dev_guid, c.port_num, c.phys_port_cnt, c.reserved, c.pkey, c.addr_cnt, c.prov_name
                )
                .unwrap();
                for (i, a) in c.addrs.iter().enumerate() {
                    writeln!(out, "  addr[{i}]: {a:?}").unwrap();
                }
            }
        }
    }
}

/// Splits, parses and re-emits one stream; returns its decoded text.
fn decode_stream(set: &str, label: &str, direction: Direction) -> String {
    let (suffix, part) = match direction {
        Direction::Request => ("requests", "req"),
        Direction::Response => ("responses", "resp"),
    };
    let dir = captures_root().join(set);
    let bytes = fs::read(dir.join(format!("{label}.{suffix}.bin"))).unwrap();
    let mut text = String::new();
    for (i, item) in split_stream(&bytes, direction).enumerate() {
        let (offset, msg) = item.unwrap_or_else(|e| panic!("{set}/{label} {suffix}: {e}"));
        // The capture tool also wrote the first messages one per file: they must agree.
        let single = dir.join(format!("{label}.{part}{i:03}.bin"));
        if single.exists() {
            assert_eq!(fs::read(&single).unwrap(), msg, "{}", single.display());
        }
        let decoded = ClientMessage::parse(msg, direction)
            .unwrap_or_else(|e| panic!("{set}/{label} {part}{i:03}: {e}"));
        assert_eq!(
            decoded.to_vec(direction),
            msg,
            "{set}/{label} {part}{i:03} does not re-emit byte for byte"
        );
        writeln!(text, "[{part}{i:03} @{offset} len={}]", msg.len()).unwrap();
        describe(&decoded, &mut text);
    }
    text
}

#[test]
fn every_capture_decodes_and_roundtrips() {
    let labels = labels();
    assert!(
        labels.len() >= 60,
        "captures missing: found {}",
        labels.len()
    );
    for (set, label) in labels {
        let mut text = decode_stream(&set, &label, Direction::Request);
        text.push_str(&decode_stream(&set, &label, Direction::Response));
        insta::assert_snapshot!(format!("{set}__{label}"), text);
    }
}
