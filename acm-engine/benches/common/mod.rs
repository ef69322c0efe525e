//! A minimal driver for the benches and `examples/dest_memory.rs`: an engine on the
//! reference fabric (testdata/reference-fabric, as `tests/support/reference.rs` sets it
//! up), whose driver answers everything at once and without allocating: `OpenQp` with
//! `QpOpened`, `SaSend` with the fabric SA's answer, `UdSend` with `UdSendDone`. Client
//! replies are counted and their status kept; log lines are dropped.
#![allow(dead_code)]

use acm_engine::config::{AddrFile, Options, parse_hosts};
use acm_engine::device::rate_from_width_speed;
use acm_engine::io::SendToken;
use acm_engine::{
    ConnId, DeviceDesc, DeviceId, EndpointId, Engine, EngineConfig, Input, Instant, Output,
    PortAttrs, PortId, PortState,
};
use acm_proto::{Gid, Mtu};
use std::collections::VecDeque;

const OPTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_opts.cfg");
const ADDRS: &str = include_str!("../../../testdata/reference-fabric/ibacm_addr.cfg");
const HOSTS: &str = include_str!("../../../testdata/reference-fabric/ibacm_hosts.data");

/// The node GUID; port GUIDs (and so GIDs) are `BASE_GUID + LID` on this fabric.
pub(crate) const BASE_GUID: u64 = 0x0002_c903_00a0_b000;
/// The highest unicast LID.
pub(crate) const MAX_UCAST_LID: u16 = 0xBFFF;

pub(crate) fn gid_of_lid(lid: u16) -> Gid {
    Gid::from_parts(0xfe80_0000_0000_0000, BASE_GUID + u64::from(lid))
}

/// The options, address file and hosts the captures were taken with (`log_level 2`:
/// every request logs). `log_level` overrides the option when given.
pub(crate) fn config(log_level: Option<i32>) -> EngineConfig {
    let (mut options, _) = Options::parse("ibacm_opts.cfg", OPTS);
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

/// `fakeib0`: one active port, LID 1, SM LID 1, pkey 0xffff, 10 Gb/s, MTU 2048.
pub(crate) fn device() -> DeviceDesc {
    DeviceDesc {
        id: DeviceId(0),
        name: "fakeib0".into(),
        guid: BASE_GUID,
        ports: vec![PortAttrs {
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
        }],
    }
}

/// The fabric's SA: joins get MLID 0xc001; PathRecords keep the queried GIDs and LIDs and
/// derive the missing ones (GID = prefix + `BASE_GUID + LID`; a GID outside that rule gets
/// a LID in 2..=0xBFFF from its interface id). `None` for anything else.
pub(crate) fn sa_answer(mad: &[u8; 256]) -> Option<[u8; 256]> {
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
                slid = 1;
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

/// A RESOLVE from `src` to `dst` (IPv4), as ib_acme builds it: 160 bytes.
pub(crate) fn resolve_ip(src: [u8; 4], dst: [u8; 4]) -> [u8; 160] {
    let mut m = [0u8; 160];
    m[0] = 1; // version
    m[1] = 1; // RESOLVE
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16] = 1; // SOURCE
    m[20] = 2; // IP
    m[24..28].copy_from_slice(&src);
    m[88] = 2; // DEST
    m[92] = 2; // IP
    m[96..100].copy_from_slice(&dst);
    m
}

/// A path RESOLVE (`ib_acme -f l`): one PATH entry, SLID 1, reversible, 88 bytes.
fn resolve_path(dlid: u16, dgid: Gid) -> [u8; 88] {
    let mut m = [0u8; 88];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&88u16.to_ne_bytes());
    m[20..22].copy_from_slice(&0x10u16.to_ne_bytes()); // PATH
    let p = &mut m[24..88];
    p[8..24].copy_from_slice(&dgid.0);
    p[40..42].copy_from_slice(&dlid.to_be_bytes());
    p[42..44].copy_from_slice(&1u16.to_be_bytes());
    p[49] = 0x81;
    m
}

/// A path resolve by destination LID (the cache key is the LID).
pub(crate) fn resolve_lid(dlid: u16) -> [u8; 88] {
    resolve_path(dlid, Gid::from_parts(0, 0))
}

/// A path resolve by destination GID, LID 0 (the cache key is the GID).
pub(crate) fn resolve_gid(dgid: Gid) -> [u8; 88] {
    resolve_path(0, dgid)
}

/// What the driver owes the engine. The SA answer stays inline so that the driver
/// allocates nothing per resolution.
#[allow(clippy::large_enum_variant)]
enum FollowUp {
    QpOpened(EndpointId, u32),
    Sa(PortId, [u8; 256]),
    SendDone(EndpointId, SendToken),
}

pub(crate) struct Driver {
    pub(crate) engine: Engine,
    pub(crate) now: Instant,
    follow: VecDeque<FollowUp>,
    next_qpn: u32,
    /// Client replies seen.
    pub(crate) replies: u64,
    /// Client replies whose status was not 0.
    pub(crate) failures: u64,
    /// The status byte and length of the latest reply.
    pub(crate) last: (u8, usize),
    /// SA MADs the engine sent.
    pub(crate) sa_sent: u64,
    /// SA MADs the fabric SA did not answer (none expected).
    pub(crate) sa_unanswered: u64,
}

impl Driver {
    /// An engine on the reference fabric, started: device up, QP made, group joined.
    pub(crate) fn new(config: EngineConfig) -> Self {
        let mut d = Self {
            engine: Engine::new(config, 0, Instant::ZERO),
            now: Instant::ZERO,
            follow: VecDeque::with_capacity(16),
            next_qpn: 0x48,
            replies: 0,
            failures: 0,
            last: (0, 0),
            sa_sent: 0,
            sa_unanswered: 0,
        };
        d.input(Input::DeviceAdded(device()));
        d.settle();
        d
    }

    /// Feeds one input and carries out every output; follow-ups wait for [`Self::settle`].
    #[inline]
    pub(crate) fn input(&mut self, input: Input<'_>) {
        self.engine.handle(self.now, input);
        self.drain();
    }

    /// Feeds one client message (outputs drained, follow-ups held).
    #[inline]
    pub(crate) fn send(&mut self, conn: ConnId, bytes: &[u8]) {
        self.input(Input::ClientRequest { conn, bytes });
    }

    /// Feeds one client message and everything it leads to.
    #[inline]
    pub(crate) fn request(&mut self, conn: ConnId, bytes: &[u8]) {
        self.send(conn, bytes);
        self.settle();
    }

    fn drain(&mut self) {
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::ClientReply { reply, .. } => {
                    let b = reply.as_bytes();
                    self.replies += 1;
                    self.last = (b[2], b.len());
                    if b[2] != 0 {
                        self.failures += 1;
                    }
                }
                Output::OpenQp { ep, .. } => {
                    let qpn = self.next_qpn;
                    self.next_qpn += 1;
                    self.follow.push_back(FollowUp::QpOpened(ep, qpn));
                }
                Output::SaSend { port, mad, .. } => {
                    self.sa_sent += 1;
                    match sa_answer(&mad.0) {
                        Some(resp) => self.follow.push_back(FollowUp::Sa(port, resp)),
                        None => self.sa_unanswered += 1,
                    }
                }
                Output::UdSend { ep, token, .. } => {
                    self.follow.push_back(FollowUp::SendDone(ep, token));
                }
                _ => {}
            }
        }
    }

    /// Delivers every follow-up (and theirs) until none is left.
    pub(crate) fn settle(&mut self) {
        while let Some(f) = self.follow.pop_front() {
            match f {
                FollowUp::QpOpened(ep, qpn) => self.input(Input::QpOpened {
                    ep,
                    result: Ok(qpn),
                }),
                FollowUp::Sa(port, mad) => self.input(Input::SaResponse { port, mad: &mad }),
                FollowUp::SendDone(ep, token) => self.input(Input::UdSendDone {
                    ep,
                    token,
                    ok: true,
                }),
            }
        }
    }
}
