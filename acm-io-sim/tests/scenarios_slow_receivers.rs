//! Scenarios of ACM resolves when the receivers are slow (docs/ibacmp.md §10): each
//! host takes 600 ms to take in a MAD (`[nic] recv_ns`), so a response comes 1.2 s
//! after its request, past the reference's retry wait (the subnet timeout's 1,024 ms
//! plus `timeout 10`). With the reference's fixed wait every lookup sends its request
//! again, a multicast every host must take in; with ours, once a round trip has been
//! measured, the wait follows it and the request goes once.

mod scenario_support;

use acm_io_sim::sim::{run_seeded, seed_from_env};
use acm_io_sim::spec::NicSpec;
use acm_io_sim::{HostId, Sim};
use scenario_support::{STEPS, boot, generated, resolve_ip_now, status};

/// ACM MADs sent while host 0 resolves host 2, after it has resolved host 1 (its first
/// round trip measured), with `extra` options; and the trace hash.
fn second_lookup_mads(extra: &str, seed: u64) -> (u64, u64) {
    let mut spec = generated(
        4,
        &format!("route_prot acm\ntimeout 10\nretries 2\n{extra}"),
    );
    spec.nic = NicSpec {
        send_ns: 0,
        recv_ns: 600_000_000,
    };
    let mut sim: Sim = boot(spec, seed);
    let first = resolve_ip_now(&mut sim, HostId(0), HostId(1));
    assert_eq!(status(&sim, first), 0);
    sim.run_until_idle(STEPS);
    let before = sim.stats().acm_mads;
    let second = resolve_ip_now(&mut sim, HostId(0), HostId(2));
    assert_eq!(status(&sim, second), 0, "answered, late or not");
    sim.run_until_idle(STEPS);
    sim.check_invariants().expect("invariants");
    (sim.stats().acm_mads - before, sim.trace_hash())
}

#[test]
fn a_measured_round_trip_is_waited_for_instead_of_asked_again() {
    let seed = seed_from_env();
    let ours = run_seeded(seed, |s| {
        let (mads, hash) = second_lookup_mads("", s);
        assert_eq!(mads, 2, "one request, one response");
        hash
    });
    let reference = run_seeded(seed, |s| {
        let (mads, hash) = second_lookup_mads("acm_timeout_max 0\n", s);
        assert!(
            mads > 2,
            "the fixed wait sends the request again: {mads} MADs"
        );
        hash
    });
    assert_ne!(ours, reference);
}
