//! Where the engine thread publishes the engine's cache view for the workers.
//!
//! A worker holds the view it last picked up (an `Arc`) and, before each read of its
//! clients' requests, compares one number: the generation the engine thread raises
//! after each publication. Only when it moved does the worker take the lock to clone
//! the new `Arc`; a cache hit itself takes no lock and writes nothing shared. The
//! engine thread holds the lock only to swap the pointer.
//!
//! The ordering the daemon promises — an invalidation is in the view before the
//! engine's outputs about it are carried out — comes from the engine thread
//! publishing after every engine input and before it carries out any output (replies,
//! log lines, notes to the workers): a request a worker reads after any such output
//! was visible sees the new generation (Release store, Acquire load) and answers from
//! the new view. A request read before the publication may still be answered from the
//! view before it, as it would have been had it arrived a moment earlier.

use acm_engine::CacheView;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The latest view and its generation.
#[derive(Debug)]
pub(crate) struct ViewCell {
    view: Mutex<Arc<CacheView>>,
    generation: AtomicU64,
}

impl Default for ViewCell {
    fn default() -> Self {
        Self {
            view: Mutex::new(Arc::new(CacheView::empty())),
            generation: AtomicU64::new(0),
        }
    }
}

impl ViewCell {
    /// Makes `view` the one workers answer from (engine thread).
    pub(crate) fn publish(&self, view: Arc<CacheView>) {
        let old = {
            let mut held = self.view.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *held, view)
        };
        self.generation.fetch_add(1, Ordering::Release);
        // The old view is freed outside the lock, if no worker holds it.
        drop(old);
    }
}

/// A worker's copy of the latest view.
#[derive(Debug)]
pub(crate) struct HeldView {
    cell: Arc<ViewCell>,
    view: Arc<CacheView>,
    generation: u64,
}

impl HeldView {
    /// The view `cell` holds now.
    pub(crate) fn new(cell: Arc<ViewCell>) -> Self {
        let mut held = Self {
            view: Arc::new(CacheView::empty()),
            generation: u64::MAX,
            cell,
        };
        held.refresh();
        held
    }

    /// Picks up the latest publication, if there was one since the last call.
    pub(crate) fn refresh(&mut self) {
        let g = self.cell.generation.load(Ordering::Acquire);
        if g != self.generation {
            let latest = self
                .cell
                .view
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.view = Arc::clone(&latest);
            self.generation = g;
        }
    }

    /// The view held.
    pub(crate) fn get(&self) -> &CacheView {
        &self.view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_pick_up_every_publication_and_never_go_back() {
        const VIEWS: usize = 2_000;
        let cell = Arc::new(ViewCell::default());
        let views: Vec<Arc<CacheView>> = (0..VIEWS).map(|_| Arc::new(CacheView::empty())).collect();
        let order: Vec<*const CacheView> = views.iter().map(Arc::as_ptr).collect();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (cell, done) = (Arc::clone(&cell), Arc::clone(&done));
                let order: Vec<usize> = order.iter().map(|p| *p as usize).collect();
                std::thread::spawn(move || {
                    let mut held = HeldView::new(cell);
                    let mut last = None;
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        held.refresh();
                        let at = order
                            .iter()
                            .position(|&p| p == std::ptr::from_ref(held.get()) as usize);
                        assert!(at >= last, "went back from {last:?} to {at:?}");
                        last = at;
                        if finished {
                            return last;
                        }
                    }
                })
            })
            .collect();
        // All kept alive, so that no two views share an address.
        for v in &views {
            cell.publish(Arc::clone(v));
        }
        done.store(true, Ordering::Release);
        for r in readers {
            assert_eq!(r.join().unwrap(), Some(VIEWS - 1), "the last publication");
        }
    }
}
