//! The destination cache's bound (`max_dest_cache_bytes`) against a peer that makes up
//! requesters: every ACM request from a new source address makes the receiver cache
//! that address, so without a bound such a peer grows the cache without end. With
//! it, the cache stays at its bound by evicting the idle entries used least recently
//! (docs/ibacmp.md §2); destinations in use keep resolving from the cache, entries that
//! requests wait on and the host's own and preloaded entries are never evicted, and a
//! destination evicted for lack of use resolves again when asked for.

mod support;

use acm_engine::config::{OptionLines, Options, Reconfig};
use acm_engine::{CacheStats, ConnId, Counter, EndpointId, Input, RecvInfo};
use acm_proto::Gid;
use std::net::Ipv4Addr;
use std::time::Duration;
use support::Node;
use support::fabric::*;
use support::reference;

const EP0: EndpointId = EndpointId(0);
const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// In the hosts preload (pinned).
const HOST2_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Learned over ACM and used throughout the flood.
const KEPT: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 3), 3);
/// Learned over ACM, then never used again.
const FORGOTTEN: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 4), 4);
/// A client waits on it all through the flood (its peer answers afterwards).
const WAITED: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 5), 5);
/// 64 KiB: 251 entries of at most 261 bytes.
const BOUND: u64 = 64 << 10;
/// Requesters the hostile peer makes up.
const FLOOD: u32 = 2000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The reference node with `max_dest_cache_bytes` at `bound`.
fn node_bounded(bound: u64) -> Node {
    let mut c = reference::config();
    c.options.max_dest_cache_bytes = bound;
    node_with(c)
}

fn cache(node: &Node) -> CacheStats {
    node.engine.endpoint_stats()[0]
        .cache
        .expect("ibacmp has a cache")
}

fn counter(node: &Node, c: Counter) -> u64 {
    node.engine.counters().get(c)
}

/// Made-up requester `i` asks the group for `target`: a source address, GID and LID
/// that exist nowhere.
fn made_up_request(node: &mut Node, i: u32, target: Ipv4Addr) {
    let src = Ipv4Addr::from(0x0b00_0000 + i);
    let gid = Gid::from_parts(
        0xfe80_0000_0000_0000,
        reference::BASE_GUID + 0x10_0000 + u64::from(i),
    );
    let wc = RecvInfo {
        slid: 0x1000 + (i % 0x8000) as u16,
        src_qp: 0x99,
        ..RecvInfo::default()
    };
    let grh = grh(gid, mgid());
    let mad = acm_request(0x5000_0000 + u64::from(i), src, target, &[mgid()]);
    node.input(Input::UdReceive {
        ep: EP0,
        wc,
        grh: Some(&grh),
        mad: &mad,
    });
}

/// Sends a resolve of `dest` for `conn` and returns the TID of the ACM request it
/// makes (the client waits for the peer's answer).
fn acm_request_out(node: &mut Node, conn: ConnId, dest: Ipv4Addr) -> u64 {
    let sent = node.ud_sent.len();
    send_request(
        node,
        conn,
        &format!("resolve {A_IP} -> {dest}"),
        &resolve_ip(A_IP, dest),
    );
    node.settle_now();
    assert_eq!(node.ud_sent.len(), sent + 1, "one ACM request for {dest}");
    mad_tid(&node.ud_sent[sent].mad.0)
}

/// The peer at `lid` answers our ACM request `tid`.
fn peer_answers(node: &mut Node, lid: u16, tid: u64) {
    let wc = RecvInfo {
        slid: lid,
        src_qp: 0x90 + u32::from(lid),
        ..RecvInfo::default()
    };
    let peer = reference::gid_of_lid(lid);
    feed_ud(
        node,
        EP0,
        wc,
        Some(&grh(peer, reference::gid_of_lid(1))),
        &acm_response(tid, mgid()),
    );
}

/// Resolves `dest` over ACM: request, the peer's answer, the route from the SA.
fn learn(node: &mut Node, conn: ConnId, (dest, lid): (Ipv4Addr, u16)) {
    let tid = acm_request_out(node, conn, dest);
    peer_answers(node, lid, tid);
    node.advance(ms(10));
    let r = node.replies_to(conn);
    assert_eq!(r.len(), 1, "{dest} answered");
    assert_eq!(status(&r[0]), SUCCESS, "{dest}");
    assert_eq!(reply_path(&r[0]).dlid, lid);
}

#[test]
fn a_flood_of_made_up_requesters_stays_under_the_bound_while_used_destinations_resolve() {
    let mut node = node_bounded(BOUND);
    let limit = cache(&node).limit;
    assert_eq!(limit, 251, "64 KiB over 261 bytes per entry");
    learn(&mut node, ConnId(1), KEPT);
    learn(&mut node, ConnId(2), FORGOTTEN);
    let waited_tid = acm_request_out(&mut node, ConnId(3), WAITED.0);
    let before = cache(&node);
    assert_eq!(before.evictions, 0);
    let acm_before = counter(&node, Counter::AddrQuery);
    let route_hits_before = counter(&node, Counter::RouteCache);

    // One request in ten is for us (the requester's route is asked of the SA and the
    // peer answered); the others are for an address nobody has.
    let mut kept_hits = 0;
    for i in 0..FLOOD {
        let target = if i % 10 == 0 {
            A_IP
        } else {
            Ipv4Addr::new(10, 0, 0, 9)
        };
        made_up_request(&mut node, i, target);
        if i % 50 == 49 {
            node.advance(ms(1));
            let r = resolve(&mut node, ConnId(10), A_IP, KEPT.0);
            assert_eq!(status(&r), SUCCESS, "the destination in use, at {i}");
            kept_hits += 1;
            let c = cache(&node);
            assert!(c.total() <= limit, "{} entries at {i}: {c:?}", c.total());
        }
    }
    node.advance(ms(300));

    let after = cache(&node);
    let dropped = node
        .logs
        .iter()
        .filter(|l| l.contains("cache full of entries in use"))
        .count() as u64;
    println!(
        "after {FLOOD} made-up requesters: {} entries (bound {limit}), {} evicted, {dropped} dropped",
        after.total(),
        after.evictions
    );
    assert!(after.total() <= limit, "{after:?}");
    assert!(
        after.total() >= limit - 10,
        "the cache was filled: {after:?}"
    );
    // Every made-up requester was cached, or dropped while the cache was full of
    // entries in use; each cached one past the bound evicted one.
    assert_eq!(
        after.evictions,
        before.total() as u64 + u64::from(FLOOD) - dropped - after.total() as u64,
        "{before:?} {after:?}"
    );
    assert!(after.evictions > u64::from(FLOOD) - limit as u64 - dropped);

    // The destination in use never left the cache: every resolve was a hit, and no
    // ACM request went out but the flood's.
    assert_eq!(counter(&node, Counter::AddrQuery), acm_before);
    assert_eq!(
        counter(&node, Counter::RouteCache),
        route_hits_before + kept_hits
    );

    // The request that waited all along is answered when its peer answers.
    assert!(node.replies_to(ConnId(3)).is_empty());
    peer_answers(&mut node, WAITED.1, waited_tid);
    node.advance(ms(10));
    let r = node.replies_to(ConnId(3));
    assert_eq!(r.len(), 1);
    assert_eq!(
        status(&r[0]),
        SUCCESS,
        "the waited-on entry was never evicted"
    );
    assert_eq!(reply_path(&r[0]).dlid, WAITED.1);

    // The preloaded host and the host's own addresses are pinned: still cached.
    let acm = counter(&node, Counter::AddrQuery);
    let r = resolve(&mut node, ConnId(4), A_IP, HOST2_IP);
    assert_eq!(status(&r), SUCCESS);
    let r = resolve(&mut node, ConnId(4), A_IP, A_IP);
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(counter(&node, Counter::AddrQuery), acm, "no ACM request");

    // The destination used once was evicted: asked for again, it is learned again
    // over ACM.
    learn(&mut node, ConnId(5), FORGOTTEN);
    assert_eq!(counter(&node, Counter::AddrQuery), acm + 1, "asked again");
}

#[test]
fn a_bound_lowered_at_a_reload_evicts_the_idle_entries_over_it() {
    let mut node = node_bounded(Options::default().max_dest_cache_bytes);
    for i in 0..600 {
        made_up_request(&mut node, i, Ipv4Addr::new(10, 0, 0, 9));
    }
    let full = cache(&node);
    assert_eq!(full.evictions, 0, "under the default bound: {full:?}");
    assert!(full.total() >= 600);

    let text = format!("{}max_dest_cache_bytes {BOUND}\n", reference::OPTS);
    let (mut options, diags) = Options::parse("ibacm_opts.cfg", &text);
    assert!(diags.is_empty(), "{diags:?}");
    options.sm_events = false;
    let r = Reconfig {
        options,
        option_lines: OptionLines::scan("ibacm_opts.cfg", &text),
        addr_file: None,
    };
    node.input(Input::Reconfigure(&r));
    let after = cache(&node);
    assert_eq!(after.limit, 251);
    assert_eq!(after.total(), 251, "{after:?}");
    assert_eq!(after.evictions as usize, full.total() - 251);
    let line = format!(
        "destination caches hold at most 251 entries each now; {} evicted",
        after.evictions
    );
    assert!(
        node.logs.iter().any(|l| l.ends_with(&line)),
        "{:#?}",
        node.logs
    );
    // The pinned entries stayed: the preloaded host resolves without an ACM request.
    let acm = counter(&node, Counter::AddrQuery);
    assert_eq!(
        status(&resolve(&mut node, ConnId(1), A_IP, HOST2_IP)),
        SUCCESS
    );
    assert_eq!(counter(&node, Counter::AddrQuery), acm);
    // New requesters now evict.
    made_up_request(&mut node, 10_000, Ipv4Addr::new(10, 0, 0, 9));
    let c = cache(&node);
    assert_eq!((c.total(), c.evictions), (251, after.evictions + 1));
}

/// The preloaded hosts count against the bound and are never evicted: those past it
/// are not cached, and the log says how many.
#[test]
fn preloaded_hosts_past_the_bound_are_left_out_and_said_so() {
    let mut c = reference::config();
    c.options.max_dest_cache_bytes = BOUND;
    let text: String = (0..300)
        .map(|i| format!("10.1.{}.{} fe80::2:c903:a0:b002\n", i / 256, i % 256))
        .collect();
    let (hosts, diags) = acm_engine::config::parse_hosts("ibacm_hosts.data", &text);
    assert!(diags.is_empty(), "{diags:?}");
    c.hosts = hosts;
    let mut node = node_with(c);
    // 251 of the 300 hosts fill the bound; the host's own three addresses are cached
    // over it.
    let s = cache(&node);
    assert_eq!(
        (s.addr_resolved, s.ready, s.total()),
        (251, 3, 254),
        "{s:?}"
    );
    assert!(
        node.logs.iter().any(|l| l
            .ends_with("49 preloaded entries not cached: the cache is at max_dest_cache_bytes")),
        "{:#?}",
        node.logs
    );
    // The preloaded entries are pinned: a flood evicts none of them, and finds nothing
    // else to evict.
    made_up_request(&mut node, 1, Ipv4Addr::new(10, 0, 0, 9));
    assert_eq!(cache(&node).evictions, 0);
    assert_eq!(cache(&node).total(), 254);
    node.assert_logged("cache full of entries in use; request from 11.0.0.1 dropped");
    let acm = counter(&node, Counter::AddrQuery);
    let r = resolve(&mut node, ConnId(1), A_IP, Ipv4Addr::new(10, 1, 0, 7));
    assert_eq!(status(&r), SUCCESS);
    assert_eq!(counter(&node, Counter::AddrQuery), acm, "from the preload");
}
