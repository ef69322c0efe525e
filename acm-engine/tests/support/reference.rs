//! The environment the shared real-ibacm captures were taken in
//! (testdata/captures/README.md, "reference-fabric"): one HCA `fakeib0` with one active
//! port, LID 1, SM LID 1, GID fe80::2:c903:a0:b001, pkey 0xffff, 10 Gb/s, MTU 2048,
//! SubnetTimeout 18; and an SA that answers as that fabric's did.

use super::{Node, RouteScript, SaScript};
use acm_engine::config::{AddrFile, Options, parse_hosts};
use acm_engine::device::rate_from_width_speed;
use acm_engine::{DeviceDesc, DeviceId, EngineConfig, Input, PortAttrs, PortId, PortState};
use acm_proto::{Gid, Mtu};
use std::net::{IpAddr, Ipv4Addr};

pub const OPTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_opts.cfg");
pub const ADDRS: &str = include_str!("../../../testdata/reference-fabric/ibacm_addr.cfg");
pub const HOSTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_hosts.data");

/// The node GUID; port GUIDs and the fabric's LID↔GID rule derive from it.
pub const BASE_GUID: u64 = 0x0002_c903_00a0_b000;
pub const PORT: PortId = PortId {
    device: DeviceId(0),
    port: 1,
};

pub fn gid_of_lid(lid: u16) -> Gid {
    Gid::from_parts(0xfe80_0000_0000_0000, BASE_GUID + u64::from(lid))
}

pub fn config() -> EngineConfig {
    let (options, _) = Options::parse("ibacm_opts.cfg", OPTS);
    let (addr_file, _) = AddrFile::parse("ibacm_addr.cfg", ADDRS);
    let (hosts, _) = parse_hosts("ibacm_hosts.data", HOSTS);
    EngineConfig {
        options,
        addr_file: Some(addr_file),
        hosts,
        ..EngineConfig::default()
    }
}

pub fn port_attrs() -> PortAttrs {
    PortAttrs {
        state: PortState::Active,
        link_layer_ib: true,
        lid: 1,
        lmc: 0,
        sm_lid: 1,
        sm_sl: 0,
        gids: vec![gid_of_lid(1)],
        pkeys: vec![0xffff],
        rate: rate_from_width_speed(2, 1),
        mtu: Mtu::MTU_2048,
        subnet_timeout: 18,
    }
}

pub fn device() -> DeviceDesc {
    DeviceDesc {
        id: DeviceId(0),
        name: "fakeib0".into(),
        guid: BASE_GUID,
        ports: vec![port_attrs()],
    }
}

/// The fabric's SA: joins get MLID 0xc001; PathRecords keep the queried GIDs and LIDs,
/// derive missing ones from the GUID rule, and fill the rest as the capture shows.
pub fn sa() -> SaScript {
    Box::new(|mad: &[u8; 256]| {
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        let mut resp = mad.to_vec();
        resp[3] |= 0x80; // GetResp (also for the join's Set)
        resp[4] = 0;
        resp[5] = 0;
        match attr {
            0x0038 => {
                resp[56 + 36..56 + 38].copy_from_slice(&0xc001u16.to_be_bytes());
                Some(resp)
            }
            0x0035 => {
                let d = &mut resp[56..120];
                let mut dgid = Gid::read(&d[8..24]).expect("16 bytes");
                let mut sgid = Gid::read(&d[24..40]).expect("16 bytes");
                let mut dlid = u16::from_be_bytes([d[40], d[41]]);
                let mut slid = u16::from_be_bytes([d[42], d[43]]);
                if dgid.is_zero() {
                    dgid = gid_of_lid(dlid);
                }
                if dlid == 0 {
                    dlid = (dgid.interface_id() - BASE_GUID) as u16;
                }
                if slid == 0 {
                    slid = if sgid.is_zero() {
                        1
                    } else {
                        (sgid.interface_id() - BASE_GUID) as u16
                    };
                }
                if sgid.is_zero() {
                    sgid = gid_of_lid(slid);
                }
                d[..8].fill(0);
                d[8..24].copy_from_slice(&dgid.0);
                d[24..40].copy_from_slice(&sgid.0);
                d[40..42].copy_from_slice(&dlid.to_be_bytes());
                d[42..44].copy_from_slice(&slid.to_be_bytes());
                d[44..48].fill(0); // flow label, hop limit
                d[48] = 0; // tclass
                d[49] = 0x81; // reversible, numpath 1
                d[50..52].copy_from_slice(&0xffffu16.to_be_bytes());
                d[52..54].fill(0); // qos, sl
                d[54] = 0x84;
                d[55] = 0x83;
                d[56] = 0x92;
                d[57] = 0;
                d[58..64].fill(0);
                Some(resp)
            }
            _ => None,
        }
    })
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
