//! `driver::lend_outputs` against `driver::poll_output`: the same node, driven through
//! the same inputs, gives the same transcript, replies, closes, netlink replies and log
//! lines whichever way its outputs are drained. The lending harness reads every other
//! output in place and asks for the others (`ControlFlow::Break`), so both ways an
//! output leaves are covered, in the order the engine made them.

mod support;

use acm_engine::{ConnId, Input};
use acm_proto::netlink::IpResolveRequestRepr;
use std::time::Duration;
use support::requests::*;
use support::{Node, reference};

/// What one run leaves behind, to compare.
#[derive(Debug, PartialEq)]
struct Seen {
    transcript: String,
    replies: Vec<(ConnId, Vec<u8>)>,
    closes: usize,
    netlink: Vec<Vec<u8>>,
    logs: Vec<String>,
}

/// Starts a reference node (device up, QP made, group joined) drained one way or the
/// other, then sends it a mix of work: cache hits, a preloaded address whose route the
/// SA gives, a peer that never answers (ACM requests, retries, an error reply), a
/// malformed request (a close), a counters query and a kernel IP resolve (answered: the
/// host's routing picks the endpoint's address as its source).
fn run(lend: bool) -> Seen {
    let mut config = reference::config();
    config.options.log_level = 2;
    let route = Box::new(|_| Ok("10.0.0.1".parse().expect("an address")));
    let mut node = Node::new(config, reference::sa(), route);
    node.lend = lend;
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();

    for conn in 1..=3 {
        node.request(ConnId(conn), &resolve_ip("10.0.0.1", "10.0.0.1"));
    }
    node.request(ConnId(4), &resolve_ip("10.0.0.1", "10.0.0.2"));
    node.request(ConnId(4), &resolve_ip("10.0.0.1", "10.0.0.2"));
    node.input(Input::ClientRequest {
        conn: ConnId(5),
        bytes: &resolve_ip("10.0.0.1", "10.0.0.99"),
    });
    node.input(Input::ClientRequest {
        conn: ConnId(6),
        bytes: &[1, 1, 0, 0],
    });
    node.request(ConnId(7), &perf_index(0));
    let nl = IpResolveRequestRepr::new(7, 3, "10.0.0.2".parse().expect("an address")).to_vec();
    node.input(Input::Netlink(&nl));
    node.advance(Duration::from_secs(30));

    Seen {
        transcript: node.transcript_text(),
        replies: node.replies,
        closes: node.closes.len(),
        netlink: node.netlink,
        logs: node.logs,
    }
}

#[test]
fn lending_the_outputs_changes_nothing_a_host_sees() {
    let polled = run(false);
    let lent = run(true);
    // The mix did reach every kind of output, so the comparison covers them all.
    assert!(polled.replies.len() >= 7, "{:?}", polled.replies.len());
    assert_eq!(polled.closes, 1);
    assert_eq!(polled.netlink.len(), 1);
    assert!(!polled.logs.is_empty());
    assert!(
        polled.transcript.contains("ud send"),
        "{}",
        polled.transcript
    );
    assert_eq!(lent, polled);
}
