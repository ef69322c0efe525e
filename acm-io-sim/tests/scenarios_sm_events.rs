//! Scenarios of SM events (docs/protocol/sa.md §9): the simulated SM
//! reports a port GID out of service (trap 65) when a host leaves and in service
//! (trap 64) when it comes back, to every port subscribed; our engines invalidate their
//! cache entries of that GID at once and acknowledge. Side by side with `sm_events no`
//! (the reference's behaviour: no subscription), where a host that comes back with a
//! new LID or GID keeps being served its stale path. And an SM failover, after which
//! every port subscribes again.
//!
//! Every scenario runs through [`run_seeded`]: twice with one seed, comparing trace
//! hashes; `ACM_SIM_SEED` picks the seed.

mod scenario_support;

use acm_io_sim::HostId;
use acm_io_sim::sa::{REPORT_TRIES, SaMode};
use acm_io_sim::sim::{requests, run_seeded, seed_from_env};
use acm_io_sim::topology::PortRef;
use acm_proto::Gid;
use scenario_support::{
    STEPS, assert_path_between, boot, generated, ip, path, settled_hash, status,
};
use std::time::Duration;

const ENODATA: u8 = 3;

/// Host 2's only port.
fn port1() -> PortRef {
    PortRef::new(HostId(1), 0, 1)
}

/// Resolves host 2's IP from host 1 and runs until answered; the request's id.
fn resolve_1_to_2(sim: &mut acm_io_sim::Sim, nodelay: bool) -> acm_io_sim::sim::RequestId {
    let (src, dst) = (ip(sim, HostId(0)), ip(sim, HostId(1)));
    sim.request_now(HostId(0), requests::resolve_ip(Some(src), dst, nodelay))
}

/// What a run of the "host comes back moved" story saw.
#[derive(Debug)]
struct Moved {
    /// The NODELAY answer right after the trap 65 delivery: 0 (a cached path) or
    /// ENODATA (nothing cached).
    nodelay_after_leave: u8,
    /// The path served after the host came back: (dlid, dgid).
    after: (u16, Gid),
    /// The invariant violations of the run (a stale path is one).
    violations: Vec<String>,
    /// Reports the SA sent and those acknowledged.
    reports: (u64, u64),
    hash: u64,
}

/// Host 2 is resolved by host 1, leaves the fabric, and comes back with LID `lid` and,
/// if given, GID `gid`; host 1 resolves it again.
fn comes_back_moved(seed: u64, sm_events: &str, lid: u16, gid: Option<Gid>) -> Moved {
    let options = format!("route_prot sa\nsm_events {sm_events}\n");
    let mut sim = boot(generated(3, &options), seed);
    let id = resolve_1_to_2(&mut sim, false);
    assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));

    sim.port_down(port1());
    // One trap delivery: the SM's answer time plus the link.
    sim.run_for(Duration::from_millis(5));
    let id = resolve_1_to_2(&mut sim, true);
    let nodelay_after_leave = status(&sim, id);
    sim.run_until_idle(STEPS);

    sim.set_port_identity(port1(), lid, gid);
    sim.port_up(port1());
    sim.run_until_idle(STEPS);
    let id = resolve_1_to_2(&mut sim, false);
    let p = path(&sim, id);
    sim.run_until_idle(STEPS);
    let violations = match sim.check_invariants() {
        Ok(()) => Vec::new(),
        Err(v) => v.iter().map(ToString::to_string).collect(),
    };
    let st = sim.sa().stats();
    Moved {
        nodelay_after_leave,
        after: (p.dlid, p.dgid),
        violations,
        reports: (st.reports, st.reports_acked),
        hash: sim.trace_hash(),
    }
}

/// A new LID, same GID (the host moved to another switch port): with `sm_events yes`
/// host 1's cache forgets host 2 as soon as trap 65 is delivered, and after trap 64 the
/// next resolve gets the new LID; with `sm_events no` the stale entry is served both
/// times and the path-truth invariant catches the old LID.
#[test]
fn a_host_back_with_a_new_lid_is_followed_and_the_reference_serves_the_stale_path() {
    run_seeded(seed_from_env(), |seed| {
        let ours = comes_back_moved(seed, "yes", 50, None);
        let reference = comes_back_moved(seed, "no", 50, None);
        let old_gid = acm_io_sim::spec::FabricSpec::generate(3, &Default::default()).port_gid(
            HostId(1),
            0,
            1,
        );

        assert_eq!(ours.nodelay_after_leave, ENODATA, "invalidated by trap 65");
        assert_eq!(ours.after, (50, old_gid), "the new LID");
        assert!(ours.violations.is_empty(), "{:#?}", ours.violations);
        assert!(ours.reports.0 > 0, "traps were reported");
        assert_eq!(ours.reports.0, ours.reports.1, "every Report acknowledged");

        assert_eq!(
            reference.nodelay_after_leave, 0,
            "still cached after leaving"
        );
        assert_eq!(reference.after, (2, old_gid), "the stale LID is served");
        assert!(
            reference.violations.iter().any(|v| v.contains("truth")),
            "{:#?}",
            reference.violations
        );
        assert_eq!(reference.reports, (0, 0), "nobody subscribed");
        ours.hash ^ reference.hash.rotate_left(1)
    });
}

/// A new LID and a new GID (the HCA was replaced; the IP stays): host 1 learns the new
/// binding over ACM after the traps; the reference keeps the old GID and LID.
#[test]
fn a_host_back_with_a_new_gid_is_followed_and_the_reference_serves_the_stale_path() {
    run_seeded(seed_from_env(), |seed| {
        let new_gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00ab_cdef);
        let ours = comes_back_moved(seed, "yes", 51, Some(new_gid));
        let reference = comes_back_moved(seed, "no", 51, Some(new_gid));

        assert_eq!(ours.nodelay_after_leave, ENODATA);
        assert_eq!(ours.after, (51, new_gid), "the new GID and LID");
        assert!(ours.violations.is_empty(), "{:#?}", ours.violations);
        assert_eq!(ours.reports.0, ours.reports.1);

        assert_eq!(reference.nodelay_after_leave, 0);
        assert_ne!(reference.after.1, new_gid, "the old GID is served");
        assert!(
            reference.violations.iter().any(|v| v.contains("truth")),
            "{:#?}",
            reference.violations
        );
        ours.hash ^ reference.hash.rotate_left(1)
    });
}

/// Every port subscribes to traps 64–67 at start; an SM failover loses them and every
/// port subscribes again (SM_CHANGE, CLIENT_REREGISTER); the new SM's Reports reach
/// the hosts and invalidate, as the old SM's did.
#[test]
fn sm_failover_renews_the_subscriptions() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(generated(3, "route_prot sa\n"), seed);
        let ports: Vec<PortRef> = (0..3).map(|h| PortRef::new(HostId(h), 0, 1)).collect();
        for p in &ports {
            assert_eq!(sim.sa().subscriptions(*p), [64, 65, 66, 67], "{p:?}");
        }
        let id = resolve_1_to_2(&mut sim, false);
        assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));

        sim.sm_failover(3);
        for p in &ports {
            assert!(
                sim.sa().subscriptions(*p).is_empty(),
                "the new SM knows none"
            );
        }
        sim.run_until_idle(STEPS);
        for p in &ports {
            assert_eq!(
                sim.sa().subscriptions(*p),
                [64, 65, 66, 67],
                "renewed: {p:?}"
            );
        }

        let acked = sim.sa().stats().reports_acked;
        sim.port_down(port1());
        sim.run_for(Duration::from_millis(5));
        assert!(
            sim.sa().stats().reports_acked > acked,
            "the new SM's Reports"
        );
        let id = resolve_1_to_2(&mut sim, true);
        assert_eq!(status(&sim, id), ENODATA, "invalidated");
        sim.port_up(port1());
        sim.run_until_idle(STEPS);
        let id = resolve_1_to_2(&mut sim, false);
        assert_path_between(&sim, &path(&sim, id), HostId(0), HostId(1));
        settled_hash(&mut sim, "SM failover")
    });
}

/// A Report whose ReportResp never reaches the SA (the SA stops answering right after
/// sending it) is sent again, [`REPORT_TRIES`] times in all, and each copy is
/// acknowledged and acted on by the host.
#[test]
fn an_unacknowledged_report_is_repeated() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(generated(2, ""), seed);
        let before = sim.stats().sa_reports;
        sim.port_down(port1());
        // The Report is out; the acknowledgements will be dropped.
        sim.set_sa_mode(SaMode::Down);
        sim.run_until_idle(STEPS);
        let st = sim.sa().stats().clone();
        assert_eq!(st.reports, u64::from(REPORT_TRIES), "{st:?}");
        assert_eq!(st.reports_acked, 0, "{st:?}");
        assert_eq!(
            sim.stats().sa_reports - before,
            u64::from(REPORT_TRIES),
            "each copy reached host 1"
        );
        sim.set_sa_mode(SaMode::Up);
        sim.port_up(port1());
        settled_hash(&mut sim, "repeated Report")
    });
}
