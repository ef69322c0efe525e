//! ibacmp's per-endpoint state: multicast groups, the destination cache, the two send
//! queues with their credits, outstanding ACM requests and counters.

use super::dest::DestCache;
use crate::addr::Address;
use crate::counters::Counters;
use crate::device::PortId;
use crate::io::{AddressVector, Mad, SendToken};
use crate::time::Instant;
use acm_proto::{Gid, Mtu, Rate};
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

/// Whether the endpoint can resolve: READY once group 0 is joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpState {
    /// Group 0 not joined (yet, or the join failed).
    Init,
    /// Group 0 joined and attached.
    Ready,
}

/// A multicast group the endpoint joins.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) mgid: Gid,
    pub(crate) rate: Rate,
    pub(crate) mtu: Mtu,
    /// Joined: the SA answered.
    pub(crate) joined: bool,
    /// The join MAD in flight, if any.
    pub(crate) join_tid: Option<u64>,
    pub(crate) mlid: u16,
    /// Where sends to the group go (and the template of unicast responses).
    pub(crate) av: AddressVector,
    /// The group's path (spec 3.5): used by `route_prot acm` and for sgid/tclass/pkey.
    pub(crate) path: [u8; 64],
    pub(crate) attached: bool,
}

impl Group {
    pub(crate) fn new(mgid: Gid, rate: Rate, mtu: Mtu) -> Self {
        Self {
            mgid,
            rate,
            mtu,
            joined: false,
            join_tid: None,
            mlid: 0,
            av: AddressVector::default(),
            path: [0; 64],
            attached: false,
        }
    }
}

/// What a UD send is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendKind {
    /// An ACM request with this TID (retried until answered).
    Request(u64),
    /// An ACM response (sent once).
    Response,
}

/// An ACM resolve request of ours.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The destination it resolves.
    pub(crate) dest: Address,
    pub(crate) mad: Mad,
    /// Transmissions left, counting the one in progress.
    pub(crate) tries: u32,
    /// A send is posted and not yet completed.
    pub(crate) sending: bool,
    /// When the current transmission times out (set at send completion).
    pub(crate) expires: Option<Instant>,
    /// It holds a credit of the resolve queue (it is posted, not pending).
    pub(crate) posted: bool,
}

/// A queue that hands out send credits (the reference's `acmp_send_queue`).
#[derive(Debug, Clone, Default)]
pub(crate) struct SendQueue {
    pub(crate) credits: u32,
    /// Waiting for a credit, FIFO.
    pub(crate) pending: VecDeque<Pending>,
}

/// A send waiting for a credit.
#[derive(Debug, Clone)]
// A waiting response carries its MAD inline, as the reference's queue entries do.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Pending {
    /// A request, by TID.
    Request(u64),
    /// A response to this address vector.
    Response(AddressVector, Mad),
}

/// One endpoint as ibacmp sees it.
#[derive(Debug)]
pub(crate) struct Ep {
    pub(crate) port: PortId,
    pub(crate) pkey: u16,
    pub(crate) state: EpState,
    pub(crate) qpn: Option<u32>,
    /// Lowest priority first: index 0 is the min-rate/min-MTU group.
    pub(crate) groups: Vec<Group>,
    pub(crate) dests: DestCache,
    pub(crate) addrs: Vec<Address>,
    pub(crate) counters: Counters,
    pub(crate) resolve_q: SendQueue,
    pub(crate) resp_q: SendQueue,
    /// Outstanding requests by TID.
    pub(crate) requests: BTreeMap<u64, Request>,
    /// Posted sends by token.
    pub(crate) sends: BTreeMap<SendToken, SendKind>,
    /// When to retry failed joins.
    pub(crate) join_retry: Option<Instant>,
}

impl Ep {
    /// MGIDs of the joined groups, lowest priority first (what a request advertises).
    pub(crate) fn joined_mgids(&self) -> Vec<Gid> {
        self.groups
            .iter()
            .filter(|g| g.joined)
            .map(|g| g.mgid)
            .collect()
    }

    /// Whether `addr` is one of this endpoint's addresses as a peer names it.
    pub(crate) fn owns(&self, addr: &Address) -> bool {
        self.addrs.iter().any(|a| a.matches_peer(addr))
    }

    /// The local group the peer's list shares with highest priority (spec 2.6): walk the
    /// peer's MGIDs from last to first and take the first one we have joined.
    pub(crate) fn best_group(&self, peer: &[Gid]) -> Option<usize> {
        peer.iter()
            .rev()
            .find_map(|m| self.groups.iter().position(|g| g.joined && g.mgid == *m))
    }
}
