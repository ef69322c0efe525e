//! The kernel's side of RDMA_NL_LS as a model: it judges every message the engine sends
//! to the kernel (a path reply, an IP_RESOLVE answer, a SET_TIMEOUT) and says what the
//! kernel would do with it — take the path, ask the SA itself, set the address's GID,
//! change its wait — or which of its rules refuses or ignores it.
//!
//! Written rule by rule from the kernel's own functions (Linux
//! `drivers/infiniband/core`): `rdma_nl_rcv_skb` and `rdma_nl_rcv_msg` (netlink.c) and
//! the LS callback table (device.c) for framing, ops and permission;
//! `ib_nl_handle_resolve_resp`, `ib_nl_is_good_resolve_resp`,
//! `ib_nl_process_good_resolve_rsp`, `ib_nl_handle_set_timeout` and their attribute
//! policy (sa_query.c); `ib_nl_handle_ip_res_resp` and its policy (addr.c); what rdma_cm
//! does with several records (cma.c); and the lenient attribute parser those use
//! (lib/nlattr.c). docs/protocol/netlink-ls.md §6 states each rule. Every rule has a test
//! in `tests/kernel_acceptance.rs`.
//!
//! The model also keeps the kernel's side of the conversation: the requests it sent
//! (registered from what the tests feed the engine), when it stops waiting for each, and
//! its current wait.
#![allow(dead_code, unreachable_pub)]

use acm_engine::Instant;
use acm_proto::Gid;
use acm_proto::netlink::{
    KERNEL_LS_TIMEOUT_DEFAULT_MS, LS_ATTRS_OFFSET, LsAttrType, LsOp, NLA_F_NESTED,
    NLA_F_NET_BYTEORDER, NLMSG_HDRLEN, NlAttr, NlAttrIter, NlMsgFlags, NlMsgHeaderPacket, PathUse,
    RDMA_NL_LS, ResolveHeaderPacket, SetTimeoutRepr,
};
use acm_proto::path_record::{PATH_DATA_LEN, PathDataRepr, PathFlags};
use std::fmt;
use std::time::Duration;

/// `EPERM`: what the kernel's netlink acknowledgement carries for a refused sender or flag.
pub const EPERM: i32 = 1;
/// `EIO`: how a path query ends when a good reply holds no path for its use.
pub const EIO: i32 = 5;
/// `EINVAL`: an op the kernel has no handler for; rdma_cm's answer to a record of no kind.
pub const EINVAL: i32 = 22;

/// The largest attribute type the LS parsers know (LS_NLA_TYPE_MAX - 1 = IPV6).
const LS_MAX_TYPE: u16 = 10;
/// Number of LS ops the kernel has handlers for (RESOLVE, SET_TIMEOUT, IP_RESOLVE).
const LS_NUM_OPS: u16 = 3;
/// The most path records the kernel keeps from one reply to a path use of ALL.
pub const MAX_RECORDS: usize = 3;
/// Message types below this are netlink control messages, skipped.
const NLMSG_MIN_TYPE: u16 = 0x10;

/// One rule of the kernel's, by which it refuses, ignores or falls back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `nlmsg_len` below 16 or beyond the datagram: the kernel stops reading it.
    BadLength,
    /// The datagram holds more than one message (the model judges one at a time).
    SeveralMessages,
    /// A type below 0x10 is a netlink control message: skipped.
    ControlMessage,
    /// A client other than LS (4): not an LS message at all.
    NotLs,
    /// An op without a handler (3 and up): EINVAL.
    UnknownOp,
    /// The sender lacks CAP_NET_ADMIN (in the initial user namespace): EPERM.
    NoCapability,
    /// A RESOLVE or IP_RESOLVE answer with NLM_F_REQUEST: EPERM.
    RequestFlagOnAnswer,
    /// A SET_TIMEOUT without NLM_F_REQUEST: EPERM.
    SetTimeoutWithoutRequest,
    /// No request waits with this seq (of this op): ignored.
    UnknownSeq,
    /// A RESOLVE answered after the kernel's wait: it asked the SA already.
    AfterKernelWait,
    /// RDMA_NL_LS_F_ERR on a path answer: the kernel asks the SA now.
    ErrorFlag,
    /// An attribute the policy refuses (a PATH_RECORD over 72 bytes, a GID over 16, an
    /// integer shorter than its type): the reply is not good, the kernel asks the SA.
    PolicyRefused,
    /// A PATH_RECORD typed with flag bits (e.g. 0x2001): the kernel compares the type
    /// exactly and skips it.
    InexactType,
    /// A PATH_RECORD shorter than 72 bytes passes the policy, but the kernel copies 72
    /// bytes from it: it would read past the attribute.
    ShortRecord,
    /// A record whose flags lack what the path use needs: skipped.
    FlagsLackUseMask,
    /// A good reply without a record the kernel can use: the query fails with EIO, and
    /// the kernel does not ask the SA.
    NoUsableRecord,
    /// A path use of ALL: a record that is none of GMP, INBOUND, OUTBOUND makes rdma_cm
    /// fail the route with EINVAL.
    RecordOfNoKind,
    /// A path use of ALL without a GMP record: rdma_cm keeps an empty primary path.
    NoGmpRecord,
    /// An error reply to an IP_RESOLVE: ignored; the kernel waits for its caller's
    /// timeout.
    ErrorToIpResolve,
    /// An IP_RESOLVE answer whose DGID is not exactly 16 bytes: refused by its policy,
    /// ignored.
    IpPolicyRefused,
    /// An IP_RESOLVE answer without a DGID of type exactly 4: the kernel would copy a GID
    /// it never set.
    NoDgid,
    /// An IP_RESOLVE answered after its caller's timeout: the request is gone; the
    /// kernel logs and drops the answer.
    AfterCallerTimeout,
    /// A SET_TIMEOUT whose attributes the policy refuses: ignored, silently.
    TimeoutPolicyRefused,
    /// A SET_TIMEOUT without a TIMEOUT of type 2 (a mandatory bit makes it 0x2002, a
    /// type the parser does not know): ignored, silently.
    NoTimeout,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::BadLength => "nlmsg_len below 16 or beyond the datagram",
            Self::SeveralMessages => "more than one message in the datagram",
            Self::ControlMessage => "a netlink control message type (below 0x10)",
            Self::NotLs => "not the LS client",
            Self::UnknownOp => "an LS op the kernel has no handler for (EINVAL)",
            Self::NoCapability => "the sender lacks CAP_NET_ADMIN (EPERM)",
            Self::RequestFlagOnAnswer => "an answer with NLM_F_REQUEST (EPERM)",
            Self::SetTimeoutWithoutRequest => "a SET_TIMEOUT without NLM_F_REQUEST (EPERM)",
            Self::UnknownSeq => "no request waits with this seq",
            Self::AfterKernelWait => "answered after the kernel's wait: it asked the SA",
            Self::ErrorFlag => "RDMA_NL_LS_F_ERR: the kernel asks the SA",
            Self::PolicyRefused => "an attribute the policy refuses: the kernel asks the SA",
            Self::InexactType => "a PATH_RECORD with flag bits in its type is skipped",
            Self::ShortRecord => "a PATH_RECORD under 72 bytes: the kernel reads past it",
            Self::FlagsLackUseMask => "a record without the path use's flags is skipped",
            Self::NoUsableRecord => "no usable record: the query fails with EIO",
            Self::RecordOfNoKind => "a record of no kind: rdma_cm fails the route (EINVAL)",
            Self::NoGmpRecord => "no GMP record: rdma_cm keeps an empty primary path",
            Self::ErrorToIpResolve => "an error reply to an IP_RESOLVE is ignored",
            Self::IpPolicyRefused => "an IP_RESOLVE DGID that is not 16 bytes is refused",
            Self::NoDgid => "no DGID of type 4: the kernel copies a GID it never set",
            Self::AfterCallerTimeout => "answered after the caller's timeout: dropped",
            Self::TimeoutPolicyRefused => "a SET_TIMEOUT the policy refuses is ignored",
            Self::NoTimeout => "a SET_TIMEOUT without a TIMEOUT of type 2 is ignored",
        };
        f.write_str(s)
    }
}

/// What the kernel does with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The path query gets these records (all for ALL, up to three; the first
    /// otherwise).
    Path(Vec<PathDataRepr>),
    /// The kernel sends its own SA query now.
    SaQuery(Rule),
    /// The IP_RESOLVE's address gets this GID.
    Gid(Gid),
    /// The kernel waits this long (ms) for every path answer from now on.
    WaitSet(u32),
    /// The message is refused; the kernel's acknowledgement carries this errno.
    Refused(i32, Rule),
    /// The kernel takes the message and does nothing with it.
    Ignored(Rule),
    /// The request the message answers fails, with this errno where the kernel gives one.
    Failed(i32, Rule),
    /// The kernel would read memory the message does not hold.
    Undefined(Rule),
}

impl Verdict {
    /// Whether the kernel acts on the message as meant: it takes the answer, falls back
    /// to the SA at once, or takes the wait.
    #[must_use]
    pub fn is_acted_on(&self) -> bool {
        matches!(
            self,
            Self::Path(_) | Self::SaQuery(_) | Self::Gid(_) | Self::WaitSet(_)
        )
    }

    /// What a test harness accepts from the engine: a verdict acted on, or an IP_RESOLVE
    /// answered after its caller's timeout, which the engine cannot know (the request
    /// does not carry it) and the kernel drops harmlessly.
    #[must_use]
    pub fn is_expected_of_the_engine(&self) -> bool {
        self.is_acted_on() || *self == Self::Ignored(Rule::AfterCallerTimeout)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path(r) => write!(f, "path taken ({} record(s))", r.len()),
            Self::SaQuery(r) => write!(f, "SA query now: {r}"),
            Self::Gid(g) => write!(f, "GID {g} taken"),
            Self::WaitSet(ms) => write!(f, "wait set to {ms} ms"),
            Self::Refused(e, r) => write!(f, "refused (errno {e}): {r}"),
            Self::Ignored(r) => write!(f, "ignored: {r}"),
            Self::Failed(0, r) => write!(f, "the request fails: {r}"),
            Self::Failed(e, r) => write!(f, "the request fails (errno {e}): {r}"),
            Self::Undefined(r) => write!(f, "undefined: {r}"),
        }
    }
}

/// A path request the kernel waits on.
#[derive(Debug, Clone, Copy)]
struct PathWait {
    seq: u32,
    path_use: PathUse,
    /// When the kernel stops waiting and asks the SA.
    deadline: Instant,
}

/// An IP_RESOLVE the kernel waits on.
#[derive(Debug, Clone, Copy)]
struct AddrWait {
    seq: u32,
    /// The caller's timeout: the request ends then.
    deadline: Instant,
}

/// The kernel's side: its waiting requests, its wait, and the sender's privilege.
#[derive(Debug, Clone)]
pub struct KernelModel {
    paths: Vec<PathWait>,
    addrs: Vec<AddrWait>,
    /// The kernel's wait for a path answer (its default until a SET_TIMEOUT lands).
    pub wait_ms: u32,
    /// The timeout the caller of an address resolution passed (the request does not
    /// carry it). 2000 ms is a common caller's value.
    pub ip_caller_timeout: Duration,
    /// Whether the sender holds CAP_NET_ADMIN in the initial user namespace.
    pub sender_capable: bool,
}

impl Default for KernelModel {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            addrs: Vec::new(),
            wait_ms: KERNEL_LS_TIMEOUT_DEFAULT_MS,
            ip_caller_timeout: Duration::from_millis(2000),
            sender_capable: true,
        }
    }
}

impl KernelModel {
    /// Notes a message the kernel multicast at `now` (what a test feeds the engine as
    /// `Input::Netlink`): a RESOLVE or IP_RESOLVE with NLM_F_REQUEST starts a wait;
    /// anything else is not the kernel asking and is not noted.
    pub fn request(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(h) = NlMsgHeaderPacket::new_checked(bytes) else {
            return;
        };
        if h.client() != RDMA_NL_LS || !h.flags().contains(NlMsgFlags::REQUEST) {
            return;
        }
        match h.op() {
            LsOp::RESOLVE => {
                // The kernel's path use, where the message holds one; an unknown use
                // takes the kernel's default mask.
                let path_use = bytes
                    .get(NLMSG_HDRLEN..LS_ATTRS_OFFSET)
                    .and_then(|b| ResolveHeaderPacket::new_checked(b).ok())
                    .map_or(PathUse(u8::MAX), |p| p.path_use());
                self.paths.push(PathWait {
                    seq: h.seq(),
                    path_use,
                    deadline: now + Duration::from_millis(u64::from(self.wait_ms)),
                });
            }
            LsOp::IP_RESOLVE => self.addrs.push(AddrWait {
                seq: h.seq(),
                deadline: now + self.ip_caller_timeout,
            }),
            _ => {}
        }
    }

    /// How many path requests the kernel still waits on.
    #[must_use]
    pub fn waiting_paths(&self) -> usize {
        self.paths.len()
    }

    /// Judges `bytes`, sent to the kernel at `now`, and applies what the kernel would do
    /// (a taken answer ends its request; a wait moves every deadline).
    pub fn judge(&mut self, now: Instant, bytes: &[u8]) -> Verdict {
        // rdma_nl_rcv_skb: the header's length must frame the message.
        let Ok(h) = NlMsgHeaderPacket::new_checked(bytes) else {
            return Verdict::Ignored(Rule::BadLength);
        };
        let Ok(len) = h.check_msg_len() else {
            return Verdict::Ignored(Rule::BadLength);
        };
        if bytes.len() - len.next_multiple_of(4).min(bytes.len()) >= NLMSG_HDRLEN {
            return Verdict::Undefined(Rule::SeveralMessages);
        }
        let ty = h.nlmsg_type();
        if ty < NLMSG_MIN_TYPE {
            return Verdict::Ignored(Rule::ControlMessage);
        }
        if h.client() != RDMA_NL_LS {
            return Verdict::Ignored(Rule::NotLs);
        }
        // rdma_nl_rcv_msg: an op with a handler, then the handlers' permission flag.
        let op = h.op();
        if op.0 >= LS_NUM_OPS {
            return Verdict::Refused(EINVAL, Rule::UnknownOp);
        }
        if !self.sender_capable {
            return Verdict::Refused(EPERM, Rule::NoCapability);
        }
        let flags = h.flags();
        let area = &bytes[NLMSG_HDRLEN..len];
        match op {
            LsOp::RESOLVE => self.path_answer(now, h.seq(), flags, area),
            LsOp::IP_RESOLVE => self.ip_answer(now, h.seq(), flags, area),
            _ => self.set_timeout(flags, area),
        }
    }

    /// `ib_nl_handle_resolve_resp` and what follows it.
    fn path_answer(&mut self, now: Instant, seq: u32, flags: NlMsgFlags, area: &[u8]) -> Verdict {
        if flags.contains(NlMsgFlags::REQUEST) {
            return Verdict::Refused(EPERM, Rule::RequestFlagOnAnswer);
        }
        // The first query still waiting with this seq; the kernel's timer took out
        // those whose wait ended (and asked the SA for them).
        let Some(i) = self
            .paths
            .iter()
            .position(|w| w.seq == seq && w.deadline > now)
        else {
            return match self.paths.iter().position(|w| w.seq == seq) {
                Some(i) => {
                    self.paths.remove(i);
                    Verdict::Ignored(Rule::AfterKernelWait)
                }
                None => Verdict::Ignored(Rule::UnknownSeq),
            };
        };
        let wait = self.paths.remove(i);
        if flags.contains(NlMsgFlags::LS_ERR) {
            return Verdict::SaQuery(Rule::ErrorFlag);
        }
        if !path_policy_accepts(area) {
            return Verdict::SaQuery(Rule::PolicyRefused);
        }
        let (mask, keep) = match wait.path_use {
            PathUse::UNIDIRECTIONAL => (PathFlags::PRIMARY.with(PathFlags::OUTBOUND), 1),
            PathUse::ALL => (PathFlags::PRIMARY, MAX_RECORDS),
            _ => (
                PathFlags::PRIMARY
                    .with(PathFlags::GMP)
                    .with(PathFlags::BIDIRECTIONAL),
                1,
            ),
        };
        let mut records = Vec::new();
        // Why the first PATH_RECORD-like attribute was passed over, for the verdict.
        let mut skipped = None;
        for a in attrs(area) {
            if a.nla_type != LsAttrType::PATH_RECORD.0 {
                if a.ls_type() == LsAttrType::PATH_RECORD {
                    skipped.get_or_insert(Rule::InexactType);
                }
                continue;
            }
            if a.payload.len() < PATH_DATA_LEN {
                return Verdict::Undefined(Rule::ShortRecord);
            }
            let Ok(rec) = PathDataRepr::parse(a.payload) else {
                return Verdict::Undefined(Rule::ShortRecord);
            };
            if !rec.flags.contains(mask) {
                skipped.get_or_insert(Rule::FlagsLackUseMask);
                continue;
            }
            records.push(rec);
            if records.len() == keep {
                break;
            }
        }
        if records.is_empty() {
            return Verdict::Failed(EIO, skipped.unwrap_or(Rule::NoUsableRecord));
        }
        if wait.path_use == PathUse::ALL {
            // rdma_cm, the user of ALL: GMP is the primary path, INBOUND and OUTBOUND
            // the one-way ones, anything else an error.
            let kind = PathFlags::GMP
                .with(PathFlags::INBOUND)
                .with(PathFlags::OUTBOUND);
            if records.iter().any(|r| r.flags.0 & kind.0 == 0) {
                return Verdict::Failed(EINVAL, Rule::RecordOfNoKind);
            }
            if !records.iter().any(|r| r.flags.contains(PathFlags::GMP)) {
                return Verdict::Failed(0, Rule::NoGmpRecord);
            }
        }
        Verdict::Path(records)
    }

    /// `ib_nl_handle_ip_res_resp`.
    fn ip_answer(&mut self, now: Instant, seq: u32, flags: NlMsgFlags, area: &[u8]) -> Verdict {
        if flags.contains(NlMsgFlags::REQUEST) {
            return Verdict::Refused(EPERM, Rule::RequestFlagOnAnswer);
        }
        if flags.contains(NlMsgFlags::LS_ERR) {
            return Verdict::Ignored(Rule::ErrorToIpResolve);
        }
        // Its own policy: a DGID (flag bits other than the mandatory one masked) of
        // exactly 16 bytes; no other type is checked.
        let policy_ok =
            attrs(area).all(|a| parser_type(&a) != LsAttrType::DGID.0 || a.payload.len() == 16);
        if !policy_ok {
            return Verdict::Ignored(Rule::IpPolicyRefused);
        }
        // Every DGID of exactly type 4 is copied; the last one stays.
        let Some(gid) = attrs(area)
            .filter(|a| a.nla_type == LsAttrType::DGID.0)
            .filter_map(|a| Gid::read(a.payload))
            .last()
        else {
            return Verdict::Undefined(Rule::NoDgid);
        };
        let mut known = false;
        for w in &self.addrs {
            if w.seq != seq {
                continue;
            }
            known = true;
            if w.deadline > now {
                return Verdict::Gid(gid);
            }
        }
        if known {
            Verdict::Ignored(Rule::AfterCallerTimeout)
        } else {
            Verdict::Ignored(Rule::UnknownSeq)
        }
    }

    /// `ib_nl_handle_set_timeout`.
    fn set_timeout(&mut self, flags: NlMsgFlags, area: &[u8]) -> Verdict {
        if !flags.contains(NlMsgFlags::REQUEST) {
            return Verdict::Refused(EPERM, Rule::SetTimeoutWithoutRequest);
        }
        if !path_policy_accepts(area) {
            return Verdict::Ignored(Rule::TimeoutPolicyRefused);
        }
        // The parser's table keeps the last attribute of each type.
        let Some(t) = attrs(area)
            .filter(|a| parser_type(a) == LsAttrType::TIMEOUT.0)
            .last()
        else {
            return Verdict::Ignored(Rule::NoTimeout);
        };
        let raw = u32::from_ne_bytes(t.payload[..4].try_into().expect("the policy saw 4"));
        let wait = SetTimeoutRepr::kernel_clamp(raw);
        let delta = i64::from(wait) - i64::from(self.wait_ms);
        for w in &mut self.paths {
            let ms = delta.unsigned_abs();
            w.deadline = if delta >= 0 {
                w.deadline + Duration::from_millis(ms)
            } else {
                w.deadline - Duration::from_millis(ms)
            };
        }
        self.wait_ms = wait;
        Verdict::WaitSet(wait)
    }
}

/// The attributes of an area as the kernel walks them: up to the first that is badly
/// framed.
fn attrs(area: &[u8]) -> impl Iterator<Item = NlAttr<'_>> {
    NlAttrIter::new(area).map_while(Result::ok)
}

/// The type the kernel's parser files an attribute under: only the nested and
/// byte-order bits are masked off; the mandatory bit stays, making a type the parser
/// does not know.
fn parser_type(a: &NlAttr<'_>) -> u16 {
    a.nla_type & !(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
}

/// The LS policy of sa_query.c, under the lenient parser: types 1 to 10 are checked
/// (0 and anything above, the mandatory-flagged ones included, are skipped); a binary
/// may be shorter than its bound but not longer, an integer not shorter than its type.
fn path_policy_accepts(area: &[u8]) -> bool {
    attrs(area).all(|a| {
        let len = a.payload.len();
        match LsAttrType(parser_type(&a)) {
            LsAttrType::PATH_RECORD => len <= PATH_DATA_LEN,
            LsAttrType::TIMEOUT => len >= 4,
            LsAttrType::SERVICE_ID => len >= 8,
            LsAttrType::DGID | LsAttrType::SGID => len <= 16,
            LsAttrType::TCLASS => len >= 1,
            LsAttrType::PKEY | LsAttrType::QOS_CLASS => len >= 2,
            t if t.0 == 0 || t.0 > LS_MAX_TYPE => true,
            // IPV4 and IPV6 have no entry in this policy.
            _ => true,
        }
    })
}
