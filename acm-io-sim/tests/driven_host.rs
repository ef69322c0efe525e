//! The driven-host API a daemon uses to serve one host's clients, and the spec keys that
//! describe the reference captures' environment (`daemon = false` peers, a default
//! route outside the IPoIB subnets).

mod scenario_support;

use acm_engine::HostOutput;
use acm_engine::{ClientOutput, ConnId, Instant};
use acm_io_sim::sim::requests;
use acm_io_sim::spec::{FabricSpec, GenOptions};
use acm_io_sim::{HostId, Sim};
use acm_proto::client::{Direction, HeaderRepr, PerfQueryRepr, Status};
use scenario_support::generated;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

fn replies(sim: &mut Sim) -> Vec<(ConnId, Vec<u8>)> {
    let mut got = Vec::new();
    while let Some(out) = sim.poll_driven_output() {
        if let HostOutput::Client(ClientOutput::Reply { conn, reply }) = out {
            got.push((conn, reply.as_bytes().to_vec()));
        }
    }
    got
}

/// Runs the fabric for `d` and returns the serving program's replies.
fn run(sim: &mut Sim, d: Duration) -> Vec<(ConnId, Vec<u8>)> {
    let until = sim.now() + d;
    sim.run_until(until);
    replies(sim)
}

#[test]
fn a_driven_host_answers_its_clients_on_their_connections() {
    let spec = FabricSpec::generate(3, &GenOptions::default());
    let (a, b) = (spec.hosts[0].ips[0].addr, spec.hosts[1].ips[0].addr);
    let mut sim = Sim::new(spec, 7);
    sim.drive_host(HostId(0));
    assert_eq!(sim.driven_host(), Some(HostId(0)));
    assert!(sim.next_due().is_some(), "the hosts are booting");
    let _ = run(&mut sim, Duration::from_secs(1));
    // Two requests pipelined on one connection, one on another; connection 1 stays
    // open after its replies (a daemon's connections are long-lived).
    let req = requests::resolve_ip(Some(a), b, false);
    sim.driven_request(ConnId(1), &req);
    sim.driven_request(ConnId(1), &req);
    sim.driven_request(ConnId(2), &requests::perf_global());
    let got = run(&mut sim, Duration::from_secs(1));
    let on = |c: u64| got.iter().filter(|(conn, _)| conn.0 == c).count();
    assert_eq!((on(1), on(2)), (2, 1), "{got:?}");
    for (conn, bytes) in &got {
        let header = HeaderRepr::parse(bytes, Direction::Response).expect("a header");
        assert_eq!(
            header.status,
            Status::SUCCESS,
            "status on connection {}",
            conn.0
        );
    }
    sim.driven_closed(ConnId(1));
    sim.driven_closed(ConnId(2));
    sim.check_invariants().unwrap_or_else(|v| panic!("{v:?}"));
}

#[test]
fn a_driven_host_gets_its_log_lines_and_closes() {
    let spec = generated(2, "log_level 2\n");
    let mut sim = Sim::driving(spec, 1, BTreeMap::new(), HostId(1));
    sim.run_until(Instant::from_nanos(1_000_000_000));
    let mut origins = Vec::new();
    while let Some(out) = sim.poll_driven_output() {
        let HostOutput::Log(ev) = out else {
            panic!("{out:?}")
        };
        origins.push(ev.origin);
    }
    assert!(
        origins.contains(&"acmp_log_options"),
        "the driven host's start-up is logged from the first line: {origins:?}"
    );
    // A version-2 header: the engine closes the connection without a reply.
    let mut perf = PerfQueryRepr::parse(&requests::perf_global(), Direction::Request).unwrap();
    perf.header.version = 2;
    let mut bad = vec![0; perf.buffer_len()];
    perf.emit(&mut bad, Direction::Request);
    sim.driven_request(ConnId(9), &bad);
    let outputs: Vec<_> = std::iter::from_fn(|| sim.poll_driven_output()).collect();
    // The engine's line names the client by the daemon's number, as the daemon's own
    // lines do.
    let said: Vec<&str> = outputs
        .iter()
        .filter_map(|o| match o {
            HostOutput::Log(ev) if ev.origin == "acm_svr_receive" => Some(ev.message.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        said.len() == 1 && said[0].starts_with("client 9: "),
        "{said:?}"
    );
    let closes: Vec<_> = outputs
        .iter()
        .filter(|o| matches!(o, HostOutput::Client(ClientOutput::Close { .. })))
        .collect();
    assert!(
        matches!(
            closes.as_slice(),
            [HostOutput::Client(ClientOutput::Close {
                conn: ConnId(9),
                ..
            })]
        ),
        "{closes:?}"
    );
}

#[test]
fn a_configured_host_runs_with_its_own_options() {
    // Every host routes over ACM, except host 0 when its own configuration says sa.
    let spec = generated(2, "route_prot acm\n");
    let (a, b) = (spec.hosts[0].ips[0].addr, spec.hosts[1].ips[0].addr);
    let queries = |configs| {
        let mut sim = Sim::with_configs(spec.clone(), 3, configs);
        sim.run_until_idle(1_000_000);
        let before = sim.stats().sa_path_queries;
        let id = sim.request_now(HostId(0), requests::resolve_ip(Some(a), b, false));
        assert_eq!(sim.resolve_result(id).map(|r| r.status), Some(0));
        sim.run_until_idle(1_000_000);
        sim.stats().sa_path_queries - before
    };
    assert_eq!(queries(BTreeMap::new()), 0, "route_prot acm everywhere");
    let mut config = acm_io_sim::fabric::engine_config(&spec, HostId(0));
    let (options, _) = acm_engine::config::Options::parse("opts", "route_prot sa\n");
    config.options = options;
    assert_eq!(
        queries(BTreeMap::from([(HostId(0), config)])),
        1,
        "host 0's own route_prot sa"
    );
}

#[test]
fn peers_without_a_daemon_and_a_default_route() {
    let mut spec = FabricSpec::generate(2, &GenOptions::default());
    spec.hosts[1].daemon = false;
    spec.hosts[0].default_route = Some("192.168.7.7".parse().unwrap());
    let text = spec.to_toml();
    assert!(text.contains("daemon = false"), "{text}");
    let spec = FabricSpec::parse(&text).expect("round trip");
    let b = spec.hosts[1].ips[0].addr;
    let mut sim = Sim::new(spec, 5);
    sim.run_until_idle(1_000_000);
    // Nobody answers the ACM request for host 1's address: ETIMEDOUT (status 6)...
    let a = sim.spec().hosts[0].ips[0].addr;
    let id = sim.request_now(HostId(0), requests::resolve_ip(Some(a), b, false));
    assert_eq!(sim.resolve_result(id).map(|r| r.status), Some(6));
    // ...and a destination outside every IPoIB subnet routes from the default route,
    // an address ibacm has no endpoint for: ESRCADDR (status 3... as the engine maps
    // an unknown source).
    let far: IpAddr = "172.16.0.1".parse().unwrap();
    let id = sim.request_now(HostId(0), requests::resolve_ip(None, far, false));
    let unknown_src = sim.request_now(
        HostId(0),
        requests::resolve_ip(Some("192.168.7.7".parse().unwrap()), far, false),
    );
    let (routed, direct) = (
        sim.resolve_result(id).map(|r| r.status),
        sim.resolve_result(unknown_src).map(|r| r.status),
    );
    assert!(routed.is_some_and(|s| s != 0), "{routed:?}");
    assert_eq!(routed, direct, "the routed source is the default route");
}
