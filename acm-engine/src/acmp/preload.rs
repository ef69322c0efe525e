//! Endpoint creation: the QP, route and address preloads (docs/ibacmp.md §8), loopback
//! entries (docs/ibacmp.md §7), and what a port change does to the cache.

use super::endpoint::{Ep, EpState, Group, ResolveQueue, SendQueue};
use super::{Acmp, Dest, DestState};
use crate::addr::Address;
use crate::device::{PortAttrs, PortId};
use crate::io::{EndpointId, OpenQp};
use crate::log::{Level, log};
use crate::provider::Ctx;
use acm_proto::Gid;
use acm_proto::Selected;
use acm_proto::client::AddrType;
use acm_proto::mgid::AcmMgid;
use acm_proto::path_record::PathRecordPacket;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// The loopback path (docs/ibacmp.md §7): our own GID and LID both ends, numpath 0, no
/// selector bits, the port's MTU and rate.
fn loopback_path(attrs: &PortAttrs, pkey: u16) -> [u8; 64] {
    let mut path = [0u8; 64];
    let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
    p.set_sgid(attrs.gid0());
    p.set_dgid(attrs.gid0());
    p.set_slid(attrs.lid);
    p.set_dlid(attrs.lid);
    p.set_reversible(true);
    p.set_numpath(0);
    p.set_pkey(pkey);
    p.set_mtu(Selected::from_byte(attrs.mtu.0 & 0x3F));
    p.set_rate(Selected::from_byte(attrs.rate.0 & 0x3F));
    path
}

/// The record a route made stale by a port change is asked for again with: the peer
/// (its GID, and its LID for LID-keyed entries), our current GID and LID, and the old
/// tclass, reversibility and pkey. The rest of the old answer (an SLID that is no
/// longer ours, a DLID, MTU, rate or lifetime the old SA chose) must not constrain it.
pub(super) fn requery_path(old: &[u8; 64], attrs: &PortAttrs, keep_dlid: bool) -> [u8; 64] {
    let o = PathRecordPacket::new_unchecked(&old[..]);
    let mut path = [0u8; 64];
    let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
    p.set_dgid(o.dgid());
    if !o.sgid().is_zero() {
        let ours = attrs.gids.contains(&o.sgid());
        p.set_sgid(if ours { o.sgid() } else { attrs.gid0() });
    }
    if o.slid() != 0 {
        p.set_slid(attrs.lid);
    }
    if keep_dlid {
        p.set_dlid(o.dlid());
    }
    p.set_tclass(o.tclass());
    p.set_reversible(o.reversible());
    p.set_pkey(o.pkey());
    path
}

impl Acmp {
    pub(super) fn open_ep(&mut self, cx: &mut Ctx<'_>, id: EndpointId, port: PortId, pkey: u16) {
        let Some(attrs) = self.ports.get(&port).cloned() else {
            log!(
                cx,
                Level::Basic,
                "acmp_open_endpoint",
                "endpoint on unknown port {}",
                port.port
            );
            return;
        };
        log!(
            cx,
            Level::Basic,
            "acmp_open_endpoint",
            "creating endpoint for pkey {pkey:#06x}"
        );
        let pkey_index = attrs.pkey_index(pkey);
        let mut groups = Vec::new();
        let min = AcmMgid::new(pkey, self.opts.min_rate, self.opts.min_mtu);
        groups.push(Group::new(
            min.to_gid(),
            self.opts.min_rate,
            self.opts.min_mtu,
        ));
        // The native group only matters when routes are built from groups.
        if self.opts.route_acm
            && (attrs.rate != self.opts.min_rate || attrs.mtu != self.opts.min_mtu)
        {
            let native = AcmMgid::new(pkey, attrs.rate, attrs.mtu);
            groups.push(Group::new(native.to_gid(), attrs.rate, attrs.mtu));
        }
        let ep = Ep {
            port,
            pkey,
            state: EpState::Init,
            qpn: None,
            groups,
            dests: super::dest::DestCache::default(),
            addrs: super::endpoint::OwnAddrs::default(),
            counters: crate::Counters::default(),
            resolve_q: ResolveQueue::new(self.opts.resolve_depth),
            resp_q: SendQueue {
                credits: self.opts.send_depth,
                pending: Default::default(),
            },
            requests: BTreeMap::new(),
            last_src: None,
            sends: BTreeMap::new(),
            join_retry: None,
            rtt: crate::rtt::RttEstimator::default(),
        };
        self.eps.insert(id, ep);
        cx.open_qp(OpenQp {
            ep: id,
            port,
            pkey,
            pkey_index,
            recv_depth: self.opts.recv_depth,
            send_depth: self.opts.resolve_depth + self.opts.send_depth,
        });
        if self.opts.route_preload {
            self.preload_routes(cx, id, &attrs);
        }
        if self.opts.addr_preload {
            self.preload_addrs(cx, id, &attrs);
        }
        self.join_all(cx, id);
    }

    /// Adds (or overwrites) the READY entry of a local address.
    pub(super) fn add_loopback(&mut self, cx: &mut Ctx<'_>, id: EndpointId, addr: &Address) {
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let Some(attrs) = self.ports.get(&ep.port) else {
            return;
        };
        // Cached even over the bound (the host's own addresses are few, and bounded by
        // the address file), and never evicted: it cannot be learned from the fabric.
        let idx = match ep.dests.find(addr) {
            Some(i) => i,
            None => ep.dests.insert(Dest::new(*addr)),
        };
        ep.dests.pin(idx);
        let path = loopback_path(attrs, ep.pkey);
        let qpn = ep.qpn.unwrap_or(0);
        if let Some(d) = ep.dests.get_mut(idx) {
            d.path = path;
            d.av = super::path_av::av_from_path(&path, attrs);
            d.remote_qpn = qpn;
            d.addr_expiry = u64::MAX;
            d.route_expiry = u64::MAX;
            d.state = DestState::Ready;
        }
        log!(
            cx,
            Level::Verbose,
            "__acmp_add_addr",
            "added loopback dest {addr}"
        );
    }

    /// Route preload (`opensm_full_v1`): READY entries by LID and by GID for every path
    /// in this port's section.
    fn preload_routes(&mut self, cx: &mut Ctx<'_>, id: EndpointId, attrs: &PortAttrs) {
        let Some(data) = self.route_data.as_ref() else {
            log!(
                cx,
                Level::Basic,
                "acmp_parse_osm_fullv1_paths",
                "route preload selected but no route data"
            );
            return;
        };
        let guid = attrs.gid0().interface_id();
        let Some(section) = data.section_for(guid, attrs.lid) else {
            log!(
                cx,
                Level::Basic,
                "acmp_parse_osm_fullv1_paths",
                "no section for port guid {guid:#x} lid {}",
                attrs.lid
            );
            return;
        };
        let now = cx.now();
        let prefix = attrs.gid0().subnet_prefix();
        let mut entries = Vec::new();
        for p in &section.paths {
            let Some(&dguid) = data.lid_to_guid.get(&p.dlid) else {
                log!(
                    cx,
                    Level::Basic,
                    "acmp_parse_osm_fullv1_paths",
                    "no GUID for dlid {:#x}",
                    p.dlid
                );
                continue;
            };
            entries.push((p.dlid, Gid::from_parts(prefix, dguid), p.sl, p.mtu, p.rate));
        }
        let limit = self.opts.dest_limit;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let mut skipped = 0usize;
        for (dlid, dgid, sl, mtu, rate) in entries {
            let own = dlid == attrs.lid;
            let mut path = [0u8; 64];
            let mut pr = PathRecordPacket::new_unchecked(&mut path[..]);
            pr.set_sgid(attrs.gid0());
            pr.set_dgid(dgid);
            pr.set_slid(attrs.lid);
            pr.set_dlid(dlid);
            pr.set_reversible(true);
            pr.set_numpath(0);
            pr.set_pkey(ep.pkey);
            pr.set_sl(sl);
            pr.set_mtu(Selected::from_byte(mtu & 0x3F));
            pr.set_rate(Selected::from_byte(rate & 0x3F));
            pr.set_packet_lifetime(Selected::from_byte(if own {
                0
            } else {
                attrs.subnet_timeout & 0x3F
            }));
            let (addr_exp, route_exp) = if own {
                (u64::MAX, u64::MAX)
            } else {
                (
                    Self::expiry(now, self.opts.addr_timeout),
                    Self::expiry(now, self.opts.route_timeout),
                )
            };
            for key in [Address::lid(dlid), Address::gid(dgid)] {
                let Some(i) = ep.acquire_dest(&key, limit) else {
                    skipped += 1;
                    continue;
                };
                ep.dests.pin(i);
                if let Some(d) = ep.dests.get_mut(i) {
                    d.path = path;
                    d.av = super::path_av::av_from_path(&path, attrs);
                    d.remote_qpn = 1;
                    d.addr_expiry = addr_exp;
                    d.route_expiry = route_exp;
                    d.state = DestState::Ready;
                }
            }
        }
        Self::log_skipped(cx, "acmp_parse_osm_fullv1_paths", skipped);
    }

    /// Preloaded entries are pinned (never evicted) but count against
    /// `max_dest_cache_bytes`; those past it are not cached, and said so once.
    fn log_skipped(cx: &mut Ctx<'_>, origin: &'static str, skipped: usize) {
        if skipped > 0 {
            log!(
                cx,
                Level::Basic,
                origin,
                "{skipped} preloaded entries not cached: the cache is at max_dest_cache_bytes"
            );
        }
    }

    /// Address preload (`acm_hosts`): each address bound to its GID, READY when the GID's
    /// route was preloaded, else ADDR_RESOLVED (the route comes from the SA on first use).
    fn preload_addrs(&mut self, cx: &mut Ctx<'_>, id: EndpointId, attrs: &PortAttrs) {
        let now = cx.now();
        let hosts = self.hosts.clone();
        let limit = self.opts.dest_limit;
        let Some(ep) = self.eps.get_mut(&id) else {
            return;
        };
        let mut skipped = 0usize;
        for h in &hosts {
            let known = ep
                .dests
                .find(&Address::gid(h.gid))
                .and_then(|i| ep.dests.get(i))
                .map(|d| (d.path, d.av));
            let Some(i) = ep.acquire_dest(&h.address, limit) else {
                skipped += 1;
                continue;
            };
            ep.dests.pin(i);
            let Some(d) = ep.dests.get_mut(i) else {
                continue;
            };
            match known {
                Some((path, av)) => {
                    d.path = path;
                    d.av = av;
                    d.state = DestState::Ready;
                }
                None => {
                    let mut path = [0u8; 64];
                    let mut pr = PathRecordPacket::new_unchecked(&mut path[..]);
                    pr.set_dgid(h.gid);
                    pr.set_slid(attrs.lid);
                    pr.set_reversible(true);
                    pr.set_numpath(0);
                    pr.set_pkey(ep.pkey);
                    d.path = path;
                    d.state = DestState::AddrResolved;
                }
            }
            d.remote_qpn = 1;
            d.preloaded = true;
            d.addr_expiry = Self::expiry(now, self.opts.addr_timeout);
            d.route_expiry = Self::expiry(now, self.opts.route_timeout);
            log!(
                cx,
                Level::Verbose,
                "acmp_parse_hosts_file",
                "added host {} IB GID {}",
                h.address,
                h.gid
            );
        }
        Self::log_skipped(cx, "acmp_parse_hosts_file", skipped);
    }

    /// The port's LID, SM or GIDs changed: learned routes are stale (their SLID, or the
    /// SA that gave them, is gone), so READY entries fall back to ADDR_RESOLVED and are
    /// re-queried on next use — unless their address binding has already expired, in
    /// which case they go back to INIT as a lookup would have sent them
    /// (docs/ibacmp.md §3, READY row): a route re-query must not revive a stale address.
    /// Loopback entries are rebuilt.
    pub(super) fn port_changed(&mut self, cx: &mut Ctx<'_>, port: PortId) {
        let now_min = cx.now().as_minutes();
        let ids = self.eps_on(port);
        for id in ids {
            let Some(ep) = self.eps.get_mut(&id) else {
                continue;
            };
            let addrs = ep.addrs.clone();
            let Some(attrs) = self.ports.get(&port) else {
                continue;
            };
            for d in ep.dests.iter_mut() {
                if d.state == DestState::Ready && !addrs.contains(&d.addr) {
                    if now_min > d.addr_expiry {
                        d.state = DestState::Init;
                        d.path = [0; 64];
                    } else {
                        d.state = DestState::AddrResolved;
                        d.path = requery_path(&d.path, attrs, d.addr.ty == AddrType::LID);
                    }
                }
            }
            if self.opts.loopback_local {
                for a in addrs.iter() {
                    self.add_loopback(cx, id, a);
                }
            }
        }
        log!(
            cx,
            Level::Basic,
            "acmp_port_change",
            "port {}: routes invalidated",
            port.port
        );
    }
}
