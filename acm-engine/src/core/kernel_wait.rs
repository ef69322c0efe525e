//! The kernel's wait for each of its requests (docs/protocol/netlink-ls.md §8).
//!
//! The kernel waits a bounded time for a local-service answer (2000 ms unless the
//! daemon set it with `kernel_timeout`), then asks the SA itself and forgets the
//! request: an answer after that is thrown away, and the application has waited the
//! whole bound. So each kernel request gets a deadline a little before the bound; a
//! request still unresolved then is answered with an error, which sends the kernel to
//! the SA at once, and the resolution's later answer is dropped here (the cache keeps
//! its result for the next request).

use crate::request::KernelAsk;
use crate::time::Instant;
use acm_proto::netlink::{KERNEL_LS_TIMEOUT_DEFAULT_MS, SetTimeoutRepr};
use alloc::collections::VecDeque;
use core::time::Duration;

/// One kernel request waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelWait {
    /// When it is answered with an error if nothing better came.
    pub(crate) deadline: Instant,
    /// The request's nlmsg type (echoed).
    pub(crate) nl_type: u16,
    /// The request's sequence number (echoed).
    pub(crate) seq: u32,
    /// What it asked for.
    pub(crate) ask: KernelAsk,
}

/// The kernel requests not answered yet, oldest first.
#[derive(Debug)]
pub(crate) struct KernelWaits {
    /// How long after its arrival a request is answered with an error.
    budget: Duration,
    /// In arrival order, which is deadline order (the budget is fixed).
    waits: VecDeque<KernelWait>,
}

impl KernelWaits {
    /// The waits for a kernel that waits `kernel_timeout_ms` (0: its default), after
    /// its own clamping. The budget keeps a tenth of the wait (at least 10 ms, at most
    /// 1 s) for the reply to reach the kernel before it gives up.
    pub(crate) fn new(kernel_timeout_ms: u32) -> Self {
        let wait = if kernel_timeout_ms == 0 {
            KERNEL_LS_TIMEOUT_DEFAULT_MS
        } else {
            SetTimeoutRepr::kernel_clamp(kernel_timeout_ms)
        };
        let margin = (wait / 10).clamp(10, 1000);
        Self {
            budget: Duration::from_millis(u64::from(wait - margin)),
            waits: VecDeque::new(),
        }
    }

    /// How long a request may take before the error reply.
    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }

    /// Notes a request that arrived at `now`.
    pub(crate) fn start(&mut self, now: Instant, nl_type: u16, seq: u32, ask: KernelAsk) {
        self.waits.push_back(KernelWait {
            deadline: now + self.budget,
            nl_type,
            seq,
            ask,
        });
    }

    /// Takes the request `(nl_type, seq)` out: `true` when it was waiting (answer it),
    /// `false` when it was answered already (drop the answer).
    pub(crate) fn finish(&mut self, nl_type: u16, seq: u32) -> bool {
        match self
            .waits
            .iter()
            .position(|w| w.nl_type == nl_type && w.seq == seq)
        {
            Some(i) => {
                self.waits.remove(i);
                true
            }
            None => false,
        }
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.waits.front().map(|w| w.deadline)
    }

    /// Takes out the oldest request if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<KernelWait> {
        if self.waits.front()?.deadline <= now {
            self.waits.pop_front()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::netlink::PathUse;

    #[test]
    fn the_budget_leaves_the_reply_time_to_arrive() {
        assert_eq!(KernelWaits::new(0).budget(), Duration::from_millis(1800));
        assert_eq!(KernelWaits::new(5000).budget(), Duration::from_millis(4500));
        // The kernel raises 50 to 100 ms; 10 ms of it stay for the reply.
        assert_eq!(KernelWaits::new(50).budget(), Duration::from_millis(90));
        assert_eq!(
            KernelWaits::new(u32::MAX).budget(),
            Duration::from_millis(199_000)
        );
    }

    #[test]
    fn a_request_is_answered_once_either_way() {
        let mut w = KernelWaits::new(0);
        let t0 = Instant::from_millis(10);
        w.start(t0, 0x1000, 1, KernelAsk::Path(PathUse::ALL));
        w.start(t0 + Duration::from_millis(5), 0x1002, 2, KernelAsk::Gid);
        assert_eq!(w.next_deadline(), Some(Instant::from_millis(1810)));
        assert_eq!(w.pop_expired(Instant::from_millis(1809)), None);
        // The first is answered in time; the second is not.
        assert!(w.finish(0x1000, 1));
        assert!(!w.finish(0x1000, 1), "answered twice");
        let late = w.pop_expired(Instant::from_millis(1815)).unwrap();
        assert_eq!((late.nl_type, late.seq), (0x1002, 2));
        assert!(!w.finish(0x1002, 2), "its resolution's answer is dropped");
        assert_eq!(w.next_deadline(), None);
    }
}
