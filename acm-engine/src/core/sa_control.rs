//! How hard one port leans on the SA: the per-try MAD timeout, fitted to the round
//! trips measured, and the number of SA MADs in flight, cut when the SA says BUSY or
//! stops answering and grown back while it answers (docs/protocol/sa.md §8).
//!
//! The reference sends every SA MAD with the fixed `timeout` and keeps `sa_depth` MADs
//! in flight whatever the SA answers. When the whole fabric asks at once (a job start),
//! a fixed window keeps a full SA full, and a fixed timeout shorter than the SA's
//! queueing delay turns every wait into a retry, which is more load. Here:
//!
//! * **Timeout:** the smoothed round trip plus four times its mean deviation
//!   ([`RttEstimator`], the estimator TCP uses, RFC 6298), never below `timeout` (so never more eager than the
//!   reference) and never above `sa_timeout_max`. `sa_timeout_max 0` keeps `timeout`.
//! * **Depth:** additive increase, multiplicative decrease, as TCP's congestion window:
//!   one more MAD in flight after a window's worth of answers, half as many after a
//!   BUSY or a timeout (at most one cut per round trip, so one overload burst cuts once),
//!   never fewer than 1 nor more than `sa_depth`. It starts at `sa_depth`, so an SA
//!   that never complains sees exactly the reference's traffic. After a BUSY answer the
//!   port also sends nothing new until the refused MAD's back-off is over: the SA is
//!   busy, not the MAD. `sa_adaptive_depth no` keeps `sa_depth` and never pauses.

use crate::Instant;
use crate::config::Options;
use crate::rtt::RttEstimator;
use core::time::Duration;

/// One port's estimate of the SA and its window.
#[derive(Debug, Clone, Default)]
pub(crate) struct SaControl {
    /// The round trips of answers that were not BUSY.
    rtt: RttEstimator,
    /// MADs allowed in flight; 0 until the port's first send (then `sa_depth`).
    window: u32,
    /// Answers counted towards the next increase.
    answered: u32,
    /// When the window was last cut.
    last_cut: Option<Instant>,
    /// When the SA last answered anything on this port (BUSY included).
    last_heard: Option<Instant>,
    /// After a BUSY answer, nothing new leaves the port before this instant.
    paused_until: Instant,
}

impl SaControl {
    /// The per-try timeout for the next send, in ms.
    pub(crate) fn timeout_ms(&self, o: &Options) -> u32 {
        self.rtt.timeout_ms(o.timeout_ms, o.sa_timeout_max_ms)
    }

    /// How many MADs may be sent now: [`SaControl::depth`], or 0 while the port waits
    /// out a BUSY answer ([`SaControl::pause`]; a pause ends when `sa_adaptive_depth`
    /// is turned off by a reload).
    pub(crate) fn credits(&self, o: &Options, now: Instant) -> u32 {
        if o.sa_adaptive_depth && now < self.paused_until {
            0
        } else {
            self.depth(o)
        }
    }

    /// The SA said BUSY and the refused MAD waits until `until`: "busy" is the SA's
    /// state, not the MAD's, so the port's other MADs wait as long (otherwise each
    /// would be refused in turn). Only with `sa_adaptive_depth`.
    pub(crate) fn pause(&mut self, o: &Options, until: Instant) {
        if o.sa_adaptive_depth {
            self.paused_until = self.paused_until.max(until);
        }
    }

    /// The SA answered something at `now`.
    pub(crate) fn heard(&mut self, now: Instant) {
        self.last_heard = Some(now);
    }

    /// Whether the SA answered anything after `t`: a MAD sent at `t` that timed out
    /// was then lost to an overloaded SA, not to a dead one.
    pub(crate) fn heard_since(&self, t: Instant) -> bool {
        self.last_heard.is_some_and(|h| h > t)
    }

    /// How many MADs may be in flight now.
    pub(crate) fn depth(&self, o: &Options) -> u32 {
        let ceiling = o.sa_depth.max(1);
        if !o.sa_adaptive_depth || self.window == 0 {
            ceiling
        } else {
            self.window.min(ceiling)
        }
    }

    /// An answer came back `rtt` after its send.
    pub(crate) fn answered(&mut self, o: &Options, rtt: Duration) {
        self.rtt.sample(rtt);
        if !o.sa_adaptive_depth {
            return;
        }
        let ceiling = o.sa_depth.max(1);
        let w = self.depth(o);
        self.answered += 1;
        if self.answered >= w {
            self.answered = 0;
            self.window = (w + 1).min(ceiling);
        }
    }

    /// The SA said BUSY, or a MAD went unanswered: halve the window, unless it was cut
    /// less than a round trip ago (the same overload, seen again).
    pub(crate) fn congested(&mut self, o: &Options, now: Instant) {
        if !o.sa_adaptive_depth {
            return;
        }
        if let Some(t) = self.last_cut
            && now < t + self.rtt.srtt()
        {
            return;
        }
        self.last_cut = Some(now);
        self.window = (self.depth(o) / 2).max(1);
        self.answered = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(depth: u32, max: u32, adaptive: bool) -> Options {
        Options {
            sa_depth: depth,
            sa_timeout_max_ms: max,
            sa_adaptive_depth: adaptive,
            ..Options::default()
        }
    }

    #[test]
    fn timeout_follows_the_round_trip_within_bounds() {
        let o = opts(1, 16_000, true);
        let mut c = SaControl::default();
        assert_eq!(
            c.timeout_ms(&o),
            2000,
            "no sample yet: the configured timeout"
        );
        c.answered(&o, Duration::from_micros(100));
        assert_eq!(c.timeout_ms(&o), 2000, "never below the configured timeout");
        for _ in 0..20 {
            c.answered(&o, Duration::from_millis(1500));
        }
        let t = c.timeout_ms(&o);
        assert!(t > 2000 && t < 16_000, "{t}");
        for _ in 0..20 {
            c.answered(&o, Duration::from_secs(60));
        }
        assert_eq!(c.timeout_ms(&o), 16_000, "the ceiling");
        assert_eq!(c.timeout_ms(&opts(1, 0, true)), 2000, "adaptation off");
    }

    #[test]
    fn window_halves_on_congestion_once_per_round_trip_and_grows_back() {
        let o = opts(16, 0, true);
        let mut c = SaControl::default();
        assert_eq!(c.depth(&o), 16);
        c.answered(&o, Duration::from_millis(10));
        let t0 = Instant::from_millis(100);
        c.congested(&o, t0);
        assert_eq!(c.depth(&o), 8);
        c.congested(&o, t0 + Duration::from_millis(5));
        assert_eq!(c.depth(&o), 8, "the same overload within a round trip");
        c.congested(&o, t0 + Duration::from_millis(20));
        assert_eq!(c.depth(&o), 4);
        for _ in 0..4 {
            c.answered(&o, Duration::from_millis(10));
        }
        assert_eq!(c.depth(&o), 5, "one more after a window of answers");
        for _ in 0..1000 {
            c.answered(&o, Duration::from_millis(10));
        }
        assert_eq!(c.depth(&o), 16, "never above sa_depth");
        let mut fixed = SaControl::default();
        let o = opts(16, 0, false);
        fixed.congested(&o, t0);
        assert_eq!(fixed.depth(&o), 16, "adaptation off");
        let mut paused = SaControl::default();
        let o = opts(16, 0, true);
        paused.pause(&o, t0 + Duration::from_millis(20));
        assert_eq!(
            paused.credits(&o, t0),
            0,
            "nothing leaves while the SA is busy"
        );
        assert_eq!(paused.credits(&o, t0 + Duration::from_millis(20)), 16);
        let mut never = SaControl::default();
        never.pause(&opts(16, 0, false), t0 + Duration::from_millis(20));
        assert_eq!(
            never.credits(&opts(16, 0, false), t0),
            16,
            "not without adaptation"
        );
        let one = opts(1, 0, true);
        let mut c = SaControl::default();
        c.congested(&one, t0);
        assert_eq!(c.depth(&one), 1, "never below one");
    }
}
