//! A limit on log lines of one kind: at most a few per interval, then one count of the
//! rest when the interval ends.
//!
//! Any local user can open the daemon's socket and send garbage; the engine then closes
//! the connection and logs why, at level 0. Without a limit, a loop of such
//! connections writes as fast as it connects (1,000 connections made 100 KB of log)
//! and can fill the disk the log is on. The first lines of each interval are kept
//! whole, since one malformed client is worth seeing in detail; the rest are counted.
//!
//! The clock is the caller's: every method takes the current instant, so that tests
//! can drive time.

use std::time::{Duration, Instant};

/// The lines of one kind kept per [`DEFAULT_INTERVAL`].
pub(crate) const DEFAULT_BURST: u32 = 5;

/// The interval the burst is counted over, and the most a count waits to be logged.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// What to do with one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Write it.
    Write,
    /// Count it instead.
    Suppress,
}

/// The lines left out over one interval, to report in one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    /// How many.
    pub suppressed: u64,
    /// The interval they were counted over.
    pub interval: Duration,
}

/// The limit on one kind of line.
#[derive(Debug, Clone)]
pub(crate) struct RateLimit {
    burst: u32,
    interval: Duration,
    /// When the current interval started (`None`: no line yet).
    start: Option<Instant>,
    /// Lines written in the current interval.
    written: u32,
    /// Lines counted instead in the current interval.
    suppressed: u64,
}

impl RateLimit {
    /// At most `burst` lines per `interval`.
    #[must_use]
    pub(crate) const fn new(burst: u32, interval: Duration) -> Self {
        Self {
            burst,
            interval,
            start: None,
            written: 0,
            suppressed: 0,
        }
    }

    /// Whether a line at `now` is written. Call [`RateLimit::take_summary`] first, so
    /// that a finished interval's count is logged before the next interval's lines.
    pub(crate) fn admit(&mut self, now: Instant) -> Verdict {
        match self.start {
            Some(s) if now.saturating_duration_since(s) < self.interval => {}
            _ => {
                self.start = Some(now);
                self.written = 0;
            }
        }
        if self.written < self.burst {
            self.written += 1;
            Verdict::Write
        } else {
            self.suppressed += 1;
            Verdict::Suppress
        }
    }

    /// The count of the interval that ended by `now`, if lines were left out in it.
    pub(crate) fn take_summary(&mut self, now: Instant) -> Option<Summary> {
        let start = self.start?;
        if self.suppressed == 0 || now.saturating_duration_since(start) < self.interval {
            return None;
        }
        let s = Summary {
            suppressed: self.suppressed,
            interval: self.interval,
        };
        self.suppressed = 0;
        Some(s)
    }

    /// When a count is due to be logged, if lines were left out.
    #[must_use]
    pub(crate) fn summary_due(&self) -> Option<Instant> {
        match self.start {
            Some(s) if self.suppressed > 0 => Some(s + self.interval),
            _ => None,
        }
    }
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new(DEFAULT_BURST, DEFAULT_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_burst_per_interval_then_one_count() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(3, 10 * SEC);
        assert_eq!(r.summary_due(), None);
        let verdicts: Vec<Verdict> = (0..5).map(|i| r.admit(t0 + i * SEC)).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Write,
                Verdict::Write,
                Verdict::Write,
                Verdict::Suppress,
                Verdict::Suppress
            ]
        );
        // The count waits for the interval's end.
        assert_eq!(r.summary_due(), Some(t0 + 10 * SEC));
        assert_eq!(r.take_summary(t0 + 9 * SEC), None);
        assert_eq!(
            r.take_summary(t0 + 10 * SEC),
            Some(Summary {
                suppressed: 2,
                interval: 10 * SEC
            })
        );
        assert_eq!(r.take_summary(t0 + 11 * SEC), None, "given once");
        assert_eq!(r.summary_due(), None);
        // A new interval starts with the next line, with a fresh burst.
        for i in 0..3 {
            assert_eq!(r.admit(t0 + 12 * SEC + i * SEC), Verdict::Write);
        }
        assert_eq!(r.admit(t0 + 15 * SEC), Verdict::Suppress);
        assert_eq!(r.summary_due(), Some(t0 + 22 * SEC));
    }

    #[test]
    fn lines_under_the_burst_give_no_count() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(2, SEC);
        for i in 0..10 {
            // One line every 2 s: each starts an interval of its own.
            assert_eq!(r.admit(t0 + 2 * i * SEC), Verdict::Write);
            assert_eq!(r.take_summary(t0 + (2 * i + 1) * SEC), None);
        }
        assert_eq!(r.summary_due(), None);
    }

    #[test]
    fn a_count_taken_before_the_next_line_keeps_the_order() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(1, SEC);
        assert_eq!(r.admit(t0), Verdict::Write);
        assert_eq!(r.admit(t0), Verdict::Suppress);
        // A line long after: its caller first takes the count of the old interval.
        let later = t0 + 5 * SEC;
        assert_eq!(r.take_summary(later).map(|s| s.suppressed), Some(1));
        assert_eq!(r.admit(later), Verdict::Write);
    }
}
