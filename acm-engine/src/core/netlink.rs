//! Kernel path requests over RDMA netlink (docs/protocol/netlink-ls.md): RDMA_NL_LS
//! RESOLVE requests are turned into path resolves and answered through the same
//! resolution path.

use super::Core;
use crate::Engine;
use crate::log::{Level, log};
use crate::request::ReplyTo;
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpFlags, HEADER_LEN, HeaderRepr, MessagePacket, Opcode,
};
use acm_proto::netlink::{LsOp, LsReplyRepr, LsRequestRepr, NlMsgHeaderRepr, PathUse};
use acm_proto::path_record::{PathDataRepr, PathFlags, PathRecordRepr};

/// The netlink client number of the LS service.
const RDMA_NL_LS: u16 = 4;

impl Engine {
    pub(crate) fn netlink_request(&mut self, bytes: &[u8]) {
        let Ok(hdr) = NlMsgHeaderRepr::parse(bytes) else {
            log!(
                self.core,
                Level::Verbose,
                "acm_nl_receive",
                "malformed netlink message dropped"
            );
            return;
        };
        if hdr.client() != RDMA_NL_LS {
            if !self.core.netlink_warned {
                self.core.netlink_warned = true;
                log!(
                    self.core,
                    Level::Basic,
                    "acm_nl_receive",
                    "netlink message for client {} dropped",
                    hdr.client()
                );
            }
            return;
        }
        if hdr.op() != LsOp::RESOLVE {
            log!(
                self.core,
                Level::Verbose,
                "acm_nl_receive",
                "unsupported LS op {}; error reply",
                hdr.op()
            );
            self.core
                .netlink_reply(hdr.msg_type, hdr.seq, PathUse::ALL, None);
            return;
        }
        let req = match LsRequestRepr::parse(bytes) {
            Ok(r) => r,
            Err(e) => {
                log!(
                    self.core,
                    Level::Verbose,
                    "acm_nl_receive",
                    "invalid LS request: {e}"
                );
                self.core
                    .netlink_reply(hdr.msg_type, hdr.seq, PathUse::ALL, None);
                return;
            }
        };
        let path_use = req.resolve.path_use;
        let mut path = PathRecordRepr {
            reversible: path_use != PathUse::UNIDIRECTIONAL,
            numpath: 1,
            ..PathRecordRepr::default()
        };
        let mut flags = EpFlags(0);
        if let Some(s) = req.service_id {
            path.service_id = s;
        }
        if let Some(g) = req.dgid {
            path.dgid = g;
            flags = flags.with(EpFlags::DEST);
        }
        if let Some(g) = req.sgid {
            path.sgid = g;
            flags = flags.with(EpFlags::SOURCE);
        }
        if let Some(t) = req.tclass {
            path.tclass = t;
        }
        if let Some(p) = req.pkey {
            path.pkey = p;
        }
        if let Some(q) = req.qos_class {
            path.qos_class = q & 0x0FFF;
        }
        // The kernel's request as the client RESOLVE it amounts to: one PATH entry.
        let mut msg = [0u8; HEADER_LEN + ENTRY_LEN];
        let mut m = MessagePacket::new_unchecked(&mut msg[..]);
        HeaderRepr {
            length: (HEADER_LEN + ENTRY_LEN) as u16,
            ..HeaderRepr::new(Opcode::RESOLVE)
        }
        .emit(m.header_mut().into_inner(), Direction::Request);
        if let Some(mut e) = m.entry_mut(0) {
            e.set_flags(flags);
            e.set_addr_type(AddrType::PATH);
            e.info_mut().copy_from_slice(&path.to_bytes());
        }
        let to = ReplyTo::Kernel {
            nl_type: hdr.msg_type,
            seq: hdr.seq,
            path_use,
        };
        self.resolve_request(to, &msg);
    }
}

impl Core {
    /// Queues the kernel's reply: the path with the flags its use needs, or an error
    /// (flags RDMA_NL_LS_F_ERR) that sends the kernel to the SA itself.
    pub(crate) fn netlink_reply(
        &mut self,
        nl_type: u16,
        seq: u32,
        path_use: PathUse,
        path: Option<&[u8; 64]>,
    ) {
        let request = NlMsgHeaderRepr {
            msg_type: nl_type,
            seq,
            ..NlMsgHeaderRepr::default()
        };
        let pid = self.config.netlink_pid;
        let reply = match path.and_then(|p| PathRecordRepr::parse(p).ok()) {
            Some(path) => {
                let flags = if path_use == PathUse::UNIDIRECTIONAL {
                    PathFlags::UNIDIRECTIONAL_REPLY
                } else {
                    PathFlags::IBACMP_REPLY
                };
                LsReplyRepr::success(
                    &request,
                    pid,
                    PathDataRepr {
                        flags,
                        reserved: 0,
                        path,
                    },
                )
            }
            None => LsReplyRepr::error(&request, pid),
        };
        self.push_client(crate::io::ClientOutput::Netlink(reply.to_vec()));
    }
}
