//! Transcript tests of SM events (docs/protocol/sa.md §9), ours: the InformInfo
//! subscriptions a port makes when it comes up and renews after an SM change or a
//! client reregister, their retry when the SA refuses, and a Report that invalidates the
//! route to the GID it names and is acknowledged with a ReportResp, byte by byte. With
//! `sm_events no` (the reference's behaviour) nothing is subscribed and the stale route
//! keeps being served.
//!
//! Each test pins the whole transcript with an insta snapshot and also asserts the
//! facts the scenario is about.

mod support;

use acm_engine::{ConnId, Counter, EngineConfig, Input, PortEvent};
use acm_proto::Gid;
use acm_proto::mad::{AttrId, MAD_LEN, MadHeaderRepr, Method, MgmtClass};
use acm_proto::notice::{InformInfoRepr, NoticeRepr, SmTrap};
use acm_proto::sa::{SaHeaderRepr, SaPacket};
use std::net::Ipv4Addr;
use support::fabric::*;
use support::{Node, hex, reference};

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ATTR_INFORM_INFO: u16 = 0x0003;
const ATTR_NOTICE: u16 = 0x0002;

fn config(sm_events: bool) -> EngineConfig {
    let mut c = reference::config();
    c.options.sm_events = sm_events;
    c
}

/// The reference fabric's SA, which also takes subscriptions: a Set of InformInfo is
/// answered GetResp (0x81), status 0, the record echoed (the captures' SA was never
/// asked one).
fn sa() -> support::SaScript {
    let mut sa = reference::sa();
    Box::new(move |m: &[u8; MAD_LEN]| {
        if sa_attr(m) != ATTR_INFORM_INFO {
            return sa(m);
        }
        let mut r = m.to_vec();
        r[3] = 0x81;
        Some(r)
    })
}

/// A started reference node with `sm_events` as given.
fn started(sm_events: bool) -> Node {
    let mut n = Node::with_sm_events(config(sm_events), sa(), reference::route());
    n.input(Input::DeviceAdded(reference::device()));
    n.settle();
    n
}

/// The trap number each InformInfo Set sent so far subscribes to, in order.
fn subscriptions(node: &Node) -> Vec<u16> {
    sa_sent_attr(node, ATTR_INFORM_INFO)
        .iter()
        .map(|m| {
            let d = SaPacket::new_checked(&m[..]).expect("SA MAD").data();
            InformInfoRepr::parse(d).expect("InformInfo").trap_number.0
        })
        .collect()
}

/// The Report an SM sends for `trap`, with TID `tid`.
fn report(tid: u64, trap: SmTrap) -> [u8; MAD_LEN] {
    let mut mad = [0u8; MAD_LEN];
    SaHeaderRepr {
        mad: MadHeaderRepr {
            base_version: 1,
            mgmt_class: MgmtClass::SA,
            class_version: 2,
            method: Method::REPORT,
            tid,
            attr_id: AttrId::NOTICE,
            ..MadHeaderRepr::default()
        },
        ..SaHeaderRepr::default()
    }
    .emit(&mut mad);
    NoticeRepr::sm_trap(trap, 1, reference::gid_of_lid(1))
        .emit(SaPacket::new_unchecked(&mut mad[..]).data_mut());
    mad
}

fn deliver_report(node: &mut Node, mad: &[u8; MAD_LEN], what: &str) {
    note(node, what);
    node.input(Input::SaResponse {
        port: reference::PORT,
        mad: &mad[..],
    });
    node.settle_now();
}

#[test]
fn a_port_subscribes_to_traps_64_to_67_one_at_a_time() {
    let node = started(true);
    assert_eq!(subscriptions(&node), [64, 65, 66, 67]);
    let sets = sa_sent_attr(&node, ATTR_INFORM_INFO);
    // The first Set, byte by byte (docs/protocol/sa.md §9): SA header with method SET,
    // attribute InformInfo, TID 0x80000001, no component mask; then the InformInfo.
    let mut expected = [0u8; MAD_LEN];
    expected[..4].copy_from_slice(&[0x01, 0x03, 0x02, 0x02]);
    expected[8..16].copy_from_slice(&0x8000_0001u64.to_be_bytes());
    expected[16..18].copy_from_slice(&[0x00, 0x03]);
    expected[56 + 16..56 + 36].copy_from_slice(&[
        0xFF, 0xFF, 0, 0, 0, 0, 1, 1, 0xFF, 0xFF, 0, 64, 0, 0, 1, 18, 0, 0xFF, 0xFF, 0xFF,
    ]);
    assert_eq!(hex(&sets[0]), hex(&expected));
    // Each next Set waits for the previous answer; TIDs count up with bit 31 set, apart
    // from the provider's (the join kept TID 1).
    let tids: Vec<u64> = sets.iter().map(|m| mad_tid(m)).collect();
    assert_eq!(tids, [0x8000_0001, 0x8000_0002, 0x8000_0003, 0x8000_0004]);
    assert_eq!(mad_tid(&sa_sent_attr(&node, ATTR_MCMEMBER)[0]), 1);
    let lines: Vec<&String> = node
        .transcript
        .iter()
        .filter(|l| l.contains("attr 0x0003"))
        .collect();
    assert!(
        lines.iter().all(|l| l.contains("timeout 1000 retries 1")),
        "the kernel's timeout and retries of every SA MAD: {lines:?}"
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn with_sm_events_no_nothing_is_subscribed() {
    let node = started(false);
    assert!(subscriptions(&node).is_empty());
}

#[test]
fn a_report_invalidates_the_route_at_once_and_is_acknowledged() {
    let mut node = started(true);
    let r1 = resolve(&mut node, ConnId(1), A_IP, B_IP);
    assert_eq!(status(&r1), SUCCESS);
    let peer = reply_path(&r1).dgid;
    let r2 = resolve(&mut node, ConnId(2), A_IP, B_IP);
    assert_eq!(status(&r2), SUCCESS);
    assert_eq!(node.engine.counters().get(Counter::RouteCache), 1, "cached");
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD).len();

    let mad = report(0x0000_1234_0000_0042, SmTrap::GidOutOfService(peer));
    deliver_report(
        &mut node,
        &mad,
        "SA Report: trap 65, the peer's GID out of service",
    );

    // The ReportResp: the Report's TID, method 0x86, attribute Notice, the Notice
    // echoed, sent at once without kernel retries.
    let acks = sa_sent_attr(&node, ATTR_NOTICE);
    assert_eq!(acks.len(), 1);
    let ack = &acks[0];
    let mut expected = [0u8; MAD_LEN];
    expected[..4].copy_from_slice(&[0x01, 0x03, 0x02, 0x86]);
    expected[8..16].copy_from_slice(&0x0000_1234_0000_0042u64.to_be_bytes());
    expected[16..18].copy_from_slice(&[0x00, 0x02]);
    expected[56..136].copy_from_slice(&mad[56..136]);
    assert_eq!(hex(ack), hex(&expected));
    let last = node
        .transcript
        .iter()
        .rev()
        .find(|l| l.contains(" sa send "))
        .expect("sent");
    assert!(
        last.contains("dlid 1 tid 0x123400000042 timeout 0 retries 0"),
        "{last}"
    );

    // The next request does not come from the cache: the route is asked again.
    let r3 = resolve(&mut node, ConnId(3), A_IP, B_IP);
    assert_eq!(status(&r3), SUCCESS);
    assert_eq!(
        node.engine.counters().get(Counter::RouteCache),
        1,
        "not from the cache"
    );
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), queries + 1);
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn with_sm_events_no_a_report_is_ignored_and_the_stale_route_served() {
    let mut node = started(false);
    let r1 = resolve(&mut node, ConnId(1), A_IP, B_IP);
    let peer = reply_path(&r1).dgid;
    let sent = node.sa_sent.len();
    let mad = report(0x42, SmTrap::GidOutOfService(peer));
    deliver_report(
        &mut node,
        &mad,
        "SA Report: trap 65, the peer's GID out of service",
    );
    assert_eq!(node.sa_sent.len(), sent, "no ReportResp");
    let r2 = resolve(&mut node, ConnId(2), A_IP, B_IP);
    assert_eq!(&r2[24..88], &r1[24..88]);
    assert_eq!(
        node.engine.counters().get(Counter::RouteCache),
        1,
        "from the cache"
    );
}

#[test]
fn reports_of_other_gids_and_groups_leave_the_cache_alone() {
    let mut node = started(true);
    resolve(&mut node, ConnId(1), A_IP, B_IP);
    let other = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_beef);
    deliver_report(
        &mut node,
        &report(7, SmTrap::GidInService(other)),
        "trap 64, another GID",
    );
    deliver_report(
        &mut node,
        &report(8, SmTrap::McastGroupCreated(mgid())),
        "trap 66, our group",
    );
    assert_eq!(
        sa_sent_attr(&node, ATTR_NOTICE).len(),
        2,
        "both acknowledged"
    );
    resolve(&mut node, ConnId(2), A_IP, B_IP);
    assert_eq!(node.engine.counters().get(Counter::RouteCache), 1);
    // Trap 67 for our group: the endpoint rejoins.
    let joins = sa_sent_attr(&node, ATTR_MCMEMBER).len();
    deliver_report(
        &mut node,
        &report(9, SmTrap::McastGroupDeleted(mgid())),
        "trap 67, our group",
    );
    node.settle();
    assert_eq!(
        sa_sent_attr(&node, ATTR_MCMEMBER).len(),
        joins + 1,
        "rejoined"
    );
}

#[test]
fn sm_change_and_client_reregister_renew_the_subscriptions() {
    let mut node = started(true);
    port_event(&mut node, PortEvent::SmChange(attrs_with_sm(7)));
    node.settle();
    assert_eq!(subscriptions(&node), [64, 65, 66, 67, 64, 65, 66, 67]);
    let last = node
        .transcript
        .iter()
        .rev()
        .find(|l| l.contains("attr 0x0003"))
        .expect("sent");
    assert!(last.contains("dlid 7 "), "to the new SM: {last}");
    port_event(&mut node, PortEvent::ClientReregister);
    node.settle();
    assert_eq!(subscriptions(&node).len(), 12);
    // A LID change with the same SM renews nothing.
    port_event(
        &mut node,
        PortEvent::LidChange(acm_engine::PortAttrs {
            lid: 9,
            ..attrs_with_sm(7)
        }),
    );
    node.settle();
    assert_eq!(subscriptions(&node).len(), 12);
}

#[test]
fn a_refused_subscription_is_retried_with_backoff() {
    // An SA that refuses the first three InformInfo Sets (ERR_REQ_INVALID), then
    // accepts them.
    let mut sa = sa();
    let mut refusals = 3;
    let script: support::SaScript = Box::new(move |m: &[u8; MAD_LEN]| {
        let mut r = sa(m)?;
        if sa_attr(m) == ATTR_INFORM_INFO && refusals > 0 {
            refusals -= 1;
            r[4] = 0x02;
        }
        Some(r)
    });
    let mut node = Node::with_sm_events(config(true), script, reference::route());
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let times: Vec<String> = node
        .transcript
        .iter()
        .filter(|l| l.contains("attr 0x0003"))
        .map(|l| l.split(' ').next().unwrap_or("").to_string())
        .collect();
    // Refused (each answer 1 ms later), tried again 1 s, 2 s, 4 s after each refusal;
    // the fourth accepted, then the other three in turn.
    assert_eq!(
        times,
        [
            "+0.000000s",
            "+1.001000s",
            "+3.002000s",
            "+7.003000s",
            "+7.004000s",
            "+7.005000s",
            "+7.006000s"
        ]
    );
    assert_eq!(subscriptions(&node), [64, 64, 64, 64, 65, 66, 67]);
    node.assert_logged("subscription to SM trap 64 failed (SA status 0x0200)");
    assert_eq!(node.engine.poll_timeout(), None, "nothing left to retry");
}
