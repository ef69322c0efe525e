//! The start-up (and resync) walk of the host's IP addresses (docs/daemon.md §6): every
//! IPv4 and IPv6 address on an IPoIB interface becomes an [`acm_engine::LocalIp`], which
//! the engine puts on the endpoint of the interface's port and pkey.
//!
//! The walk is split in two: [`system_addrs`] asks the system (`getifaddrs`), and the
//! pure [`local_ips`] joins its answer with the IPoIB interfaces ([`super::ipoib`]).
//! [`walk`] does both. Addresses learnt at run time (an RTM_NEWADDR,
//! [`super::rtnl::AddrEvent::Added`]) go through [`local_ip`] with no prefix, as the
//! reference displays those without one.

use super::ipoib::{self, IpoibLink};
use acm_engine::LocalIp;
use std::io;
use std::net::IpAddr;
use std::path::Path;

/// One address of one interface, as `getifaddrs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IfAddr {
    /// The interface name; for an IPv4 address with a label, the label (`ib0:1`).
    pub ifname: String,
    /// The address.
    pub addr: IpAddr,
    /// Its netmask, if the system gave one.
    pub netmask: Option<IpAddr>,
}

/// Every IPv4 and IPv6 address of the host's interfaces.
///
/// # Errors
/// `getifaddrs` failed.
pub(crate) fn system_addrs() -> io::Result<Vec<IfAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs()? {
        let Some(addr) = ifa.address.as_ref().and_then(ip_of) else {
            continue;
        };
        out.push(IfAddr {
            ifname: ifa.interface_name,
            addr,
            netmask: ifa.netmask.as_ref().and_then(ip_of),
        });
    }
    Ok(out)
}

fn ip_of(s: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        Some(IpAddr::V4(v4.ip()))
    } else {
        s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
    }
}

/// The addresses of `addrs` that are on one of `links`, each with its link's GID and
/// pkey and the prefix length of its netmask (the full length without one), in the
/// order of `addrs`.
#[must_use]
pub(crate) fn local_ips(addrs: &[IfAddr], links: &[IpoibLink]) -> Vec<LocalIp> {
    addrs
        .iter()
        .filter_map(|a| {
            // An IPv4 label `ib0:1` names interface ib0.
            let ifname = a.ifname.split_once(':').map_or(&*a.ifname, |(n, _)| n);
            let link = links.iter().find(|l| l.name == ifname)?;
            let prefix = a.netmask.map_or_else(|| full_len(a.addr), prefix_len);
            Some(local_ip(link, a.addr, Some(prefix)))
        })
        .collect()
}

/// `addr` on `link`. `prefix_len` is `Some` for addresses from a full walk and `None`
/// for those learnt at run time (see [`LocalIp::prefix_len`]).
#[must_use]
pub(crate) fn local_ip(link: &IpoibLink, addr: IpAddr, prefix_len: Option<u8>) -> LocalIp {
    LocalIp {
        addr,
        prefix_len,
        gid: link.gid,
        pkey: link.pkey,
    }
}

/// The prefix length of a netmask: its leading one bits (a non-contiguous mask, which
/// the kernel does not make, counts up to its first zero).
#[must_use]
pub(crate) fn prefix_len(netmask: IpAddr) -> u8 {
    let ones = match netmask {
        IpAddr::V4(m) => u32::from(m).leading_ones(),
        IpAddr::V6(m) => u128::from(m).leading_ones(),
    };
    u8::try_from(ones).unwrap_or(u8::MAX)
}

fn full_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// The whole walk: the IPoIB interfaces under `sysfs_root` (normally
/// `/sys`) and the system's addresses on them.
///
/// # Errors
/// sysfs cannot be listed or `getifaddrs` failed.
pub(crate) fn walk(sysfs_root: &Path) -> io::Result<Vec<LocalIp>> {
    let links = ipoib::links(sysfs_root)?;
    if links.is_empty() {
        return Ok(Vec::new());
    }
    Ok(local_ips(&system_addrs()?, &links))
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Gid;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn link(name: &str, ifindex: u32, pkey: u16, guid: u64) -> IpoibLink {
        IpoibLink {
            name: name.into(),
            ifindex,
            gid: Gid::from_parts(0xfe80_0000_0000_0000, guid),
            pkey,
        }
    }

    fn a(ifname: &str, addr: &str, mask: Option<&str>) -> IfAddr {
        IfAddr {
            ifname: ifname.into(),
            addr: ip(addr),
            netmask: mask.map(ip),
        }
    }

    #[test]
    fn prefix_from_netmask() {
        assert_eq!(prefix_len(ip("255.255.255.0")), 24);
        assert_eq!(prefix_len(ip("255.255.255.255")), 32);
        assert_eq!(prefix_len(ip("0.0.0.0")), 0);
        assert_eq!(prefix_len(ip("255.255.240.0")), 20);
        assert_eq!(prefix_len(ip("ffff:ffff:ffff:ffff::")), 64);
        assert_eq!(
            prefix_len(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")),
            128
        );
        assert_eq!(prefix_len(ip("::")), 0);
        assert_eq!(prefix_len(ip("255.0.255.0")), 8, "non-contiguous");
    }

    #[test]
    fn only_addresses_on_ipoib_links_with_their_gid_and_pkey() {
        let links = [link("ib0", 3, 0xffff, 1), link("ib0.8001", 5, 0x8001, 1)];
        let addrs = [
            a("lo", "127.0.0.1", Some("255.0.0.0")),
            a("ib0", "10.0.0.1", Some("255.255.255.0")),
            a("eth0", "192.168.1.5", Some("255.255.255.0")),
            a("ib0.8001", "10.1.0.1", Some("255.255.0.0")),
            a("ib0:1", "10.0.0.77", Some("255.255.255.0")),
            a("ib0", "fe80::2:c903:a:bcde", Some("ffff:ffff:ffff:ffff::")),
            a("ib0.8001", "2001:db8::1", None),
            a("ib1", "10.2.0.1", Some("255.255.255.0")),
        ];
        let got = local_ips(&addrs, &links);
        let gid = links[0].gid;
        let want = |addr: &str, prefix: u8, pkey: u16| LocalIp {
            addr: ip(addr),
            prefix_len: Some(prefix),
            gid,
            pkey,
        };
        assert_eq!(
            got,
            [
                want("10.0.0.1", 24, 0xffff),
                want("10.1.0.1", 16, 0x8001),
                want("10.0.0.77", 24, 0xffff),
                want("fe80::2:c903:a:bcde", 64, 0xffff),
                want("2001:db8::1", 128, 0x8001),
            ]
        );
    }

    #[test]
    fn no_links_no_addresses() {
        let addrs = [a("ib0", "10.0.0.1", Some("255.255.255.0"))];
        assert!(local_ips(&addrs, &[]).is_empty());
    }

    #[test]
    fn runtime_address_has_no_prefix() {
        let l = link("ib0", 3, 0x8001, 9);
        let got = local_ip(&l, ip("10.0.0.9"), None);
        assert_eq!(got.prefix_len, None);
        assert_eq!(got.gid, l.gid);
        assert_eq!(got.pkey, 0x8001);
    }

    #[test]
    fn system_addrs_includes_loopback() {
        let all = system_addrs().unwrap();
        let lo = all
            .iter()
            .find(|x| x.addr == ip("127.0.0.1"))
            .expect("127.0.0.1 is on some interface");
        assert_eq!(lo.netmask.map(prefix_len), Some(8));
    }

    #[test]
    fn walk_over_the_fixture_keeps_ipoib_addresses_only() {
        // The fixture's interfaces (ib0, ib0.8001) do not exist on the test machine
        // (or, if they do, their addresses carry the fixture's GID): no address of
        // another interface may come through.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-ipoib");
        let got = walk(&root).unwrap();
        let fixture_gid = Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_000a_bcde);
        assert!(got.iter().all(|l| l.gid == fixture_gid), "{got:?}");
        assert!(got.iter().all(|l| !l.addr.is_loopback()), "{got:?}");
        let host_has_them = system_addrs()
            .unwrap()
            .iter()
            .any(|x| x.ifname.starts_with("ib0"));
        if !host_has_them {
            // The host's own addresses (lo, eth0) are on no fixture IPoIB link.
            assert!(got.is_empty(), "{got:?}");
        }
        // A root without class/net is an error, not "no addresses".
        assert!(walk(&root.join("nothing")).is_err());
    }
}
