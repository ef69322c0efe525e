//! RDMA netlink local-service (RDMA_NL_LS) messages: the kernel's PathRecord requests and
//! ibacm's replies.
//!
//! When a process listens on the RDMA netlink group LS, the kernel's `ib_sa` multicasts
//! each PathRecord lookup to it instead of (first) asking the SA. A message is a 16-byte
//! `nlmsghdr`, then, for a RESOLVE, a 68-byte [`rdma_ls_resolve_header`](ResolveHeaderRepr),
//! then 4-byte aligned attributes. The answer is either one PATH_RECORD attribute carrying
//! an `ib_path_rec_data` ([`PathDataRepr`](crate::path_record::PathDataRepr)) or an empty
//! message flagged [`RDMA_NL_LS_F_ERR`].
//!
//! Unlike everything else ibacm speaks, netlink integers are in **host** byte order, and so
//! are the integer attribute payloads (SERVICE_ID, PKEY, QOS_CLASS) and the path-data flags.
//! The PathRecord inside a reply stays big-endian.
//!
//! See docs/protocol/netlink-ls.md, docs/reference-quirks.md §28, §29,
//! docs/test-vectors.md §19, docs/protocol/constants.md.
//!
//! | module item | wire structure |
//! |---|---|
//! | [`NlMsgHeaderPacket`], [`NlMsgHeaderRepr`] | `struct nlmsghdr` (16 bytes) |
//! | [`NlAttrPacket`], [`NlAttrIter`], [`NlAttr`] | `struct nlattr` and an attribute area |
//! | [`ResolveHeaderPacket`], [`ResolveHeaderRepr`] | `struct rdma_ls_resolve_header` (68 bytes) |
//! | [`LsRequestRepr`] | a whole kernel request (RESOLVE layout) |
//! | [`LsReplyRepr`] | a whole ibacm reply (success or error) |
//! | [`IpResolveRequestRepr`], [`IpResolveReplyRepr`] | the kernel's IP_RESOLVE and its answer (a DGID) |
//! | [`SetTimeoutRepr`] | SET_TIMEOUT, the daemon telling the kernel how long to wait |

mod answer;
mod attr;
mod codes;
mod header;
mod ip_resolve;
mod message;
mod reply;
mod request;
mod resolve_header;
mod set_timeout;

pub use attr::{
    NLA_ALIGNTO, NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_HDRLEN, NLA_TYPE_MASK, NlAttr, NlAttrIter,
    NlAttrPacket, RDMA_NLA_F_MANDATORY, nla_align, put_attr,
};
pub use codes::{
    LsAttrType, LsOp, NETLINK_RDMA, PathUse, RDMA_NL_GROUP_LS, RDMA_NL_GROUP_LS_MASK, RDMA_NL_LS,
    rdma_nl_client, rdma_nl_op, rdma_nl_type,
};
pub use header::{
    NLM_F_ACK, NLM_F_DUMP_FILTERED, NLM_F_DUMP_INTR, NLM_F_ECHO, NLM_F_MULTI, NLM_F_REQUEST,
    NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderPacket, NlMsgHeaderRepr, RDMA_NL_LS_F_ERR,
};
pub use ip_resolve::{
    IP_RESOLVE_ATTRS_OFFSET, IP_RESOLVE_HEADER_LEN, IP_RESOLVE_REPLY_LEN, IpResolveReplyRepr,
    IpResolveRequestRepr,
};
pub use reply::{LS_ERROR_REPLY_LEN, LS_SUCCESS_REPLY_LEN, LsReplyRepr};
pub use request::{LS_ATTRS_OFFSET, LS_REQUEST_MIN_PAYLOAD, LsRequestRepr};
pub use resolve_header::{RESOLVE_HEADER_LEN, ResolveHeaderPacket, ResolveHeaderRepr};
pub use set_timeout::{
    KERNEL_LS_TIMEOUT_DEFAULT_MS, KERNEL_LS_TIMEOUT_MAX_MS, KERNEL_LS_TIMEOUT_MIN_MS,
    SET_TIMEOUT_LEN, SetTimeoutRepr,
};

#[cfg(test)]
mod tests {
    //! docs/test-vectors.md §19 end to end: a kernel request in, ibacm's reply out.

    use super::*;
    use crate::Gid;
    use crate::path_record::{PathDataRepr, PathFlags, PathRecordRepr};
    use alloc::vec::Vec;

    const DGID: &str = "fe80::2:c903:a0:b002";
    const SGID: &str = "fe80::2:c903:a0:b001";

    fn kernel_request(path_use: PathUse, extra: Option<(u16, &[u8])>) -> Vec<u8> {
        let mut r = LsRequestRepr::resolve(0x55, ResolveHeaderRepr::new("mlx5_0", 1, path_use));
        r.dgid = Some(DGID.parse().unwrap());
        r.sgid = Some(SGID.parse().unwrap());
        r.pkey = Some(0xFFFF);
        let mut b = r.to_vec();
        if let Some((t, p)) = extra {
            let start = b.len();
            b.resize(start + nla_align(NLA_HDRLEN + p.len()), 0);
            put_attr(&mut b[start..], t, p);
            let len = u32::try_from(b.len()).unwrap();
            NlMsgHeaderPacket::new_unchecked(&mut b[..]).set_nlmsg_len(len);
        }
        b
    }

    /// What the engine does with a request (the flag choice is the engine's; this mirrors
    /// docs/protocol/netlink-ls.md §5 to check the wire side).
    fn answer(req: &[u8], pid: u32) -> Option<Vec<u8>> {
        let header = NlMsgHeaderRepr::parse(req).ok()?;
        if header.op() != LsOp::RESOLVE {
            // IP_RESOLVE has its own layouts (ip_resolve.rs); nothing else is the kernel
            // asking.
            return None;
        }
        let reply = match LsRequestRepr::parse(req) {
            Ok(r) if r.op() == LsOp::RESOLVE => {
                let flags = if r.resolve.path_use == PathUse::UNIDIRECTIONAL {
                    PathFlags::UNIDIRECTIONAL_REPLY
                } else {
                    PathFlags::IBACMP_REPLY
                };
                let path = PathRecordRepr {
                    dgid: r.dgid.unwrap_or_default(),
                    sgid: r.sgid.unwrap_or_default(),
                    pkey: r.pkey.unwrap_or_default(),
                    dlid: 2,
                    slid: 1,
                    ..Default::default()
                };
                let data = PathDataRepr {
                    flags,
                    reserved: 0,
                    path,
                };
                LsReplyRepr::success(&header, pid, data)
            }
            _ => LsReplyRepr::error(&header, pid),
        };
        Some(reply.to_vec())
    }

    #[test]
    fn request_wire_bytes() {
        let b = kernel_request(PathUse::GMP, None);
        let h = NlMsgHeaderPacket::new_checked(&b[..]).unwrap();
        assert_eq!(h.nlmsg_type(), 0x1000);
        assert_eq!(h.flags().0, 0x0001);
        assert_eq!(h.nlmsg_len() as usize, b.len());
        let attrs: Vec<_> = NlAttrIter::new(&b[LS_ATTRS_OFFSET..])
            .map(Result::unwrap)
            .map(|a| (a.nla_type, a.nla_len()))
            .collect();
        assert_eq!(attrs, [(0x2004, 20), (0x2005, 20), (0x2007, 6)]);
        assert_eq!(
            &b[LS_ATTRS_OFFSET + 44..LS_ATTRS_OFFSET + 46],
            &0xFFFFu16.to_ne_bytes()
        );
    }

    #[test]
    fn resolve_round_trip_both_path_uses() {
        for (path_use, flags) in [
            (PathUse::GMP, [0x2B, 0, 0, 0]),
            (PathUse::ALL, [0x2B, 0, 0, 0]),
            (PathUse::UNIDIRECTIONAL, [0x0A, 0, 0, 0]),
        ] {
            let out = answer(&kernel_request(path_use, None), 1234).unwrap();
            assert_eq!(out.len(), 92);
            let h = NlMsgHeaderPacket::new_checked(&out[..]).unwrap();
            assert_eq!(h.nlmsg_len(), 92);
            assert_eq!((h.nlmsg_type(), h.flags().0), (0x1000, 0));
            assert_eq!((h.seq(), h.pid()), (0x55, 1234));
            let mut attr = Vec::new();
            attr.extend_from_slice(&76u16.to_ne_bytes());
            attr.extend_from_slice(&1u16.to_ne_bytes());
            assert_eq!(&out[16..20], &attr[..]);
            let want: [u8; 4] = u32::from_le_bytes(flags).to_ne_bytes();
            assert_eq!(&out[20..24], &want);
            assert_eq!(&out[24..28], &[0; 4]);
            assert_eq!(Gid::read(&out[28 + 8..]), Some(DGID.parse().unwrap()));
            let parsed = LsReplyRepr::parse(&out).unwrap();
            let LsReplyRepr::Success { data, .. } = parsed else {
                panic!("expected success, got {parsed:?}");
            };
            assert!(data.flags.contains(path_use.required_flags().unwrap()));
        }
    }

    #[test]
    fn unknown_mandatory_attribute_gives_error_reply() {
        let req = kernel_request(PathUse::GMP, Some((0x2009, &[10, 0, 0, 2])));
        assert!(LsRequestRepr::parse(&req).is_err());
        let out = answer(&req, 1).unwrap();
        let h = NlMsgHeaderPacket::new_checked(&out[..]).unwrap();
        assert_eq!(out.len(), 16);
        assert_eq!(
            (h.nlmsg_len(), h.flags().0, h.nlmsg_type()),
            (16, 0x0100, 0x1000)
        );
        assert_eq!(h.seq(), 0x55);
    }

    #[test]
    fn a_resolve_shaped_message_of_another_op_gets_no_reply() {
        // Typed IP_RESOLVE (the kernel ignores an error reply to one) or SET_TIMEOUT
        // (another process's, never the kernel asking).
        for t in [0x1002, 0x1001] {
            let mut req = kernel_request(PathUse::GMP, None);
            NlMsgHeaderPacket::new_unchecked(&mut req[..]).set_nlmsg_type(t);
            assert_eq!(answer(&req, 1), None, "{t:#x}");
        }
    }
}
