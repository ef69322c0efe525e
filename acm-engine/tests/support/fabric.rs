//! Fabric-level helpers: client messages, peer ACM MADs with their GRH, transcript
//! notes for what a test feeds in, a second reference-like node, and a two-node pump
//! that carries each node's UD sends to the other as the fabric would.

use super::{Node, hex, reference};
use acm_engine::config::{AddrFile, AddrPreload, RouteProt};
use acm_engine::{ConnId, DeviceDesc, DeviceId, EndpointId, EngineConfig, Input, Instant};
use acm_engine::{FabricEvent, LocalIp, MadBytes, PortEvent, RecvInfo};
use acm_engine::{PortAttrs, PortId};
use acm_proto::Gid;
use acm_proto::acm_mad::{AcmMadRepr, MULTICAST_QPN};
use acm_proto::client::AddrType;
use acm_proto::grh::GrhRepr;
use acm_proto::mad::{MAD_LEN, MadHeaderPacket};
use acm_proto::path_record::PathRecordRepr;
use acm_proto::sa::SaPacket;
use acm_proto::{Bytes64, Mtu, Rate};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::Duration;

/// The reference endpoint's group 0: pkey 0xFFFF, 10 Gb/s (enum 3), MTU 2048 (enum 4).
pub fn mgid() -> Gid {
    "ff15:4001:ffff:3:400::".parse().expect("MGID text")
}

/// The group's MLID as the reference SA assigns it.
pub const MLID: u16 = 0xc001;

/// The peer the single-node tests talk to: LID 3, its GID by the fabric's rule.
pub const PEER_LID: u16 = 3;
pub const PEER_QPN: u32 = 0x99;

pub fn peer_gid() -> Gid {
    reference::gid_of_lid(PEER_LID)
}

/// Client-protocol statuses (docs/protocol/client-messages.md §3).
pub const SUCCESS: u8 = 0;
pub const EINVAL: u8 = 2;
pub const ENODATA: u8 = 3;
pub const ETIMEDOUT: u8 = 6;
pub const ESRCADDR: u8 = 7;

/// The destination entry's NODELAY flag.
pub const NODELAY: u32 = 0x4000_0000;

/// A RESOLVE from `src` to `dst` (IPv4), as librdmacm builds it
/// (docs/test-vectors.md §1).
pub fn resolve_ip(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    resolve_ip_flags(src, dst, 0)
}

/// The same, with extra flags on the destination entry.
pub fn resolve_ip_flags(src: Ipv4Addr, dst: Ipv4Addr, dest_flags: u32) -> Vec<u8> {
    let mut m = vec![0u8; 160];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16..20].copy_from_slice(&1u32.to_ne_bytes()); // SOURCE
    m[20..22].copy_from_slice(&2u16.to_ne_bytes()); // IP
    m[24..28].copy_from_slice(&src.octets());
    m[88..92].copy_from_slice(&(2u32 | dest_flags).to_ne_bytes()); // DEST
    m[92..94].copy_from_slice(&2u16.to_ne_bytes());
    m[96..100].copy_from_slice(&dst.octets());
    m
}

/// A QUERY_SA (`ib_acme -v`, docs/test-vectors.md §9) for a path from `sgid` to `dgid`.
pub fn query_sa(sgid: Gid, dgid: Gid, pkey: u16) -> Vec<u8> {
    let mut m = vec![0u8; 88];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&88u16.to_ne_bytes());
    m[16..20].copy_from_slice(&0x8000_0000u32.to_ne_bytes()); // QUERY_SA
    m[20..22].copy_from_slice(&AddrType::PATH.0.to_ne_bytes());
    m[24 + 8..24 + 24].copy_from_slice(&dgid.0);
    m[24 + 24..24 + 40].copy_from_slice(&sgid.0);
    m[24 + 49] = 0x81;
    m[24 + 50..24 + 52].copy_from_slice(&pkey.to_be_bytes());
    m
}

/// An EP_QUERY for endpoint `index` (1-based) on `port` (docs/test-vectors.md §13).
pub fn ep_query(index: u8, port: u8) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m[0] = 1;
    m[1] = 3;
    m[3] = index;
    m[4] = port;
    m[6..8].copy_from_slice(&16u16.to_be_bytes());
    m
}

/// A reply's status byte.
pub fn status(reply: &[u8]) -> u8 {
    reply[2]
}

/// The path of a successful resolve reply (entry 0, flags 0x2B, type PATH).
pub fn reply_path(reply: &[u8]) -> PathRecordRepr {
    assert!(reply.len() >= 88, "not a success reply: {}", hex(reply));
    assert_eq!(
        u32::from_ne_bytes(reply[16..20].try_into().expect("4 bytes")),
        0x2B,
        "entry flags"
    );
    assert_eq!(
        u16::from_ne_bytes([reply[20], reply[21]]),
        AddrType::PATH.0,
        "entry type"
    );
    PathRecordRepr::parse(&reply[24..88]).expect("64-byte path")
}

/// What a successful EP_QUERY reply says: pkey and address strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpInfo {
    pub port: u8,
    pub pkey: u16,
    pub addrs: Vec<String>,
}

/// Parses an EP_QUERY reply; `Err(status)` for an error reply.
pub fn ep_info(reply: &[u8]) -> Result<EpInfo, u8> {
    if reply[2] != 0 || reply.len() <= 16 {
        return Err(reply[2]);
    }
    let body = &reply[16..];
    let cnt = usize::from(u16::from_be_bytes([body[14], body[15]]));
    assert_eq!(reply.len(), 96 + 64 * cnt, "EP_QUERY reply length");
    let addrs = (0..cnt)
        .map(|i| {
            let s = &body[80 + 64 * i..80 + 64 * (i + 1)];
            let end = s.iter().position(|&b| b == 0).unwrap_or(64);
            String::from_utf8_lossy(&s[..end]).into_owned()
        })
        .collect();
    Ok(EpInfo {
        port: body[8],
        pkey: u16::from_be_bytes([body[12], body[13]]),
        addrs,
    })
}

/// A 40-byte GRH from `sgid` to `dgid`.
pub fn grh(sgid: Gid, dgid: Gid) -> [u8; 40] {
    GrhRepr::iba(sgid, dgid).to_bytes()
}

/// An IPv4 address as a 64-byte ACM address.
pub fn ip_bytes(ip: Ipv4Addr) -> Bytes64 {
    Bytes64::zero_padded(&ip.octets())
}

/// A peer's resolve request for `dst` from `src`, advertising `mgids`.
pub fn acm_request(tid: u64, src: Ipv4Addr, dst: Ipv4Addr, mgids: &[Gid]) -> Vec<u8> {
    AcmMadRepr::resolve_request(
        tid,
        AddrType::IP,
        ip_bytes(dst),
        AddrType::IP,
        ip_bytes(src),
        mgids,
    )
    .to_bytes()
    .to_vec()
}

/// A peer's resolve response choosing `mgid`.
pub fn acm_response(tid: u64, mgid: Gid) -> Vec<u8> {
    AcmMadRepr::resolve_response(tid, mgid).to_bytes().to_vec()
}

/// The TID of a MAD (ACM or SA).
pub fn mad_tid(m: &[u8]) -> u64 {
    MadHeaderPacket::new_checked(m).expect("a MAD").tid()
}

/// The SA attribute and component mask of an SA MAD.
pub fn sa_attr(m: &[u8]) -> u16 {
    SaPacket::new_checked(m).expect("an SA MAD").attr_id().0
}

pub fn sa_comp_mask(m: &[u8]) -> u64 {
    SaPacket::new_checked(m).expect("an SA MAD").comp_mask()
}

/// The SA MADs of one attribute a node has sent.
pub fn sa_sent_attr(node: &Node, attr: u16) -> Vec<[u8; MAD_LEN]> {
    node.sa_sent
        .iter()
        .filter(|(_, m)| sa_attr(&m.0) == attr)
        .map(|(_, m)| m.0)
        .collect()
}

pub const ATTR_PATH_RECORD: u16 = 0x0035;
pub const ATTR_MCMEMBER: u16 = 0x0038;

/// The reference configuration without the hosts preload: every remote address must be
/// resolved over ACM multicast.
pub fn config_without_preload() -> EngineConfig {
    let mut c = reference::config();
    c.options.addr_preload = AddrPreload::None;
    c.hosts.clear();
    c
}

/// The same with `route_prot acm`.
pub fn config_route_acm() -> EngineConfig {
    let mut c = config_without_preload();
    c.options.route_prot = RouteProt::Acm;
    c
}

/// A node on the reference fabric's HCA with this configuration, started.
pub fn node_with(config: EngineConfig) -> Node {
    let mut n = Node::new(config, reference::sa(), reference::route());
    n.input(Input::DeviceAdded(reference::device()));
    n.settle();
    n
}

/// The second node of the two-node tests: same fabric, LID 2, address 10.0.0.2.
pub const B_LID: u16 = 2;
pub const B_ADDRS: &str =
    "# the second node\nfakehost-b fakeib0 1 default\n10.0.0.2 fakeib0 1 default\n";

pub fn b_port_attrs() -> PortAttrs {
    PortAttrs {
        lid: B_LID,
        gids: vec![reference::gid_of_lid(B_LID)],
        ..reference::port_attrs()
    }
}

pub fn b_config(route: RouteProt) -> EngineConfig {
    let mut c = reference::config();
    c.options.addr_preload = AddrPreload::None;
    c.hosts.clear();
    c.options.route_prot = route;
    let (addr_file, diags) = AddrFile::parse("ibacm_addr.cfg", B_ADDRS);
    assert!(diags.is_empty(), "{diags:?}");
    c.addr_file = Some(addr_file);
    c
}

pub fn b_device() -> DeviceDesc {
    DeviceDesc {
        id: DeviceId(0),
        name: "fakeib0".into(),
        guid: reference::BASE_GUID + 0x100,
        ports: vec![b_port_attrs()],
    }
}

/// Node B, started.
pub fn node_b(route: RouteProt) -> Node {
    let mut n = Node::new(b_config(route), reference::sa(), reference::route());
    n.input(Input::DeviceAdded(b_device()));
    n.settle();
    n
}

/// Writes a line into the node's transcript (what the test did, for readers).
pub fn note(node: &mut Node, line: &str) {
    let now = node.now;
    node.transcript.push(format!("{now} >> {line}"));
}

/// Feeds a MAD received on `ep`, noting it in the transcript.
pub fn feed_ud(node: &mut Node, ep: EndpointId, wc: RecvInfo, grh: Option<&[u8]>, mad: &[u8]) {
    let from = match grh {
        Some(g) => format!("sgid {}", GrhRepr::parse(g).expect("GRH").sgid),
        None => "no grh".to_string(),
    };
    note(
        node,
        &format!(
            "ud recv ep {} slid {} src_qp {:#x} {from} {}",
            ep.0,
            wc.slid,
            wc.src_qp,
            super::describe_acm(mad)
        ),
    );
    node.input(Input::UdReceive { ep, wc, grh, mad });
}

/// Feeds a client request without waiting for its reply.
pub fn send_request(node: &mut Node, conn: ConnId, what: &str, bytes: &[u8]) {
    note(node, &format!("conn {} {what}", conn.0));
    node.input(Input::ClientRequest { conn, bytes });
}

/// Sends a client request, noted, and runs until its reply.
pub fn ask(node: &mut Node, conn: ConnId, what: &str, bytes: &[u8]) -> Vec<u8> {
    note(node, &format!("conn {} {what}", conn.0));
    node.request(conn, bytes)
        .unwrap_or_else(|| panic!("no reply to {what}"))
}

/// A resolve from `src` to `dst`, noted, run to its reply.
pub fn resolve(node: &mut Node, conn: ConnId, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    ask(
        node,
        conn,
        &format!("resolve {src} -> {dst}"),
        &resolve_ip(src, dst),
    )
}

/// EP_QUERY, noted, answered at once.
pub fn query_ep(node: &mut Node, conn: ConnId, index: u8, port: u8) -> Result<EpInfo, u8> {
    let r = ask(
        node,
        conn,
        &format!("ep query index {index} port {port}"),
        &ep_query(index, port),
    );
    ep_info(&r)
}

/// A port event, noted, with what is due now carried out.
pub fn port_event(node: &mut Node, event: PortEvent) {
    let what = match &event {
        PortEvent::Active(a) => format!("PORT_ACTIVE lid {} sm_lid {}", a.lid, a.sm_lid),
        PortEvent::Down => "PORT_ERR".to_string(),
        PortEvent::LidChange(a) => format!("LID_CHANGE lid {}", a.lid),
        PortEvent::SmChange(a) => format!("SM_CHANGE sm_lid {}", a.sm_lid),
        PortEvent::GidChange(a) => format!("GID_CHANGE gid0 {}", a.gid0()),
        PortEvent::PkeyChange(a) => format!("PKEY_CHANGE pkeys {:04x?}", a.pkeys),
        PortEvent::ClientReregister => "CLIENT_REREGISTER".to_string(),
    };
    note(node, &what);
    node.port_event(reference::PORT, event);
}

/// A local IP appearing, noted.
pub fn ip_added(node: &mut Node, ip: LocalIp) {
    note(
        node,
        &format!("local ip added {} pkey {:#06x}", ip.addr, ip.pkey),
    );
    node.input(Input::LocalIpAdded(ip));
}

/// The endpoints a node's transcript shows with open QPs: (ep, pkey, qpn), oldest first.
pub fn open_qps(node: &Node) -> Vec<(u32, u16, u32)> {
    let mut v: Vec<(u32, u16, u32)> = Vec::new();
    for l in &node.transcript {
        if let Some(rest) = l.split(" open qp ep ").nth(1) {
            // "<ep> pkey 0x<pkey> index <i> -> qpn 0x<qpn>"
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ep = f[0].parse().expect("ep");
            let pkey = u16::from_str_radix(f[2].trim_start_matches("0x"), 16).expect("pkey");
            let qpn = u32::from_str_radix(f[7].trim_start_matches("0x"), 16).expect("qpn");
            v.push((ep, pkey, qpn));
        } else if let Some(rest) = l.split(" close qp ep ").nth(1) {
            let ep: u32 = rest.trim().parse().expect("ep");
            v.retain(|e| e.0 != ep);
        }
    }
    v
}

/// The endpoints attached to `mgid` according to a node's transcript.
pub fn attached(node: &Node, mgid: Gid) -> Vec<u32> {
    let mut v: Vec<u32> = Vec::new();
    let tag = mgid.to_string();
    for l in &node.transcript {
        for (word, attach) in [(" attach ep ", true), (" detach ep ", false)] {
            if let Some(rest) = l.split(word).nth(1) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if f[1] != tag {
                    continue;
                }
                let ep: u32 = f[0].parse().expect("ep");
                if attach {
                    v.push(ep);
                } else {
                    v.retain(|&e| e != ep);
                }
            }
        }
        if let Some(rest) = l.split(" close qp ep ").nth(1) {
            let ep: u32 = rest.trim().parse().expect("ep");
            v.retain(|&e| e != ep);
        }
    }
    v
}

/// Where one node sits on the fabric.
#[derive(Debug, Clone, Copy)]
pub struct Wire {
    pub lid: u16,
    pub gid: Gid,
}

/// Two nodes and the fabric between them. Every UD send of one node reaches the other
/// `latency` later: a multicast send (remote QPN 0xFFFFFF) reaches each endpoint
/// attached to the group's MGID, a unicast send the endpoint whose QPN it names, if its
/// DLID is the receiver's LID. The receiver sees the sender's port GID as GRH SGID, the
/// sender's LID as SLID and the sending QP as source QPN. Nodes run on one clock: the
/// pump always steps the node whose next event or timer comes first.
pub struct Fabric {
    pub nodes: [Node; 2],
    pub wires: [Wire; 2],
    pub latency: Duration,
    /// What crossed the fabric, in order.
    pub wire_log: Vec<String>,
    carried: [usize; 2],
}

pub const NAMES: [&str; 2] = ["A", "B"];

impl Fabric {
    pub fn new(a: Node, wa: Wire, b: Node, wb: Wire) -> Self {
        let mut f = Self {
            nodes: [a, b],
            wires: [wa, wb],
            latency: Duration::from_micros(10),
            wire_log: Vec::new(),
            carried: [0, 0],
        };
        // Both nodes have started; the fabric clock starts at the later one.
        let t = f.nodes[0].now.max(f.nodes[1].now);
        for n in &mut f.nodes {
            n.run_until(t);
        }
        f.carry(0);
        f.carry(1);
        f
    }

    fn next_time(n: &Node) -> Option<Instant> {
        let ev = n.events.front().map(|(t, _, _)| *t);
        match (ev, n.engine.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Carries node `from`'s new UD sends to the other node.
    fn carry(&mut self, from: usize) {
        let to = 1 - from;
        let sent: Vec<_> = self.nodes[from].ud_sent[self.carried[from]..].to_vec();
        self.carried[from] = self.nodes[from].ud_sent.len();
        let at_from = self.nodes[from].now;
        let src_qps = open_qps(&self.nodes[from]);
        let dst_qps = open_qps(&self.nodes[to]);
        for s in sent {
            let at = s.at.max(at_from) + self.latency;
            let Some(&(_, _, src_qp)) = src_qps.iter().find(|e| e.0 == s.ep.0) else {
                panic!("{} sent on ep {} with no QP", NAMES[from], s.ep.0);
            };
            let targets: Vec<u32> = if s.av.remote_qpn == MULTICAST_QPN {
                attached(&self.nodes[to], s.av.grh.dgid)
            } else if s.av.dlid == self.wires[to].lid {
                dst_qps
                    .iter()
                    .filter(|e| e.2 == s.av.remote_qpn)
                    .map(|e| e.0)
                    .collect()
            } else {
                Vec::new()
            };
            self.wire_log.push(format!(
                "{at} {}->{} dlid {:#x} qpn {:#x} dgid {} {} => {}",
                NAMES[from],
                NAMES[to],
                s.av.dlid,
                s.av.remote_qpn,
                s.av.grh.dgid,
                super::describe_acm(&s.mad.0),
                if targets.is_empty() {
                    "dropped".to_string()
                } else {
                    format!("ep {targets:?}")
                }
            ));
            for ep in targets {
                let ev = FabricEvent::UdReceive {
                    ep: EndpointId(ep),
                    wc: RecvInfo {
                        slid: self.wires[from].lid,
                        src_qp,
                        dlid_path_bits: 0,
                        pkey_index: 0,
                    },
                    grh: Some(grh(self.wires[from].gid, s.av.grh.dgid)),
                    mad: MadBytes::new(&s.mad.0),
                };
                self.nodes[to].schedule(at, ev);
            }
        }
    }

    /// Delivers the earliest due item of either node, if any is due by `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        let next = [0, 1].into_iter().filter_map(|i| {
            let t = Self::next_time(&self.nodes[i])?;
            (t <= limit).then_some((t, i))
        });
        let Some((t, i)) = next.min() else {
            return false;
        };
        self.nodes[i].step(t);
        self.carry(i);
        true
    }

    /// Runs both nodes up to `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.step(t) {}
        for n in &mut self.nodes {
            n.now = n.now.max(t);
        }
    }

    pub fn advance(&mut self, d: Duration) {
        let t = self.nodes[0].now.max(self.nodes[1].now) + d;
        self.run_until(t);
    }

    /// Sends a client request to node `i` and runs the fabric until it is answered.
    pub fn request(&mut self, i: usize, conn: ConnId, what: &str, bytes: &[u8]) -> Vec<u8> {
        // The client speaks at the fabric's current time.
        let t = self.nodes[0].now.max(self.nodes[1].now);
        self.run_until(t);
        let before = self.nodes[i].replies.len();
        note(&mut self.nodes[i], &format!("conn {} {what}", conn.0));
        self.nodes[i].input(Input::ClientRequest { conn, bytes });
        self.carry(i);
        for _ in 0..100_000 {
            if let Some((_, r)) = self.nodes[i].replies[before..]
                .iter()
                .find(|(c, _)| *c == conn)
            {
                return r.clone();
            }
            if !self.step(Instant::from_nanos(u64::MAX)) {
                panic!("no reply to {what}");
            }
        }
        panic!("livelock");
    }

    /// Everything that happened: the wire, then each node's transcript.
    pub fn transcript_text(&self) -> String {
        let mut s = String::from("== fabric ==\n");
        for l in &self.wire_log {
            s.push_str(l);
            s.push('\n');
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let _ = writeln!(s, "== node {} ==", NAMES[i]);
            s.push_str(&n.transcript_text());
        }
        s
    }
}

/// The port of the reference node, for readers of tests.
pub const PORT: PortId = reference::PORT;

/// The port attributes with another SM LID.
pub fn attrs_with_sm(sm_lid: u16) -> PortAttrs {
    PortAttrs {
        sm_lid,
        ..reference::port_attrs()
    }
}

/// The port attributes with this pkey table.
pub fn attrs_with_pkeys(pkeys: &[u16]) -> PortAttrs {
    PortAttrs {
        pkeys: pkeys.to_vec(),
        ..reference::port_attrs()
    }
}

/// The group-0 MGID of a pkey with the default minimums.
pub fn mgid_of(pkey: u16) -> Gid {
    acm_proto::mgid::AcmMgid::new(pkey, Rate::RATE_10, Mtu::MTU_2048).to_gid()
}
