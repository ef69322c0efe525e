//! Client requests (docs/protocol/client-messages.md §7–§11): framing checks, RESOLVE
//! validation and dispatch, core-generated errors, and the source-address lookup.
//! Requests are read, and the core's own replies written, through acm-proto's views.

use crate::Counter;
use crate::Engine;
use crate::addr::Address;
use crate::io::{ClientOutput, ConnId, FabricOp, LookupId, Output, Reply, SourceQuery};
use crate::log::{Level, log};
use crate::request::{ReplyKind, ReplyTo, Resolve};
use acm_proto::Bytes64;
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpAddrPacket, EpFlags, HEADER_LEN, HeaderPacket, MAX_ENTRIES,
    MAX_REQUEST_LEN, MessagePacket, Operation, Status,
};
use core::net::IpAddr;

/// A destination resolve waiting for the host's routing to pick its source.
#[derive(Debug, Clone)]
pub(crate) struct ParkedResolve {
    to: ReplyTo,
    hdr: [u8; HEADER_LEN],
    dest: Address,
    dest_flags: EpFlags,
}

/// The address an entry carries.
fn entry_addr(e: &EpAddrPacket<&[u8]>) -> Address {
    Address {
        ty: e.addr_type(),
        bytes: Bytes64::read(e.info()).unwrap_or_default(),
    }
}

/// The request's header, to echo in its reply.
fn header_of(bytes: &[u8]) -> [u8; HEADER_LEN] {
    let mut hdr = [0u8; HEADER_LEN];
    hdr.copy_from_slice(&bytes[..HEADER_LEN]);
    hdr
}

/// A request's entry 0 as a PathRecord (zeros where the request is shorter).
fn entry_path(msg: &MessagePacket<&[u8]>) -> [u8; 64] {
    let mut path = [0u8; 64];
    if let Some(e) = msg.entry(0) {
        path.copy_from_slice(e.info());
    }
    path
}

impl Engine {
    pub(crate) fn client_request(&mut self, conn: ConnId, bytes: &[u8]) {
        if let Err(reason) = acm_proto::client::check_request(bytes) {
            log!(
                self.core,
                Level::Basic,
                "acm_svr_receive",
                "client {}: {reason}; closing",
                conn.0
            );
            self.core.push_client(ClientOutput::Close { conn, reason });
            return;
        }
        let op = HeaderPacket::new_unchecked(bytes).opcode().operation();
        match op {
            Operation::RESOLVE => {
                let state = self.core.conn_state(conn);
                let to = ReplyTo::Client {
                    conn,
                    epoch: state.epoch,
                };
                if state.pending >= self.core.limits().pending_per_conn {
                    self.core.counters.bump(Counter::Resolve);
                    self.core_error(to, bytes, Status::ENOMEM);
                } else {
                    self.resolve_request(to, bytes);
                }
            }
            Operation::PERF_QUERY => self.perf_query(conn, bytes),
            _ => self.ep_query(conn, bytes),
        }
    }

    pub(crate) fn client_closed(&mut self, conn: ConnId) {
        // Replies still owed to it are dropped when they come (`Core::deliver`).
        let conns = &mut self.core.conns;
        let waiting = conns.remove(&conn).is_some_and(|st| st.pending > 0);
        // A table that held many connections gives room back as they close (halving
        // when under a quarter full: the rehash is paid for by the closes since).
        if conns.capacity() > 64 && conns.len() * 4 < conns.capacity() {
            conns.shrink_to(conns.len() * 2);
        }
        // Then the providers may stop what only this client waited for (if it waited
        // for anything: most connections close once answered).
        if waiting {
            for i in 0..self.providers.len() {
                self.with_provider(i, |p, cx| p.client_closed(cx, conn));
            }
        }
    }

    /// A RESOLVE from a client or built from a kernel request
    /// (docs/protocol/client-messages.md §7, §8).
    pub(crate) fn resolve_request(&mut self, to: ReplyTo, bytes: &[u8]) {
        self.core.counters.bump(Counter::Resolve);
        match MessagePacket::new_unchecked(bytes).entry(0) {
            Some(e0) if e0.addr_type() == AddrType::PATH => {
                if e0.flags().contains(EpFlags::QUERY_SA) {
                    self.sa_query_request(to, bytes);
                } else {
                    self.path_resolve(to, bytes);
                }
            }
            _ => self.dest_resolve(to, bytes),
        }
    }

    /// A core-generated error (docs/protocol/client-messages.md §8.1): the header with
    /// the ACK bit, the status, length 16 (host order), data zeroed, no body.
    pub(crate) fn core_error(&mut self, to: ReplyTo, req: &[u8], status: Status) {
        self.core.counters.count_status(status);
        let mut hdr = header_of(req);
        log!(
            self.core,
            Level::Verbose,
            "acm_svr_resolve",
            "request failed with status {status}"
        );
        match to {
            ReplyTo::Client { conn, epoch } => {
                if !self.core.client_live(conn, epoch) {
                    return;
                }
                let mut h = HeaderPacket::new_unchecked(&mut hdr[..]);
                h.set_opcode(h.opcode().with_ack());
                h.set_status(status);
                h.set_data([0; 3]);
                h.set_length(Direction::Response, HEADER_LEN as u16);
                self.core.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&hdr),
                });
            }
            ReplyTo::Kernel { nl_type, seq, ask } => {
                self.core.netlink_reply(nl_type, seq, ask, None);
            }
        }
    }

    /// Notes that a client has one more request in a provider's hands.
    fn track(&mut self, to: ReplyTo) {
        if let ReplyTo::Client { conn, epoch } = to
            && let Some(st) = self.core.conns.get_mut(&conn)
            && st.epoch == epoch
        {
            st.pending += 1;
        }
    }

    /// Destination resolve (validation and handling:
    /// docs/protocol/client-messages.md §7, §8.2).
    fn dest_resolve(&mut self, to: ReplyTo, bytes: &[u8]) {
        let msg = MessagePacket::new_unchecked(bytes);
        let mut src: Option<EpAddrPacket<&[u8]>> = None;
        let mut dst: Option<EpAddrPacket<&[u8]>> = None;
        let entries = msg.body().chunks_exact(ENTRY_LEN).take(MAX_ENTRIES);
        for e in entries.map(EpAddrPacket::new_unchecked) {
            let (flags, ty) = (e.flags(), e.addr_type());
            if flags.contains(EpFlags::SOURCE) {
                if src.is_some() {
                    return self.core_error(to, bytes, Status::ESRCADDR);
                }
                if !ty.is_address() {
                    return self.core_error(to, bytes, Status::ESRCTYPE);
                }
                src = Some(e);
            }
            if flags.contains(EpFlags::DEST) {
                if dst.is_some() {
                    return self.core_error(to, bytes, Status::EDESTADDR);
                }
                if !ty.is_address() {
                    return self.core_error(to, bytes, Status::EDESTTYPE);
                }
                dst = Some(e);
            }
        }
        let Some(de) = dst else {
            return self.core_error(to, bytes, Status::EDESTTYPE);
        };
        let dest = entry_addr(&de);
        let dest_flags = de.flags();
        let hdr = header_of(bytes);
        match src {
            Some(se) => {
                let src = entry_addr(&se);
                self.dispatch_dest(to, hdr, src, dest, dest_flags, None);
            }
            None => {
                let Some(ip) = dest.as_ip() else {
                    return self.core_error(to, bytes, Status::EDESTTYPE);
                };
                if self.core.lookups.len() >= self.core.limits().source_lookups {
                    return self.core_error(to, bytes, Status::ENOMEM);
                }
                let id = self.core.alloc_lookup();
                self.track(to);
                self.core.lookups.insert(
                    id,
                    ParkedResolve {
                        to,
                        hdr,
                        dest,
                        dest_flags,
                    },
                );
                self.core
                    .out
                    .push_back(Output::Fabric(FabricOp::SourceQuery(SourceQuery {
                        id,
                        dest: ip,
                    })));
            }
        }
    }

    /// The host's routing answered a source lookup.
    pub(crate) fn source_answer(&mut self, id: LookupId, result: Result<IpAddr, u8>) {
        let Some(p) = self.core.lookups.remove(&id) else {
            log!(
                self.core,
                Level::Basic,
                "acm_svr_select_src",
                "answer for unknown lookup {}",
                id.0
            );
            return;
        };
        // The request was tracked when it was parked; this is its reply.
        let closed = match p.to {
            ReplyTo::Client { conn, epoch } => !self.core.client_live(conn, epoch),
            ReplyTo::Kernel { .. } => false,
        };
        self.untrack(p.to);
        if closed {
            log!(
                self.core,
                Level::Verbose,
                "acm_svr_select_src",
                "connection lost"
            );
            return;
        }
        match result {
            Err(errno) => {
                // docs/reference-quirks.md §5: the errno itself becomes the status.
                log!(
                    self.core,
                    Level::Verbose,
                    "acm_svr_select_src",
                    "source selection failed: errno {errno}"
                );
                self.core_error(p.to, &p.hdr, Status(errno));
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
                self.dispatch_dest(p.to, p.hdr, src, p.dest, p.dest_flags, Some(scratch));
            }
        }
    }

    fn untrack(&mut self, to: ReplyTo) {
        if let ReplyTo::Client { conn, epoch } = to
            && let Some(st) = self.core.conns.get_mut(&conn)
            && st.epoch == epoch
        {
            st.pending = st.pending.saturating_sub(1);
        }
    }

    /// Finds the source's endpoint and hands the resolve to its provider.
    fn dispatch_dest(
        &mut self,
        to: ReplyTo,
        hdr: [u8; HEADER_LEN],
        src: Address,
        dest: Address,
        flags: EpFlags,
        scratch: Option<[u8; ENTRY_LEN]>,
    ) {
        log!(
            self.core,
            Level::Verbose,
            "acm_svr_resolve_dest",
            "src {src} dest {dest}"
        );
        let Some(ep) = self.core.find_ep_by_addr(&src) else {
            return self.core_error(to, &hdr, Status::ESRCADDR);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let kind = ReplyKind::Resolve {
            src_out: scratch.is_some(),
        };
        let reply = self.core.pending_reply(to, hdr, scratch, kind);
        self.track(to);
        self.with_provider(provider, |p, cx| {
            p.resolve(cx, ep, Resolve::Dest { src, dest, flags }, reply)
        });
    }

    /// The endpoint a path belongs to (docs/protocol/client-messages.md §8.3, step 3).
    fn find_ep_by_path(&self, path: &[u8; 64]) -> Option<crate::EndpointId> {
        let pr = acm_proto::path_record::PathRecordPacket::new_unchecked(&path[..]);
        let (sgid, dgid, slid, pkey) = (pr.sgid(), pr.dgid(), pr.slid(), pr.pkey());
        for (_, port) in self.core.active_ports() {
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
                let Some(e) = self.core.endpoint(ep) else {
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
    fn path_resolve(&mut self, to: ReplyTo, bytes: &[u8]) {
        let msg = MessagePacket::new_unchecked(bytes);
        let path = entry_path(&msg);
        let pr = acm_proto::path_record::PathRecordPacket::new_unchecked(&path[..]);
        if pr.dlid() == 0 && pr.dgid().is_zero() {
            return self.core_error(to, bytes, Status::EDESTADDR);
        }
        let Some(ep) = self.find_ep_by_path(&path) else {
            return self.core_error(to, bytes, Status::ESRCADDR);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let flags = msg.entry(0).map(|e| e.flags()).unwrap_or_default();
        let kind = ReplyKind::Resolve { src_out: false };
        let reply = self.core.pending_reply(to, header_of(bytes), None, kind);
        self.track(to);
        self.with_provider(provider, |p, cx| {
            p.resolve(cx, ep, Resolve::Path { path, flags }, reply)
        });
    }

    /// QUERY_SA (docs/protocol/client-messages.md §8.4): errors in the "query" style echo
    /// the request.
    fn sa_query_request(&mut self, to: ReplyTo, bytes: &[u8]) {
        let query_error = |this: &mut Self, status: Status| {
            if let ReplyTo::Client { conn, .. } = to {
                let mut buf = [0u8; MAX_REQUEST_LEN];
                let n = bytes.len().min(MAX_REQUEST_LEN);
                buf[..n].copy_from_slice(&bytes[..n]);
                let mut h = HeaderPacket::new_unchecked(&mut buf[..]);
                h.set_opcode(h.opcode().with_ack());
                h.set_status(status);
                this.core.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&buf[..n]),
                });
            }
        };
        if bytes.len() != HEADER_LEN + ENTRY_LEN {
            return query_error(self, Status::EINVAL);
        }
        let msg = MessagePacket::new_unchecked(bytes);
        let path = entry_path(&msg);
        let Some(ep) = self.find_ep_by_path(&path) else {
            return query_error(self, Status::ESRCADDR);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let mut entry = [0u8; ENTRY_LEN];
        if let Some(e) = msg.entry(0) {
            entry.copy_from_slice(e.into_inner());
        }
        let reply = self
            .core
            .pending_reply(to, header_of(bytes), Some(entry), ReplyKind::Query);
        self.track(to);
        self.with_provider(provider, |p, cx| p.query(cx, ep, &path, reply));
    }
}
