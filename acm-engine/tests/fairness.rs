//! Bounded, fair resolution (`acmp::fair`), on one node of the reference fabric where no
//! peer answers: every address lookup runs its two transmissions and ends ETIMEDOUT,
//! one lookup time (`LOOKUP`) after it started. That makes each lookup hold its credit
//! for as long as it can, which is what a flood of unreachable addresses does.
//!
//! Times here are the harness's virtual clock: the assertions count lookup slots, not
//! wall-clock time.

mod support;

use acm_engine::config::Options;
use acm_engine::{ConnId, EngineConfig, Input, Instant};
use acm_proto::acm_mad::AcmMadPacket;
use std::collections::BTreeMap;
use std::time::Duration;
use support::requests::*;
use support::{Node, reference};

/// One lookup nobody answers: two transmissions, each waiting SubnetTimeout 18
/// (1024 ms) plus `timeout 1000`.
const LOOKUP: Duration = Duration::from_millis(2 * (1024 + 1000));

/// The reference fabric's configuration with `extra` appended to its options file.
fn config(extra: &str) -> EngineConfig {
    let text = format!("{}\n{extra}\n", reference::OPTS);
    let (options, diags) = Options::parse("ibacm_opts.cfg", &text);
    assert!(diags.is_empty(), "{diags:?}");
    EngineConfig {
        options,
        ..reference::config()
    }
}

fn node(extra: &str) -> Node {
    let mut n = Node::new(config(extra), reference::sa(), reference::route());
    n.input(Input::DeviceAdded(reference::device()));
    n.settle();
    n
}

/// An address no peer has: 198.18.x.y (RFC 2544's benchmarking range).
fn unreachable(i: u32) -> String {
    format!("198.18.{}.{}", (i >> 8) & 0xff, i & 0xff)
}

fn ask(node: &mut Node, conn: u64, dest: &str) {
    node.input(Input::ClientRequest {
        conn: ConnId(conn),
        bytes: &resolve_ip("10.0.0.1", dest),
    });
}

fn ask_nodelay(node: &mut Node, conn: u64, dest: &str) {
    node.input(Input::ClientRequest {
        conn: ConnId(conn),
        bytes: &resolve_ip_nodelay("10.0.0.1", dest),
    });
}

/// The first transmission of every address lookup: when, and for which IPv4 address.
fn lookups_started(node: &Node) -> Vec<(Instant, String)> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for u in &node.ud_sent {
        let p = AcmMadPacket::new_checked(&u.mad.0[..]).expect("an ACM MAD");
        if seen.insert(p.tid(), ()).is_none() {
            let d = p.dest();
            let ip = std::net::Ipv4Addr::new(d.0[0], d.0[1], d.0[2], d.0[3]);
            out.push((u.at, ip.to_string()));
        }
    }
    out
}

/// When the lookup for `dest` started.
fn started(node: &Node, dest: &str) -> Option<Instant> {
    lookups_started(node)
        .into_iter()
        .find(|(_, d)| d == dest)
        .map(|(t, _)| t)
}

/// When `conn` got its first reply, and its status.
fn first_reply(node: &Node, conn: u64) -> Option<u8> {
    node.replies_to(ConnId(conn)).first().map(|r| status(r))
}

#[test]
fn a_miss_flood_delays_another_clients_new_destination_by_one_lookup() {
    for depth in [1u32, 4] {
        let mut n = node(&format!("resolve_depth {depth}"));
        // Connection 1 floods 64 unreachable destinations (its whole allowance).
        for i in 0..64 {
            ask(&mut n, 1, &unreachable(i));
        }
        n.advance(Duration::from_millis(500));
        let asked = n.now;
        // Connection 2 asks for a new destination of its own.
        ask(&mut n, 2, "198.19.0.1");
        n.run_until(asked + LOOKUP * 3);
        let start = started(&n, "198.19.0.1").expect("connection 2's lookup ran");
        // The flood's first lookups hold every credit until LOOKUP after they started
        // (at 1 ms, once the join was done): connection 2's goes next.
        assert!(
            start.saturating_duration_since(asked) <= LOOKUP,
            "depth {depth}: waited {:?} for a credit",
            start.saturating_duration_since(asked)
        );
        assert_eq!(
            first_reply(&n, 2),
            Some(ETIMEDOUT),
            "depth {depth}: connection 2 was answered within two lookup times"
        );
        // Without turns it would have waited for all 64 (16 rounds at depth 4).
        let flood_done = n.replies_to(ConnId(1)).len();
        assert!(flood_done < 64, "depth {depth}: the flood is still running");
    }
}

#[test]
fn credits_go_round_robin_over_connections() {
    let mut n = node("resolve_depth 1");
    // One lookup in flight, then three connections queue three each, in a burst.
    ask(&mut n, 9, "198.18.9.9");
    for i in 0..3 {
        ask(&mut n, 1, &format!("198.18.1.{i}"));
        ask(&mut n, 1, &format!("198.18.1.{}", 10 + i));
    }
    for i in 0..2 {
        ask(&mut n, 2, &format!("198.18.2.{i}"));
    }
    ask(&mut n, 3, "198.18.3.0");
    n.run_until(Instant::ZERO + LOOKUP * 12);
    let order: Vec<String> = lookups_started(&n).into_iter().map(|(_, d)| d).collect();
    // Rounds: every connection's first destination, in arrival order, then every
    // connection's second, and so on; each connection's own in the order it asked.
    assert_eq!(
        order,
        [
            "198.18.9.9",
            "198.18.1.0",
            "198.18.2.0",
            "198.18.3.0",
            "198.18.1.10",
            "198.18.2.1",
            "198.18.1.1",
            "198.18.1.11",
            "198.18.1.2",
            "198.18.1.12",
        ]
    );
}

#[test]
fn a_client_over_its_bound_gets_enomem_and_no_one_else_does() {
    let mut n = node("max_pending_per_client 8");
    for i in 0..10 {
        ask(&mut n, 1, &unreachable(i));
    }
    // Two refused at once, the others wait.
    let replies = n.replies_to(ConnId(1));
    assert_eq!(replies.len(), 2);
    assert!(replies.iter().all(|r| status(r) == ENOMEM && r.len() == 16));
    assert_eq!(n.engine.lookup_counters().rejected, 2);
    // A destination it already waits on, and a cache hit, are still served.
    ask(&mut n, 1, &unreachable(0));
    ask(&mut n, 1, "10.0.0.1");
    let replies = n.replies_to(ConnId(1));
    assert_eq!(
        replies.len(),
        3,
        "the cache hit is answered, the join waits"
    );
    assert_eq!(status(&replies[2]), 0);
    // Another connection is not bounded by the first one's allowance.
    ask(&mut n, 2, "198.19.0.1");
    assert!(n.replies_to(ConnId(2)).is_empty(), "connection 2 waits");
    // The refused destinations left nothing behind in the cache, and the eight (with
    // the join) end in ETIMEDOUT.
    n.settle();
    let replies = n.replies_to(ConnId(1));
    assert_eq!(replies.len(), 3 + 9);
    assert!(replies[3..].iter().all(|r| status(r) == ETIMEDOUT));
    assert_eq!(first_reply(&n, 2), Some(ETIMEDOUT));
    assert_eq!(n.engine.lookup_counters().rejected, 2);
    // Once answered, the client may wait on new destinations again.
    ask(&mut n, 1, &unreachable(100));
    assert_eq!(n.replies_to(ConnId(1)).len(), 12, "it waits");
}

#[test]
fn closing_the_flood_connection_cancels_its_lookups() {
    let mut n = node("resolve_depth 4");
    for i in 0..40 {
        ask(&mut n, 1, &unreachable(i));
    }
    // Connection 2 shares one of the flood's destinations.
    ask(&mut n, 2, &unreachable(30));
    n.advance(Duration::from_millis(100));
    let sent = n.ud_sent.len();
    assert_eq!(sent, 4, "four lookups in flight");
    n.input(Input::ClientClosed(ConnId(1)));
    // Four in flight, 35 waiting: all but the one connection 2 waits for.
    assert_eq!(n.engine.lookup_counters().cancelled, 39);
    // The freed credits go to the remaining lookup at once.
    let lookups = lookups_started(&n);
    assert_eq!(lookups.len(), 5);
    assert_eq!(lookups[4].1, unreachable(30));
    n.settle();
    assert!(n.replies_to(ConnId(1)).is_empty());
    assert_eq!(first_reply(&n, 2), Some(ETIMEDOUT));
    // Only the surviving lookup was retransmitted.
    assert_eq!(n.ud_sent.len(), 4 + 2);
    // A new client is served at once: nothing is left running.
    let before = n.ud_sent.len();
    ask(&mut n, 3, "198.19.0.3");
    assert_eq!(n.ud_sent.len(), before + 1);
}

#[test]
fn a_nodelay_flood_is_bounded_and_yields_to_waited_lookups() {
    let mut n = node("resolve_depth 2\nmax_background_resolves 16");
    for i in 0..200 {
        ask_nodelay(&mut n, 1, &unreachable(i));
    }
    // Every NODELAY request is answered ENODATA at once, as always.
    let replies = n.replies_to(ConnId(1));
    assert_eq!(replies.len(), 200);
    assert!(replies.iter().all(|r| status(r) == ENODATA));
    assert_eq!(n.engine.lookup_counters().background_dropped, 200 - 16);
    // A waited lookup goes before the 14 queued background ones.
    ask(&mut n, 2, "198.19.0.2");
    n.settle();
    let order: Vec<String> = lookups_started(&n).into_iter().map(|(_, d)| d).collect();
    assert_eq!(order.len(), 17, "16 background lookups and the waited one");
    assert_eq!(order[2], "198.19.0.2");
    assert_eq!(first_reply(&n, 2), Some(ETIMEDOUT));
    // Once they are done, NODELAY starts background lookups again.
    let before = order.len();
    ask_nodelay(&mut n, 1, "198.19.0.9");
    assert_eq!(lookups_started(&n).len(), before + 1);
}

#[test]
fn a_waited_request_takes_over_a_background_lookup() {
    let mut n = node("resolve_depth 1\nmax_background_resolves 2");
    ask(&mut n, 1, "198.18.0.1");
    ask_nodelay(&mut n, 2, "198.18.0.2");
    ask_nodelay(&mut n, 2, "198.18.0.3");
    // Background warm-ups are at their bound: this NODELAY miss starts nothing.
    ask_nodelay(&mut n, 2, "198.18.0.4");
    assert_eq!(n.engine.lookup_counters().background_dropped, 1);
    // A client now waits for a queued background lookup: it is served before the
    // other background one, and no longer counts against the bound.
    ask(&mut n, 3, "198.18.0.3");
    ask_nodelay(&mut n, 2, "198.18.0.5");
    assert_eq!(n.engine.lookup_counters().background_dropped, 1);
    n.settle();
    let order: Vec<String> = lookups_started(&n).into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        order,
        ["198.18.0.1", "198.18.0.3", "198.18.0.2", "198.18.0.5"]
    );
    assert_eq!(first_reply(&n, 3), Some(ETIMEDOUT));
}
