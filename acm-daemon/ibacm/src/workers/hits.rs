//! Cache hits the workers answered, counted per endpoint, for the engine's counters.
//!
//! `ib_acme -P` and the metrics read the engine's counters, so every hit a worker
//! answers must reach them, and before any request that could read them: the engine
//! thread hands the engine what the workers counted since the last time
//! ([`HitMerger::merge`], as `Input::CacheHits`) before each batch of forwarded
//! requests and before each metrics write. A worker counts a hit before it writes the
//! reply, so a PERF_QUERY sent after that reply was read is counted after the hit.
//!
//! Each worker writes only its own table ([`HitTable`]), one plain store per hit (no
//! read-modify-write instruction, no cache line shared with another worker); the
//! engine thread only reads. A table has room for [`SLOTS`] endpoints; a hit on an
//! endpoint beyond them is not answered by the worker but forwarded, and the engine
//! counts it itself.

use acm_engine::EndpointId;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Endpoints one worker can count hits for: a host has a handful (one per port and
/// partition).
pub(crate) const SLOTS: usize = 64;

/// No endpoint in this slot yet.
const EMPTY: u32 = u32::MAX;

/// One worker's hit counts, by endpoint.
#[derive(Debug)]
pub(crate) struct HitTable {
    eps: [AtomicU32; SLOTS],
    counts: [AtomicU64; SLOTS],
}

impl Default for HitTable {
    fn default() -> Self {
        Self {
            eps: std::array::from_fn(|_| AtomicU32::new(EMPTY)),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl HitTable {
    /// Counts one hit on `ep`; `false` when the table has no room for another endpoint
    /// (the caller then forwards the request instead). Only the owning worker calls it.
    pub(crate) fn count(&self, ep: EndpointId) -> bool {
        for (slot, count) in self.eps.iter().zip(&self.counts) {
            let held = slot.load(Ordering::Relaxed);
            if held == ep.0 {
                // The only writer: a load and a store, no locked instruction. Release
                // orders the hit before whatever the worker does next (the reply).
                count.store(count.load(Ordering::Relaxed) + 1, Ordering::Release);
                return true;
            }
            if held == EMPTY {
                // The count first, then the endpoint that makes the slot visible.
                count.store(1, Ordering::Release);
                slot.store(ep.0, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Every endpoint with its count so far.
    fn read(&self, mut f: impl FnMut(EndpointId, u64)) {
        for (slot, count) in self.eps.iter().zip(&self.counts) {
            let ep = slot.load(Ordering::Acquire);
            if ep == EMPTY {
                return;
            }
            f(EndpointId(ep), count.load(Ordering::Acquire));
        }
    }
}

/// What of the workers' counts the engine has been given.
#[derive(Debug, Default)]
pub(crate) struct HitMerger {
    tables: Vec<Arc<HitTable>>,
    /// Per endpoint, the sum over the tables handed to the engine so far.
    given: HashMap<u32, u64>,
    /// Per endpoint, the sum over the tables now (kept between merges: a merge runs
    /// before every batch of forwarded requests, and allocates nothing).
    now: HashMap<u32, u64>,
}

impl HitMerger {
    /// Merges the counts of `tables` (one per worker).
    pub(crate) fn new(tables: Vec<Arc<HitTable>>) -> Self {
        Self {
            tables,
            given: HashMap::new(),
            now: HashMap::new(),
        }
    }

    /// Calls `give` with each endpoint's hits since the last call.
    pub(crate) fn merge(&mut self, mut give: impl FnMut(EndpointId, u64)) {
        let now = &mut self.now;
        now.clear();
        for t in &self.tables {
            t.read(|ep, n| *now.entry(ep.0).or_default() += n);
        }
        for (&ep, &total) in now.iter() {
            let given = self.given.entry(ep).or_default();
            if total > *given {
                give(EndpointId(ep), total - *given);
                *given = total;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_of_several_workers_reach_the_engine_once() {
        let (a, b) = (Arc::new(HitTable::default()), Arc::new(HitTable::default()));
        let mut merger = HitMerger::new(vec![Arc::clone(&a), Arc::clone(&b)]);
        for _ in 0..3 {
            assert!(a.count(EndpointId(2)));
        }
        assert!(b.count(EndpointId(2)));
        assert!(b.count(EndpointId(5)));
        let mut given = Vec::new();
        merger.merge(|ep, n| given.push((ep.0, n)));
        given.sort_unstable();
        assert_eq!(given, [(2, 4), (5, 1)]);
        given.clear();
        merger.merge(|ep, n| given.push((ep.0, n)));
        assert!(given.is_empty(), "nothing new: {given:?}");
        assert!(a.count(EndpointId(5)));
        merger.merge(|ep, n| given.push((ep.0, n)));
        assert_eq!(given, [(5, 1)]);
    }

    #[test]
    fn a_full_table_refuses_the_next_endpoint() {
        let t = HitTable::default();
        for ep in 0..SLOTS as u32 {
            assert!(t.count(EndpointId(ep)));
        }
        assert!(!t.count(EndpointId(1000)));
        assert!(t.count(EndpointId(7)), "a known endpoint still counts");
    }

    #[test]
    fn counts_written_on_other_threads_are_all_read() {
        let tables: Vec<Arc<HitTable>> = (0..4).map(|_| Arc::new(HitTable::default())).collect();
        let mut merger = HitMerger::new(tables.clone());
        let threads: Vec<_> = tables
            .into_iter()
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..10_000u32 {
                        assert!(t.count(EndpointId(i % 3)));
                    }
                })
            })
            .collect();
        let mut total = 0;
        for th in threads {
            merger.merge(|_, n| total += n);
            th.join().unwrap();
        }
        merger.merge(|_, n| total += n);
        assert_eq!(total, 40_000);
    }
}
