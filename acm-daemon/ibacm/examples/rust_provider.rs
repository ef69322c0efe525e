//! A resolution provider written in Rust, run beside the built-in `ibacmp`.
//!
//! A provider is any type implementing `acm_engine::provider::Provider`: a name (what
//! `provider` lines select and EP_QUERY reports), `resolve` and `query`; every other hook
//! (devices, ports, endpoints, QPs, SA traffic, timers) has a default. It is registered
//! by handing it to `Engine::with_providers` with the others, in load order; the options
//! file's `provider <name> <prefix|default>` lines then give it ports.
//!
//! Here it runs on the simulated demo fabric (three hosts), as host node1's engine, with
//! a `provider fixed 0xfe80000000000000` line: node1's port goes to it, and a RESOLVE
//! from 10.0.0.1 to 10.0.0.3 is answered with its made-up path. The daemon makes its own
//! list in `Plugins::providers` (acm-daemon/ibacm/src/plugins/mod.rs).
//!
//! `cargo run -p ibacm --example rust_provider`

use acm_engine::acmp::Acmp;
use acm_engine::config::Options;
use acm_engine::provider::{Ctx, Outcome, PendingReply, Provider, Resolve};
use acm_engine::{ClientOutput, ConnId, EndpointId, HostOutput};
use acm_io_sim::fabric::engine_config;
use acm_io_sim::{FabricSpec, ProviderFactory, Sim};
use acm_proto::client::{
    AddrType, Direction, EpAddrRepr, EpFlags, HeaderRepr, MessagePacket, Opcode, ResolveRepr,
    Status,
};
use acm_proto::path_record::PathRecordPacket;
use ibacm::DEMO_FABRIC;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

/// The LID every path of this provider leads to.
const DLID: u16 = 0x42;

/// Answers every resolve at once with a path to [`DLID`], and every QUERY_SA with the
/// record it was given: a provider with no state, no QPs and no SA traffic.
struct Fixed;

impl Provider for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }

    fn resolve(&mut self, cx: &mut Ctx<'_>, _ep: EndpointId, _req: Resolve, reply: PendingReply) {
        let mut path = [0u8; 64];
        let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
        p.set_dlid(DLID);
        cx.complete(reply, Outcome::Path(&path));
    }

    fn query(&mut self, cx: &mut Ctx<'_>, _ep: EndpointId, path: &[u8; 64], reply: PendingReply) {
        let status = Status::SUCCESS;
        cx.complete(reply, Outcome::Query { status, path });
    }
}

fn main() {
    let spec = FabricSpec::parse(DEMO_FABRIC).expect("the demo fabric parses");
    let node1 = spec.host_index("node1").expect("node1");
    // node1's own configuration, plus the line that gives its port to `fixed`.
    let mut config = engine_config(&spec, node1);
    let (lines, _) = Options::parse("ibacm_opts.cfg", "provider fixed 0xfe80000000000000\n");
    config.options.providers = lines.providers;
    // The providers, in load order: the built-in first, as the daemon registers it.
    let factory: ProviderFactory = Box::new(|c| vec![Box::new(Acmp::new(c)), Box::new(Fixed)]);
    let configs = BTreeMap::from([(node1, config)]);
    let mut sim = Sim::driving_with_providers(spec, 1, configs, node1, factory);
    sim.run_for(Duration::from_millis(100));

    let mut req = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    let src = EpAddrRepr::ipv4(EpFlags::SOURCE, Ipv4Addr::new(10, 0, 0, 1));
    let dest = EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::new(10, 0, 0, 3));
    req.push(src).expect("room for the source");
    req.push(dest).expect("room for the destination");
    let mut bytes = vec![0u8; req.buffer_len()];
    req.emit(&mut bytes, Direction::Request);
    sim.driven_request(ConnId(1), &bytes);
    sim.run_for(Duration::from_millis(10));

    let mut dlid = None;
    while let Some(out) = sim.poll_driven_output() {
        match out {
            HostOutput::Client(ClientOutput::Reply { reply, .. }) => {
                let m = MessagePacket::new_unchecked(reply.as_bytes());
                println!("reply status {}", m.header().status().0);
                if let Some(e) = m.entry(0).filter(|e| e.addr_type() == AddrType::PATH) {
                    dlid = Some(PathRecordPacket::new_unchecked(e.info()).dlid());
                }
            }
            HostOutput::Log(ev) => println!("log: {ev}"),
            _ => {}
        }
    }
    assert_eq!(dlid, Some(DLID), "the path came from the Rust provider");
    println!("10.0.0.3 resolved by provider 'fixed': dlid {DLID:#x}");
}
