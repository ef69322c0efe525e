//! The live state of the fabric's ports while a simulation runs.
//!
//! A [`FabricSpec`] says how the fabric starts; a [`Topology`] is what it is now. Faults
//! (a port going down, a LID change, a pkey table edit, a slower link) change the
//! topology, and everything that looks at ports — the SA, packet delivery, the
//! attributes handed to each host's engine — reads it from here, so one change is seen
//! consistently everywhere.

use crate::spec::{FabricSpec, HostId, LinkLayer};
use acm_engine::{DeviceDesc, DeviceId, PortAttrs, PortState};
use acm_proto::mgid::PKEY_FULL_MEMBER;
use acm_proto::{Gid, Mtu, Rate};
use std::collections::BTreeMap;

/// Names one port of the fabric: host, HCA index and port number. Ordered by host,
/// then HCA, then port, which is the order everything in the simulator iterates in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRef {
    /// The host.
    pub host: HostId,
    /// Index of the HCA in the host's `hcas`.
    pub hca: usize,
    /// Port number, from 1.
    pub port: u8,
}

impl PortRef {
    /// Shorthand for building a reference in tests and fault scripts.
    #[must_use]
    pub const fn new(host: HostId, hca: usize, port: u8) -> Self {
        Self { host, hca, port }
    }
}

/// A port as it is now. Fault injection edits these fields; the SA and the simulator
/// read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePort {
    /// Port GUID.
    pub guid: u64,
    /// GID index 0 (subnet prefix and port GUID); change it only through
    /// [`Topology::port_mut`] followed by [`Topology::reindex`].
    pub gid: Gid,
    /// Base LID; same caveat as `gid`.
    pub lid: u16,
    /// LID mask control: the port answers to `lid .. lid + 2^lmc`.
    pub lmc: u8,
    /// The pkey table, in table order, membership bit included.
    pub pkeys: Vec<u16>,
    /// Active rate.
    pub rate: Rate,
    /// Active MTU.
    pub mtu: Mtu,
    /// PortInfo.SubnetTimeout.
    pub subnet_timeout: u8,
    /// The SL the SA puts in paths to this port.
    pub sl: u8,
    /// Whether the port is ACTIVE: a down port sends nothing, receives nothing and has
    /// no paths.
    pub up: bool,
    /// Whether the link layer is InfiniBand (Ethernet ports are never indexed by LID and
    /// never get paths).
    pub ib: bool,
}

impl LivePort {
    /// Whether `lid` is one of the port's LIDs (its LMC range).
    #[must_use]
    pub fn has_lid(&self, lid: u16) -> bool {
        let base = u32::from(self.lid);
        let l = u32::from(lid);
        self.ib && self.lid != 0 && l >= base && l < base + (1u32 << self.lmc.min(7))
    }
}

/// Per HCA what never changes at run time: the device name and node GUID.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HcaInfo {
    name: String,
    guid: u64,
    ports: u8,
}

/// Every port of the fabric, with indexes by LID and by GID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    ports: BTreeMap<PortRef, LivePort>,
    /// Base LID → (number of LIDs, port), for InfiniBand ports with a LID.
    by_lid: BTreeMap<u16, (u32, PortRef)>,
    by_gid: BTreeMap<Gid, PortRef>,
    /// Per host, per HCA.
    hcas: Vec<Vec<HcaInfo>>,
}

impl Topology {
    /// The fabric as the spec starts it. The spec should be valid
    /// ([`FabricSpec::validate`]); an invalid MTU reads as 2048 and an unknown
    /// width/speed as rate 0.
    #[must_use]
    pub fn new(spec: &FabricSpec) -> Self {
        let mut ports = BTreeMap::new();
        let mut hcas = Vec::with_capacity(spec.hosts.len());
        for (h, host) in spec.host_ids().zip(&spec.hosts) {
            let mut infos = Vec::with_capacity(host.hcas.len());
            for (c, hca) in host.hcas.iter().enumerate() {
                infos.push(HcaInfo {
                    name: hca.name.clone(),
                    guid: hca.guid,
                    ports: hca.ports.len().min(254) as u8,
                });
                for (i, p) in hca.ports.iter().enumerate().take(254) {
                    let n = i as u8 + 1;
                    let guid = spec.port_guid(h, c, n);
                    ports.insert(
                        PortRef::new(h, c, n),
                        LivePort {
                            guid,
                            gid: Gid::from_parts(spec.subnet_prefix, guid),
                            lid: p.lid,
                            lmc: p.lmc,
                            pkeys: p.pkeys.clone(),
                            rate: p.rate(),
                            mtu: p.mtu_enum().unwrap_or(Mtu::MTU_2048),
                            subnet_timeout: p.subnet_timeout,
                            sl: p.sl,
                            up: p.up,
                            ib: p.link_layer == LinkLayer::Ib,
                        },
                    );
                }
            }
            hcas.push(infos);
        }
        let mut t = Self {
            ports,
            by_lid: BTreeMap::new(),
            by_gid: BTreeMap::new(),
            hcas,
        };
        t.reindex();
        t
    }

    /// The port's current state.
    #[must_use]
    pub fn port(&self, p: PortRef) -> Option<&LivePort> {
        self.ports.get(&p)
    }

    /// The port's state, to change it (a fault). After changing `lid`, `lmc`, `gid` or
    /// `ib`, call [`Topology::reindex`] so lookups see the change.
    pub fn port_mut(&mut self, p: PortRef) -> Option<&mut LivePort> {
        self.ports.get_mut(&p)
    }

    /// Rebuilds the LID and GID indexes from the ports. Where two ports claim one LID or
    /// GID (a fault can make them), the later port in [`PortRef`] order wins.
    pub fn reindex(&mut self) {
        self.by_lid.clear();
        self.by_gid.clear();
        for (&r, p) in &self.ports {
            if p.ib && p.lid != 0 {
                self.by_lid.insert(p.lid, (1u32 << p.lmc.min(7), r));
            }
            self.by_gid.insert(p.gid, r);
        }
    }

    /// The port that answers to `lid`, honouring LMC: the port whose range
    /// `[base, base + 2^lmc)` holds it, up or down.
    #[must_use]
    pub fn by_lid(&self, lid: u16) -> Option<PortRef> {
        let (&base, &(span, r)) = self.by_lid.range(..=lid).next_back()?;
        (u32::from(lid) < u32::from(base) + span).then_some(r)
    }

    /// The port whose GID index 0 is `gid`, up or down.
    #[must_use]
    pub fn by_gid(&self, gid: &Gid) -> Option<PortRef> {
        self.by_gid.get(gid).copied()
    }

    /// Every port, in [`PortRef`] order.
    pub fn ports(&self) -> impl Iterator<Item = (PortRef, &LivePort)> {
        self.ports.iter().map(|(&r, p)| (r, p))
    }

    /// The InfiniBand ports that are up, in [`PortRef`] order: the ones an SM change
    /// reaches. Collected, so that the caller may change the fabric as it goes.
    #[must_use]
    pub fn ib_ports_up(&self) -> Vec<PortRef> {
        self.ports()
            .filter(|(_, lp)| lp.up && lp.ib)
            .map(|(p, _)| p)
            .collect()
    }

    /// Number of hosts.
    #[must_use]
    pub fn hosts(&self) -> usize {
        self.hcas.len()
    }

    /// What `ibv_query_port` (and the GID and pkey table queries) would tell the host's
    /// engine about the port now, given the SM's LID and SL.
    #[must_use]
    pub fn attrs(&self, p: PortRef, sm_lid: u16, sm_sl: u8) -> Option<PortAttrs> {
        let lp = self.ports.get(&p)?;
        Some(PortAttrs {
            state: if lp.up {
                PortState::Active
            } else {
                PortState::Down
            },
            link_layer_ib: lp.ib,
            lid: lp.lid,
            lmc: lp.lmc,
            sm_lid,
            sm_sl,
            gids: vec![lp.gid],
            pkeys: lp.pkeys.clone(),
            rate: lp.rate,
            mtu: lp.mtu,
            subnet_timeout: lp.subnet_timeout,
        })
    }

    /// The host's devices as the engine discovers them: `DeviceId(i)` is HCA `i`, with
    /// every port's current [`Topology::attrs`]. Empty for an unknown host.
    #[must_use]
    pub fn devices(&self, host: HostId, sm_lid: u16, sm_sl: u8) -> Vec<DeviceDesc> {
        let Some(hcas) = self.hcas.get(host.index()) else {
            return Vec::new();
        };
        hcas.iter()
            .enumerate()
            .map(|(c, info)| DeviceDesc {
                id: DeviceId(c as u32),
                name: info.name.clone(),
                guid: info.guid,
                ports: (1..=info.ports)
                    .filter_map(|n| self.attrs(PortRef::new(host, c, n), sm_lid, sm_sl))
                    .collect(),
            })
            .collect()
    }

    /// The verbs name of an HCA (`mlx5_0`), for logs and address files.
    #[must_use]
    pub fn hca_name(&self, host: HostId, hca: usize) -> Option<&str> {
        Some(self.hcas.get(host.index())?.get(hca)?.name.as_str())
    }

    /// The partition two ports share, which decides whether they may talk at all: the
    /// first entry of `a`'s table whose partition (low 15 bits) is also in `b`'s table,
    /// where at least one of the two entries is a full member (two limited members
    /// cannot talk). The value has `a`'s low 15 bits, and bit 15 set only when both are
    /// full members (so a full member talking to a limited one gets the limited form).
    #[must_use]
    pub fn shared_pkey(&self, a: PortRef, b: PortRef) -> Option<u16> {
        self.shared_pkeys(a, b).into_iter().next()
    }

    /// Every partition two ports share, in `a`'s table order, each valued as in
    /// [`Topology::shared_pkey`]. Empty when either port is unknown.
    #[must_use]
    pub fn shared_pkeys(&self, a: PortRef, b: PortRef) -> Vec<u16> {
        let (Some(pa), Some(pb)) = (self.ports.get(&a), self.ports.get(&b)) else {
            return Vec::new();
        };
        let mut out: Vec<u16> = Vec::new();
        for &ka in &pa.pkeys {
            // Prefer a full-member entry of b's table when it has both forms.
            let best = pb
                .pkeys
                .iter()
                .copied()
                .filter(|&kb| Self::same_partition(ka, kb))
                .max_by_key(|&kb| kb & PKEY_FULL_MEMBER);
            if let Some(kb) = best {
                let v = (ka & !PKEY_FULL_MEMBER) | (ka & kb & PKEY_FULL_MEMBER);
                if !out
                    .iter()
                    .any(|&o| o & !PKEY_FULL_MEMBER == v & !PKEY_FULL_MEMBER)
                {
                    out.push(v);
                }
            }
        }
        out
    }

    /// Whether two pkeys let their holders talk: the same (valid, non-zero) partition
    /// number, and not both limited members.
    #[must_use]
    pub fn same_partition(a_pkey: u16, b_pkey: u16) -> bool {
        let part = a_pkey & !PKEY_FULL_MEMBER;
        part != 0 && part == b_pkey & !PKEY_FULL_MEMBER && (a_pkey | b_pkey) & PKEY_FULL_MEMBER != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{GenOptions, HostId, PortSpec};

    fn fabric(n: usize) -> FabricSpec {
        FabricSpec::generate(n, &GenOptions::default())
    }

    #[test]
    fn built_from_the_spec() {
        let spec = fabric(3);
        let t = Topology::new(&spec);
        assert_eq!(t.hosts(), 3);
        assert_eq!(t.ports().count(), 3);
        let r = PortRef::new(HostId(1), 0, 1);
        let p = t.port(r).unwrap();
        assert_eq!(p.lid, 2);
        assert_eq!(p.gid, spec.port_gid(HostId(1), 0, 1));
        assert_eq!(p.guid, spec.port_guid(HostId(1), 0, 1));
        assert_eq!((p.rate, p.mtu), (Rate::RATE_10, Mtu::MTU_2048));
        assert_eq!(p.pkeys, vec![0xFFFF]);
        assert!(p.up && p.ib);
        assert_eq!(t.by_lid(2), Some(r));
        assert_eq!(t.by_gid(&p.gid), Some(r));
        assert_eq!(t.by_lid(4), None);
        assert_eq!(t.by_lid(0), None);
        assert_eq!(t.port(PortRef::new(HostId(1), 0, 2)), None);
        assert_eq!(t.hca_name(HostId(2), 0), Some("mlx5_0"));
        assert_eq!(t.hca_name(HostId(3), 0), None);
        let order: Vec<PortRef> = t.ports().map(|(r, _)| r).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
    }

    #[test]
    fn lid_lookup_honours_lmc() {
        let mut spec = fabric(3);
        spec.hosts[1].hcas[0].ports[0].lid = 8;
        spec.hosts[1].hcas[0].ports[0].lmc = 2;
        spec.hosts[2].hcas[0].ports[0].lid = 12;
        spec.validate().unwrap();
        let t = Topology::new(&spec);
        for lid in 8..12 {
            assert_eq!(
                t.by_lid(lid),
                Some(PortRef::new(HostId(1), 0, 1)),
                "lid {lid}"
            );
        }
        assert_eq!(t.by_lid(12), Some(PortRef::new(HostId(2), 0, 1)));
        assert_eq!(t.by_lid(13), None);
        assert_eq!(t.by_lid(7), None);
        assert_eq!(t.by_lid(1), Some(PortRef::new(HostId(0), 0, 1)));
        assert!(t.port(PortRef::new(HostId(1), 0, 1)).unwrap().has_lid(11));
    }

    #[test]
    fn changes_are_seen_after_reindex() {
        let spec = fabric(2);
        let mut t = Topology::new(&spec);
        let r = PortRef::new(HostId(1), 0, 1);
        let p = t.port_mut(r).unwrap();
        p.lid = 40;
        p.gid = Gid::from_parts(0xfe80 << 48, 0x1234);
        p.up = false;
        assert_eq!(t.by_lid(40), None, "not indexed until reindex");
        assert_eq!(t.by_lid(2), Some(r), "the old LID until reindex");
        t.reindex();
        assert_eq!(t.by_lid(2), None);
        assert_eq!(t.by_lid(40), Some(r), "down ports are still found");
        assert_eq!(t.by_gid(&Gid::from_parts(0xfe80 << 48, 0x1234)), Some(r));
        assert_eq!(t.by_gid(&spec.port_gid(HostId(1), 0, 1)), None);
    }

    #[test]
    fn attrs_and_devices_are_what_the_engine_sees() {
        let mut spec = fabric(2);
        spec.hosts[0].hcas[0].ports[0].pkeys = vec![0xFFFF, 0x8001];
        spec.hosts[0].hcas[0].ports[0].speed = 4;
        spec.hosts[0].hcas[0].ports[0].mtu = 4096;
        spec.hosts[0].hcas[0].ports.push(PortSpec {
            up: false,
            ..PortSpec::ib(100)
        });
        let t = Topology::new(&spec);
        let a = t.attrs(PortRef::new(HostId(0), 0, 1), 1, 3).unwrap();
        assert_eq!(a.state, PortState::Active);
        assert!(a.link_layer_ib && a.usable());
        assert_eq!((a.lid, a.lmc, a.sm_lid, a.sm_sl), (1, 0, 1, 3));
        assert_eq!(a.gids, vec![spec.port_gid(HostId(0), 0, 1)]);
        assert_eq!(a.pkeys, vec![0xFFFF, 0x8001]);
        assert_eq!(
            (a.rate, a.mtu, a.subnet_timeout),
            (Rate::RATE_40, Mtu::MTU_4096, 18)
        );
        let down = t.attrs(PortRef::new(HostId(0), 0, 2), 1, 3).unwrap();
        assert_eq!(down.state, PortState::Down);
        assert_eq!(t.attrs(PortRef::new(HostId(0), 0, 3), 1, 0), None);

        let devs = t.devices(HostId(0), 1, 3);
        assert_eq!(devs.len(), 1);
        assert_eq!(devs[0].id, DeviceId(0));
        assert_eq!(devs[0].name, "mlx5_0");
        assert_eq!(devs[0].guid, spec.hosts[0].hcas[0].guid);
        assert_eq!(devs[0].ports, vec![a, down]);
        assert!(t.devices(HostId(7), 1, 0).is_empty());
    }

    #[test]
    fn partitions() {
        assert!(Topology::same_partition(0xFFFF, 0xFFFF));
        assert!(Topology::same_partition(0xFFFF, 0x7FFF));
        assert!(Topology::same_partition(0x7FFF, 0xFFFF));
        assert!(!Topology::same_partition(0x7FFF, 0x7FFF));
        assert!(!Topology::same_partition(0x8001, 0x8002));
        assert!(!Topology::same_partition(0x8000, 0x8000));

        let mut spec = fabric(4);
        spec.hosts[0].hcas[0].ports[0].pkeys = vec![0xFFFF, 0x8001];
        spec.hosts[1].hcas[0].ports[0].pkeys = vec![0x7FFF, 0x8001];
        spec.hosts[2].hcas[0].ports[0].pkeys = vec![0x7FFF];
        spec.hosts[3].hcas[0].ports[0].pkeys = vec![0x8002];
        let t = Topology::new(&spec);
        let p = |h| PortRef::new(HostId(h), 0, 1);
        assert_eq!(t.shared_pkey(p(0), p(0)), Some(0xFFFF));
        assert_eq!(t.shared_pkeys(p(0), p(1)), vec![0x7FFF, 0x8001]);
        assert_eq!(t.shared_pkeys(p(1), p(0)), vec![0x7FFF, 0x8001]);
        assert_eq!(t.shared_pkey(p(1), p(2)), None, "limited + limited");
        assert_eq!(t.shared_pkey(p(0), p(2)), Some(0x7FFF));
        assert_eq!(t.shared_pkey(p(0), p(3)), None);
        assert_eq!(t.shared_pkey(p(0), PortRef::new(HostId(9), 0, 1)), None);
    }
}
