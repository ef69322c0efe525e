//! How long the event loop keeps looking for the next request before it goes to sleep.
//!
//! A client with one request in flight sends its next request a few microseconds
//! after it reads a reply. A daemon that has answered and goes straight to sleep in
//! `ppoll` is woken for that next request: one context switch per request, and the
//! wake-up's latency added to every answer. A daemon that looks again without
//! sleeping for a little longer than that turnaround finds the request already there.
//! But looking costs a CPU while it lasts, so the window is learnt from what the
//! clients do, the way an adaptive halt-poll is (a guest kernel's idle loop, KVM's
//! `halt_poll_ns`):
//!
//! - after a turn that served requests, the loop polls without sleeping for up to
//!   [`BusyPoll::window`], and stops as soon as something is ready;
//! - a poll that finds the next request keeps the window at twice the time it took,
//!   so a steady client keeps being found with room to spare;
//! - a sleep that ended within [`MAX_WINDOW`] because something became ready (a
//!   client's next request, most often) widens the window to twice that gap:
//!   polling that long would have found it, without the sleep;
//! - a gap longer than [`MAX_WINDOW`] (a client that asks once a millisecond, or
//!   one that has stopped) halves the window, down to none below [`MIN_WINDOW`]: a
//!   daemon whose clients pause between requests goes back to sleeping at once after
//!   each answer, and spends nothing polling.
//!
//! A turn that served no request (a timer, a quiet client's first bytes, a reply
//! that could be written at last) is followed by no poll at all, so a daemon with no
//! clients, or only idle ones, never polls.
//!
//! The policy only sees durations that its caller measured, so its decisions are
//! plain arithmetic that tests drive without a clock.

use std::time::Duration;

/// The longest the loop polls after a turn: a few times a local client's turnaround
/// from reading a reply to sending its next request (5–10 µs), and short enough that
/// polling in vain after each of a slower client's requests costs little before the
/// window closes.
pub(crate) const MAX_WINDOW: Duration = Duration::from_micros(40);

/// The narrowest window worth a poll: a zero-timeout `ppoll` and a clock reading cost
/// about a microsecond, so a shorter window would seldom see a second look.
pub(crate) const MIN_WINDOW: Duration = Duration::from_micros(4);

/// The adaptive poll window (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BusyPoll {
    window: Duration,
}

impl BusyPoll {
    /// No window yet: the first gaps the loop measures open one.
    #[must_use]
    pub(crate) const fn new() -> Self {
        Self {
            window: Duration::ZERO,
        }
    }

    /// How long to poll without sleeping after a turn that served requests (zero: go
    /// to sleep at once).
    #[must_use]
    pub(crate) const fn window(&self) -> Duration {
        self.window
    }

    /// A poll found something ready `after` it began (within the window).
    pub(crate) fn found(&mut self, after: Duration) {
        self.window = self.window.max(widened(after));
    }

    /// The loop slept after a turn that served requests (its poll, if any, found
    /// nothing) and woke `gap` after the turn ended: `ready` when something became
    /// ready, not when the timeout ran out or a signal came.
    pub(crate) fn slept(&mut self, gap: Duration, ready: bool) {
        if gap > MAX_WINDOW {
            self.window /= 2;
            if self.window < MIN_WINDOW {
                self.window = Duration::ZERO;
            }
        } else if ready {
            self.window = self.window.max(widened(gap));
        }
        // A timeout within the window says nothing about the clients: an engine
        // timer was due.
    }
}

/// Twice `gap`, within the bounds a window may take.
fn widened(gap: Duration) -> Duration {
    gap.saturating_mul(2).clamp(MIN_WINDOW, MAX_WINDOW)
}

#[cfg(test)]
mod tests {
    use super::{BusyPoll, MAX_WINDOW, MIN_WINDOW};
    use std::time::Duration;

    const fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn starts_by_sleeping() {
        assert_eq!(BusyPoll::new().window(), Duration::ZERO);
    }

    #[test]
    fn a_short_sleep_opens_a_window_twice_as_long() {
        let mut p = BusyPoll::new();
        p.slept(us(7), true);
        assert_eq!(p.window(), us(14));
        // A shorter gap later does not narrow it: the wider window still finds it.
        p.slept(us(3), true);
        assert_eq!(p.window(), us(14));
    }

    #[test]
    fn the_window_stays_within_its_bounds() {
        let mut p = BusyPoll::new();
        p.slept(us(1), true);
        assert_eq!(p.window(), MIN_WINDOW);
        p.slept(MAX_WINDOW, true);
        assert_eq!(p.window(), MAX_WINDOW);
        p.found(MAX_WINDOW);
        assert_eq!(p.window(), MAX_WINDOW);
    }

    #[test]
    fn a_late_find_keeps_room_to_spare() {
        let mut p = BusyPoll::new();
        p.slept(us(5), true);
        assert_eq!(p.window(), us(10));
        p.found(us(8));
        assert_eq!(p.window(), us(16));
        p.found(us(2));
        assert_eq!(p.window(), us(16));
    }

    #[test]
    fn a_client_that_pauses_between_requests_closes_the_window() {
        let mut p = BusyPoll::new();
        p.slept(us(20), true);
        assert_eq!(p.window(), us(40));
        // Once a millisecond: each gap is past the longest window.
        let mut windows = Vec::new();
        for _ in 0..5 {
            p.slept(Duration::from_millis(1), true);
            windows.push(p.window());
        }
        assert_eq!(
            windows,
            [us(20), us(10), us(5), Duration::ZERO, Duration::ZERO]
        );
        // And it stays shut: such gaps never open it again.
        p.slept(Duration::from_millis(1), true);
        assert_eq!(p.window(), Duration::ZERO);
    }

    #[test]
    fn a_timer_within_the_window_changes_nothing() {
        let mut p = BusyPoll::new();
        p.slept(us(6), true);
        p.slept(us(30), false);
        assert_eq!(p.window(), us(12));
        // A timeout past the longest window is a long gap like any other.
        p.slept(Duration::from_millis(5), false);
        assert_eq!(p.window(), us(6));
    }
}
