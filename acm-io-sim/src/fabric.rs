//! The fabric's rules, shared by the deterministic [`crate::Sim`] and the real-time
//! [`crate::hub::Hub`]: which QPs a UD send reaches (multicast and unicast, with the
//! pkey, Q_Key and port-state checks), the GRH every receive carries, multicast
//! attachment bookkeeping, what the kernel's umad layer does with an SA send (TID
//! rewrite, per-try timeout, retries), the source-address rule of a host's routing,
//! and the engine configuration and addresses a host of a [`FabricSpec`] starts with.
//!
//! Everything here is pure: no clock, no randomness, no I/O. The callers decide when
//! things happen (a virtual clock and fault rules in the simulator, real time in the
//! hub) and carry the results.

use crate::spec::{FabricSpec, HostId};
use crate::topology::{PortRef, Topology};
use acm_engine::config::{AddrFile, Options, parse_hosts};
use acm_engine::{AddressVector, EndpointId, LocalIp, NeighResult, RecvInfo};
use acm_engine::{DeviceId, EngineConfig, PortId};
use acm_proto::acm_mad::ACM_QKEY;
use acm_proto::grh::{GRH_LEN, GrhRepr};
use acm_proto::mad::{MAD_LEN, MadHeaderPacket};
use acm_proto::{Gid, MULTICAST_LID_BASE};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

/// The errno a source lookup fails with when no local address can reach the
/// destination.
pub const ENETUNREACH: u8 = 101;

/// The first QPN a host's driver hands out (incarnation `i` starts at
/// `FIRST_QPN + i * 0x100`).
pub const FIRST_QPN: u32 = 0x48;

/// A UD QP some host's engine asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricQp {
    /// The port it lives on.
    pub port: PortRef,
    /// Its QP number.
    pub qpn: u32,
    /// The endpoint's pkey.
    pub pkey: u16,
    /// That pkey's index in the port's table (reported in receive completions).
    pub pkey_index: u16,
    /// The multicast groups it is attached to, in attach order.
    pub mcast: Vec<Gid>,
}

/// One host's QPs by endpoint.
pub type QpTable = BTreeMap<EndpointId, FabricQp>;

/// The QPs attached to each multicast group, as (host, endpoint).
pub type McastIndex = BTreeMap<Gid, BTreeSet<(HostId, EndpointId)>>;

/// Where the QP tables of every host live (the simulator keeps them in its hosts, the
/// hub in its attachments).
pub trait QpTables {
    /// Host `host`'s QPs, if it has any.
    fn host_qps(&self, host: HostId) -> Option<&QpTable>;
}

/// One QP a UD send reaches, with the work completion it gets there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdTarget {
    /// The receiving host.
    pub host: HostId,
    /// The receiving endpoint.
    pub ep: EndpointId,
    /// Its work-completion data.
    pub wc: RecvInfo,
}

/// What one UD send turns into: the GRH every copy carries and the QPs it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdDelivery {
    /// The 40-byte GRH of every receive.
    pub grh: [u8; GRH_LEN],
    /// The receivers, in delivery order (multicast: group members in (host, endpoint)
    /// order; unicast: at most one).
    pub targets: Vec<UdTarget>,
}

/// The GRH a receiver sees for a send from the port whose GID is `sgid` with address
/// vector `av`: version 6, next header IBA, the AV's traffic class, flow label, hop
/// limit and destination GID.
#[must_use]
pub fn grh_bytes(sgid: Gid, av: &AddressVector) -> [u8; GRH_LEN] {
    let mut grh = GrhRepr::iba(sgid, av.grh.dgid);
    grh.tclass = av.grh.tclass;
    grh.flow_label = av.grh.flow_label;
    grh.hop_limit = av.grh.hop_limit;
    grh.to_bytes()
}

/// Where a UD send from host `host`'s endpoint `ep` goes.
///
/// `None` when nothing leaves the host: the endpoint has no QP, or its port is unknown
/// or down. Otherwise the targets are:
///
/// * multicast (DLID ≥ 0xC000): every QP attached to the AV's destination GID except
///   the sender's own, whose pkey shares a partition with the sender's
///   ([`Topology::same_partition`]) and whose port is up;
/// * unicast: the QP with the AV's remote QPN on the port owning the DLID (honouring
///   LMC; the path bits are reported), if that port is up, the remote Q_Key is ACM's
///   and the partitions match.
///
/// Every completion carries the sender's LID ORed with the AV's source path bits, the
/// sender's QPN and the receiving QP's pkey index.
#[must_use]
pub fn ud_delivery(
    topo: &Topology,
    qps: &(impl QpTables + ?Sized),
    mcast: &McastIndex,
    host: HostId,
    ep: EndpointId,
    av: &AddressVector,
) -> Option<UdDelivery> {
    let qp = qps.host_qps(host)?.get(&ep)?;
    let sp = topo.port(qp.port).filter(|p| p.up)?;
    let grh = grh_bytes(sp.gid, av);
    let wc_base = RecvInfo {
        slid: sp.lid | u16::from(av.src_path_bits),
        src_qp: qp.qpn,
        dlid_path_bits: 0,
        pkey_index: 0,
    };
    let mut targets = Vec::new();
    if av.dlid >= MULTICAST_LID_BASE {
        if let Some(members) = mcast.get(&av.grh.dgid) {
            for &(th, tep) in members {
                if th == host && tep == ep {
                    continue;
                }
                let Some(tq) = qps.host_qps(th).and_then(|t| t.get(&tep)) else {
                    continue;
                };
                if !Topology::same_partition(tq.pkey, qp.pkey)
                    || !topo.port(tq.port).is_some_and(|p| p.up)
                {
                    continue;
                }
                targets.push(UdTarget {
                    host: th,
                    ep: tep,
                    wc: RecvInfo {
                        pkey_index: tq.pkey_index,
                        ..wc_base
                    },
                });
            }
        }
    } else if let Some(dp) = topo.by_lid(av.dlid)
        && let Some(dport) = topo.port(dp).filter(|p| p.up)
    {
        let bits = (av.dlid - dport.lid) as u8;
        let found = qps.host_qps(dp.host).and_then(|t| {
            t.iter()
                .find(|(_, q)| q.port == dp && q.qpn == av.remote_qpn)
        });
        if let Some((&tep, tq)) = found
            && av.remote_qkey == ACM_QKEY
            && Topology::same_partition(tq.pkey, qp.pkey)
        {
            targets.push(UdTarget {
                host: dp.host,
                ep: tep,
                wc: RecvInfo {
                    dlid_path_bits: bits,
                    pkey_index: tq.pkey_index,
                    ..wc_base
                },
            });
        }
    }
    Some(UdDelivery { grh, targets })
}

/// Attaches host `host`'s endpoint `ep` to group `mgid` (nothing when the endpoint has
/// no QP or is already attached).
pub fn mcast_attach(
    qps: &mut QpTable,
    index: &mut McastIndex,
    host: HostId,
    ep: EndpointId,
    mgid: Gid,
) {
    if let Some(qp) = qps.get_mut(&ep)
        && !qp.mcast.contains(&mgid)
    {
        qp.mcast.push(mgid);
        index.entry(mgid).or_default().insert((host, ep));
    }
}

/// [`mcast_attach`] or [`mcast_detach`], for a caller that does either the same way.
pub type MembershipChange = fn(&mut QpTable, &mut McastIndex, HostId, EndpointId, Gid);

/// Detaches host `host`'s endpoint `ep` from group `mgid`.
pub fn mcast_detach(
    qps: &mut QpTable,
    index: &mut McastIndex,
    host: HostId,
    ep: EndpointId,
    mgid: Gid,
) {
    if let Some(qp) = qps.get_mut(&ep) {
        qp.mcast.retain(|m| *m != mgid);
    }
    mcast_leave(index, host, ep, mgid);
}

/// Removes (host, endpoint) from group `mgid` in the index, dropping a group left empty.
pub fn mcast_leave(index: &mut McastIndex, host: HostId, ep: EndpointId, mgid: Gid) {
    if let Some(set) = index.get_mut(&mgid) {
        set.remove(&(host, ep));
        if set.is_empty() {
            index.remove(&mgid);
        }
    }
}

/// Destroys host `host`'s QP of endpoint `ep`, detaching it from every group.
pub fn close_qp(qps: &mut QpTable, index: &mut McastIndex, host: HostId, ep: EndpointId) {
    if let Some(qp) = qps.remove(&ep) {
        for m in qp.mcast {
            mcast_leave(index, host, ep, m);
        }
    }
}

/// The port whose LID is the SM's, if it is up: where SA MADs go.
#[must_use]
pub fn sm_port(topo: &Topology, sm_lid: u16) -> Option<PortRef> {
    let p = topo.by_lid(sm_lid)?;
    topo.port(p).filter(|lp| lp.up).map(|_| p)
}

/// The port of an engine output, as the topology names it.
#[must_use]
pub fn port_ref(host: HostId, port: PortId) -> PortRef {
    PortRef {
        host,
        hca: port.device.0 as usize,
        port: port.port,
    }
}

/// The engine's name for a topology port (device = HCA index).
#[must_use]
pub fn engine_port(p: PortRef) -> PortId {
    PortId {
        device: DeviceId(p.hca as u32),
        port: p.port,
    }
}

/// The TID of a MAD; 0 for a MAD too short to carry one.
#[must_use]
pub fn mad_tid(mad: &[u8]) -> u64 {
    MadHeaderPacket::new_unchecked(mad).try_tid().unwrap_or(0)
}

/// The umad agent id of host `host`'s incarnation `incarnation`: the kernel puts it in
/// the upper 32 bits of every TID the agent sends.
#[must_use]
pub fn umad_agent(host: HostId, incarnation: u32) -> u32 {
    ((incarnation & 0xFF) << 24) | (host.index() as u32 + 1)
}

/// What the kernel does to a TID: the low 32 bits are the sender's, the upper 32 the
/// agent's.
#[must_use]
pub fn umad_tid(agent: u32, tid: u64) -> u64 {
    (u64::from(agent) << 32) | u64::from(tid as u32)
}

/// A umad send in the kernel's hands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmadSend {
    /// The port whose agent sent it.
    pub port: PortRef,
    /// The destination LID (the SM's, when the engine sent it).
    pub dlid: u16,
    /// The MAD, TID already rewritten.
    pub mad: Box<[u8; MAD_LEN]>,
    /// Retries left.
    pub tries_left: u32,
    /// The current try's number, counting from 0 or from where the caller starts it: a
    /// timeout of an earlier try (or of an earlier send with the same TID) is stale.
    pub attempt: u32,
    /// Per-try timeout.
    pub timeout: Duration,
}

/// What a umad try's timeout does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UmadExpiry {
    /// The timeout belongs to an earlier try: nothing.
    Stale,
    /// Send it again (the attempt number has moved on) and restart the timeout.
    Retry,
    /// No retries left: give it back with [`UmadStatus::TIMED_OUT`](acm_proto::mad::UmadStatus::TIMED_OUT).
    Failed,
}

impl UmadSend {
    /// The kernel takes an SA MAD from agent `agent`: its TID is rewritten
    /// ([`umad_tid`]); the send gets `retries` retries of `timeout_ms` each (at least
    /// 1 ms). Returns the rewritten TID, by which the response is matched.
    #[must_use]
    pub fn new(
        agent: u32,
        port: PortRef,
        tid: u64,
        dlid: u16,
        timeout_ms: u32,
        retries: u32,
        mut mad: [u8; MAD_LEN],
    ) -> (u64, Self) {
        let full = umad_tid(agent, tid);
        MadHeaderPacket::new_unchecked(&mut mad[..]).set_tid(full);
        let send = Self {
            port,
            dlid,
            mad: Box::new(mad),
            tries_left: retries,
            attempt: 0,
            timeout: Duration::from_millis(u64::from(timeout_ms.max(1))),
        };
        (full, send)
    }

    /// The timeout of try `attempt` fired.
    pub fn expire(&mut self, attempt: u32) -> UmadExpiry {
        if self.attempt != attempt {
            UmadExpiry::Stale
        } else if self.tries_left > 0 {
            self.tries_left -= 1;
            self.attempt += 1;
            UmadExpiry::Retry
        } else {
            UmadExpiry::Failed
        }
    }
}

/// The source a host's routing picks for `dest`, given its addresses as
/// (address, prefix length): the host's own address if `dest` is one, else the first
/// address on the destination's subnet, else [`ENETUNREACH`].
///
/// # Errors
/// [`ENETUNREACH`] when no address is on the destination's subnet.
pub fn route_source<I>(ips: I, dest: IpAddr) -> Result<IpAddr, u8>
where
    I: Iterator<Item = (IpAddr, u8)> + Clone,
{
    if let Some((addr, _)) = ips.clone().find(|&(addr, _)| addr == dest) {
        return Ok(addr);
    }
    ips.into_iter()
        .find(|&(addr, prefix)| same_subnet(addr, dest, prefix))
        .map(|(addr, _)| addr)
        .ok_or(ENETUNREACH)
}

/// [`route_source`], then the host's default route (`default_route`, when of the
/// destination's family): the source the simulator and the hub give a host's source
/// lookups.
///
/// # Errors
/// [`ENETUNREACH`] when neither gives a source.
pub fn route_with_default<I>(
    ips: I,
    default_route: Option<IpAddr>,
    dest: IpAddr,
) -> Result<IpAddr, u8>
where
    I: Iterator<Item = (IpAddr, u8)> + Clone,
{
    route_source(ips, dest).or_else(|errno| {
        default_route
            .filter(|r| r.is_ipv4() == dest.is_ipv4())
            .ok_or(errno)
    })
}

/// Whether `a` and `b` share the first `prefix` bits (same family only).
#[must_use]
pub fn same_subnet(a: IpAddr, b: IpAddr, prefix: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix.min(32)))
            };
            (u32::from(a) & m) == (u32::from(b) & m)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix.min(128)))
            };
            (u128::from(a) & m) == (u128::from(b) & m)
        }
        _ => false,
    }
}

/// The engine configuration host `h` of `spec` runs with: its `ibacm_opts.cfg`, its
/// address file ([`FabricSpec::addr_file_text`]) and its `ibacm_hosts.data`, parsed,
/// with every diagnostic naming `<host>:<file>`.
///
/// # Panics
/// If the host does not exist.
#[must_use]
pub fn engine_config(spec: &FabricSpec, h: HostId) -> EngineConfig {
    let hs = &spec.hosts[h.index()];
    let opts_name = format!("{}:ibacm_opts.cfg", hs.name);
    let (options, mut diagnostics) = Options::parse(&opts_name, &hs.options);
    let (addr_file, d2) = AddrFile::parse(
        &format!("{}:ibacm_addr.cfg", hs.name),
        &spec.addr_file_text(h),
    );
    diagnostics.extend(d2);
    let hosts = match &hs.hosts_data {
        Some(text) => {
            let (entries, d3) = parse_hosts(&format!("{}:ibacm_hosts.data", hs.name), text);
            diagnostics.extend(d3);
            entries
        }
        None => Vec::new(),
    };
    EngineConfig {
        options,
        addr_file: Some(addr_file),
        hosts,
        diagnostics,
        ..EngineConfig::default()
    }
}

/// The UD QPN of the IPoIB interface that carries IP number `ip` of a host (its place
/// in the host's `ips`): IPoIB QPNs are small numbers the kernel hands out per
/// interface; this one starts where mlx drivers' first one usually is.
#[must_use]
pub fn ipoib_qpn(ip: usize) -> u32 {
    IPOIB_FIRST_QPN + ip as u32
}

/// The QPN of a host's first IPoIB interface ([`ipoib_qpn`]).
pub const IPOIB_FIRST_QPN: u32 = 0x48;

/// Whether host `h` has an IPoIB interface (an address) on port GID `gid` and
/// partition `pkey` (the membership bit not compared).
#[must_use]
pub fn has_ipoib_interface(spec: &FabricSpec, h: HostId, gid: Gid, pkey: u16) -> bool {
    spec.hosts.get(h.index()).is_some_and(|host| {
        host.ips.iter().any(|ip| {
            spec.port_gid(h, ip.hca, ip.port) == gid && (ip.pkey | 0x8000) == (pkey | 0x8000)
        })
    })
}

/// What the IPoIB ARP (or IPv6 neighbour discovery) of host `asker` finds for `dest`
/// on its interface on port GID `gid` and partition `pkey`
/// (docs/protocol/ipoib-neigh.md §4): the hardware address of the host that has
/// `dest` on an up InfiniBand port of the same partition, whether or not it runs
/// ibacm (the kernel answers ARP, not the daemon); [`NeighResult::Unreachable`] when
/// the asker has no such interface or nobody has the address there.
/// [`NeighResult::Incomplete`] is never returned: when the answer is known is the
/// caller's to model.
#[must_use]
pub fn ipoib_neighbour(
    spec: &FabricSpec,
    topo: &Topology,
    asker: HostId,
    gid: Gid,
    pkey: u16,
    dest: IpAddr,
) -> NeighResult {
    if !has_ipoib_interface(spec, asker, gid, pkey) {
        return NeighResult::Unreachable;
    }
    for (t, h) in spec.hosts.iter().enumerate() {
        let th = HostId(t);
        for (i, ip) in h.ips.iter().enumerate() {
            if ip.addr != dest || (ip.pkey | 0x8000) != (pkey | 0x8000) {
                continue;
            }
            let port = topo.port(PortRef::new(th, ip.hca, ip.port));
            if let Some(p) = port.filter(|p| p.up && p.ib) {
                return NeighResult::Found {
                    qpn: ipoib_qpn(i),
                    gid: p.gid,
                };
            }
        }
    }
    NeighResult::Unreachable
}

/// Host `h`'s IP addresses as its netlink walk reports them: each with its prefix, the
/// GID of its port and its partition.
///
/// # Panics
/// If the host does not exist.
#[must_use]
pub fn local_ips(spec: &FabricSpec, h: HostId) -> Vec<LocalIp> {
    spec.hosts[h.index()]
        .ips
        .iter()
        .map(|ip| LocalIp {
            addr: ip.addr,
            prefix_len: Some(ip.prefix),
            gid: spec.port_gid(h, ip.hca, ip.port),
            pkey: ip.pkey,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{GenOptions, IpSpec};
    use acm_engine::GlobalRoute;

    struct Tables(Vec<QpTable>);

    impl QpTables for Tables {
        fn host_qps(&self, host: HostId) -> Option<&QpTable> {
            self.0.get(host.index())
        }
    }

    fn qp(host: HostId, qpn: u32, pkey: u16) -> FabricQp {
        FabricQp {
            port: PortRef::new(host, 0, 1),
            qpn,
            pkey,
            pkey_index: 0,
            mcast: Vec::new(),
        }
    }

    #[test]
    fn unicast_and_multicast_targets() {
        let spec = FabricSpec::generate(3, &GenOptions::default());
        let topo = Topology::new(&spec);
        let ep = EndpointId(1);
        let mut t = Tables(vec![QpTable::new(), QpTable::new(), QpTable::new()]);
        for h in 0..3 {
            t.0[h].insert(ep, qp(HostId(h), 0x48 + h as u32, 0xFFFF));
        }
        let mgid = Gid::from_parts(0xff12_401b_ffff_0000, 1);
        let mut index = McastIndex::new();
        for h in 0..3 {
            mcast_attach(&mut t.0[h], &mut index, HostId(h), ep, mgid);
        }
        mcast_attach(&mut t.0[0], &mut index, HostId(0), ep, mgid);
        assert_eq!(t.0[0][&ep].mcast, vec![mgid], "attached once");
        let av = AddressVector {
            dlid: 0xC001,
            grh: GlobalRoute {
                dgid: mgid,
                hop_limit: 1,
                ..GlobalRoute::default()
            },
            remote_qpn: 0xFF_FFFF,
            remote_qkey: ACM_QKEY,
            ..AddressVector::default()
        };
        let d = ud_delivery(&topo, &t, &index, HostId(0), ep, &av).unwrap();
        let hosts: Vec<HostId> = d.targets.iter().map(|x| x.host).collect();
        assert_eq!(hosts, vec![HostId(1), HostId(2)], "everyone but the sender");
        assert_eq!(d.targets[0].wc.slid, 1);
        assert_eq!(d.targets[0].wc.src_qp, 0x48);
        let g = GrhRepr::parse(&d.grh).unwrap();
        assert_eq!(
            (g.sgid, g.dgid, g.hop_limit),
            (spec.port_gid(HostId(0), 0, 1), mgid, 1)
        );

        let uni = AddressVector {
            dlid: 3,
            remote_qpn: 0x4A,
            ..av
        };
        let d = ud_delivery(&topo, &t, &index, HostId(0), ep, &uni).unwrap();
        assert_eq!(d.targets.len(), 1);
        assert_eq!((d.targets[0].host, d.targets[0].ep), (HostId(2), ep));
        let wrong_qkey = AddressVector {
            remote_qkey: 1,
            ..uni
        };
        assert!(
            ud_delivery(&topo, &t, &index, HostId(0), ep, &wrong_qkey)
                .unwrap()
                .targets
                .is_empty()
        );
        assert!(ud_delivery(&topo, &t, &index, HostId(0), EndpointId(9), &uni).is_none());

        mcast_detach(&mut t.0[1], &mut index, HostId(1), ep, mgid);
        close_qp(&mut t.0[2], &mut index, HostId(2), ep);
        assert!(
            ud_delivery(&topo, &t, &index, HostId(0), ep, &av)
                .unwrap()
                .targets
                .is_empty()
        );
        close_qp(&mut t.0[0], &mut index, HostId(0), ep);
        assert!(index.is_empty(), "empty groups are dropped");
    }

    #[test]
    fn umad_tid_rewrite_and_retries() {
        let agent = umad_agent(HostId(2), 1);
        assert_eq!(agent, 0x0100_0003);
        let mut mad = [0u8; MAD_LEN];
        MadHeaderPacket::new_unchecked(&mut mad[..]).set_tid(0xdead_beef_0000_0007);
        let (tid, mut u) = UmadSend::new(agent, PortRef::new(HostId(2), 0, 1), 7, 1, 0, 1, mad);
        assert_eq!(tid, 0x0100_0003_0000_0007);
        assert_eq!(mad_tid(&u.mad[..]), tid);
        assert_eq!(u.timeout, Duration::from_millis(1));
        assert_eq!(u.expire(1), UmadExpiry::Stale);
        assert_eq!(u.expire(0), UmadExpiry::Retry);
        assert_eq!(u.expire(0), UmadExpiry::Stale);
        assert_eq!(u.expire(1), UmadExpiry::Failed);
        assert_eq!(mad_tid(&[0; 4]), 0);
    }

    #[test]
    fn source_route_rule() {
        let ips = [
            IpSpec::new("10.0.0.1".parse().unwrap(), 24),
            IpSpec::new("fd00::1".parse().unwrap(), 64),
        ];
        let r = |d: &str| route_source(ips.iter().map(|i| (i.addr, i.prefix)), d.parse().unwrap());
        assert_eq!(r("10.0.0.1"), Ok("10.0.0.1".parse().unwrap()));
        assert_eq!(r("10.0.0.9"), Ok("10.0.0.1".parse().unwrap()));
        assert_eq!(r("fd00::7"), Ok("fd00::1".parse().unwrap()));
        assert_eq!(r("10.0.1.9"), Err(ENETUNREACH));
        assert!(same_subnet(
            "1.2.3.4".parse().unwrap(),
            "9.9.9.9".parse().unwrap(),
            0
        ));
    }
}
