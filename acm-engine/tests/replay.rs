//! Replays every shared real-ibacm capture against an engine configured as the
//! reference fabric and checks that every reply is byte-identical, perf counters
//! included: a drop-in replacement must answer every client exactly as the reference
//! does.

mod support;

use acm_engine::ConnId;
use acm_proto::client::{Direction, split_stream};
use std::path::PathBuf;
use support::capture_order::{FRESH, ORDER, UNSHIPPED, unshipped_requests};
use support::reference;

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
    for (req, status) in unshipped_requests() {
        let r = node.request(conn, &req).expect("reply");
        assert_eq!(r[2], status, "unshipped request");
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

/// The same with `resolve_depth 1` written in the options file: the reference's own
/// depth (the captures do not depend on depth, but a configured 1 must still give the
/// reference's bytes).
#[test]
fn every_real_ibacm_case_replays_byte_for_byte_at_resolve_depth_1() {
    let text = format!("{}\nresolve_depth 1\n", support::reference::OPTS);
    let (options, _) = acm_engine::config::Options::parse("ibacm_opts.cfg", &text);
    assert_eq!(options.resolve_depth, 1);
    let config = acm_engine::EngineConfig {
        options,
        ..reference::config()
    };
    let mut node = support::Node::new(config, reference::sa(), reference::route());
    node.input(acm_engine::Input::DeviceAdded(reference::device()));
    node.settle();
    for (i, name) in ORDER.iter().enumerate() {
        let conn = ConnId(i as u64 + 1);
        if *name == UNSHIPPED {
            unshipped(&mut node, conn);
        } else {
            replay_case(&mut node, conn, name);
        }
        node.advance(std::time::Duration::from_millis(100));
    }
}

#[test]
fn fresh_daemon_perf_case_replays() {
    let mut node = reference::node();
    replay_case(&mut node, ConnId(1), FRESH);
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
    replayed.push(FRESH.into());
    replayed.sort();
    assert_eq!(shipped, replayed);
}
