//! The body of the engine fuzz target (`fuzz/fuzz_targets/engine.rs`), shared with the
//! stable smoke test (`tests/fuzz_smoke.rs`) so that CI runs it without a nightly
//! toolchain: both include this file by path, beside `reference_fabric.rs`.
//!
//! [`run`] reads its bytes as a configuration choice and then a sequence of timed
//! operations — client bytes on four connections (shaped requests that reach deep
//! paths, or garbage), closes, peers' ACM MADs (answers to the TIDs the engine sent,
//! and requests), SA answers and failures for the MADs it sent, send completions,
//! routing answers, neighbour-table answers (with `addr_prot` chosen among `acm`,
//! `neigh` and their two lists), port and address events, device loss, netlink bytes, ticks — fed to
//! one engine configured as the reference fabric. It panics when:
//!
//! * a request (each shaped one carries a unique TID) is answered twice, or a
//!   connection gets more replies and closes than it sent requests;
//! * after a drain, `poll_timeout` is before the engine's clock;
//! * a MAD the engine emits does not parse with acm-proto (ACM MADs as `AcmMadRepr`,
//!   SA MADs as `SaHeaderRepr` and their PathRecord or MCMemberRecord);
//! * a message the engine sends the kernel is one the kernel would not act on, as the
//!   kernel model judges it (`kernel_model.rs`) against the requests fed in.
#![allow(dead_code, unreachable_pub)]

use super::kernel_model::KernelModel;
use super::reference_fabric::{self, sa_answer};
use acm_engine::config::Options;
use acm_engine::{
    ClientOutput, ConnId, DeviceId, EndpointId, Engine, EngineConfig, FabricOp, HostOutput, Input,
    Instant, LocalIp, LookupId, NeighId, NeighResult, Output, PortEvent, PortId, RecvInfo,
    SendToken,
};
use acm_proto::acm_mad::AcmMadRepr;
use acm_proto::client::AddrType;
use acm_proto::mad::MAD_LEN;
use acm_proto::mcmember::McMemberRecordRepr;
use acm_proto::mgid::AcmMgid;
use acm_proto::path_record::PathRecordRepr;
use acm_proto::sa::{SA_HEADER_LEN, SaHeaderRepr};
use acm_proto::{Bytes64, Gid, Mtu, Rate};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const PORT: PortId = PortId {
    device: DeviceId(0),
    port: 1,
};

/// Reads the fuzzer's bytes; every read past the end is 0.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What the harness knows of the engine's outstanding work, to answer it.
#[derive(Default)]
struct World {
    /// ACM request TIDs the engine sent, newest last.
    acm_tids: Vec<u64>,
    /// SA MADs the engine sent and nobody answered yet.
    sa: Vec<[u8; MAD_LEN]>,
    /// UD sends not completed.
    sends: Vec<(EndpointId, SendToken)>,
    /// Routing lookups not answered.
    lookups: Vec<LookupId>,
    /// Neighbour-table questions not answered.
    neighs: Vec<NeighId>,
    /// Endpoints whose QP was asked for.
    eps: BTreeSet<EndpointId>,
    /// QPs to report as made.
    qps: Vec<EndpointId>,
    /// Per connection: requests sent and answers (replies and closes) received in its
    /// current life.
    conns: BTreeMap<u64, (usize, usize)>,
    /// TIDs of shaped requests answered.
    answered: BTreeSet<u64>,
    next_tid: u64,
    /// The kernel: its requests and what it makes of the engine's answers.
    kernel: KernelModel,
}

/// A RESOLVE: header (length in host order) then the entries `(flags, type, info)`.
fn resolve(tid: u64, entries: &[(u32, u16, &[u8])]) -> Vec<u8> {
    let len = 16 + 72 * entries.len();
    let mut m = vec![0u8; len];
    m[0] = 1;
    m[1] = 0x01;
    m[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
    m[8..16].copy_from_slice(&tid.to_ne_bytes());
    for (i, (flags, ty, info)) in entries.iter().enumerate() {
        let e = &mut m[16 + 72 * i..16 + 72 * (i + 1)];
        e[0..4].copy_from_slice(&flags.to_ne_bytes());
        e[4..6].copy_from_slice(&ty.to_ne_bytes());
        let n = info.len().min(64);
        e[8..8 + n].copy_from_slice(&info[..n]);
    }
    m
}

/// A destination the fuzzer picks: the fabric's peers, our own addresses, unreachable
/// ones.
fn ipv4(b: u8) -> [u8; 4] {
    match b % 4 {
        0 => [10, 0, 0, b % 8],
        1 => [198, 18, 0, b],
        2 => [10, 0, 0, 1],
        _ => [192, 168, 122, b % 3],
    }
}

/// A client message built from the fuzzer's choice.
fn client_message(w: &mut World, b: &mut Bytes<'_>) -> Vec<u8> {
    w.next_tid += 1;
    let tid = w.next_tid | 1 << 48;
    let kind = b.u8();
    let arg = b.u8();
    const SOURCE: u32 = 1;
    const DEST: u32 = 2;
    const NODELAY: u32 = 0x4000_0000;
    const QUERY_SA: u32 = 0x8000_0000;
    match kind % 10 {
        0 | 1 => resolve(
            tid,
            &[
                (SOURCE, 2, &[10, 0, 0, 1]),
                (
                    DEST | if kind & 0x80 != 0 { NODELAY } else { 0 },
                    2,
                    &ipv4(arg),
                ),
            ],
        ),
        2 => resolve(tid, &[(DEST, 2, &ipv4(arg))]),
        3 => resolve(
            tid,
            &[(SOURCE, 1, b"fakehost"), (DEST, 1, &[b'h', b'0' + arg % 4])],
        ),
        4 => {
            let mut p = [0u8; 64];
            p[40..42].copy_from_slice(&u16::from(arg % 6).to_be_bytes());
            p[49] = 0x81;
            resolve(tid, &[(0, 0x10, &p)])
        }
        5 => {
            let mut p = [0u8; 64];
            p[8..24].copy_from_slice(&reference_fabric::gid_of_lid(u16::from(arg % 4)).0);
            p[24..40].copy_from_slice(&reference_fabric::gid_of_lid(1).0);
            p[49] = 0x81;
            resolve(tid, &[(QUERY_SA, 0x10, &p)])
        }
        6 => {
            let mut m = vec![1, 0x02, 0, 0, arg % 3, 0, 0, 16];
            m.extend_from_slice(&tid.to_ne_bytes());
            m
        }
        7 => {
            let mut m = vec![1, 0x03, arg, arg % 3, 1, 0, 0, 16];
            m.extend_from_slice(&tid.to_ne_bytes());
            m
        }
        8 => {
            let n = usize::from(arg) * 3;
            let mut m = b.take(n).to_vec();
            if m.len() >= 16 {
                m[0] = 1;
                let len = m.len() as u16;
                m[6..8].copy_from_slice(&len.to_ne_bytes());
            }
            m
        }
        _ => b.take(usize::from(arg)).to_vec(),
    }
}

/// A 40-byte GRH from `sgid`.
fn grh(sgid: Gid) -> [u8; 40] {
    let mut g = [0u8; 40];
    g[0] = 0x60;
    g[8..24].copy_from_slice(&sgid.0);
    g
}

fn group0() -> Gid {
    AcmMgid::new(0xffff, Rate::RATE_10, Mtu::MTU_2048).to_gid()
}

/// Checks a MAD the engine emitted.
fn check_mad(op: &FabricOp) {
    match op {
        FabricOp::UdSend(s) => {
            let m = AcmMadRepr::parse(&s.mad.0).expect("an emitted ACM MAD parses");
            let _ = m.to_bytes();
        }
        FabricOp::SaSend(s) => {
            let h = SaHeaderRepr::parse(&s.mad.0).expect("an emitted SA header parses");
            let data = &s.mad.0[SA_HEADER_LEN..];
            match u16::from_be_bytes([s.mad.0[16], s.mad.0[17]]) {
                0x0035 => {
                    PathRecordRepr::parse(data).expect("an emitted PathRecord parses");
                }
                0x0038 => {
                    McMemberRecordRepr::parse(data).expect("an emitted MCMemberRecord parses");
                }
                0x0003 => {
                    acm_proto::notice::InformInfoRepr::parse(data)
                        .expect("an emitted InformInfo parses");
                }
                0x0002 => {
                    acm_proto::notice::NoticeRepr::parse(data)
                        .expect("an emitted ReportResp's Notice parses");
                }
                attr => panic!("SA MAD with attribute {attr:#06x}: {h:?}"),
            }
        }
        _ => {}
    }
}

/// Feeds one input, drains, and checks what came out.
fn step(e: &mut Engine, w: &mut World, now: Instant, input: Input<'_>) {
    if let Input::Netlink(bytes) = &input {
        w.kernel.request(now, bytes);
    }
    e.handle(now, input);
    let mut timeout_sent = None;
    while let Some(out) = e.poll_output() {
        match out {
            Output::Fabric(op) => {
                check_mad(&op);
                match op {
                    FabricOp::OpenQp(q) => {
                        w.eps.insert(q.ep);
                        w.qps.push(q.ep);
                    }
                    FabricOp::UdSend(s) => {
                        if s.mad.0[3] & 0x80 == 0 {
                            let tid = u64::from_be_bytes(s.mad.0[8..16].try_into().expect("8"));
                            w.acm_tids.push(tid);
                            if w.acm_tids.len() > 64 {
                                w.acm_tids.remove(0);
                            }
                        }
                        w.sends.push((s.ep, s.token));
                    }
                    FabricOp::SaSend(s) => w.sa.push(s.mad.0),
                    FabricOp::SourceQuery(q) => w.lookups.push(q.id),
                    FabricOp::NeighQuery(q) => w.neighs.push(q.id),
                    _ => {}
                }
            }
            Output::Host(HostOutput::Client(ClientOutput::Reply { conn, reply })) => {
                let b = reply.as_bytes();
                let c = w.conns.entry(conn.0).or_default();
                c.1 += 1;
                assert!(c.1 <= c.0, "connection {} answered more than asked", conn.0);
                if b.len() >= 16 {
                    let tid = u64::from_ne_bytes(b[8..16].try_into().expect("8"));
                    if tid >> 48 == 1 {
                        assert!(w.answered.insert(tid), "request {tid:#x} answered twice");
                    }
                }
            }
            Output::Host(HostOutput::Client(ClientOutput::Close { conn, .. })) => {
                let c = w.conns.entry(conn.0).or_default();
                c.1 += 1;
                assert!(c.1 <= c.0, "connection {} closed more than asked", conn.0);
            }
            Output::Host(HostOutput::Client(ClientOutput::Netlink(b))) => {
                let verdict = w.kernel.judge(now, &b);
                assert!(
                    verdict.is_expected_of_the_engine(),
                    "the kernel would not act on {b:02x?}: {verdict}"
                );
            }
            Output::Host(HostOutput::Client(ClientOutput::KernelTimeout { message, wait_ms })) => {
                let verdict = w.kernel.judge(now, &message);
                assert!(
                    verdict.is_acted_on(),
                    "SET_TIMEOUT {message:02x?}: {verdict}"
                );
                timeout_sent = Some(wait_ms);
            }
            Output::Host(_) => {}
        }
    }
    if let Some(wait_ms) = timeout_sent {
        step(e, w, now, Input::KernelTimeoutSent { wait_ms });
    }
    if let Some(t) = e.poll_timeout() {
        assert!(t >= e.now(), "poll_timeout {t} before now {}", e.now());
    }
}

/// Opens every QP the engine asked for, as a backend does.
fn open_qps(e: &mut Engine, w: &mut World, now: Instant) {
    while let Some(ep) = w.qps.pop() {
        step(
            e,
            w,
            now,
            Input::QpOpened {
                ep,
                result: Ok(0x48),
            },
        );
    }
}

fn pick<T: Copy>(v: &mut Vec<T>, b: u8) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    let i = usize::from(b) % v.len();
    Some(v.swap_remove(i))
}

/// Runs one fuzz case.
pub fn run(data: &[u8]) {
    let mut b = Bytes { data };
    let cfg = b.u8();
    // The top two bits pick `addr_prot` too (shared with `log_level`'s). The cache's
    // bound is its smallest (251 entries), so that the peers' requests can fill it and
    // evict.
    let extra = format!(
        "resolve_depth {}\nmax_pending_per_client {}\nmax_background_resolves {}\nlog_level {}\n\
         addr_prot {}\nmax_dest_cache_bytes 65536\n",
        [1, 2, 8, 3][usize::from(cfg & 3)],
        [2, 64][usize::from(cfg >> 2 & 1)],
        [0, 1, 64, 4][usize::from(cfg >> 3 & 3)],
        (cfg >> 5) % 3,
        ["acm", "acm,neigh", "neigh", "neigh,acm"][usize::from(cfg >> 6)],
    );
    let text = format!("{}\n{extra}", reference_fabric::OPTS);
    let (options, _) = Options::parse("ibacm_opts.cfg", &text);
    let config = EngineConfig {
        options,
        ..reference_fabric::config(None)
    };
    let mut e = Engine::new(config, u64::from(cfg), Instant::ZERO);
    let mut w = World::default();
    let mut now = Instant::ZERO;
    step(
        &mut e,
        &mut w,
        now,
        Input::DeviceAdded(reference_fabric::device()),
    );
    // Start-up as a backend runs it: the QP made, the join answered.
    for _ in 0..4 {
        open_qps(&mut e, &mut w, now);
        let sa = std::mem::take(&mut w.sa);
        for mad in sa {
            if let Some(resp) = sa_answer(&mad) {
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::SaResponse {
                        port: PORT,
                        mad: &resp,
                    },
                );
            }
        }
    }
    let mut ops = 0;
    while !b.is_empty() && ops < 256 {
        ops += 1;
        let op = b.u8();
        match op % 16 {
            0 => {
                now = now + Duration::from_millis(u64::from(b.u16()));
                step(&mut e, &mut w, now, Input::Tick);
            }
            1..=3 => {
                let conn = u64::from(b.u8() % 4);
                let bytes = client_message(&mut w, &mut b);
                w.conns.entry(conn).or_default().0 += 1;
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::ClientRequest {
                        conn: ConnId(conn),
                        bytes: &bytes,
                    },
                );
            }
            4 => {
                let conn = u64::from(b.u8() % 4);
                w.conns.remove(&conn);
                step(&mut e, &mut w, now, Input::ClientClosed(ConnId(conn)));
            }
            5 => {
                // A peer answers one of our requests (or a stale TID).
                let arg = b.u8();
                let tid = w
                    .acm_tids
                    .get(usize::from(arg) % w.acm_tids.len().max(1))
                    .copied();
                let tid = tid.unwrap_or(u64::from(arg));
                let mut resp = AcmMadRepr::resolve_response(tid, group0()).to_bytes();
                if arg & 0x80 != 0 {
                    resp[4] = 0;
                    resp[5] = arg & 7;
                }
                let lid = u16::from(arg % 6) + 2;
                let wc = RecvInfo {
                    slid: lid,
                    src_qp: 0x50,
                    ..RecvInfo::default()
                };
                let g = grh(reference_fabric::gid_of_lid(lid));
                let ep = *w.eps.iter().next().unwrap_or(&EndpointId(0));
                let grh = (arg & 0x40 == 0).then_some(&g[..]);
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::UdReceive {
                        ep,
                        wc,
                        grh,
                        mad: &resp,
                    },
                );
            }
            6 => {
                // A peer asks for one of its own or our addresses, from its own
                // address or one of 42 others it makes up (each one a cache entry: a
                // long case fills the cache and evicts).
                let arg = b.u8();
                let lid = u16::from(arg % 6) + 2;
                let src = Bytes64::read(&[10, 0, arg / 6, lid as u8]).unwrap_or_default();
                let dest = Bytes64::read(&ipv4(b.u8())).unwrap_or_default();
                let req = AcmMadRepr::resolve_request(
                    u64::from(b.u16()),
                    AddrType::IP,
                    dest,
                    AddrType::IP,
                    src,
                    &[group0()],
                )
                .to_bytes();
                let wc = RecvInfo {
                    slid: lid,
                    src_qp: 0x50 + u32::from(arg & 1),
                    ..RecvInfo::default()
                };
                let g = grh(reference_fabric::gid_of_lid(lid));
                let ep = *w.eps.iter().next().unwrap_or(&EndpointId(0));
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::UdReceive {
                        ep,
                        wc,
                        grh: Some(&g),
                        mad: &req,
                    },
                );
            }
            7 => {
                let arg = b.u8();
                if let Some(mad) = pick(&mut w.sa, arg) {
                    match (arg % 4, sa_answer(&mad)) {
                        (0, _) | (_, None) => {
                            let tid = u64::from_be_bytes(mad[8..16].try_into().expect("8"));
                            step(
                                &mut e,
                                &mut w,
                                now,
                                Input::SaSendFailed {
                                    port: PORT,
                                    tid,
                                    status: acm_proto::mad::UmadStatus::TIMED_OUT,
                                },
                            );
                        }
                        (1, Some(mut resp)) => {
                            resp[4] = arg;
                            step(
                                &mut e,
                                &mut w,
                                now,
                                Input::SaResponse {
                                    port: PORT,
                                    mad: &resp,
                                },
                            );
                        }
                        (_, Some(resp)) => {
                            step(
                                &mut e,
                                &mut w,
                                now,
                                Input::SaResponse {
                                    port: PORT,
                                    mad: &resp,
                                },
                            );
                        }
                    }
                }
            }
            8 => {
                let arg = b.u8();
                if let Some((ep, token)) = pick(&mut w.sends, arg) {
                    step(
                        &mut e,
                        &mut w,
                        now,
                        Input::UdSendDone {
                            ep,
                            token,
                            ok: arg & 0x80 == 0,
                        },
                    );
                }
            }
            9 if b.data.first().is_some_and(|a| a & 0x40 != 0) => {
                // The neighbour table answers one of the engine's questions.
                let arg = b.u8();
                if let Some(id) = pick(&mut w.neighs, arg) {
                    let result = match arg % 3 {
                        0 => NeighResult::Found {
                            qpn: 0x48,
                            gid: reference_fabric::gid_of_lid(u16::from(arg % 6) + 2),
                        },
                        1 => NeighResult::Incomplete,
                        _ => NeighResult::Unreachable,
                    };
                    step(&mut e, &mut w, now, Input::NeighAnswer { id, result });
                }
            }
            9 => {
                let arg = b.u8();
                if let Some(id) = pick(&mut w.lookups, arg) {
                    let result = match arg % 3 {
                        0 => Err(101),
                        1 => Ok(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
                        _ => Ok(IpAddr::V4(Ipv4Addr::new(192, 168, 122, 10))),
                    };
                    step(&mut e, &mut w, now, Input::SourceAnswer { id, result });
                }
            }
            10 => {
                let arg = b.u8();
                let mut attrs = reference_fabric::port_attrs();
                let event = match arg % 7 {
                    0 => PortEvent::Down,
                    1 => PortEvent::Active(attrs),
                    2 => {
                        attrs.lid = u16::from(arg);
                        PortEvent::LidChange(attrs)
                    }
                    3 => {
                        attrs.sm_lid = u16::from(arg) + 1;
                        PortEvent::SmChange(attrs)
                    }
                    4 => {
                        attrs.pkeys.push(0x8001);
                        PortEvent::PkeyChange(attrs)
                    }
                    5 => PortEvent::GidChange(attrs),
                    _ => PortEvent::ClientReregister,
                };
                step(&mut e, &mut w, now, Input::Port { port: PORT, event });
            }
            11 => {
                let arg = b.u8();
                let addr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, arg % 8));
                if arg & 0x80 == 0 {
                    let ip = LocalIp {
                        addr,
                        prefix_len: Some(24),
                        gid: reference_fabric::gid_of_lid(1),
                        pkey: 0xffff,
                    };
                    step(&mut e, &mut w, now, Input::LocalIpAdded(ip));
                } else {
                    step(&mut e, &mut w, now, Input::LocalIpRemoved(addr));
                }
            }
            12 => {
                if let Some(ep) = w.qps.pop() {
                    let result = if b.u8() & 1 == 0 { Ok(0x48) } else { Err(()) };
                    step(&mut e, &mut w, now, Input::QpOpened { ep, result });
                }
            }
            13 => {
                let n = usize::from(b.u8());
                let bytes = b.take(n).to_vec();
                step(&mut e, &mut w, now, Input::Netlink(&bytes));
            }
            14 => {
                if b.u8() & 1 == 0 {
                    step(&mut e, &mut w, now, Input::DeviceRemoved(DeviceId(0)));
                } else {
                    step(
                        &mut e,
                        &mut w,
                        now,
                        Input::DeviceAdded(reference_fabric::device()),
                    );
                }
            }
            _ => {
                // Arbitrary bytes as a MAD, from the fabric or the SA.
                let n = usize::from(b.u8());
                let mad = b.take(n).to_vec();
                let ep = *w.eps.iter().next().unwrap_or(&EndpointId(0));
                let g = grh(reference_fabric::gid_of_lid(2));
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::UdReceive {
                        ep,
                        wc: RecvInfo::default(),
                        grh: Some(&g),
                        mad: &mad,
                    },
                );
                step(
                    &mut e,
                    &mut w,
                    now,
                    Input::SaResponse {
                        port: PORT,
                        mad: &mad,
                    },
                );
            }
        }
    }
    // Let every timer run out: the checks hold to the end.
    for _ in 0..10_000 {
        let Some(t) = e.poll_timeout() else { break };
        now = now.max(t);
        step(&mut e, &mut w, now, Input::Tick);
        open_qps(&mut e, &mut w, now);
        while let Some((ep, token)) = w.sends.pop() {
            step(
                &mut e,
                &mut w,
                now,
                Input::UdSendDone {
                    ep,
                    token,
                    ok: true,
                },
            );
        }
    }
}

/// Runs the config parsers on one input (the `config` fuzz target's body): the
/// options, address and hosts files, and the address file's device check. Nothing
/// may panic, and every diagnostic names its file and a line of the input.
pub fn run_config(data: &[u8]) {
    let lines = data.split(|&c| c == b'\n').count().max(1);
    let (_, d) = Options::parse("o", data);
    let (f, d2) = acm_engine::config::AddrFile::parse("a", data);
    let (_, d3) = acm_engine::config::parse_hosts("h", data);
    for diag in d.iter().chain(&d2).chain(&d3) {
        assert!(diag.line >= 1 && diag.line <= lines, "{diag}");
    }
    let _ = f.check_device("fakeib0", &[&[0xffff], &[]]);
    let _ = f.unknown_devices(&["fakeib0"]);
}
