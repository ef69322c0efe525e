//! The engine's clock type: nanoseconds from an arbitrary epoch chosen by the driver.
//!
//! The standard library's monotonic instant cannot be built from a number, so a
//! simulator could not start at zero or print `+1.250s` in a transcript; this type can.
//! The daemon keeps one real monotonic instant as its epoch and converts the elapsed
//! time into this one.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self(0);

    /// `nanos` nanoseconds after the epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// `millis` milliseconds after the epoch.
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the epoch.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Whole minutes since the epoch: the clock of the reference's address and route
    /// timeouts, which have one-minute granularity.
    #[must_use]
    pub const fn as_minutes(self) -> u64 {
        self.0 / 60_000_000_000
    }

    /// How long after `earlier` this is, or zero if it is not later.
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(nanos))
    }
}

impl Sub<Duration> for Instant {
    type Output = Self;
    fn sub(self, d: Duration) -> Self {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_sub(nanos))
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `+S.mmmmmm` seconds since the epoch, the form transcripts use.
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "+{}.{:06}s",
            self.0 / 1_000_000_000,
            (self.0 % 1_000_000_000) / 1000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_displays() {
        let t = Instant::from_millis(1250);
        assert_eq!(alloc::format!("{t}"), "+1.250000s");
        assert_eq!(t + Duration::from_millis(750), Instant::from_millis(2000));
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(
            Instant::from_nanos(u64::MAX) + Duration::from_secs(1),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(Instant::from_millis(120_000).as_minutes(), 2);
        assert_eq!(
            t.saturating_duration_since(Instant::from_millis(2000)),
            Duration::ZERO
        );
    }
}
