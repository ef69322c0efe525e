//! What one cached destination costs, against the 256-byte budget `acmp::dest` is laid
//! out for (BENCHMARKS.md, "Destination cache: memory and its bound").
//!
//! `cargo run --release -p acm-engine --example dest_memory [COUNT] [lid|gid]`
//!
//! Starts an engine on the reference fabric, then fills its one endpoint's destination
//! cache with COUNT (default 100000) learned destinations: path resolves, each answered
//! by the fabric's SA, so every entry ends READY with its PathRecord and address vector.
//! Keys are LIDs 2.. (`lid`, at most 49150 since unicast LIDs end at 0xBFFF) or GIDs
//! (`gid`, the default above that). A counting global allocator gives the live heap
//! before and after; the difference over COUNT is the cost of one destination, with the
//! slot vector's and the hash index's growth slack included. Everything transient (the
//! SA bookkeeping, log lines, replies) is freed again by then; the output queue and the
//! connection table are warmed up before the first measurement so their one-off growth
//! is not counted.

#[path = "../benches/common/mod.rs"]
mod common;

use acm_engine::provider::PendingReply;
use acm_engine::{Address, ConnId};
use acm_engine::{AddressVector, Mad, Output, Reply};
use common::{BASE_GUID, Driver, MAX_UCAST_LID, config, resolve_gid, resolve_ip, resolve_lid};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::mem::size_of;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CONN: ConnId = ConnId(1);
const BUDGET: f64 = 256.0;

fn live(region: &Region<'_, System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

fn request_for(i: u64, by_lid: bool) -> [u8; 88] {
    if by_lid {
        resolve_lid(2 + i as u16)
    } else {
        // Interface ids past every LID's, so no key repeats.
        resolve_gid(acm_proto::Gid::from_parts(
            0xfe80_0000_0000_0000,
            BASE_GUID + 0x1_0000 + i,
        ))
    }
}

/// Allocations per cache-hit resolve (10.0.0.1 → 10.0.0.2, learned) at `level`.
fn allocs_per_hit(level: i32) -> (f64, f64) {
    let mut d = Driver::new(config(Some(level)));
    let req = resolve_ip([10, 0, 0, 1], [10, 0, 0, 2]);
    for _ in 0..16 {
        d.request(CONN, &req);
    }
    const N: u64 = 10_000;
    let region = Region::new(GLOBAL);
    for _ in 0..N {
        d.request(CONN, &req);
    }
    let c = region.change();
    assert_eq!(d.failures, 0);
    (
        c.allocations as f64 / N as f64,
        c.bytes_allocated as f64 / N as f64,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args
        .next()
        .map_or(100_000, |a| a.parse().expect("COUNT is a number"));
    let max_lids = u64::from(MAX_UCAST_LID - 1);
    let by_lid = match args.next().as_deref() {
        Some("lid") => true,
        Some("gid") => false,
        Some(other) => panic!("key kind is lid or gid, not {other}"),
        None => count <= max_lids,
    };
    assert!(
        !by_lid || count <= max_lids,
        "only {max_lids} unicast LIDs; use gid"
    );

    let mut d = Driver::new(config(None));
    // Warm-up: the output queue, the connection table and the SA agent reach their
    // steady size on cache hits and one throw-away learned destination.
    let hit = resolve_ip([10, 0, 0, 1], [10, 0, 0, 1]);
    for _ in 0..64 {
        d.request(CONN, &hit);
    }
    let region = Region::new(GLOBAL);
    let sa0 = d.sa_sent;
    for i in 0..count {
        d.request(CONN, &request_for(i, by_lid));
    }
    let bytes = live(&region);
    assert_eq!(
        (d.failures, d.sa_unanswered, d.sa_sent - sa0),
        (0, 0, count),
        "every destination learned through one SA round trip"
    );
    // They are cached: resolving them again sends nothing.
    let sa1 = d.sa_sent;
    for i in (0..count).step_by(997) {
        d.request(CONN, &request_for(i, by_lid));
    }
    assert_eq!((d.sa_sent, d.failures), (sa1, 0), "served from the cache");

    let per = bytes as f64 / count as f64;
    println!(
        "destinations: {count} ({} keys), live heap growth: {bytes} bytes",
        if by_lid { "LID" } else { "GID" }
    );
    println!(
        "bytes per cached destination: {per:.1} (budget {BUDGET}: {})",
        if per <= BUDGET { "met" } else { "NOT met" }
    );
    println!(
        "sizes: Address {}, AddressVector {}, PendingReply {}, Vec<PendingReply> {}, \
         [u8; 64] path 64",
        size_of::<Address>(),
        size_of::<AddressVector>(),
        size_of::<PendingReply>(),
        size_of::<Vec<PendingReply>>(),
    );
    println!(
        "sizes: Output {}, Reply {}, Mad {}",
        size_of::<Output>(),
        size_of::<Reply>(),
        size_of::<Mad>()
    );
    drop(d);
    for level in [2, 0] {
        let (allocs, bytes) = allocs_per_hit(level);
        println!(
            "cache-hit resolve (10.0.0.1 -> 10.0.0.2) at log_level {level}: \
             {allocs:.2} allocations, {bytes:.1} bytes allocated per request"
        );
    }
}
