//! The kernel's wait for each of its path requests (docs/protocol/netlink-ls.md §8).
//!
//! The kernel waits a bounded time for a local-service answer to a RESOLVE (2000 ms
//! unless a SET_TIMEOUT changed it), then asks the SA itself and forgets the request: an
//! answer after that is thrown away, and the application has waited the whole bound.
//! So each RESOLVE gets a deadline a little before the bound; one still unresolved then
//! is answered with an error, which sends the kernel to the SA at once, and the
//! resolution's later answer is dropped here (the cache keeps its result for the next
//! request).
//!
//! The bound is the kernel's default until the driver reports that our SET_TIMEOUT
//! reached the kernel ([`KernelWaits::set_wait`]): a timeout the kernel never received
//! does not bound its wait.
//!
//! IP_RESOLVE has no entry here: the kernel takes its answer until its caller's own
//! timeout, which the request does not carry, and ignores an error reply; so it is
//! answered whenever its resolution succeeds (docs/protocol/netlink-ls.md §7).

use crate::time::Instant;
use acm_proto::netlink::{KERNEL_LS_TIMEOUT_DEFAULT_MS, PathUse, SetTimeoutRepr};
use alloc::collections::VecDeque;
use core::time::Duration;

/// One kernel RESOLVE waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelWait {
    /// When it arrived.
    pub(crate) arrived: Instant,
    /// The request's nlmsg type (echoed).
    pub(crate) nl_type: u16,
    /// The request's sequence number (echoed).
    pub(crate) seq: u32,
    /// What the kernel wants the path for (it decides the error reply's shape).
    pub(crate) path_use: PathUse,
}

/// The kernel RESOLVEs not answered yet, oldest first.
#[derive(Debug)]
pub(crate) struct KernelWaits {
    /// How long the kernel waits for each answer, in ms.
    wait_ms: u32,
    /// In arrival order, which is deadline order (every request has the same budget).
    waits: VecDeque<KernelWait>,
}

impl KernelWaits {
    /// The waits for a kernel that waits its default, 2000 ms.
    pub(crate) fn new() -> Self {
        Self {
            wait_ms: KERNEL_LS_TIMEOUT_DEFAULT_MS,
            waits: VecDeque::new(),
        }
    }

    /// The kernel now waits `wait_ms` (after its own clamping) for every answer, the
    /// ones it waits for already included (it moves their deadlines too).
    pub(crate) fn set_wait(&mut self, wait_ms: u32) {
        self.wait_ms = SetTimeoutRepr::kernel_clamp(wait_ms);
    }

    /// How long the kernel waits, in ms.
    pub(crate) fn wait_ms(&self) -> u32 {
        self.wait_ms
    }

    /// How long a request may take before the error reply: the kernel's wait less a
    /// tenth of it (at least 10 ms, at most 1 s), kept for the reply to reach the
    /// kernel before it gives up.
    pub(crate) fn budget(&self) -> Duration {
        let margin = (self.wait_ms / 10).clamp(10, 1000);
        Duration::from_millis(u64::from(self.wait_ms - margin))
    }

    /// Notes a RESOLVE that arrived at `now`.
    pub(crate) fn start(&mut self, now: Instant, nl_type: u16, seq: u32, path_use: PathUse) {
        self.waits.push_back(KernelWait {
            arrived: now,
            nl_type,
            seq,
            path_use,
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
        self.waits.front().map(|w| w.arrived + self.budget())
    }

    /// Takes out the oldest request if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<KernelWait> {
        if self.next_deadline()? <= now {
            self.waits.pop_front()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget_for(wait_ms: u32) -> Duration {
        let mut w = KernelWaits::new();
        w.set_wait(wait_ms);
        w.budget()
    }

    #[test]
    fn the_budget_leaves_the_reply_time_to_arrive() {
        assert_eq!(KernelWaits::new().budget(), Duration::from_millis(1800));
        assert_eq!(budget_for(5000), Duration::from_millis(4500));
        // The kernel raises 50 to 100 ms; 10 ms of it stay for the reply.
        assert_eq!(budget_for(50), Duration::from_millis(90));
        assert_eq!(budget_for(200_000), Duration::from_millis(199_000));
        // The kernel reads the value as a signed int: past i32::MAX it is negative,
        // and raised to the minimum.
        assert_eq!(budget_for(u32::MAX), Duration::from_millis(90));
    }

    #[test]
    fn a_request_is_answered_once_either_way() {
        let mut w = KernelWaits::new();
        let t0 = Instant::from_millis(10);
        w.start(t0, 0x1000, 1, PathUse::ALL);
        w.start(t0 + Duration::from_millis(5), 0x1000, 2, PathUse::GMP);
        assert_eq!(w.next_deadline(), Some(Instant::from_millis(1810)));
        assert_eq!(w.pop_expired(Instant::from_millis(1809)), None);
        // The first is answered in time; the second is not.
        assert!(w.finish(0x1000, 1));
        assert!(!w.finish(0x1000, 1), "answered twice");
        let late = w.pop_expired(Instant::from_millis(1815)).unwrap();
        assert_eq!((late.nl_type, late.seq), (0x1000, 2));
        assert!(!w.finish(0x1000, 2), "its resolution's answer is dropped");
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn a_wait_the_kernel_received_moves_the_deadlines_of_waiting_requests() {
        let mut w = KernelWaits::new();
        let t0 = Instant::from_millis(0);
        w.start(t0, 0x1000, 7, PathUse::ALL);
        assert_eq!(w.next_deadline(), Some(Instant::from_millis(1800)));
        // The kernel moves its own deadline when the wait changes; so does ours.
        w.set_wait(500);
        assert_eq!(w.wait_ms(), 500);
        assert_eq!(w.next_deadline(), Some(Instant::from_millis(450)));
        w.set_wait(10_000);
        assert_eq!(w.next_deadline(), Some(Instant::from_millis(9000)));
    }
}
