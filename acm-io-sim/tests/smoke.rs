//! First light: hosts on a generated fabric resolve each other.

use acm_io_sim::Sim;
use acm_io_sim::sim::requests;
use acm_io_sim::spec::{FabricSpec, GenOptions};

#[test]
fn two_hosts_resolve_by_ipv4_over_acm_and_sa() {
    for opts in ["route_prot sa\n", "route_prot acm\n"] {
        let spec = FabricSpec::generate(
            3,
            &GenOptions {
                options: opts.into(),
                ..GenOptions::default()
            },
        );
        let a = &spec.hosts[0].ips[0].addr.clone();
        let b = &spec.hosts[1].ips[0].addr.clone();
        let mut sim = Sim::new(spec, 1);
        sim.keep_logs(true);
        sim.run_until_idle(1_000_000);
        let id = sim.request_now(0, requests::resolve_ip(Some(*a), *b, false));
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
