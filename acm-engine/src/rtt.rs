//! A round-trip estimator for timeouts that follow what is measured: the smoothed
//! round trip plus four times its mean deviation, the estimator TCP uses (RFC 6298),
//! kept between a floor and a ceiling. The SA agent (`core/sa_control.rs`) and the ACM
//! resolve retries (`acmp/protocol.rs`) use it so that a slow SA or slow receivers are
//! waited for instead of being asked again, which would only add load.

use core::time::Duration;

/// Round-trip samples, smoothed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RttEstimator {
    /// Smoothed round trip, in µs; `None` before the first sample.
    srtt_us: Option<u64>,
    /// Mean deviation of the round trip, in µs.
    rttvar_us: u64,
}

impl RttEstimator {
    /// One measured round trip.
    pub(crate) fn sample(&mut self, rtt: Duration) {
        let s = u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX / 8);
        match self.srtt_us {
            None => {
                self.srtt_us = Some(s);
                self.rttvar_us = s / 2;
            }
            Some(srtt) => {
                self.rttvar_us = (3 * self.rttvar_us + srtt.abs_diff(s)) / 4;
                self.srtt_us = Some((7 * srtt + s) / 8);
            }
        }
    }

    /// The smoothed round trip (zero before the first sample).
    pub(crate) fn srtt(&self) -> Duration {
        Duration::from_micros(self.srtt_us.unwrap_or(0))
    }

    /// The timeout, in ms: `floor` before the first sample or when `ceiling` is 0 (no
    /// adaptation); else the estimate, between `floor` and `max(floor, ceiling)`.
    pub(crate) fn timeout_ms(&self, floor: u32, ceiling: u32) -> u32 {
        let Some(srtt) = self.srtt_us.filter(|_| ceiling != 0) else {
            return floor;
        };
        let rto_ms = srtt
            .saturating_add(self.rttvar_us.saturating_mul(4))
            .div_ceil(1000);
        u32::try_from(rto_ms)
            .unwrap_or(u32::MAX)
            .clamp(floor, ceiling.max(floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_round_trip_between_floor_and_ceiling() {
        let mut e = RttEstimator::default();
        assert_eq!(e.timeout_ms(2000, 16_000), 2000, "no sample yet");
        e.sample(Duration::from_micros(100));
        assert_eq!(e.timeout_ms(2000, 16_000), 2000, "never below the floor");
        for _ in 0..20 {
            e.sample(Duration::from_millis(1500));
        }
        let t = e.timeout_ms(2000, 16_000);
        assert!(t > 2000 && t < 16_000, "{t}");
        assert!(e.srtt() > Duration::from_millis(1000));
        for _ in 0..20 {
            e.sample(Duration::from_secs(60));
        }
        assert_eq!(e.timeout_ms(2000, 16_000), 16_000, "the ceiling");
        assert_eq!(e.timeout_ms(2000, 0), 2000, "adaptation off");
    }
}
