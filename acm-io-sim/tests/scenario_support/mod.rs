//! Helpers shared by the simulator's tests (the `scenarios*.rs` files, `storm.rs`, `smoke.rs`,
//! `driven_host.rs`).
//!
//! Every helper panics with the engine logs attached when something unexpected
//! happens, so a failing scenario says why; scenarios turn logs on with
//! [`Sim::keep_logs`] only where they need them.

#![allow(dead_code, unreachable_pub)]

use acm_io_sim::sim::{RequestId, ResolveResult, requests};
use acm_io_sim::spec::{FabricSpec, GenOptions};
use acm_io_sim::{HostId, Sim};
use acm_proto::path_record::PathRecordRepr;
use std::net::IpAddr;

/// Step budget for `run_until_idle`: far above what any scenario needs, so hitting it
/// means a livelock.
pub const STEPS: u64 = 50_000_000;

/// ACM status ENODATA (docs/protocol/client-messages.md §8: not cached / not ready / port
/// gone).
pub const ENODATA: u8 = 3;
/// ACM status ETIMEDOUT (docs/protocol/acm-mad.md §8, docs/protocol/sa.md §6).
pub const ETIMEDOUT: u8 = 6;

/// A generated fabric of `n` hosts, all with the options text `options`.
pub fn generated(n: usize, options: &str) -> FabricSpec {
    FabricSpec::generate(
        n,
        &GenOptions {
            options: options.into(),
            ..GenOptions::default()
        },
    )
}

/// A simulation of `spec` that has run until every engine is idle: endpoints open,
/// groups joined, nothing in flight.
pub fn boot(spec: FabricSpec, seed: u64) -> Sim {
    let mut sim = Sim::new(spec, seed);
    sim.run_until_idle(STEPS);
    sim
}

/// Host `h`'s first address (its IPv4 address in generated fabrics).
pub fn ip(sim: &Sim, h: HostId) -> IpAddr {
    sim.spec().hosts[h.index()].ips[0].addr
}

/// Host `h`'s first IPv6 address.
pub fn ipv6(sim: &Sim, h: HostId) -> IpAddr {
    sim.spec().hosts[h.index()]
        .ips
        .iter()
        .map(|i| i.addr)
        .find(IpAddr::is_ipv6)
        .unwrap_or_else(|| panic!("host {h} has no IPv6 address"))
}

/// Submits a resolve of host `to`'s first address from host `from`'s first address.
pub fn submit_ip(sim: &mut Sim, from: HostId, to: HostId, nodelay: bool) -> RequestId {
    let (src, dst) = (ip(sim, from), ip(sim, to));
    sim.submit(from, requests::resolve_ip(Some(src), dst, nodelay))
}

/// Resolves host `to`'s first address from host `from` and runs until answered.
pub fn resolve_ip_now(sim: &mut Sim, from: HostId, to: HostId) -> RequestId {
    let (src, dst) = (ip(sim, from), ip(sim, to));
    sim.request_now(from, requests::resolve_ip(Some(src), dst, false))
}

/// Request `id`'s RESOLVE result; panics (with the outcome and logs) if it has none.
pub fn result(sim: &Sim, id: RequestId) -> ResolveResult {
    sim.resolve_result(id).unwrap_or_else(|| {
        panic!(
            "request {id:?} has no reply: {:?}\n{}",
            sim.outcome(id),
            sim.logs().join("\n")
        )
    })
}

/// The status of request `id`'s reply.
pub fn status(sim: &Sim, id: RequestId) -> u8 {
    result(sim, id).status
}

/// The path of a successful reply; panics (with the status and logs) otherwise.
pub fn path(sim: &Sim, id: RequestId) -> PathRecordRepr {
    let r = result(sim, id);
    assert_eq!(
        r.status,
        0,
        "request {id:?} failed with status {}\n{}",
        r.status,
        sim.logs().join("\n")
    );
    r.path.expect("a successful reply carries a path")
}

/// Checks that `p` is the path from host `from`'s port to host `to`'s port (port 1 of
/// HCA 0 on both): our GID and LID as source, the peer's as destination.
pub fn assert_path_between(sim: &Sim, p: &PathRecordRepr, from: HostId, to: HostId) {
    let spec = sim.spec();
    let (sgid, dgid) = (spec.port_gid(from, 0, 1), spec.port_gid(to, 0, 1));
    let slid = spec.hosts[from.index()].hcas[0].ports[0].lid;
    let dlid = spec.hosts[to.index()].hcas[0].ports[0].lid;
    assert_eq!(
        (p.sgid, p.slid, p.dgid, p.dlid),
        (sgid, slid, dgid, dlid),
        "path from host {from} to host {to}"
    );
}

/// Resolves host `to`'s first address from host `from`, runs until answered, and checks
/// that the path is the one between their ports.
pub fn assert_resolves(sim: &mut Sim, from: HostId, to: HostId) {
    let id = resolve_ip_now(sim, from, to);
    assert_path_between(sim, &path(sim, id), from, to);
}

/// Panics with every violation if an invariant broke. Call when idle.
pub fn check(sim: &Sim, what: &str) {
    sim.check_invariants().unwrap_or_else(|v| {
        let list: Vec<String> = v.iter().map(ToString::to_string).collect();
        panic!("{what}: invariants broken:\n{}", list.join("\n"))
    });
}

/// The end of a scenario: checks the invariants and gives the trace's hash, which
/// [`acm_io_sim::sim::run_seeded`] compares between its two runs.
pub fn checked_hash(sim: &Sim, what: &str) -> u64 {
    check(sim, what);
    sim.trace_hash()
}

/// [`checked_hash`] once everything in flight has settled: the invariants speak of an
/// idle fabric.
pub fn settled_hash(sim: &mut Sim, what: &str) -> u64 {
    sim.run_until_idle(STEPS);
    checked_hash(sim, what)
}

/// Runs `scenario` with `route_prot acm`, then with `route_prot sa`, settling and
/// checking the simulation it hands back each time; the two trace hashes folded into
/// one, for `run_seeded` to compare.
pub fn with_each_route(mut scenario: impl FnMut(&'static str) -> Sim) -> u64 {
    ["acm", "sa"].into_iter().fold(0, |hash, route| {
        let mut sim = scenario(route);
        hash ^ settled_hash(&mut sim, route)
    })
}
