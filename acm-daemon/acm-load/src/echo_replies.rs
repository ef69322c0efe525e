//! The fixed replies both echo servers send (`echo`, the fast one, and
//! `echo_reference`, the reference daemon's way of serving): the sizes and contents a
//! real daemon answers with, so that the two yardsticks differ only in how they move
//! bytes.

use acm_proto::client::{
    ClientMessage, Direction, EpAddrRepr, EpConfigRepr, EpFlags, EpQueryReplyRepr, EpQueryRepr,
    HeaderRepr, Opcode, Operation, PerfQueryRepr, PerfReplyRepr, ResolveRepr, Status,
};
use acm_proto::path_record::{PathFlags, PathRecordRepr};
use acm_proto::{Bytes64, Mtu, Rate, Selected};

/// The fixed replies, one per operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replies {
    resolve: Vec<u8>,
    perf: Vec<u8>,
    ep: Vec<u8>,
}

impl Default for Replies {
    fn default() -> Self {
        Self::new()
    }
}

impl Replies {
    /// What the reference daemon answers on the capture fabric: 10.0.0.1 → 10.0.0.2
    /// (`resolve_preloaded_ip`), seven counters, endpoint 1 with one address.
    #[must_use]
    pub(crate) fn new() -> Self {
        let path = PathRecordRepr {
            dgid: "fe80::2:c903:a0:b002"
                .parse::<std::net::Ipv6Addr>()
                .map(Into::into)
                .unwrap_or_default(),
            sgid: "fe80::2:c903:a0:b001"
                .parse::<std::net::Ipv6Addr>()
                .map(Into::into)
                .unwrap_or_default(),
            dlid: 2,
            slid: 1,
            reversible: true,
            numpath: 1,
            pkey: 0xffff,
            mtu: Selected::exactly(Mtu::MTU_2048),
            rate: Selected::exactly(Rate::RATE_10),
            packet_lifetime: Selected::exactly(18),
            ..PathRecordRepr::default()
        };
        let mut resolve = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        // One entry of the eight that fit.
        let _ = resolve.push(EpAddrRepr::path(EpFlags(PathFlags::IBACMP_REPLY.0), &path));
        let perf = PerfReplyRepr::answer(
            &PerfQueryRepr::new(0, None).header,
            Status::SUCCESS,
            &[0; 7],
        );
        let ep = EpQueryReplyRepr::answer(
            &EpQueryRepr::new(1, 0),
            Some(EpConfigRepr {
                dev_guid: 0x0002_c903_00a0_b000,
                port_num: 1,
                phys_port_cnt: 1,
                reserved: 0,
                pkey: 0xffff,
                addr_cnt: 1,
                prov_name: Bytes64::zero_padded(b"ibacmp"),
                addrs: vec![Bytes64::zero_padded(b"10.0.0.1")],
            }),
        );
        Self {
            resolve: ClientMessage::Resolve(resolve).to_vec(Direction::Response),
            perf: ClientMessage::PerfReply(perf).to_vec(Direction::Response),
            ep: ClientMessage::EpReply(ep).to_vec(Direction::Response),
        }
    }

    /// The reply to a request for `operation` (`acm_proto::client::request_len` has already refused
    /// operations other than RESOLVE, PERF_QUERY and EP_QUERY).
    #[must_use]
    pub(crate) fn for_operation(&self, operation: Operation) -> &[u8] {
        if operation == Operation::RESOLVE {
            &self.resolve
        } else if operation == Operation::PERF_QUERY {
            &self.perf
        } else {
            &self.ep
        }
    }
}
