//! First light: hosts on a generated fabric resolve each other.

mod scenario_support;

use acm_io_sim::sim::requests;
use acm_io_sim::{HostId, Sim};
use scenario_support::generated;

#[test]
fn two_hosts_resolve_by_ipv4_over_acm_and_sa() {
    for opts in ["route_prot sa\n", "route_prot acm\n"] {
        let spec = generated(3, opts);
        let a = &spec.hosts[0].ips[0].addr.clone();
        let b = &spec.hosts[1].ips[0].addr.clone();
        let mut sim = Sim::new(spec, 1);
        sim.keep_logs(true);
        sim.run_until_idle(1_000_000);
        let id = sim.request_now(HostId(0), requests::resolve_ip(Some(*a), *b, false));
        let r = sim
            .resolve_result(id)
            .unwrap_or_else(|| panic!("{opts}: {:?}\n{}", sim.outcome(id), sim.logs().join("\n")));
        assert_eq!(r.status, 0, "{opts}: {}", sim.logs().join("\n"));
        let path = r.path.expect("path");
        assert_eq!(path.dlid, 2);
        sim.run_until_idle(1_000_000);
        sim.check_invariants()
            .unwrap_or_else(|v| panic!("{opts}: {v:?}"));
    }
}

#[test]
fn a_slow_sa_times_out_and_a_fast_one_answers() {
    use acm_io_sim::sim::{run_seeded, seed_from_env};
    use std::time::Duration;
    run_seeded(seed_from_env(), |seed| {
        // umad timeout 1000 ms, 1 retry; the route comes from the SA.
        let opts = "route_prot sa\ntimeout 1000\nretries 1\n";
        let spec = generated(2, opts);
        let (a, b) = (spec.hosts[0].ips[0].addr, spec.hosts[1].ips[0].addr);
        let mut sim = Sim::new(spec, seed);
        sim.run_until_idle(1_000_000);
        // A late answer to an earlier try still counts while the send is outstanding
        // (the kernel matches by TID), so "slow" means slower than all tries together.
        sim.set_sa_response_time(Duration::from_millis(2500));
        let slow = sim.request_now(HostId(0), requests::resolve_ip(Some(a), b, false));
        assert_eq!(
            sim.resolve_result(slow).map(|r| r.status),
            Some(6),
            "ETIMEDOUT"
        );
        sim.run_until_idle(1_000_000);
        sim.set_sa_response_time(Duration::from_millis(10));
        let fast = sim.request_now(HostId(0), requests::resolve_ip(Some(a), b, false));
        assert_eq!(sim.resolve_result(fast).map(|r| r.status), Some(0));
        sim.run_until_idle(1_000_000);
        sim.check_invariants().unwrap_or_else(|v| panic!("{v:?}"));
        sim.trace_hash()
    });
}
