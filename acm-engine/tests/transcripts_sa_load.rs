//! Transcript tests of the SA path under load (docs/protocol/sa.md §8): a BUSY answer
//! is waited out with a jittered back-off and the query sent again, so the client gets
//! its path; with `sa_busy_retries 0` the reference's behaviour comes back (the query
//! fails at the first BUSY); and a BUSY answer that outlasts the retries fails as the
//! reference's would.

mod support;

use acm_engine::{ConnId, Input, Instant};
use acm_proto::mad::MAD_LEN;
use std::time::Duration;
use support::requests::*;
use support::{Node, SaScript, reference};

const ATTR_PATH_RECORD: u16 = 0x0035;
/// ACM status 0: success.
const SUCCESS: u8 = 0;

/// The reference SA, except that the first `busy` PathRecord queries are answered
/// BUSY (MAD status 0x0001, no record).
fn sa_busy_first(busy: usize) -> SaScript {
    let mut inner = reference::sa();
    let mut left = busy;
    Box::new(move |mad: &[u8; MAD_LEN]| {
        let mut resp = inner(mad)?;
        if u16::from_be_bytes([mad[16], mad[17]]) == ATTR_PATH_RECORD && left > 0 {
            left -= 1;
            resp[4..6].copy_from_slice(&0x0001u16.to_be_bytes());
            resp[56..].fill(0);
        }
        Some(resp)
    })
}

/// A reference node with `extra` options and its own SA, started, its transcript
/// starting after the start-up.
fn node(extra: &str, sa: SaScript) -> Node {
    let mut config = reference::config();
    let (options, d) = acm_engine::config::Options::parse(
        "ibacm_opts.cfg",
        &format!("{}{extra}", reference::OPTS),
    );
    assert!(d.is_empty(), "{d:?}");
    config.options = options;
    let mut node = Node::new(config, sa, reference::route());
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    node.transcript.clear();
    node
}

/// When each PathRecord query was sent.
fn path_sends(node: &Node) -> Vec<Instant> {
    node.sa_sent
        .iter()
        .filter(|(_, m)| u16::from_be_bytes([m.0[16], m.0[17]]) == ATTR_PATH_RECORD)
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn busy_answers_are_waited_out_and_the_client_gets_its_path() {
    let mut node = node("sa_backoff_ms 20\n", sa_busy_first(2));
    let req = resolve_ip("10.0.0.1", "10.0.0.2");
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), SUCCESS, "BUSY is not a failure");
    let sends = path_sends(&node);
    assert_eq!(sends.len(), 3, "two BUSY answers, then the record");
    // The harness's SA answers 1 ms after a send. The first back-off is 20 ms drawn
    // between ½ and 1½; the second doubles.
    let gap1 = sends[1].saturating_duration_since(sends[0]) - Duration::from_millis(1);
    let gap2 = sends[2].saturating_duration_since(sends[1]) - Duration::from_millis(1);
    assert!(
        (Duration::from_millis(10)..=Duration::from_millis(30)).contains(&gap1),
        "{gap1:?}"
    );
    assert!(
        (Duration::from_millis(20)..=Duration::from_millis(60)).contains(&gap2),
        "{gap2:?}"
    );
    // The same TID each time: the provider never saw the BUSY answers.
    let tids: Vec<[u8; 8]> = node
        .sa_sent
        .iter()
        .filter(|(_, m)| u16::from_be_bytes([m.0[16], m.0[17]]) == ATTR_PATH_RECORD)
        .map(|(_, m)| m.0[8..16].try_into().expect("8 bytes"))
        .collect();
    assert!(tids.windows(2).all(|w| w[0] == w[1]), "{tids:?}");
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn the_jitter_comes_from_the_seed() {
    let gaps = |seed: u64| {
        let mut config = reference::config();
        config.options.sa_backoff_ms = 100;
        let mut node = Node::with_seed(config, sa_busy_first(1), reference::route(), seed);
        node.input(Input::DeviceAdded(reference::device()));
        node.settle();
        let r = node
            .request(ConnId(1), &resolve_ip("10.0.0.1", "10.0.0.2"))
            .expect("reply");
        assert_eq!(status(&r), SUCCESS);
        let s = path_sends(&node);
        s[1].saturating_duration_since(s[0])
    };
    assert_eq!(gaps(7), gaps(7), "one seed, one schedule");
    let spread: std::collections::BTreeSet<Duration> = (1..6).map(gaps).collect();
    assert!(
        spread.len() > 1,
        "different seeds, different back-offs: {spread:?}"
    );
}

#[test]
fn reference_mode_fails_at_the_first_busy() {
    let mut node = node("sa_busy_retries 0\n", sa_busy_first(1));
    let req = resolve_ip("10.0.0.1", "10.0.0.2");
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    assert_eq!(path_sends(&node).len(), 1);
}

#[test]
fn busy_past_the_retries_fails_the_query() {
    let mut node = node(
        "sa_busy_retries 3\nsa_backoff_ms 1\n",
        sa_busy_first(usize::MAX),
    );
    let req = resolve_ip("10.0.0.1", "10.0.0.2");
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    assert_eq!(path_sends(&node).len(), 4, "the query and three retries");
}

/// The SA-load options are read afresh at each BUSY answer, so a reload (SIGHUP) turns
/// the back-off on and off without a restart (acm_engine::config::reload).
#[test]
fn a_reload_turns_the_busy_retries_on_and_off() {
    use acm_engine::config::{OptionLines, Options, Reconfig};
    let reload = |node: &mut Node, extra: &str| {
        let text = format!("{}{extra}", reference::OPTS);
        let (options, d) = Options::parse("ibacm_opts.cfg", &text);
        assert!(d.is_empty(), "{d:?}");
        let r = Reconfig {
            options,
            option_lines: OptionLines::scan("ibacm_opts.cfg", &text),
            addr_file: None,
        };
        node.input(Input::Reconfigure(&r));
        node.settle();
    };
    let req = resolve_ip("10.0.0.1", "10.0.0.2");

    // Started as the reference, reloaded with ours: the BUSY is waited out.
    let mut on = node("sa_busy_retries 0\n", sa_busy_first(1));
    reload(&mut on, "sa_busy_retries 4\nsa_backoff_ms 30\n");
    assert!(
        on.logs
            .iter()
            .any(|l| l.contains("sa_busy_retries 0 -> 4") && l.contains("sa_backoff_ms 20 -> 30")),
        "{:#?}",
        on.logs
    );
    let r = on.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), SUCCESS, "the BUSY is waited out");
    let sends = path_sends(&on);
    assert_eq!(sends.len(), 2, "{sends:?}");
    // The new first back-off: 30 ms drawn between ½ and 1½, after the 1 ms answer.
    let gap = sends[1].saturating_duration_since(sends[0]) - Duration::from_millis(1);
    assert!(
        (Duration::from_millis(15)..=Duration::from_millis(45)).contains(&gap),
        "{gap:?}"
    );

    // Started with ours, reloaded as the reference: the first BUSY fails the query.
    let mut off = node("", sa_busy_first(1));
    reload(&mut off, "sa_busy_retries 0\n");
    let r = off.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ETIMEDOUT);
    assert_eq!(path_sends(&off).len(), 1);
}
