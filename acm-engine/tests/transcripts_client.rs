//! Transcript tests of the client protocol (docs/protocol/client-messages.md §7–§12,
//! docs/ibacmp.md §3, docs/daemon.md §12, docs/protocol/netlink-ls.md and the test
//! vectors of docs/test-vectors.md) on the reference fabric: each test drives a one-node
//! harness, checks the key reply bytes explicitly, and snapshots the node's transcript.

mod support;

use acm_engine::{ConnId, EndpointId, Input, Instant};
use acm_engine::{FabricEvent, LocalIp, MadBytes};
use acm_proto::client::FrameError;
use acm_proto::mad::MAD_LEN;
use acm_proto::netlink::{
    IpResolveRequestRepr, LsOp, LsRequestRepr, PathUse, ResolveHeaderRepr, SetTimeoutRepr,
};
use std::net::IpAddr;
use std::time::Duration;
use support::kernel_model::{Rule, Verdict};
use support::requests::*;
use support::{Node, RouteScript, SaScript, kernel_requests, reference};

const LOCAL_GID: &str = "fe80::2:c903:a0:b001";
const PEER_GID: &str = "fe80::2:c903:a0:b002";
/// Group 0's MGID: pkey 0xffff, rate 10 Gb/s (3), MTU 2048 (4) (docs/protocol/sa.md §5).
const MGID: &str = "ff15:4001:ffff:3:400::";
const EP: EndpointId = EndpointId(0);

const ATTR_PATH_RECORD: u16 = 0x0035;

/// A started reference node whose transcript starts after the start-up (QP, join,
/// attach), so snapshots show only what the test did.
fn fresh() -> Node {
    let mut node = reference::node();
    node.transcript.clear();
    node
}

/// A reference node with its own SA and routing scripts, started.
fn node_with(sa: SaScript, route: RouteScript) -> Node {
    let mut node = Node::new(reference::config(), sa, route);
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    node.transcript.clear();
    node
}

/// The request with a recognisable tid, to check that replies echo it.
fn with_tid(mut req: Vec<u8>) -> Vec<u8> {
    req[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_ne_bytes());
    req
}

/// A RESOLVE with a recognisable tid and non-zero `data[]` (which RESOLVE ignores), to
/// check that replies echo the one and zero the other.
fn tagged(req: Vec<u8>) -> Vec<u8> {
    let mut req = with_tid(req);
    req[3..6].copy_from_slice(&[0xd0, 0xd1, 0xd2]);
    req
}

/// A core-generated error (docs/protocol/client-messages.md §8.1): header with ACK,
/// status, data zeroed, length 16 in host order, tid echoed, no body.
fn core_error(req: &[u8], status: u8) -> Vec<u8> {
    let mut r = req[..HDR].to_vec();
    r[1] |= 0x80;
    r[2] = status;
    r[3..6].fill(0);
    r[6..8].copy_from_slice(&16u16.to_ne_bytes());
    r
}

/// A provider failure (docs/protocol/client-messages.md §8.5): as a core error but
/// without the ACK bit (docs/reference-quirks.md §2).
fn provider_error(req: &[u8], status: u8) -> Vec<u8> {
    let mut r = core_error(req, status);
    r[1] = req[1];
    r
}

/// The reply to a QUERY_SA error (docs/protocol/client-messages.md §8.4): the request
/// echoed with ACK and status.
fn query_error(req: &[u8], status: u8) -> Vec<u8> {
    let mut r = req.to_vec();
    r[1] |= 0x80;
    r[2] = status;
    r
}

/// The PathRecord queries the node sent to the SA (joins left out).
fn path_queries(node: &Node) -> Vec<(Instant, [u8; MAD_LEN])> {
    node.sa_sent
        .iter()
        .filter(|(_, m)| u16::from_be_bytes([m.0[16], m.0[17]]) == ATTR_PATH_RECORD)
        .map(|(t, m)| (*t, m.0))
        .collect()
}

fn comp_mask(mad: &[u8; MAD_LEN]) -> u64 {
    u64::from_be_bytes(mad[48..56].try_into().expect("8 bytes"))
}

/// The record the reference fabric's SA answers `query` with.
fn sa_record_for(query: &[u8; MAD_LEN]) -> [u8; 64] {
    let resp = (reference::sa())(query).expect("the SA answers PathRecord queries");
    resp[56..120].try_into().expect("64 bytes")
}

/// The loopback path of the reference port (docs/ibacmp.md §7): our GID and LID at both
/// ends, reversible with numpath 0, pkey 0xffff, MTU 2048 and 10 Gb/s without selector
/// bits.
fn loopback_path() -> [u8; 64] {
    Path {
        dgid: Some(gid(LOCAL_GID)),
        sgid: Some(gid(LOCAL_GID)),
        dlid: 1,
        slid: 1,
        reversible_numpath: 0x80,
        pkey: 0xffff,
        mtu: 0x04,
        rate: 0x03,
        packet_lifetime: 0,
    }
    .bytes()
}

/// The path the reference SA gives for the peer at LID 2 (the real capture's bytes).
fn peer_path() -> [u8; 64] {
    Path {
        dgid: Some(gid(PEER_GID)),
        sgid: Some(gid(LOCAL_GID)),
        dlid: 2,
        slid: 1,
        reversible_numpath: 0x81,
        pkey: 0xffff,
        mtu: 0x84,
        rate: 0x83,
        packet_lifetime: 0x92,
    }
    .bytes()
}

/// Checks an ibacmp success reply (docs/protocol/client-messages.md §8.5): opcode 0x01
/// without ACK, status 0, data zeroed, length 88 (or 160 with the chosen source), entry 0
/// a PATH with flags 0x2B.
fn assert_success(r: &[u8], len: usize, path: &[u8; 64]) {
    assert_eq!(r.len(), len, "reply length");
    assert_eq!(
        &r[..3],
        &[1, 0x01, 0],
        "version, opcode without ACK, status"
    );
    assert_eq!(&r[3..6], &[0, 0, 0], "data[] zeroed");
    assert_eq!(usize::from(resolve_len(r)), len, "length field, host order");
    assert_eq!(
        entry_flags(r, 0),
        0x2b,
        "GMP|PRIMARY|OUTBOUND|INBOUND_REVERSE"
    );
    assert_eq!(entry_type(r, 0), T_PATH);
    assert_eq!(&r[22..24], &[0, 0], "reserved");
    assert_eq!(&entry_info(r, 0), path, "path record");
}

/// A loopback resolve on `conn` must still be answered at once, with success.
fn assert_served(node: &mut Node, conn: ConnId) {
    let r = node
        .request(conn, &resolve_ip("10.0.0.1", "10.0.0.1"))
        .unwrap_or_else(|| panic!("conn {} got no reply", conn.0));
    assert_success(&r, 88, &loopback_path());
}

/// A global PERF_QUERY on `conn`, decoded.
fn perf_global(node: &mut Node, conn: ConnId) -> Vec<u64> {
    let r = node.request(conn, &perf_index(0)).expect("perf reply");
    assert_eq!(&r[..8], &[1, 0x82, 0, 7, 0, 0, 0, 72]);
    perf_counters(&r)
}

// Counter positions in a PERF_QUERY reply (docs/daemon.md §12).
const ERROR: usize = 0;
const RESOLVE: usize = 1;
const NO_DATA: usize = 2;
const ADDR_QUERY: usize = 3;
const ADDR_CACHE: usize = 4;
const ROUTE_QUERY: usize = 5;
const ROUTE_CACHE: usize = 6;

/// `after - before`, counter by counter.
fn delta(before: &[u64], after: &[u64]) -> Vec<u64> {
    before.iter().zip(after).map(|(b, a)| a - b).collect()
}

/// The seven counters, zero except the given (position, value) pairs.
fn only(pairs: &[(usize, u64)]) -> Vec<u64> {
    let mut v = vec![0; 7];
    for &(i, n) in pairs {
        v[i] = n;
    }
    v
}

#[test]
fn loopback_resolve_is_served_from_the_cache() {
    let mut node = fresh();
    let before = perf_global(&mut node, ConnId(90));
    let ep_before = node.engine.endpoint_counters(EP).expect("endpoint");

    let req = capture("real-ibacm", "resolve_loopback_ip.req000.bin");
    assert_eq!(
        req,
        resolve_ip("10.0.0.1", "10.0.0.1"),
        "what ib_acme wrote"
    );
    let r = node.request(ConnId(1), &req).expect("reply");

    assert_success(&r, 88, &loopback_path());
    assert_eq!(r, capture("real-ibacm", "resolve_loopback_ip.resp000.bin"));
    assert!(path_queries(&node).is_empty(), "no SA query");
    assert!(node.ud_sent.is_empty(), "no ACM request");

    let after = perf_global(&mut node, ConnId(91));
    assert_eq!(
        delta(&before, &after),
        only(&[(RESOLVE, 1), (ROUTE_CACHE, 1)])
    );
    assert_eq!(after, node.engine.counters().0.to_vec());
    let ep_after = node.engine.endpoint_counters(EP).expect("endpoint");
    assert_eq!(
        delta(&ep_before.0, &ep_after.0),
        only(&[(RESOLVE, 1), (ROUTE_CACHE, 1)])
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn preloaded_address_gets_its_route_from_the_sa_then_from_the_cache() {
    let mut node = fresh();
    let req = capture("real-ibacm", "resolve_preloaded_ip.req000.bin");
    assert_eq!(
        req,
        resolve_ip("10.0.0.1", "10.0.0.2"),
        "what ib_acme wrote"
    );

    let r = node.request(ConnId(1), &req).expect("reply");

    // One PathRecord GET (docs/protocol/sa.md §4, case C): dgid from the hosts file, sgid
    // of the port, slid, reversible, pkey.
    let queries = path_queries(&node);
    assert_eq!(queries.len(), 1);
    let q = &queries[0].1;
    assert_eq!(&q[..4], &[1, 0x03, 2, 0x01], "SA class 2, GET");
    assert_eq!(&q[16..18], &[0x00, 0x35], "PathRecord");
    assert_eq!(comp_mask(q), 0x282c, "DGID|SGID|SLID|REVERSIBLE|PKEY");
    let query = Path {
        dgid: Some(gid(PEER_GID)),
        sgid: Some(gid(LOCAL_GID)),
        slid: 1,
        reversible_numpath: 0x80,
        pkey: 0xffff,
        ..Path::default()
    };
    assert_eq!(&q[56..120], &query.bytes());
    assert!(q[120..].iter().all(|&b| b == 0));

    // The reply carries the SA's record.
    assert_eq!(r[..8], [1, 0x01, 0, 0, 0, 0, 88, 0]);
    assert_eq!(entry_flags(&r, 0), 0x2b);
    assert_eq!(entry_info(&r, 0), sa_record_for(q));
    assert_success(&r, 88, &peer_path());
    assert_eq!(r, capture("real-ibacm", "resolve_preloaded_ip.resp000.bin"));

    // Again: from the cache, no SA query.
    let before = node.engine.counters();
    let again = node.request(ConnId(2), &req).expect("reply");
    assert_eq!(again, r);
    assert_eq!(path_queries(&node).len(), 1, "no second SA query");
    let after = node.engine.counters();
    assert_eq!(
        delta(&before.0, &after.0),
        only(&[(RESOLVE, 1), (ROUTE_CACHE, 1)])
    );
    assert_eq!(after.0[ADDR_CACHE], 1);
    assert_eq!(after.0[ROUTE_QUERY], 1);
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn concurrent_requests_for_one_destination_share_one_sa_query() {
    let mut node = fresh();
    // `ib_acme -f n -s fakehost -d host2`: host2 is preloaded without a route.
    let req = resolve(&[name(SOURCE, "fakehost"), name(DEST, "host2")]);
    assert_eq!(
        req,
        capture("real-ibacm", "resolve_preloaded_name.req000.bin")
    );
    for c in 1..=100 {
        node.input(Input::ClientRequest {
            conn: ConnId(c),
            bytes: &req,
        });
    }
    assert!(node.replies.is_empty(), "all wait for the route");
    assert_eq!(path_queries(&node).len(), 1);
    node.settle();

    let queries = path_queries(&node);
    assert_eq!(queries.len(), 1, "exactly one SA query");
    // A NAME destination gets no source GID filled in: case C without sgid.
    assert_eq!(comp_mask(&queries[0].1), 0x2824);
    assert_eq!(node.replies.len(), 100);
    let first = node.replies[0].1.clone();
    assert_success(&first, 88, &peer_path());
    for (i, (conn, r)) in node.replies.iter().enumerate() {
        assert_eq!(*conn, ConnId(i as u64 + 1), "arrival order");
        assert_eq!(r, &first, "identical replies");
    }
    let c = node.engine.counters();
    assert_eq!(c.0[RESOLVE], 100);
    assert_eq!(
        c.0[ADDR_CACHE], 1,
        "only the first found the address cached"
    );
    assert_eq!(c.0[ROUTE_QUERY], 1);
    assert_eq!(c.0[ERROR] + c.0[NO_DATA], 0);
    insta::assert_snapshot!(node.transcript_text());
}

/// Checks an ACM resolve request MAD against docs/test-vectors.md §15 (IPv4 `src` →
/// `dst`).
fn assert_acm_request(mad: &[u8; MAD_LEN], tid: u64, src: [u8; 4], dst: [u8; 4]) {
    assert_eq!(
        &mad[0..8],
        &[0x01, 0x2c, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01]
    );
    assert_eq!(&mad[8..16], &tid.to_be_bytes());
    assert_eq!(
        &mad[16..24],
        &[0x02, 0x40, 0x02, 0x40, 0x01, 0x00, 0x00, 0x00]
    );
    assert_eq!(&mad[24..28], &dst);
    assert!(mad[28..88].iter().all(|&b| b == 0));
    assert_eq!(&mad[88..92], &src);
    assert!(mad[92..152].iter().all(|&b| b == 0));
    assert_eq!(&mad[152..168], &gid(MGID).0);
    assert!(mad[168..].iter().all(|&b| b == 0));
}

#[test]
fn nodelay_miss_answers_enodata_at_once_and_resolves_in_the_background() {
    let mut node = fresh();
    let req = capture("real-ibacm", "resolve_unknown_dest_nodelay.req000.bin");
    assert_eq!(req, resolve_ip_nodelay("10.0.0.1", "10.0.0.9"));
    let t0 = node.now;

    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(node.now, t0, "answered at once");
    assert_eq!(r, provider_error(&req, ENODATA));
    assert_eq!(r, [1, 0x01, 3, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        r,
        capture("real-ibacm", "resolve_unknown_dest_nodelay.resp000.bin")
    );

    // The multicast lookup went out anyway (docs/protocol/acm-mad.md §4,
    // docs/test-vectors.md §15).
    assert_eq!(node.ud_sent.len(), 1);
    let sent = &node.ud_sent[0];
    assert_eq!(sent.at, t0);
    assert_eq!(sent.av.dlid, 0xc001);
    assert_eq!(sent.av.remote_qpn, 0xff_ffff);
    assert_eq!(sent.av.remote_qkey, 0x8001_0000);
    assert_eq!(sent.av.grh.dgid, gid(MGID));
    assert_acm_request(&sent.mad.0, 2, [10, 0, 0, 1], [10, 0, 0, 9]);

    // Nobody answers: the lookup retries and times out, and nothing more is replied.
    node.settle();
    assert_eq!(node.ud_sent.len(), 2, "retries 1: two transmissions");
    assert_eq!(node.replies.len(), 1, "nothing else replied");
    let c = node.engine.counters();
    assert_eq!(
        c.0.to_vec(),
        only(&[(RESOLVE, 1), (NO_DATA, 1), (ADDR_QUERY, 1)])
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn nodelay_miss_is_served_from_the_cache_once_a_peer_answered() {
    // docs/test-vectors.md §2 to its end: the peer answers the background lookup, the
    // route comes from the SA, and the repeated NODELAY request succeeds from the cache.
    let mut node = fresh();
    let req = resolve_ip_nodelay("10.0.0.1", "10.0.0.9");
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(status(&r), ENODATA);

    let tid = node.ud_sent[0].mad.0[8..16].to_vec();
    let peer = gid("fe80::2:c903:a0:b009");
    let mut mad = vec![0u8; MAD_LEN];
    mad[..8].copy_from_slice(&[0x01, 0x2c, 0x01, 0x81, 0x00, 0x00, 0x00, 0x01]);
    mad[8..16].copy_from_slice(&tid);
    mad[20] = 1;
    mad[152..168].copy_from_slice(&gid(MGID).0);
    let mut grh = [0u8; 40];
    grh[0] = 0x60;
    grh[8..24].copy_from_slice(&peer.0);
    grh[24..40].copy_from_slice(&gid(LOCAL_GID).0);
    let wc = acm_engine::RecvInfo {
        slid: 9,
        src_qp: 0x99,
        dlid_path_bits: 0,
        pkey_index: 0,
    };
    let at = node.now + Duration::from_millis(5);
    node.schedule(
        at,
        FabricEvent::UdReceive {
            ep: EP,
            wc,
            grh: Some(grh),
            mad: MadBytes::new(&mad),
        },
    );
    node.settle();

    // The answer binds the address; the route comes from the SA (docs/protocol/sa.md §4,
    // case A; docs/test-vectors.md §18): only dgid, sgid and pkey.
    let queries = path_queries(&node);
    assert_eq!(queries.len(), 1);
    let q = &queries[0].1;
    assert_eq!(comp_mask(q), 0x200c, "DGID|SGID|PKEY");
    let want = Path {
        dgid: Some(peer),
        sgid: Some(gid(LOCAL_GID)),
        pkey: 0xffff,
        ..Path::default()
    };
    assert_eq!(&q[56..120], &want.bytes());
    assert_eq!(node.ud_sent.len(), 1, "answered before any retry");
    assert_eq!(node.replies.len(), 1, "nobody was waiting");

    node.advance(Duration::from_secs(10));
    let before = node.engine.counters();
    let r = node.request(ConnId(2), &req).expect("reply");
    assert_success(&r, 88, &sa_record_for(q));
    assert_eq!(&entry_info(&r, 0)[8..24], &peer.0, "dgid is the peer's");
    assert_eq!(&entry_info(&r, 0)[40..42], &[0, 9], "dlid");
    let after = node.engine.counters();
    assert_eq!(
        delta(&before.0, &after.0),
        only(&[(RESOLVE, 1), (ROUTE_CACHE, 1)])
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn unanswered_lookup_times_out_after_its_retries() {
    let mut node = fresh();
    let req = tagged(resolve_ip("10.0.0.1", "10.0.0.9"));
    let t0 = node.now;
    let r = node.request(ConnId(1), &req).expect("reply");

    // retries 1: two transmissions of the same MAD, SubnetTimeout 18 (1024 ms) plus
    // `timeout` 1000 ms apart; the request fails one more wait later.
    let wait = Duration::from_millis(1024 + 1000);
    assert_eq!(node.ud_sent.len(), 2);
    assert_eq!(node.ud_sent[0].at, t0);
    assert_eq!(node.ud_sent[1].at, t0 + wait);
    assert_eq!(
        node.ud_sent[0].mad, node.ud_sent[1].mad,
        "same MAD, same TID"
    );
    assert_acm_request(&node.ud_sent[0].mad.0, 2, [10, 0, 0, 1], [10, 0, 0, 9]);
    assert_eq!(
        node.now,
        t0 + wait + wait,
        "replied when the last wait ran out"
    );

    assert_eq!(r, provider_error(&req, ETIMEDOUT));
    assert_eq!(&r[..8], &[1, 0x01, 6, 0, 0, 0, 16, 0]);
    assert_eq!(&r[8..16], &req[8..16], "tid echoed");

    node.settle();
    assert_eq!(node.ud_sent.len(), 2, "no third transmission");
    assert_eq!(node.replies.len(), 1);
    let c = node.engine.counters();
    assert_eq!(
        c.0.to_vec(),
        only(&[(ERROR, 1), (RESOLVE, 1), (ADDR_QUERY, 1)])
    );
    insta::assert_snapshot!(node.transcript_text());
}

/// The reference SA, except that PathRecord queries are answered with this MAD status
/// (and no record), or not at all (`None`: umad times the send out).
fn sa_failing_paths(mad_status: Option<u16>) -> SaScript {
    let mut inner = reference::sa();
    Box::new(move |mad: &[u8; MAD_LEN]| {
        let mut resp = inner(mad)?;
        if u16::from_be_bytes([mad[16], mad[17]]) == ATTR_PATH_RECORD {
            resp[4..6].copy_from_slice(&mad_status?.to_be_bytes());
            resp[56..].fill(0);
        }
        Some(resp)
    })
}

#[test]
fn sa_errors_map_to_client_statuses() {
    // (MAD status, expected ACM status, what it is)
    let cases: [(Option<u16>, u8, &str); 6] = [
        (Some(0x0300), ENODATA, "class ERR_NO_RECORDS"),
        (Some(0x0200), EINVAL, "class ERR_REQ_INVALID"),
        (Some(0x0100), ENOMEM, "class ERR_NO_RESOURCES"),
        (Some(0x0500), ENOTCONN, "class ERR_REQ_INVALID_GID"),
        (
            Some(0x0001),
            ETIMEDOUT,
            "generic busy only (engine: fails as a timeout)",
        ),
        (None, ETIMEDOUT, "umad timeout"),
    ];
    let mut text = String::new();
    for (mad_status, want, what) in cases {
        // A BUSY answer fails the query at once only with the BUSY retries turned off
        // (the reference's behaviour; tests/transcripts_sa_load.rs has ours).
        let mut config = reference::config();
        config.options.sa_busy_retries = 0;
        let mut node = Node::new(config, sa_failing_paths(mad_status), reference::route());
        node.input(Input::DeviceAdded(reference::device()));
        node.settle();
        node.transcript.clear();
        let req = resolve_ip("10.0.0.1", "10.0.0.2");
        let t0 = node.now;
        let r = node.request(ConnId(1), &req).expect("reply");
        assert_eq!(r, provider_error(&req, want), "{what}");
        assert_eq!(path_queries(&node).len(), 1, "{what}");
        let latency = node.now.saturating_duration_since(t0);
        match mad_status {
            // umad's timeout per try times tries (timeout 1000 ms, retries 1).
            None => assert_eq!(latency, Duration::from_millis(2000), "{what}"),
            Some(_) => assert_eq!(latency, Duration::from_millis(1), "{what}"),
        }
        let c = node.engine.counters();
        let counted = if want == ENODATA { NO_DATA } else { ERROR };
        assert_eq!(c.0[counted], 1, "{what}: counted");
        assert_eq!(c.0[ERROR] + c.0[NO_DATA], 1, "{what}: counted once");

        // The failure put the destination back to INIT (docs/ibacmp.md §3): the next
        // lookup starts with an ACM multicast request.
        let again = node
            .request(ConnId(2), &resolve_ip_nodelay("10.0.0.1", "10.0.0.2"))
            .expect("reply");
        assert_eq!(status(&again), ENODATA, "{what}");
        assert_eq!(node.ud_sent.len(), 1, "{what}: ACM request after INIT");
        assert_eq!(path_queries(&node).len(), 1, "{what}");

        text.push_str(&format!("== {what}\n{}", node.transcript_text()));
    }
    insta::assert_snapshot!(text);
}

#[test]
fn query_sa_verifies_a_path_with_the_sa() {
    let mut node = fresh();

    // `ib_acme -v`, as captured: the full record goes to the SA as it is.
    let req = capture("real-ibacm", "resolve_preloaded_ip_verify.req001.bin");
    assert_eq!(req, resolve(&[path_entry(QUERY_SA, &peer_path())]));
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(
        r,
        capture("real-ibacm", "resolve_preloaded_ip_verify.resp001.bin")
    );
    let q = path_queries(&node)[0].1;
    assert_eq!(&q[56..120], &peer_path());
    // Every non-zero field: DGID SGID DLID SLID REVERSIBLE PKEY, MTU, rate and
    // lifetime with their selectors.
    assert_eq!(comp_mask(&q), 0x3f_283c);

    // A sparse record, so that the SA's answer differs from it.
    let sparse = Path {
        dgid: Some(gid(PEER_GID)),
        sgid: Some(gid(LOCAL_GID)),
        dlid: 2,
        slid: 1,
        reversible_numpath: 0x81,
        pkey: 0xffff,
        ..Path::default()
    }
    .bytes();
    let req = tagged(resolve(&[path_entry(QUERY_SA, &sparse)]));
    let before = node.engine.counters();
    let r = node.request(ConnId(2), &req).expect("reply");
    let queries = path_queries(&node);
    assert_eq!(queries.len(), 2);
    let q = queries[1].1;
    assert_eq!(&q[56..120], &sparse, "the client's record, unchanged");
    assert_eq!(comp_mask(&q), 0x283c);
    assert_eq!(r.len(), 88);
    assert_eq!(opcode(&r), 0x81);
    assert_eq!(status(&r), 0);
    assert_eq!(&r[3..6], &req[3..6], "data[] unchanged");
    assert_eq!(resolve_len(&r), 88);
    assert_eq!(&r[8..16], &req[8..16], "tid echoed");
    assert_eq!(entry_flags(&r, 0), QUERY_SA, "flags still 0x80000000");
    assert_eq!(entry_type(&r, 0), T_PATH);
    assert_eq!(entry_info(&r, 0), sa_record_for(&q), "the SA's record");
    assert_eq!(entry_info(&r, 0), peer_path());
    assert_ne!(entry_info(&r, 0), sparse);
    let after = node.engine.counters();
    assert_eq!(
        delta(&before.0, &after.0),
        only(&[(RESOLVE, 1), (ROUTE_QUERY, 1)])
    );

    // Length other than 88: EINVAL in the query style, the whole request echoed.
    let long = tagged(resolve(&[
        path_entry(QUERY_SA, &sparse),
        ip(DEST, "10.0.0.2"),
    ]));
    let r = node.request(ConnId(3), &long).expect("reply");
    assert_eq!(r.len(), 160);
    assert_eq!(r, query_error(&long, EINVAL));

    // No endpoint owns the source GID: ESRCADDR in the query style.
    let foreign = Path {
        dgid: Some(gid(PEER_GID)),
        sgid: Some(gid("fe80::dead:beef")),
        dlid: 2,
        ..Path::default()
    }
    .bytes();
    let req = tagged(resolve(&[path_entry(QUERY_SA, &foreign)]));
    let r = node.request(ConnId(4), &req).expect("reply");
    assert_eq!(r, query_error(&req, ESRCADDR));
    assert_eq!(path_queries(&node).len(), 2, "neither error reached the SA");
    assert_eq!(
        node.engine.counters().0[ERROR],
        0,
        "QUERY_SA replies are not counted as errors (docs/daemon.md §12)"
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn perf_queries_report_global_and_endpoint_counters() {
    let mut node = fresh();
    // Activity with a distinct footprint on each counter.
    for _ in 0..3 {
        assert_served(&mut node, ConnId(1));
    }
    for _ in 0..2 {
        let r = node
            .request(ConnId(2), &resolve_ip("10.0.0.1", "10.0.0.2"))
            .expect("reply");
        assert_eq!(status(&r), 0);
    }
    for _ in 0..2 {
        let r = node
            .request(ConnId(3), &resolve_ip_nodelay("10.0.0.1", "10.0.0.9"))
            .expect("reply");
        assert_eq!(status(&r), ENODATA);
    }
    let r = node
        .request(ConnId(4), &resolve_ip("10.9.9.9", "10.0.0.2"))
        .expect("reply");
    assert_eq!(status(&r), ESRCADDR);
    node.settle();
    node.transcript.clear();

    // docs/daemon.md §12 order: Error, Resolve, No Data, Addr Query, Addr Cache, Route
    // Query, Route Cache.
    let global = [1, 8, 2, 1, 1, 1, 4];
    let endpoint = [0, 7, 2, 1, 1, 1, 4];
    assert_eq!(node.engine.counters().0, global);
    assert_eq!(node.engine.endpoint_counters(EP).expect("ep").0, endpoint);
    let body = |c: &[u64; 7]| -> Vec<u8> { c.iter().flat_map(|v| v.to_be_bytes()).collect() };

    // Global (docs/test-vectors.md §10).
    let req = with_tid(perf_index(0));
    assert_eq!(
        perf_index(0),
        capture("real-ibacm", "perf_row.req000.bin"),
        "what ib_acme -P wrote"
    );
    let r = node.request(ConnId(10), &req).expect("reply");
    assert_eq!(&r[..8], &[1, 0x82, 0, 7, 0, 0, 0, 72]);
    assert_eq!(&r[8..16], &req[8..16], "tid echoed");
    assert_eq!(r[16..], body(&global)[..]);

    // By index 1: the endpoint (docs/test-vectors.md §12).
    assert_eq!(
        perf_index(1),
        capture("real-ibacm", "perf_index1.req000.bin")
    );
    let r = node.request(ConnId(11), &perf_index(1)).expect("reply");
    assert_eq!(&r[..8], &[1, 0x82, 0, 7, 1, 0, 0, 72]);
    assert_eq!(r[16..], body(&endpoint)[..]);

    // By index 2: there is one endpoint (docs/test-vectors.md §12).
    let r = node.request(ConnId(12), &perf_index(2)).expect("reply");
    assert_eq!(r, [1, 0x82, 7, 0, 2, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(r, capture("real-ibacm", "perf_index2_missing.resp000.bin"));

    // By address (docs/test-vectors.md §11): IP, IP6 and NAME all find the endpoint.
    for (e, file) in [
        (ip(SOURCE, "10.0.0.1"), "perf_src_ip.req000.bin"),
        (ip(SOURCE, "fd00::1"), "perf_src_ip6.req000.bin"),
        (name(SOURCE, "fakehost"), "perf_src_name.req000.bin"),
    ] {
        let req = perf_by(e);
        assert_eq!(req, capture("real-ibacm", file), "what ib_acme wrote");
        let r = node.request(ConnId(13), &req).expect("reply");
        assert_eq!(&r[..8], &[1, 0x82, 0, 7, 0, 0, 0, 72], "{file}");
        assert_eq!(r[16..], body(&endpoint)[..], "{file}");
    }

    // An address no endpoint has (docs/test-vectors.md §11).
    let req = perf_by(ip(SOURCE, "10.9.9.9"));
    assert_eq!(req, capture("real-ibacm", "perf_src_unknown.req000.bin"));
    let r = node.request(ConnId(14), &req).expect("reply");
    assert_eq!(r, [1, 0x82, 7, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0]);

    // An 88-byte query whose entry lacks SOURCE is a global one
    // (docs/protocol/client-messages.md §9).
    let r = node
        .request(ConnId(15), &perf_by(ip(0, "10.0.0.1")))
        .expect("reply");
    assert_eq!(r[16..], body(&global)[..]);

    assert_eq!(node.engine.counters().0, global, "queries count nothing");
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn ep_queries_describe_the_endpoint() {
    let mut node = fresh();
    let req = ep_query(1, 1);
    assert_eq!(req, capture("real-ibacm", "ep_one.req000.bin"));
    let r = node.request(ConnId(1), &req).expect("reply");
    assert_eq!(r, capture("real-ibacm", "ep_one.resp000.bin"));

    let len = 16 + 80 + 64 * 3;
    assert_eq!(r.len(), len);
    assert_eq!(
        &r[..6],
        &[1, 0x83, 0, 1, 0, 0],
        "index echoed, data[1..] zero"
    );
    assert_eq!(usize::from(be_len(&r)), len);
    let b = &r[HDR..];
    assert_eq!(
        &b[0..8],
        &0x0002_c903_00a0_b000u64.to_be_bytes(),
        "node GUID"
    );
    assert_eq!(b[8], 1, "port");
    assert_eq!(b[9], 1, "phys_port_cnt");
    assert_eq!(&b[10..12], &[0, 0]);
    assert_eq!(&b[12..14], &[0xff, 0xff], "pkey");
    assert_eq!(&b[14..16], &[0, 3], "addr_cnt");
    assert_eq!(c_str(&b[16..80]), "ibacmp");
    assert!(b[16 + 6..80].iter().all(|&c| c == 0), "zero padded");
    let addrs: Vec<String> = b[80..].chunks_exact(64).map(c_str).collect();
    assert_eq!(addrs, ["fakehost", "10.0.0.1", "fd00::1"]);

    // Errors: EINVAL, 16 bytes, index echoed (docs/test-vectors.md §13).
    let cases: [(u8, u8, &str); 3] = [
        (2, 1, "index 2: one endpoint only"),
        (0, 1, "index 0"),
        (1, 2, "port 2: the HCA has one port"),
    ];
    for (i, (index, port, what)) in cases.into_iter().enumerate() {
        let req = with_tid(ep_query(index, port));
        let r = node.request(ConnId(2 + i as u64), &req).expect("reply");
        let mut want = vec![1, 0x83, 2, index, 0, 0, 0, 16];
        want.extend_from_slice(&req[8..16]);
        assert_eq!(r, want, "{what}");
    }

    // A request with a non-zero status byte still gets status 0 on success and EINVAL
    // on failure (the reference builds the reply's status; it echoes only the index).
    for (index, want_status) in [(1u8, 0u8), (2, 2)] {
        let mut req = ep_query(index, 1);
        req[2] = 0x5a;
        let r = node.request(ConnId(9), &req).expect("reply");
        assert_eq!(status(&r), want_status, "index {index}");
        if want_status == 0 {
            assert_eq!(r, capture("real-ibacm", "ep_one.resp000.bin"));
        }
    }
    insta::assert_snapshot!(node.transcript_text());
}

/// The host's routing for the malformed-request test: which local address it picks
/// (docs/protocol/client-messages.md §8.2, step 2).
fn routing_table() -> RouteScript {
    Box::new(|dest: IpAddr| match dest.to_string().as_str() {
        "10.0.0.2" => Ok(v4("10.0.0.1")),
        "fd00::2" => Ok(v6("fd00::1")),
        "10.0.0.6" => Err(101), // ENETUNREACH
        _ => Ok(v4("192.168.122.10")),
    })
}

#[test]
fn malformed_requests_are_rejected_without_disturbing_other_clients() {
    let mut node = node_with(reference::sa(), routing_table());
    let mut next = 100u64;
    let mut served = |node: &mut Node| {
        next += 1;
        assert_served(node, ConnId(next));
    };

    // Framing errors (docs/protocol/client-messages.md §11, docs/test-vectors.md §14):
    // the connection is closed, no reply.
    let good = resolve_ip("10.0.0.1", "10.0.0.2");
    let mut v2 = good.clone();
    v2[0] = 2;
    let mut op5 = good.clone();
    op5[1] = 0x05;
    let mut short_body = good.clone();
    short_body.truncate(88); // length field still says 160
    let mut big = vec![0u8; 600];
    big[..160].copy_from_slice(&good);
    big[6..8].copy_from_slice(&600u16.to_ne_bytes());
    let framing: [(&[u8], FrameError); 5] = [
        (&v2, FrameError::BadVersion(2)),
        (&op5, FrameError::UnknownOpcode(5)),
        (
            &short_body,
            FrameError::BadLength {
                declared: 160,
                received: 88,
            },
        ),
        (
            &big,
            FrameError::BadLength {
                declared: 600,
                received: 600,
            },
        ),
        (&good[..10], FrameError::ShortHeader),
    ];
    for (i, (bytes, reason)) in framing.into_iter().enumerate() {
        let conn = ConnId(i as u64 + 1);
        node.input(Input::ClientRequest { conn, bytes });
        assert_eq!(node.closes.last(), Some(&(conn, reason)));
        node.settle();
        assert!(node.replies_to(conn).is_empty(), "{reason}: no reply");
        served(&mut node);
    }
    assert_eq!(node.closes.len(), 5);

    // Validation errors (docs/protocol/client-messages.md §7,
    // docs/test-vectors.md §5–§8): core errors, opcode 0x81, 16 bytes.
    let src = ip(SOURCE, "10.0.0.1");
    let dst = ip(DEST, "10.0.0.2");
    let name_nosrc = capture("ib_acme-requests", "resolve_name_nosrc.req000.bin");
    assert_eq!(name_nosrc, resolve(&[name(DEST, "host2")]));
    let cases: Vec<(&str, Vec<u8>, u8)> = vec![
        ("two SOURCE entries", resolve(&[src, src, dst]), ESRCADDR),
        ("two DEST entries", resolve(&[src, dst, dst]), EDESTADDR),
        (
            "SOURCE of type 0",
            resolve(&[entry(SOURCE, 0, &[10, 0, 0, 1]), dst]),
            ESRCTYPE,
        ),
        (
            "DEST of type 6",
            resolve(&[src, entry(DEST, 6, &[10, 0, 0, 2])]),
            EDESTTYPE,
        ),
        ("no DEST entry", resolve(&[src]), EDESTTYPE),
        ("header only", resolve(&[]), EDESTTYPE),
        ("name without source", name_nosrc, EDESTTYPE),
        (
            "unknown source",
            resolve_ip("192.0.2.1", "10.0.0.2"),
            ESRCADDR,
        ),
        ("path with dlid 0 and dgid 0", resolve_lid(0), EDESTADDR),
        (
            "no source, routing picks a non-endpoint address",
            resolve(&[ip(DEST, "10.0.0.5")]),
            ESRCADDR,
        ),
        (
            "no source, routing fails with ENETUNREACH (docs/reference-quirks.md §5)",
            resolve(&[ip(DEST, "10.0.0.6")]),
            101,
        ),
    ];
    for (i, (what, req, want)) in cases.into_iter().enumerate() {
        let conn = ConnId(i as u64 + 20);
        let req = tagged(req);
        let r = node.request(conn, &req).expect(what);
        assert_eq!(r, core_error(&req, want), "{what}");
        assert_eq!(&r[..8], &[1, 0x81, want, 0, 0, 0, 16, 0], "{what}");
        assert_eq!(node.replies_to(conn).len(), 1, "{what}: one reply");
        served(&mut node);
    }

    // No source, and the routing picks an endpoint address: the reply carries the chosen
    // source as entry 1 (docs/test-vectors.md §3).
    for (dest, source) in [("10.0.0.2", "10.0.0.1"), ("fd00::2", "fd00::1")] {
        let req = tagged(resolve(&[ip(DEST, dest)]));
        let r = node.request(ConnId(50), &req).expect("reply");
        assert_success(&r, 160, &peer_path());
        assert_eq!(&r[8..16], &req[8..16], "tid echoed");
        assert_eq!(r[HDR + ENTRY..], ip(SOURCE, source), "entry 1: {source}");
        served(&mut node);
    }
    assert_eq!(node.closes.len(), 5, "no other connection was closed");
    insta::assert_snapshot!(node.transcript_text());
}

/// A kernel LS RESOLVE for `dgid` (docs/protocol/netlink-ls.md,
/// docs/test-vectors.md §19).
fn ls_resolve(seq: u32, path_use: PathUse, dgid: &str) -> LsRequestRepr {
    let mut req = LsRequestRepr::resolve(seq, ResolveHeaderRepr::new("fakeib0", 1, path_use));
    req.dgid = Some(gid(dgid));
    req.sgid = Some(gid(LOCAL_GID));
    req.pkey = Some(0xffff);
    req
}

fn nl_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn nl_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// Checks an LS error reply: 16 bytes, the request's type and seq, flags ERR.
fn assert_nl_error(reply: &[u8], nl_type: u16, seq: u32) {
    assert_eq!(reply.len(), 16);
    assert_eq!(nl_u32(reply, 0), 16, "nlmsg_len");
    assert_eq!(nl_u16(reply, 4), nl_type, "type");
    assert_eq!(nl_u16(reply, 6), 0x0100, "RDMA_NL_LS_F_ERR");
    assert_eq!(nl_u32(reply, 8), seq, "seq");
}

#[test]
fn kernel_netlink_path_requests_are_answered() {
    let mut node = fresh();

    // GMP (older kernels' reversible query): flags 0x2B.
    let req = ls_resolve(0x51, PathUse::GMP, PEER_GID).to_vec();
    assert_eq!(nl_u16(&req, 4), 0x1000);
    assert_eq!(nl_u16(&req, 6), 0x0001, "NLM_F_REQUEST");
    node.input(Input::Netlink(&req));
    node.settle();
    let queries = path_queries(&node);
    assert_eq!(queries.len(), 1);
    assert_eq!(
        comp_mask(&queries[0].1),
        0x202c,
        "docs/protocol/sa.md §4, case B"
    );
    assert_eq!(node.netlink.len(), 1);
    let r = &node.netlink[0];
    assert_eq!(r.len(), 92);
    assert_eq!(nl_u32(r, 0), 92, "nlmsg_len");
    assert_eq!(nl_u16(r, 4), 0x1000, "type echoed");
    assert_eq!(nl_u16(r, 6), 0, "flags");
    assert_eq!(nl_u32(r, 8), 0x51, "seq echoed");
    assert_eq!(
        &r[16..20],
        &[0x4c, 0x00, 0x01, 0x00],
        "PATH_RECORD, nla_len 76"
    );
    assert_eq!(&r[20..24], &[0x2b, 0, 0, 0], "rec flags");
    assert_eq!(&r[24..28], &[0, 0, 0, 0], "reserved");
    assert_eq!(&r[28 + 8..28 + 24], &gid(PEER_GID).0, "dgid");
    assert_eq!(r[28..92], peer_path(), "the SA's record");

    // UNIDIRECTIONAL: PRIMARY|OUTBOUND, from the cache now.
    let req = ls_resolve(0x52, PathUse::UNIDIRECTIONAL, PEER_GID).to_vec();
    node.input(Input::Netlink(&req));
    node.settle();
    let r = &node.netlink[1];
    assert_eq!(nl_u32(r, 0), 92);
    assert_eq!(nl_u32(r, 8), 0x52);
    assert_eq!(&r[20..24], &[0x0a, 0, 0, 0], "rec flags");
    assert_eq!(r[28..92], peer_path());
    assert_eq!(path_queries(&node).len(), 1, "served from the cache");

    // ALL (newer kernels): 0x2B as well.
    let req = ls_resolve(0x53, PathUse::ALL, PEER_GID).to_vec();
    node.input(Input::Netlink(&req));
    node.settle();
    assert_eq!(&node.netlink[2][20..24], &[0x2b, 0, 0, 0]);

    // An unknown attribute with the mandatory bit (IPV4, 0x2009): an error reply.
    let mut req = ls_resolve(0x54, PathUse::GMP, PEER_GID).to_vec();
    req.extend_from_slice(&[8, 0, 0x09, 0x20, 10, 0, 0, 2]);
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    node.input(Input::Netlink(&req));
    node.settle();
    assert_nl_error(&node.netlink[3], 0x1000, 0x54);

    // A RESOLVE-shaped message typed IP_RESOLVE is not an IP_RESOLVE (its address
    // attribute is missing): no answer, since the kernel ignores an error reply to an
    // IP_RESOLVE. Real ones are answered (`kernel_ip_resolve_is_answered_with_the_gid`).
    let mut ip_resolve = ls_resolve(0x55, PathUse::GMP, PEER_GID);
    ip_resolve.header.msg_type = LsOp::IP_RESOLVE.msg_type();
    let req = ip_resolve.to_vec();
    assert_eq!(nl_u16(&req, 4), 0x1002);
    node.input(Input::Netlink(&req));
    node.settle();
    node.assert_logged("invalid IP_RESOLVE request (seq 85) not answered");
    // Another process's SET_TIMEOUT (it carries NLM_F_REQUEST) is not the kernel
    // asking: an answer would be refused by the kernel, so there is none.
    node.input(Input::Netlink(&SetTimeoutRepr::new(9, 77, 500).to_vec()));
    node.settle();

    assert_eq!(node.netlink.len(), 4);
    // What the kernel makes of each answer (tests/support/kernel_model.rs).
    let flags: Vec<u32> = node.verdicts[..3]
        .iter()
        .map(|v| match v {
            Verdict::Path(records) => records[0].flags.0,
            other => panic!("expected a path, got {other}"),
        })
        .collect();
    assert_eq!(flags, [0x2b, 0x0a, 0x2b]);
    assert_eq!(node.verdicts[3], Verdict::SaQuery(Rule::ErrorFlag));
    assert_eq!(node.kernel.waiting_paths(), 0, "every RESOLVE answered");
    assert!(node.replies.is_empty(), "nothing went to clients");
    let c = node.engine.counters();
    assert_eq!(c.0[RESOLVE], 3, "the three RESOLVEs reached the resolver");
    assert_eq!(c.0[ROUTE_CACHE], 2);
    insta::assert_snapshot!(node.transcript_text());
}

/// A kernel IP_RESOLVE for `addr` (docs/protocol/netlink-ls.md §7).
fn ip_resolve(seq: u32, addr: &str) -> Vec<u8> {
    IpResolveRequestRepr::new(seq, 3, addr.parse().expect("an address")).to_vec()
}

#[test]
fn kernel_ip_resolve_is_answered_with_the_gid() {
    // The reference answers IP_RESOLVE with an error, which the kernel ignores until its
    // own timeout (docs/reference-quirks.md §29); ours resolves the address as a client
    // RESOLVE without a source would and answers the path's DGID.
    let mut node = node_with(reference::sa(), routing_table());
    let req = ip_resolve(0x61, "10.0.0.2");
    assert_eq!(nl_u16(&req, 4), 0x1002);
    node.input(Input::Netlink(&req));
    node.settle();
    assert_eq!(node.netlink.len(), 1);
    let r = &node.netlink[0];
    assert_eq!(r.len(), 36);
    assert_eq!(nl_u32(r, 0), 36, "nlmsg_len");
    assert_eq!(nl_u16(r, 4), 0x1002, "type echoed");
    assert_eq!(nl_u16(r, 6), 0, "flags: neither REQUEST nor ERR");
    assert_eq!(nl_u32(r, 8), 0x61, "seq echoed");
    assert_eq!(
        &r[16..20],
        &[20, 0, 4, 0],
        "DGID, nla_len 20, no mandatory bit"
    );
    assert_eq!(&r[20..36], &gid(PEER_GID).0);
    assert_eq!(path_queries(&node).len(), 1);

    assert_eq!(node.verdicts[0], Verdict::Gid(gid(PEER_GID)));

    // An address no endpoint can reach (the host routes it elsewhere), and a malformed
    // request (no address attribute): no answer, since the kernel ignores an error
    // reply to an IP_RESOLVE and waits for its caller's timeout either way.
    node.input(Input::Netlink(&ip_resolve(0x62, "10.0.0.9")));
    node.settle();
    let mut bare = ip_resolve(0x63, "10.0.0.2");
    bare.truncate(20);
    bare[0..4].copy_from_slice(&20u32.to_ne_bytes());
    node.input(Input::Netlink(&bare));
    node.settle();
    assert_eq!(node.netlink.len(), 1);
    node.assert_logged("kernel IP_RESOLVE seq 98 not resolved; no answer");
    // What a user process sends (a reply, or a SET_TIMEOUT: no NLM_F_REQUEST) is not
    // the kernel asking: no answer.
    let answer = node.netlink[0].clone();
    node.input(Input::Netlink(&answer));
    node.settle();
    assert_eq!(node.netlink.len(), 1);
    assert!(node.replies.is_empty(), "nothing went to clients");
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn requests_built_as_the_kernel_builds_them_are_answered() {
    // Each kind of kernel user's request, put together the way the kernel does
    // (tests/support/kernel_requests.rs), not with our own request builder: every
    // attribute mandatory, in the kernel's order, the resolve header's pad bytes left
    // as the buffer had them. Each answer is judged by the kernel model.
    use kernel_requests::*;
    let mut node = node_with(reference::sa(), routing_table());
    let (dgid, sgid) = (gid(PEER_GID), gid(LOCAL_GID));
    let service = rdma_cm_tcp_service_id(18515);
    let paths = [
        (
            "rdma_cm over IPv4",
            rdma_cm_ipv4(dgid, sgid, 0xffff, service, 0x20),
            0x2b,
        ),
        (
            "rdma_cm over IPv4, older kernel",
            rdma_cm_ipv4_older_kernel(dgid, sgid, 0xffff, service, 0x20),
            0x2b,
        ),
        (
            "rdma_cm over IPv6",
            rdma_cm_ipv6(dgid, sgid, 0xffff, service, 0x28),
            0x2b,
        ),
        ("IPoIB", ipoib(dgid, sgid, 0xffff, 0), 0x0a),
    ];
    for (seq, (what, query, flags)) in (0x201..).zip(paths) {
        let req = query.message(seq);
        // Our parser reads the kernel's bytes as the kernel meant them.
        let parsed = LsRequestRepr::parse(&req).expect(what);
        assert_eq!(parsed.resolve.path_use, query.path_use, "{what}");
        assert_eq!(parsed.resolve.pad, [0xa5, 0xa5], "{what}: pad bytes kept");
        assert_eq!(parsed.service_id, query.service_id, "{what}");
        assert_eq!(
            (parsed.tclass, parsed.pkey, parsed.qos_class),
            (query.tclass, query.pkey, query.qos_class),
            "{what}"
        );
        let before = node.netlink.len();
        node.input(Input::Netlink(&req));
        node.settle();
        assert_eq!(node.netlink.len(), before + 1, "{what}: one answer");
        match node.verdicts.last().expect("judged") {
            Verdict::Path(records) => {
                assert_eq!(records.len(), 1, "{what}");
                assert_eq!(records[0].flags.0, flags, "{what}");
                assert_eq!(records[0].path.to_bytes(), peer_path(), "{what}");
            }
            other => panic!("{what}: the kernel would not take the path: {other}"),
        }
    }
    for (seq, addr) in [(0x211, "10.0.0.2"), (0x212, "fd00::2")] {
        let req = ip_resolve(seq, 3, addr.parse().expect("an address"));
        assert!(IpResolveRequestRepr::parse(&req).is_ok(), "{addr}");
        node.input(Input::Netlink(&req));
        node.settle();
        assert_eq!(
            node.verdicts.last(),
            Some(&Verdict::Gid(dgid)),
            "IP_RESOLVE {addr}"
        );
    }
    assert_eq!(node.netlink.len(), 6);
    assert_eq!(node.kernel.waiting_paths(), 0);
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn kernel_requests_are_answered_before_the_kernel_stops_waiting() {
    // An SA that never answers: the resolution ends ETIMEDOUT after 2000 ms (timeout
    // 1000, retries 1), but the kernel waits only 2000 ms for us before it asks the SA
    // itself. At 1800 ms it gets an error reply, which sends it to the SA at once; the
    // resolution's own answer later is dropped.
    let mut node = node_with(sa_failing_paths(None), routing_table());
    let t0 = node.now;
    node.input(Input::Netlink(
        &ls_resolve(0x71, PathUse::ALL, PEER_GID).to_vec(),
    ));
    node.run_until(t0 + Duration::from_millis(1799));
    assert!(node.netlink.is_empty(), "still within the budget");
    node.run_until(t0 + Duration::from_millis(1800));
    assert_eq!(node.netlink.len(), 1, "answered at the budget");
    assert_nl_error(&node.netlink[0], 0x1000, 0x71);
    assert_eq!(node.verdicts[0], Verdict::SaQuery(Rule::ErrorFlag));
    node.settle();
    assert_eq!(node.netlink.len(), 1, "one answer");
    node.assert_logged("not resolved within 1800 ms");
    assert!(
        node.logs.iter().any(|l| l.contains("seq 113 dropped")),
        "the late answer is dropped: {:?}",
        node.logs
    );
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn an_ip_resolve_answered_after_the_path_budget_still_reaches_the_kernel() {
    // The kernel takes an IP_RESOLVE's answer until its caller's timeout (5000 ms
    // here, as rdma_resolve_addr's caller passed it), not the path wait of 2000 ms. The
    // SA answers after 2500 ms: no error at 1800 ms, and the real answer goes out when
    // it comes.
    let mut node = node_with(reference::sa(), routing_table());
    node.sa_delay = Duration::from_millis(2500);
    node.kernel.ip_caller_timeout = Duration::from_millis(5000);
    let t0 = node.now;
    let req = kernel_requests::ip_resolve(0x91, 3, "10.0.0.2".parse().expect("an address"));
    node.input(Input::Netlink(&req));
    node.run_until(t0 + Duration::from_millis(1800));
    assert!(node.netlink.is_empty(), "no error reply at the path budget");
    node.settle();
    assert_eq!(node.netlink.len(), 1, "{}", node.transcript_text());
    assert_eq!(node.verdicts[0], Verdict::Gid(gid(PEER_GID)));
    let answered = node
        .transcript
        .iter()
        .find(|l| l.contains("netlink reply"))
        .expect("the answer in the transcript");
    println!("IP_RESOLVE answered: {answered}");
    assert!(answered.starts_with("+2.50"), "{answered}");
    insta::assert_snapshot!(node.transcript_text());
}

#[test]
fn kernel_timeout_tells_the_kernel_how_long_to_wait() {
    let mut config = reference::config();
    config.options.kernel_timeout = 5000;
    config.netlink_pid = 4321;
    let mut node = Node::new(config, reference::sa(), reference::route());
    // At start, before any device: SET_TIMEOUT with the TIMEOUT attribute.
    assert!(
        node.kernel_timeouts.is_empty(),
        "nothing is carried out before the first input"
    );
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let set = &node.kernel_timeouts[0];
    let parsed = SetTimeoutRepr::parse(set).expect("a SET_TIMEOUT");
    assert_eq!(parsed, SetTimeoutRepr::new(0, 4321, 5000));
    assert_eq!(nl_u16(set, 4), 0x1001);
    assert_eq!(
        nl_u16(set, 6),
        0x0001,
        "NLM_F_REQUEST: the kernel refuses it without"
    );
    assert_eq!(node.verdicts[0], Verdict::WaitSet(5000));
    assert_eq!(node.kernel.wait_ms, 5000);
    // Without the option nothing is sent (the reference never sends it).
    let node = reference::node();
    assert!(node.kernel_timeouts.is_empty());
}

/// When an unresolved RESOLVE gets its error reply, with `kernel_timeout` 5000 (or
/// `None`: unset) and the SET_TIMEOUT reaching the kernel or not (its send failed).
fn error_reply_after(kernel_timeout: Option<u32>, delivered: bool) -> Duration {
    let mut config = reference::config();
    config.options.kernel_timeout = kernel_timeout.unwrap_or(0);
    // The SA answers only after 10 s: each request waits for its budget.
    let mut node = Node::new(config, reference::sa(), routing_table());
    node.sa_delay = Duration::from_secs(10);
    node.deliver_kernel_timeout = delivered;
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let t0 = node.now;
    node.input(Input::Netlink(
        &ls_resolve(0xa1, PathUse::GMP, PEER_GID).to_vec(),
    ));
    while node.netlink.is_empty() {
        assert!(node.step(t0 + Duration::from_secs(60)), "no answer");
    }
    let verdict = node.verdicts.last().expect("judged");
    assert_eq!(*verdict, Verdict::SaQuery(Rule::ErrorFlag));
    assert_nl_error(&node.netlink[0], 0x1000, 0xa1);
    node.now.saturating_duration_since(t0)
}

#[test]
fn the_kernel_timeout_times_the_replies_only_once_the_kernel_has_it() {
    // Sent and received: the kernel waits 5000 ms, the error reply comes at 4500.
    assert_eq!(
        error_reply_after(Some(5000), true),
        Duration::from_millis(4500)
    );
    // The send failed: the kernel still waits its default 2000 ms, so 1800 it is.
    assert_eq!(
        error_reply_after(Some(5000), false),
        Duration::from_millis(1800)
    );
    // Not set at all: the default.
    assert_eq!(error_reply_after(None, true), Duration::from_millis(1800));
}

#[test]
fn replies_for_a_client_that_went_away_are_dropped() {
    let mut node = fresh();

    // Waiting in the provider: nobody else waits for the lookup, so the close cancels
    // it, freeing its credit for other clients (the reference runs it to its timeout
    // and then drops the reply).
    node.input(Input::ClientRequest {
        conn: ConnId(7),
        bytes: &resolve_ip("10.0.0.1", "10.0.0.9"),
    });
    // Waiting for the host's routing to pick a source.
    node.input(Input::ClientRequest {
        conn: ConnId(8),
        bytes: &resolve(&[ip(DEST, "10.0.0.2")]),
    });
    assert!(node.replies.is_empty());
    node.input(Input::ClientClosed(ConnId(7)));
    node.input(Input::ClientClosed(ConnId(8)));
    node.settle();

    assert!(
        node.replies.is_empty(),
        "no ClientReply for closed connections"
    );
    assert_eq!(node.ud_sent.len(), 1, "the lookup was not retransmitted");
    assert_eq!(node.engine.lookup_counters().cancelled, 1);
    let lost = node
        .logs
        .iter()
        .filter(|l| l.contains("connection lost"))
        .count();
    assert_eq!(
        lost,
        1,
        "the routing answer's drop logged:\n{}",
        node.logs.join("\n")
    );

    // Others are still served.
    assert_served(&mut node, ConnId(9));
    insta::assert_snapshot!(node.transcript_text());
}

/// A bit of everything, for the determinism check.
fn scenario(node: &mut Node) {
    // A runtime RTM_NEWADDR: a fourth address on the endpoint, shown without prefix.
    node.input(Input::LocalIpAdded(LocalIp {
        addr: v4("10.0.0.7"),
        prefix_len: None,
        gid: gid(LOCAL_GID),
        pkey: 0xffff,
    }));
    let reqs: Vec<Vec<u8>> = vec![
        resolve_ip("10.0.0.7", "10.0.0.7"),
        resolve_ip("10.0.0.1", "10.0.0.2"),
        resolve_ip_nodelay("10.0.0.1", "10.0.0.9"),
        resolve_ip("10.0.0.1", "10.0.0.8"),
        resolve(&[name(SOURCE, "fakehost"), name(DEST, "host2")]),
        resolve_lid(2),
        resolve_lid(3),
        resolve(&[ip(DEST, "fd00::2")]),
        resolve(&[path_entry(QUERY_SA, &peer_path())]),
        perf_index(0),
        perf_index(1),
        ep_query(1, 1),
        resolve(&[]),
    ];
    for (i, bytes) in reqs.iter().enumerate() {
        node.input(Input::ClientRequest {
            conn: ConnId(i as u64 % 4),
            bytes,
        });
    }
    node.input(Input::ClientClosed(ConnId(3)));
    node.input(Input::Netlink(
        &ls_resolve(9, PathUse::GMP, "fe80::2:c903:a0:b004").to_vec(),
    ));
    node.advance(Duration::from_millis(1500));
    node.input(Input::ClientRequest {
        conn: ConnId(4),
        bytes: &perf_index(0),
    });
    node.settle();
}

#[test]
fn same_inputs_give_the_same_transcript() {
    let mut a = fresh();
    let mut b = fresh();
    scenario(&mut a);
    scenario(&mut b);
    assert!(a.replies.len() >= 12, "the scenario did something");
    assert_success(&a.replies[0].1, 88, &loopback_path());
    let ep = a
        .replies
        .iter()
        .find(|(_, r)| r[1] == 0x83)
        .expect("EP_QUERY");
    assert_eq!(&ep.1[HDR + 14..HDR + 16], &[0, 4], "10.0.0.7 was added");
    assert_eq!(c_str(&ep.1[HDR + 80 + 3 * 64..]), "10.0.0.7");
    assert_eq!(a.transcript, b.transcript);
    assert_eq!(a.logs, b.logs);
    assert_eq!(a.replies, b.replies);
    assert_eq!(a.netlink, b.netlink);
    let sent = |n: &Node| -> Vec<(Instant, Vec<u8>)> {
        n.ud_sent.iter().map(|u| (u.at, u.mad.0.to_vec())).collect()
    };
    assert_eq!(sent(&a), sent(&b));
    assert_eq!(a.engine.counters(), b.engine.counters());
    insta::assert_snapshot!(a.transcript_text());
}
