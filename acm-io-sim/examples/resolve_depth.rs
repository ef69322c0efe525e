//! How `resolve_depth` (outstanding ACM address lookups per endpoint) trades the time to
//! resolve against multicast traffic, on the simulator (issue 15). Every figure is
//! simulated time or a count, so it is exact and the same on any machine; the wall
//! time of the storm runs is printed for information only.
//!
//! ```sh
//! cargo run --release -p acm-io-sim --example resolve_depth
//! ```
//!
//! Three workloads on a generated fabric (32 hosts per leaf), each with the options of
//! the reference fabric (`timeout 1000`, `retries 1`: a lookup nobody answers ends
//! after two transmissions, 4.05 s) plus `resolve_depth D`:
//!
//! * **misses**: host 0's clients ask for M unreachable addresses (198.18.0.0/15, each
//!   on its own connection as `ib_acme` does) at once, M = 4, 16 and 256; 0.5 s later
//!   another client asks for host 1, which answers. Reported: how long the client of
//!   host 1 waited, and when the last miss was answered.
//! * **cold fan-out**: on a 256-host fabric, host 0 alone resolves the 255 others at
//!   once. Reported: the time to the last answer, and the ACM MADs sent.
//! * **all-to-all**: every host of a 256-host fabric resolves every other at once.
//!   Reported: the time to the last answer, ACM MADs and simulator events (the cost that
//!   grows with depth: each outstanding request is a multicast every host receives).

use acm_engine::Instant;
use acm_io_sim::sim::{Outcome, requests};
use acm_io_sim::spec::{FabricSpec, GenOptions};
use acm_io_sim::{HostId, Sim};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const STEPS: u64 = 1 << 40;

fn sim(hosts: usize, depth: u32) -> Sim {
    let spec = FabricSpec::generate(
        hosts,
        &GenOptions {
            options: format!("timeout 1000\nretries 1\nresolve_depth {depth}\n"),
            ..GenOptions::default()
        },
    );
    let mut sim = Sim::new(spec, 1);
    sim.run_until_idle(STEPS);
    sim
}

fn ip(sim: &Sim, h: usize) -> IpAddr {
    sim.spec().hosts[h].ips[0].addr
}

/// When the last of `ids` was answered, after `t0`; and how many succeeded.
fn last_answer(sim: &Sim, ids: &[acm_io_sim::sim::RequestId], t0: Instant) -> (Duration, usize) {
    let mut last = Duration::ZERO;
    let mut ok = 0;
    for &id in ids {
        if let Outcome::Reply { at, .. } = sim.outcome(id) {
            last = last.max(at.saturating_duration_since(t0));
        }
        if sim.resolve_result(id).is_some_and(|r| r.status == 0) {
            ok += 1;
        }
    }
    (last, ok)
}

fn miss_storm(depth: u32, m: u32) -> (Duration, Duration) {
    let mut s = sim(64, depth);
    let t0 = s.now();
    let src = ip(&s, 0);
    let misses: Vec<_> = (0..m)
        .map(|i| {
            let dst = IpAddr::V4(Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8));
            s.submit(HostId(0), requests::resolve_ip(Some(src), dst, false))
        })
        .collect();
    let asked = t0 + Duration::from_millis(500);
    let victim = s.submit_at(
        asked,
        HostId(0),
        requests::resolve_ip(Some(src), ip(&s, 1), false),
    );
    s.run_until_idle(STEPS);
    let (storm, _) = last_answer(&s, &misses, t0);
    let (wait, ok) = last_answer(&s, &[victim], asked);
    assert_eq!(ok, 1, "host 1 resolves");
    (storm, wait)
}

fn fan_out(depth: u32) -> (Duration, u64) {
    let mut s = sim(256, depth);
    let t0 = s.now();
    let before = s.stats().acm_mads;
    let src = ip(&s, 0);
    let ids: Vec<_> = (1..256)
        .map(|d| {
            let dst = ip(&s, d);
            s.submit(HostId(0), requests::resolve_ip(Some(src), dst, false))
        })
        .collect();
    s.run_until_idle(STEPS);
    let (last, ok) = last_answer(&s, &ids, t0);
    assert_eq!(ok, 255);
    (last, s.stats().acm_mads - before)
}

fn all_to_all(depth: u32) -> (Duration, u64, u64, Duration) {
    let n = 256;
    let mut s = sim(n, depth);
    let t0 = s.now();
    let before = s.stats();
    let mut ids = Vec::new();
    for h in 0..n {
        let src = ip(&s, h);
        for d in (0..n).filter(|&d| d != h) {
            let dst = ip(&s, d);
            ids.push(s.submit(HostId(h), requests::resolve_ip(Some(src), dst, false)));
        }
    }
    let wall = std::time::Instant::now();
    s.run_until_idle(STEPS);
    let wall = wall.elapsed();
    let (last, ok) = last_answer(&s, &ids, t0);
    assert_eq!(ok, ids.len());
    let after = s.stats();
    (
        last,
        after.acm_mads - before.acm_mads,
        after.events - before.events,
        wall,
    )
}

fn main() {
    println!(
        "| resolve_depth | 4 misses: new destination waited | 16 misses: waited | 256 misses: waited | 256 misses: all answered | cold fan-out (255): last answer | all-to-all 256: last answer | all-to-all ACM MADs | all-to-all sim events | all-to-all wall |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for depth in [1u32, 2, 4, 8, 16, 32] {
        let (_, w4) = miss_storm(depth, 4);
        let (_, w16) = miss_storm(depth, 16);
        let (storm, w256) = miss_storm(depth, 256);
        let (fan, _) = fan_out(depth);
        let (a2a, mads, events, wall) = all_to_all(depth);
        println!(
            "| {depth} | {} | {} | {} | {:.2} s | {:.1} ms | {:.1} ms | {mads} | {events} | {:.2} s |",
            short(w4),
            short(w16),
            short(w256),
            storm.as_secs_f64(),
            fan.as_secs_f64() * 1e3,
            a2a.as_secs_f64() * 1e3,
            wall.as_secs_f64(),
        );
    }
}

/// A wait, in the unit that reads best.
fn short(d: Duration) -> String {
    if d >= Duration::from_millis(100) {
        format!("{:.3} s", d.as_secs_f64())
    } else {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    }
}
