//! The SA as a single server with a bounded queue (`[sa]` of the fabric file): when
//! each request it accepts is done, and which it refuses.
//!
//! One server, first come first served: a request that arrives at `t` starts when the
//! one before it is done (or at `t` if the SA is idle) and takes its kind's service
//! time. The queue holds the requests accepted and not yet done; one arriving with
//! `queue` of them held overflows. Nothing here is random, so the schedule depends only
//! on the arrivals, which the seed already fixes.

use crate::spec::{SaQueryKind, SaSpec};
use acm_engine::Instant;
use acm_proto::mad::{AttrId, MadHeaderPacket};
use std::collections::VecDeque;

/// What the server does with one arriving request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Accepted: the SA is done with it at this instant.
    DoneAt(Instant),
    /// The queue is full.
    Overflow,
}

/// The SA's queue.
#[derive(Debug, Default)]
pub(crate) struct SaServer {
    /// When the last accepted request is done (the server is idle after).
    free_at: Instant,
    /// When each accepted request not yet done will be, in order.
    done: VecDeque<Instant>,
    /// The most requests held at once.
    pub(crate) peak: usize,
}

/// The rate class of an SA MAD.
pub(crate) fn kind(mad: &[u8]) -> SaQueryKind {
    if mad.len() < 24 {
        return SaQueryKind::Other;
    }
    match MadHeaderPacket::new_unchecked(mad).attr_id() {
        AttrId::PATH_RECORD => SaQueryKind::PathRecord,
        AttrId::MC_MEMBER_RECORD => SaQueryKind::McMember,
        _ => SaQueryKind::Other,
    }
}

impl SaServer {
    /// A request of `kind` arrives at `now`.
    pub(crate) fn admit(&mut self, spec: &SaSpec, now: Instant, kind: SaQueryKind) -> Admission {
        while self.done.front().is_some_and(|&t| t <= now) {
            self.done.pop_front();
        }
        if spec.queue != 0 && self.done.len() >= spec.queue as usize {
            return Admission::Overflow;
        }
        let start = self.free_at.max(now);
        let end = start + spec.service_time(kind);
        self.free_at = end;
        self.done.push_back(end);
        self.peak = self.peak.max(self.done.len());
        Admission::DoneAt(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SaOverflow;
    use acm_proto::mad::MAD_LEN;

    #[test]
    fn serves_in_order_at_its_rate_and_refuses_past_the_queue() {
        let spec = SaSpec {
            path_rate: 1000,
            mcmember_rate: 500,
            other_rate: 0,
            queue: 3,
            overflow: SaOverflow::Busy,
        };
        let mut s = SaServer::default();
        let t0 = Instant::from_millis(10);
        let path = SaQueryKind::PathRecord;
        assert_eq!(
            s.admit(&spec, t0, path),
            Admission::DoneAt(Instant::from_millis(11))
        );
        assert_eq!(
            s.admit(&spec, t0, SaQueryKind::McMember),
            Admission::DoneAt(Instant::from_millis(13))
        );
        assert_eq!(
            s.admit(&spec, t0, SaQueryKind::Other),
            Admission::DoneAt(Instant::from_millis(13)),
            "an unlimited kind takes no time, but waits its turn"
        );
        assert_eq!(s.admit(&spec, t0, path), Admission::Overflow);
        // At 11 ms the first is done: room for one more, served after the others.
        assert_eq!(
            s.admit(&spec, Instant::from_millis(11), path),
            Admission::DoneAt(Instant::from_millis(14))
        );
        assert_eq!(s.peak, 3);
        // Idle again later: served at once.
        assert_eq!(
            s.admit(&spec, Instant::from_millis(100), path),
            Admission::DoneAt(Instant::from_millis(101))
        );
    }

    #[test]
    fn kinds_by_attribute() {
        let mut m = [0u8; MAD_LEN];
        for (attr, want) in [
            (AttrId::PATH_RECORD, SaQueryKind::PathRecord),
            (AttrId::MC_MEMBER_RECORD, SaQueryKind::McMember),
            (AttrId::NODE_RECORD, SaQueryKind::Other),
        ] {
            MadHeaderPacket::new_unchecked(&mut m[..]).set_attr_id(attr);
            assert_eq!(kind(&m), want, "{attr:?}");
        }
        assert_eq!(kind(&m[..10]), SaQueryKind::Other);
    }
}
