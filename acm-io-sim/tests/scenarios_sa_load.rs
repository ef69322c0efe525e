//! Scenarios of an SA under load (docs/protocol/sa.md §8): a job-start storm with
//! `route_prot sa` against an SA with a finite rate and queue (`[sa]` of the fabric
//! file). With our settings BUSY answers are waited out and nobody fails; with the
//! reference's (`sa_busy_retries 0`, `sa_timeout_max 0`, `sa_adaptive_depth no`) the
//! same storm fails requests. The adaptive depth asks a full SA less often, the
//! adaptive timeout retries a slow one less, and with an SA that never complains our
//! settings and the reference's give the very same run. Every scenario runs twice per
//! seed and compares the traces.

mod scenario_support;

use acm_io_sim::sim::{Outcome, requests, run_seeded, seed_from_env};
use acm_io_sim::spec::{SaOverflow, SaSpec};
use acm_io_sim::{HostId, Sim};
use acm_proto::client::{HeaderPacket, Status};
use scenario_support::{STEPS, boot, generated, ip};

/// The options of the reference's SA behaviour.
const REFERENCE: &str = "sa_busy_retries 0\nsa_timeout_max 0\nsa_adaptive_depth no\n";

/// What a storm did.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Storm {
    hash: u64,
    ok: u64,
    failed: u64,
    busy: u64,
    umad_retries: u64,
    umad_timeouts: u64,
}

/// Every host of an `n`-host fabric resolves every other at one instant, with
/// `route_prot sa`, `sa_depth 16` and `extra` options, against an SA limited by `sa`
/// (after start-up, so the joins are not part of it).
fn storm(n: usize, extra: &str, sa: SaSpec, seed: u64) -> Storm {
    let opts = format!("route_prot sa\nsa_depth 16\ntimeout 200\n{extra}");
    let mut sim: Sim = boot(generated(n, &opts), seed);
    sim.set_sa_limits(sa);
    let before = sim.stats();
    let busy_before = sim.sa().stats().overflow_busy;
    for a in 0..n {
        for b in 0..n {
            if a != b {
                let (src, dst) = (ip(&sim, HostId(a)), ip(&sim, HostId(b)));
                sim.submit(HostId(a), requests::resolve_ip(Some(src), dst, false));
            }
        }
    }
    sim.run_until_idle(STEPS);
    sim.check_invariants().expect("invariants");
    let (mut ok, mut failed) = (0, 0);
    for id in sim.request_ids() {
        match sim.outcome(id) {
            Outcome::Reply { bytes, .. } => {
                let st = HeaderPacket::new_checked(bytes.as_slice()).map(|h| h.status());
                if st == Ok(Status::SUCCESS) {
                    ok += 1;
                } else {
                    failed += 1;
                }
            }
            other => panic!("request {id:?} not answered: {other:?}"),
        }
    }
    let end = sim.stats();
    Storm {
        hash: sim.trace_hash(),
        ok,
        failed,
        busy: sim.sa().stats().overflow_busy - busy_before,
        umad_retries: end.umad_retries - before.umad_retries,
        umad_timeouts: end.umad_timeouts - before.umad_timeouts,
    }
}

/// An SA serving 5,000 PathRecords a second that holds 32 requests: a 24-host storm
/// with 16 queries in flight per host (384) overflows it at once.
fn small_sa(overflow: SaOverflow) -> SaSpec {
    SaSpec {
        queue: 32,
        overflow,
        ..SaSpec::scalable_sa(5000)
    }
}

#[test]
fn busy_is_waited_out_and_nobody_fails_where_the_reference_fails() {
    let seed = seed_from_env();
    let ours = run_seeded(seed, |s| {
        let r = storm(24, "", small_sa(SaOverflow::Busy), s);
        assert_eq!((r.ok, r.failed), (552, 0), "{r:?}");
        assert!(r.busy > 0, "the SA was overloaded: {r:?}");
        r.hash
    });
    let reference = run_seeded(seed, |s| {
        let r = storm(24, REFERENCE, small_sa(SaOverflow::Busy), s);
        assert_eq!(r.ok + r.failed, 552);
        assert!(r.failed > 0, "the reference fails at the first BUSY: {r:?}");
        r.hash
    });
    assert_ne!(ours, reference);
}

#[test]
fn the_adaptive_depth_asks_a_full_sa_less_often() {
    let seed = seed_from_env();
    let adaptive = storm(24, "", small_sa(SaOverflow::Busy), seed);
    let fixed = storm(
        24,
        "sa_adaptive_depth no\n",
        small_sa(SaOverflow::Busy),
        seed,
    );
    assert_eq!(adaptive.failed, 0, "{adaptive:?}");
    assert!(
        adaptive.busy < fixed.busy,
        "adaptive {adaptive:?}, fixed {fixed:?}"
    );
}

#[test]
fn a_dropping_sa_is_survived_with_retries() {
    let seed = seed_from_env();
    run_seeded(seed, |s| {
        let r = storm(16, "retries 4\n", small_sa(SaOverflow::Drop), s);
        assert_eq!((r.ok, r.failed), (240, 0), "{r:?}");
        assert!(r.umad_retries > 0, "drops are retried by umad: {r:?}");
        r.hash
    });
}

#[test]
fn the_adaptive_timeout_retries_a_slow_sa_less() {
    // No queue bound: an SA at 2,000/s with 24 × 16 queries in flight keeps each
    // waiting up to ~190 ms, past a 100 ms `timeout`; the fixed timeout retries
    // whatever passes it, the adaptive one stretches to the measured round trip.
    let seed = seed_from_env();
    let sa = SaSpec {
        queue: 0,
        ..SaSpec::scalable_sa(2000)
    };
    let no_depth = "sa_adaptive_depth no\nretries 3\ntimeout 100\n";
    let adaptive = storm(24, no_depth, sa, seed);
    let fixed = storm(24, &format!("{no_depth}sa_timeout_max 0\n"), sa, seed);
    assert_eq!(adaptive.failed, 0, "{adaptive:?}");
    assert!(
        adaptive.umad_retries < fixed.umad_retries,
        "adaptive {adaptive:?}, fixed {fixed:?}"
    );
}

#[test]
fn an_sa_that_never_complains_sees_the_reference_traffic() {
    let seed = seed_from_env();
    let ours = storm(12, "", SaSpec::default(), seed);
    let reference = storm(12, REFERENCE, SaSpec::default(), seed);
    assert_eq!((ours.failed, ours.busy, ours.umad_retries), (0, 0, 0));
    assert_eq!(ours, reference, "same trace, same counts");
}
