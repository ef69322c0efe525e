//! The bound on replies queued for clients (`max_queued_reply_bytes`) with workers.
//!
//! The single-threaded loop sees every connection and closes the ones with the most
//! queued once all together are over the bound. With workers, no thread sees all of
//! them without a lock on every write; so each worker holds its own connections to an
//! equal share of the bound (the bound over the number of workers), with the same rule:
//! past its share, it closes its connections with the most queued until three quarters
//! of the share are left, in one batch and one log line. The workers' shares add up to
//! the bound, so all queued replies together stay within it; clients are handed to the
//! workers in turn, so the ones that do not read are spread over them as well. A reload
//! that changes the bound changes every share at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One worker's queued replies and its share of the bound.
#[derive(Debug)]
pub(crate) struct Share {
    /// The bound, all workers together (a reload may change it).
    bound: Arc<AtomicUsize>,
    workers: usize,
    /// This worker's connections' queued reply memory ([`crate::conn::Conn::held`]).
    queued: usize,
}

impl Share {
    /// A share of `bound` for one of `workers` workers.
    pub(crate) fn new(bound: Arc<AtomicUsize>, workers: usize) -> Self {
        Self {
            bound,
            workers: workers.max(1),
            queued: 0,
        }
    }

    /// A connection's queued memory went from `before` to `after`.
    pub(crate) fn changed(&mut self, before: usize, after: usize) {
        self.queued = self.queued + after - before;
    }

    /// This worker's queued reply memory.
    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    /// When over the share: what is queued, and what to cut down to.
    pub(crate) fn over(&self) -> Option<(usize, usize)> {
        let share = self.bound.load(Ordering::Relaxed) / self.workers;
        (self.queued > share).then_some((self.queued, share / 4 * 3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_keeps_to_its_share_and_a_new_bound_applies_at_once() {
        let bound = Arc::new(AtomicUsize::new(4 << 20));
        let mut s = Share::new(Arc::clone(&bound), 4);
        s.changed(0, 1 << 20);
        assert_eq!(s.over(), None, "exactly the share is not over it");
        s.changed(0, 1);
        assert_eq!(s.over(), Some(((1 << 20) + 1, 3 << 18)));
        s.changed((1 << 20) + 1, 0);
        assert_eq!(s.queued(), 0);
        s.changed(0, 600 << 10);
        assert_eq!(s.over(), None);
        bound.store(2 << 20, Ordering::Relaxed);
        assert_eq!(s.over(), Some((600 << 10, 3 << 17)));
    }
}
