//! The kernel's IP_RESOLVE request (address resolution of a routed InfiniBand
//! destination) and the daemon's answer, a destination GID. See
//! docs/protocol/netlink-ls.md §7.
//!
//! When the route to an IP destination on an IPoIB device goes through a gateway, the
//! kernel's address resolution cannot ask the neighbour table for the peer's hardware
//! address; with a listener on the LS group it multicasts an IP_RESOLVE instead. An
//! answer sets the GID; the kernel completes the request at its caller's timeout (or
//! sooner, when a neighbour entry becomes valid), so it takes an answer until then.

use super::answer::emit_answer;
use super::attr::{
    NLA_HDRLEN, NlAttrIter, RDMA_NLA_F_MANDATORY, nla_align, put_attr, put_empty_attrs, rebase,
};
use super::codes::{LsAttrType, LsOp};
use super::header::{NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderRepr};
use super::message::{WantedAttr, read_ls_message, read_message};
use crate::error::{Reason, Result};
use crate::{Gid, ParseError};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Length of `struct rdma_ls_ip_resolve_header` (the interface index, a u32 in host
/// order) as the kernel pads it.
pub const IP_RESOLVE_HEADER_LEN: usize = 4;

/// Where the attributes of an IP_RESOLVE request start.
pub const IP_RESOLVE_ATTRS_OFFSET: usize = NLMSG_HDRLEN + IP_RESOLVE_HEADER_LEN;

/// Length of a success reply: nlmsghdr + one 20-byte DGID attribute = 36.
pub const IP_RESOLVE_REPLY_LEN: usize = NLMSG_HDRLEN + NLA_HDRLEN + 16;

const FORMAT: &str = "RDMA_NL_LS IP_RESOLVE";

/// An IP_RESOLVE request as the kernel multicasts it: type 0x1002, flags NLM_F_REQUEST,
/// its request number as seq; the interface index of the device the route leaves by;
/// one address attribute, IPV4 (4 bytes, network order) or IPV6 (16 bytes), with
/// [`RDMA_NLA_F_MANDATORY`].
///
/// `parse` takes the first address attribute and skips unknown attributes without the
/// mandatory bit (counted in `ignored_attrs`); an unknown mandatory attribute, an
/// address of the wrong size or no address at all is an error. `emit` writes the header,
/// the address with the mandatory bit, then `ignored_attrs` empty attributes of type 0,
/// so `parse(emit(x)) == x` whenever the header's client is 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IpResolveRequestRepr {
    /// The nlmsghdr.
    pub header: NlMsgHeaderRepr,
    /// The interface index the kernel's route names (0 when it has none).
    pub ifindex: u32,
    /// The destination to resolve.
    pub addr: IpAddr,
    /// Unknown attributes without the mandatory bit that were skipped (saturating).
    pub ignored_attrs: u16,
}

impl IpResolveRequestRepr {
    /// A request as the kernel sends it (type 0x1002, flags NLM_F_REQUEST, pid 0).
    #[must_use]
    pub const fn new(seq: u32, ifindex: u32, addr: IpAddr) -> Self {
        Self {
            header: NlMsgHeaderRepr::ls_request(LsOp::IP_RESOLVE, seq, 0),
            ifindex,
            addr,
            ignored_attrs: 0,
        }
    }

    /// Parses the message at the start of `buf` (rules in the type's documentation).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (header, msg) = read_ls_message(buf, FORMAT)?;
        let len = msg.len();
        if len < IP_RESOLVE_ATTRS_OFFSET {
            return Err(ParseError::new(
                FORMAT,
                "ifindex",
                NLMSG_HDRLEN,
                Reason::TooShort {
                    declared: len,
                    minimum: IP_RESOLVE_ATTRS_OFFSET,
                },
            ));
        }
        let ifindex = u32::from_ne_bytes([msg[16], msg[17], msg[18], msg[19]]);
        let mut addr = None;
        let mut ignored_attrs: u16 = 0;
        for item in NlAttrIter::new(&msg[IP_RESOLVE_ATTRS_OFFSET..]) {
            let a = item.map_err(|e| rebase(e, IP_RESOLVE_ATTRS_OFFSET))?;
            let at = IP_RESOLVE_ATTRS_OFFSET + a.offset;
            let parsed = match a.ls_type() {
                LsAttrType::IPV4 => <[u8; 4]>::try_from(a.payload)
                    .map(|b| IpAddr::V4(Ipv4Addr::from(b)))
                    .map_err(|_| LsAttrType::IPV4.size_rule()),
                LsAttrType::IPV6 => <[u8; 16]>::try_from(a.payload)
                    .map(|b| IpAddr::V6(Ipv6Addr::from(b)))
                    .map_err(|_| LsAttrType::IPV6.size_rule()),
                _ if a.is_mandatory() => {
                    Err("unknown attribute type with RDMA_NLA_F_MANDATORY set")
                }
                _ => {
                    ignored_attrs = ignored_attrs.saturating_add(1);
                    continue;
                }
            };
            match parsed {
                Ok(ip) => {
                    if addr.is_none() {
                        addr = Some(ip);
                    }
                }
                Err(why) => {
                    return Err(ParseError::new(
                        FORMAT,
                        a.ls_type().name().unwrap_or("nla_type"),
                        at,
                        Reason::BadValue {
                            value: a.nla_type.into(),
                            why,
                        },
                    ));
                }
            }
        }
        let Some(addr) = addr else {
            return Err(ParseError::new(
                FORMAT,
                "IPV4",
                IP_RESOLVE_ATTRS_OFFSET,
                Reason::BadValue {
                    value: 0,
                    why: "no IPV4 or IPV6 attribute",
                },
            ));
        };
        Ok(Self {
            header,
            ifindex,
            addr,
            ignored_attrs,
        })
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        let addr = match self.addr {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 16,
        };
        IP_RESOLVE_ATTRS_OFFSET
            + nla_align(NLA_HDRLEN + addr)
            + self.ignored_attrs as usize * NLA_HDRLEN
    }

    /// Writes the request and returns its length, `buffer_len()`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let total = self.buffer_len();
        let buf = &mut buf[..total];
        self.header.emit(buf, total - NLMSG_HDRLEN);
        buf[NLMSG_HDRLEN..IP_RESOLVE_ATTRS_OFFSET].copy_from_slice(&self.ifindex.to_ne_bytes());
        let mut pos = IP_RESOLVE_ATTRS_OFFSET;
        pos += match self.addr {
            IpAddr::V4(a) => put_attr(
                &mut buf[pos..],
                LsAttrType::IPV4.0 | RDMA_NLA_F_MANDATORY,
                &a.octets(),
            ),
            IpAddr::V6(a) => put_attr(
                &mut buf[pos..],
                LsAttrType::IPV6.0 | RDMA_NLA_F_MANDATORY,
                &a.octets(),
            ),
        };
        pos += put_empty_attrs(&mut buf[pos..], self.ignored_attrs);
        debug_assert_eq!(pos, total);
        total
    }

    emit_to_vec!("request");
}

/// The daemon's answer to an IP_RESOLVE, sent to `{nl_pid 0, nl_groups 0x4}` with the
/// request's type and seq and the daemon's pid.
///
/// * `Success`: flags 0, `nlmsg_len` 36, then one DGID attribute (type 4, **without**
///   the mandatory bit: the kernel compares the type exactly) holding the 16-byte GID.
///   The attribute follows the nlmsghdr directly; there is no interface-index header.
/// * `Error`: flags [`RDMA_NL_LS_F_ERR`](super::RDMA_NL_LS_F_ERR), `nlmsg_len` 16. The
///   kernel ignores it; its request ends at its caller's timeout either way, so ibacm
///   sends none (the reference does).
///
/// `parse` decodes a reply: the ERR flag makes it an `Error`; otherwise the last DGID
/// attribute (flag bits masked) of exactly 16 bytes is the answer. The kernel copies
/// only attributes of type exactly 4 (docs/protocol/netlink-ls.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum IpResolveReplyRepr {
    /// The destination's GID.
    Success {
        /// The nlmsghdr.
        header: NlMsgHeaderRepr,
        /// The GID.
        dgid: Gid,
    },
    /// No answer.
    Error {
        /// The nlmsghdr; its flags include RDMA_NL_LS_F_ERR.
        header: NlMsgHeaderRepr,
    },
}

/// The answer's DGID attribute.
const DGID: WantedAttr = WantedAttr {
    format: FORMAT,
    kind: LsAttrType::DGID,
    missing: "neither RDMA_NL_LS_F_ERR nor a DGID attribute",
};

impl IpResolveReplyRepr {
    /// The answer to `request` with `dgid`, or the error reply when `None`.
    #[must_use]
    pub const fn answer(request: &NlMsgHeaderRepr, pid: u32, dgid: Option<Gid>) -> Self {
        match dgid {
            Some(dgid) => Self::Success {
                header: NlMsgHeaderRepr::answer_to(request, NlMsgFlags::EMPTY, pid),
                dgid,
            },
            None => Self::Error {
                header: NlMsgHeaderRepr::answer_to(request, NlMsgFlags::LS_ERR, pid),
            },
        }
    }

    /// The nlmsghdr of either kind.
    #[must_use]
    pub const fn header(&self) -> &NlMsgHeaderRepr {
        match self {
            Self::Success { header, .. } | Self::Error { header } => header,
        }
    }

    /// Parses the reply at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (header, msg) = read_message(buf)?;
        if header.flags.contains(NlMsgFlags::LS_ERR) {
            return Ok(Self::Error { header });
        }
        // The last DGID is the answer, as for the kernel.
        let (dgid, _) = DGID.last::<16>(msg, header.flags.0.into())?;
        Ok(Self::Success {
            header,
            dgid: Gid(*dgid),
        })
    }

    /// Bytes `emit` writes: 36 for a success, 16 for an error.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Success { .. } => IP_RESOLVE_REPLY_LEN,
            Self::Error { .. } => NLMSG_HDRLEN,
        }
    }

    /// Writes the reply and returns its length, `buffer_len()`; the ERR flag is forced
    /// on for `Error` and off for `Success`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        match self {
            Self::Success { header, dgid } => {
                emit_answer(header, Some((LsAttrType::DGID, &dgid.0)), buf)
            }
            Self::Error { header } => emit_answer(header, None, buf),
        }
    }

    emit_to_vec!("reply");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Garbage, ls_header};
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for IpResolveRequestRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let header = ls_header(g);
            let addr = if bool::arbitrary(g) {
                IpAddr::V4(Ipv4Addr::from(u32::arbitrary(g)))
            } else {
                IpAddr::V6(Ipv6Addr::from(u128::arbitrary(g)))
            };
            Self {
                header,
                ifindex: u32::arbitrary(g),
                addr,
                ignored_attrs: u16::arbitrary(g) % 4,
            }
        }
    }

    impl Arbitrary for IpResolveReplyRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let request = NlMsgHeaderRepr::arbitrary(g);
            let dgid = bool::arbitrary(g).then(|| Gid(u128::arbitrary(g).to_be_bytes()));
            Self::answer(&request, u32::arbitrary(g), dgid)
        }
    }

    quickcheck! {
        fn request_round_trips(r: IpResolveRequestRepr) -> bool {
            IpResolveRequestRepr::parse(&r.to_vec()) == Ok(r)
        }

        fn reply_round_trips(r: IpResolveReplyRepr) -> bool {
            IpResolveReplyRepr::parse(&r.to_vec()) == Ok(r)
        }

        fn garbage_never_panics(g: Garbage<28, 64>) -> bool {
            let _ = IpResolveRequestRepr::parse(&g.0);
            let _ = IpResolveReplyRepr::parse(&g.0);
            true
        }
    }

    /// The kernel's IPv4 request byte by byte (x86-64, so host order is little-endian):
    /// 16-byte nlmsghdr, ifindex 5, IPV4 attribute 0x2009 with 192.168.7.9.
    const KERNEL_V4: [u8; 28] = [
        28, 0, 0, 0, // nlmsg_len
        0x02, 0x10, // type 0x1002
        0x01, 0x00, // NLM_F_REQUEST
        0x2a, 0, 0, 0, // seq 42
        0, 0, 0, 0, // pid 0
        5, 0, 0, 0, // ifindex 5
        8, 0, 0x09, 0x20, // nla_len 8, IPV4 | mandatory
        192, 168, 7, 9,
    ];

    #[test]
    #[cfg(target_endian = "little")]
    fn the_kernels_ipv4_request() {
        let r = IpResolveRequestRepr::parse(&KERNEL_V4).unwrap();
        assert_eq!(
            r,
            IpResolveRequestRepr::new(42, 5, IpAddr::V4(Ipv4Addr::new(192, 168, 7, 9)))
        );
        assert_eq!(r.to_vec(), KERNEL_V4);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn an_ipv6_request_and_the_rules() {
        let v6: Ipv6Addr = "fd00::7:9".parse().unwrap();
        let r = IpResolveRequestRepr::new(7, 0, IpAddr::V6(v6));
        let b = r.to_vec();
        assert_eq!(b.len(), 40);
        assert_eq!(&b[22..24], &[0x0a, 0x20]);
        assert_eq!(IpResolveRequestRepr::parse(&b), Ok(r));

        // No address at all.
        let mut empty = KERNEL_V4[..20].to_vec();
        empty[0] = 20;
        let e = IpResolveRequestRepr::parse(&empty).unwrap_err();
        assert!(
            matches!(e.reason, Reason::BadValue { why, .. } if why.contains("no IPV4 or IPV6")),
            "{e:?}"
        );
        // An address of the wrong size.
        let mut short = KERNEL_V4;
        short[20] = 6;
        assert!(IpResolveRequestRepr::parse(&short).is_err());
        // An unknown mandatory attribute.
        let mut unknown = KERNEL_V4;
        unknown[22] = 0x0f;
        let e = IpResolveRequestRepr::parse(&unknown).unwrap_err();
        assert!(
            matches!(e.reason, Reason::BadValue { why, .. } if why.contains("MANDATORY")),
            "{e:?}"
        );
        // Not LS.
        let mut other = KERNEL_V4;
        other[5] = 0x14;
        assert!(IpResolveRequestRepr::parse(&other).is_err());
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn replies_as_the_kernel_reads_them() {
        let req = IpResolveRequestRepr::parse(&KERNEL_V4).unwrap();
        let gid: Gid = "fe80::2:c903:a0:b002".parse().unwrap();
        let ok = IpResolveReplyRepr::answer(&req.header, 4321, Some(gid)).to_vec();
        assert_eq!(ok.len(), 36);
        assert_eq!(
            &ok[..16],
            &[36, 0, 0, 0, 0x02, 0x10, 0, 0, 42, 0, 0, 0, 0xe1, 0x10, 0, 0]
        );
        // DGID without the mandatory bit, straight after the nlmsghdr.
        assert_eq!(&ok[16..20], &[20, 0, 4, 0]);
        assert_eq!(&ok[20..], &gid.0);
        let err = IpResolveReplyRepr::answer(&req.header, 4321, None).to_vec();
        assert_eq!(
            err,
            [
                16, 0, 0, 0, 0x02, 0x10, 0x00, 0x01, 42, 0, 0, 0, 0xe1, 0x10, 0, 0
            ]
        );
    }
}
