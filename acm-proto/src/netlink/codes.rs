//! RDMA netlink code points for the local-service (LS) client: socket protocol, multicast
//! group, the message-type split into client and op, LS ops, LS attribute types and the
//! resolve header's path-use values. See docs/protocol/netlink-ls.md,
//! docs/protocol/constants.md.

use crate::path_record::PathFlags;

/// The netlink protocol number of RDMA netlink (`socket(AF_NETLINK, SOCK_RAW, 20)`).
pub const NETLINK_RDMA: i32 = 20;

/// The RDMA netlink client number of the local service (bits 15:10 of `nlmsg_type`).
pub const RDMA_NL_LS: u16 = 4;

/// The RDMA netlink multicast group the kernel sends LS requests to.
pub const RDMA_NL_GROUP_LS: u32 = 3;

/// [`RDMA_NL_GROUP_LS`] as a `nl_groups` bit mask (`1 << (3 - 1)` = 0x4): what the daemon
/// binds to and what it addresses its replies to.
pub const RDMA_NL_GROUP_LS_MASK: u32 = 1 << (RDMA_NL_GROUP_LS - 1);

/// Number of low `nlmsg_type` bits that hold the op.
const OP_BITS: u16 = 10;

/// Mask of the op bits of `nlmsg_type` (bits 9:0).
const OP_MASK: u16 = (1 << OP_BITS) - 1;

/// The RDMA netlink client of a message type (bits 15:10).
#[must_use]
pub const fn rdma_nl_client(nlmsg_type: u16) -> u16 {
    nlmsg_type >> OP_BITS
}

/// The op of a message type (bits 9:0).
#[must_use]
pub const fn rdma_nl_op(nlmsg_type: u16) -> u16 {
    nlmsg_type & OP_MASK
}

/// The message type for a client and an op: `client << 10 | op`. Bits of `op` above bit 9
/// are dropped.
#[must_use]
pub const fn rdma_nl_type(client: u16, op: u16) -> u16 {
    (client << OP_BITS) | (op & OP_MASK)
}

open_enum! {
    /// An RDMA_NL_LS op (the low 10 bits of `nlmsg_type`).
    pub struct LsOp(u16) {
        /// A PathRecord lookup from the kernel (type 0x1000). The only op ibacm serves.
        RESOLVE = 0,
        /// Userspace tells the kernel its local-service timeout (type 0x1001,
        /// [`SetTimeoutRepr`](super::SetTimeoutRepr)). The reference never sends it; ours
        /// does when `kernel_timeout` is set.
        SET_TIMEOUT = 1,
        /// Address resolution through an IB gateway (type 0x1002,
        /// [`IpResolveRequestRepr`](super::IpResolveRequestRepr)). The reference answers
        /// it with an error reply, which the kernel ignores
        /// (docs/reference-quirks.md §29); ours with the GID, when it has one.
        IP_RESOLVE = 2,
    }
}

impl LsOp {
    /// The full `nlmsg_type` of this op on the LS client, e.g. 0x1000 for RESOLVE.
    #[must_use]
    pub const fn msg_type(self) -> u16 {
        rdma_nl_type(RDMA_NL_LS, self.0)
    }

    /// The op of a message type, whatever its client.
    #[must_use]
    pub const fn of_type(nlmsg_type: u16) -> Self {
        Self(rdma_nl_op(nlmsg_type))
    }
}

open_enum! {
    /// An RDMA_NL_LS attribute type (`nla_type` with the three flag bits masked off).
    pub struct LsAttrType(u16) {
        /// `ib_path_rec_data` (72 bytes), in replies.
        PATH_RECORD = 1,
        /// The local-service timeout in ms (u32), in SET_TIMEOUT.
        TIMEOUT = 2,
        /// ServiceID, u64 in host order.
        SERVICE_ID = 3,
        /// Destination GID, 16 bytes.
        DGID = 4,
        /// Source GID, 16 bytes.
        SGID = 5,
        /// Traffic class, u8.
        TCLASS = 6,
        /// P_Key, u16 in host order.
        PKEY = 7,
        /// QoS class, u16 in host order.
        QOS_CLASS = 8,
        /// An IPv4 address (IP_RESOLVE).
        IPV4 = 9,
        /// An IPv6 address (IP_RESOLVE).
        IPV6 = 10,
    }
}

impl LsAttrType {
    /// The exact payload length of the six attributes a RESOLVE request merges into its
    /// path (SERVICE_ID 8, DGID 16, SGID 16, TCLASS 1, PKEY 2, QOS_CLASS 2); `None` for every
    /// other type, which a resolver treats as unknown.
    #[must_use]
    pub const fn request_payload_len(self) -> Option<usize> {
        match self {
            Self::SERVICE_ID => Some(8),
            Self::DGID | Self::SGID => Some(16),
            Self::TCLASS => Some(1),
            Self::PKEY | Self::QOS_CLASS => Some(2),
            _ => None,
        }
    }

    /// What a parser says of an attribute of this type whose payload has the wrong
    /// size: the size each message needs it to have.
    pub(crate) const fn size_rule(self) -> &'static str {
        match self {
            Self::PATH_RECORD => "PATH_RECORD needs a 72-byte ib_path_rec_data (nla_len 76)",
            Self::TIMEOUT => "TIMEOUT needs a 4-byte payload (nla_len 8)",
            Self::SERVICE_ID => "SERVICE_ID needs an 8-byte payload (nla_len 12)",
            Self::DGID => "DGID needs a 16-byte payload (nla_len 20)",
            Self::SGID => "SGID needs a 16-byte payload (nla_len 20)",
            Self::TCLASS => "TCLASS needs a 1-byte payload (nla_len 5)",
            Self::PKEY => "PKEY needs a 2-byte payload (nla_len 6)",
            Self::QOS_CLASS => "QOS_CLASS needs a 2-byte payload (nla_len 6)",
            Self::IPV4 => "IPV4 needs a 4-byte payload (nla_len 8)",
            Self::IPV6 => "IPV6 needs a 16-byte payload (nla_len 20)",
            _ => "unexpected attribute size",
        }
    }
}

open_enum! {
    /// `path_use` in the resolve header: what the kernel wants the path for.
    pub struct PathUse(u8) {
        /// Any path; newer kernels use it for reversible queries.
        ALL = 0,
        /// A one-way path.
        UNIDIRECTIONAL = 1,
        /// A path for management packets; older kernels use it for reversible queries.
        GMP = 2,
    }
}

impl PathUse {
    /// The flags the kernel requires in a reply's `ib_path_rec_data` before it accepts
    /// the path (docs/protocol/netlink-ls.md §6): UNIDIRECTIONAL needs PRIMARY|OUTBOUND,
    /// GMP needs PRIMARY|GMP|BIDIRECTIONAL, ALL needs PRIMARY. `None` for an unknown
    /// value.
    ///
    /// This is the kernel's acceptance rule, for a simulated kernel; which flags ibacm puts
    /// in a reply is the engine's choice.
    #[must_use]
    pub const fn required_flags(self) -> Option<PathFlags> {
        match self {
            Self::ALL => Some(PathFlags::PRIMARY),
            Self::UNIDIRECTIONAL => Some(PathFlags::PRIMARY.with(PathFlags::OUTBOUND)),
            Self::GMP => Some(
                PathFlags::PRIMARY
                    .with(PathFlags::GMP)
                    .with(PathFlags::BIDIRECTIONAL),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_split_and_join() {
        assert_eq!(LsOp::RESOLVE.msg_type(), 0x1000);
        assert_eq!(LsOp::SET_TIMEOUT.msg_type(), 0x1001);
        assert_eq!(LsOp::IP_RESOLVE.msg_type(), 0x1002);
        assert_eq!(rdma_nl_client(0x1002), RDMA_NL_LS);
        assert_eq!(rdma_nl_op(0x1002), 2);
        assert_eq!(LsOp::of_type(0x1002), LsOp::IP_RESOLVE);
        assert_eq!(rdma_nl_client(0x0C00), 3);
        assert_eq!(rdma_nl_type(4, 0x7FF), 0x13FF);
        assert_eq!(RDMA_NL_GROUP_LS_MASK, 0x4);
        assert_eq!(NETLINK_RDMA, 20);
    }

    #[test]
    fn request_payload_lengths() {
        let lens: alloc::vec::Vec<_> = LsAttrType::KNOWN
            .iter()
            .map(|t| t.request_payload_len())
            .collect();
        assert_eq!(
            lens,
            [
                None,
                None,
                Some(8),
                Some(16),
                Some(16),
                Some(1),
                Some(2),
                Some(2),
                None,
                None
            ]
        );
        assert_eq!(LsAttrType(0x1FFF).request_payload_len(), None);
    }

    #[test]
    fn kernel_acceptance_masks() {
        assert_eq!(
            PathUse::UNIDIRECTIONAL.required_flags(),
            Some(PathFlags::UNIDIRECTIONAL_REPLY)
        );
        assert_eq!(PathUse::GMP.required_flags(), Some(PathFlags::IBACMP_REPLY));
        assert_eq!(PathUse::ALL.required_flags(), Some(PathFlags::PRIMARY));
        assert_eq!(PathUse(3).required_flags(), None);
        // Both reply flag values ibacm uses satisfy the mask of the use that selects them.
        assert!(PathFlags::IBACMP_REPLY.contains(PathFlags::PRIMARY));
    }
}
