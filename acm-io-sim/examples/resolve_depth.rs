//! How `resolve_depth` (outstanding ACM address lookups per endpoint) trades the time to
//! resolve against multicast traffic, on the simulator (the figures that set the
//! default: BENCHMARKS.md, "`resolve_depth` and fair resolution"). Every figure is
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
//! * **misses**: one client connection of host 0 asks for M unreachable addresses
//!   (198.18.0.0/15) at once, M = 4, 16 and 256 (`max_pending_per_client 256`, so that
//!   all wait); 0.5 s later another client asks for host 1, which answers. Reported:
//!   how long the client of host 1 waited, and when the last miss was answered. Then
//!   the same 256 misses each on its own connection (256 `ib_acme` runs).
//! * **cold fan-out**: on a 256-host fabric, host 0 alone resolves the 255 others at
//!   once. Reported: the time to the last answer, and the ACM MADs sent.
//! * **all-to-all**: every host of a 256-host fabric resolves every other at once.
//!   Reported: the time to the last answer, ACM MADs and simulator events (the cost that
//!   grows with depth: each outstanding request is a multicast every host receives).

use acm_engine::{ClientOutput, ConnId, HostOutput, Instant};
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
            options: format!(
                "timeout 1000\nretries 1\nresolve_depth {depth}\nmax_pending_per_client 256\n"
            ),
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

/// `m` unreachable addresses asked at once, on one connection (`one_conn`, through the
/// driver API, as a flooding program would) or each on its own; 0.5 s later another
/// client asks for host 1. When the last miss was answered, and how long the other
/// client waited.
fn miss_storm(depth: u32, m: u32, one_conn: bool) -> (Duration, Duration) {
    let mut s = sim(64, depth);
    s.drive_host(HostId(0));
    let t0 = s.now();
    let src = ip(&s, 0);
    for i in 0..m {
        let dst = IpAddr::V4(Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8));
        let conn = if one_conn { 1 } else { 100 + u64::from(i) };
        s.driven_request(ConnId(conn), &requests::resolve_ip(Some(src), dst, false));
    }
    let asked = t0 + Duration::from_millis(500);
    s.run_until(asked);
    let victim = requests::resolve_ip(Some(src), ip(&s, 1), false);
    s.driven_request(ConnId(2), &victim);
    let (mut last, mut waited, mut misses) = (Duration::ZERO, None, 0);
    loop {
        while let Some(out) = s.poll_driven_output() {
            if let HostOutput::Client(ClientOutput::Reply { conn, reply }) = out {
                if conn == ConnId(2) {
                    assert_eq!(reply.as_bytes()[2], 0, "host 1 resolves");
                    waited = Some(s.now().saturating_duration_since(asked));
                } else {
                    misses += 1;
                    last = s.now().saturating_duration_since(t0);
                }
            }
        }
        if !s.step(Instant::from_nanos(u64::MAX)) {
            break;
        }
    }
    assert_eq!(misses, m, "every miss answered");
    (last, waited.expect("the other client was answered"))
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
        "| resolve_depth | 4 misses on one connection: new destination waited | 16 misses: waited | 256 misses: waited | 256 misses: all answered | 256 misses on 256 connections: waited | cold fan-out (255): last answer | all-to-all 256: last answer | all-to-all ACM MADs | all-to-all sim events | all-to-all wall |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for depth in [1u32, 2, 4, 8, 16, 32] {
        let (_, w4) = miss_storm(depth, 4, true);
        let (_, w16) = miss_storm(depth, 16, true);
        let (storm, w256) = miss_storm(depth, 256, true);
        let (_, many) = miss_storm(depth, 256, false);
        let (fan, _) = fan_out(depth);
        let (a2a, mads, events, wall) = all_to_all(depth);
        println!(
            "| {depth} | {} | {} | {} | {:.2} s | {} | {:.1} ms | {:.1} ms | {mads} | {events} | {:.2} s |",
            short(w4),
            short(w16),
            short(w256),
            storm.as_secs_f64(),
            short(many),
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
