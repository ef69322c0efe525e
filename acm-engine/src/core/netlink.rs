//! Kernel requests over RDMA netlink (docs/protocol/netlink-ls.md): RDMA_NL_LS RESOLVE
//! requests become path resolves and IP_RESOLVE requests destination resolves, both
//! answered through the same resolution path. A RESOLVE is answered before the kernel
//! stops waiting for it ([`super::kernel_wait`]); an IP_RESOLVE whenever its resolution
//! succeeds, since the kernel takes that answer until its caller's own timeout and has
//! no use for an error.
//!
//! Only what the kernel acts on is sent: nothing answers a message the kernel did not
//! send as a request (another process's reply or SET_TIMEOUT, an op the kernel has no
//! handler for), since the kernel would refuse the answer.

use super::Core;
use super::client::Request;
use super::provider_call::Call;
use crate::log::{Level, log};
use crate::request::{KernelAsk, ReplyTo};
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpAddrPacket, EpAddrRepr, EpFlags, HEADER_LEN, HeaderRepr,
    MessagePacket, Opcode,
};
use acm_proto::netlink::{
    IpResolveReplyRepr, IpResolveRequestRepr, LsOp, LsReplyRepr, LsRequestRepr, NlMsgFlags,
    NlMsgHeaderRepr, PathUse, SetTimeoutRepr,
};
use acm_proto::path_record::{PathDataRepr, PathFlags, PathRecordRepr};
use core::net::IpAddr;

/// The netlink client number of the LS service.
const RDMA_NL_LS: u16 = 4;

impl Core {
    /// A message from the kernel: a path or IP resolve for a provider, or nothing.
    pub(crate) fn netlink_request(&mut self, bytes: &[u8]) -> Option<Call<'static>> {
        let Ok(hdr) = NlMsgHeaderRepr::parse(bytes) else {
            log!(
                self,
                Level::Verbose,
                "acm_nl_receive",
                "malformed netlink message dropped"
            );
            return None;
        };
        if hdr.client() != RDMA_NL_LS {
            if !self.netlink_warned {
                self.netlink_warned = true;
                log!(
                    self,
                    Level::Basic,
                    "acm_nl_receive",
                    "netlink message for client {} dropped",
                    hdr.client()
                );
            }
            return None;
        }
        if !hdr.flags.contains(NlMsgFlags::REQUEST) {
            // Another listener's reply (a second daemon on the group; the kernel never
            // hands a sender its own multicast back): nothing the kernel asks.
            log!(
                self,
                Level::Verbose,
                "acm_nl_receive",
                "LS message without NLM_F_REQUEST (op {}) ignored",
                hdr.op()
            );
            return None;
        }
        if hdr.op() == LsOp::IP_RESOLVE {
            return self.netlink_ip_resolve(&hdr, bytes);
        }
        if hdr.op() != LsOp::RESOLVE {
            // The kernel sends only RESOLVE and IP_RESOLVE; a SET_TIMEOUT here is another
            // process's, and an answer to any other op would be refused by the kernel.
            log!(
                self,
                Level::Verbose,
                "acm_nl_receive",
                "LS op {} is not a kernel request; ignored",
                hdr.op()
            );
            return None;
        }
        let req = match LsRequestRepr::parse(bytes) {
            Ok(r) => r,
            Err(e) => {
                log!(
                    self,
                    Level::Verbose,
                    "acm_nl_receive",
                    "invalid LS request: {e}"
                );
                self.send_netlink_reply(hdr.msg_type, hdr.seq, KernelAsk::Path(PathUse::ALL), None);
                return None;
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
        let ask = KernelAsk::Path(path_use);
        self.kernel_waits
            .start(self.now, hdr.msg_type, hdr.seq, path_use);
        let to = ReplyTo::Kernel {
            nl_type: hdr.msg_type,
            seq: hdr.seq,
            ask,
        };
        // One PATH entry.
        self.resolve_as_client(to, |mut e| {
            e.set_flags(flags);
            e.set_addr_type(AddrType::PATH);
            e.info_mut().copy_from_slice(&path.to_bytes());
        })
    }

    /// An IP_RESOLVE: the destination resolved as a client's RESOLVE naming no source
    /// (the host's routing picks it), answered with the path's DGID
    /// (docs/protocol/netlink-ls.md §7). Nothing answers a failure: the kernel ignores
    /// an error reply and keeps waiting until its caller's timeout either way.
    fn netlink_ip_resolve(&mut self, hdr: &NlMsgHeaderRepr, bytes: &[u8]) -> Option<Call<'static>> {
        let req = match IpResolveRequestRepr::parse(bytes) {
            Ok(r) => r,
            Err(e) => {
                log!(
                    self,
                    Level::Verbose,
                    "acm_nl_receive",
                    "invalid IP_RESOLVE request (seq {}) not answered: {e}",
                    hdr.seq
                );
                return None;
            }
        };
        log!(
            self,
            Level::Verbose,
            "acm_nl_receive",
            "kernel IP_RESOLVE {} (seq {}, ifindex {})",
            req.addr,
            hdr.seq,
            req.ifindex
        );
        let dest = match req.addr {
            IpAddr::V4(a) => EpAddrRepr::ipv4(EpFlags::DEST, a),
            IpAddr::V6(a) => EpAddrRepr::ipv6(EpFlags::DEST, a),
        };
        let to = ReplyTo::Kernel {
            nl_type: hdr.msg_type,
            seq: hdr.seq,
            ask: KernelAsk::Gid,
        };
        self.resolve_as_client(to, |e| dest.emit(e.into_inner()))
    }

    /// Resolves a kernel request as the client RESOLVE it amounts to: one entry, which
    /// `fill` writes.
    fn resolve_as_client(
        &mut self,
        to: ReplyTo,
        fill: impl FnOnce(EpAddrPacket<&mut [u8]>),
    ) -> Option<Call<'static>> {
        let hdr = HeaderRepr {
            length: (HEADER_LEN + ENTRY_LEN) as u16,
            ..HeaderRepr::new(Opcode::RESOLVE)
        };
        let mut msg = [0u8; HEADER_LEN + ENTRY_LEN];
        hdr.emit(&mut msg, Direction::Request);
        if let Some(e) = MessagePacket::new_unchecked(&mut msg[..]).entry_mut(0) {
            fill(e);
        }
        let req = Request {
            hdr,
            msg: MessagePacket::new_unchecked(&msg[..]),
        };
        self.resolve_request(to, &req)
    }

    /// Answers every kernel RESOLVE whose wait is almost over with an error, so that
    /// the kernel asks the SA now rather than when its own wait ends.
    pub(crate) fn expire_kernel_waits(&mut self) {
        while let Some(w) = self.kernel_waits.pop_expired(self.now) {
            log!(
                self,
                Level::Verbose,
                "acm_nl_send",
                "kernel request seq {} not resolved within {} ms; error reply so the kernel asks the SA now",
                w.seq,
                self.kernel_waits.budget().as_millis()
            );
            self.send_netlink_reply(w.nl_type, w.seq, KernelAsk::Path(w.path_use), None);
        }
    }

    /// Tells the kernel how long to wait for our answers, when `kernel_timeout` asks.
    /// The wait counts only once the driver says the message reached the kernel
    /// ([`crate::Input::KernelTimeoutSent`]).
    pub(crate) fn set_kernel_timeout(&mut self) {
        let ms = self.config.options.kernel_timeout;
        if ms == 0 {
            return;
        }
        let pid = self.config.netlink_pid;
        let wait_ms = SetTimeoutRepr::kernel_clamp(ms);
        log!(
            self,
            Level::Config,
            "acm_nl_send",
            "asking the kernel to wait {wait_ms} ms for path answers"
        );
        self.push_client(crate::io::ClientOutput::KernelTimeout {
            message: SetTimeoutRepr::new(0, pid, ms).to_vec(),
            wait_ms,
        });
    }

    /// The kernel received our SET_TIMEOUT: RESOLVEs are timed by its new wait, those
    /// waiting already included (the kernel moves their deadlines too).
    pub(crate) fn kernel_timeout_sent(&mut self, wait_ms: u32) {
        self.kernel_waits.set_wait(wait_ms);
        log!(
            self,
            Level::Config,
            "acm_nl_send",
            "the kernel waits {} ms for path answers",
            self.kernel_waits.wait_ms()
        );
        self.expire_kernel_waits();
    }

    /// Answers a kernel request through its resolution. A RESOLVE's answer is sent if
    /// the kernel still waits for it and dropped if it was answered already (its wait
    /// ran out); an IP_RESOLVE's is sent when it has a GID, however late (the kernel
    /// takes it until its caller's timeout), and not at all when it has none (the
    /// kernel has no use for an error).
    pub(crate) fn netlink_reply(
        &mut self,
        nl_type: u16,
        seq: u32,
        ask: KernelAsk,
        path: Option<&[u8; 64]>,
    ) {
        if ask == KernelAsk::Gid {
            if path.is_none() {
                log!(
                    self,
                    Level::Verbose,
                    "acm_nl_send",
                    "kernel IP_RESOLVE seq {seq} not resolved; no answer (the kernel ignores errors)"
                );
                return;
            }
        } else if !self.kernel_waits.finish(nl_type, seq) {
            log!(
                self,
                Level::Verbose,
                "acm_nl_send",
                "answer to kernel request seq {seq} dropped: it was answered when its wait ran out"
            );
            return;
        }
        self.send_netlink_reply(nl_type, seq, ask, path);
    }

    /// Queues the kernel's reply: for a RESOLVE the path with the flags its use needs,
    /// or an error (flags RDMA_NL_LS_F_ERR), which sends the kernel to the SA itself;
    /// for an IP_RESOLVE the path's DGID.
    pub(crate) fn send_netlink_reply(
        &mut self,
        nl_type: u16,
        seq: u32,
        ask: KernelAsk,
        path: Option<&[u8; 64]>,
    ) {
        let request = NlMsgHeaderRepr {
            msg_type: nl_type,
            seq,
            ..NlMsgHeaderRepr::default()
        };
        let pid = self.config.netlink_pid;
        let path = path.and_then(|p| PathRecordRepr::parse(p).ok());
        let reply = match ask {
            // The kernel ignores an error reply to an IP_RESOLVE.
            KernelAsk::Gid => match path {
                Some(path) => IpResolveReplyRepr::answer(&request, pid, Some(path.dgid)).to_vec(),
                None => return,
            },
            KernelAsk::Path(path_use) => match path {
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
                    .to_vec()
                }
                None => LsReplyRepr::error(&request, pid).to_vec(),
            },
        };
        self.push_client(crate::io::ClientOutput::Netlink(reply));
    }
}
