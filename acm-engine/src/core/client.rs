//! Client requests (docs/protocol/client-messages.md §7–§11): framing checks, RESOLVE
//! validation and dispatch, core-generated errors, and the source-address lookup.
//! Requests are read, and the core's own replies written, through acm-proto's views.

use super::Core;
use super::provider_call::{Call, ProviderCall};
use crate::Counter;
use crate::addr::Address;
use crate::io::{ClientOutput, ConnId, FabricOp, LookupId, Output, Reply, SourceQuery};
use crate::log::{Level, log};
use crate::provider::Provider;
use crate::request::{ReplyKind, ReplyTo};
use acm_proto::Bytes64;
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpAddrPacket, EpFlags, HEADER_LEN, HeaderPacket, HeaderRepr,
    MAX_ENTRIES, MAX_REQUEST_LEN, MessagePacket, Operation, Status,
};
use alloc::boxed::Box;
use core::net::IpAddr;

/// A request the core handles: its header parsed once, when its frame is checked, and
/// handed on typed; its entries read through the view of the whole message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// The header, parsed in the request's byte order.
    pub(crate) hdr: HeaderRepr,
    /// The whole message, header included.
    pub(crate) msg: MessagePacket<&'a [u8]>,
}

/// A destination resolve waiting for the host's routing to pick its source.
#[derive(Debug, Clone)]
pub(crate) struct ParkedResolve {
    to: ReplyTo,
    hdr: HeaderRepr,
    dest: Address,
    dest_flags: EpFlags,
}

/// What a RESOLVE asks for, by its first entry (docs/protocol/client-messages.md §7).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ResolveShape<'a> {
    /// A destination resolve: entries name the source and the destination.
    Dest,
    /// A path resolve: entry 0 is a PathRecord.
    Path(EpAddrPacket<&'a [u8]>),
    /// A QUERY_SA: entry 0 is a PathRecord to ask the SA about.
    QuerySa(EpAddrPacket<&'a [u8]>),
}

/// The kind of a RESOLVE: the core's dispatch and the published cache view
/// ([`crate::CacheView`]) both decide by this.
#[inline(always)]
pub(crate) fn resolve_shape<'a>(msg: &'a MessagePacket<&'a [u8]>) -> ResolveShape<'a> {
    match msg.entry(0) {
        Some(e0) if e0.addr_type() == AddrType::PATH => {
            if e0.flags().contains(EpFlags::QUERY_SA) {
                ResolveShape::QuerySa(e0)
            } else {
                ResolveShape::Path(e0)
            }
        }
        _ => ResolveShape::Dest,
    }
}

/// A destination resolve's entries that name its ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DestEntries<'a> {
    /// The SOURCE entry, when the client names one.
    pub(crate) src: Option<EpAddrPacket<&'a [u8]>>,
    /// The DEST entry.
    pub(crate) dest: EpAddrPacket<&'a [u8]>,
}

/// A destination resolve's SOURCE entry (if any) and DEST entry, or the status it is
/// refused with (docs/protocol/client-messages.md §8.2, steps 1–2). The core and the
/// published cache view ([`crate::CacheView`]) validate by this one rule, so that the
/// view answers nothing the core would refuse.
#[inline(always)]
pub(crate) fn dest_entries<'a>(
    msg: &'a MessagePacket<&'a [u8]>,
) -> Result<DestEntries<'a>, Status> {
    let mut src: Option<EpAddrPacket<&[u8]>> = None;
    let mut dst: Option<EpAddrPacket<&[u8]>> = None;
    let entries = msg.body().chunks_exact(ENTRY_LEN).take(MAX_ENTRIES);
    for e in entries.map(EpAddrPacket::new_unchecked) {
        let (flags, ty) = (e.flags(), e.addr_type());
        if flags.contains(EpFlags::SOURCE) {
            if src.is_some() {
                return Err(Status::ESRCADDR);
            }
            if !ty.is_address() {
                return Err(Status::ESRCTYPE);
            }
            src = Some(e);
        }
        if flags.contains(EpFlags::DEST) {
            if dst.is_some() {
                return Err(Status::EDESTADDR);
            }
            if !ty.is_address() {
                return Err(Status::EDESTTYPE);
            }
            dst = Some(e);
        }
    }
    match dst {
        Some(dest) => Ok(DestEntries { src, dest }),
        None => Err(Status::EDESTTYPE),
    }
}

/// The address an entry carries.
pub(crate) fn entry_addr(e: &EpAddrPacket<&[u8]>) -> Address {
    Address {
        ty: e.addr_type(),
        bytes: Bytes64::read(e.info()).unwrap_or_default(),
    }
}

/// The PathRecord a PATH entry carries.
fn entry_path(e: &EpAddrPacket<&[u8]>) -> [u8; 64] {
    let mut path = [0u8; 64];
    path.copy_from_slice(e.info());
    path
}

impl Core {
    /// A client's request: answered by the core (a query, an error), or the call that
    /// hands it to a provider. `providers` are only read, for their counters
    /// (PERF_QUERY).
    ///
    /// This function and the RESOLVE path below it (`resolve_request`, `dest_resolve`,
    /// `dispatch_dest`, `path_resolve`) are inlined into `Engine::handle`, as is `Engine::call`: the
    /// provider call a cache hit returns is then built where the hook takes its
    /// arguments, instead of being written out through a return value and read back
    /// (about 35 user-space instructions per cache hit, `instructions.sh`).
    #[inline(always)]
    pub(crate) fn client_request(
        &mut self,
        conn: ConnId,
        bytes: &[u8],
        providers: &[Box<dyn Provider>],
    ) -> Option<Call<'static>> {
        let hdr = match acm_proto::client::frame::parse_request(bytes) {
            Ok(hdr) => hdr,
            Err(reason) => {
                log!(
                    self,
                    Level::Basic,
                    "acm_svr_receive",
                    "client {}: {reason}; closing",
                    conn.0
                );
                self.push_client(ClientOutput::Close { conn, reason });
                return None;
            }
        };
        let req = Request {
            hdr,
            msg: MessagePacket::new_unchecked(bytes),
        };
        match hdr.opcode.operation() {
            Operation::RESOLVE => {
                let state = self.conn_state(conn);
                let to = ReplyTo::Client {
                    conn,
                    epoch: state.epoch,
                };
                if state.pending >= self.limits().pending_per_conn {
                    self.counters.bump(Counter::Resolve);
                    self.refuse(to, &hdr, Status::ENOMEM)
                } else {
                    self.resolve_request(to, &req)
                }
            }
            Operation::PERF_QUERY => {
                self.perf_query(conn, &req, providers);
                None
            }
            _ => {
                self.ep_query(conn, &hdr);
                None
            }
        }
    }

    /// A client connection closed; `true` when it still had requests in a provider's
    /// hands, and the providers are to be told (most connections close once answered).
    /// Replies still owed to it are dropped when they come ([`Core::deliver`]).
    pub(crate) fn client_closed(&mut self, conn: ConnId) -> bool {
        let conns = &mut self.conns;
        let waiting = conns.remove(&conn).is_some_and(|st| st.pending > 0);
        // A table that held many connections gives room back as they close (halving
        // when under a quarter full: the rehash is paid for by the closes since).
        if conns.capacity() > 64 && conns.len() * 4 < conns.capacity() {
            conns.shrink_to(conns.len() * 2);
        }
        waiting
    }

    /// A RESOLVE from a client or built from a kernel request
    /// (docs/protocol/client-messages.md §7, §8).
    #[inline(always)]
    pub(crate) fn resolve_request(
        &mut self,
        to: ReplyTo,
        req: &Request<'_>,
    ) -> Option<Call<'static>> {
        self.counters.bump(Counter::Resolve);
        match resolve_shape(&req.msg) {
            ResolveShape::QuerySa(e0) => self.sa_query_request(to, req, &e0),
            ResolveShape::Path(e0) => self.path_resolve(to, req, &e0),
            ResolveShape::Dest => self.dest_resolve(to, req),
        }
    }

    /// A core-generated error (docs/protocol/client-messages.md §8.1): the header with
    /// the ACK bit, the status, length 16 (host order), data zeroed, no body.
    fn core_error(&mut self, to: ReplyTo, hdr: &HeaderRepr, status: Status) {
        self.counters.count_status(status);
        log!(
            self,
            Level::Verbose,
            "acm_svr_resolve",
            "request failed with status {status}"
        );
        match to {
            ReplyTo::Client { conn, epoch } => {
                if !self.client_live(conn, epoch) {
                    return;
                }
                let reply = HeaderRepr {
                    opcode: hdr.opcode.with_ack(),
                    status,
                    data: [0; 3],
                    length: HEADER_LEN as u16,
                    ..*hdr
                };
                let mut buf = [0u8; HEADER_LEN];
                reply.emit(&mut buf, Direction::Response);
                self.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&buf),
                });
            }
            ReplyTo::Kernel { nl_type, seq, ask } => {
                self.netlink_reply(nl_type, seq, ask, None);
            }
        }
    }

    /// Answers with a core-generated error: nothing for a provider to do.
    fn refuse(&mut self, to: ReplyTo, hdr: &HeaderRepr, status: Status) -> Option<Call<'static>> {
        self.core_error(to, hdr, status);
        None
    }

    /// How many requests the client `to` names has waiting, if it is a client still
    /// connected in the life the request came in.
    fn pending_of(&mut self, to: ReplyTo) -> Option<&mut u32> {
        let ReplyTo::Client { conn, epoch } = to else {
            return None;
        };
        let st = self.conns.get_mut(&conn)?;
        (st.epoch == epoch).then_some(&mut st.pending)
    }

    /// Notes that a client has one more request in a provider's hands.
    fn track(&mut self, to: ReplyTo) {
        if let Some(n) = self.pending_of(to) {
            *n += 1;
        }
    }

    /// Notes that a client's request left a provider's hands.
    fn untrack(&mut self, to: ReplyTo) {
        if let Some(n) = self.pending_of(to) {
            *n = n.saturating_sub(1);
        }
    }

    /// Destination resolve (validation and handling:
    /// docs/protocol/client-messages.md §7, §8.2).
    #[inline(always)]
    fn dest_resolve(&mut self, to: ReplyTo, req: &Request<'_>) -> Option<Call<'static>> {
        let hdr = &req.hdr;
        let DestEntries { src, dest: de } = match dest_entries(&req.msg) {
            Ok(entries) => entries,
            Err(status) => return self.refuse(to, hdr, status),
        };
        let dest = entry_addr(&de);
        let dest_flags = de.flags();
        if let Some(se) = src {
            let src = entry_addr(&se);
            return self.dispatch_dest(to, *hdr, src, dest, dest_flags, None);
        }
        let Some(ip) = dest.as_ip() else {
            return self.refuse(to, hdr, Status::EDESTTYPE);
        };
        if self.lookups.len() >= self.limits().source_lookups {
            return self.refuse(to, hdr, Status::ENOMEM);
        }
        let id = self.alloc_lookup();
        self.track(to);
        let parked = ParkedResolve {
            to,
            hdr: *hdr,
            dest,
            dest_flags,
        };
        self.lookups.insert(id, parked);
        let query = SourceQuery { id, dest: ip };
        self.out
            .push_back(Output::Fabric(FabricOp::SourceQuery(query)));
        None
    }

    /// The host's routing answered a source lookup.
    pub(crate) fn source_answer(
        &mut self,
        id: LookupId,
        result: Result<IpAddr, u8>,
    ) -> Option<Call<'static>> {
        let Some(p) = self.lookups.remove(&id) else {
            log!(
                self,
                Level::Basic,
                "acm_svr_select_src",
                "answer for unknown lookup {}",
                id.0
            );
            return None;
        };
        // The request was tracked when it was parked; this is its reply.
        let closed = match p.to {
            ReplyTo::Client { conn, epoch } => !self.client_live(conn, epoch),
            ReplyTo::Kernel { .. } => false,
        };
        self.untrack(p.to);
        if closed {
            log!(
                self,
                Level::Verbose,
                "acm_svr_select_src",
                "connection lost"
            );
            return None;
        }
        match result {
            Err(errno) => {
                // docs/reference-quirks.md §5: the errno itself becomes the status.
                log!(
                    self,
                    Level::Verbose,
                    "acm_svr_select_src",
                    "source selection failed: errno {errno}"
                );
                self.refuse(p.to, &p.hdr, Status(errno))
            }
            Ok(ip) => {
                let src = Address::ip(ip);
                // The scratch slot: SOURCE, the destination's type, the address.
                let mut scratch = [0u8; ENTRY_LEN];
                let mut e = EpAddrPacket::new_unchecked(&mut scratch[..]);
                e.set_flags(EpFlags::SOURCE);
                e.set_addr_type(p.dest.ty);
                e.info_mut().copy_from_slice(&src.bytes.0);
                let src = Address {
                    ty: p.dest.ty,
                    bytes: src.bytes,
                };
                self.dispatch_dest(p.to, p.hdr, src, p.dest, p.dest_flags, Some(scratch))
            }
        }
    }

    /// Finds the source's endpoint; the resolve goes to its provider.
    #[inline(always)]
    fn dispatch_dest(
        &mut self,
        to: ReplyTo,
        hdr: HeaderRepr,
        src: Address,
        dest: Address,
        flags: EpFlags,
        scratch: Option<[u8; ENTRY_LEN]>,
    ) -> Option<Call<'static>> {
        log!(
            self,
            Level::Verbose,
            "acm_svr_resolve_dest",
            "src {src} dest {dest}"
        );
        let Some(ep) = self.find_ep_by_addr(&src) else {
            return self.refuse(to, &hdr, Status::ESRCADDR);
        };
        let provider = self.endpoint(ep)?.provider;
        let kind = ReplyKind::Resolve {
            src_out: scratch.is_some(),
        };
        self.track(to);
        // Built where it is returned: the request's parts move once, into the call.
        Some((
            provider,
            ProviderCall::ResolveDest {
                ep,
                src,
                dest,
                flags,
                reply: self.pending_reply(to, hdr, scratch, kind),
            },
        ))
    }

    /// The endpoint a path belongs to (docs/protocol/client-messages.md §8.3, step 3).
    fn find_ep_by_path(&self, path: &[u8; 64]) -> Option<crate::EndpointId> {
        let pr = acm_proto::path_record::PathRecordPacket::new_unchecked(&path[..]);
        let (sgid, dgid, slid, pkey) = (pr.sgid(), pr.dgid(), pr.slid(), pr.pkey());
        for (_, port) in self.active_ports() {
            let a = &port.attrs;
            let matches = if !sgid.is_zero() {
                a.gids.contains(&sgid)
            } else if slid != 0 {
                a.lid == slid & a.lid_mask()
            } else if dgid.is_zero() {
                true
            } else {
                a.gids
                    .iter()
                    .any(|g| *g == dgid || g.subnet_prefix() == dgid.subnet_prefix())
            };
            if !matches {
                continue;
            }
            for &ep in &port.endpoints {
                let Some(e) = self.endpoint(ep) else {
                    continue;
                };
                if pkey == 0 || (pkey | 0x8000) == (e.pkey | 0x8000) {
                    // The reference stops at the first partition match even when it has
                    // no address.
                    return (!e.addrs.is_empty()).then_some(ep);
                }
            }
        }
        None
    }

    /// Path resolve (docs/protocol/client-messages.md §8.3).
    #[inline(always)]
    fn path_resolve(
        &mut self,
        to: ReplyTo,
        req: &Request<'_>,
        e0: &EpAddrPacket<&[u8]>,
    ) -> Option<Call<'static>> {
        let path = entry_path(e0);
        let pr = acm_proto::path_record::PathRecordPacket::new_unchecked(&path[..]);
        if pr.dlid() == 0 && pr.dgid().is_zero() {
            return self.refuse(to, &req.hdr, Status::EDESTADDR);
        }
        let Some(ep) = self.find_ep_by_path(&path) else {
            return self.refuse(to, &req.hdr, Status::ESRCADDR);
        };
        let provider = self.endpoint(ep)?.provider;
        let flags = e0.flags();
        let kind = ReplyKind::Resolve { src_out: false };
        self.track(to);
        Some((
            provider,
            ProviderCall::ResolvePath {
                ep,
                path,
                flags,
                reply: self.pending_reply(to, req.hdr, None, kind),
            },
        ))
    }

    /// QUERY_SA (docs/protocol/client-messages.md §8.4): errors in the "query" style echo
    /// the request.
    fn sa_query_request(
        &mut self,
        to: ReplyTo,
        req: &Request<'_>,
        e0: &EpAddrPacket<&[u8]>,
    ) -> Option<Call<'static>> {
        let query_error = |this: &mut Self, status: Status| {
            if let ReplyTo::Client { conn, .. } = to {
                // The request echoed, with the ACK bit and the status.
                let bytes = req.msg.into_inner();
                let mut buf = [0u8; MAX_REQUEST_LEN];
                let n = bytes.len().min(MAX_REQUEST_LEN);
                buf[..n].copy_from_slice(&bytes[..n]);
                let mut h = HeaderPacket::new_unchecked(&mut buf[..]);
                h.set_opcode(req.hdr.opcode.with_ack());
                h.set_status(status);
                this.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&buf[..n]),
                });
            }
            None
        };
        if usize::from(req.hdr.length) != HEADER_LEN + ENTRY_LEN {
            return query_error(self, Status::EINVAL);
        }
        let path = entry_path(e0);
        let Some(ep) = self.find_ep_by_path(&path) else {
            return query_error(self, Status::ESRCADDR);
        };
        let provider = self.endpoint(ep)?.provider;
        let mut entry = [0u8; ENTRY_LEN];
        entry.copy_from_slice(e0.into_inner());
        let reply = self.pending_reply(to, req.hdr, Some(entry), ReplyKind::Query);
        self.track(to);
        Some((provider, ProviderCall::Query { ep, path, reply }))
    }
}
