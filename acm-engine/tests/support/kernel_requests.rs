//! Kernel requests built the way the kernel builds them, one per kind of user, so that
//! the engine's parser is tested against the kernel's habits rather than against the
//! project's own request builder (`LsRequestRepr::emit`), which shares its assumptions.
//!
//! The facts, from the kernel's `ib_nl_make_request` and `ib_nl_set_path_rec_attrs`
//! (sa_query.c) and `ib_nl_ip_send_msg` (addr.c), and from the callers that choose
//! the component mask (rdma_cm's route query in cma.c, IPoIB's path lookup):
//!
//! - the nlmsghdr is put first with a length of 16, type `4 << 10 | op`, flags
//!   NLM_F_REQUEST, the kernel's request number as seq, pid 0; its length is set
//!   last, to everything put after it;
//! - a RESOLVE's family header takes 68 bytes (66 rounded up to 4): the device name
//!   copied and NUL padded to 64, the port, the path use, and two bytes nobody writes
//!   (the buffer's old contents: the fixtures put 0xA5 there);
//! - attributes follow in this order, each only when its bit is in the caller's
//!   component mask, each with the mandatory flag (0x2000), payloads in host order,
//!   zero padded to 4: SERVICE_ID (u64), DGID, SGID, TCLASS (u8), PKEY (u16),
//!   QOS_CLASS (u16);
//! - the path use is UNIDIRECTIONAL unless the mask holds REVERSIBLE with a non-zero
//!   reversible bit, when it is ALL (kernels that take up to three records) or GMP
//!   (older ones);
//! - rdma_cm asks with DGID, SGID, PKEY, SERVICE_ID and REVERSIBLE, plus QOS_CLASS (the
//!   ToS) over IPv4 or TCLASS (the flow label's traffic class) over IPv6; IPoIB asks with
//!   DGID, SGID, TCLASS and PKEY, not reversible;
//! - an IP_RESOLVE's family header is the route's interface index (u32, 4 bytes), then
//!   one IPV4 (4 bytes) or IPV6 (16 bytes) attribute, mandatory flag set, the address
//!   in network order.
//!
//! The bytes are put with acm-proto's field views (no offsets here), in the kernel's
//! order.
#![allow(dead_code, unreachable_pub)]

use acm_proto::netlink::{
    LsAttrType, LsOp, NLA_HDRLEN, NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderPacket, PathUse,
    RDMA_NLA_F_MANDATORY, RESOLVE_HEADER_LEN, ResolveHeaderPacket, nla_align, put_attr,
};
use acm_proto::{Bytes64, Gid};
use std::net::IpAddr;

/// A message being put together as the kernel's socket buffer is.
struct KernelMessage {
    buf: Vec<u8>,
}

impl KernelMessage {
    /// `nlmsg_put`: the header, 16 bytes so far.
    fn put_header(op: LsOp, seq: u32) -> Self {
        let mut buf = vec![0u8; NLMSG_HDRLEN];
        let mut h = NlMsgHeaderPacket::new_unchecked(&mut buf[..]);
        h.set_nlmsg_len(NLMSG_HDRLEN as u32);
        h.set_nlmsg_type(op.msg_type());
        h.set_flags(NlMsgFlags::REQUEST);
        h.set_seq(seq);
        h.set_pid(0);
        Self { buf }
    }

    /// `skb_put` of `len` bytes the caller fills (the rest keeps `stale`).
    fn put_area(&mut self, len: usize, stale: u8) -> &mut [u8] {
        let start = self.buf.len();
        self.buf.resize(start + len, stale);
        &mut self.buf[start..]
    }

    /// `nla_put` with the mandatory flag, as every LS request attribute has it.
    fn put_attr(&mut self, t: LsAttrType, payload: &[u8]) {
        let area = self.put_area(nla_align(NLA_HDRLEN + payload.len()), 0);
        put_attr(area, RDMA_NLA_F_MANDATORY | t.0, payload);
    }

    /// `nlmsg_end`: the header's length covers everything put.
    fn end(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).expect("a short message");
        NlMsgHeaderPacket::new_unchecked(&mut self.buf[..]).set_nlmsg_len(len);
        self.buf
    }
}

/// What a kernel path query carries: the fields of its component mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathQuery {
    /// The RDMA device and port the query goes out on.
    pub device: &'static str,
    pub port: u8,
    pub path_use: PathUse,
    pub service_id: Option<u64>,
    pub dgid: Option<Gid>,
    pub sgid: Option<Gid>,
    pub tclass: Option<u8>,
    pub pkey: Option<u16>,
    pub qos_class: Option<u16>,
}

impl PathQuery {
    /// The RESOLVE the kernel multicasts for this query with request number `seq`.
    #[must_use]
    pub fn message(&self, seq: u32) -> Vec<u8> {
        let mut m = KernelMessage::put_header(LsOp::RESOLVE, seq);
        let area = m.put_area(RESOLVE_HEADER_LEN, 0xA5);
        let mut h = ResolveHeaderPacket::new_unchecked(area);
        h.set_device_name(&Bytes64::c_string(self.device));
        h.set_port_num(self.port);
        h.set_path_use(self.path_use);
        if let Some(v) = self.service_id {
            m.put_attr(LsAttrType::SERVICE_ID, &v.to_ne_bytes());
        }
        if let Some(g) = self.dgid {
            m.put_attr(LsAttrType::DGID, &g.0);
        }
        if let Some(g) = self.sgid {
            m.put_attr(LsAttrType::SGID, &g.0);
        }
        if let Some(v) = self.tclass {
            m.put_attr(LsAttrType::TCLASS, &[v]);
        }
        if let Some(v) = self.pkey {
            m.put_attr(LsAttrType::PKEY, &v.to_ne_bytes());
        }
        if let Some(v) = self.qos_class {
            m.put_attr(LsAttrType::QOS_CLASS, &v.to_ne_bytes());
        }
        m.end()
    }
}

/// The service id rdma_cm gives a connection of port space TCP (0x0106) to `port`.
#[must_use]
pub const fn rdma_cm_tcp_service_id(port: u16) -> u64 {
    (0x0106 << 16) | port as u64
}

/// rdma_cm's route query over IPv4 on a kernel that takes several records (path use
/// ALL): SERVICE_ID,
/// DGID, SGID, PKEY and the ToS as QOS_CLASS.
#[must_use]
pub fn rdma_cm_ipv4(dgid: Gid, sgid: Gid, pkey: u16, service_id: u64, tos: u8) -> PathQuery {
    PathQuery {
        device: "mlx5_0",
        port: 1,
        path_use: PathUse::ALL,
        service_id: Some(service_id),
        dgid: Some(dgid),
        sgid: Some(sgid),
        tclass: None,
        pkey: Some(pkey),
        qos_class: Some(u16::from(tos)),
    }
}

/// The same query from an older kernel, which asks reversible paths with GMP.
#[must_use]
pub fn rdma_cm_ipv4_older_kernel(
    dgid: Gid,
    sgid: Gid,
    pkey: u16,
    service_id: u64,
    tos: u8,
) -> PathQuery {
    PathQuery {
        path_use: PathUse::GMP,
        ..rdma_cm_ipv4(dgid, sgid, pkey, service_id, tos)
    }
}

/// rdma_cm's route query over IPv6 (path use ALL): SERVICE_ID, DGID, SGID, the flow
/// label's traffic class as TCLASS, and PKEY.
#[must_use]
pub fn rdma_cm_ipv6(dgid: Gid, sgid: Gid, pkey: u16, service_id: u64, tclass: u8) -> PathQuery {
    PathQuery {
        device: "mlx5_0",
        port: 1,
        path_use: PathUse::ALL,
        service_id: Some(service_id),
        dgid: Some(dgid),
        sgid: Some(sgid),
        tclass: Some(tclass),
        pkey: Some(pkey),
        qos_class: None,
    }
}

/// IPoIB's path lookup for a neighbour: DGID, SGID, TCLASS and PKEY, one way
/// (UNIDIRECTIONAL).
#[must_use]
pub fn ipoib(dgid: Gid, sgid: Gid, pkey: u16, tclass: u8) -> PathQuery {
    PathQuery {
        device: "mlx5_0",
        port: 1,
        path_use: PathUse::UNIDIRECTIONAL,
        service_id: None,
        dgid: Some(dgid),
        sgid: Some(sgid),
        tclass: Some(tclass),
        pkey: Some(pkey),
        qos_class: None,
    }
}

/// The kernel's IP_RESOLVE for `addr` on the interface `ifindex`.
#[must_use]
pub fn ip_resolve(seq: u32, ifindex: u32, addr: IpAddr) -> Vec<u8> {
    let mut m = KernelMessage::put_header(LsOp::IP_RESOLVE, seq);
    m.put_area(4, 0).copy_from_slice(&ifindex.to_ne_bytes());
    match addr {
        IpAddr::V4(a) => m.put_attr(LsAttrType::IPV4, &a.octets()),
        IpAddr::V6(a) => m.put_attr(LsAttrType::IPV6, &a.octets()),
    }
    m.end()
}
