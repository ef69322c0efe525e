//! The kernel's IPoIB neighbour table over NETLINK_ROUTE, for `addr_prot neigh`
//! (docs/protocol/ipoib-neigh.md §2): one entry is read with RTM_GETNEIGH (the
//! destination and the interface's index), and a missing or failed one is resolved
//! with RTM_NEWNEIGH carrying NTF_USE, which makes the kernel use the entry as an
//! outgoing packet would: it creates it if needed and sends ARP (or an IPv6 neighbour
//! solicitation) on the interface. The engine asks again until the entry is usable
//! or fails, within its own bound; nothing here waits.
//!
//! The kernel answers a request on a NETLINK_ROUTE socket before the send returns,
//! so each question is one send and one receive on a socket of its own, with a short
//! receive timeout as a guard. The message builders and [`parse_reply`] are pure, and
//! tested against the kernel's layouts; the socket part needs a real IPoIB interface
//! and is not tested here.

use super::rtnl::{
    AF_INET, AF_INET6, Attrs, Messages, NLMSG_DONE, NLMSG_ERROR, RTA_HDRLEN, align4, ne_u16, ne_u32,
};
use acm_engine::NeighResult;
use acm_proto::ipoib::IpoibHwAddrRepr;
use acm_proto::netlink::NLMSG_HDRLEN;
use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, send, setsockopt,
    socket, sockopt,
};
use nix::sys::time::TimeVal;
#[cfg(feature = "verbs")]
use std::collections::BTreeSet;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_REQUEST: u16 = 0x001;
const NLM_F_ACK: u16 = 0x004;
const NLM_F_CREATE: u16 = 0x400;
/// `struct ndmsg`: family u8, two pad bytes (u8, u16), ifindex i32, state u16,
/// flags u8, type u8.
const NDMSG_LEN: usize = 12;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NTF_USE`: use the entry as a sent packet would (resolve it if needed).
const NTF_USE: u8 = 0x01;
/// The `NUD_*` state of an entry whose resolution failed.
const NUD_FAILED: u16 = 0x20;
/// States with a usable link-layer address: REACHABLE, STALE, DELAY, PROBE, NOARP,
/// PERMANENT (the kernel's `NUD_VALID`).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;
/// ENOENT: RTM_GETNEIGH found no entry.
const ENOENT: i32 = 2;

/// How long a reply may take (the kernel queues it before the request's send
/// returns; this only guards against a kernel that does not answer at all).
const REPLY_TIMEOUT_US: i64 = 200_000;

/// What the kernel said about one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A usable entry with an IPoIB hardware address.
    Usable(IpoibHwAddrRepr),
    /// The entry is being resolved (INCOMPLETE, or a state without an address yet).
    Resolving,
    /// Resolution failed (FAILED).
    Failed,
    /// There is no entry (ENOENT).
    Missing,
    /// A usable entry whose link-layer address is not an IPoIB one (too short).
    NotIpoib,
    /// The kernel refused the request with this errno (or answered nothing usable:
    /// 0).
    Refused(i32),
}

/// The RTM_GETNEIGH request for `dest` on interface `ifindex`.
#[must_use]
pub(crate) fn get_request(seq: u32, ifindex: u32, dest: IpAddr) -> Vec<u8> {
    request(RTM_GETNEIGH, NLM_F_REQUEST, seq, ifindex, 0, dest)
}

/// The RTM_NEWNEIGH request with NTF_USE that starts resolving `dest` on interface
/// `ifindex` (creating the entry if it is missing), acknowledged by an NLMSG_ERROR
/// with error 0.
#[must_use]
pub(crate) fn resolve_request(seq: u32, ifindex: u32, dest: IpAddr) -> Vec<u8> {
    request(
        RTM_NEWNEIGH,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE,
        seq,
        ifindex,
        NTF_USE,
        dest,
    )
}

fn request(ty: u16, flags: u16, seq: u32, ifindex: u32, ndm_flags: u8, dest: IpAddr) -> Vec<u8> {
    let (family, addr): (u8, Vec<u8>) = match dest {
        IpAddr::V4(a) => (AF_INET, a.octets().to_vec()),
        IpAddr::V6(a) => (AF_INET6, a.octets().to_vec()),
    };
    let attr_len = RTA_HDRLEN + addr.len();
    let len = NLMSG_HDRLEN + NDMSG_LEN + align4(attr_len);
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // the kernel fills in our port id
    // struct ndmsg
    m.extend_from_slice(&[family, 0, 0, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // state: left as the kernel has it
    m.extend_from_slice(&[ndm_flags, 0]);
    // NDA_DST
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&NDA_DST.to_ne_bytes());
    m.extend_from_slice(&addr);
    m.resize(len, 0);
    m
}

/// Reads the kernel's answer to [`get_request`] or [`resolve_request`]: the first
/// RTM_NEWNEIGH or NLMSG_ERROR. An acknowledgement (error 0) is
/// [`Entry::Resolving`]: the resolution it started is under way. Total: any bytes
/// give an answer, [`Entry::Refused`]`(0)` when none is found.
#[must_use]
pub(crate) fn parse_reply(bytes: &[u8]) -> Entry {
    for (ty, body) in Messages(bytes) {
        match ty {
            NLMSG_ERROR => {
                let Some(e) = body.get(..4) else { break };
                return match -(ne_u32(e) as i32) {
                    0 => Entry::Resolving,
                    ENOENT => Entry::Missing,
                    errno => Entry::Refused(errno),
                };
            }
            RTM_NEWNEIGH => return neigh_entry(body),
            NLMSG_DONE => break,
            _ => {}
        }
    }
    Entry::Refused(0)
}

/// An RTM_NEWNEIGH body: `struct ndmsg` then attributes.
fn neigh_entry(body: &[u8]) -> Entry {
    let Some(msg) = body.get(..NDMSG_LEN) else {
        return Entry::Refused(0);
    };
    let state = ne_u16(&msg[8..10]);
    let lladdr = Attrs(&body[NDMSG_LEN..])
        .find(|&(ty, _)| ty == NDA_LLADDR)
        .map(|(_, p)| p);
    if state & NUD_VALID != 0 {
        return match lladdr.map(IpoibHwAddrRepr::parse) {
            Some(Ok(hw)) => Entry::Usable(hw),
            Some(Err(_)) => Entry::NotIpoib,
            // A valid state without an address (NOARP on a device that needs none):
            // nothing to learn a GID from.
            None => Entry::NotIpoib,
        };
    }
    if state & NUD_FAILED != 0 {
        Entry::Failed
    } else {
        // INCOMPLETE, or NONE: resolution is under way or about to start.
        Entry::Resolving
    }
}

/// The hardware backend's view of the neighbour table: asks, starts resolution, and
/// remembers which entries it started so that a failure the kernel reports afterwards
/// is final, while an old failure is retried.
#[cfg(feature = "verbs")]
#[derive(Debug, Default)]
pub(crate) struct NeighTable {
    seq: u32,
    /// Entries whose resolution we started and whose outcome is not known yet.
    started: BTreeSet<(u32, IpAddr)>,
}

#[cfg(feature = "verbs")]
impl NeighTable {
    /// What the engine should hear about `dest` on interface `ifindex` now.
    ///
    /// # Errors
    /// The netlink socket could not be opened or used.
    pub(crate) fn lookup(&mut self, ifindex: u32, dest: IpAddr) -> io::Result<NeighResult> {
        let key = (ifindex, dest);
        let seq = self.next_seq();
        let entry = ask(&get_request(seq, ifindex, dest))?;
        let ours = self.started.contains(&key);
        Ok(match decide(entry, ours) {
            Step::Answer(r) => {
                self.started.remove(&key);
                r
            }
            Step::Resolve => {
                let seq = self.next_seq();
                let ack = ask(&resolve_request(seq, ifindex, dest))?;
                if ack == Entry::Resolving {
                    self.started.insert(key);
                    NeighResult::Incomplete
                } else {
                    self.started.remove(&key);
                    NeighResult::Unreachable
                }
            }
            Step::Wait => NeighResult::Incomplete,
        })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }
}

/// Sends one request on a socket of its own and reads the answer.
fn ask(req: &[u8]) -> io::Result<Entry> {
    let fd: OwnedFd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &TimeVal::new(0, REPLY_TIMEOUT_US as _),
    )?;
    send(fd.as_raw_fd(), req, nix::sys::socket::MsgFlags::empty())?;
    let mut buf = vec![0u8; 4096];
    loop {
        match recv(
            fd.as_raw_fd(),
            &mut buf,
            nix::sys::socket::MsgFlags::empty(),
        ) {
            Ok(n) => return Ok(parse_reply(&buf[..n.min(buf.len())])),
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return Ok(Entry::Refused(0)),
            Err(e) => return Err(e.into()),
        }
    }
}

/// What to do with what RTM_GETNEIGH said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Tell the engine this.
    Answer(NeighResult),
    /// Start resolution (then tell the engine it is incomplete).
    Resolve,
    /// Resolution is under way.
    Wait,
}

/// The decision for an entry, `ours` when we started its resolution: a failure is
/// final only after a resolution of ours (an older one is retried); a missing entry is
/// resolved.
fn decide(entry: Entry, ours: bool) -> Step {
    match entry {
        Entry::Usable(hw) => Step::Answer(NeighResult::Found {
            qpn: hw.qpn,
            gid: hw.gid,
        }),
        Entry::Resolving => Step::Wait,
        Entry::Failed if ours => Step::Answer(NeighResult::Unreachable),
        Entry::Failed | Entry::Missing => Step::Resolve,
        Entry::NotIpoib | Entry::Refused(_) => Step::Answer(NeighResult::Unreachable),
    }
}

#[cfg(test)]
mod tests {
    use super::super::rtnl::tests::{attr, msg};
    use super::*;
    use acm_proto::Gid;
    use quickcheck::quickcheck;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const GID: Gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b001);

    fn hw() -> [u8; 20] {
        IpoibHwAddrRepr {
            flags: 0x80,
            qpn: 0x48,
            gid: GID,
        }
        .to_bytes()
    }

    /// The RTM_NEWNEIGH the kernel sends for an entry in `state` on ifindex 5, with
    /// NDA_DST, NDA_LLADDR when given, and NDA_CACHEINFO (type 3, 16 bytes).
    fn newneigh(state: u16, lladdr: Option<&[u8]>) -> Vec<u8> {
        let mut b = vec![AF_INET, 0, 0, 0];
        b.extend_from_slice(&5u32.to_ne_bytes());
        b.extend_from_slice(&state.to_ne_bytes());
        b.extend_from_slice(&[0, 1]); // flags, type RTN_UNICAST
        b.extend_from_slice(&attr(NDA_DST, &[10, 0, 0, 2]));
        if let Some(l) = lladdr {
            b.extend_from_slice(&attr(NDA_LLADDR, l));
        }
        b.extend_from_slice(&attr(3, &[0; 16]));
        msg(RTM_NEWNEIGH, &b)
    }

    fn error(errno: i32, request: &[u8]) -> Vec<u8> {
        let mut b = (-errno).to_ne_bytes().to_vec();
        b.extend_from_slice(&request[..NLMSG_HDRLEN]);
        msg(NLMSG_ERROR, &b)
    }

    #[test]
    fn get_request_layout() {
        let m = get_request(7, 5, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        let mut want = Vec::new();
        want.extend_from_slice(&36u32.to_ne_bytes()); // 16 + 12 + 8
        want.extend_from_slice(&RTM_GETNEIGH.to_ne_bytes());
        want.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&[AF_INET, 0, 0, 0]);
        want.extend_from_slice(&5u32.to_ne_bytes());
        want.extend_from_slice(&[0, 0, 0, 0]); // state, flags, type
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&NDA_DST.to_ne_bytes());
        want.extend_from_slice(&[10, 0, 0, 2]);
        assert_eq!(m, want);
    }

    #[test]
    fn resolve_request_layout_v6() {
        let dest = IpAddr::V6("fe80::2".parse::<Ipv6Addr>().unwrap());
        let m = resolve_request(8, 6, dest);
        assert_eq!(m.len(), 16 + 12 + 20);
        assert_eq!(ne_u32(&m[0..4]), 48);
        assert_eq!(ne_u16(&m[4..6]), RTM_NEWNEIGH);
        assert_eq!(ne_u16(&m[6..8]), NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE);
        assert_eq!(m[16], AF_INET6);
        assert_eq!(ne_u32(&m[20..24]), 6);
        assert_eq!(m[26], NTF_USE, "ndm_flags");
        assert_eq!(ne_u16(&m[28..30]), 20, "NDA_DST length");
        assert_eq!(&m[32..48], &"fe80::2".parse::<Ipv6Addr>().unwrap().octets());
    }

    #[test]
    fn replies() {
        let get = get_request(1, 5, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        let ok = IpoibHwAddrRepr::parse(&hw()).unwrap();
        assert_eq!(parse_reply(&newneigh(0x02, Some(&hw()))), Entry::Usable(ok));
        assert_eq!(
            parse_reply(&newneigh(0x04, Some(&hw()))),
            Entry::Usable(ok),
            "STALE is usable"
        );
        assert_eq!(parse_reply(&newneigh(0x01, None)), Entry::Resolving);
        assert_eq!(parse_reply(&newneigh(0x20, None)), Entry::Failed);
        assert_eq!(
            parse_reply(&newneigh(0x02, Some(&[0x52, 0x54, 0, 1, 2, 3]))),
            Entry::NotIpoib,
            "an Ethernet address"
        );
        assert_eq!(parse_reply(&error(ENOENT, &get)), Entry::Missing);
        assert_eq!(parse_reply(&error(0, &get)), Entry::Resolving, "an ack");
        assert_eq!(parse_reply(&error(19, &get)), Entry::Refused(19), "ENODEV");
        assert_eq!(parse_reply(&[]), Entry::Refused(0));
    }

    #[test]
    fn decisions() {
        let hw = IpoibHwAddrRepr::parse(&hw()).unwrap();
        assert_eq!(
            decide(Entry::Usable(hw), false),
            Step::Answer(NeighResult::Found {
                qpn: 0x48,
                gid: GID
            })
        );
        assert_eq!(decide(Entry::Missing, false), Step::Resolve);
        assert_eq!(decide(Entry::Missing, true), Step::Resolve);
        assert_eq!(
            decide(Entry::Failed, false),
            Step::Resolve,
            "an old failure"
        );
        assert_eq!(
            decide(Entry::Failed, true),
            Step::Answer(NeighResult::Unreachable)
        );
        assert_eq!(decide(Entry::Resolving, true), Step::Wait);
        assert_eq!(
            decide(Entry::Refused(19), false),
            Step::Answer(NeighResult::Unreachable)
        );
    }

    /// The socket half against this machine's kernel, on the loopback interface
    /// (index 1), which has no IPoIB neighbours: the kernel's answer must decode as a
    /// missing entry (or a refusal, on kernels older than 4.20 that cannot look one
    /// entry up), never as a usable one. Where netlink is not allowed at all (a
    /// sandbox), there is nothing to check.
    #[test]
    fn the_kernel_answers_a_lookup_of_one_entry() {
        match ask(&get_request(1, 1, IpAddr::V4(Ipv4Addr::new(127, 9, 9, 9)))) {
            Ok(e) => assert!(matches!(e, Entry::Missing | Entry::Refused(_)), "{e:?}"),
            Err(e) => eprintln!("no NETLINK_ROUTE here: {e}"),
        }
    }

    quickcheck! {
        fn prop_parse_never_panics(b: Vec<u8>) -> bool {
            let _ = parse_reply(&b);
            true
        }
    }
}
