//! Floods from one local client, on a fabric of daemons: host 0's clients
//! come through the driven-host API, so one connection can carry many requests, as a
//! hostile local program's would. Unreachable addresses (198.18.0.0/15) make each
//! lookup hold its credit for a whole retry cycle, `LOOKUP`, with these options.

mod scenario_support;

use acm_engine::HostOutput;
use acm_engine::{ClientOutput, ConnId};
use acm_io_sim::sim::{requests, run_seeded, seed_from_env};
use acm_io_sim::{HostId, Sim};
use scenario_support::{ENODATA, ETIMEDOUT, STEPS, boot, checked_hash, generated, ip};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// The reference fabric's retry options: a lookup nobody answers ends after two
/// transmissions, each waiting SubnetTimeout 18 (1024 ms) plus 1000 ms.
const OPTIONS: &str = "timeout 1000\nretries 1\n";
const LOOKUP: Duration = Duration::from_millis(2 * (1024 + 1000));
const ENOMEM: u8 = 1;

fn unreachable(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8))
}

fn fabric(seed: u64) -> Sim {
    let mut sim = boot(generated(8, OPTIONS), seed);
    sim.drive_host(HostId(0));
    sim
}

/// The replies the driven host's clients got since the last call: (connection, status).
fn replies(sim: &mut Sim) -> Vec<(u64, u8)> {
    let mut got = Vec::new();
    while let Some(out) = sim.poll_driven_output() {
        if let HostOutput::Client(ClientOutput::Reply { conn, reply }) = out {
            got.push((conn.0, reply.as_bytes()[2]));
        }
    }
    got
}

fn ask(sim: &mut Sim, conn: u64, dst: IpAddr, nodelay: bool) {
    let src = ip(sim, HostId(0));
    sim.driven_request(ConnId(conn), &requests::resolve_ip(Some(src), dst, nodelay));
}

fn run_for(sim: &mut Sim, d: Duration) {
    let t = sim.now() + d;
    sim.run_until(t);
}

#[test]
fn a_miss_flood_from_one_connection_leaves_others_one_lookup_behind_and_closing_cancels_it() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = fabric(seed);
        // Connection 1 asks for 74 unreachable destinations: 64 (its allowance) wait,
        // 10 are refused at once, and nobody else is.
        for i in 0..74 {
            ask(&mut sim, 1, unreachable(i), false);
        }
        let got = replies(&mut sim);
        assert_eq!(got, vec![(1, ENOMEM); 10]);
        assert_eq!(sim.engine(HostId(0)).lookup_counters().rejected, 10);
        run_for(&mut sim, Duration::from_millis(500));
        // Connection 2's new destination, a live host, is resolved within one lookup.
        let target = ip(&sim, HostId(3));
        ask(&mut sim, 2, target, false);
        run_for(&mut sim, LOOKUP);
        let got = replies(&mut sim);
        assert!(got.contains(&(2, 0)), "connection 2 resolved: {got:?}");
        // Meanwhile only the flood's first lookups ended (one credit's worth each).
        let flood: Vec<_> = got.iter().filter(|&&(c, _)| c == 1).collect();
        assert!(flood.len() <= 8, "{flood:?}");
        assert!(flood.iter().all(|&&(_, s)| s == ETIMEDOUT), "{flood:?}");
        // The flood's connection goes: every lookup of its own is cancelled, and a
        // new client's destination goes out at once.
        sim.driven_closed(ConnId(1));
        let cancelled = sim.engine(HostId(0)).lookup_counters().cancelled;
        assert!(cancelled >= 64 - 8 * 2, "{cancelled} cancelled");
        let mads = sim.stats().acm_mads;
        let target = ip(&sim, HostId(5));
        ask(&mut sim, 3, target, false);
        run_for(&mut sim, Duration::from_millis(1));
        assert_eq!(replies(&mut sim), [(3, 0)]);
        sim.run_until_idle(STEPS);
        // The flood's lookups were not retransmitted: the only ACM MADs after the
        // close are connection 3's request and its answer.
        assert!(
            sim.stats().acm_mads - mads <= 2,
            "{} ACM MADs after the close",
            sim.stats().acm_mads - mads
        );
        assert!(replies(&mut sim).is_empty());
        checked_hash(&sim, "miss flood")
    });
}

#[test]
fn a_nodelay_flood_is_bounded_and_does_not_hold_up_a_waited_lookup() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = fabric(seed);
        let mads = sim.stats().acm_mads;
        for i in 0..300 {
            ask(&mut sim, 1, unreachable(i), true);
        }
        let got = replies(&mut sim);
        assert_eq!(got, vec![(1, ENODATA); 300], "NODELAY answers at once");
        let counters = sim.engine(HostId(0)).lookup_counters();
        assert_eq!(counters.background_dropped, 300 - 64);
        // A client that waits goes before the queued background lookups.
        run_for(&mut sim, Duration::from_millis(500));
        let target = ip(&sim, HostId(6));
        ask(&mut sim, 2, target, false);
        run_for(&mut sim, LOOKUP);
        assert_eq!(replies(&mut sim), [(2, 0)]);
        sim.run_until_idle(STEPS);
        // 64 background lookups of two transmissions each, and connection 2's exchange.
        let sent = sim.stats().acm_mads - mads;
        assert!(sent <= 64 * 2 + 2, "{sent} ACM MADs");
        checked_hash(&sim, "NODELAY flood")
    });
}

#[test]
fn two_flooding_connections_take_turns() {
    run_seeded(seed_from_env(), |seed| {
        let mut sim = boot(
            generated(4, "timeout 1000\nretries 1\nresolve_depth 1\n"),
            seed,
        );
        sim.drive_host(HostId(0));
        // Connection 1 asks for six unreachable destinations, then connection 2 for six.
        for i in 0..6 {
            ask(&mut sim, 1, unreachable(i), false);
        }
        for i in 0..6 {
            ask(&mut sim, 2, unreachable(100 + i), false);
        }
        // One lookup at a time: each ends ETIMEDOUT after a lookup time, and the next
        // credit goes to the other connection's next destination. The replies come in
        // the order the lookups ran.
        sim.run_until_idle(STEPS);
        let got = replies(&mut sim);
        assert!(got.iter().all(|&(_, s)| s == ETIMEDOUT), "{got:?}");
        let order: Vec<u64> = got.iter().map(|&(c, _)| c).collect();
        assert_eq!(order, [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
        checked_hash(&sim, "two floods")
    });
}
