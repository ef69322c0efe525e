//! What a batch's copies do beyond their hosts, kept by fan-out while the batch runs
//! and given back fan-out after fan-out ([`super::batch`]): the trace's records, the
//! events scheduled and the invariant violations found each keep theirs in one of
//! these.

/// Items kept by run (a batch's fan-out) while a batch runs; with no batch running,
/// nothing is kept.
#[derive(Debug, Clone)]
pub(crate) struct KeptByRun<T> {
    /// While a batch runs, the run the items that come go to.
    run: Option<usize>,
    /// The items kept, by run (kept allocated from batch to batch).
    kept: Vec<Vec<T>>,
}

impl<T> Default for KeptByRun<T> {
    fn default() -> Self {
        Self {
            run: None,
            kept: Vec::new(),
        }
    }
}

impl<T> KeptByRun<T> {
    /// Keeps the items that come from now on in run `run`.
    pub(crate) fn capture(&mut self, run: usize) {
        if self.kept.len() <= run {
            self.kept.resize_with(run + 1, Vec::new);
        }
        self.run = Some(run);
    }

    /// Keeps `item` in the current run; with no batch running, hands it back for the
    /// caller to act on at once.
    #[must_use]
    pub(crate) fn keep(&mut self, item: T) -> Option<T> {
        match self.run {
            Some(run) => {
                self.kept[run].push(item);
                None
            }
            None => Some(item),
        }
    }

    /// Stops keeping, and gives `f` the items kept, run after run, each run's in the
    /// order they came.
    pub(crate) fn release(&mut self, mut f: impl FnMut(T)) {
        self.run = None;
        for run in &mut self.kept {
            run.drain(..).for_each(&mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_back_run_after_run_and_nothing_is_kept_outside_a_batch() {
        let mut k = KeptByRun::default();
        assert_eq!(k.keep("before"), Some("before"));
        k.capture(2);
        assert_eq!(k.keep("c1"), None);
        k.capture(0);
        assert_eq!(k.keep("a"), None);
        k.capture(2);
        assert_eq!(k.keep("c2"), None);
        let mut out = Vec::new();
        k.release(|i| out.push(i));
        assert_eq!(out, ["a", "c1", "c2"]);
        assert_eq!(k.keep("after"), Some("after"));
        k.release(|i| out.push(i));
        assert_eq!(out.len(), 3, "released items are not given twice");
    }
}
