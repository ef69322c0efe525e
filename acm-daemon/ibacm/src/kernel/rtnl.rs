//! Runtime address monitoring over NETLINK_ROUTE (docs/daemon.md §6): the kernel
//! announces every address and link change, and the hardware backend turns the IPoIB ones
//! into [`acm_engine::Input::LocalIpAdded`] / [`acm_engine::Input::LocalIpRemoved`].
//!
//! Difference from the reference, a fix (docs/reference-quirks.md §22): besides
//! `RTMGRP_LINK` and `RTMGRP_IPV4_IFADDR` the socket joins `RTMGRP_IPV6_IFADDR`, so IPv6
//! addresses added or removed at run time are tracked as IPv4 ones are. An IPv6 address
//! comes from IFA_LOCAL when present (point-to-point), else from IFA_ADDRESS, which is
//! the local address for every ordinary IPv6 address; IPv4 uses IFA_LOCAL only, as the
//! reference.
//!
//! The parser, [`parse_messages`], is pure and total: it takes any bytes, never panics,
//! and stops at the first header that does not fit (so a zero `nlmsg_len` cannot make it
//! loop).

use acm_proto::netlink::NLMSG_HDRLEN;
use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recvfrom, socket,
};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// `RTMGRP_LINK`: link (interface) changes.
pub(crate) const RTMGRP_LINK: u32 = 0x001;
/// `RTMGRP_IPV4_IFADDR`: IPv4 address changes.
pub(crate) const RTMGRP_IPV4_IFADDR: u32 = 0x010;
/// `RTMGRP_IPV6_IFADDR`: IPv6 address changes (not joined by the reference).
pub(crate) const RTMGRP_IPV6_IFADDR: u32 = 0x100;

/// `NLMSG_ERROR`: an error (or, with errno 0, an acknowledgement).
pub(crate) const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub(crate) const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
/// `struct ifaddrmsg`: family, prefixlen, flags, scope (u8 each), index (u32).
const IFADDRMSG_LEN: usize = 8;
/// `struct ifinfomsg`: family, pad (u8), type (u16), index (i32), flags, change (u32).
const IFINFOMSG_LEN: usize = 16;
pub(super) const RTA_HDRLEN: usize = 4;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
/// Address families (`AF_INET`, `AF_INET6`), as route and neighbour messages carry them.
pub(super) const AF_INET: u8 = 2;
pub(super) const AF_INET6: u8 = 10;
const IFF_UP: u32 = 0x1;
const IFF_RUNNING: u32 = 0x40;

/// Receive buffer: large enough for the biggest RTM_NEWLINK (statistics, VF lists).
const RECV_BUF: usize = 64 * 1024;

/// One change the kernel announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddrEvent {
    /// RTM_NEWADDR: `addr/prefix_len` is on interface `ifindex` (also sent again when an
    /// existing address changes, e.g. when IPv6 duplicate detection finishes).
    Added {
        /// The interface.
        ifindex: u32,
        /// The local address.
        addr: IpAddr,
        /// Its prefix length.
        prefix_len: u8,
    },
    /// RTM_DELADDR: `addr` left interface `ifindex`.
    Removed {
        /// The interface.
        ifindex: u32,
        /// The address.
        addr: IpAddr,
    },
    /// RTM_NEWLINK or RTM_DELLINK (the reference only logs these).
    Link {
        /// The interface.
        ifindex: u32,
        /// Its ARPHRD type (32 for IPoIB).
        link_type: u16,
        /// What it is now.
        change: LinkChange,
    },
    /// Events were lost (ENOBUFS, or NLMSG_OVERRUN): the caller must resync from a full
    /// walk of the system's addresses.
    Overflow,
}

/// The state a link message reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkChange {
    /// RTM_NEWLINK with IFF_UP and IFF_RUNNING: administratively up and operational.
    Up,
    /// RTM_NEWLINK without both flags.
    Down,
    /// RTM_DELLINK: the interface is gone.
    Deleted,
}

/// A non-blocking NETLINK_ROUTE socket subscribed to link, IPv4 and IPv6 address
/// changes. Register [`AsFd`] with the poller for readability, then call
/// [`RouteMonitor::read_events`] (edge-triggered pollers: on every readiness event).
#[derive(Debug)]
pub(crate) struct RouteMonitor {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl RouteMonitor {
    /// Opens the socket. It binds with `nl_pid` 0 so that the kernel picks a free port
    /// id: the process's pid may already name another netlink socket.
    ///
    /// # Errors
    /// The socket cannot be created or bound.
    pub(crate) fn open() -> io::Result<Self> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )?;
        let groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, groups))?;
        Ok(Self {
            fd,
            buf: vec![0; RECV_BUF],
        })
    }

    /// Reads every waiting datagram and appends its events to `out`, until the socket
    /// is empty. ENOBUFS (the kernel dropped notifications because our queue was full)
    /// becomes [`AddrEvent::Overflow`] and reading goes on. Datagrams that do not come
    /// from the kernel are ignored.
    ///
    /// # Errors
    /// The receive failed otherwise; events read before are in `out`.
    pub(crate) fn read_events(&mut self, out: &mut Vec<AddrEvent>) -> io::Result<()> {
        loop {
            match recvfrom::<NetlinkAddr>(self.fd.as_raw_fd(), &mut self.buf) {
                Ok((_, Some(from))) if from.pid() != 0 => {}
                Ok((n, _)) => parse_messages(&self.buf[..n.min(self.buf.len())], out),
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::ENOBUFS) => out.push(AddrEvent::Overflow),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for RouteMonitor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Decodes the netlink messages of one datagram into `out`. Address and link messages
/// give events; NLMSG_ERROR and unknown types are skipped; NLMSG_DONE ends the walk;
/// NLMSG_OVERRUN gives [`AddrEvent::Overflow`]. The walk stops at the first message
/// whose `nlmsg_len` is shorter than its header or longer than what is left (a
/// truncated datagram), as `NLMSG_OK` does. Address messages whose address attribute
/// is missing or has the wrong length for the family are skipped.
pub(crate) fn parse_messages(bytes: &[u8], out: &mut Vec<AddrEvent>) {
    for (ty, body) in Messages(bytes) {
        match ty {
            NLMSG_DONE => return,
            NLMSG_OVERRUN => out.push(AddrEvent::Overflow),
            NLMSG_ERROR => {}
            RTM_NEWADDR | RTM_DELADDR => {
                if let Some(ev) = addr_event(ty == RTM_NEWADDR, body) {
                    out.push(ev);
                }
            }
            RTM_NEWLINK | RTM_DELLINK => {
                if let Some(ev) = link_event(ty == RTM_NEWLINK, body) {
                    out.push(ev);
                }
            }
            _ => {}
        }
    }
}

/// An RTM_NEWADDR / RTM_DELADDR body: `struct ifaddrmsg` then attributes.
fn addr_event(added: bool, body: &[u8]) -> Option<AddrEvent> {
    let msg = body.get(..IFADDRMSG_LEN)?;
    let (family, prefix_len, ifindex) = (msg[0], msg[1], ne_u32(&msg[4..8]));
    let mut local = None;
    let mut address = None;
    for (ty, payload) in Attrs(&body[IFADDRMSG_LEN..]) {
        match ty {
            IFA_LOCAL => local = Some(payload),
            IFA_ADDRESS => address = Some(payload),
            _ => {}
        }
    }
    let addr = match family {
        AF_INET => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(local?).ok()?)),
        AF_INET6 => IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(local.or(address)?).ok()?,
        )),
        _ => return None,
    };
    Some(if added {
        AddrEvent::Added {
            ifindex,
            addr,
            prefix_len,
        }
    } else {
        AddrEvent::Removed { ifindex, addr }
    })
}

/// An RTM_NEWLINK / RTM_DELLINK body: `struct ifinfomsg` (attributes unused).
fn link_event(new: bool, body: &[u8]) -> Option<AddrEvent> {
    let msg = body.get(..IFINFOMSG_LEN)?;
    let flags = ne_u32(&msg[8..12]);
    let change = if !new {
        LinkChange::Deleted
    } else if flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING {
        LinkChange::Up
    } else {
        LinkChange::Down
    };
    Some(AddrEvent::Link {
        ifindex: ne_u32(&msg[4..8]),
        link_type: ne_u16(&msg[2..4]),
        change,
    })
}

/// The netlink messages of a datagram as (`nlmsg_type`, body); stops at the first
/// whose `nlmsg_len` is shorter than its header or longer than what is left (a
/// truncated datagram), as `NLMSG_OK` does.
pub(super) struct Messages<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for Messages<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let hdr = self.0.get(..NLMSG_HDRLEN)?;
        let len = usize::try_from(ne_u32(&hdr[0..4])).unwrap_or(usize::MAX);
        let ty = ne_u16(&hdr[4..6]);
        Some((ty, take_record(&mut self.0, NLMSG_HDRLEN, len)?))
    }
}

/// The `rtattr`s of an area as (type, payload); stops at the first that does not fit.
pub(super) struct Attrs<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let hdr = self.0.get(..RTA_HDRLEN)?;
        let len = usize::from(ne_u16(&hdr[0..2]));
        let ty = ne_u16(&hdr[2..4]);
        Some((ty, take_record(&mut self.0, RTA_HDRLEN, len)?))
    }
}

/// Takes the record at the start of `rest` whose length field (its header of
/// `hdr_len` bytes included) says `len`: its body, with `rest` moved past its 4-byte
/// alignment. A length shorter than the header or longer than what is left ends the
/// walk (`rest` emptied), as `NLMSG_OK` and `RTA_OK` do.
fn take_record<'a>(rest: &mut &'a [u8], hdr_len: usize, len: usize) -> Option<&'a [u8]> {
    if len < hdr_len || len > rest.len() {
        *rest = &[];
        return None;
    }
    let body = &rest[hdr_len..len];
    *rest = &rest[align4(len).min(rest.len())..];
    Some(body)
}

pub(super) const fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

pub(super) fn ne_u16(b: &[u8]) -> u16 {
    u16::from_ne_bytes([b[0], b[1]])
}

pub(super) fn ne_u32(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use quickcheck::quickcheck;

    /// A netlink message of type `ty` around `body`, padded to 4 bytes.
    pub(in crate::kernel) fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + body.len();
        let mut m = Vec::new();
        m.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes()); // flags
        m.extend_from_slice(&7u32.to_ne_bytes()); // seq
        m.extend_from_slice(&0u32.to_ne_bytes()); // pid
        m.extend_from_slice(body);
        m.resize(align4(m.len()), 0);
        m
    }

    /// A route attribute of type `ty` around `payload`, padded to 4 bytes.
    pub(in crate::kernel) fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(
            &u16::try_from(RTA_HDRLEN + payload.len())
                .unwrap()
                .to_ne_bytes(),
        );
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(payload);
        a.resize(align4(a.len()), 0);
        a
    }

    fn ifaddrmsg(family: u8, prefix: u8, ifindex: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![family, prefix, 0x80, 0];
        b.extend_from_slice(&ifindex.to_ne_bytes());
        for a in attrs {
            b.extend_from_slice(a);
        }
        b
    }

    /// The message the kernel sends for `addr/prefix` on `ifindex`.
    fn addr_msg(new: bool, ifindex: u32, addr: IpAddr, prefix: u8) -> Vec<u8> {
        let ty = if new { RTM_NEWADDR } else { RTM_DELADDR };
        let body = match addr {
            // IPv4: IFA_ADDRESS (the peer, here equal) and IFA_LOCAL, plus a label.
            IpAddr::V4(a) => ifaddrmsg(
                AF_INET,
                prefix,
                ifindex,
                &[
                    attr(IFA_ADDRESS, &a.octets()),
                    attr(IFA_LOCAL, &a.octets()),
                    attr(3, b"ib0\0"),
                ],
            ),
            // IPv6: only IFA_ADDRESS, then IFA_CACHEINFO (16 bytes).
            IpAddr::V6(a) => ifaddrmsg(
                AF_INET6,
                prefix,
                ifindex,
                &[attr(IFA_ADDRESS, &a.octets()), attr(6, &[0; 16])],
            ),
        };
        msg(ty, &body)
    }

    fn link_msg(new: bool, ifindex: u32, link_type: u16, flags: u32) -> Vec<u8> {
        let mut b = vec![0, 0];
        b.extend_from_slice(&link_type.to_ne_bytes());
        b.extend_from_slice(&ifindex.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&0xffff_ffffu32.to_ne_bytes());
        b.extend_from_slice(&attr(3, b"ib0\0"));
        msg(if new { RTM_NEWLINK } else { RTM_DELLINK }, &b)
    }

    fn parse(bytes: &[u8]) -> Vec<AddrEvent> {
        let mut out = Vec::new();
        parse_messages(bytes, &mut out);
        out
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn new_ipv4_address_uses_ifa_local() {
        let m = addr_msg(true, 5, ip("10.0.0.1"), 24);
        assert_eq!(
            parse(&m),
            [AddrEvent::Added {
                ifindex: 5,
                addr: ip("10.0.0.1"),
                prefix_len: 24
            }]
        );
        // A point-to-point IPv4 address: IFA_ADDRESS is the peer, IFA_LOCAL ours.
        let body = ifaddrmsg(
            AF_INET,
            32,
            5,
            &[
                attr(IFA_ADDRESS, &[10, 0, 0, 2]),
                attr(IFA_LOCAL, &[10, 0, 0, 1]),
            ],
        );
        assert_eq!(
            parse(&msg(RTM_NEWADDR, &body)),
            [AddrEvent::Added {
                ifindex: 5,
                addr: ip("10.0.0.1"),
                prefix_len: 32
            }]
        );
        // IPv4 without IFA_LOCAL: nothing (the reference reads IFA_LOCAL only).
        let body = ifaddrmsg(AF_INET, 24, 5, &[attr(IFA_ADDRESS, &[10, 0, 0, 2])]);
        assert!(parse(&msg(RTM_NEWADDR, &body)).is_empty());
    }

    #[test]
    fn new_ipv6_address_uses_ifa_address_without_ifa_local() {
        let m = addr_msg(true, 7, ip("fe80::2:c903:a:bcde"), 64);
        assert_eq!(
            parse(&m),
            [AddrEvent::Added {
                ifindex: 7,
                addr: ip("fe80::2:c903:a:bcde"),
                prefix_len: 64
            }]
        );
        // With both, IFA_LOCAL is ours (IFA_ADDRESS is then the peer).
        let body = ifaddrmsg(
            AF_INET6,
            128,
            7,
            &[
                attr(IFA_ADDRESS, &ip6("2001:db8::2")),
                attr(IFA_LOCAL, &ip6("2001:db8::1")),
            ],
        );
        assert_eq!(
            parse(&msg(RTM_NEWADDR, &body)),
            [AddrEvent::Added {
                ifindex: 7,
                addr: ip("2001:db8::1"),
                prefix_len: 128
            }]
        );
    }

    fn ip6(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn deleted_addresses_of_both_families() {
        let mut d = addr_msg(false, 5, ip("10.0.0.1"), 24);
        d.extend(addr_msg(false, 7, ip("2001:db8::1"), 64));
        assert_eq!(
            parse(&d),
            [
                AddrEvent::Removed {
                    ifindex: 5,
                    addr: ip("10.0.0.1")
                },
                AddrEvent::Removed {
                    ifindex: 7,
                    addr: ip("2001:db8::1")
                },
            ]
        );
    }

    #[test]
    fn link_messages_report_state_and_type() {
        let mut d = link_msg(true, 4, 32, IFF_UP | IFF_RUNNING);
        d.extend(link_msg(true, 4, 32, IFF_UP));
        d.extend(link_msg(false, 4, 32, 0));
        let ev = |change| AddrEvent::Link {
            ifindex: 4,
            link_type: 32,
            change,
        };
        assert_eq!(
            parse(&d),
            [
                ev(LinkChange::Up),
                ev(LinkChange::Down),
                ev(LinkChange::Deleted)
            ]
        );
    }

    #[test]
    fn several_messages_in_one_datagram_in_order() {
        let mut d = addr_msg(true, 5, ip("10.0.0.1"), 24);
        d.extend(msg(1, &[])); // NLMSG_NOOP
        d.extend(link_msg(true, 5, 32, IFF_UP | IFF_RUNNING));
        d.extend(msg(24, &[0; 12])); // RTM_NEWROUTE: not ours
        d.extend(addr_msg(true, 5, ip("fe80::1"), 64));
        let out = parse(&d);
        assert_eq!(out.len(), 3, "{out:?}");
        assert!(matches!(out[0], AddrEvent::Added { addr, .. } if addr == ip("10.0.0.1")));
        assert!(matches!(out[1], AddrEvent::Link { ifindex: 5, .. }));
        assert!(matches!(out[2], AddrEvent::Added { addr, .. } if addr == ip("fe80::1")));
    }

    #[test]
    fn truncated_datagrams_keep_the_whole_messages_before_the_cut() {
        let mut d = addr_msg(true, 5, ip("10.0.0.1"), 24);
        let first = d.len();
        d.extend(addr_msg(true, 5, ip("10.0.0.2"), 24));
        for cut in 0..d.len() {
            let out = parse(&d[..cut]);
            let want = usize::from(cut >= first);
            assert_eq!(out.len(), want, "cut at {cut}");
        }
        assert_eq!(parse(&d).len(), 2);
        // An attribute longer than its message: the address is not found.
        let mut m = addr_msg(true, 5, ip("10.0.0.1"), 24);
        m[NLMSG_HDRLEN + IFADDRMSG_LEN] = 200;
        assert!(parse(&m).is_empty());
        // An address of the wrong length for the family.
        let body = ifaddrmsg(AF_INET, 24, 5, &[attr(IFA_LOCAL, &[10, 0, 0])]);
        assert!(parse(&msg(RTM_NEWADDR, &body)).is_empty());
        // Too short for an ifaddrmsg / ifinfomsg.
        assert!(parse(&msg(RTM_NEWADDR, &[2, 24, 0])).is_empty());
        assert!(parse(&msg(RTM_NEWLINK, &[0; 8])).is_empty());
    }

    #[test]
    fn zero_or_short_nlmsg_len_stops_the_walk() {
        let good = addr_msg(true, 5, ip("10.0.0.1"), 24);
        for bad_len in [0u32, 1, 15] {
            let mut d = good.clone();
            let mut bad = addr_msg(true, 6, ip("10.0.0.9"), 24);
            bad[0..4].copy_from_slice(&bad_len.to_ne_bytes());
            d.extend(&bad);
            d.extend(&good);
            assert_eq!(parse(&d).len(), 1, "nlmsg_len {bad_len}");
        }
        assert!(parse(&[0; 64]).is_empty());
        assert!(parse(&[]).is_empty());
    }

    #[test]
    fn done_ends_the_walk_error_is_skipped_overrun_overflows() {
        let add = addr_msg(true, 5, ip("10.0.0.1"), 24);
        let mut d = msg(NLMSG_ERROR, &[0; 20]);
        d.extend(&add);
        d.extend(msg(NLMSG_DONE, &0u32.to_ne_bytes()));
        d.extend(&add);
        assert_eq!(parse(&d).len(), 1);
        let mut d = msg(NLMSG_OVERRUN, &[]);
        d.extend(&add);
        let out = parse(&d);
        assert_eq!(out[0], AddrEvent::Overflow);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn unknown_family_is_skipped() {
        let body = ifaddrmsg(27, 16, 5, &[attr(IFA_LOCAL, &[1, 2])]);
        assert!(parse(&msg(RTM_NEWADDR, &body)).is_empty());
    }

    #[test]
    fn monitor_opens_and_reads_nothing_when_quiet() {
        let mut m = RouteMonitor::open().unwrap();
        let mut out = Vec::new();
        // Non-blocking: returns at once. On a busy host some events may be real.
        m.read_events(&mut out).unwrap();
        assert!(out.iter().all(|e| !matches!(e, AddrEvent::Overflow)));
        let a = nix::sys::socket::getsockname::<NetlinkAddr>(m.as_fd().as_raw_fd()).unwrap();
        assert_eq!(
            a.groups(),
            RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR
        );
        assert_ne!(a.pid(), 0, "the kernel assigned a port id");
    }

    quickcheck! {
        /// Any bytes: no panic, and every event needs a 16-byte header of its own.
        fn never_panics(bytes: Vec<u8>) -> bool {
            let out = parse(&bytes);
            out.len() <= bytes.len() / NLMSG_HDRLEN
        }

        /// Valid address messages, concatenated, come back as the same events in order.
        fn round_trip(addrs: Vec<(bool, u32, IpAddr, u8)>) -> bool {
            let mut d = Vec::new();
            let mut want = Vec::new();
            for &(new, ifindex, addr, prefix_len) in &addrs {
                d.extend(addr_msg(new, ifindex, addr, prefix_len));
                want.push(if new {
                    AddrEvent::Added { ifindex, addr, prefix_len }
                } else {
                    AddrEvent::Removed { ifindex, addr }
                });
            }
            parse(&d) == want
        }

        /// Flipping any byte of a valid datagram never panics either.
        fn corrupted_never_panics(addrs: Vec<(bool, u32, IpAddr, u8)>, at: usize, val: u8) -> bool {
            let mut d = Vec::new();
            for &(new, ifindex, addr, prefix) in &addrs {
                d.extend(addr_msg(new, ifindex, addr, prefix));
            }
            if !d.is_empty() {
                let i = at % d.len();
                d[i] = val;
            }
            parse(&d).len() <= d.len() / NLMSG_HDRLEN
        }
    }
}
