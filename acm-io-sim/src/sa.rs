//! The subnet manager's SA, as the hosts see it: PathRecord queries and MCMemberRecord
//! joins and leaves, answered from the live [`Topology`].
//!
//! Sans-IO and deterministic: [`SubnetAdmin::answer`] takes one request MAD and returns
//! the response MAD (or nothing); delays, loss and retries are the simulator's business.
//! Every wire format comes from `acm-proto`.
//!
//! # What it answers
//!
//! * **PathRecord GET** (attribute 0x0035): the source port is the one whose GID is the
//!   query's SGID when the SGID bit is set in the component mask, else the one with the
//!   query's SLID when that bit is set, else the sender. The destination is found by
//!   DGID, else by DLID; a query naming neither has no answer. The answer is
//!   ERR_NO_RECORDS (status 0x0300) when either port is unknown, down or not
//!   InfiniBand, when a queried SLID/DLID is not one of the chosen port's LIDs, when the
//!   ports share no partition, or when the mask's PKEY is not a partition they share.
//!   Otherwise the one record is:
//!   SGID/DGID of the two ports; SLID/DLID the queried ones (within the LMC range) or
//!   else the base LIDs; flow label, hop limit, QoS class and preference 0; tclass the
//!   query's if its bit is set, else 0; reversible with NumbPath 1 (byte 0x81); the
//!   shared pkey ([`Topology::shared_pkey`]: bit 15 only when both ends are full
//!   members); SL the destination port's `sl`; MTU and rate "exactly" the smaller of
//!   the two ports' (rates compared by speed, not by enum value); packet lifetime
//!   "exactly" the source port's SubnetTimeout. That last choice matches the real
//!   OpenSM answer in the captures (0x92, exactly 18, on a subnet whose timeout is 18):
//!   the lifetime tracks the subnet's timeout, and taking the source port's lets a
//!   fault on one port show up in the paths from it. Other components of the query
//!   (service id, SL, selectors, flow label, …) are not matched: the SA always answers
//!   with the one best path.
//! * **MCMemberRecord SET** (attribute 0x0038), a join. Only full-member joins of the
//!   sender's own port are modelled; a join-state without the full-member bit, a
//!   PortGID that is another port's (a proxy join), a sender that is unknown, down or
//!   not InfiniBand, a missing or non-multicast MGID, or a pkey the port does not have
//!   is refused with ERR_REQ_INVALID (0x0200). If the
//!   group exists, the port joins it unless its rate or MTU is below the group's, its
//!   partition differs, the Q_Key in the mask differs, or the mask's MTU/rate selector
//!   is not satisfied by the group's value (all refused with 0x0200). If not, the
//!   group is created with the request's MTU and rate (read as the selector says:
//!   "exactly" the value, "largest available" or absent the port's own, "greater/less
//!   than" the port's own if it qualifies), the request's pkey (else the port's first),
//!   Q_Key (else 0), SL 0, packet lifetime the creator's SubnetTimeout, and the next
//!   free MLID counting up from 0xC001 (MLIDs are not reused until the counter wraps,
//!   so a stale attachment never aliases a new group; when none is free, 0x0100
//!   ERR_NO_RESOURCES). Creation is refused when the port cannot meet the rate or MTU
//!   asked for. The response record: the group's MGID, the member's PortGID, Q_Key,
//!   MLID, MTU (0x80|enum), tclass 0, pkey, rate (0x80|enum), packet lifetime
//!   (0x80|lifetime), SL, flow label 0, hop limit 0, and the request's scope and join
//!   state. Joining twice is not an error.
//! * **MCMemberRecord DELETE** (0x15), a leave: removes the port (by PortGID, else the
//!   sender) from the group and deletes a group left empty; the response carries the
//!   group's record as for a join. Leaving a group that does not exist or that the port
//!   is not in is refused with 0x0200.
//! * **InformInfo SET** (attribute 0x0003), a trap subscription
//!   (docs/protocol/sa.md §9): a generic subscription to trap 64, 65, 66 or 67 is recorded for the sender's
//!   port (Subscribe 1) or removed (Subscribe 0) and answered GetResp with the record;
//!   any other InformInfo is refused with 0x0200. A port's subscriptions go when the
//!   port goes down, and all of them at an SM failover ([`SubnetAdmin::forget_all_members`]):
//!   hosts must subscribe again.
//! * **ReportResp** (0x86) of a Report this SA sent: the Report is acknowledged and not
//!   repeated; nothing is answered.
//! * Any other attribute or method of class SA: status 0x0200, no data.
//!
//! # What it reports
//!
//! The SM's side of the traps: [`SubnetAdmin::trap`] turns an event (a port GID in or
//! out of service, a group created or deleted; groups created and deleted by joins,
//! leaves and port downs are queued by the SA itself, [`SubnetAdmin::take_traps`]) into
//! one Report MAD (method 0x06, attribute Notice, a TID of the SA's) per subscriber,
//! which the simulator delivers; a Report not acknowledged is repeated
//! ([`SubnetAdmin::report_again`]) up to [`REPORT_TRIES`] times in all.
//!
//! Responses are 256 bytes: the request's SA header with the method's response bit
//! set (GET and SET are answered with GetResp 0x81, DELETE with 0x95), the RMPP header
//! zeroed, the status, and the record (or zeros). MADs that are not SA requests
//! (another class, a response method, fewer than 56 bytes) are dropped.

use crate::topology::{PortRef, Topology};
use acm_proto::mad::{AttrId, MAD_LEN, MadStatus, Method, MgmtClass};
use acm_proto::mcmember::{JoinState, McCompMask, McMemberRecordRepr};
use acm_proto::notice::{InformInfoRepr, NoticeRepr, SmTrap, TrapNumber};
use acm_proto::path_record::{PathCompMask, PathRecordRepr};
use acm_proto::sa::{RmppRepr, SA_HEADER_LEN, SaClassStatus, SaHeaderRepr, SaPacket};
use acm_proto::{Gid, Mtu, Rate, Selected, Selector};
use std::collections::{BTreeMap, BTreeSet};

/// MAD status: ERR_NO_RESOURCES in the class byte (0x0100).
const STATUS_NO_RESOURCES: MadStatus = SaClassStatus::NO_RESOURCES.mad_status();
/// MAD status: ERR_REQ_INVALID in the class byte (0x0200).
const STATUS_REQ_INVALID: MadStatus = SaClassStatus::REQ_INVALID.mad_status();
/// MAD status: ERR_NO_RECORDS in the class byte (0x0300).
const STATUS_NO_RECORDS: MadStatus = SaClassStatus::NO_RECORDS.mad_status();

/// How many times a Report is sent in all when it is not acknowledged.
pub const REPORT_TRIES: u32 = 3;

/// A Report sent and not acknowledged yet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingReport {
    to: PortRef,
    mad: [u8; MAD_LEN],
    tries_left: u32,
}

/// The header of an SA request and the method its response carries; `None` for
/// anything that is not an SA request (too short, another class, a response).
fn request_header(mad: &[u8]) -> Option<(SaHeaderRepr, Method)> {
    if mad.len() < SA_HEADER_LEN {
        return None;
    }
    let mut req = [0u8; MAD_LEN];
    let n = mad.len().min(MAD_LEN);
    req[..n].copy_from_slice(&mad[..n]);
    let hdr = SaHeaderRepr::parse(&req).ok()?;
    if hdr.mad.mgmt_class != MgmtClass::SA || hdr.mad.method.is_response() {
        return None;
    }
    let method = hdr.mad.method;
    let resp = if method == Method::SET {
        Method::GET_RESP
    } else {
        method.response()
    };
    Some((hdr, resp))
}

/// The first multicast LID.
pub const MLID_FIRST: u16 = 0xC001;
/// The last MLID handed out (0xFFFF is the permissive LID).
pub const MLID_LAST: u16 = 0xFFFE;

/// How the SA behaves, so tests can take it away or overload it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaMode {
    /// Answers normally.
    #[default]
    Up,
    /// Drops every MAD (the SM is gone): requesters time out.
    Down,
    /// Answers every SA request with MAD status 0x0001 (busy) and no data.
    Busy,
}

/// A multicast group the SA knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McGroup {
    /// Multicast GID: the group's identity.
    pub mgid: Gid,
    /// Multicast LID the SA assigned: where the group's packets go.
    pub mlid: u16,
    /// Partition, as the creator asked for it.
    pub pkey: u16,
    /// Q_Key, as the creator asked for it.
    pub qkey: u32,
    /// The group's rate: every member must be at least this fast.
    pub rate: Rate,
    /// The group's MTU: every member must carry at least this much.
    pub mtu: Mtu,
    /// SL of the group's traffic (always 0 here).
    pub sl: u8,
    /// Packet lifetime in the group's records (the creator's SubnetTimeout).
    pub packet_lifetime: u8,
    /// The full members; multicast goes to their ports.
    pub members: BTreeSet<PortRef>,
}

/// What the SA has done, for tests and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaStats {
    /// PathRecord queries answered (with a record or with ERR_NO_RECORDS).
    pub path_queries: u64,
    /// Successful joins (including repeated joins of a member).
    pub joins: u64,
    /// Successful leaves.
    pub leaves: u64,
    /// PathRecord queries answered with ERR_NO_RECORDS.
    pub no_record: u64,
    /// Joins and leaves refused.
    pub refused: u64,
    /// Requests for an attribute or method the SA does not model (status 0x0200).
    pub unsupported: u64,
    /// Requests answered "busy" in [`SaMode::Busy`].
    pub busy: u64,
    /// MADs dropped: everything in [`SaMode::Down`], and whatever is not an SA request.
    pub dropped: u64,
    /// InformInfo subscriptions taken (repeated ones included).
    pub subscriptions: u64,
    /// Reports sent, repeats included.
    pub reports: u64,
    /// Reports acknowledged with a ReportResp.
    pub reports_acked: u64,
    /// Requests answered BUSY because the SA's queue was full (`[sa] overflow =
    /// "busy"`, the simulator's [`crate::spec::SaSpec`]).
    pub overflow_busy: u64,
    /// Requests dropped because the SA's queue was full (`overflow = "drop"`).
    pub overflow_dropped: u64,
}

/// The SM/SA of the simulated subnet.
#[derive(Debug, Clone, Default)]
pub struct SubnetAdmin {
    /// Current behaviour; a fault sets it.
    pub mode: SaMode,
    groups: BTreeMap<Gid, McGroup>,
    /// The MLIDs the groups hold.
    mlids: BTreeSet<u16>,
    /// The next MLID to try (0 before the first allocation).
    next_mlid: u16,
    stats: SaStats,
    /// The traps each port subscribed to.
    subs: BTreeMap<PortRef, BTreeSet<u16>>,
    /// Group events of joins, leaves and port downs, for the simulator to report.
    traps: Vec<SmTrap>,
    /// Reports waiting for their ReportResp, by TID.
    reports: BTreeMap<u64, PendingReport>,
    /// The last Report TID.
    report_tid: u64,
}

impl SubnetAdmin {
    /// An SA that is up and knows no groups.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers one SA MAD sent by `from` (the full 256-byte MAD as the engine emitted
    /// it; shorter ones are read as if zero-padded). `None` when the SA does not answer:
    /// [`SaMode::Down`], or a MAD that is not an SA request. See the module docs for
    /// what each request gets.
    pub fn answer(&mut self, topo: &Topology, from: PortRef, mad: &[u8]) -> Option<[u8; MAD_LEN]> {
        if self.mode == SaMode::Down || mad.len() < SA_HEADER_LEN {
            self.stats.dropped += 1;
            return None;
        }
        let mut req = [0u8; MAD_LEN];
        let n = mad.len().min(MAD_LEN);
        req[..n].copy_from_slice(&mad[..n]);
        let Ok(hdr) = SaHeaderRepr::parse(&req) else {
            self.stats.dropped += 1;
            return None;
        };
        if hdr.mad.mgmt_class == MgmtClass::SA && hdr.mad.method == Method::REPORT_RESP {
            if self.reports.get(&hdr.mad.tid).is_some_and(|r| r.to == from) {
                self.reports.remove(&hdr.mad.tid);
                self.stats.reports_acked += 1;
            }
            return None;
        }
        if hdr.mad.mgmt_class != MgmtClass::SA || hdr.mad.method.is_response() {
            self.stats.dropped += 1;
            return None;
        }
        let method = hdr.mad.method;
        let resp_method = if method == Method::SET {
            Method::GET_RESP
        } else {
            method.response()
        };
        if self.mode == SaMode::Busy {
            self.stats.busy += 1;
            return Some(response(&hdr, resp_method, MadStatus::BUSY, &[]));
        }
        let data = SaPacket::new_unchecked(&req[..]).data();
        let attr = hdr.mad.attr_id;
        let result = if attr == AttrId::PATH_RECORD && method == Method::GET {
            self.stats.path_queries += 1;
            let r = path_query(topo, from, PathCompMask(hdr.comp_mask), data)
                .map(|p| p.to_bytes().to_vec());
            if r.is_err() {
                self.stats.no_record += 1;
            }
            r
        } else if attr == AttrId::MC_MEMBER_RECORD && method == Method::SET {
            let r = self.join(topo, from, McCompMask(hdr.comp_mask), data);
            self.count(r.is_ok(), true);
            r.map(|m| m.to_bytes().to_vec())
        } else if attr == AttrId::INFORM_INFO && method == Method::SET {
            self.inform(from, data).map(|r| r.to_bytes().to_vec())
        } else if attr == AttrId::MC_MEMBER_RECORD && method == Method::DELETE {
            let r = self.leave(topo, from, McCompMask(hdr.comp_mask), data);
            self.count(r.is_ok(), false);
            r.map(|m| m.to_bytes().to_vec())
        } else {
            self.stats.unsupported += 1;
            Err(STATUS_REQ_INVALID)
        };
        Some(match result {
            Ok(rec) => response(&hdr, resp_method, MadStatus::OK, &rec),
            Err(status) => response(&hdr, resp_method, status, &[]),
        })
    }

    /// Refuses one request because the SA's queue is full: the BUSY answer
    /// ([`MadStatus::BUSY`], no data) when `busy`, else nothing (the request is dropped).
    /// MADs that are not SA requests are dropped either way, as [`SubnetAdmin::answer`]
    /// drops them.
    pub fn overflow(&mut self, mad: &[u8], busy: bool) -> Option<[u8; MAD_LEN]> {
        let Some((hdr, resp_method)) = request_header(mad) else {
            self.stats.dropped += 1;
            return None;
        };
        if !busy {
            self.stats.overflow_dropped += 1;
            return None;
        }
        self.stats.overflow_busy += 1;
        Some(response(&hdr, resp_method, MadStatus::BUSY, &[]))
    }

    /// The group with this MGID, if any port is in it.
    #[must_use]
    pub fn group(&self, mgid: &Gid) -> Option<&McGroup> {
        self.groups.get(mgid)
    }

    /// The group a multicast LID belongs to, for delivering a packet sent to it.
    #[must_use]
    pub fn group_by_mlid(&self, mlid: u16) -> Option<&McGroup> {
        self.groups.values().find(|g| g.mlid == mlid)
    }

    /// Every group, in MGID order.
    pub fn groups(&self) -> impl Iterator<Item = &McGroup> {
        self.groups.values()
    }

    /// Drops `p` from every group, deleting groups left empty: the SM does that when a
    /// port goes down, so the host must join again when it comes back.
    /// Its subscriptions go too (the groups deleted are queued as traps 67).
    pub fn port_down(&mut self, p: PortRef) {
        let mlids = &mut self.mlids;
        let traps = &mut self.traps;
        self.groups.retain(|_, g| {
            g.members.remove(&p);
            let keep = !g.members.is_empty();
            if !keep {
                mlids.remove(&g.mlid);
                traps.push(SmTrap::McastGroupDeleted(g.mgid));
            }
            keep
        });
        self.subs.remove(&p);
        self.reports.retain(|_, r| r.to != p);
    }

    /// SM failover: the new SM knows no memberships, so every group is gone until hosts
    /// rejoin (after the client-reregister event). The MLID counter carries on, so new
    /// groups never reuse an MLID a stale host may still be attached to. It knows no
    /// subscriptions either, and repeats no Report of the old SM.
    pub fn forget_all_members(&mut self) {
        self.groups.clear();
        self.mlids.clear();
        self.subs.clear();
        self.reports.clear();
    }

    /// The traps `p` is subscribed to, in number order.
    #[must_use]
    pub fn subscriptions(&self, p: PortRef) -> Vec<u16> {
        self.subs
            .get(&p)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The group events queued by joins, leaves and port downs since the last call.
    pub fn take_traps(&mut self) -> Vec<SmTrap> {
        std::mem::take(&mut self.traps)
    }

    /// The Reports of `trap` for every port subscribed to it (in port order), each with
    /// a TID of its own, from the SM at `sm_lid`/`sm_gid`; each waits for its
    /// ReportResp. A port never hears of its own GID's event.
    pub fn trap(
        &mut self,
        trap: SmTrap,
        sm_lid: u16,
        sm_gid: Gid,
        topo: &Topology,
    ) -> Vec<(u64, PortRef, [u8; MAD_LEN])> {
        if self.mode == SaMode::Down {
            return Vec::new();
        }
        let notice = NoticeRepr::sm_trap(trap, sm_lid, sm_gid);
        let number = trap.number().0;
        let to: Vec<PortRef> = self
            .subs
            .iter()
            .filter(|(p, s)| {
                s.contains(&number) && topo.port(**p).is_some_and(|lp| lp.gid != trap.gid())
            })
            .map(|(p, _)| *p)
            .collect();
        let mut out = Vec::new();
        for p in to {
            self.report_tid += 1;
            let tid = self.report_tid;
            let hdr = SaHeaderRepr {
                mad: acm_proto::mad::MadHeaderRepr {
                    base_version: 1,
                    mgmt_class: MgmtClass::SA,
                    class_version: acm_proto::sa::SA_CLASS_VERSION,
                    method: Method::REPORT,
                    tid,
                    attr_id: AttrId::NOTICE,
                    ..acm_proto::mad::MadHeaderRepr::default()
                },
                ..SaHeaderRepr::default()
            };
            let mut mad = [0u8; MAD_LEN];
            hdr.emit(&mut mad);
            notice.emit(&mut mad[SA_HEADER_LEN..]);
            self.reports.insert(
                tid,
                PendingReport {
                    to: p,
                    mad,
                    tries_left: REPORT_TRIES - 1,
                },
            );
            self.stats.reports += 1;
            out.push((tid, p, mad));
        }
        out
    }

    /// The Report `tid` was not acknowledged in time: the MAD to send again, if it is
    /// still waiting and has tries left (otherwise it is given up).
    pub fn report_again(&mut self, tid: u64) -> Option<(PortRef, [u8; MAD_LEN])> {
        let r = self.reports.get_mut(&tid)?;
        if r.tries_left == 0 {
            self.reports.remove(&tid);
            return None;
        }
        r.tries_left -= 1;
        self.stats.reports += 1;
        Some((r.to, r.mad))
    }

    /// A subscription (or its removal) from `from`.
    fn inform(&mut self, from: PortRef, data: &[u8]) -> Result<InformInfoRepr, MadStatus> {
        let rec = InformInfoRepr::parse(data).map_err(|_| STATUS_REQ_INVALID)?;
        let known = TrapNumber::SM_EVENTS.contains(&rec.trap_number);
        if rec.is_generic != 1 || !known {
            return Err(STATUS_REQ_INVALID);
        }
        let subs = self.subs.entry(from).or_default();
        if rec.subscribe == 1 {
            subs.insert(rec.trap_number.0);
            self.stats.subscriptions += 1;
        } else {
            subs.remove(&rec.trap_number.0);
        }
        Ok(rec)
    }

    /// What the SA has done so far.
    #[must_use]
    pub fn stats(&self) -> &SaStats {
        &self.stats
    }

    fn count(&mut self, ok: bool, join: bool) {
        match (ok, join) {
            (true, true) => self.stats.joins += 1,
            (true, false) => self.stats.leaves += 1,
            (false, _) => self.stats.refused += 1,
        }
    }

    /// The port a join or leave is for: the PortGID's when the mask has one (it must be
    /// the sender's own: no proxy joins), else the sender.
    fn member_port(
        topo: &Topology,
        from: PortRef,
        mask: McCompMask,
        rec: &McMemberRecordRepr,
    ) -> Result<PortRef, MadStatus> {
        if mask.contains(McCompMask::PORT_GID) && !rec.port_gid.is_zero() {
            match topo.by_gid(&rec.port_gid) {
                Some(p) if p == from => Ok(p),
                _ => Err(STATUS_REQ_INVALID),
            }
        } else {
            Ok(from)
        }
    }

    fn join(
        &mut self,
        topo: &Topology,
        from: PortRef,
        mask: McCompMask,
        data: &[u8],
    ) -> Result<McMemberRecordRepr, MadStatus> {
        let rec = McMemberRecordRepr::parse(data).map_err(|_| STATUS_REQ_INVALID)?;
        let who = Self::member_port(topo, from, mask, &rec)?;
        let port = topo.port(who).ok_or(STATUS_REQ_INVALID)?;
        if !port.up || !port.ib {
            return Err(STATUS_REQ_INVALID);
        }
        if !mask.contains(McCompMask::JOIN_STATE)
            || !rec.join_state.contains(JoinState::FULL_MEMBER)
        {
            return Err(STATUS_REQ_INVALID);
        }
        if !mask.contains(McCompMask::MGID) || !rec.mgid.is_multicast() {
            return Err(STATUS_REQ_INVALID);
        }
        let req_pkey = mask.contains(McCompMask::PKEY).then_some(rec.pkey);
        let port_pkey = match req_pkey {
            Some(k) => port
                .pkeys
                .iter()
                .copied()
                .find(|&p| p & 0x7FFF == k & 0x7FFF && k & 0x7FFF != 0),
            None => port.pkeys.first().copied(),
        }
        .ok_or(STATUS_REQ_INVALID)?;
        let port_rate = rate_mbps(port.rate);
        let port_mtu = mtu_bytes(port.mtu);
        let mtu_sel = selector(mask, McCompMask::MTU_SELECTOR, McCompMask::MTU, rec.mtu);
        let rate_sel = selector(mask, McCompMask::RATE_SELECTOR, McCompMask::RATE, rec.rate);

        if let Some(g) = self.groups.get_mut(&rec.mgid) {
            let ok = g.pkey & 0x7FFF == port_pkey & 0x7FFF
                && port_rate >= rate_mbps(g.rate)
                && port_mtu >= mtu_bytes(g.mtu)
                && (!mask.contains(McCompMask::QKEY) || rec.qkey == g.qkey)
                && mtu_sel.is_none_or(|(s, v)| satisfies(s, mtu_bytes(v), mtu_bytes(g.mtu)))
                && rate_sel.is_none_or(|(s, v)| satisfies(s, rate_mbps(v), rate_mbps(g.rate)));
            if !ok {
                return Err(STATUS_REQ_INVALID);
            }
            g.members.insert(who);
            return Ok(record(g, port.gid, &rec));
        }

        let rate = choose(rate_sel, port.rate, rate_mbps).ok_or(STATUS_REQ_INVALID)?;
        let mtu = choose(mtu_sel, port.mtu, mtu_bytes).ok_or(STATUS_REQ_INVALID)?;
        let mlid = self.alloc_mlid().ok_or(STATUS_NO_RESOURCES)?;
        let g = McGroup {
            mgid: rec.mgid,
            mlid,
            pkey: req_pkey.unwrap_or(port_pkey),
            qkey: if mask.contains(McCompMask::QKEY) {
                rec.qkey
            } else {
                0
            },
            rate,
            mtu,
            sl: 0,
            packet_lifetime: port.subnet_timeout & 0x3F,
            members: BTreeSet::from([who]),
        };
        let out = record(&g, port.gid, &rec);
        self.mlids.insert(mlid);
        self.groups.insert(rec.mgid, g);
        self.traps.push(SmTrap::McastGroupCreated(rec.mgid));
        Ok(out)
    }

    fn leave(
        &mut self,
        topo: &Topology,
        from: PortRef,
        mask: McCompMask,
        data: &[u8],
    ) -> Result<McMemberRecordRepr, MadStatus> {
        let rec = McMemberRecordRepr::parse(data).map_err(|_| STATUS_REQ_INVALID)?;
        let who = Self::member_port(topo, from, mask, &rec)?;
        let gid = topo.port(who).ok_or(STATUS_REQ_INVALID)?.gid;
        let g = self.groups.get_mut(&rec.mgid).ok_or(STATUS_REQ_INVALID)?;
        if !g.members.remove(&who) {
            return Err(STATUS_REQ_INVALID);
        }
        let out = record(g, gid, &rec);
        if g.members.is_empty() {
            self.mlids.remove(&g.mlid);
            self.groups.remove(&rec.mgid);
            self.traps.push(SmTrap::McastGroupDeleted(rec.mgid));
        }
        Ok(out)
    }

    /// The next MLID not held by a group, counting up from the last one handed out and
    /// wrapping from 0xFFFE to 0xC001.
    fn alloc_mlid(&mut self) -> Option<u16> {
        let span = MLID_LAST - MLID_FIRST + 1;
        let start = if self.next_mlid < MLID_FIRST {
            MLID_FIRST
        } else {
            self.next_mlid
        };
        for i in 0..span {
            let cand = MLID_FIRST + (start - MLID_FIRST + i) % span;
            if !self.mlids.contains(&cand) {
                self.next_mlid = if cand == MLID_LAST {
                    MLID_FIRST
                } else {
                    cand + 1
                };
                return Some(cand);
            }
        }
        None
    }
}

/// Builds the 256-byte response: the request's SA header with `method`, `status`, the
/// RMPP header cleared, then `data` (zeros after it).
fn response(req: &SaHeaderRepr, method: Method, status: MadStatus, data: &[u8]) -> [u8; MAD_LEN] {
    let mut hdr = *req;
    hdr.mad.method = method;
    hdr.mad.status = status;
    hdr.rmpp = RmppRepr::default();
    let mut out = [0u8; MAD_LEN];
    hdr.emit(&mut out);
    let n = data.len().min(MAD_LEN - SA_HEADER_LEN);
    out[SA_HEADER_LEN..SA_HEADER_LEN + n].copy_from_slice(&data[..n]);
    out
}

/// Answers a PathRecord query (see the module docs), or the status to fail it with.
fn path_query(
    topo: &Topology,
    from: PortRef,
    mask: PathCompMask,
    data: &[u8],
) -> Result<PathRecordRepr, MadStatus> {
    let q = PathRecordRepr::parse(data).map_err(|_| STATUS_REQ_INVALID)?;
    let no = STATUS_NO_RECORDS;
    let src = if mask.contains(PathCompMask::SGID) {
        topo.by_gid(&q.sgid)
    } else if mask.contains(PathCompMask::SLID) {
        topo.by_lid(q.slid)
    } else {
        Some(from)
    }
    .ok_or(no)?;
    let dst = if mask.contains(PathCompMask::DGID) {
        topo.by_gid(&q.dgid)
    } else if mask.contains(PathCompMask::DLID) {
        topo.by_lid(q.dlid)
    } else {
        None
    }
    .ok_or(no)?;
    let (sp, dp) = (topo.port(src).ok_or(no)?, topo.port(dst).ok_or(no)?);
    if !(sp.up && dp.up && sp.ib && dp.ib) {
        return Err(no);
    }
    let lid_for = |bit: PathCompMask, queried: u16, p: &crate::topology::LivePort| {
        if mask.contains(bit) {
            p.has_lid(queried).then_some(queried)
        } else {
            Some(p.lid)
        }
    };
    let slid = lid_for(PathCompMask::SLID, q.slid, sp).ok_or(no)?;
    let dlid = lid_for(PathCompMask::DLID, q.dlid, dp).ok_or(no)?;
    let shared = topo.shared_pkeys(src, dst);
    let pkey = if mask.contains(PathCompMask::PKEY) {
        shared.into_iter().find(|&k| k & 0x7FFF == q.pkey & 0x7FFF)
    } else {
        shared.into_iter().next()
    }
    .ok_or(no)?;
    let mtu = if mtu_bytes(sp.mtu) <= mtu_bytes(dp.mtu) {
        sp.mtu
    } else {
        dp.mtu
    };
    let rate = if rate_mbps(sp.rate) <= rate_mbps(dp.rate) {
        sp.rate
    } else {
        dp.rate
    };
    Ok(PathRecordRepr {
        dgid: dp.gid,
        sgid: sp.gid,
        dlid,
        slid,
        tclass: if mask.contains(PathCompMask::TCLASS) {
            q.tclass
        } else {
            0
        },
        reversible: true,
        numpath: 1,
        pkey,
        sl: dp.sl & 0xF,
        mtu: Selected::exactly(mtu),
        rate: Selected::exactly(rate),
        packet_lifetime: Selected::exactly(sp.subnet_timeout & 0x3F),
        ..PathRecordRepr::default()
    })
}

/// The response record of a join or leave.
fn record(g: &McGroup, port_gid: Gid, req: &McMemberRecordRepr) -> McMemberRecordRepr {
    McMemberRecordRepr {
        mgid: g.mgid,
        port_gid,
        qkey: g.qkey,
        mlid: g.mlid,
        mtu: Selected::exactly(g.mtu),
        tclass: 0,
        pkey: g.pkey,
        rate: Selected::exactly(g.rate),
        packet_lifetime: Selected::exactly(g.packet_lifetime),
        sl: g.sl,
        flow_label: 0,
        hop_limit: 0,
        scope: req.scope,
        join_state: req.join_state,
        ..McMemberRecordRepr::default()
    }
}

/// The request's selector and value for MTU or rate, when the mask has the value bit
/// (without the selector bit the value is taken as "exactly").
fn selector<T: Copy>(
    mask: McCompMask,
    sel_bit: McCompMask,
    val_bit: McCompMask,
    v: Selected<T>,
) -> Option<(Selector, T)> {
    if !mask.contains(val_bit) {
        return None;
    }
    let sel = if mask.contains(sel_bit) {
        v.selector
    } else {
        Selector::EXACTLY
    };
    Some((sel, v.value))
}

/// Whether a group's value (`have`, in bytes or Mb/s) satisfies a selector on `want`.
/// Unknown codes (0) never satisfy "exactly".
fn satisfies(sel: Selector, want: u32, have: u32) -> bool {
    match sel {
        Selector::GREATER_THAN => have > want,
        Selector::LESS_THAN => have < want,
        Selector::EXACTLY => want != 0 && have == want,
        _ => true,
    }
}

/// The value a new group gets from a selector, given the creating port's own; `None`
/// when the port cannot provide it.
fn choose<T: Copy>(sel: Option<(Selector, T)>, port: T, rank: fn(T) -> u32) -> Option<T> {
    let chosen = match sel {
        None => port,
        Some((Selector::EXACTLY, v)) => v,
        Some((Selector::GREATER_THAN, v)) if rank(port) > rank(v) => port,
        Some((Selector::LESS_THAN, v)) if rank(port) < rank(v) => port,
        Some((Selector::LARGEST_AVAILABLE, _)) => port,
        Some(_) => return None,
    };
    (rank(chosen) != 0 && rank(chosen) <= rank(port)).then_some(chosen)
}

/// A rate's speed (0 for an unknown code), because rate enums are not ordered by speed.
fn rate_mbps(r: Rate) -> u32 {
    r.mbps().unwrap_or(0)
}

/// An MTU's size (0 for an unknown code).
fn mtu_bytes(m: Mtu) -> u32 {
    m.bytes().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{FabricSpec, GenOptions, HostId};
    use acm_proto::acm_mad::ACM_QKEY;
    use acm_proto::mad::MadHeaderPacket;
    use acm_proto::mcmember::McScope;
    use acm_proto::mgid::AcmMgid;
    use quickcheck::{QuickCheck, TestResult};

    const TID: u64 = 0x0000_0001_0000_002A;

    fn p(h: usize) -> PortRef {
        PortRef::new(HostId(h), 0, 1)
    }

    fn topo(spec: &FabricSpec) -> Topology {
        spec.validate().unwrap();
        Topology::new(spec)
    }

    fn mad(hdr: SaHeaderRepr, data: &[u8]) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        hdr.emit(&mut m);
        m[SA_HEADER_LEN..SA_HEADER_LEN + data.len()].copy_from_slice(data);
        m
    }

    /// A query as ibacmp sends it (case A: SGID, DGID, PKEY).
    fn path_mad(q: &PathRecordRepr) -> [u8; MAD_LEN] {
        mad(
            SaHeaderRepr::path_record_get(TID, q.sa_comp_mask()),
            &q.to_bytes(),
        )
    }

    fn query(topo: &Topology, a: PortRef, b: PortRef, pkey: u16) -> PathRecordRepr {
        PathRecordRepr {
            sgid: topo.port(a).unwrap().gid,
            dgid: topo.port(b).unwrap().gid,
            pkey,
            ..PathRecordRepr::default()
        }
    }

    /// The MAD header of `m`, to change in place.
    fn header(m: &mut [u8]) -> MadHeaderPacket<&mut [u8]> {
        MadHeaderPacket::new_unchecked(m)
    }

    fn method(resp: &[u8]) -> Method {
        MadHeaderPacket::new_unchecked(resp).method()
    }

    fn status(resp: &[u8; MAD_LEN]) -> u16 {
        SaPacket::new_unchecked(&resp[..]).status().0
    }

    fn ask_path(
        sa: &mut SubnetAdmin,
        t: &Topology,
        from: PortRef,
        q: &PathRecordRepr,
    ) -> Result<PathRecordRepr, u16> {
        let r = sa.answer(t, from, &path_mad(q)).expect("answered");
        let h = MadHeaderPacket::new_unchecked(&r[..]);
        assert_eq!(
            (h.method(), h.tid(), h.attr_id()),
            (Method::GET_RESP, TID, AttrId::PATH_RECORD)
        );
        match status(&r) {
            0 => Ok(PathRecordRepr::parse(&r[SA_HEADER_LEN..]).unwrap()),
            s => {
                assert!(r[SA_HEADER_LEN..].iter().all(|&b| b == 0));
                Err(s)
            }
        }
    }

    fn join_mad(t: &Topology, who: PortRef, pkey: u16, rate: Rate, mtu: Mtu) -> [u8; MAD_LEN] {
        let mgid = AcmMgid::new(pkey, rate, mtu).to_gid();
        let rec = McMemberRecordRepr::ibacm_join(mgid, t.port(who).unwrap().gid, pkey, rate, mtu);
        mad(
            SaHeaderRepr::mcmember_join(TID, McCompMask::IBACM_JOIN),
            &rec.to_bytes(),
        )
    }

    fn join(
        sa: &mut SubnetAdmin,
        t: &Topology,
        who: PortRef,
        pkey: u16,
        rate: Rate,
        mtu: Mtu,
    ) -> Result<McMemberRecordRepr, u16> {
        let r = sa
            .answer(t, who, &join_mad(t, who, pkey, rate, mtu))
            .expect("answered");
        assert_eq!(method(&r), Method::GET_RESP);
        match status(&r) {
            0 => Ok(McMemberRecordRepr::parse(&r[SA_HEADER_LEN..]).unwrap()),
            s => Err(s),
        }
    }

    fn leave_mad(mut m: [u8; MAD_LEN]) -> [u8; MAD_LEN] {
        header(&mut m).set_method(Method::DELETE);
        m
    }

    #[test]
    fn path_found_with_min_mtu_and_rate() {
        let mut spec = FabricSpec::generate(3, &GenOptions::default());
        // host1: 4x QDR (40), MTU 4096; host2: 1x EDR (25), MTU 2048; host3: 4x SDR (10).
        let p0 = &mut spec.hosts[0].hcas[0].ports[0];
        (p0.speed, p0.mtu) = (4, 4096);
        let p1 = &mut spec.hosts[1].hcas[0].ports[0];
        (p1.width, p1.speed, p1.sl, p1.subnet_timeout) = (1, 32, 5, 14);
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();

        let r = ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(1), 0xFFFF)).unwrap();
        assert_eq!(r.sgid, spec.port_gid(HostId(0), 0, 1));
        assert_eq!(r.dgid, spec.port_gid(HostId(1), 0, 1));
        assert_eq!((r.slid, r.dlid), (1, 2));
        // RATE_40 is enum 7 and RATE_25 enum 15: the minimum is by speed.
        assert_eq!(r.rate, Selected::exactly(Rate::RATE_25));
        assert_eq!(r.mtu, Selected::exactly(Mtu::MTU_2048));
        assert_eq!(r.sl, 5, "the destination's SL");
        assert_eq!(
            r.packet_lifetime,
            Selected::exactly(18),
            "the source's timeout"
        );
        assert_eq!((r.pkey, r.reversible, r.numpath), (0xFFFF, true, 1));
        assert_eq!(
            (r.flow_label, r.hop_limit, r.tclass, r.qos_class),
            (0, 0, 0, 0)
        );
        assert_eq!(r.preference, 0);

        // The reverse direction, asked by the other host.
        let r = ask_path(&mut sa, &t, p(1), &query(&t, p(1), p(0), 0xFFFF)).unwrap();
        assert_eq!((r.slid, r.dlid, r.sl), (2, 1, 0));
        assert_eq!(r.packet_lifetime, Selected::exactly(14));

        // 4x SDR (enum 3) is slower than 1x EDR (enum 15) although its enum is smaller.
        let r = ask_path(&mut sa, &t, p(1), &query(&t, p(1), p(2), 0)).unwrap();
        assert_eq!(r.rate, Selected::exactly(Rate::RATE_10));
        assert_eq!(sa.stats().path_queries, 3);
        assert_eq!(sa.stats().no_record, 0);
    }

    #[test]
    fn path_matches_the_reference_capture() {
        let spec = FabricSpec::parse(include_str!("../../testdata/fabrics/demo.toml")).unwrap();
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let r = ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(1), 0xFFFF)).unwrap();
        // The path the real ibacm returned for 10.0.0.1 -> 10.0.0.2 (acm-proto's capture).
        let captured = "0000000000000000fe800000000000000002c90300a0b002fe800000000000000002c90300a0b00100020001000000000081ffff000084839200000000000000";
        let hex: String = r.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, captured);
    }

    #[test]
    fn path_source_and_destination_by_lid_and_lmc() {
        let mut spec = FabricSpec::generate(2, &GenOptions::default());
        spec.hosts[1].hcas[0].ports[0].lid = 4;
        spec.hosts[1].hcas[0].ports[0].lmc = 2;
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        // Case B, `-f l`: SLID and DLID only.
        let q = PathRecordRepr {
            slid: 1,
            dlid: 6,
            pkey: 0xFFFF,
            ..PathRecordRepr::default()
        };
        let r = ask_path(&mut sa, &t, p(1), &q).unwrap();
        assert_eq!(
            (r.slid, r.dlid),
            (1, 6),
            "the queried LID within the LMC range"
        );
        assert_eq!(r.sgid, spec.port_gid(HostId(0), 0, 1));
        // No SGID or SLID: the sender is the source; base LIDs.
        let q = PathRecordRepr {
            dgid: spec.port_gid(HostId(0), 0, 1),
            ..PathRecordRepr::default()
        };
        let r = ask_path(&mut sa, &t, p(1), &q).unwrap();
        assert_eq!((r.slid, r.dlid), (4, 1));
        assert_eq!(r.sgid, spec.port_gid(HostId(1), 0, 1));
        // An SLID that is not the SGID's port: no record.
        let q = PathRecordRepr {
            sgid: spec.port_gid(HostId(0), 0, 1),
            slid: 5,
            dlid: 4,
            ..PathRecordRepr::default()
        };
        assert_eq!(ask_path(&mut sa, &t, p(0), &q), Err(0x0300));
        // No destination at all, an unknown LID, an unknown GID: no record.
        let q = PathRecordRepr {
            slid: 1,
            ..PathRecordRepr::default()
        };
        assert_eq!(ask_path(&mut sa, &t, p(0), &q), Err(0x0300));
        let q = PathRecordRepr {
            dlid: 8,
            ..PathRecordRepr::default()
        };
        assert_eq!(ask_path(&mut sa, &t, p(0), &q), Err(0x0300));
        let q = PathRecordRepr {
            dgid: Gid::from_parts(0xfe80 << 48, 77),
            ..PathRecordRepr::default()
        };
        assert_eq!(ask_path(&mut sa, &t, p(0), &q), Err(0x0300));
        // tclass is echoed when asked for.
        let q = PathRecordRepr {
            dlid: 1,
            tclass: 0x20,
            ..PathRecordRepr::default()
        };
        assert_eq!(ask_path(&mut sa, &t, p(1), &q).unwrap().tclass, 0x20);
        assert_eq!(sa.stats().no_record, 4);
    }

    #[test]
    fn no_record_across_partitions() {
        let mut spec = FabricSpec::generate(4, &GenOptions::default());
        spec.hosts[0].hcas[0].ports[0].pkeys = vec![0xFFFF, 0x8001];
        spec.hosts[1].hcas[0].ports[0].pkeys = vec![0x8002];
        spec.hosts[2].hcas[0].ports[0].pkeys = vec![0x7FFF, 0x0001];
        spec.hosts[3].hcas[0].ports[0].pkeys = vec![0x7FFF];
        spec.hosts[1].ips.clear();
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        assert_eq!(
            ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(1), 0)),
            Err(0x0300),
            "no partition in common"
        );
        assert_eq!(
            ask_path(&mut sa, &t, p(2), &query(&t, p(2), p(3), 0x7FFF)),
            Err(0x0300),
            "limited and limited"
        );
        // Full and limited: a path in the limited form.
        let r = ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(2), 0)).unwrap();
        assert_eq!(r.pkey, 0x7FFF);
        // The mask's PKEY picks the partition; one they do not share has no record.
        let r = ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(2), 0x8001)).unwrap();
        assert_eq!(r.pkey, 0x0001);
        assert_eq!(
            ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(2), 0x8002)),
            Err(0x0300)
        );
        assert_eq!(sa.stats().no_record, 3);
    }

    #[test]
    fn no_record_for_a_down_or_ethernet_port() {
        let spec = FabricSpec::generate(3, &GenOptions::default());
        let mut t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let q = query(&t, p(0), p(1), 0xFFFF);
        assert!(ask_path(&mut sa, &t, p(0), &q).is_ok());
        t.port_mut(p(1)).unwrap().up = false;
        assert_eq!(ask_path(&mut sa, &t, p(0), &q), Err(0x0300));
        assert_eq!(
            ask_path(&mut sa, &t, p(2), &query(&t, p(1), p(2), 0xFFFF)),
            Err(0x0300),
            "down source"
        );
        t.port_mut(p(1)).unwrap().up = true;
        t.port_mut(p(2)).unwrap().ib = false;
        t.reindex();
        assert!(ask_path(&mut sa, &t, p(0), &q).is_ok());
        assert_eq!(
            ask_path(&mut sa, &t, p(0), &query(&t, p(0), p(2), 0xFFFF)),
            Err(0x0300)
        );
    }

    #[test]
    fn join_creates_groups_with_sequential_mlids() {
        let mut spec = FabricSpec::generate(3, &GenOptions::default());
        spec.hosts[0].hcas[0].ports[0].speed = 4; // 40 Gb/s
        spec.hosts[0].hcas[0].ports[0].subnet_timeout = 16;
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let r = join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        let mgid: Gid = "ff15:4001:ffff:3:400::".parse().unwrap();
        assert_eq!(r.mgid, mgid);
        assert_eq!(r.port_gid, spec.port_gid(HostId(0), 0, 1));
        assert_eq!((r.qkey, r.mlid, r.pkey), (ACM_QKEY, 0xC001, 0xFFFF));
        assert_eq!(r.mtu.to_byte(), 0x84);
        assert_eq!(r.rate.to_byte(), 0x83);
        assert_eq!(r.packet_lifetime.to_byte(), 0x80 | 16);
        assert_eq!((r.sl, r.flow_label, r.hop_limit, r.tclass), (0, 0, 0, 0));
        assert_eq!(
            (r.scope, r.join_state),
            (McScope::SITE_LOCAL, JoinState::FULL_MEMBER)
        );

        // The same group from another host: same MLID, the member's own PortGID.
        let r2 = join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        assert_eq!((r2.mgid, r2.mlid), (mgid, 0xC001));
        assert_eq!(r2.port_gid, spec.port_gid(HostId(1), 0, 1));
        assert_eq!(
            r2.packet_lifetime.value, 16,
            "the group's, set by its creator"
        );
        // Joining again is harmless.
        join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();

        // A second and third group get the next MLIDs.
        let r3 = join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_40, Mtu::MTU_2048).unwrap();
        assert_eq!(r3.mlid, 0xC002);
        assert_eq!(r3.rate.to_byte(), 0x87);
        let r4 = join(&mut sa, &t, p(2), 0xFFFF, Rate::RATE_10, Mtu::MTU_1024).unwrap();
        assert_eq!(r4.mlid, 0xC003);

        let g = sa.group(&mgid).unwrap();
        assert_eq!(g.members, BTreeSet::from([p(0), p(1)]));
        assert_eq!(
            (g.rate, g.mtu, g.qkey, g.sl),
            (Rate::RATE_10, Mtu::MTU_2048, ACM_QKEY, 0)
        );
        assert_eq!(sa.groups().count(), 3);
        assert_eq!(sa.group_by_mlid(0xC002).unwrap().rate, Rate::RATE_40);
        assert_eq!(sa.stats().joins, 5);
    }

    #[test]
    fn join_refused_for_a_slower_or_smaller_port() {
        let mut spec = FabricSpec::generate(3, &GenOptions::default());
        spec.hosts[0].hcas[0].ports[0].speed = 4; // 40 Gb/s
        spec.hosts[0].hcas[0].ports[0].mtu = 4096;
        spec.hosts[2].hcas[0].ports[0].pkeys = vec![0x8001];
        spec.hosts[2].ips[0].pkey = 0x8001;
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_40, Mtu::MTU_4096).unwrap();
        // host2 runs 10 Gb/s and MTU 2048: it cannot meet the group.
        assert_eq!(
            join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_40, Mtu::MTU_4096),
            Err(0x0200)
        );
        // Nor can it create a group faster than itself.
        assert_eq!(
            join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_40, Mtu::MTU_2048),
            Err(0x0200)
        );
        assert_eq!(
            join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_4096),
            Err(0x0200)
        );
        // host3 is not in partition 0xffff at all.
        assert_eq!(
            join(&mut sa, &t, p(2), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048),
            Err(0x0200)
        );
        assert_eq!(sa.stats().refused, 4);
        assert_eq!(sa.groups().count(), 1);
        assert!(
            sa.group(&AcmMgid::new(0xFFFF, Rate::RATE_40, Mtu::MTU_2048).to_gid())
                .is_none()
        );

        // An existing group whose pkey is another partition refuses the port.
        let mgid = AcmMgid::new(0xFFFF, Rate::RATE_40, Mtu::MTU_4096).to_gid();
        let mut rec = McMemberRecordRepr::ibacm_join(
            mgid,
            t.port(p(2)).unwrap().gid,
            0x8001,
            Rate::RATE_10,
            Mtu::MTU_2048,
        );
        rec.mtu = Selected::exactly(Mtu::MTU_2048);
        let m = mad(
            SaHeaderRepr::mcmember_join(TID, McCompMask::IBACM_JOIN),
            &rec.to_bytes(),
        );
        assert_eq!(status(&sa.answer(&t, p(2), &m).unwrap()), 0x0200);
    }

    #[test]
    fn join_checks_the_request_itself() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let good = join_mad(&t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
        // A proxy join (someone else's PortGID).
        assert_eq!(status(&sa.answer(&t, p(1), &good).unwrap()), 0x0200);
        // Not a full member.
        let mut m = good;
        m[SA_HEADER_LEN + 48] = 0x52;
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);
        // A unicast MGID.
        let mut m = good;
        m[SA_HEADER_LEN] = 0xFE;
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);
        // A "greater than 10 Gb/s" group from a 10 Gb/s port.
        let mut m = good;
        m[SA_HEADER_LEN + 42] = 0x03;
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);
        // "Largest available": the port's own.
        m[SA_HEADER_LEN + 42] = 0xC0;
        let r = sa.answer(&t, p(0), &m).unwrap();
        assert_eq!(status(&r), 0);
        assert_eq!(r[SA_HEADER_LEN + 42], 0x83);
        // A joiner asking "exactly 1024" of a 2048 group is refused; a wrong Q_Key too.
        let mut m = good;
        m[SA_HEADER_LEN + 38] = 0x83;
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);
        let mut m = good;
        m[SA_HEADER_LEN + 35] = 1;
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);
        assert_eq!(sa.stats().refused, 6);
        assert_eq!(sa.stats().joins, 1);
    }

    #[test]
    fn leave_removes_the_member_and_then_the_group() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let mgid = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();

        let m = leave_mad(join_mad(&t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048));
        let r = sa.answer(&t, p(0), &m).unwrap();
        assert_eq!((method(&r), status(&r)), (Method::DELETE_RESP, 0));
        let rec = McMemberRecordRepr::parse(&r[SA_HEADER_LEN..]).unwrap();
        assert_eq!((rec.mgid, rec.mlid), (mgid, 0xC001));
        assert_eq!(sa.group(&mgid).unwrap().members, BTreeSet::from([p(1)]));
        // Leaving twice is refused.
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0x0200);

        let m = leave_mad(join_mad(&t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048));
        assert_eq!(status(&sa.answer(&t, p(1), &m).unwrap()), 0);
        assert!(sa.group(&mgid).is_none());
        assert_eq!(status(&sa.answer(&t, p(1), &m).unwrap()), 0x0200);
        assert_eq!((sa.stats().leaves, sa.stats().refused), (2, 2));

        // A new group does not reuse the freed MLID.
        let r = join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        assert_eq!(r.mlid, 0xC002);
    }

    #[test]
    fn port_down_and_failover_drop_memberships() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let mgid = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_1024).unwrap();
        sa.port_down(p(1));
        assert_eq!(sa.groups().count(), 1);
        assert_eq!(sa.group(&mgid).unwrap().members, BTreeSet::from([p(0)]));
        sa.forget_all_members();
        assert_eq!(sa.groups().count(), 0);
        let r = join(&mut sa, &t, p(1), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        assert_eq!(r.mlid, 0xC003);
    }

    #[test]
    fn mlids_wrap_and_run_out() {
        let spec = FabricSpec::generate(1, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let gid = t.port(p(0)).unwrap().gid;
        let join_n = |sa: &mut SubnetAdmin, i: u32| {
            let mut mgid = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
            mgid.0[12..16].copy_from_slice(&i.to_be_bytes());
            let rec =
                McMemberRecordRepr::ibacm_join(mgid, gid, 0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
            let m = mad(
                SaHeaderRepr::mcmember_join(TID, McCompMask::IBACM_JOIN),
                &rec.to_bytes(),
            );
            let r = sa.answer(&t, p(0), &m).unwrap();
            (
                status(&r),
                u16::from_be_bytes([r[SA_HEADER_LEN + 36], r[SA_HEADER_LEN + 37]]),
            )
        };
        let span = u32::from(MLID_LAST - MLID_FIRST) + 1;
        for i in 0..span {
            assert_eq!(join_n(&mut sa, i), (0, MLID_FIRST + i as u16));
        }
        assert_eq!(join_n(&mut sa, span).0, 0x0100, "no MLID left");
        // Free 0xC005 by leaving; the counter wraps to it.
        let victim = sa.group_by_mlid(0xC005).unwrap().mgid;
        let rec = McMemberRecordRepr::ibacm_join(victim, gid, 0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
        let mut m = mad(
            SaHeaderRepr::mcmember_join(TID, McCompMask::IBACM_JOIN),
            &rec.to_bytes(),
        );
        header(&mut m).set_method(Method::DELETE);
        assert_eq!(status(&sa.answer(&t, p(0), &m).unwrap()), 0);
        assert_eq!(join_n(&mut sa, span + 1), (0, 0xC005));
    }

    fn inform_mad(trap: u16, subscribe: u8) -> [u8; MAD_LEN] {
        let mut rec = InformInfoRepr::subscribe(TrapNumber(trap));
        rec.subscribe = subscribe;
        mad(SaHeaderRepr::inform_info_set(TID), &rec.to_bytes())
    }

    #[test]
    fn subscriptions_reports_and_their_acknowledgement() {
        let spec = FabricSpec::generate(3, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        for trap in [64, 65, 66, 67] {
            let r = sa.answer(&t, p(0), &inform_mad(trap, 1)).unwrap();
            assert_eq!((method(&r), status(&r)), (Method::GET_RESP, 0));
            assert_eq!(
                &r[SA_HEADER_LEN..SA_HEADER_LEN + 36],
                &inform_mad(trap, 1)[56..92]
            );
        }
        sa.answer(&t, p(2), &inform_mad(65, 1)).unwrap();
        assert_eq!(sa.subscriptions(p(0)), [64, 65, 66, 67]);
        // Not one of the SM's generic traps: refused.
        assert_eq!(
            status(&sa.answer(&t, p(1), &inform_mad(128, 1)).unwrap()),
            0x0200
        );
        assert!(sa.subscriptions(p(1)).is_empty());

        // Trap 65 for host 2's GID goes to both subscribers, each with its own TID.
        let gid = t.port(p(1)).unwrap().gid;
        let sent = sa.trap(SmTrap::GidOutOfService(gid), 1, Gid::default(), &t);
        assert_eq!(
            sent.iter().map(|(_, to, _)| *to).collect::<Vec<_>>(),
            [p(0), p(2)]
        );
        let (tid, _, m) = sent[0];
        let hdr = SaHeaderRepr::parse(&m).unwrap();
        assert_eq!(
            (hdr.mad.method, hdr.mad.attr_id),
            (Method::REPORT, AttrId::NOTICE)
        );
        let n = NoticeRepr::parse(&m[SA_HEADER_LEN..]).unwrap();
        assert_eq!(n.sm_event(), Some(SmTrap::GidOutOfService(gid)));

        // Acknowledged by its port: not repeated. Another port's ack does nothing.
        let mut ack = m;
        header(&mut ack).set_method(Method::REPORT_RESP);
        assert_eq!(sa.answer(&t, p(2), &ack), None);
        assert_eq!(sa.stats().reports_acked, 0);
        assert_eq!(sa.answer(&t, p(0), &ack), None);
        assert_eq!(sa.stats().reports_acked, 1);
        assert_eq!(sa.report_again(tid), None);
        // Not acknowledged: repeated until the tries are spent.
        let tid2 = sent[1].0;
        for _ in 1..REPORT_TRIES {
            assert_eq!(sa.report_again(tid2).map(|(to, _)| to), Some(p(2)));
        }
        assert_eq!(sa.report_again(tid2), None);
        assert_eq!(sa.stats().reports, 1 + u64::from(REPORT_TRIES));

        // Joins create groups (trap 66); unsubscribing, a port down and a failover
        // forget subscriptions.
        join(&mut sa, &t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048).unwrap();
        let mgid = AcmMgid::new(0xFFFF, Rate::RATE_10, Mtu::MTU_2048).to_gid();
        assert_eq!(sa.take_traps(), [SmTrap::McastGroupCreated(mgid)]);
        sa.answer(&t, p(0), &inform_mad(66, 0)).unwrap();
        assert_eq!(sa.subscriptions(p(0)), [64, 65, 67]);
        sa.port_down(p(0));
        assert!(sa.subscriptions(p(0)).is_empty());
        assert_eq!(sa.take_traps(), [SmTrap::McastGroupDeleted(mgid)]);
        sa.forget_all_members();
        assert!(sa.subscriptions(p(2)).is_empty());
    }

    #[test]
    fn busy_and_down_modes() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let q = path_mad(&query(&t, p(0), p(1), 0xFFFF));
        sa.mode = SaMode::Busy;
        let r = sa.answer(&t, p(0), &q).unwrap();
        assert_eq!((method(&r), status(&r)), (Method::GET_RESP, 0x0001));
        assert!(r[SA_HEADER_LEN..].iter().all(|&b| b == 0));
        let j = join_mad(&t, p(0), 0xFFFF, Rate::RATE_10, Mtu::MTU_2048);
        assert_eq!(status(&sa.answer(&t, p(0), &j).unwrap()), 0x0001);
        assert_eq!(sa.groups().count(), 0);
        sa.mode = SaMode::Down;
        assert_eq!(sa.answer(&t, p(0), &q), None);
        assert_eq!(sa.answer(&t, p(0), &j), None);
        sa.mode = SaMode::Up;
        assert_eq!(status(&sa.answer(&t, p(0), &q).unwrap()), 0);
        let s = sa.stats();
        assert_eq!((s.busy, s.dropped, s.path_queries, s.joins), (2, 2, 1, 0));
    }

    #[test]
    fn overflow_answers_busy_or_drops() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let q = path_mad(&query(&t, p(0), p(1), 0xFFFF));
        let r = sa.overflow(&q, true).unwrap();
        assert_eq!((method(&r), status(&r)), (Method::GET_RESP, 0x0001));
        assert_eq!(
            MadHeaderPacket::new_unchecked(&r[..]).tid(),
            TID,
            "the request's TID"
        );
        assert!(r[SA_HEADER_LEN..].iter().all(|&b| b == 0));
        assert_eq!(sa.overflow(&q, false), None);
        let mut m = q;
        // A response is no request: dropped either way.
        header(&mut m).set_method(Method::GET_RESP);
        assert_eq!(sa.overflow(&m, true), None);
        let s = sa.stats();
        assert_eq!(
            (
                s.overflow_busy,
                s.overflow_dropped,
                s.dropped,
                s.path_queries
            ),
            (1, 1, 1, 0)
        );
    }

    #[test]
    fn unknown_attributes_methods_and_non_sa_mads() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let q = path_mad(&query(&t, p(0), p(1), 0xFFFF));
        let mut m = q;
        header(&mut m).set_attr_id(AttrId::NODE_RECORD);
        let r = sa.answer(&t, p(0), &m).unwrap();
        assert_eq!(
            (method(&r), status(&r)),
            (Method::GET_RESP, 0x0200),
            "unsupported"
        );
        assert_eq!(
            MadHeaderPacket::new_unchecked(&r[..]).attr_id(),
            AttrId::NODE_RECORD
        );
        let mut m = q;
        header(&mut m).set_method(Method::GET_TABLE);
        let r = sa.answer(&t, p(0), &m).unwrap();
        assert_eq!((method(&r), status(&r)), (Method::GET_TABLE_RESP, 0x0200));
        assert_eq!(sa.stats().unsupported, 2);

        let mut m = q;
        header(&mut m).set_mgmt_class(MgmtClass::ACM);
        assert_eq!(sa.answer(&t, p(0), &m), None);
        let mut m = q;
        header(&mut m).set_method(Method::GET_RESP);
        assert_eq!(sa.answer(&t, p(0), &m), None);
        assert_eq!(sa.answer(&t, p(0), &q[..40]), None);
        assert_eq!(sa.stats().dropped, 3);
        // A short but complete-enough request is read zero-padded.
        assert_eq!(status(&sa.answer(&t, p(0), &q[..120]).unwrap()), 0);
    }

    #[test]
    fn response_keeps_the_request_header() {
        let spec = FabricSpec::generate(2, &GenOptions::default());
        let t = topo(&spec);
        let mut sa = SubnetAdmin::new();
        let mut q = path_mad(&query(&t, p(0), p(1), 0xFFFF));
        q[24..36].copy_from_slice(&[1, 1, 0xFF, 0, 0, 0, 0, 1, 0, 0, 0, 9]);
        let r = sa.answer(&t, p(0), &q).unwrap();
        assert_eq!(&r[..3], &q[..3]);
        assert_eq!(&r[6..24], &q[6..24]);
        assert!(r[24..36].iter().all(|&b| b == 0), "RMPP cleared");
        assert_eq!(&r[36..56], &q[36..56]);
    }

    fn fuzz_topology() -> Topology {
        let mut spec = FabricSpec::generate(3, &GenOptions::default());
        spec.hosts[1].hcas[0].ports[0].lmc = 1;
        spec.hosts[1].hcas[0].ports[0].lid = 2;
        spec.hosts[2].hcas[0].ports[0].lid = 4;
        spec.hosts[2].hcas[0].ports[0].pkeys = vec![0x7FFF, 0x8001];
        spec.hosts[2].ips[0].pkey = 0x7FFF;
        topo(&spec)
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        fn prop(bytes: Vec<u8>, from: u8, shape: u8) -> TestResult {
            let t = fuzz_topology();
            let mut sa = SubnetAdmin::new();
            let mut m = bytes;
            // Steer half of the cases into the SA paths that parse records.
            if shape & 1 == 1 && m.len() >= 24 {
                m[1] = 0x03;
                m[3] = [0x01, 0x02, 0x15, 0x12][usize::from(shape >> 1) % 4];
                m[16] = 0;
                m[17] = if shape & 0x10 == 0 { 0x35 } else { 0x38 };
            }
            let from = PortRef::new(HostId(usize::from(from % 4)), 0, 1 + from / 128);
            for mode in [SaMode::Up, SaMode::Busy, SaMode::Down] {
                sa.mode = mode;
                if let Some(r) = sa.answer(&t, from, &m)
                    && (!method(&r).is_response()
                        || MadHeaderPacket::new_unchecked(&r[..]).mgmt_class() != MgmtClass::SA)
                {
                    return TestResult::failed();
                }
            }
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, u8, u8) -> TestResult);
    }

    #[test]
    fn arbitrary_records_never_panic_and_keep_groups_consistent() {
        fn prop(rec: Vec<u8>, mask: u64, method: bool, from: u8) -> bool {
            let t = fuzz_topology();
            let mut sa = SubnetAdmin::new();
            let hdr = SaHeaderRepr::mcmember_join(TID, McCompMask(mask));
            let mut m = [0u8; MAD_LEN];
            hdr.emit(&mut m);
            let n = rec.len().min(MAD_LEN - SA_HEADER_LEN);
            m[SA_HEADER_LEN..SA_HEADER_LEN + n].copy_from_slice(&rec[..n]);
            if method {
                header(&mut m).set_method(Method::DELETE);
            }
            let from = PortRef::new(HostId(usize::from(from % 3)), 0, 1);
            let _ = sa.answer(&t, from, &m);
            // Also as a path query with the same bytes.
            header(&mut m).set_method(Method::GET);
            header(&mut m).set_attr_id(AttrId::PATH_RECORD);
            let _ = sa.answer(&t, from, &m);
            sa.groups()
                .all(|g| !g.members.is_empty() && g.mlid >= MLID_FIRST && g.mlid <= MLID_LAST)
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, u64, bool, u8) -> bool);
    }
}
