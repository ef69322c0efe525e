//! Storms: every host of a fabric resolving every other at one instant, run in batches
//! (`Sim::run_until_idle`, `Sim::step_batch`: the copies of many multicasts at once,
//! host by host) and one event at a time (`Sim::step`). Both must give the same
//! trace hash, counts, replies and invariant results, with the storm's mix of address
//! types, sources chosen by the host's routing, NODELAY, both route protocols, queued
//! responses and hosts restarted while copies for them are on the way.

mod scenario_support;

use acm_engine::Instant;
use acm_io_sim::sim::{Outcome, requests, run_seeded, seed_from_env};
use acm_io_sim::spec::{FabricSpec, GenOptions, NicSpec, SaSpec};
use acm_io_sim::{HostId, Sim};
use scenario_support::{STEPS, generated};
use std::time::Duration;

/// How the simulation is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drive {
    Batched,
    OneByOne,
}

fn idle(sim: &mut Sim, drive: Drive) {
    match drive {
        Drive::Batched => sim.run_until_idle(STEPS),
        Drive::OneByOne => while sim.step(Instant::from_nanos(u64::MAX)) {},
    }
}

fn run_for(sim: &mut Sim, drive: Drive, d: Duration) {
    let t = sim.now() + d;
    if drive == Drive::OneByOne {
        while sim.step(t) {}
    }
    sim.run_until(t);
}

/// Everything a run is judged by: its trace hash, counts, clock, every request's
/// outcome and the invariant check.
fn fingerprint(sim: &Sim) -> String {
    let outcomes: Vec<String> = sim
        .request_ids()
        .map(|id| match sim.outcome(id) {
            Outcome::Reply { bytes, at } => format!("{at} {bytes:02x?}"),
            other => format!("{other:?}"),
        })
        .collect();
    format!(
        "{:#x} {:?} {} {:?} {}",
        sim.trace_hash(),
        sim.stats(),
        sim.now(),
        sim.check_invariants(),
        outcomes.join("\n")
    )
}

/// A storm on `n` hosts with options `opts`: every host resolves every other by IPv4
/// (every fourth without a source), IPv6 or name, some with NODELAY; with `restarts`,
/// two hosts restart while the first multicasts are on their way.
/// With `physics`, the SA serves 100,000 requests a second and holds 64 (BUSY past
/// that), each port takes 300 ns per send and each host 2 µs per received MAD.
fn storm(
    n: usize,
    opts: &str,
    seed: u64,
    restarts: bool,
    drive: Drive,
    physics: bool,
) -> (u64, String) {
    let mut spec = FabricSpec::generate(
        n,
        &GenOptions {
            options: opts.into(),
            ipv6: true,
            ..GenOptions::default()
        },
    );
    if physics {
        spec.sa = SaSpec {
            queue: 64,
            ..SaSpec::scalable_sa(100_000)
        };
        spec.nic = NicSpec {
            send_ns: 300,
            recv_ns: 2000,
        };
    }
    let mut sim = Sim::new(spec, seed);
    idle(&mut sim, drive);
    let spec = sim.spec().clone();
    let v4 = |h: usize| spec.hosts[h].ips[0].addr;
    let v6 = |h: usize| spec.hosts[h].ips.last().map(|i| i.addr).unwrap_or(v4(h));
    for h in 0..n {
        for d in (0..n).filter(|&d| d != h) {
            let nodelay = d % 7 == 0;
            let req = match (h + d) % 3 {
                0 => requests::resolve_name(&spec.hosts[h].name, &spec.hosts[d].name, nodelay),
                1 => requests::resolve_ip(Some(v6(h)), v6(d), nodelay),
                _ => requests::resolve_ip((d % 4 != 0).then(|| v4(h)), v4(d), nodelay),
            };
            sim.submit(HostId(h), req);
        }
    }
    if restarts {
        run_for(&mut sim, drive, Duration::from_micros(4));
        sim.restart_host(HostId(5));
        run_for(&mut sim, drive, Duration::from_micros(3));
        sim.restart_host(HostId(9));
    }
    idle(&mut sim, drive);
    (sim.trace_hash(), fingerprint(&sim))
}

fn batched_as_one_by_one(n: usize, opts: &str, restarts: bool) {
    batched_as_one_by_one_in(n, opts, restarts, false);
}

fn batched_as_one_by_one_in(n: usize, opts: &str, restarts: bool, physics: bool) {
    run_seeded(seed_from_env(), |seed| {
        let (hash, batched) = storm(n, opts, seed, restarts, Drive::Batched, physics);
        let (_, one_by_one) = storm(n, opts, seed, restarts, Drive::OneByOne, physics);
        assert!(
            batched == one_by_one,
            "batched:\n{batched}\none by one:\n{one_by_one}"
        );
        hash
    });
}

#[test]
fn acm_storm_batched_as_one_by_one() {
    batched_as_one_by_one(48, "route_prot acm\nresolve_depth 3\nsend_depth 1\n", false);
}

#[test]
fn sa_storm_batched_as_one_by_one() {
    batched_as_one_by_one(40, "route_prot sa\nresolve_depth 2\nsa_depth 2\n", false);
}

/// A finite SA and MADs that cost their senders and receivers (`[sa]`, `[nic]`):
/// copies wait for their host, BUSY answers are waited out, and batching still changes
/// nothing.
#[test]
fn storm_with_physics_batched_as_one_by_one() {
    batched_as_one_by_one_in(
        40,
        "route_prot sa\nresolve_depth 3\nsa_depth 8\n",
        true,
        true,
    );
}

#[test]
fn storm_with_restarts_batched_as_one_by_one() {
    batched_as_one_by_one(
        40,
        "route_prot sa\nresolve_depth 1\nsa_depth 1\ntimeout 3\nretries 1\n",
        true,
    );
}

/// Batches happen at all: the 32 × 31 copies of a storm's first multicasts (every host
/// on one leaf, so all due at one instant) take one `step_batch` call, which counts
/// each event it stands for.
#[test]
fn step_batch_counts_every_event() {
    let opts = "route_prot acm\nresolve_depth 1\n";
    let spec = generated(32, opts);
    let mut one = Sim::new(spec.clone(), 1);
    let mut many = Sim::new(spec, 1);
    for sim in [&mut one, &mut many] {
        sim.run_until_idle(STEPS);
        let ips: Vec<_> = sim.spec().hosts.iter().map(|h| h.ips[0].addr).collect();
        for h in 0..32 {
            for d in (0..32).filter(|&d| d != h) {
                sim.submit(HostId(h), requests::resolve_ip(Some(ips[h]), ips[d], false));
            }
        }
    }
    let never = Instant::from_nanos(u64::MAX);
    let mut steps = 0u64;
    while one.step(never) {
        steps += 1;
    }
    let (mut counted, mut calls) = (0u64, 0u64);
    loop {
        match many.step_batch(never) {
            0 => break,
            n => {
                counted += n;
                calls += 1;
            }
        }
    }
    assert_eq!(counted, steps);
    assert!(
        steps - calls >= 32 * 31 - 1,
        "{calls} batched calls for {steps} steps"
    );
    assert_eq!(one.trace_hash(), many.trace_hash());
    assert_eq!(one.stats(), many.stats());
}
