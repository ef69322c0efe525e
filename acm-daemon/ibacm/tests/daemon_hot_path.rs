//! The daemon's request path for cache hits allocates nothing per request, so that
//! its cost stays flat however long the daemon runs (BENCHMARKS.md, "The daemon
//! beside an echo server").
//!
//! The whole event loop (`Server` with the simulated demo fabric as its backend) runs
//! in this process under a counting allocator, and a client thread that allocates
//! nothing itself sends cache-hit RESOLVEs one at a time over the unix socket. After
//! a warm-up (the first resolve fills the cache; buffers and queues reach their
//! working size), a measured batch of requests must add no heap allocation at all.
//! This counts allocations, it does not time anything.

#[path = "support/sim_server.rs"]
mod sim_server;

use acm_io_sim::sim::requests;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARM_UP: usize = 2_000;
const MEASURED: usize = 10_000;

/// Sends `req` and reads its reply into `reply`, `n` times; allocates nothing.
fn resolve_n(c: &mut UnixStream, req: &[u8], reply: &mut [u8; 88], n: usize) {
    for _ in 0..n {
        c.write_all(req).expect("send");
        c.read_exact(reply).expect("reply");
        assert_eq!(reply[2], 0, "a cache hit succeeds");
    }
}

#[test]
fn cache_hits_allocate_nothing_per_request() {
    let dir = std::env::temp_dir().join(format!("acm-hot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ibacm-unix.sock");
    sim_server::spawn(&sock, |_| {});

    let mut c = UnixStream::connect(&sock).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let req = requests::resolve_ip(Some(src), dst, false);
    let mut reply = [0u8; 88];
    resolve_n(&mut c, &req, &mut reply, WARM_UP);

    let region = Region::new(GLOBAL);
    resolve_n(&mut c, &req, &mut reply, MEASURED);
    let stats = region.change();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        stats.allocations + stats.reallocations,
        0,
        "{MEASURED} cache-hit resolves allocated: {stats:?}"
    );
}
