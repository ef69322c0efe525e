//! The environment the shared real-ibacm captures were taken in
//! (testdata/captures/README.md, "reference-fabric"): one HCA `fakeib0` with one active
//! port, LID 1, SM LID 1, GID fe80::2:c903:a0:b001, pkey 0xffff, 10 Gb/s, MTU 2048,
//! SubnetTimeout 18; the options, address and hosts files the reference ran with; and
//! an SA that answers as that fabric's did. Shared by the tests (`support::reference`)
//! and the benches (`benches/common`), which include this file by path.
#![allow(dead_code, unreachable_pub)]

use acm_engine::config::{AddrFile, Options, parse_hosts};
use acm_engine::rate_from_width_speed;
use acm_engine::{DeviceDesc, DeviceId, EngineConfig, PortAttrs, PortState};
use acm_proto::mad::MAD_LEN;
use acm_proto::{Gid, Mtu};

pub const OPTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_opts.cfg");
pub const ADDRS: &str = include_str!("../../../testdata/reference-fabric/ibacm_addr.cfg");
pub const HOSTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_hosts.data");

/// The node GUID; port GUIDs (and so GIDs) are `BASE_GUID + LID` on this fabric.
pub const BASE_GUID: u64 = 0x0002_c903_00a0_b000;
/// The highest unicast LID.
pub const MAX_UCAST_LID: u16 = 0xBFFF;

pub fn gid_of_lid(lid: u16) -> Gid {
    Gid::from_parts(0xfe80_0000_0000_0000, BASE_GUID + u64::from(lid))
}

/// The options, address file and hosts the captures were taken with (`log_level 2`:
/// every request logs). `log_level` overrides the option when given.
pub fn config(log_level: Option<i32>) -> EngineConfig {
    let (mut options, _) = Options::parse("ibacm_opts.cfg", OPTS);
    // The reference never subscribes to SA events, and the captures' SA never saw a
    // subscription (docs/protocol/sa.md §9).
    options.sm_events = false;
    if let Some(level) = log_level {
        options.log_level = level;
    }
    let (addr_file, _) = AddrFile::parse("ibacm_addr.cfg", ADDRS);
    let (hosts, _) = parse_hosts("ibacm_hosts.data", HOSTS);
    EngineConfig {
        options,
        addr_file: Some(addr_file),
        hosts,
        ..EngineConfig::default()
    }
}

/// The port: active, LID 1, SM LID 1, pkey 0xffff, 4x SDR (10 Gb/s), MTU 2048,
/// SubnetTimeout 18.
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

/// `fakeib0`: node GUID `BASE_GUID`, one port.
pub fn device() -> DeviceDesc {
    DeviceDesc {
        id: DeviceId(0),
        name: "fakeib0".into(),
        guid: BASE_GUID,
        ports: vec![port_attrs()],
    }
}

/// The fabric's SA: joins get MLID 0xc001; PathRecords keep the queried GIDs and LIDs and
/// derive the missing ones (GID = prefix + `BASE_GUID + LID`; a GID outside that rule gets
/// a LID in 2..=0xBFFF from its interface id). `None` for anything else.
#[inline]
pub fn sa_answer(mad: &[u8; MAD_LEN]) -> Option<[u8; MAD_LEN]> {
    let attr = u16::from_be_bytes([mad[16], mad[17]]);
    let mut resp = *mad;
    resp[3] |= 0x80; // GetResp (also for the join's Set)
    resp[4] = 0;
    resp[5] = 0;
    match attr {
        0x0038 => {
            resp[56 + 36..56 + 38].copy_from_slice(&0xc001u16.to_be_bytes());
        }
        0x0035 => {
            let d = &mut resp[56..120];
            let mut dgid = Gid::read(&d[8..24])?;
            let sgid = Gid::read(&d[24..40])?;
            let mut dlid = u16::from_be_bytes([d[40], d[41]]);
            let mut slid = u16::from_be_bytes([d[42], d[43]]);
            if dgid.is_zero() {
                dgid = gid_of_lid(dlid);
            }
            if dlid == 0 {
                let id = dgid.interface_id().wrapping_sub(BASE_GUID);
                dlid = if (2..=u64::from(MAX_UCAST_LID)).contains(&id) {
                    id as u16
                } else {
                    2 + (id % u64::from(MAX_UCAST_LID - 1)) as u16
                };
            }
            if slid == 0 {
                let id = sgid.interface_id().wrapping_sub(BASE_GUID);
                slid = if sgid.is_zero() || !(1..=u64::from(MAX_UCAST_LID)).contains(&id) {
                    1
                } else {
                    id as u16
                };
            }
            let sgid = if sgid.is_zero() {
                gid_of_lid(slid)
            } else {
                sgid
            };
            d[..8].fill(0);
            d[8..24].copy_from_slice(&dgid.0);
            d[24..40].copy_from_slice(&sgid.0);
            d[40..42].copy_from_slice(&dlid.to_be_bytes());
            d[42..44].copy_from_slice(&slid.to_be_bytes());
            d[44..49].fill(0); // flow label, hop limit, tclass
            d[49] = 0x81; // reversible, numpath 1
            d[50..52].copy_from_slice(&0xffffu16.to_be_bytes());
            d[52..54].fill(0); // qos, sl
            d[54] = 0x84; // MTU 2048
            d[55] = 0x83; // 10 Gb/s
            d[56] = 0x92; // packet lifetime
            d[57..64].fill(0);
        }
        _ => return None,
    }
    Some(resp)
}
