//! Scenarios of `addr_prot` (docs/protocol/ipoib-neigh.md): a host
//! that runs no ibacm, resolved through the simulated IPoIB neighbour table with
//! `addr_prot neigh` and `addr_prot acm,neigh`, and the same host timing out with the
//! reference's `addr_prot acm`; an address nobody has; a host in another partition.
//!
//! Every scenario runs through [`run_seeded`] (twice with one seed, trace hashes
//! compared; `ACM_SIM_SEED` picks the seed), and checks the simulator's invariants.

mod scenario_support;

use acm_io_sim::fabric;
use acm_io_sim::sim::{ARP_FAILURE, ARP_MIN, ARP_SPREAD};
use acm_io_sim::sim::{requests, run_seeded, seed_from_env};
use acm_io_sim::spec::{FabricSpec, GenOptions};
use acm_io_sim::{HostId, Sim};
use scenario_support::{
    ENODATA, ETIMEDOUT, STEPS, assert_path_between, boot, checked_hash, generated, ip, ipv6, path,
    settled_hash, status,
};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// The host without a daemon.
const BARE: HostId = HostId(2);

/// Three hosts with `addr_prot list`; host 2 runs no ibacm (its ports and addresses are
/// there, its kernel answers ARP).
fn fabric(list: &str) -> FabricSpec {
    let mut spec = generated(3, &format!("addr_prot {list}\n"));
    spec.hosts[BARE.index()].daemon = false;
    spec
}

/// How long one ACM lookup that nobody answers takes on a generated fabric: three
/// transmissions (the default 2 retries), each waiting the subnet timeout as the engine
/// counts it (2^(SubnetTimeout − 8) ms: 1024 ms for 18) plus the default `timeout` of
/// 2000 ms.
fn acm_timeout(sim: &Sim) -> Duration {
    let st = sim.spec().hosts[0].hcas[0].ports[0].subnet_timeout;
    let subnet_ms = 1u64 << (st - 8);
    Duration::from_millis(3 * (subnet_ms + 2000))
}

/// `took` is `want`, give or take the fabric's few microseconds of latency.
fn about(took: Duration, want: Duration) -> bool {
    took >= want && took < want + Duration::from_millis(1)
}

/// Resolves `to`'s first address from host 0 and runs until answered; the request and
/// how long the answer took.
fn timed(sim: &mut Sim, to: IpAddr) -> (acm_io_sim::sim::RequestId, Duration) {
    let t0 = sim.now();
    let from = ip(sim, HostId(0));
    let id = sim.request_now(HostId(0), requests::resolve_ip(Some(from), to, false));
    let took = sim.now().saturating_duration_since(t0);
    (id, took)
}

#[test]
fn neigh_resolves_a_host_without_a_daemon() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(fabric("neigh"), seed);
        let start = sim.stats();
        let to = ip(&sim, BARE);
        let (id, took) = timed(&mut sim, to);
        assert_path_between(&sim, &path(&sim, id), HostId(0), BARE);
        // Asked, incomplete; asked again after 10 ms, found (the ARP exchange took at
        // most 2 ms); then one PathRecord query. No ACM MAD at all.
        assert!(took >= Duration::from_millis(10), "{took:?}");
        assert!(took < Duration::from_millis(15), "{took:?}");
        sim.run_until_idle(STEPS);
        let s = sim.stats();
        assert_eq!(s.acm_mads - start.acm_mads, 0, "nobody is asked over ACM");
        assert_eq!(s.sa_path_queries - start.sa_path_queries, 1);
        // A host with a daemon is found the same way, without its daemon.
        let to = ip(&sim, HostId(1));
        let (id, _) = timed(&mut sim, to);
        assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));
        sim.run_until_idle(STEPS);
        assert_eq!(sim.stats().acm_mads - start.acm_mads, 0);
        // Cached: answered at once.
        let to = ip(&sim, BARE);
        let (id, took) = timed(&mut sim, to);
        assert_eq!(status(&sim, id), 0);
        assert_eq!(took, Duration::ZERO);
        checked_hash(&sim, "neigh")
    });
}

/// IPv6 neighbour discovery answers the same way.
#[test]
fn neigh_resolves_an_ipv6_address_of_a_host_without_a_daemon() {
    run_seeded(seed_from_env(), |seed| {
        let mut spec = FabricSpec::generate(
            3,
            &GenOptions {
                options: "addr_prot neigh\n".into(),
                ipv6: true,
                ..GenOptions::default()
            },
        );
        spec.hosts[BARE.index()].daemon = false;
        let mut sim = boot(spec, seed);
        let (src, dst) = (ipv6(&sim, HostId(0)), ipv6(&sim, BARE));
        let id = sim.request_now(HostId(0), requests::resolve_ip(Some(src), dst, false));
        assert_path_between(&sim, &path(&sim, id), HostId(0), BARE);
        settled_hash(&mut sim, "neigh, IPv6")
    });
}

#[test]
fn acm_then_neigh_finds_daemons_by_acm_and_the_others_after_its_timeout() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(fabric("acm,neigh"), seed);
        let start = sim.stats();
        // A host with a daemon: ACM answers, the neighbour table is never asked.
        let to = ip(&sim, HostId(1));
        let (id, took) = timed(&mut sim, to);
        assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));
        assert!(took < Duration::from_millis(5), "{took:?}");
        sim.run_until_idle(STEPS);
        let one = sim.stats();
        assert_eq!(one.acm_mads - start.acm_mads, 2, "request + response");
        // The host without one: ACM times out after its retries, then the table.
        let to = ip(&sim, BARE);
        let (id, took) = timed(&mut sim, to);
        assert_path_between(&sim, &path(&sim, id), HostId(0), BARE);
        let acm = acm_timeout(&sim);
        assert!(
            took >= acm + Duration::from_millis(10),
            "{took:?} vs {acm:?}"
        );
        assert!(
            took < acm + Duration::from_millis(20),
            "{took:?} vs {acm:?}"
        );
        sim.run_until_idle(STEPS);
        assert_eq!(
            sim.stats().acm_mads - one.acm_mads,
            3,
            "three transmissions nobody answers"
        );
        checked_hash(&sim, "acm,neigh")
    });
}

/// The reference's setting, side by side with the one above: the same host is never
/// found.
#[test]
fn the_reference_setting_times_out_on_a_host_without_a_daemon() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(fabric("acm"), seed);
        let to = ip(&sim, BARE);
        let (id, took) = timed(&mut sim, to);
        assert_eq!(status(&sim, id), ETIMEDOUT);
        assert!(about(took, acm_timeout(&sim)), "{took:?}");
        // And again for the next client: nothing was learned.
        let (id, took) = timed(&mut sim, to);
        assert_eq!(status(&sim, id), ETIMEDOUT);
        assert!(about(took, acm_timeout(&sim)), "{took:?}");
        settled_hash(&mut sim, "acm")
    });
}

#[test]
fn an_address_nobody_has_fails_when_arp_gives_up() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(fabric("neigh"), seed);
        // In host 0's subnet, on no host.
        let nobody = match ip(&sim, HostId(0)) {
            IpAddr::V4(a) => {
                let o = a.octets();
                IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 250))
            }
            v6 => v6,
        };
        assert!(
            sim.spec()
                .hosts
                .iter()
                .all(|h| h.ips.iter().all(|i| i.addr != nobody)),
            "{nobody} is free"
        );
        let (id, took) = timed(&mut sim, nobody);
        assert_eq!(status(&sim, id), ENODATA, "unreachable");
        // The kernel gives up after 3 s; the engine learns it at its next question
        // (at most 500 ms later).
        assert!(took >= ARP_FAILURE, "{took:?}");
        assert!(took <= ARP_FAILURE + Duration::from_millis(500), "{took:?}");
        settled_hash(&mut sim, "nobody")
    });
}

#[test]
fn a_host_in_another_partition_is_not_found() {
    run_seeded(seed_from_env(), |seed| {
        let mut spec = fabric("neigh");
        // Host 2's address moves to a partition host 0 is not in.
        let port = &mut spec.hosts[BARE.index()].hcas[0].ports[0];
        port.pkeys = vec![0xffff, 0x8002];
        spec.hosts[BARE.index()].ips[0].pkey = 0x8002;
        let mut sim = boot(spec, seed);
        let to = ip(&sim, BARE);
        let (id, _) = timed(&mut sim, to);
        assert_eq!(status(&sim, id), ENODATA);
        settled_hash(&mut sim, "partition")
    });
}

/// The model's rule, without the scheduler: who answers, with what.
#[test]
fn the_rule_answers_for_every_host_with_the_address() {
    let spec = fabric("neigh");
    let sim = Sim::new(spec.clone(), 1);
    let topo = sim.topology();
    let gid0 = spec.port_gid(HostId(0), 0, 1);
    let bare = spec.hosts[BARE.index()].ips[0].addr;
    assert_eq!(
        fabric::ipoib_neighbour(&spec, topo, HostId(0), gid0, 0xffff, bare),
        acm_engine::NeighResult::Found {
            qpn: fabric::IPOIB_FIRST_QPN,
            gid: spec.port_gid(BARE, 0, 1)
        }
    );
    // Not from an interface host 0 does not have.
    assert_eq!(
        fabric::ipoib_neighbour(&spec, topo, HostId(0), gid0, 0x8005, bare),
        acm_engine::NeighResult::Unreachable
    );
    assert!(
        ARP_MIN + ARP_SPREAD < Duration::from_millis(10),
        "an exchange ends before the engine's second question"
    );
}
