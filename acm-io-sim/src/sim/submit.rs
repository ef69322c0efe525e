//! The test-facing client API: submit a request's bytes on a host as a client would
//! (one connection per request, as `ib_acme` does) and read back exactly the bytes a
//! real client would read; plus builders for the usual requests.

use super::Event;
use super::Sim;
use super::invariants::CheckKey;
use crate::spec::HostId;
use acm_engine::{ConnId, Instant};
use acm_proto::client::{EpAddrPacket, HEADER_LEN, HeaderPacket, Status};
use acm_proto::path_record::PathRecordRepr;
use std::collections::VecDeque;

pub mod requests;

/// A submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub usize);

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No answer yet.
    Pending,
    /// The daemon replied with these bytes.
    Reply {
        /// The reply.
        bytes: Vec<u8>,
        /// When.
        at: Instant,
    },
    /// The daemon closed the connection without replying (a malformed request).
    Closed(String),
    /// The host restarted while the request waited.
    Reset,
}

/// A RESOLVE reply, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveResult {
    /// The status byte (0 on success).
    pub status: u8,
    /// The path, on success.
    pub path: Option<PathRecordRepr>,
}

#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) host: HostId,
    /// What checking its answer needs from it (the bytes go to the engine with its
    /// [`Event::Client`] and are not kept).
    pub(crate) check: CheckKey,
    pub(crate) outcome: Outcome,
}

/// A host's open client connections and the request each carries.
///
/// [`Sim::submit_at`] hands out a host's connection ids in order, so the table is a
/// window of slots from the oldest open connection to the newest, indexed by id: a
/// storm keeps one connection per destination open on every host and answers them
/// roughly in order, and a window touches memory in that order where a hash table
/// would miss the cache on every reply.
#[derive(Debug, Default)]
pub(crate) struct ConnTable {
    /// The id of the connection in `slots[0]`.
    base: u64,
    /// The request of each connection from `base` on; [`ConnTable::CLOSED`] once it
    /// closed (the ends are trimmed, so both hold open connections).
    slots: VecDeque<usize>,
}

impl ConnTable {
    const CLOSED: usize = usize::MAX;

    /// Connection `conn` carries request `idx`.
    pub(crate) fn insert(&mut self, conn: ConnId, idx: usize) {
        if self.slots.is_empty() {
            self.base = conn.0;
        }
        while conn.0 < self.base {
            self.slots.push_front(Self::CLOSED);
            self.base -= 1;
        }
        let i = usize::try_from(conn.0 - self.base).expect("connection ids are dense");
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Self::CLOSED);
        }
        self.slots[i] = idx;
    }

    /// Closes `conn`: the request it carried, if it was open.
    pub(crate) fn remove(&mut self, conn: &ConnId) -> Option<usize> {
        let i = usize::try_from(conn.0.checked_sub(self.base)?).ok()?;
        let slot = self.slots.get_mut(i)?;
        if *slot == Self::CLOSED {
            return None;
        }
        let idx = std::mem::replace(slot, Self::CLOSED);
        while self.slots.front() == Some(&Self::CLOSED) {
            self.slots.pop_front();
            self.base += 1;
        }
        while self.slots.back() == Some(&Self::CLOSED) {
            self.slots.pop_back();
        }
        Some(idx)
    }

    /// The open connections and their requests, in id order.
    pub(crate) fn into_open(self) -> impl Iterator<Item = (ConnId, usize)> {
        let base = self.base;
        self.slots
            .into_iter()
            .zip(base..)
            .filter(|&(idx, _)| idx != Self::CLOSED)
            .map(|(idx, id)| (ConnId(id), idx))
    }
}

impl Sim {
    /// Submits `bytes` on host `host` now, on a new client connection.
    pub fn submit(&mut self, host: HostId, bytes: Vec<u8>) -> RequestId {
        let now = self.now;
        self.submit_at(now, host, bytes)
    }

    /// Submits `bytes` on host `host` at `at`.
    pub fn submit_at(&mut self, at: Instant, host: HostId, bytes: Vec<u8>) -> RequestId {
        let idx = self.requests.len();
        let check = self.inv.check_key(&bytes);
        self.requests.push(Request {
            host,
            check,
            outcome: Outcome::Pending,
        });
        let h = &mut self.hosts[host.index()];
        let conn = ConnId(h.next_conn | super::SUBMIT_CONN_BIT);
        h.next_conn += 1;
        h.conns.insert(conn, idx);
        self.schedule(at.max(self.now), Event::Client { host, conn, bytes });
        RequestId(idx)
    }

    /// How request `id` ended so far.
    #[must_use]
    pub fn outcome(&self, id: RequestId) -> &Outcome {
        &self.requests[id.0].outcome
    }

    /// The reply bytes of request `id`, if it has one.
    #[must_use]
    pub fn reply(&self, id: RequestId) -> Option<&[u8]> {
        match &self.requests[id.0].outcome {
            Outcome::Reply { bytes, .. } => Some(bytes),
            _ => None,
        }
    }

    /// Request `id`'s reply as a RESOLVE result.
    #[must_use]
    pub fn resolve_result(&self, id: RequestId) -> Option<ResolveResult> {
        let b = self.reply(id)?;
        let status = HeaderPacket::new_checked(b).ok()?.status();
        // The path is the first entry's, whatever its type (the daemon answers a
        // successful resolve with one PATH entry).
        let path = (status == Status::SUCCESS)
            .then(|| EpAddrPacket::new_checked(b.get(HEADER_LEN..)?).ok())
            .flatten()
            .and_then(|e| PathRecordRepr::parse(e.info()).ok());
        Some(ResolveResult {
            status: status.0,
            path,
        })
    }

    /// Submits a request on `host` and runs until it is answered (or nothing is left
    /// to run); returns how it ended.
    pub fn request_now(&mut self, host: HostId, bytes: Vec<u8>) -> RequestId {
        let id = self.submit(host, bytes);
        for _ in 0..10_000_000u64 {
            if self.requests[id.0].outcome != Outcome::Pending {
                break;
            }
            if !self.step(Instant::from_nanos(u64::MAX)) {
                break;
            }
        }
        id
    }

    /// Every request submitted so far.
    pub fn request_ids(&self) -> impl Iterator<Item = RequestId> {
        (0..self.requests.len()).map(RequestId)
    }
}

/// Records how request `idx` ended, checking that it ends once, and that a successful
/// resolve's path is the fabric's truth.
pub(crate) fn finish(sim: &mut Sim, idx: usize, outcome: Outcome) {
    let now = sim.now;
    let Some(req) = sim.requests.get_mut(idx) else {
        return;
    };
    if req.outcome != Outcome::Pending {
        let host = req.host;
        sim.inv
            .violate(now, format!("host {host}: request {idx} answered twice"));
        return;
    }
    req.outcome = outcome;
    let (host, check) = (req.host, req.check);
    let violations = match &sim.requests[idx].outcome {
        Outcome::Reply { bytes: reply, .. } => {
            super::invariants::check_resolve(sim, host, check, reply)
        }
        _ => Vec::new(),
    };
    for v in violations {
        sim.inv.violate(now, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_table_is_a_window_of_open_connections() {
        let mut t = ConnTable::default();
        for c in 1..=5 {
            t.insert(ConnId(c), c as usize * 10);
        }
        assert_eq!(t.remove(&ConnId(3)), Some(30));
        assert_eq!(t.remove(&ConnId(3)), None, "closed already");
        assert_eq!(t.remove(&ConnId(1)), Some(10));
        assert_eq!(t.remove(&ConnId(9)), None, "never opened");
        t.insert(ConnId(6), 60);
        let open: Vec<_> = t.into_open().collect();
        assert_eq!(
            open,
            [
                (ConnId(2), 20),
                (ConnId(4), 40),
                (ConnId(5), 50),
                (ConnId(6), 60)
            ]
        );
        // Emptied, it starts again wherever the next id is.
        let mut t = ConnTable::default();
        t.insert(ConnId(7), 1);
        assert_eq!(t.remove(&ConnId(7)), Some(1));
        t.insert(ConnId(100), 2);
        t.insert(ConnId(98), 3);
        assert_eq!(
            t.into_open().collect::<Vec<_>>(),
            [(ConnId(98), 3), (ConnId(100), 2)]
        );
    }
}
