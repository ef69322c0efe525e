//! Scenario tests on a healthy fabric: resolution by every address type and
//! route protocol, loopback, requester caching, partitions, multicast group priority,
//! a 64-host all-to-all, and the demo fabric.
//!
//! Every scenario runs through [`run_seeded`]: twice with one seed, comparing trace
//! hashes, printing `rerun with ACM_SIM_SEED=<seed>` on failure. `ACM_SIM_SEED` picks
//! the seed.

mod scenario_support;

use acm_io_sim::HostId;
use acm_io_sim::sim::{Outcome, requests, run_seeded, seed_from_env};
use acm_io_sim::spec::{FabricSpec, GenOptions};
use acm_io_sim::topology::PortRef;
use acm_proto::mgid::AcmMgid;
use acm_proto::{Mtu, Rate};
use scenario_support::{
    ETIMEDOUT, STEPS, assert_path_between, assert_resolves, boot, check, checked_hash, generated,
    ip, ipv6, path, resolve_ip_now, settled_hash, status, submit_ip, with_each_route,
};
use std::collections::BTreeSet;

// --- 1. two hosts, every address type, both route protocols -------------------------

#[derive(Debug, Clone, Copy)]
enum By {
    V4,
    V6,
    Name,
}

/// Host 1 resolves host 2 by `by` with `route_prot route`, then host 2 resolves host 1
/// the same way.
///
/// The first resolve costs exactly one ACM request and one ACM response. Its path is host
/// 1's GID/LID to host 2's. With `route_prot acm` no PathRecord query is ever made. With
/// `route_prot sa` the requester queries its route to the peer and the responder (the
/// request was addressed to it, docs/protocol/acm-mad.md §5) its route back to the
/// requester before answering: two queries, one for each directed pair. The reverse
/// resolve is then served from host 2's cache, which learned host 1 from the request: no
/// further MAD of any kind, so in the end one PathRecord query per resolved pair.
fn two_hosts(route: &'static str, by: By) {
    run_seeded(seed_from_env(), |seed| {
        let spec = FabricSpec::generate(
            2,
            &GenOptions {
                options: format!("route_prot {route}\n"),
                ipv6: true,
                ..GenOptions::default()
            },
        );
        let mut sim = boot(spec, seed);
        let req = |sim: &acm_io_sim::Sim, from: HostId, to: HostId| match by {
            By::V4 => requests::resolve_ip(Some(ip(sim, from)), ip(sim, to), false),
            By::V6 => requests::resolve_ip(Some(ipv6(sim, from)), ipv6(sim, to), false),
            By::Name => requests::resolve_name(
                &sim.spec().hosts[from.index()].name,
                &sim.spec().hosts[to.index()].name,
                false,
            ),
        };
        let what = format!("route_prot {route}, by {by:?}");
        let start = sim.stats();

        let r = req(&sim, HostId(0), HostId(1));
        let id = sim.request_now(HostId(0), r);
        assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));
        sim.run_until_idle(STEPS);
        let one = sim.stats();
        assert_eq!(
            one.acm_mads - start.acm_mads,
            2,
            "{what}: request + response"
        );
        let queries = one.sa_path_queries - start.sa_path_queries;
        match route {
            "acm" => assert_eq!(queries, 0, "{what}: route_prot acm never asks the SA"),
            _ => assert_eq!(queries, 2, "{what}: requester and responder each query"),
        }
        assert_eq!(
            sim.sa().stats().path_queries,
            one.sa_path_queries,
            "{what}: the SA answered every query"
        );

        let r = req(&sim, HostId(1), HostId(0));
        let id = sim.request_now(HostId(1), r);
        assert_path_between(&sim, &path(&sim, id), HostId(1), HostId(0));
        sim.run_until_idle(STEPS);
        let two = sim.stats();
        assert_eq!(
            (two.acm_mads, two.sa_path_queries),
            (one.acm_mads, one.sa_path_queries),
            "{what}: the reverse resolve comes from host 2's cache"
        );
        checked_hash(&sim, &what)
    });
}

#[test]
fn two_hosts_by_ipv4_route_acm() {
    two_hosts("acm", By::V4);
}

#[test]
fn two_hosts_by_ipv6_route_acm() {
    two_hosts("acm", By::V6);
}

#[test]
fn two_hosts_by_name_route_acm() {
    two_hosts("acm", By::Name);
}

#[test]
fn two_hosts_by_ipv4_route_sa() {
    two_hosts("sa", By::V4);
}

#[test]
fn two_hosts_by_ipv6_route_sa() {
    two_hosts("sa", By::V6);
}

#[test]
fn two_hosts_by_name_route_sa() {
    two_hosts("sa", By::Name);
}

// --- 2. loopback ---------------------------------------------------------------------

/// A host resolving its own addresses (IPv4 and its name) is answered from the loopback
/// entries (docs/ibacmp.md §7): sgid = dgid and slid = dlid = its own port, and not a
/// single MAD, ACM or SA, leaves it — with either route protocol.
#[test]
fn loopback_sends_nothing() {
    run_seeded(seed_from_env(), |seed| {
        with_each_route(|route| {
            let mut sim = boot(generated(3, &format!("route_prot {route}\n")), seed);
            let before = sim.stats();
            let me = ip(&sim, HostId(1));
            let a = sim.request_now(HostId(1), requests::resolve_ip(Some(me), me, false));
            let b = sim.request_now(HostId(1), requests::resolve_ip(None, me, false));
            let c = sim.request_now(HostId(1), requests::resolve_name("host2", "host2", false));
            for id in [a, b, c] {
                assert_path_between(&sim, &path(&sim, id), HostId(1), HostId(1));
            }
            sim.run_until_idle(STEPS);
            let after = sim.stats();
            assert_eq!(after.acm_mads, before.acm_mads, "{route}: no ACM MAD");
            assert_eq!(
                (after.sa_path_queries, after.sa_joins),
                (before.sa_path_queries, before.sa_joins),
                "{route}: no SA MAD"
            );
            sim
        })
    });
}

// --- 3. a third host caches the requester --------------------------------------------

/// Host 1 resolves host 2; every host hears the multicast request and caches host 1
/// (docs/protocol/acm-mad.md §5 step 1, and with `route_prot acm` the route comes from
/// the group, so the entry is READY at once). Host 3 then resolves host 1 with NODELAY
/// and gets the path from its cache in the same instant, sending nothing.
///
/// By contrast host 3 knows nothing of host 2 (the response was unicast to host 1):
/// a NODELAY resolve of host 2 answers ENODATA at once, and the lookup it started
/// fills the cache in the background, so the next NODELAY resolve succeeds.
#[test]
fn third_host_caches_the_requester() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(generated(3, "route_prot acm\n"), seed);
        assert_resolves(&mut sim, HostId(0), HostId(1));
        sim.run_until_idle(STEPS);

        let before = sim.stats();
        let asked = sim.now();
        let id = submit_ip(&mut sim, HostId(2), HostId(0), true);
        sim.run_until_idle(STEPS);
        assert_path_between(&sim, &path(&sim, id), HostId(2), HostId(0));
        assert!(
            matches!(sim.outcome(id), Outcome::Reply { at, .. } if *at == asked),
            "answered at once from the cache: {:?}",
            sim.outcome(id)
        );
        assert_eq!(sim.stats().acm_mads, before.acm_mads, "no new ACM MAD");

        let id = submit_ip(&mut sim, HostId(2), HostId(1), true);
        sim.run_until_idle(STEPS);
        assert_eq!(
            status(&sim, id),
            scenario_support::ENODATA,
            "host 3 never heard of host 2"
        );
        assert_eq!(
            sim.stats().acm_mads,
            before.acm_mads + 2,
            "the background lookup: one request, one response"
        );
        let id = submit_ip(&mut sim, HostId(2), HostId(1), true);
        sim.run_until_idle(STEPS);
        assert_path_between(&sim, &path(&sim, id), HostId(2), HostId(1));
        checked_hash(&sim, "requester caching")
    });
}

// --- 4. partitions -------------------------------------------------------------------

/// Three hosts on the default partition plus a private one each: host1 and host3 in
/// 0x8001, host2 in 0x8002. Their addresses (IP and name) live only on the private
/// partition's endpoint, so no endpoint is opened on 0xffff at all.
fn partitioned_fabric(route: &str) -> FabricSpec {
    let host = |n: u32, pkey: &str| {
        format!(
            r#"
[[hosts]]
name = "host{n}"
options = "route_prot {route}\n"
addr_file = "host{n} mlx5_0 1 {pkey}\n"
[[hosts.hcas]]
name = "mlx5_0"
guid = "0x0002c9030000{n:02x}00"
[[hosts.hcas.ports]]
lid = {n}
pkeys = ["0xffff", "{pkey}"]
[[hosts.ips]]
addr = "10.0.0.{n}"
pkey = "{pkey}"
"#
        )
    };
    let text = [host(1, "0x8001"), host(2, "0x8002"), host(3, "0x8001")].concat();
    FabricSpec::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Hosts in different partitions cannot resolve each other, by IP or by name: the
/// request is multicast to the requester's partition's group, which the other host
/// never joined, so it times out (ETIMEDOUT after every retry). Hosts in the same
/// partition can, and their path carries that partition's pkey.
#[test]
fn partitions_isolate_hosts() {
    run_seeded(seed_from_env(), |seed| {
        with_each_route(|route| {
            let mut sim = boot(partitioned_fabric(route), seed);
            let mgids: BTreeSet<_> = sim.sa().groups().map(|g| g.mgid).collect();
            let want: BTreeSet<_> = [0x8001, 0x8002]
                .map(|k| AcmMgid::new(k, Rate::RATE_10, Mtu::MTU_2048).to_gid())
                .into();
            assert_eq!(mgids, want, "{route}: only the private partitions' groups");

            for (from, to) in [(0, 1), (1, 0), (1, 2)] {
                let (from, to) = (HostId(from), HostId(to));
                let id = resolve_ip_now(&mut sim, from, to);
                assert_eq!(status(&sim, id), ETIMEDOUT, "{route}: {from} -> {to}");
            }
            let id = sim.request_now(HostId(0), requests::resolve_name("host1", "host2", false));
            assert_eq!(status(&sim, id), ETIMEDOUT, "{route}: by name");

            for (from, to) in [(0, 2), (2, 0)] {
                let (from, to) = (HostId(from), HostId(to));
                let id = resolve_ip_now(&mut sim, from, to);
                let p = path(&sim, id);
                assert_path_between(&sim, &p, from, to);
                assert_eq!(p.pkey & 0x7FFF, 0x0001, "{route}: partition 0x8001");
            }
            let id = sim.request_now(HostId(2), requests::resolve_name("host3", "host1", false));
            assert_path_between(&sim, &path(&sim, id), HostId(2), HostId(0));
            sim
        })
    });
}

// --- 5. two multicast groups and priority selection ----------------------------------

/// Hosts 1 and 2 run 4x QDR (40 Gb/s), host 3 4x SDR (10 Gb/s), MTU 2048 everywhere.
///
/// With `route_prot acm` every host joins group 0 (min_rate 10, min_mtu 2048), and the
/// fast hosts also group 1 at their own rate, 40 Gb/s (docs/protocol/sa.md §5). Two fast
/// hosts share group 1, the higher priority one (docs/protocol/acm-mad.md §6), so their
/// route — built from the group (docs/ibacmp.md §5) — runs at 40 Gb/s (rate enum 7); a
/// fast and a slow host share only group 0 and get 10 Gb/s, whichever side asks.
///
/// With `route_prot sa` only group 0 is joined.
#[test]
fn group_priority_picks_the_fastest_shared_group() {
    run_seeded(seed_from_env(), |seed| {
        let spec = |route: &str| {
            FabricSpec::generate(
                3,
                &GenOptions {
                    options: format!("route_prot {route}\n"),
                    rates: vec![(2, 4), (2, 4), (2, 1)],
                    ..GenOptions::default()
                },
            )
        };
        let mut sim = boot(spec("acm"), seed);
        let g0 = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        let g1 = AcmMgid::new(0xFFFF, Rate::RATE_40, Mtu::MTU_2048).to_gid();
        let groups: Vec<_> = sim.sa().groups().cloned().collect();
        assert_eq!(groups.len(), 2, "{groups:?}");
        // By host index, to compare with literals.
        let members = |mgid| -> BTreeSet<usize> {
            let g = sim.sa().group(&mgid).expect("group exists");
            g.members.iter().map(|p| p.host.index()).collect()
        };
        assert_eq!(members(g0), BTreeSet::from([0, 1, 2]));
        assert_eq!(members(g1), BTreeSet::from([0, 1]));
        assert_eq!(sim.sa().group(&g0).map(|g| g.rate), Some(Rate::RATE_10));
        assert_eq!(sim.sa().group(&g1).map(|g| g.rate), Some(Rate::RATE_40));

        for (from, to, rate) in [
            (0, 1, Rate::RATE_40),
            (1, 0, Rate::RATE_40),
            (0, 2, Rate::RATE_10),
            (2, 1, Rate::RATE_10),
        ] {
            let (from, to) = (HostId(from), HostId(to));
            let id = resolve_ip_now(&mut sim, from, to);
            let p = path(&sim, id);
            assert_path_between(&sim, &p, from, to);
            assert_eq!(p.rate.value, rate, "{from} -> {to}");
            assert_eq!(p.mtu.value, Mtu::MTU_2048, "{from} -> {to}");
        }
        assert_eq!(sim.stats().sa_path_queries, 0);
        sim.run_until_idle(STEPS);
        check(&sim, "route_prot acm");

        let sa = boot(spec("sa"), seed);
        let mgids: Vec<_> = sa.sa().groups().map(|g| g.mgid).collect();
        assert_eq!(mgids, [g0], "route_prot sa joins group 0 only");
        check(&sa, "route_prot sa");
        sim.trace_hash() ^ sa.trace_hash()
    });
}

// --- 11. 64-host all-to-all ----------------------------------------------------------

/// Every one of 64 hosts resolves every other (64 × 63 = 4032 requests, all submitted
/// at once, `route_prot acm`). Everything succeeds with the fabric's true paths, every
/// request gets exactly one reply, and every invariant holds.
///
/// ACM MAD bound. Every multicast request teaches all 63 other hosts its sender
/// (docs/protocol/acm-mad.md §5 step 1, READY at once with `route_prot acm`), and a
/// queued request whose destination was learned meanwhile is not sent. Each host has one
/// ACM request in flight at a time (resolve_depth 1), so each sends its first request at
/// time zero, when all the clients' requests arrive; every first request has reached
/// every host by the longest one-way delay, 7 µs here (two leaves: 4 cables and 3
/// switches of 1 µs). One exchange takes at least a round trip on the shortest path, 2 ×
/// 3 µs, so a host's second request leaves at ≥ 6 µs and a third could only leave at ≥ 12
/// µs, by which time the host knows everyone. Hence at most 2 requests per host, each
/// answered by exactly one response (no loss, and retries are seconds away): at most 4 ×
/// 64 = 256 ACM MADs, against 2 × 4032 = 8064 without requester caching.
#[test]
fn all_to_all_64_hosts() {
    const N: usize = 64;
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(generated(N, "route_prot acm\nresolve_depth 1\n"), seed);
        let before = sim.stats();
        let mut ids = Vec::with_capacity(N * (N - 1));
        for from in 0..N {
            for to in (0..N).filter(|&t| t != from) {
                let (from, to) = (HostId(from), HostId(to));
                ids.push((from, to, submit_ip(&mut sim, from, to, false)));
            }
        }
        sim.run_until_idle(STEPS);
        for &(from, to, id) in &ids {
            assert_path_between(&sim, &path(&sim, id), from, to);
        }
        let after = sim.stats();
        let mads = after.acm_mads - before.acm_mads;
        assert!(
            mads <= 4 * N as u64,
            "{mads} ACM MADs for {} resolves",
            ids.len()
        );
        assert!(
            mads >= 2 * N as u64,
            "{mads}: every first request goes out, answered"
        );
        assert_eq!(after.sa_path_queries, before.sa_path_queries);
        assert_eq!(after.replies - before.replies, ids.len() as u64);
        checked_hash(&sim, "all to all")
    });
}

// --- the demo fabric -----------------------------------------------------------------

/// `testdata/fabrics/demo.toml` as shipped: three hosts with `route_prot sa` that
/// resolve each other by IP and by name (node2's explicit address file, the others'
/// generated ones).
#[test]
fn demo_fabric_resolves() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/fabrics/demo.toml");
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let spec = FabricSpec::parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(spec.clone(), seed);
        let hosts: Vec<HostId> = sim.spec().host_ids().collect();
        assert_eq!(hosts.len(), 3);
        for &from in &hosts {
            for &to in hosts.iter().filter(|&&t| t != from) {
                assert_resolves(&mut sim, from, to);
                let (a, b) = (
                    sim.spec().hosts[from.index()].name.clone(),
                    sim.spec().hosts[to.index()].name.clone(),
                );
                let id = sim.request_now(from, requests::resolve_name(&a, &b, false));
                assert_path_between(&sim, &path(&sim, id), from, to);
            }
        }
        assert!(sim.stats().sa_path_queries > 0, "route_prot sa");
        let sm = sim.topology().by_lid(1).expect("the SM's port");
        assert_eq!(sm, PortRef::new(HostId(0), 0, 1), "the SM runs on node1");
        settled_hash(&mut sim, "demo")
    });
}
