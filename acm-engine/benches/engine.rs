//! Engine throughput on the reference fabric: cache-hit resolves, cold
//! resolutions that each need an SA PathRecord round trip, and a coalesced burst.
//!
//! Every figure is per request and includes the driver's work: `handle`, draining
//! `poll_output` (the reply, and the log line `log_level 2` writes for each request),
//! and for cold destinations building the SA's answer and feeding it back. Results are
//! recorded in BENCHMARKS.md, "acm-engine".

mod common;

use acm_engine::ConnId;
use common::{Driver, config, resolve_ip, resolve_lid};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::{Duration, Instant};

const CONN: ConnId = ConnId(1);
/// Cold destinations resolved on one engine before it is replaced (outside the timing):
/// LIDs 2..=N+1.
const COLD_PER_ENGINE: u16 = 10_000;
/// Requests in one coalesced burst.
const BURST: u16 = 100;

/// The two log levels measured: the capture configuration's (2: a log line per request)
/// and the quiet default a production daemon runs with (0).
const LEVELS: [(&str, i32); 2] = [("log2", 2), ("log0", 0)];

fn cache_hit(c: &mut Criterion) {
    let mut g = c.benchmark_group("cache_hit");
    g.throughput(Throughput::Elements(1));
    for (label, level) in LEVELS {
        // 10.0.0.1 is the endpoint's own address: a loopback entry, READY from start-up.
        let mut d = Driver::new(config(Some(level)));
        let req = resolve_ip([10, 0, 0, 1], [10, 0, 0, 1]);
        d.request(CONN, &req);
        assert_eq!(d.last, (0, 88), "loopback resolve answers with a path");
        g.bench_function(BenchmarkId::new("loopback_ip", label), |b| {
            b.iter(|| d.send(CONN, black_box(&req)));
        });
        assert_eq!(d.failures, 0);

        // 10.0.0.2 is preloaded (address known); its route comes from one SA round trip.
        let mut d = Driver::new(config(Some(level)));
        let req = resolve_ip([10, 0, 0, 1], [10, 0, 0, 2]);
        let sa_before = d.sa_sent;
        d.request(CONN, &req);
        assert_eq!(d.last, (0, 88), "learned resolve answers with a path");
        assert_eq!(d.sa_sent, sa_before + 1, "one SA PathRecord query");
        g.bench_function(BenchmarkId::new("learned_ip", label), |b| {
            b.iter(|| d.send(CONN, black_box(&req)));
        });
        assert_eq!(d.sa_sent, sa_before + 1, "cache hits send nothing");

        // A path resolve by LID, learned from the SA.
        let mut d = Driver::new(config(Some(level)));
        let req = resolve_lid(2);
        d.request(CONN, &req);
        assert_eq!(d.last, (0, 88), "path resolve answers with a path");
        let sa_after = d.sa_sent;
        g.bench_function(BenchmarkId::new("learned_lid_path", label), |b| {
            b.iter(|| d.send(CONN, black_box(&req)));
        });
        assert_eq!((d.sa_sent, d.failures), (sa_after, 0));
    }
    g.finish();
}

/// Runs rounds of at most `COLD_PER_ENGINE` units, each on a fresh engine, until `iters`
/// units are done. Only `round(driver, units)` is timed, not set-up or tear-down.
fn rounds(iters: u64, level: i32, mut round: impl FnMut(&mut Driver, u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let mut d = Driver::new(config(Some(level)));
        let n = u64::from(COLD_PER_ENGINE).min(iters - done);
        let start = Instant::now();
        round(&mut d, n);
        total += start.elapsed();
        assert_eq!((d.failures, d.sa_unanswered), (0, 0));
        done += n;
        drop(black_box(d));
    }
    total
}

fn cold_resolution(c: &mut Criterion) {
    let mut g = c.benchmark_group("cold_resolution");
    g.throughput(Throughput::Elements(1));
    for (label, level) in LEVELS {
        // One resolution per iteration: a path resolve for a LID never seen, its SA
        // PathRecord query, the SA's answer fed back, the reply.
        g.bench_function(BenchmarkId::new("lid_path_sa_round_trip", label), |b| {
            b.iter_custom(|iters| {
                rounds(iters, level, |d, n| {
                    let sa0 = d.sa_sent;
                    for k in 0..n {
                        d.request(CONN, black_box(&resolve_lid(2 + k as u16)));
                    }
                    assert_eq!(d.sa_sent - sa0, n);
                })
            });
        });
    }
    g.finish();
}

fn coalesced_burst(c: &mut Criterion) {
    let mut g = c.benchmark_group("coalesced_burst");
    // Elements are requests: 100 per iteration, all for one cold destination.
    g.throughput(Throughput::Elements(u64::from(BURST)));
    for (label, level) in LEVELS {
        g.bench_function(BenchmarkId::new("100_requests_one_sa_query", label), |b| {
            b.iter_custom(|iters| {
                rounds(iters, level, |d, n| {
                    for k in 0..n {
                        let req = resolve_lid(2 + k as u16);
                        let (replies, sa) = (d.replies, d.sa_sent);
                        for _ in 0..BURST {
                            d.send(CONN, black_box(&req));
                        }
                        d.settle();
                        assert_eq!(d.replies - replies, u64::from(BURST));
                        assert_eq!(d.sa_sent - sa, 1, "coalesced into one query");
                    }
                })
            });
        });
    }
    g.finish();
}

criterion_group!(benches, cache_hit, cold_resolution, coalesced_burst);
criterion_main!(benches);
