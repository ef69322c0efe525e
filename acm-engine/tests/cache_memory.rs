//! What the destination cache's bound holds in bytes: a counting allocator measures the
//! engine's heap while a peer makes up requesters until the cache has evicted several
//! times its size. The heap the cache took must stay within `max_dest_cache_bytes`,
//! and what one entry took is printed (BENCHMARKS.md, "Destination cache: memory and
//! its bound").
//!
//! One test in this file: the allocator counts every thread of the process.

#[path = "../benches/common/mod.rs"]
mod common;

use acm_engine::{CacheStats, ConnId, EndpointId, Input, RecvInfo};
use acm_proto::acm_mad::AcmMadRepr;
use acm_proto::client::AddrType;
use acm_proto::grh::GrhRepr;
use acm_proto::{Bytes64, Gid};
use common::{BASE_GUID, Driver, config, resolve_lid};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// 1 MiB: 4,017 entries of at most 261 bytes.
const BOUND: u64 = 1 << 20;
/// The most the cache holds beyond its entries: one partly used chunk of slots (255
/// slots of 232 bytes), the chunk list and the index's rounding.
const SLACK: i64 = 64 << 10;

fn cache(d: &Driver) -> CacheStats {
    d.engine.endpoint_stats()[0]
        .cache
        .expect("ibacmp has a cache")
}

fn live(region: &Region<'_, System>) -> i64 {
    let c = region.change();
    c.bytes_allocated as i64 - c.bytes_deallocated as i64
}

/// The group 0 MGID of the reference endpoint.
fn mgid() -> Gid {
    "ff15:4001:ffff:3:400::".parse().expect("MGID text")
}

/// Made-up requester `i` asks the group for 10.0.0.1 (us: its route is asked of the
/// SA and it is answered) or, one time in two, for an address nobody has.
fn made_up_request(d: &mut Driver, i: u32) {
    let src = Ipv4::from(0x0b00_0000 + i);
    let target = if i.is_multiple_of(2) {
        [10, 0, 0, 1]
    } else {
        [10, 0, 0, 9]
    };
    let gid = Gid::from_parts(0xfe80_0000_0000_0000, BASE_GUID + 0x10_0000 + u64::from(i));
    let mad = AcmMadRepr::resolve_request(
        0x5000_0000 + u64::from(i),
        AddrType::IP,
        Bytes64::zero_padded(&target),
        AddrType::IP,
        Bytes64::zero_padded(&src.octets()),
        &[mgid()],
    )
    .to_bytes();
    let grh = GrhRepr::iba(gid, mgid()).to_bytes();
    d.input(Input::UdReceive {
        ep: EndpointId(0),
        wc: RecvInfo {
            slid: 0x1000 + (i % 0x8000) as u16,
            src_qp: 0x99,
            ..RecvInfo::default()
        },
        grh: Some(&grh),
        mad: &mad,
    });
    d.settle();
}

type Ipv4 = std::net::Ipv4Addr;

#[test]
fn a_flooded_cache_stays_within_its_bound_in_bytes() {
    let mut options_config = config(Some(0));
    options_config.options.max_dest_cache_bytes = BOUND;
    let mut d = Driver::new(options_config);
    let limit = cache(&d).limit;
    assert_eq!(limit, 4017);
    // A destination in use: a path resolve by LID, learned from the SA.
    let used = resolve_lid(2);
    d.request(ConnId(1), &used);
    assert_eq!(d.last.0, 0, "resolved");
    // Warm-up: the output queue, the SA agent and the response queue reach their
    // steady size.
    for i in 0..64 {
        made_up_request(&mut d, i);
    }
    let start = cache(&d);
    let sa_before = d.sa_sent;

    let region = Region::new(GLOBAL);
    let flood = 5 * limit as u32;
    let mut peak = 0i64;
    for i in 64..64 + flood {
        made_up_request(&mut d, i);
        if i % 100 == 0 {
            d.request(ConnId(1), &used);
            assert_eq!(d.last.0, 0);
            peak = peak.max(live(&region));
        }
    }
    let grown = live(&region).max(peak);
    let end = cache(&d);
    assert_eq!(end.total(), limit, "{end:?}");
    assert_eq!(
        end.evictions,
        (start.total() + flood as usize - limit) as u64,
        "every requester past the bound evicted one entry"
    );
    // The destination in use stayed: the SA was asked for the requesters' routes only.
    let for_us = (64..64 + flood).filter(|i| i.is_multiple_of(2)).count() as u64;
    assert_eq!(d.sa_sent - sa_before, for_us);

    let added = (limit - start.total()) as i64;
    println!(
        "{flood} made-up requesters, bound {BOUND} bytes ({limit} entries): the heap grew \
         {grown} bytes for {added} entries, {:.1} bytes per entry; {} evicted",
        grown as f64 / added as f64,
        end.evictions
    );
    assert!(
        grown <= BOUND as i64 + SLACK,
        "the cache took {grown} bytes for a bound of {BOUND}"
    );
}
