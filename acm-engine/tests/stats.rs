//! `Engine::endpoint_stats`, what the daemon's metrics file is built from: it must
//! describe each endpoint as EP_QUERY does and count as PERF_QUERY does, so that a
//! client's view and the daemon's agree, and size the destination cache by state.

mod support;

use acm_engine::{CacheStats, ConnId, EndpointId};
use support::reference;
use support::requests::{ep_query, resolve_ip};

#[test]
fn endpoint_stats_agree_with_ep_query_and_perf_query_and_size_the_cache() {
    let mut node = reference::node();
    let stats = node.engine.endpoint_stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let s = &stats[0];
    // What EP_QUERY says of endpoint 1 on port 0 (every port).
    let r = node.request(ConnId(1), &ep_query(1, 0)).expect("reply");
    assert_eq!(r[2], 0, "EP_QUERY with port 0 finds endpoint 1");
    let body = &r[16..];
    assert_eq!((s.index, s.id), (1, EndpointId(0)));
    assert_eq!(s.guid.to_be_bytes(), body[0..8]);
    assert_eq!(s.port, body[8]);
    assert_eq!(s.pkey.to_be_bytes(), body[12..14]);
    assert_eq!(
        s.addresses,
        usize::from(u16::from_be_bytes([body[14], body[15]]))
    );
    assert_eq!(s.provider, "ibacmp");
    assert_eq!(s.counters, node.engine.endpoint_counters(EndpointId(0)));
    // The loopback entries of the endpoint's three addresses are ready; the preloaded
    // hosts wait in ADDR_RESOLVED for their routes.
    let before = s.cache.expect("ibacmp has a cache");
    assert!(before.ready >= 1 && before.addr_resolved >= 1, "{before:?}");

    // A resolve of a preloaded address makes one more READY entry.
    let reply = node
        .request(ConnId(2), &resolve_ip("10.0.0.1", "10.0.0.2"))
        .expect("reply");
    assert_eq!(reply[2], 0, "resolved");
    let after = node.engine.endpoint_stats()[0].clone();
    let cache = after.cache.expect("cache");
    assert_eq!(
        cache,
        CacheStats {
            ready: before.ready + 1,
            addr_resolved: before.addr_resolved - 1,
            ..before
        }
    );
    assert_eq!(cache.total(), before.total());
    assert_eq!(after.counters, node.engine.endpoint_counters(EndpointId(0)));
    assert_ne!(after.counters, s.counters, "the resolve was counted");
}
