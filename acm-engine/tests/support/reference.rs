//! The environment the shared real-ibacm captures were taken in
//! (testdata/captures/README.md, "reference-fabric"): one HCA `fakeib0` with one active
//! port, LID 1, SM LID 1, GID fe80::2:c903:a0:b001, pkey 0xffff, 10 Gb/s, MTU 2048,
//! SubnetTimeout 18; and an SA that answers as that fabric's did (all from
//! `reference_fabric.rs`), plus the harness's routing answer and a started node.

use super::reference_fabric;
use super::{Node, RouteScript, SaScript};
use acm_engine::{DeviceId, EngineConfig, Input, PortId};
use acm_proto::mad::MAD_LEN;
use std::net::{IpAddr, Ipv4Addr};

// Each test binary compiles this module and uses a different part of it.
#[allow(unused_imports)]
pub use super::reference_fabric::{
    ADDRS, BASE_GUID, HOSTS, OPTS, device, gid_of_lid, port_attrs, sa_answer,
};

pub const PORT: PortId = PortId {
    device: DeviceId(0),
    port: 1,
};

pub fn config() -> EngineConfig {
    reference_fabric::config(None)
}

/// The fabric's SA as the harness's script.
pub fn sa() -> SaScript {
    Box::new(|mad: &[u8; MAD_LEN]| sa_answer(mad).map(|r| r.to_vec()))
}

/// The capture machine's routing: 10.0.0.x is on no interface, so the kernel picks the
/// ordinary Ethernet address, which is no endpoint's.
pub fn route() -> RouteScript {
    Box::new(|_dest: IpAddr| Ok(IpAddr::V4(Ipv4Addr::new(192, 168, 122, 10))))
}

/// A node on the reference fabric, started: device up, QP made, group joined.
pub fn node() -> Node {
    let mut n = Node::new(config(), sa(), route());
    n.input(Input::DeviceAdded(device()));
    n.settle();
    n
}
