//! Replays every shared real-ibacm capture against an engine configured as the
//! reference fabric and checks that every reply is byte-identical, perf counters
//! included (issue 3 acceptance).

mod support;

use acm_engine::ConnId;
use acm_proto::client::{Direction, split_stream};
use std::path::PathBuf;
use support::reference;

/// The cases in the order the capture run made them (testdata/captures/README.md).
const ORDER: &[&str] = &[
    "resolve_loopback_ip",
    "resolve_loopback_ip6",
    "resolve_loopback_name",
    "resolve_preloaded_ip",
    "resolve_preloaded_ip6",
    "resolve_preloaded_ip_repeat2",
    "resolve_preloaded_ip_verify",
    "resolve_preloaded_name",
    "resolve_nosrc_ip",
    "resolve_unknown_dest_nodelay",
    "resolve_unknown_name_nodelay",
    "resolve_unknown_src",
    UNSHIPPED,
    "resolve_lid",
    "resolve_lid_nosrc",
    "resolve_lid_verify",
    "resolve_gid",
    "resolve_gid_nosrc",
    "perf_all",
    "perf_col",
    "perf_index1",
    "perf_index2_missing",
    "perf_row",
    "perf_src_ip",
    "perf_src_ip6",
    "perf_src_name",
    "perf_src_unknown",
    "ep_all",
    "ep_missing",
    "ep_one",
    "combined_resolve_perf_ep",
];

/// Requests the capture run made whose captures are not shipped. The counters in the
/// perf captures need exactly four more RESOLVEs than the shipped resolve cases hold:
/// one that reached the provider and timed out (it adds to both Resolve Counts, both
/// Addr Query Counts and both Error Counts: the endpoint shows 17 resolves, 3 address
/// queries and 1 error where the shipped cases give 16, 2 and 0), and three the core
/// rejected (global Resolve 24 and Error 6 where the rest give 21 and 3). The README
/// says unknown destinations "time out", which no shipped case does. Any core
/// rejection counts the same; unknown sources stand in for them here.
const UNSHIPPED: &str = "(unshipped)";

fn capture(name: &str, kind: &str) -> Vec<u8> {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "testdata",
        "captures",
        "real-ibacm",
        &format!("{name}.{kind}.bin"),
    ]
    .iter()
    .collect();
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn messages(bytes: &[u8], dir: Direction) -> Vec<Vec<u8>> {
    split_stream(bytes, dir)
        .map(|m| m.expect("capture splits").1.to_vec())
        .collect()
}

/// A RESOLVE from `src` to `dst` (IPv4), as ib_acme builds it.
fn resolve_ip(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut m = vec![0u8; 160];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16] = 1; // SOURCE
    m[20] = 2; // IP
    m[24..28].copy_from_slice(&src);
    m[88] = 2; // DEST
    m[92] = 2;
    m[96..100].copy_from_slice(&dst);
    m
}

fn replay_case(node: &mut support::Node, conn: ConnId, name: &str) {
    let reqs = messages(&capture(name, "requests"), Direction::Request);
    let resps = messages(&capture(name, "responses"), Direction::Response);
    assert!(!reqs.is_empty(), "{name}: no requests");
    assert_eq!(reqs.len(), resps.len(), "{name}: one reply per request");
    for (i, (req, want)) in reqs.iter().zip(&resps).enumerate() {
        let got = node
            .request(conn, req)
            .unwrap_or_else(|| panic!("{name} message {i}: no reply"));
        assert_eq!(
            support::hex(&got),
            support::hex(want),
            "{name} message {i}: reply differs\nlogs:\n{}",
            node.logs.join("\n")
        );
    }
    node.input(acm_engine::Input::ClientClosed(conn));
}

fn unshipped(node: &mut support::Node, conn: ConnId) {
    // The provider's timeout: an unknown destination nobody answers.
    let r = node
        .request(conn, &resolve_ip([10, 0, 0, 1], [10, 0, 0, 8]))
        .expect("reply");
    assert_eq!(r[2], 6, "ETIMEDOUT");
    // Three core rejections.
    for _ in 0..3 {
        let r = node
            .request(conn, &resolve_ip([10, 9, 9, 9], [10, 0, 0, 2]))
            .expect("reply");
        assert_eq!(r[2], 7, "ESRCADDR");
    }
}

#[test]
fn every_real_ibacm_case_replays_byte_for_byte() {
    let mut node = reference::node();
    for (i, name) in ORDER.iter().enumerate() {
        let conn = ConnId(i as u64 + 1);
        if *name == UNSHIPPED {
            unshipped(&mut node, conn);
        } else {
            replay_case(&mut node, conn, name);
        }
        // ib_acme runs one after another; let background lookups finish as they did.
        node.advance(std::time::Duration::from_millis(100));
    }
}

#[test]
fn fresh_daemon_perf_case_replays() {
    let mut node = reference::node();
    replay_case(&mut node, ConnId(1), "perf_row_fresh");
}

#[test]
fn every_shipped_case_is_replayed() {
    let dir: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "testdata",
        "captures",
        "real-ibacm",
    ]
    .iter()
    .collect();
    let mut shipped: Vec<String> = std::fs::read_dir(dir)
        .expect("captures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".requests.bin").map(String::from))
        .collect();
    shipped.sort();
    let mut replayed: Vec<String> = ORDER
        .iter()
        .filter(|n| **n != UNSHIPPED)
        .map(|s| s.to_string())
        .collect();
    replayed.push("perf_row_fresh".into());
    replayed.sort();
    assert_eq!(shipped, replayed);
}
