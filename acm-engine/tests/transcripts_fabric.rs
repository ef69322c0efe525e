//! Transcript tests of the engine on a fabric: the ACM multicast protocol from both sides
//! (docs/protocol/acm-mad.md), two engines resolving each other, and the dynamic changes
//! the reference handles only by restart (docs/ibacmp.md §9,
//! docs/reference-quirks.md §15): a port going down fails its in-flight requests with a
//! status and drops that port's caches; a LID or SM LID change re-targets SA traffic and
//! invalidates routes; a client reregister rejoins the groups; a pkey-table change adds
//! or removes endpoints; a removed address is no longer answered.
//!
//! Each test pins the whole transcript with an insta snapshot and also asserts the
//! facts the scenario is about, so a snapshot can never be accepted blindly.

mod support;

use acm_engine::config::RouteProt;
use acm_engine::{ConnId, Counter, EndpointId, Input};
use acm_engine::{LocalIp, PortEvent, RecvInfo};
use acm_proto::acm_mad::{ACM_QKEY, MULTICAST_QPN};
use acm_proto::mad::MAD_LEN;
use acm_proto::{Gid, Mtu, Rate, Selected};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::time::Duration;
use support::fabric::*;
use support::{Node, hex, reference};

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const EP0: EndpointId = EndpointId(0);

fn our_gid() -> Gid {
    reference::gid_of_lid(1)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The peer of the single-node tests, as its completion describes it.
fn peer_wc() -> RecvInfo {
    RecvInfo {
        slid: PEER_LID,
        src_qp: PEER_QPN,
        ..RecvInfo::default()
    }
}

/// The request MAD docs/test-vectors.md §15 gives for 10.0.0.1 → 10.0.0.2 (with our TID).
fn vector15_request(tid: u64) -> [u8; MAD_LEN] {
    let mut m = [0u8; MAD_LEN];
    m[..8].copy_from_slice(&[0x01, 0x2C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..24].copy_from_slice(&[0x02, 0x40, 0x02, 0x40, 0x01, 0x00, 0x00, 0x00]);
    m[24..28].copy_from_slice(&[0x0A, 0x00, 0x00, 0x02]);
    m[88..92].copy_from_slice(&[0x0A, 0x00, 0x00, 0x01]);
    m[152..168].copy_from_slice(&[
        0xFF, 0x15, 0x40, 0x01, 0xFF, 0xFF, 0x00, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00,
    ]);
    m
}

/// The response MAD of docs/test-vectors.md §15: method 0x81, the TID, gid_cnt 1, the
/// MGID.
fn vector15_response(tid: u64) -> [u8; MAD_LEN] {
    let mut m = [0u8; MAD_LEN];
    m[..8].copy_from_slice(&[0x01, 0x2C, 0x01, 0x81, 0x00, 0x00, 0x00, 0x01]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[20] = 1;
    m[152..168].copy_from_slice(&mgid().0);
    m
}

/// Checks the PathRecord query of docs/protocol/sa.md §4, case A
/// (docs/test-vectors.md §18): comp_mask DGID|SGID|PKEY, and only those fields set.
fn assert_case_a_query(mad: &[u8; MAD_LEN], dgid: Gid) {
    assert_eq!(
        &mad[..4],
        &[0x01, 0x03, 0x02, 0x01],
        "SA GET, class version 2"
    );
    assert_eq!(sa_attr(mad), ATTR_PATH_RECORD);
    assert_eq!(sa_comp_mask(mad), 0x200C, "DGID|SGID|PKEY");
    let d = &mad[56..120];
    assert_eq!(Gid::read(&d[8..24]), Some(dgid), "dgid = the peer");
    assert_eq!(
        Gid::read(&d[24..40]),
        Some(our_gid()),
        "sgid = our port GID"
    );
    assert_eq!(&d[50..52], &[0xFF, 0xFF], "pkey");
    let mut rest = d.to_vec();
    rest[8..40].fill(0);
    rest[50..52].fill(0);
    assert!(rest.iter().all(|&b| b == 0), "nothing else set: {}", hex(d));
}

// ---------------------------------------------------------------------------------------
// 1. Requester side
// ---------------------------------------------------------------------------------------

/// Sends the ACM request for 10.0.0.1 → 10.0.0.2 and checks it against
/// docs/test-vectors.md §15; returns its TID.
fn request_goes_out(node: &mut Node, conn: ConnId) -> u64 {
    send_request(
        node,
        conn,
        "resolve 10.0.0.1 -> 10.0.0.2",
        &resolve_ip(A_IP, B_IP),
    );
    node.settle_now();
    assert!(node.replies_to(conn).is_empty(), "the client waits");
    assert_eq!(node.ud_sent.len(), 1, "one ACM request");
    let req = node.ud_sent[0].clone();
    let tid = mad_tid(&req.mad.0);
    assert_eq!(tid, 2, "TID 1 went to the join");
    assert_eq!(
        hex(&req.mad.0),
        hex(&vector15_request(tid)),
        "docs/test-vectors.md §15"
    );
    assert_eq!(req.ep, EP0);
    assert_eq!(req.av.dlid, MLID, "to group 0's MLID");
    assert_eq!(req.av.remote_qpn, MULTICAST_QPN);
    assert_eq!(req.av.remote_qkey, ACM_QKEY);
    assert_eq!(req.av.grh.dgid, mgid(), "GRH dgid = the MGID");
    assert_eq!(node.engine.counters().get(Counter::AddrQuery), 1);
    tid
}

/// The peer's unicast answer to our request.
fn peer_answers(node: &mut Node, tid: u64) {
    let resp = acm_response(tid, mgid());
    assert_eq!(
        hex(&resp),
        hex(&vector15_response(tid)),
        "docs/test-vectors.md §15, the reply"
    );
    feed_ud(
        node,
        EP0,
        peer_wc(),
        Some(&grh(peer_gid(), our_gid())),
        &resp,
    );
}

#[test]
fn requester_resolves_over_acm_then_sa() {
    let mut node = node_with(config_without_preload());
    let conn = ConnId(1);
    let tid = request_goes_out(&mut node, conn);
    assert!(sa_sent_attr(&node, ATTR_PATH_RECORD).is_empty());

    node.advance(ms(50));
    peer_answers(&mut node, tid);
    node.advance(ms(10));

    // route_prot sa: the SA is asked for the path to the GID the GRH gave.
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD);
    assert_eq!(queries.len(), 1, "one PathRecord query");
    assert_case_a_query(&queries[0], peer_gid());

    let replies = node.replies_to(conn);
    assert_eq!(replies.len(), 1);
    let r = &replies[0];
    assert_eq!(r.len(), 88, "success reply: header + one path entry");
    assert_eq!(status(r), SUCCESS);
    let p = reply_path(r);
    assert_eq!(p.dgid, peer_gid());
    assert_eq!(p.sgid, our_gid());
    assert_eq!(p.dlid, PEER_LID, "the SA's dlid");
    assert_eq!(p.slid, 1);
    assert_eq!(p.pkey, 0xFFFF);
    assert!(
        p.reversible,
        "the SA's record (reversible) reached the client"
    );
    let c = node.engine.counters();
    assert_eq!(c.get(Counter::AddrQuery), 1);
    assert_eq!(c.get(Counter::RouteQuery), 1);
    assert_eq!(c.get(Counter::Error), 0);

    // The answer is cached: asking again sends nothing.
    let sends = (node.ud_sent.len(), node.sa_sent.len());
    let again = resolve(&mut node, ConnId(2), A_IP, B_IP);
    assert_eq!(status(&again), SUCCESS);
    assert_eq!(&again[24..88], &r[24..88], "same path");
    assert_eq!((node.ud_sent.len(), node.sa_sent.len()), sends);
    assert_eq!(node.engine.counters().get(Counter::RouteCache), 1);

    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn requester_with_route_prot_acm_builds_the_path_from_the_group() {
    let mut node = node_with(config_route_acm());
    let conn = ConnId(1);
    let tid = request_goes_out(&mut node, conn);
    node.advance(ms(50));
    let sa_before = node.sa_sent.len();
    peer_answers(&mut node, tid);

    // Answered at once, from the group: no SA traffic at all.
    let replies = node.replies_to(conn);
    assert_eq!(replies.len(), 1, "answered on the response itself");
    node.advance(ms(10));
    assert_eq!(
        node.sa_sent.len(),
        sa_before,
        "no SA MAD after the response"
    );
    assert!(sa_sent_attr(&node, ATTR_PATH_RECORD).is_empty());
    let r = &replies[0];
    assert_eq!(status(r), SUCCESS);
    let p = reply_path(r);
    assert_eq!(p.dgid, peer_gid(), "dgid from the response's GRH");
    assert_eq!(p.dlid, PEER_LID, "dlid from the completion's SLID");
    assert_eq!(p.sgid, our_gid(), "sgid from the group");
    assert_eq!(p.slid, 1);
    assert_eq!(p.pkey, 0xFFFF);
    // MTU and rate are the group's, with their selector bits (0x84, 0x83).
    assert_eq!(p.mtu, Selected::exactly(Mtu::MTU_2048));
    assert_eq!(p.rate, Selected::exactly(Rate::RATE_10));
    assert_eq!(r[24 + 54], 0x84);
    assert_eq!(r[24 + 55], 0x83);
    assert!(p.reversible);
    assert_eq!(p.numpath, 1);
    let c = node.engine.counters();
    assert_eq!(c.get(Counter::RouteQuery), 0);
    assert_eq!(c.get(Counter::AddrQuery), 1);

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 2. Responder side
// ---------------------------------------------------------------------------------------

#[test]
fn responder_caches_the_requester_and_answers_requests_for_us() {
    let mut node = reference::node();
    let peer_tid = 0x0000_0000_0107_0042;

    // A peer asks the group for 10.0.0.1 (us).
    note(&mut node, "peer 10.0.0.3 (lid 3) asks for 10.0.0.1");
    feed_ud(
        &mut node,
        EP0,
        peer_wc(),
        Some(&grh(peer_gid(), mgid())),
        &acm_request(peer_tid, PEER_IP, A_IP, &[mgid()]),
    );
    node.advance(ms(10));

    // route_prot sa: the route to the requester comes from the SA first.
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD);
    assert_eq!(queries.len(), 1);
    assert_case_a_query(&queries[0], peer_gid());

    // Then the unicast response.
    assert_eq!(node.ud_sent.len(), 1, "one response");
    let resp = node.ud_sent[0].clone();
    assert_eq!(resp.av.dlid, PEER_LID, "to the requester's LID");
    assert_eq!(resp.av.remote_qpn, PEER_QPN, "to the requester's QP");
    assert_eq!(resp.av.remote_qkey, ACM_QKEY);
    assert_eq!(
        resp.av.grh.dgid,
        peer_gid(),
        "GRH dgid = the requester's GID"
    );
    assert_eq!(
        hex(&resp.mad.0),
        hex(&vector15_response(peer_tid)),
        "method 0x81, the same TID, gid_cnt 1, gid[0] = the MGID, all else zero"
    );

    // The requester is cached: resolving it needs no ACM request.
    let r = resolve(&mut node, ConnId(1), A_IP, PEER_IP);
    assert_eq!(status(&r), SUCCESS);
    let p = reply_path(&r);
    assert_eq!(p.dgid, peer_gid());
    assert_eq!(p.dlid, PEER_LID);
    let c = node.engine.counters();
    assert_eq!(c.get(Counter::AddrQuery), 0, "no ACM request");
    assert_eq!(c.get(Counter::RouteCache), 1, "answered from the cache");
    assert_eq!(c.get(Counter::RouteQuery), 1, "no second SA query");
    assert_eq!(node.ud_sent.len(), 1);

    // A request for someone else is cached, but neither answered nor routed.
    let other = Ipv4Addr::new(10, 0, 0, 4);
    let other_gid = reference::gid_of_lid(4);
    note(&mut node, "peer 10.0.0.4 (lid 4) asks for 10.0.0.9");
    let lines = node.transcript.len();
    feed_ud(
        &mut node,
        EP0,
        RecvInfo {
            slid: 4,
            src_qp: 0x9a,
            ..RecvInfo::default()
        },
        Some(&grh(other_gid, mgid())),
        &acm_request(0x77, other, Ipv4Addr::new(10, 0, 0, 9), &[mgid()]),
    );
    node.advance(ms(10));
    assert_eq!(
        node.transcript.len(),
        lines + 1,
        "nothing but the note: no output"
    );
    assert_eq!(node.ud_sent.len(), 1, "no response");
    assert_eq!(
        sa_sent_attr(&node, ATTR_PATH_RECORD).len(),
        1,
        "no SA query"
    );
    // Resolving it finds the address (ADDR_RESOLVED): only the route is asked for.
    let r = resolve(&mut node, ConnId(2), A_IP, other);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(reply_path(&r).dgid, other_gid);
    assert_eq!(reply_path(&r).dlid, 4);
    let c = node.engine.counters();
    assert_eq!(c.get(Counter::AddrQuery), 0, "still no ACM request");
    assert_eq!(c.get(Counter::AddrCache), 1, "the address was cached");
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD);
    assert_eq!(queries.len(), 2);
    assert_case_a_query(&queries[1], other_gid);

    // A request without a GRH is dropped: nothing cached, nothing sent.
    let nogrh = Ipv4Addr::new(10, 0, 0, 5);
    note(&mut node, "peer 10.0.0.5 asks for 10.0.0.1 without a GRH");
    let (lines, sends) = (node.transcript.len(), node.ud_sent.len());
    feed_ud(
        &mut node,
        EP0,
        RecvInfo {
            slid: 5,
            src_qp: 0x9b,
            ..RecvInfo::default()
        },
        None,
        &acm_request(0x78, nogrh, A_IP, &[mgid()]),
    );
    node.advance(ms(10));
    assert_eq!(node.transcript.len(), lines + 1, "no output");
    assert_eq!(node.ud_sent.len(), sends, "no response");
    assert!(node.logs.iter().any(|l| l.contains("without GRH")));
    // Not cached: resolving it (NODELAY) starts an ACM request.
    let r = ask(
        &mut node,
        ConnId(3),
        "resolve 10.0.0.1 -> 10.0.0.5 nodelay",
        &resolve_ip_flags(A_IP, nogrh, NODELAY),
    );
    assert_eq!(status(&r), ENODATA, "NODELAY miss");
    assert_eq!(node.engine.counters().get(Counter::AddrQuery), 1);
    let last = node.ud_sent.last().expect("ACM request");
    assert_eq!(last.mad.0[3], 0x01, "a request");
    assert_eq!(&last.mad.0[24..28], &nogrh.octets());

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 3 and 9. Two engines
// ---------------------------------------------------------------------------------------

/// Node A (10.0.0.1, LID 1) resolves node B (10.0.0.2, LID 2) with `route_prot acm`,
/// then B resolves A.
fn two_nodes() -> (Fabric, Vec<u8>, Vec<u8>) {
    let a = node_with(config_route_acm());
    let b = node_b(RouteProt::Acm);
    let mut f = Fabric::new(
        a,
        Wire {
            lid: 1,
            gid: our_gid(),
        },
        b,
        Wire {
            lid: B_LID,
            gid: reference::gid_of_lid(B_LID),
        },
    );
    let ab = f.request(
        0,
        ConnId(1),
        "resolve 10.0.0.1 -> 10.0.0.2",
        &resolve_ip(A_IP, B_IP),
    );
    f.advance(ms(10));
    let ba = f.request(
        1,
        ConnId(1),
        "resolve 10.0.0.2 -> 10.0.0.1",
        &resolve_ip(B_IP, A_IP),
    );
    f.advance(ms(10));
    (f, ab, ba)
}

#[test]
fn two_engines_resolve_each_other_over_acm() {
    let (f, ab, ba) = two_nodes();
    let [a, b] = &f.nodes;

    // The harness gave each node's first QP 0x48.
    assert_eq!(open_qps(a), vec![(0, 0xFFFF, 0x48)]);
    assert_eq!(open_qps(b), vec![(0, 0xFFFF, 0x48)]);

    // A → B: the multicast request reached B, B's unicast response reached A.
    assert_eq!(a.ud_sent.len(), 1);
    assert_eq!(a.ud_sent[0].av.remote_qpn, MULTICAST_QPN);
    assert_eq!(b.ud_sent.len(), 1);
    let resp = &b.ud_sent[0];
    assert_eq!(resp.av.dlid, 1, "to A's LID");
    assert_eq!(resp.av.remote_qpn, 0x48, "to A's QP");
    assert_eq!(resp.av.grh.dgid, our_gid(), "to A's GID");
    assert_eq!(resp.mad.0[3], 0x81);
    assert_eq!(
        mad_tid(&resp.mad.0),
        mad_tid(&a.ud_sent[0].mad.0),
        "same TID"
    );
    assert_eq!(f.wire_log.len(), 2);
    assert!(
        f.wire_log.iter().all(|l| !l.ends_with("dropped")),
        "{:?}",
        f.wire_log
    );

    // A has B's path, built from the group: no SA PathRecord query anywhere.
    assert_eq!(status(&ab), SUCCESS);
    let p = reply_path(&ab);
    assert_eq!(p.dgid, reference::gid_of_lid(B_LID));
    assert_eq!(p.dlid, B_LID);
    assert_eq!(p.sgid, our_gid());
    assert_eq!(p.slid, 1);
    assert!(sa_sent_attr(a, ATTR_PATH_RECORD).is_empty());
    assert!(sa_sent_attr(b, ATTR_PATH_RECORD).is_empty());

    // B cached A from A's request: B's resolve is a cache hit.
    assert_eq!(status(&ba), SUCCESS);
    let p = reply_path(&ba);
    assert_eq!(p.dgid, our_gid());
    assert_eq!(p.dlid, 1);
    assert_eq!(p.sgid, reference::gid_of_lid(B_LID));
    assert_eq!(p.slid, B_LID);
    let cb = b.engine.counters();
    assert_eq!(cb.get(Counter::RouteCache), 1, "Route Cache Count +1 on B");
    assert_eq!(cb.get(Counter::AddrQuery), 0, "B sent no ACM request");
    assert_eq!(a.engine.counters().get(Counter::AddrQuery), 1);

    insta::assert_snapshot!(f.transcript_text());
}

#[test]
fn two_engine_runs_are_identical() {
    let (f1, ab1, ba1) = two_nodes();
    let (f2, ab2, ba2) = two_nodes();
    assert_eq!((ab1, ba1), (ab2, ba2));
    assert_eq!(f1.transcript_text(), f2.transcript_text());
    for i in 0..2 {
        assert_eq!(f1.nodes[i].logs, f2.nodes[i].logs);
        assert_eq!(f1.nodes[i].replies, f2.nodes[i].replies);
    }
    assert!(!f1.wire_log.is_empty());
}

// ---------------------------------------------------------------------------------------
// 4. Port down and up
// ---------------------------------------------------------------------------------------

/// The reference SA, except that PathRecord queries go unanswered while `hold` is set.
fn holding_sa(hold: Rc<Cell<bool>>) -> support::SaScript {
    let mut sa = reference::sa();
    Box::new(move |m: &[u8; MAD_LEN]| {
        if hold.get() && sa_attr(m) == ATTR_PATH_RECORD {
            None
        } else {
            sa(m)
        }
    })
}

#[test]
fn port_down_fails_waiting_requests_and_drops_the_port() {
    let mut node = reference::node();
    let hold = Rc::new(Cell::new(false));
    node.sa = holding_sa(hold.clone());

    // A learned route (10.0.0.2 is preloaded; its route comes from the SA).
    let r = resolve(&mut node, ConnId(1), A_IP, B_IP);
    assert_eq!(status(&r), SUCCESS);
    // A peer's address known without its route.
    let other = Ipv4Addr::new(10, 0, 0, 4);
    note(&mut node, "peer 10.0.0.4 (lid 4) asks for 10.0.0.9");
    feed_ud(
        &mut node,
        EP0,
        RecvInfo {
            slid: 4,
            src_qp: 0x9a,
            ..RecvInfo::default()
        },
        Some(&grh(reference::gid_of_lid(4), mgid())),
        &acm_request(0x77, other, Ipv4Addr::new(10, 0, 0, 9), &[mgid()]),
    );

    // Two clients wait: one on an ACM request nobody answers, one on an SA query the
    // SA holds.
    hold.set(true);
    send_request(
        &mut node,
        ConnId(2),
        "resolve 10.0.0.1 -> 10.0.0.3",
        &resolve_ip(A_IP, PEER_IP),
    );
    send_request(
        &mut node,
        ConnId(3),
        "resolve 10.0.0.1 -> 10.0.0.4",
        &resolve_ip(A_IP, other),
    );
    // And a client's own SA query (ib_acme -v) waits behind it for the SA credit.
    let verify = query_sa(our_gid(), reference::gid_of_lid(2), 0xFFFF);
    send_request(&mut node, ConnId(9), "query sa 10.0.0.1 -> lid 2", &verify);
    node.advance(ms(100));
    for conn in [2, 3, 9] {
        assert!(
            node.replies_to(ConnId(conn)).is_empty(),
            "conn {conn} waits"
        );
    }
    assert_eq!(node.engine.counters().get(Counter::AddrQuery), 1);
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), 2, "sa_depth 1");

    let down_at = node.now;
    port_event(&mut node, PortEvent::Down);
    for conn in [ConnId(2), ConnId(3)] {
        let r = node.replies_to(conn);
        assert_eq!(r.len(), 1, "conn {} answered at once", conn.0);
        assert_eq!(status(&r[0]), ENODATA);
        assert_eq!(r[0].len(), 16);
    }
    // The SA query's reply is in the "query" style: the request echoed, with ACK.
    let q = node.replies_to(ConnId(9));
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].len(), 88);
    assert_eq!((q[0][1], status(&q[0])), (0x81, ENODATA));
    assert_eq!(&q[0][16..88], &verify[16..88]);
    assert_eq!(node.now, down_at);
    let text = node.transcript_text();
    assert!(text.contains("detach ep 0 ff15:4001:ffff:3:400:: mlid 0xc001"));
    assert!(text.contains("close qp ep 0"));

    // The endpoint is gone.
    assert_eq!(query_ep(&mut node, ConnId(4), 1, 1), Err(EINVAL));
    assert_eq!(query_ep(&mut node, ConnId(4), 1, 0), Err(EINVAL));
    let r = resolve(&mut node, ConnId(5), A_IP, B_IP);
    assert_eq!(status(&r), ESRCADDR);
    // What was in flight comes back to nobody: no retransmission, no reply.
    let (sends, replies) = (node.ud_sent.len(), node.replies.len());
    node.advance(Duration::from_secs(10));
    assert_eq!((node.ud_sent.len(), node.replies.len()), (sends, replies));

    // The port comes back: a fresh endpoint, QP and join.
    hold.set(false);
    let joins = sa_sent_attr(&node, ATTR_MCMEMBER).len();
    port_event(&mut node, PortEvent::Active(reference::port_attrs()));
    assert_eq!(open_qps(&node), vec![(1, 0xFFFF, 0x49)], "a new QP");
    assert_eq!(
        sa_sent_attr(&node, ATTR_MCMEMBER).len(),
        joins + 1,
        "a new join"
    );
    // Until the join is answered the new endpoint is not ready.
    let r = resolve(&mut node, ConnId(6), A_IP, A_IP);
    assert_eq!(status(&r), ENODATA);
    node.advance(ms(10));
    let r = resolve(&mut node, ConnId(6), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS, "loopback works again");
    let p = reply_path(&r);
    assert_eq!(
        (p.dgid, p.sgid, p.dlid, p.slid),
        (our_gid(), our_gid(), 1, 1)
    );
    assert_eq!(attached(&node, mgid()), vec![1]);
    let ep = query_ep(&mut node, ConnId(4), 1, 1).expect("endpoint 1");
    assert_eq!(ep.pkey, 0xFFFF);
    assert_eq!(ep.addrs, vec!["fakehost", "10.0.0.1", "fd00::1"]);

    // The old caches went with the port: the learned route is asked for again, and
    // the peer learned from its request is unknown.
    let pr = sa_sent_attr(&node, ATTR_PATH_RECORD).len();
    let r = resolve(&mut node, ConnId(7), A_IP, B_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), pr + 1);
    let r = ask(
        &mut node,
        ConnId(8),
        "resolve 10.0.0.1 -> 10.0.0.4 nodelay",
        &resolve_ip_flags(A_IP, other, NODELAY),
    );
    assert_eq!(status(&r), ENODATA);
    assert_eq!(
        node.engine.counters().get(Counter::AddrQuery),
        2,
        "asked again"
    );

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 5. SM LID change
// ---------------------------------------------------------------------------------------

fn sa_send_lines(node: &Node) -> Vec<String> {
    node.transcript
        .iter()
        .filter(|l| l.contains(" sa send "))
        .cloned()
        .collect()
}

#[test]
fn sm_change_retargets_sa_and_invalidates_routes() {
    let mut node = reference::node();
    let r1 = resolve(&mut node, ConnId(1), A_IP, B_IP);
    assert_eq!(status(&r1), SUCCESS);
    let lines = sa_send_lines(&node);
    assert!(
        lines
            .last()
            .expect("query")
            .contains("sa send port 1 dlid 1 ")
    );
    assert!(lines.last().expect("query").contains("attr 0x0035"));

    port_event(&mut node, PortEvent::SmChange(attrs_with_sm(7)));
    assert_eq!(
        sa_send_lines(&node).len(),
        lines.len(),
        "no SA traffic by itself"
    );

    // The READY route is asked for again, from the new SM.
    let r2 = resolve(&mut node, ConnId(2), A_IP, B_IP);
    assert_eq!(status(&r2), SUCCESS);
    assert_eq!(&r2[24..88], &r1[24..88], "the same path");
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD);
    assert_eq!(queries.len(), 2, "two PathRecord queries in total");
    let last = sa_send_lines(&node).pop().expect("query");
    assert!(last.contains("sa send port 1 dlid 7 "), "{last}");
    assert!(last.contains("attr 0x0035"));
    // Asked for as the hosts preload first asked (docs/protocol/sa.md §4, case C), not
    // constrained by the old SM's answer.
    assert_eq!(sa_comp_mask(&queries[0]), 0x282C);
    assert_eq!(sa_comp_mask(&queries[1]), 0x282C);
    let c = node.engine.counters();
    assert_eq!(c.get(Counter::RouteQuery), 2);
    assert_eq!(c.get(Counter::AddrCache), 2, "both were ADDR_RESOLVED hits");
    assert_eq!(c.get(Counter::RouteCache), 0);

    // Loopback stays served from the cache.
    let r = resolve(&mut node, ConnId(3), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(node.engine.counters().get(Counter::RouteCache), 1);
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), 2);
    // And the refreshed route is cached again.
    let r = resolve(&mut node, ConnId(4), A_IP, B_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(node.engine.counters().get(Counter::RouteCache), 2);
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), 2);

    insta::assert_snapshot!(node.transcript_text());
}

/// The fabric's SA after our port moved to `lid`: a PathRecord query from any other
/// SLID finds no records (ERR_NO_RECORDS); answers carry the new SLID.
fn relid_sa(lid: u16) -> support::SaScript {
    let mut sa = reference::sa();
    Box::new(move |m: &[u8; MAD_LEN]| {
        if sa_attr(m) != ATTR_PATH_RECORD {
            return sa(m);
        }
        let slid = u16::from_be_bytes([m[56 + 42], m[56 + 43]]);
        let mut r = sa(m)?;
        if slid != 0 && slid != lid {
            r[4] = 0x03; // ERR_NO_RECORDS
            r[56..].fill(0);
        } else {
            r[56 + 42..56 + 44].copy_from_slice(&lid.to_be_bytes());
        }
        Some(r)
    })
}

#[test]
fn lid_change_requeries_routes_from_the_new_lid() {
    let mut node = reference::node();
    let r = resolve(&mut node, ConnId(1), A_IP, B_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(reply_path(&r).slid, 1);

    let new = acm_engine::PortAttrs {
        lid: 5,
        ..reference::port_attrs()
    };
    node.sa = relid_sa(5);
    port_event(&mut node, PortEvent::LidChange(new));

    // Loopback entries are rebuilt with the new LID, without the SA.
    let r = resolve(&mut node, ConnId(2), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);
    let p = reply_path(&r);
    assert_eq!((p.slid, p.dlid), (5, 5));
    assert_eq!(sa_sent_attr(&node, ATTR_PATH_RECORD).len(), 1);

    // The learned route is asked for again, from the new LID, and the client gets a
    // path that starts there.
    let r = resolve(&mut node, ConnId(3), A_IP, B_IP);
    assert_eq!(status(&r), SUCCESS, "{}", hex(&r));
    let p = reply_path(&r);
    assert_eq!(p.slid, 5, "the new SLID");
    assert_eq!(p.dlid, 2);
    assert_eq!(p.dgid, reference::gid_of_lid(2));
    let queries = sa_sent_attr(&node, ATTR_PATH_RECORD);
    assert_eq!(queries.len(), 2);
    let q = &queries[1][56..120];
    assert_eq!(Gid::read(&q[8..24]), Some(reference::gid_of_lid(2)), "dgid");
    assert_eq!(Gid::read(&q[24..40]), Some(our_gid()), "sgid");
    assert_eq!(u16::from_be_bytes([q[42], q[43]]), 5, "slid = the new LID");
    assert_eq!(&q[50..52], &[0xFF, 0xFF], "pkey");
    // Nothing the old answer chose (DLID, MTU, rate, lifetime) constrains the new one.
    assert_eq!(
        sa_comp_mask(&queries[1]),
        0x282C,
        "DGID|SGID|SLID|REVERSIBLE|PKEY"
    );

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 6. Client reregister
// ---------------------------------------------------------------------------------------

#[test]
fn client_reregister_rejoins() {
    let mut node = reference::node();
    assert_eq!(sa_sent_attr(&node, ATTR_MCMEMBER).len(), 1);
    assert_eq!(attached(&node, mgid()), vec![0]);
    let lines = node.transcript.len();

    port_event(&mut node, PortEvent::ClientReregister);
    let new: Vec<String> = node.transcript[lines + 1..].to_vec();
    assert_eq!(new.len(), 2, "{new:?}");
    assert!(new[0].ends_with("detach ep 0 ff15:4001:ffff:3:400:: mlid 0xc001"));
    assert!(new[1].contains("sa send port 1 dlid 1 "));
    assert!(new[1].contains("method 0x02 attr 0x0038"));
    let joins = sa_sent_attr(&node, ATTR_MCMEMBER);
    assert_eq!(joins.len(), 2);
    assert_eq!(Gid::read(&joins[1][56..72]), Some(mgid()));

    // While the join is out the endpoint is not ready.
    let r = resolve(&mut node, ConnId(1), A_IP, A_IP);
    assert_eq!(status(&r), ENODATA, "endpoint not ready");
    assert_eq!(node.engine.counters().get(Counter::NoData), 1);

    node.advance(ms(10));
    assert!(
        node.transcript_text()
            .contains("attach ep 0 ff15:4001:ffff:3:400:: mlid 0xc001")
    );
    assert_eq!(attached(&node, mgid()), vec![0]);
    let r = resolve(&mut node, ConnId(2), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(open_qps(&node), vec![(0, 0xFFFF, 0x48)], "the same QP");

    // A reregister while the port is down is held; the port coming back up makes a
    // fresh endpoint that joins by itself, which makes the held reregister redundant.
    port_event(&mut node, PortEvent::Down);
    let rereg_logs = |n: &Node| {
        n.logs
            .iter()
            .filter(|l| l.contains("client reregister"))
            .count()
    };
    assert_eq!(rereg_logs(&node), 1);
    let lines = node.transcript.len();
    port_event(&mut node, PortEvent::ClientReregister);
    assert_eq!(node.transcript.len(), lines + 1, "nothing but the note");
    assert_eq!(rereg_logs(&node), 1, "not delivered yet");
    node.advance(ms(10));

    let joins = sa_sent_attr(&node, ATTR_MCMEMBER).len();
    port_event(&mut node, PortEvent::Active(reference::port_attrs()));
    assert_eq!(
        rereg_logs(&node),
        1,
        "absorbed by the fresh endpoint's join"
    );
    node.advance(ms(10));
    // Only the new endpoint's own join.
    assert_eq!(sa_sent_attr(&node, ATTR_MCMEMBER).len(), joins + 1);
    assert_eq!(attached(&node, mgid()), vec![1]);
    let r = resolve(&mut node, ConnId(3), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 7. Pkey-table change
// ---------------------------------------------------------------------------------------

#[test]
fn pkey_change_adds_and_removes_endpoints() {
    let mut config = reference::config();
    let text = format!("{}fakehost-b fakeib0 1 0x8001\n", reference::ADDRS);
    let (file, diags) = acm_engine::config::AddrFile::parse("ibacm_addr.cfg", &text);
    assert!(diags.is_empty(), "{diags:?}");
    config.addr_file = Some(file);
    let mut node = node_with(config);
    assert_eq!(
        open_qps(&node),
        vec![(0, 0xFFFF, 0x48)],
        "0x8001 is not in the table"
    );
    assert_eq!(query_ep(&mut node, ConnId(1), 2, 0), Err(EINVAL));

    port_event(
        &mut node,
        PortEvent::PkeyChange(attrs_with_pkeys(&[0xFFFF, 0x8001])),
    );
    assert!(
        node.transcript_text()
            .contains("open qp ep 1 pkey 0x8001 index 1 -> qpn 0x49")
    );
    node.advance(ms(10));
    let joins = sa_sent_attr(&node, ATTR_MCMEMBER);
    assert_eq!(joins.len(), 2);
    let m8001 = mgid_of(0x8001);
    assert_eq!(m8001.to_string(), "ff15:4001:8001:3:400::");
    assert_eq!(
        Gid::read(&joins[1][56..72]),
        Some(m8001),
        "the 0x8001 group"
    );
    assert_eq!(&joins[1][56 + 40..56 + 42], &[0x80, 0x01], "its pkey");
    assert_eq!(attached(&node, m8001), vec![1]);
    assert_eq!(attached(&node, mgid()), vec![0], "endpoint 0 untouched");

    // Enumeration: newest first, as the reference pushes on the front.
    let e1 = query_ep(&mut node, ConnId(1), 1, 1).expect("endpoint 1");
    assert_eq!(e1.pkey, 0x8001);
    assert_eq!(e1.addrs, vec!["fakehost-b"]);
    let e2 = query_ep(&mut node, ConnId(1), 2, 1).expect("endpoint 2");
    assert_eq!(e2.pkey, 0xFFFF);
    assert_eq!(e2.addrs, vec!["fakehost", "10.0.0.1", "fd00::1"]);
    assert_eq!(query_ep(&mut node, ConnId(1), 3, 1), Err(EINVAL));

    // 0x8001 leaves the table: its endpoint closes; 0xFFFF's stays.
    port_event(
        &mut node,
        PortEvent::PkeyChange(attrs_with_pkeys(&[0xFFFF])),
    );
    let text = node.transcript_text();
    assert!(text.contains("detach ep 1 ff15:4001:8001:3:400:: mlid 0xc001"));
    assert!(text.contains("close qp ep 1"));
    assert_eq!(open_qps(&node), vec![(0, 0xFFFF, 0x48)]);
    let e1 = query_ep(&mut node, ConnId(1), 1, 1).expect("endpoint 1");
    assert_eq!(e1.pkey, 0xFFFF);
    assert_eq!(query_ep(&mut node, ConnId(1), 2, 1), Err(EINVAL));
    let r = resolve(&mut node, ConnId(2), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);

    insta::assert_snapshot!(node.transcript_text());
}

// ---------------------------------------------------------------------------------------
// 8. Local IP added and removed
// ---------------------------------------------------------------------------------------

fn ipoib(addr: Ipv4Addr) -> LocalIp {
    LocalIp {
        addr: IpAddr::V4(addr),
        prefix_len: Some(24),
        gid: our_gid(),
        pkey: 0xFFFF,
    }
}

#[test]
fn local_ip_added_is_served_and_removed_is_not_answered() {
    let ip = Ipv4Addr::new(192, 168, 1, 5);
    let mut node = reference::node();
    ip_added(&mut node, ipoib(ip));
    // Added at runtime: appended after the address file's names.
    let ep = query_ep(&mut node, ConnId(1), 1, 1).expect("endpoint 1");
    assert_eq!(
        ep.addrs,
        vec!["fakehost", "10.0.0.1", "fd00::1", "192.168.1.5/24"]
    );

    // It is a source, and a loopback destination.
    let r = resolve(&mut node, ConnId(2), ip, A_IP);
    assert_eq!(status(&r), SUCCESS);
    let r = resolve(&mut node, ConnId(2), A_IP, ip);
    assert_eq!(status(&r), SUCCESS);
    let p = reply_path(&r);
    assert_eq!(
        (p.dgid, p.dlid, p.numpath),
        (our_gid(), 1, 0),
        "loopback path"
    );
    assert_eq!(node.engine.counters().get(Counter::AddrQuery), 0);

    // Peers asking for it are answered.
    note(&mut node, "peer 10.0.0.3 asks for 192.168.1.5");
    feed_ud(
        &mut node,
        EP0,
        peer_wc(),
        Some(&grh(peer_gid(), mgid())),
        &acm_request(0x51, PEER_IP, ip, &[mgid()]),
    );
    node.advance(ms(10));
    assert_eq!(node.ud_sent.len(), 1, "answered");
    assert_eq!(mad_tid(&node.ud_sent[0].mad.0), 0x51);

    note(&mut node, "local ip removed 192.168.1.5");
    node.input(Input::LocalIpRemoved(IpAddr::V4(ip)));
    let ep = query_ep(&mut node, ConnId(1), 1, 1).expect("endpoint 1");
    assert_eq!(ep.addrs, vec!["fakehost", "10.0.0.1", "fd00::1"]);
    let r = resolve(&mut node, ConnId(3), ip, A_IP);
    assert_eq!(status(&r), ESRCADDR, "no longer a source");

    // A peer asking for it is cached but not answered.
    note(&mut node, "peer 10.0.0.4 asks for 192.168.1.5");
    feed_ud(
        &mut node,
        EP0,
        RecvInfo {
            slid: 4,
            src_qp: 0x9a,
            ..RecvInfo::default()
        },
        Some(&grh(reference::gid_of_lid(4), mgid())),
        &acm_request(0x52, Ipv4Addr::new(10, 0, 0, 4), ip, &[mgid()]),
    );
    node.advance(ms(10));
    assert_eq!(node.ud_sent.len(), 1, "no answer for a removed address");

    // Its loopback entry is gone: resolving it goes to the network.
    let r = ask(
        &mut node,
        ConnId(4),
        "resolve 10.0.0.1 -> 192.168.1.5 nodelay",
        &resolve_ip_flags(A_IP, ip, NODELAY),
    );
    assert_eq!(status(&r), ENODATA);
    let last = node.ud_sent.last().expect("ACM request");
    assert_eq!(last.mad.0[3], 0x01);
    assert_eq!(&last.mad.0[24..28], &ip.octets());
    assert_eq!(node.engine.counters().get(Counter::AddrQuery), 1);

    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn host_ips_known_at_start_come_before_file_names() {
    let mut node = Node::new(reference::config(), reference::sa(), reference::route());
    ip_added(&mut node, ipoib(Ipv4Addr::new(192, 168, 1, 5)));
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let ep = query_ep(&mut node, ConnId(1), 1, 1).expect("endpoint 1");
    assert_eq!(
        ep.addrs,
        vec!["192.168.1.5/24", "fakehost", "10.0.0.1", "fd00::1"]
    );
    let r = resolve(&mut node, ConnId(2), Ipv4Addr::new(192, 168, 1, 5), A_IP);
    assert_eq!(status(&r), SUCCESS);
    insta::assert_snapshot!(node.transcript_text());
}
