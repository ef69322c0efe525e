//! A request in a provider's hands: what it asks ([`Resolve`]), who gets the answer and
//! what the answer must echo ([`PendingReply`]), how it ends ([`Outcome`]), and the
//! reply bytes each outcome becomes (built with acm-proto's views).
//!
//! The core makes a `PendingReply` when it hands a request to a provider, and the
//! provider gives it back exactly once through [`crate::provider::Ctx::complete`]. It is
//! move-only: it cannot be answered twice, and a debug build logs a warning for every
//! one a provider drops unanswered (its client would wait for ever).

use crate::addr::Address;
use crate::io::ConnId;
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpAddrPacket, EpFlags, HEADER_LEN, HeaderRepr, MessagePacket,
    Status,
};
use acm_proto::netlink::PathUse;
use acm_proto::path_record::PathFlags;
use alloc::boxed::Box;

/// Where a reply goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyTo {
    /// A client connection, in the life it had when the request arrived (a driver may
    /// reuse an id once the connection closed).
    Client {
        /// The connection.
        conn: ConnId,
        /// Which life of `conn`.
        epoch: u64,
    },
    /// The kernel, through RDMA_NL_LS.
    Kernel {
        /// The request's nlmsg type (echoed).
        nl_type: u16,
        /// The request's sequence number (echoed).
        seq: u32,
        /// What it asked for, which shapes the reply.
        ask: KernelAsk,
    },
}

/// What a kernel request asks for (docs/protocol/netlink-ls.md §4 and §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelAsk {
    /// A PathRecord (RESOLVE), for this use (which decides the reply's path flags).
    Path(PathUse),
    /// The destination GID of an IP address (IP_RESOLVE), taken from the resolved path.
    Gid,
}

/// What kind of reply a [`PendingReply`] becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyKind {
    /// A resolve reply; `src_out` when the daemon chose the source (entry 1 echoed).
    Resolve { src_out: bool },
    /// A QUERY_SA reply in the "query" style (request echoed, path replaced).
    Query,
}

/// Counts replies dropped unanswered (debug builds): shared by the core and every
/// [`PendingReply`] it hands out.
#[cfg(debug_assertions)]
pub(crate) type DropCount = alloc::rc::Rc<core::cell::Cell<u32>>;

/// Who a pending reply goes to, and what it must echo. Providers keep these in their
/// queues and hand each back once through [`crate::provider::Ctx::complete`]; the core
/// builds the bytes.
#[derive(Debug)]
pub struct PendingReply {
    pub(crate) to: ReplyTo,
    /// The request's header, as parsed when it arrived, echoed.
    hdr: HeaderRepr,
    /// The scratch source entry to echo (`src_out`), or the query's entry; `None`
    /// reads as zeros. Boxed: most resolves name their source and need none, and a
    /// storm keeps one pending reply per destination.
    entry: Option<Box<[u8; ENTRY_LEN]>>,
    kind: ReplyKind,
    /// Where a debug build counts this reply if it is dropped unanswered; `None` once
    /// answered.
    #[cfg(debug_assertions)]
    unanswered: Option<DropCount>,
}

impl PendingReply {
    pub(crate) fn new(
        to: ReplyTo,
        hdr: HeaderRepr,
        entry: Option<[u8; ENTRY_LEN]>,
        kind: ReplyKind,
        #[cfg(debug_assertions)] dropped: &DropCount,
    ) -> Self {
        Self {
            to,
            hdr,
            entry: entry.map(Box::new),
            kind,
            #[cfg(debug_assertions)]
            unanswered: Some(alloc::rc::Rc::clone(dropped)),
        }
    }

    /// The client connection (and its life) this reply goes to; `None` for the kernel.
    pub(crate) fn client(&self) -> Option<(ConnId, u64)> {
        match self.to {
            ReplyTo::Client { conn, epoch } => Some((conn, epoch)),
            ReplyTo::Kernel { .. } => None,
        }
    }

    /// Drops a reply whose client has gone: there is nobody to answer, and nothing is
    /// counted (a debug build would otherwise report it as dropped unanswered).
    pub(crate) fn discard(#[allow(unused_mut)] mut self) {
        #[cfg(debug_assertions)]
        {
            self.unanswered = None;
        }
    }

    /// Whether this is a resolve (whose status the global counters count).
    pub(crate) fn is_resolve(&self) -> bool {
        matches!(self.kind, ReplyKind::Resolve { .. })
    }

    /// The entry, zeros when there is none.
    fn entry(&self) -> [u8; ENTRY_LEN] {
        self.entry.as_deref().copied().unwrap_or([0; ENTRY_LEN])
    }

    /// Builds the reply `outcome` makes of this request into `buf` (at least 160
    /// bytes). Returns where it goes, its length, the path it carries (for a kernel
    /// reply) and its status.
    #[inline]
    pub(crate) fn answer<'p>(
        #[allow(unused_mut)] mut self,
        outcome: Outcome<'p>,
        buf: &mut [u8],
    ) -> (ReplyTo, usize, Option<&'p [u8; 64]>, Status) {
        #[cfg(debug_assertions)]
        {
            self.unanswered = None;
        }
        // Only a query and a resolve whose source the daemon chose echo an entry.
        match self.kind {
            ReplyKind::Query => {
                let mut msg = MessagePacket::new_unchecked(&mut *buf);
                let entry = self.entry();
                let echoed = EpAddrPacket::new_unchecked(&entry[..]);
                let (status, path) = match outcome {
                    Outcome::Query { status, path } => (status, *path),
                    Outcome::Path(p) => (Status::SUCCESS, *p),
                    Outcome::Failed(s) => {
                        let mut p = [0u8; 64];
                        p.copy_from_slice(echoed.info());
                        (s, p)
                    }
                };
                // The request's header as it came (its length in the request's byte
                // order), with the ACK bit and the status.
                self.hdr
                    .emit(msg.header_mut().into_inner(), Direction::Request);
                let mut hdr = msg.header_mut();
                hdr.set_opcode(self.hdr.opcode.with_ack());
                hdr.set_status(status);
                if let Some(mut e) = msg.entry_mut(0) {
                    e.set_flags(echoed.flags());
                    e.set_addr_type(echoed.addr_type());
                    e.set_reserved(echoed.reserved());
                    e.info_mut().copy_from_slice(&path);
                }
                (self.to, HEADER_LEN + ENTRY_LEN, None, status)
            }
            ReplyKind::Resolve { src_out } => {
                let (status, path) = match outcome {
                    Outcome::Path(p) => (Status::SUCCESS, Some(p)),
                    Outcome::Failed(s) => (s, None),
                    Outcome::Query { status, path } => {
                        (status, (status == Status::SUCCESS).then_some(path))
                    }
                };
                let echoed = src_out.then(|| self.entry());
                let len = emit_resolve_reply(&self.hdr, status, path, echoed.as_ref(), buf);
                (self.to, len, path, status)
            }
        }
    }
}

/// Writes the reply to the resolve whose header is `hdr` into `buf`: the header with
/// `status`, and on success the path as entry 0, then `echoed` (the source entry the
/// daemon chose) as entry 1. Returns its length; every byte of `buf[..len]` is
/// written. The engine's replies and the published cache view's
/// ([`crate::CacheView::answer`]) are both built here, so that a hit answered by
/// either is the same bytes.
///
/// `buf` must hold the reply: `HEADER_LEN + ENTRY_LEN` bytes for a path, one entry
/// more with `echoed`. Inlined: it is the cache hit's path, the engine's and the view's.
#[inline(always)]
pub(crate) fn emit_resolve_reply(
    hdr: &HeaderRepr,
    status: Status,
    path: Option<&[u8; 64]>,
    echoed: Option<&[u8; ENTRY_LEN]>,
    buf: &mut [u8],
) -> usize {
    let mut msg = MessagePacket::new_unchecked(&mut *buf);
    let mut len = HEADER_LEN;
    if let Some(path) = path {
        if let Some(mut e) = msg.entry_mut(0) {
            e.set_flags(EpFlags(PathFlags::IBACMP_REPLY.0));
            e.set_addr_type(AddrType::PATH);
            e.set_reserved(0);
            e.info_mut().copy_from_slice(path);
        }
        len += ENTRY_LEN;
        if let Some(echoed) = echoed {
            if let Some(e) = msg.entry_mut(1) {
                e.into_inner().copy_from_slice(echoed);
            }
            len += ENTRY_LEN;
        }
    }
    let reply = HeaderRepr {
        status,
        data: [0; 3],
        length: len as u16,
        ..*hdr
    };
    reply.emit(msg.header_mut().into_inner(), Direction::Response);
    len
}

#[cfg(debug_assertions)]
impl Drop for PendingReply {
    fn drop(&mut self) {
        if let Some(count) = self.unanswered.take() {
            count.set(count.get().saturating_add(1));
        }
    }
}

/// How a resolve ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// Success with this 64-byte PathRecord.
    Path(&'a [u8; 64]),
    /// Failure with an ACM status (errno-like, or an SA class status byte).
    Failed(Status),
    /// A QUERY_SA result: the SA class status and the first 64 bytes of its data (also
    /// on failure, as the reference copies them regardless).
    Query {
        /// The SA class status, or ETIMEDOUT.
        status: Status,
        /// The record area.
        path: &'a [u8; 64],
    },
}

/// A resolve handed to a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolve {
    /// A destination resolve (name, IP, IP6, GID or LID destination).
    Dest {
        /// The source address (the client's, or the one the host's routing chose).
        src: Address,
        /// The destination.
        dest: Address,
        /// The destination entry's flags (NODELAY is read here).
        flags: EpFlags,
    },
    /// A path resolve: entry 0 is a PathRecord.
    Path {
        /// The record as the client sent it.
        path: [u8; 64],
        /// Entry 0's flags.
        flags: EpFlags,
    },
}
