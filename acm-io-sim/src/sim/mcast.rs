//! Multicast receivers, remembered between sends, and multicast copies delivered from
//! one shared list.
//!
//! [`fabric::ud_delivery`] finds a multicast's receivers by looking up every member's
//! QP and port: in a storm every host multicasts to every other, so those lookups
//! (each in another host's tables, out of the cache) were most of a send's cost. The
//! members that pass for senders of one pkey are the same for every such sender but
//! itself, and change only when a QP, a group attachment, a port or a host does; so
//! they are found once per (group, pkey) and kept until one of those changes
//! ([`McastCache::clear`]). Debug builds check every answer against
//! [`fabric::ud_delivery`].
//!
//! On fault-free links a send's copies then need no list of their own: a [`Fanout`]
//! (one per distinct link latency among the receivers) walks the shared member list,
//! skipping the sender and the members another latency reaches.

use super::fasthash::FastMap;
use super::{Event, Sim, UdPayload};
use crate::fabric::{self, UdTarget};
use crate::spec::{FabricSpec, HostId};
use crate::topology::Topology;
use acm_engine::{AddressVector, EndpointId, RecvInfo};
use acm_proto::{Gid, MULTICAST_LID_BASE};
use std::rc::Rc;
use std::time::Duration;

/// A member that receives multicasts from senders of some pkey.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    host: HostId,
    ep: EndpointId,
    /// Its QP's pkey index (reported in its receive completions).
    pkey_index: u16,
    /// Its host's incarnation (a copy for a host restarted since is dropped).
    inc: u32,
}

/// Receivers by (group, sender's pkey), sender included.
#[derive(Debug, Default)]
pub(crate) struct McastCache {
    lists: FastMap<(Gid, u16), Rc<[Member]>>,
}

impl McastCache {
    /// Forgets every list: a QP, a group attachment, a port or a host changed.
    pub(crate) fn clear(&mut self) {
        self.lists.clear();
    }
}

/// One receiver of a UD send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Receiver {
    pub(crate) target: UdTarget,
    /// Its host's incarnation.
    pub(crate) inc: u32,
}

/// The receivers of one UD send.
#[derive(Debug, Clone)]
pub(crate) enum Receivers {
    /// A multicast: the group's members for the sender's pkey, but the sender itself
    /// (`sender`, `ep`); every copy carries `wc` with the member's pkey index.
    Members {
        sender: HostId,
        ep: EndpointId,
        wc: RecvInfo,
        members: Rc<[Member]>,
    },
    /// Listed one by one (a unicast has at most one).
    Listed(Vec<Receiver>),
}

impl Receivers {
    /// Every receiver, in delivery order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = Receiver> + '_> {
        match self {
            Self::Members {
                sender,
                ep,
                wc,
                members,
            } => Box::new(
                members
                    .iter()
                    .filter(move |m| !(m.host == *sender && m.ep == *ep))
                    .map(move |m| Receiver {
                        target: UdTarget {
                            host: m.host,
                            ep: m.ep,
                            wc: RecvInfo {
                                pkey_index: m.pkey_index,
                                ..*wc
                            },
                        },
                        inc: m.inc,
                    }),
            ),
            Self::Listed(l) => Box::new(l.iter().copied()),
        }
    }
}

/// The copies of one multicast send that arrive after one latency, delivered one by
/// one in member order: the members of `members` but the sender whose link from the
/// sender has that latency.
#[derive(Debug, Clone)]
pub(crate) struct Fanout {
    pub(crate) payload: Rc<UdPayload>,
    wc: RecvInfo,
    members: Rc<[Member]>,
    sender: HostId,
    sender_ep: EndpointId,
    delay: Duration,
    /// The member the next copy goes to.
    next: usize,
    /// Whether no copy has been delivered yet.
    pub(crate) fresh: bool,
}

impl Fanout {
    /// The first member at or after `from` this fan-out delivers to.
    fn receiver_from(&self, spec: &FabricSpec, from: usize) -> Option<usize> {
        (from..self.members.len()).find(|&i| {
            let m = &self.members[i];
            !(m.host == self.sender && m.ep == self.sender_ep)
                && spec.latency(self.sender, m.host) == self.delay
        })
    }

    /// The host the next copy goes to.
    pub(crate) fn next_host(&self) -> HostId {
        self.members[self.next].host
    }

    /// The next copy, as the event that delivers it; whether more follow.
    pub(crate) fn take(&mut self, spec: &FabricSpec) -> (Event, bool) {
        let m = self.members[self.next];
        let ev = Event::Ud {
            host: m.host,
            inc: m.inc,
            ep: m.ep,
            wc: RecvInfo {
                pkey_index: m.pkey_index,
                ..self.wc
            },
            payload: Rc::clone(&self.payload),
        };
        self.fresh = false;
        match self.receiver_from(spec, self.next + 1) {
            Some(i) => {
                self.next = i;
                (ev, true)
            }
            None => (ev, false),
        }
    }
}

impl Sim {
    /// Where a UD send from host `h`'s endpoint `ep` goes: the GRH and the receivers,
    /// as [`fabric::ud_delivery`] finds them.
    pub(crate) fn receivers(
        &mut self,
        h: HostId,
        ep: EndpointId,
        av: &AddressVector,
    ) -> Option<([u8; 40], Receivers)> {
        if av.dlid < MULTICAST_LID_BASE {
            let d = fabric::ud_delivery(&self.topo, &self.hosts[..], &self.mcast, h, ep, av)?;
            let receivers = d
                .targets
                .into_iter()
                .map(|target| Receiver {
                    target,
                    inc: self.hosts[target.host.index()].incarnation,
                })
                .collect();
            return Some((d.grh, Receivers::Listed(receivers)));
        }
        let qp = self.hosts.get(h.index())?.qps.get(&ep)?;
        let sp = self.topo.port(qp.port).filter(|p| p.up)?;
        let grh = fabric::grh_bytes(sp.gid, av);
        let wc = RecvInfo {
            slid: sp.lid | u16::from(av.src_path_bits),
            src_qp: qp.qpn,
            dlid_path_bits: 0,
            pkey_index: 0,
        };
        let key = (av.grh.dgid, qp.pkey);
        let members = match self.mcast_cache.lists.get(&key) {
            Some(m) => Rc::clone(m),
            None => {
                let m = self.members(key.0, key.1);
                self.mcast_cache.lists.insert(key, Rc::clone(&m));
                m
            }
        };
        let receivers = Receivers::Members {
            sender: h,
            ep,
            wc,
            members,
        };
        debug_assert_eq!(
            fabric::ud_delivery(&self.topo, &self.hosts[..], &self.mcast, h, ep, av),
            Some(fabric::UdDelivery {
                grh,
                targets: receivers.iter().map(|r| r.target).collect(),
            }),
            "remembered multicast receivers are stale"
        );
        debug_assert!(
            receivers
                .iter()
                .all(|r| r.inc == self.hosts[r.target.host.index()].incarnation)
        );
        Some((grh, receivers))
    }

    /// The members of `mgid` whose QP shares a partition with `pkey` and whose port is
    /// up, in (host, endpoint) order.
    fn members(&self, mgid: Gid, pkey: u16) -> Rc<[Member]> {
        let Some(set) = self.mcast.get(&mgid) else {
            return Rc::from(Vec::new());
        };
        set.iter()
            .filter_map(|&(th, tep)| {
                let host = self.hosts.get(th.index())?;
                let tq = host.qps.get(&tep)?;
                let up = self.topo.port(tq.port).is_some_and(|p| p.up);
                (Topology::same_partition(tq.pkey, pkey) && up).then_some(Member {
                    host: th,
                    ep: tep,
                    pkey_index: tq.pkey_index,
                    inc: host.incarnation,
                })
            })
            .collect()
    }

    /// Schedules a multicast's copies on fault-free links: one fan-out per distinct
    /// latency among the receivers, in the order the receivers first show it.
    /// `depart`: how long after now the MAD is off the sender's port.
    pub(crate) fn schedule_fanouts(
        &mut self,
        payload: &Rc<UdPayload>,
        receivers: &Receivers,
        depart: Duration,
    ) {
        let Receivers::Members {
            sender,
            ep,
            wc,
            members,
        } = receivers
        else {
            return;
        };
        let mut fans: Vec<Fanout> = Vec::new();
        for (i, m) in members.iter().enumerate() {
            if m.host == *sender && m.ep == *ep {
                continue;
            }
            let delay = self.spec.latency(*sender, m.host);
            if fans.iter().all(|f| f.delay != delay) {
                fans.push(Fanout {
                    payload: Rc::clone(payload),
                    wc: *wc,
                    members: Rc::clone(members),
                    sender: *sender,
                    sender_ep: *ep,
                    delay,
                    next: i,
                    fresh: true,
                });
            }
        }
        for fan in fans {
            let at = self.now + depart + fan.delay;
            self.schedule(at, Event::UdFanout(Box::new(fan)));
        }
    }
}
