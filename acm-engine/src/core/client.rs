//! Client requests (spec 1.7–1.11): framing checks, RESOLVE validation and dispatch,
//! core-generated errors, and the source-address lookup.

use super::ReplyTo;
use crate::Counter;
use crate::Engine;
use crate::addr::Address;
use crate::io::{ClientOutput, ConnId, FabricOp, LookupId, Output, Reply, SourceQuery};
use crate::log::{Level, log};
use crate::provider::{PendingReply, ReplyKind, Resolve};
use acm_proto::Bytes64;
use acm_proto::client::{AddrType, EpFlags, Status};
use alloc::boxed::Box;
use core::net::IpAddr;

const HDR: usize = 16;
const ENTRY: usize = 72;
const MAX_MSG: usize = 592;

/// A destination resolve waiting for the host's routing to pick its source.
#[derive(Debug, Clone)]
pub(crate) struct ParkedResolve {
    to: ReplyTo,
    hdr: [u8; 16],
    dest: Address,
    dest_flags: EpFlags,
}

fn entry_flags(e: &[u8]) -> EpFlags {
    EpFlags(u32::from_ne_bytes([e[0], e[1], e[2], e[3]]))
}

fn entry_type(e: &[u8]) -> AddrType {
    AddrType(u16::from_ne_bytes([e[4], e[5]]))
}

fn entry_addr(e: &[u8]) -> Address {
    let mut b = [0u8; 64];
    b.copy_from_slice(&e[8..72]);
    Address {
        ty: entry_type(e),
        bytes: Bytes64(b),
    }
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
            self.core
                .out
                .push_back(Output::Client(ClientOutput::Close { conn, reason }));
            return;
        }
        match bytes[1] & 0x0F {
            1 => {
                let state = self.core.conn_state(conn);
                let to = ReplyTo::Client {
                    conn,
                    epoch: state.epoch,
                };
                if state.pending >= self.core.limits().pending_per_conn {
                    self.core.counters.bump(Counter::Resolve);
                    self.core_error(to, bytes, Status::ENOMEM.0);
                } else {
                    self.resolve_request(to, bytes);
                }
            }
            2 => self.perf_query(conn, bytes),
            _ => self.ep_query(conn, bytes),
        }
    }

    pub(crate) fn client_closed(&mut self, conn: ConnId) {
        // Replies still owed to it are dropped when they come (`Core::deliver`).
        let conns = &mut self.core.conns;
        conns.remove(&conn);
        // A table that held many connections gives room back as they close (halving
        // when under a quarter full: the rehash is paid for by the closes since).
        if conns.capacity() > 64 && conns.len() * 4 < conns.capacity() {
            conns.shrink_to(conns.len() * 2);
        }
    }

    /// A RESOLVE from a client or built from a kernel request (spec 1.7, 1.8).
    pub(crate) fn resolve_request(&mut self, to: ReplyTo, bytes: &[u8]) {
        self.core.counters.bump(Counter::Resolve);
        match bytes.get(HDR..HDR + ENTRY) {
            Some(e0) if entry_type(e0) == AddrType::PATH => {
                if entry_flags(e0).contains(EpFlags::QUERY_SA) {
                    self.sa_query_request(to, bytes);
                } else {
                    self.path_resolve(to, bytes);
                }
            }
            _ => self.dest_resolve(to, bytes),
        }
    }

    /// A core-generated error (spec 1.8.1): the header with the ACK bit, the status,
    /// length 16 (host order), data zeroed, no body.
    pub(crate) fn core_error(&mut self, to: ReplyTo, req: &[u8], status: u8) {
        self.core.counters.count_status(status);
        let mut hdr = [0u8; 16];
        hdr.copy_from_slice(&req[..HDR]);
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
                hdr[1] |= 0x80;
                hdr[2] = status;
                hdr[3..6].fill(0);
                hdr[6..8].copy_from_slice(&16u16.to_ne_bytes());
                self.core.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&hdr),
                });
            }
            ReplyTo::Kernel {
                nl_type,
                seq,
                path_use,
            } => {
                self.core.netlink_reply(nl_type, seq, path_use, None);
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

    /// Destination resolve (spec 1.7 validation, 1.8.2a).
    fn dest_resolve(&mut self, to: ReplyTo, bytes: &[u8]) {
        let cnt = ((bytes.len() - HDR) / ENTRY).min(8);
        let mut src: Option<usize> = None;
        let mut dst: Option<usize> = None;
        for i in 0..cnt {
            let e = &bytes[HDR + i * ENTRY..HDR + (i + 1) * ENTRY];
            let flags = entry_flags(e);
            let ty = entry_type(e);
            if flags.contains(EpFlags::SOURCE) {
                if src.is_some() {
                    return self.core_error(to, bytes, Status::ESRCADDR.0);
                }
                if !ty.is_address() {
                    return self.core_error(to, bytes, Status::ESRCTYPE.0);
                }
                src = Some(i);
            }
            if flags.contains(EpFlags::DEST) {
                if dst.is_some() {
                    return self.core_error(to, bytes, Status::EDESTADDR.0);
                }
                if !ty.is_address() {
                    return self.core_error(to, bytes, Status::EDESTTYPE.0);
                }
                dst = Some(i);
            }
        }
        let Some(dst) = dst else {
            return self.core_error(to, bytes, Status::EDESTTYPE.0);
        };
        let de = &bytes[HDR + dst * ENTRY..HDR + (dst + 1) * ENTRY];
        let dest = entry_addr(de);
        let dest_flags = entry_flags(de);
        let mut hdr = [0u8; 16];
        hdr.copy_from_slice(&bytes[..HDR]);
        match src {
            Some(s) => {
                let src = entry_addr(&bytes[HDR + s * ENTRY..HDR + (s + 1) * ENTRY]);
                self.dispatch_dest(to, hdr, src, dest, dest_flags, None);
            }
            None => {
                let Some(ip) = dest.as_ip() else {
                    return self.core_error(to, bytes, Status::EDESTTYPE.0);
                };
                if self.core.lookups.len() >= self.core.limits().source_lookups {
                    return self.core_error(to, bytes, Status::ENOMEM.0);
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
                // Quirk 5: the errno itself becomes the status.
                log!(
                    self.core,
                    Level::Verbose,
                    "acm_svr_select_src",
                    "source selection failed: errno {errno}"
                );
                self.core_error(p.to, &p.hdr, errno);
            }
            Ok(ip) => {
                let src = Address::ip(ip);
                // The scratch slot: SOURCE, the destination's type, the address.
                let mut scratch = [0u8; 72];
                scratch[0..4].copy_from_slice(&EpFlags::SOURCE.0.to_ne_bytes());
                scratch[4..6].copy_from_slice(&p.dest.ty.0.to_ne_bytes());
                scratch[8..72].copy_from_slice(&src.bytes.0);
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
        hdr: [u8; 16],
        src: Address,
        dest: Address,
        flags: EpFlags,
        scratch: Option<[u8; 72]>,
    ) {
        log!(
            self.core,
            Level::Verbose,
            "acm_svr_resolve_dest",
            "src {src} dest {dest}"
        );
        let Some(ep) = self.core.find_ep_by_addr(&src) else {
            return self.core_error(to, &hdr, Status::ESRCADDR.0);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let reply = PendingReply {
            to,
            hdr,
            entry: scratch.map(Box::new),
            kind: ReplyKind::Resolve {
                src_out: scratch.is_some(),
            },
        };
        self.track(to);
        self.with_provider(provider, |p, cx| {
            p.resolve(cx, ep, Resolve::Dest { src, dest, flags }, reply)
        });
    }

    /// The endpoint a path belongs to (spec 1.8.2b step 3).
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

    /// Path resolve (spec 1.8.2b).
    fn path_resolve(&mut self, to: ReplyTo, bytes: &[u8]) {
        let mut path = [0u8; 64];
        path.copy_from_slice(&bytes[24..88]);
        let pr = acm_proto::path_record::PathRecordPacket::new_unchecked(&path[..]);
        if pr.dlid() == 0 && pr.dgid().is_zero() {
            return self.core_error(to, bytes, Status::EDESTADDR.0);
        }
        let Some(ep) = self.find_ep_by_path(&path) else {
            return self.core_error(to, bytes, Status::ESRCADDR.0);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let mut hdr = [0u8; 16];
        hdr.copy_from_slice(&bytes[..HDR]);
        let flags = entry_flags(&bytes[HDR..HDR + ENTRY]);
        let reply = PendingReply {
            to,
            hdr,
            entry: None,
            kind: ReplyKind::Resolve { src_out: false },
        };
        self.track(to);
        self.with_provider(provider, |p, cx| {
            p.resolve(cx, ep, Resolve::Path { path, flags }, reply)
        });
    }

    /// QUERY_SA (spec 1.8.3): errors in the "query" style echo the request.
    fn sa_query_request(&mut self, to: ReplyTo, bytes: &[u8]) {
        let query_error = |this: &mut Self, status: u8| {
            if let ReplyTo::Client { conn, .. } = to {
                let mut buf = [0u8; MAX_MSG];
                let n = bytes.len().min(MAX_MSG);
                buf[..n].copy_from_slice(&bytes[..n]);
                buf[1] |= 0x80;
                buf[2] = status;
                this.core.push_client(ClientOutput::Reply {
                    conn,
                    reply: Reply::new(&buf[..n]),
                });
            }
        };
        if bytes.len() != HDR + ENTRY {
            return query_error(self, Status::EINVAL.0);
        }
        let mut path = [0u8; 64];
        path.copy_from_slice(&bytes[24..88]);
        let Some(ep) = self.find_ep_by_path(&path) else {
            return query_error(self, Status::ESRCADDR.0);
        };
        let Some(provider) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        let mut hdr = [0u8; 16];
        hdr.copy_from_slice(&bytes[..HDR]);
        let mut entry = [0u8; 72];
        entry.copy_from_slice(&bytes[HDR..HDR + ENTRY]);
        let reply = PendingReply {
            to,
            hdr,
            entry: Some(Box::new(entry)),
            kind: ReplyKind::Query,
        };
        self.track(to);
        self.with_provider(provider, |p, cx| p.query(cx, ep, &path, reply));
    }
}
