//! N-host fabrics built in code, for scale tests and benchmarks: the same arguments
//! always give the same fabric.

use super::types::default_pkeys;
use super::{
    DEFAULT_SUBNET_PREFIX, FabricSpec, HcaSpec, HostSpec, IpSpec, LinkSpec, NicSpec, PortSpec,
    SaSpec, SmSpec,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How [`FabricSpec::generate`] builds a fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenOptions {
    /// Hosts per leaf switch (hosts 1..=n on leaf 0, and so on); 0 is taken as 1.
    pub hosts_per_leaf: usize,
    /// `ibacm_opts.cfg` text for every host.
    pub options: String,
    /// Every port's pkey table (empty means `[0xffff]`); IP addresses go on the first.
    pub pkeys: Vec<u16>,
    /// Also give host `i` the IPv6 address `fd00::i`/64.
    pub ipv6: bool,
    /// `(width, speed)` codes, cycled over the hosts (host 1 gets the first); empty means
    /// `[(2, 1)]`, 4x SDR.
    pub rates: Vec<(u8, u16)>,
}

impl Default for GenOptions {
    fn default() -> Self {
        Self {
            hosts_per_leaf: 32,
            options: String::new(),
            pkeys: default_pkeys(),
            ipv6: false,
            rates: vec![(2, 1)],
        }
    }
}

/// The largest fabric [`FabricSpec::generate`] builds: one unicast LID per host.
pub const MAX_GENERATED_HOSTS: usize = 0xBFFF;

/// Node GUID of generated host 0 (host `i` gets this plus `i * 0x100`).
const GENERATED_GUID_BASE: u64 = 0x0002_c903_0000_0000;

impl FabricSpec {
    /// An N-host fabric, the same for the same arguments.
    ///
    /// Host `i` (1-based, index `i - 1`) is named `host{i}`, on leaf
    /// `(i - 1) / hosts_per_leaf`, with one HCA `mlx5_0` of node GUID
    /// `0x0002c90300000000 + i * 0x100` and one port with LID `i`, the options' pkeys
    /// and the `i`-th rate (cycled). Its IPv4 address is `10.(i >> 16).(i >> 8 & 255).(i
    /// & 255)/8`: unique for every `i` below 2^24 and never the network address, since
    /// `i ≥ 1`; with `ipv6` it also has `fd00::i`/64 (`i` in the low bits). Both are on
    /// the first pkey. The SM is on LID 1 (host 1), SL 0.
    ///
    /// # Panics
    /// If `hosts` exceeds [`MAX_GENERATED_HOSTS`] (0xBFFF, the unicast LID space).
    #[must_use]
    pub fn generate(hosts: usize, opts: &GenOptions) -> Self {
        assert!(
            hosts <= MAX_GENERATED_HOSTS,
            "{hosts} hosts need more unicast LIDs than exist (at most {MAX_GENERATED_HOSTS})"
        );
        let pkeys = if opts.pkeys.is_empty() {
            default_pkeys()
        } else {
            opts.pkeys.clone()
        };
        let rates: &[(u8, u16)] = if opts.rates.is_empty() {
            &[(2, 1)]
        } else {
            &opts.rates
        };
        let per_leaf = opts.hosts_per_leaf.max(1);
        let hosts = (1..=hosts)
            .map(|i| {
                let (width, speed) = rates[(i - 1) % rates.len()];
                let port = PortSpec {
                    pkeys: pkeys.clone(),
                    width,
                    speed,
                    ..PortSpec::ib(i as u16)
                };
                let n = i as u32;
                let v4 = Ipv4Addr::new(10, (n >> 16) as u8, (n >> 8) as u8, n as u8);
                let mut ips = vec![IpSpec {
                    pkey: pkeys[0],
                    ..IpSpec::new(IpAddr::V4(v4), 8)
                }];
                if opts.ipv6 {
                    let v6 = Ipv6Addr::from(0xfd00_u128 << 112 | i as u128);
                    ips.push(IpSpec {
                        pkey: pkeys[0],
                        ..IpSpec::new(IpAddr::V6(v6), 64)
                    });
                }
                HostSpec {
                    name: format!("host{i}"),
                    leaf: ((i - 1) / per_leaf) as u32,
                    hcas: vec![HcaSpec {
                        name: "mlx5_0".into(),
                        guid: GENERATED_GUID_BASE + i as u64 * 0x100,
                        ports: vec![port],
                    }],
                    ips,
                    addr_file: None,
                    options: opts.options.clone(),
                    hosts_data: None,
                    daemon: true,
                    default_route: None,
                }
            })
            .collect();
        Self {
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            sm: SmSpec::default(),
            link: LinkSpec::default(),
            sa: SaSpec::default(),
            nic: NicSpec::default(),
            hosts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::HostId;
    use acm_proto::Rate;

    #[test]
    fn generate_a_thousand_hosts() {
        let g = FabricSpec::generate(
            1000,
            &GenOptions {
                ipv6: true,
                rates: vec![(2, 1), (2, 4)],
                ..GenOptions::default()
            },
        );
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(g.hosts.len(), 1000);
        let mut lids = std::collections::HashSet::new();
        let mut gids = std::collections::HashSet::new();
        let mut ips = std::collections::HashSet::new();
        for (h, host) in g.hosts.iter().enumerate() {
            assert_eq!(host.name, format!("host{}", h + 1));
            assert_eq!(host.leaf, (h / 32) as u32);
            assert!(lids.insert(host.hcas[0].ports[0].lid));
            assert!(gids.insert(g.port_gid(HostId(h), 0, 1)));
            for ip in &host.ips {
                assert!(ips.insert(ip.addr));
            }
        }
        assert_eq!((lids.len(), gids.len(), ips.len()), (1000, 1000, 2000));
        let h = 299; // host300
        assert_eq!(
            g.hosts[h].ips[0].addr,
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 44))
        );
        assert_eq!(
            g.hosts[h].ips[1].addr,
            "fd00::12c".parse::<IpAddr>().unwrap()
        );
        assert_eq!(g.hosts[h].hcas[0].guid, 0x0002_c903_0000_0000 + 300 * 0x100);
        assert_eq!(g.port_guid(HostId(h), 0, 1), 0x0002_c903_0001_2c01);
        assert_eq!(g.hosts[0].hcas[0].ports[0].rate(), Rate::RATE_10);
        assert_eq!(g.hosts[1].hcas[0].ports[0].rate(), Rate::RATE_40);
        assert_eq!(g.sm.lid, 1);
    }

    #[test]
    fn generate_at_the_limit_stays_unique() {
        let g = FabricSpec::generate(MAX_GENERATED_HOSTS, &GenOptions::default());
        assert_eq!(g.validate(), Ok(()));
        let last = &g.hosts[MAX_GENERATED_HOSTS - 1];
        assert_eq!(last.hcas[0].ports[0].lid, 0xBFFF);
        assert_eq!(
            last.ips[0].addr,
            IpAddr::V4(Ipv4Addr::new(10, 0, 0xBF, 0xFF))
        );
    }

    #[test]
    #[should_panic(expected = "unicast LIDs")]
    fn generate_refuses_more_hosts_than_lids() {
        let _ = FabricSpec::generate(MAX_GENERATED_HOSTS + 1, &GenOptions::default());
    }
}
