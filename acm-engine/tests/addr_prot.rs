//! `addr_prot` as an ordered list (docs/protocol/ipoib-neigh.md §3): the neighbour
//! table alone, ACM then the neighbour table, the neighbour table then ACM, the
//! neighbour table's polling bound, and destinations it cannot take. Each test drives
//! the one-node harness on the reference fabric with a scripted neighbour table, checks
//! the facts the case is about, and snapshots the transcript.

mod support;

use acm_engine::config::{AddrFile, Options, parse_hosts};
use acm_engine::{ConnId, EngineConfig, Input, NeighResult};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::time::Duration;
use support::fabric::{reply_path, status};
use support::reference::{self, ADDRS, HOSTS, OPTS, gid_of_lid};
use support::requests::*;
use support::{NeighScript, Node};

/// The peer without a daemon: 10.0.0.9, LID 9 on the reference fabric's SA.
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

/// The reference node's options with `addr_prot` set to `list`, started.
fn node(list: &str) -> Node {
    node_with(list, "")
}

/// [`node`] with more option lines.
fn node_with(list: &str, more: &str) -> Node {
    let text = format!("{OPTS}\naddr_prot {list}\n{more}");
    let (options, diags) = Options::parse("ibacm_opts.cfg", &text);
    assert!(diags.is_empty(), "{diags:?}");
    let (addr_file, _) = AddrFile::parse("ibacm_addr.cfg", ADDRS);
    let (hosts, _) = parse_hosts("ibacm_hosts.data", HOSTS);
    let config = EngineConfig {
        options,
        addr_file: Some(addr_file),
        hosts,
        ..EngineConfig::default()
    };
    let mut n = Node::new(config, reference::sa(), reference::route());
    n.input(Input::DeviceAdded(reference::device()));
    n.settle();
    n.transcript.clear();
    n
}

/// A neighbour table that knows the peer: incomplete for the first `incomplete`
/// questions (the kernel's ARP under way), then the peer's QPN and GID; every other
/// address is unreachable. The count of questions is shared.
fn table(incomplete: u32, asked: Rc<Cell<u32>>) -> NeighScript {
    Box::new(move |_, dest| {
        if dest != IpAddr::V4(PEER) {
            return NeighResult::Unreachable;
        }
        asked.set(asked.get() + 1);
        if asked.get() <= incomplete {
            NeighResult::Incomplete
        } else {
            NeighResult::Found {
                qpn: 0x48,
                gid: gid_of_lid(9),
            }
        }
    })
}

fn neigh_lines(node: &Node) -> usize {
    node.transcript
        .iter()
        .filter(|l| l.contains("neigh lookup"))
        .count()
}

fn assert_peer_path(r: &[u8]) {
    assert_eq!(status(r), 0, "success");
    let p = reply_path(r);
    assert_eq!(p.dgid, gid_of_lid(9), "the GID the neighbour table gave");
    assert_eq!(p.dlid, 9, "the LID the SA gave for it");
}

#[test]
fn neigh_resolves_a_peer_without_a_daemon_and_caches_it() {
    let mut node = node("neigh");
    let asked = Rc::new(Cell::new(0));
    node.neigh = table(1, asked.clone());
    let t0 = node.now;
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_peer_path(&r);
    assert!(
        node.ud_sent.is_empty(),
        "no ACM request: nobody would answer"
    );
    assert_eq!(asked.get(), 2, "incomplete, then found");
    // Asked again after the first wait (10 ms); the SA answers 1 ms after its query.
    assert_eq!(node.now, t0 + Duration::from_millis(11));
    // The second request is a cache hit: no question, no SA query.
    let sa_before = node.sa_sent.len();
    let r = node
        .request(ConnId(2), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_peer_path(&r);
    assert_eq!(asked.get(), 2);
    assert_eq!(node.sa_sent.len(), sa_before);
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn acm_then_neigh_falls_through_when_acm_times_out() {
    let mut node = node("acm,neigh");
    let asked = Rc::new(Cell::new(0));
    node.neigh = table(0, asked.clone());
    let t0 = node.now;
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_peer_path(&r);
    // The reference's lookup first: two transmissions, SubnetTimeout 18 (1024 ms) plus
    // `timeout` 1000 ms apart, then the neighbour table when the last wait ran out.
    let wait = Duration::from_millis(1024 + 1000);
    assert_eq!(node.ud_sent.len(), 2);
    assert_eq!(asked.get(), 1);
    let neigh_at = node
        .transcript
        .iter()
        .find(|l| l.contains("neigh lookup"))
        .expect("asked")
        .clone();
    assert!(
        neigh_at.starts_with(&format!("{}", t0 + wait + wait)),
        "{neigh_at}"
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn neigh_then_acm_falls_through_at_once_when_the_table_cannot_resolve() {
    let mut node = node("neigh,acm");
    // The default table knows nothing: unreachable at once, so the ACM request goes
    // out at once too, and its timeout is the answer.
    let t0 = node.now;
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    assert_eq!(neigh_lines(&node), 1);
    assert_eq!(node.ud_sent.len(), 2);
    assert_eq!(node.ud_sent[0].at, t0, "ACM starts when the table gives up");
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn the_reference_setting_never_asks_the_table() {
    let mut node = node("acm");
    let asked = Rc::new(Cell::new(0));
    node.neigh = table(0, asked.clone());
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_eq!(status(&r), ETIMEDOUT, "nobody answers ACM for 10.0.0.9");
    assert_eq!(asked.get(), 0);
    assert_eq!(neigh_lines(&node), 0);
}

#[test]
fn an_entry_that_stays_incomplete_times_out_at_the_bound() {
    let mut node = node("neigh");
    let asked = Rc::new(Cell::new(0));
    node.neigh = table(u32::MAX, asked.clone());
    let t0 = node.now;
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    // The bound is timeout × (retries + 1) = 2 s. The waits double from 10 ms up to
    // 500 ms: 10 20 40 80 160 320 500 500 (1630 ms), and the last one is cut to end at
    // the bound, where the tenth question is the last.
    assert_eq!(asked.get(), 10);
    assert_eq!(node.now, t0 + Duration::from_millis(2000));
    assert!(node.sa_sent.iter().all(|(at, _)| *at < t0));
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn names_are_not_for_the_neighbour_table() {
    let mut node = node("neigh");
    let req = resolve(&[ip(SOURCE, "10.0.0.1"), name(DEST, "nosuchhost")]);
    let t0 = node.now;
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ENODATA, "neigh cannot start; no protocol left");
    assert_eq!(neigh_lines(&node), 0);
    assert_eq!(node.now, t0, "answered at once");
    // With ACM after it, the name goes to ACM.
    let mut node = self::node("neigh,acm");
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    assert_eq!(node.ud_sent.len(), 2);
}

#[test]
fn a_table_that_never_answers_cannot_hold_the_client() {
    let mut node = node("neigh,acm");
    // Answers an hour late: the lookup gives the table up at the bound plus the longest
    // wait (2 s + 500 ms), and ACM takes over.
    node.neigh_delay = Duration::from_secs(3600);
    let asked = Rc::new(Cell::new(0));
    node.neigh = table(0, asked.clone());
    let t0 = node.now;
    let r = node
        .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.9"))
        .expect("reply");
    assert_eq!(status(&r), ETIMEDOUT, "nobody answers ACM either");
    assert_eq!(asked.get(), 1);
    assert_eq!(node.ud_sent[0].at, t0 + Duration::from_millis(2500));
    // The late answer changes nothing.
    node.settle();
    assert_eq!(node.replies.len(), 1);
    assert!(
        node.logs.iter().any(|l| l.contains("did not answer")),
        "{:#?}",
        node.logs
    );
}

#[test]
fn nodelay_warm_ups_through_the_table_count_against_max_background_resolves() {
    let mut node = node_with("neigh", "max_background_resolves 1\n");
    node.neigh = Box::new(|_, _| NeighResult::Incomplete);
    for (conn, dst) in [(1, "10.0.0.8"), (2, "10.0.0.9")] {
        let r = node
            .request(ConnId(conn), &resolve_ip_nodelay("10.0.0.1", dst))
            .expect("reply");
        assert_eq!(status(&r), ENODATA, "NODELAY misses answer at once");
    }
    let asked: Vec<&String> = node
        .transcript
        .iter()
        .filter(|l| l.contains("neigh lookup"))
        .collect();
    assert_eq!(asked.len(), 1, "only the first warm-up starts: {asked:#?}");
    assert!(asked[0].contains("10.0.0.8"));
    assert_eq!(node.engine.lookup_counters().background_dropped, 1);
}

#[test]
fn closing_the_only_client_stops_its_neighbour_lookup() {
    let mut node = node("neigh");
    let asked = Rc::new(Cell::new(0));
    // The kernel never completes the entry.
    node.neigh = table(u32::MAX, asked.clone());
    node.input(Input::ClientRequest {
        conn: ConnId(1),
        bytes: &resolve_ip("10.0.0.1", "10.0.0.9"),
    });
    node.advance(Duration::from_millis(50));
    let polled = asked.get();
    assert!(polled >= 2, "asked, then asked again: {polled}");
    node.input(Input::ClientClosed(ConnId(1)));
    assert_eq!(node.engine.lookup_counters().cancelled, 1);
    // No more questions for a lookup nobody waits for, and no reply to anyone.
    node.advance(Duration::from_secs(10));
    assert_eq!(
        asked.get(),
        polled,
        "the table was asked again after the close"
    );
    assert!(node.replies.is_empty());
}
