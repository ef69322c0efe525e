//! ibacmp's SA traffic: MCMemberRecord joins (docs/protocol/sa.md §5), PathRecord queries
//! for destinations (docs/protocol/sa.md §4) and for clients' QUERY_SA
//! (docs/protocol/client-messages.md §8.4), and their responses (docs/protocol/sa.md §6).

use super::endpoint::EpState;
use super::{Acmp, DestState, SaWhat, Timer};
use crate::addr::Address;
use crate::counters::Counter;
use crate::device::PortId;
use crate::io::{AddressVector, EndpointId, GlobalRoute, Mad, McastGroup};
use crate::log::{Level, log};
use crate::provider::{Ctx, Outcome, PendingReply};
use acm_proto::Gid;
use acm_proto::acm_mad::{ACM_QKEY, MULTICAST_QPN};
use acm_proto::client::Status;
use acm_proto::mad::{MAD_LEN, UmadStatus};
use acm_proto::mcmember::{MCMEMBER_RECORD_LEN, McCompMask, McMemberRecordRepr};
use acm_proto::notice::SmTrap;
use acm_proto::path_record::{PATH_RECORD_LEN, PathRecordPacket, PathRecordRepr};
use acm_proto::sa::{SA_DATA_LEN, SA_HEADER_LEN, SaHeaderRepr, SaPacket};
use alloc::vec::Vec;

/// A 256-byte SA MAD: the header, then `data`.
fn sa_mad(header: &SaHeaderRepr, data: &[u8]) -> Mad {
    let mut m = [0u8; MAD_LEN];
    header.emit(&mut m[..SA_HEADER_LEN]);
    let n = data.len().min(SA_DATA_LEN);
    SaPacket::new_unchecked(&mut m[..]).data_mut()[..n].copy_from_slice(&data[..n]);
    Mad(m)
}

/// The SA's answer: its class status (or ETIMEDOUT) and data.
fn sa_status(result: Result<&[u8], UmadStatus>) -> (Status, Option<&[u8]>) {
    match result {
        Err(_) => (Status::ETIMEDOUT, None),
        Ok(mad) if mad.len() < SA_HEADER_LEN + PATH_RECORD_LEN => (Status::ETIMEDOUT, None),
        Ok(mad) => {
            let sa = SaPacket::new_unchecked(mad);
            let status = sa.status();
            let class = status.class_status();
            // The reference ignores the generic bits (busy, redirect, unsupported) and
            // would take such a reply's data as a path (docs/reference-quirks.md §6);
            // here they fail the query as a timeout would. The class byte passes through
            // as-is.
            let code = if class != 0 {
                Status(class)
            } else if status.generic() != 0 {
                Status::ETIMEDOUT
            } else {
                Status::SUCCESS
            };
            (code, Some(sa.data()))
        }
    }
}

impl Acmp {
    /// Joins every group of an endpoint that is not joined (docs/protocol/sa.md §5).
    pub(super) fn join_all(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        let Some(ep) = self.eps.get(&id) else { return };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        let port = ep.port;
        let pkey = ep.pkey;
        let gid0 = attrs.gid0();
        let todo: Vec<(usize, Gid, acm_proto::Rate, acm_proto::Mtu)> = ep
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.joined && g.join_tid.is_none())
            .map(|(i, g)| (i, g.mgid, g.rate, g.mtu))
            .collect();
        for (gi, mgid, rate, mtu) in todo {
            let tid = cx.next_tid();
            let rec = McMemberRecordRepr::ibacm_join(mgid, gid0, pkey, rate, mtu);
            let mad = sa_mad(
                &SaHeaderRepr::mcmember_join(tid, McCompMask::IBACM_JOIN),
                &rec.to_bytes(),
            );
            log!(
                cx,
                Level::Verbose,
                "acmp_join_group",
                "port {} pkey {pkey:#06x} rate {} mtu {}",
                port.port,
                rate.0,
                mtu.0
            );
            match cx.send_sa(port, mad) {
                Ok(()) => {
                    self.sa
                        .insert((port, tid as u32), SaWhat::Join { ep: id, group: gi });
                    if let Some(g) = self.eps.get_mut(&id).and_then(|e| e.groups.get_mut(gi)) {
                        g.join_tid = Some(tid);
                    }
                }
                Err(_) => self.schedule_join_retry(cx, id),
            }
        }
    }

    fn schedule_join_retry(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        let at = cx.now() + super::JOIN_RETRY;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        if ep.join_retry.is_none() {
            ep.join_retry = Some(at);
            self.set_timer(at, Timer::Join { ep: id });
        }
    }

    pub(super) fn join_retry_due(&mut self, cx: &mut Ctx<'_>, id: EndpointId, at: crate::Instant) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        if ep.join_retry != Some(at) {
            return;
        }
        ep.join_retry = None;
        log!(
            cx,
            Level::Basic,
            "acmp_ep_join",
            "retrying multicast joins for pkey {:#06x}",
            ep.pkey
        );
        self.join_all(cx, id);
    }

    /// Client reregister: detach, forget the joins, and join again.
    pub(super) fn rejoin(&mut self, cx: &mut Ctx<'_>, id: EndpointId) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        if let Some(g) = ep.groups.first_mut()
            && g.attached
        {
            g.attached = false;
            cx.mcast_detach(McastGroup {
                ep: id,
                mgid: g.mgid,
                mlid: g.mlid,
            });
        }
        ep.state = EpState::Init;
        for g in &mut ep.groups {
            g.joined = false;
            g.join_tid = None;
        }
        self.join_all(cx, id);
    }

    fn join_answer(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        gi: usize,
        result: Result<&[u8], UmadStatus>,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        if let Some(g) = ep.groups.get_mut(gi) {
            g.join_tid = None;
        }
        let rec = match result {
            Ok(mad)
                if mad.len() >= SA_HEADER_LEN + MCMEMBER_RECORD_LEN
                    && SaPacket::new_unchecked(mad).status().is_ok() =>
            {
                McMemberRecordRepr::parse(SaPacket::new_unchecked(mad).data()).ok()
            }
            _ => None,
        };
        let Some(rec) = rec else {
            log!(
                cx,
                Level::Basic,
                "acmp_process_join_resp",
                "ERROR - join failed for pkey {:#06x}",
                ep.pkey
            );
            self.schedule_join_retry(cx, id);
            return;
        };
        let Some(g) = ep
            .groups
            .iter_mut()
            .position(|g| g.mgid == rec.mgid)
            .and_then(|i| ep.groups.get_mut(i))
        else {
            log!(
                cx,
                Level::Basic,
                "acmp_process_join_resp",
                "ERROR - no group for MGID {}",
                rec.mgid
            );
            return;
        };
        g.mlid = rec.mlid;
        g.av = AddressVector {
            dlid: rec.mlid,
            sl: rec.sl,
            src_path_bits: 0,
            static_rate: rec.rate.to_byte() & 0x3F,
            grh: GlobalRoute {
                dgid: rec.mgid,
                flow_label: rec.flow_label,
                hop_limit: rec.hop_limit,
                tclass: rec.tclass,
                sgid_index: attrs.gid_index(&rec.port_gid).unwrap_or(0),
            },
            remote_qpn: MULTICAST_QPN,
            remote_qkey: ACM_QKEY,
        };
        let path = PathRecordRepr {
            dgid: rec.mgid,
            sgid: rec.port_gid,
            dlid: rec.mlid,
            slid: attrs.lid,
            flow_label: rec.flow_label,
            hop_limit: rec.hop_limit,
            tclass: rec.tclass,
            reversible: true,
            numpath: 1,
            pkey: rec.pkey,
            sl: rec.sl,
            mtu: rec.mtu,
            rate: rec.rate,
            packet_lifetime: rec.packet_lifetime,
            ..PathRecordRepr::default()
        };
        g.path = path.to_bytes();
        g.joined = true;
        let first = ep.groups.first().is_some_and(|f| f.mgid == rec.mgid);
        log!(
            cx,
            Level::Basic,
            "acmp_process_join_resp",
            "join successful"
        );
        if first {
            if let Some(g) = ep.groups.first_mut()
                && !g.attached
            {
                g.attached = true;
                cx.mcast_attach(McastGroup {
                    ep: id,
                    mgid: g.mgid,
                    mlid: g.mlid,
                });
            }
            ep.state = EpState::Ready;
        }
    }

    /// Sends a PathRecord query for a destination (docs/protocol/sa.md §4, cases A, B, C,
    /// E).
    pub(super) fn query_route(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        dest: &Address,
        respond: Option<u64>,
    ) -> Result<(), Status> {
        let Some(ep) = self.eps.get_mut(&id) else {
            return Err(Status::ENODATA);
        };
        let Some(i) = ep.dests.find(dest) else {
            return Err(Status::ENODATA);
        };
        let Some(d) = ep.dests.get(i) else {
            return Err(Status::ENODATA);
        };
        let port = ep.port;
        let Ok(rec) = PathRecordRepr::parse(&d.path) else {
            return Err(Status::EINVAL);
        };
        let tid = cx.next_tid();
        let mad = sa_mad(
            &SaHeaderRepr::path_record_get(tid, rec.sa_comp_mask()),
            &d.path,
        );
        cx.send_sa(port, mad)?;
        self.sa.insert(
            (port, tid as u32),
            SaWhat::Route {
                ep: id,
                dest: *dest,
                respond,
            },
        );
        cx.count(Counter::RouteQuery);
        if let Some(ep) = self.eps.get_mut(&id) {
            ep.counters.bump(Counter::RouteQuery);
            if let Some(d) = ep.dests.get_mut(i) {
                d.state = DestState::QueryRoute;
            }
        }
        log!(cx, Level::Verbose, "acmp_resolve_path_sa", "{dest}");
        Ok(())
    }

    fn route_answer(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        dest: &Address,
        respond: Option<u64>,
        result: Result<&[u8], UmadStatus>,
    ) {
        let (status, data) = sa_status(result);
        let now = cx.now();
        let (addr_to, route_to) = (self.opts.addr_timeout, self.opts.route_timeout);
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        let Some(i) = ep.dests.find(dest) else { return };
        let Some(d) = ep.dests.get_mut(i) else { return };
        if d.state != DestState::QueryRoute {
            return;
        }
        log!(
            cx,
            Level::Verbose,
            "acmp_dest_sa_resp",
            "{dest} status={:#x}",
            status.0
        );
        let queue = super::fair::take_queue(&mut self.clients, id, i, d);
        match data {
            Some(data) if status == Status::SUCCESS => {
                d.path.copy_from_slice(&data[..PATH_RECORD_LEN]);
                let qpn = d.remote_qpn;
                d.av = AddressVector {
                    remote_qpn: qpn,
                    ..super::path_av::av_from_path(&d.path, attrs)
                };
                d.addr_expiry = Self::expiry(now, addr_to);
                d.route_expiry = Self::expiry(now, route_to);
                d.state = DestState::Ready;
                let path = d.path;
                let av = d.av;
                let mgid = ep.groups.get(usize::from(d.group)).map(|g| g.mgid);
                for r in queue {
                    Self::finish(Some(ep), cx, r, Outcome::Path(&path));
                }
                if let (Some(tid), Some(mgid)) = (respond, mgid) {
                    self.send_response(cx, id, av, tid, mgid);
                }
            }
            _ => {
                d.state = DestState::Init;
                for r in queue {
                    Self::finish(Some(ep), cx, r, Outcome::Failed(status));
                }
            }
        }
    }

    /// A client's QUERY_SA (docs/protocol/client-messages.md §8.4): the client's record
    /// goes to the SA as it is.
    pub(super) fn sa_query(
        &mut self,
        cx: &mut Ctx<'_>,
        id: EndpointId,
        path: &[u8; PATH_RECORD_LEN],
        reply: PendingReply,
    ) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return cx.complete(reply, Outcome::Failed(Status::ENODATA));
        };
        if ep.state != EpState::Ready {
            return cx.complete(
                reply,
                Outcome::Query {
                    status: Status::ENODATA,
                    path,
                },
            );
        }
        let port = ep.port;
        let mask = PathRecordRepr::parse(path)
            .map(|r| r.sa_comp_mask())
            .unwrap_or_default();
        let tid = cx.next_tid();
        let mad = sa_mad(&SaHeaderRepr::path_record_get(tid, mask), path);
        match cx.send_sa(port, mad) {
            Ok(()) => {
                cx.count(Counter::RouteQuery);
                ep.counters.bump(Counter::RouteQuery);
                self.sa
                    .insert((port, tid as u32), SaWhat::Query { reply, path: *path });
            }
            Err(status) => cx.complete(reply, Outcome::Query { status, path }),
        }
    }

    /// Routes an SA answer to what it was for.
    pub(super) fn sa_answer(
        &mut self,
        cx: &mut Ctx<'_>,
        port: PortId,
        tid: u64,
        result: Result<&[u8], UmadStatus>,
    ) {
        let Some(what) = self.sa.remove(&(port, tid as u32)) else {
            log!(
                cx,
                Level::Verbose,
                "acmp_sa_resp",
                "SA answer for unknown tid {tid:#x}"
            );
            return;
        };
        match what {
            SaWhat::Join { ep, group } => self.join_answer(cx, ep, group, result),
            SaWhat::Route { ep, dest, respond } => {
                self.route_answer(cx, ep, &dest, respond, result)
            }
            SaWhat::Query { reply, path } => {
                let (status, data) = sa_status(result);
                let mut out = path;
                if let Some(d) = data {
                    // Copied even on failure, as the reference does.
                    out.copy_from_slice(&d[..PATH_RECORD_LEN]);
                }
                cx.complete(reply, Outcome::Query { status, path: &out });
            }
        }
    }
}

impl Acmp {
    /// An SM event the SA reported on `port` (docs/protocol/sa.md §9): a GID that came
    /// or went makes every settled entry naming it stale at once, so the next request
    /// resolves it afresh (lookups in flight are left to finish): an address from the
    /// hosts preload file keeps the GID the administrator gave it and has its route
    /// asked again, as after a port change; any other entry goes back to INIT (an
    /// address learned over ACM may now belong to another GID; a GID or LID entry is
    /// asked for again). A deleted group that is one of an endpoint's makes the
    /// endpoint rejoin.
    pub(super) fn sm_trap(&mut self, cx: &mut Ctx<'_>, port: PortId, event: &SmTrap) {
        let ids = self.eps_on(port);
        match *event {
            SmTrap::GidInService(gid) | SmTrap::GidOutOfService(gid) => {
                let key = Address::gid(gid);
                let mut stale = 0usize;
                for id in ids {
                    let (Some(ep), Some(attrs)) = (self.eps.get_mut(&id), self.ports.get(&port))
                    else {
                        continue;
                    };
                    let own = &ep.addrs;
                    for d in ep.dests.iter_mut() {
                        let settled = matches!(d.state, DestState::Ready | DestState::AddrResolved);
                        let names = d.addr == key
                            || PathRecordPacket::new_unchecked(&d.path[..]).dgid() == gid;
                        if !settled || !names || own.contains(&d.addr) {
                            continue;
                        }
                        stale += 1;
                        if d.preloaded {
                            d.state = DestState::AddrResolved;
                            d.path = super::preload::requery_path(
                                &d.path,
                                attrs,
                                d.addr.ty == acm_proto::client::AddrType::LID,
                            );
                        } else {
                            d.state = DestState::Init;
                            d.path = [0; PATH_RECORD_LEN];
                        }
                    }
                }
                log!(
                    cx,
                    Level::Basic,
                    "acmp_sm_event",
                    "port {}: {stale} cache entries for {gid} invalidated",
                    port.port
                );
            }
            SmTrap::McastGroupDeleted(mgid) => {
                for id in ids {
                    let ours = self.eps.get(&id).is_some_and(|ep| {
                        ep.groups
                            .iter()
                            .any(|g| g.mgid == mgid && g.joined && g.join_tid.is_none())
                    });
                    if ours {
                        log!(
                            cx,
                            Level::Basic,
                            "acmp_sm_event",
                            "port {}: group {mgid} deleted by the SM; rejoining",
                            port.port
                        );
                        self.rejoin(cx, id);
                    }
                }
            }
            // Nothing is cached about a group before it exists.
            SmTrap::McastGroupCreated(_) => {}
        }
    }
}
