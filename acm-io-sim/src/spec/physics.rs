//! The fabric's physics beyond latency: how fast the SA serves each kind of query and
//! how much it queues (`[sa]`), and what a MAD costs the port that sends it and the
//! host that receives it (`[nic]`).
//!
//! Every default is "no limit, no cost": a spec that does not mention these tables
//! behaves exactly as the simulator did before they existed, so every existing scenario,
//! transcript and trace hash keeps its meaning. Realistic figures are opt-in, from a
//! file or from [`SaSpec::scalable_sa`]; why the defaults are not realistic is said on
//! each field.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The SA as a server: one queue, served in arrival order, each query taking
/// 1 / (its kind's rate) seconds of the SA's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaSpec {
    /// PathRecord queries per second the SA serves; 0 is unlimited.
    ///
    /// Default 0 (unlimited, the simulator's behaviour before this table): keeps every
    /// existing scenario's timing. A realistic figure is 20,000–50,000: the OFA
    /// "Scalable SA" project (2012) measured OpenSM's PathRecord serving rate in that
    /// range, and estimated a 40,000-node all-to-all (1.6 billion records) at about 9
    /// hours of SA time at 50k/s ([`SaSpec::scalable_sa`] uses it).
    #[serde(default)]
    pub path_rate: u64,
    /// MCMemberRecord joins and leaves per second; 0 is unlimited (default, as above).
    /// A join changes the SM's multicast state and is dearer than a PathRecord lookup;
    /// with no published figure to quote, the preset takes the PathRecord rate.
    #[serde(default)]
    pub mcmember_rate: u64,
    /// Every other SA request per second; 0 is unlimited (default, as above).
    #[serde(default)]
    pub other_rate: u64,
    /// Requests the SA holds at once, waiting or in service; one more overflows
    /// ([`SaSpec::overflow`]). 0 is unbounded (default, as above).
    ///
    /// No published figure exists for OpenSM's SA backlog (it is set by its receive
    /// buffers and dispatcher threads); [`SaSpec::scalable_sa`] bounds the wait to
    /// one second of service (`queue = rate`), half the reference's 2 s per-try MAD
    /// timeout, so an SA that is merely full answers BUSY rather than letting queries
    /// time out.
    #[serde(default)]
    pub queue: u32,
    /// What happens to a request that arrives with the queue full.
    #[serde(default)]
    pub overflow: SaOverflow,
}

/// What an overloaded SA does with a request it cannot queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SaOverflow {
    /// Answers at once with MAD status BUSY (bit 0 of the status word, which the IB
    /// specification defines for "the request was discarded, retry later";
    /// `acm_proto::mad::MadStatus::BUSY`) and no data. The default: it is what the
    /// status bit exists for.
    #[default]
    Busy,
    /// Drops the request silently: the sender's umad layer times out and retries.
    Drop,
}

/// The kinds of SA request that have a rate of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaQueryKind {
    /// PathRecord (attribute 0x0035).
    PathRecord,
    /// MCMemberRecord (attribute 0x0038): joins and leaves.
    McMember,
    /// Anything else.
    Other,
}

impl Default for SaSpec {
    fn default() -> Self {
        Self::UNLIMITED
    }
}

impl SaSpec {
    /// No limit anywhere: every request is answered after `sm.response_us`.
    pub const UNLIMITED: Self = Self {
        path_rate: 0,
        mcmember_rate: 0,
        other_rate: 0,
        queue: 0,
        overflow: SaOverflow::Busy,
    };

    /// An SA serving `rate` requests per second of every kind, holding a second's
    /// worth of them, answering BUSY beyond (see each field for the sources).
    #[must_use]
    pub fn scalable_sa(rate: u64) -> Self {
        Self {
            path_rate: rate,
            mcmember_rate: rate,
            other_rate: rate,
            queue: u32::try_from(rate).unwrap_or(u32::MAX).max(1),
            overflow: SaOverflow::Busy,
        }
    }

    /// Whether nothing is limited (the SA answers at once, as before this table).
    #[must_use]
    pub fn is_unlimited(&self) -> bool {
        self.path_rate == 0 && self.mcmember_rate == 0 && self.other_rate == 0 && self.queue == 0
    }

    /// The SA time one request of `kind` takes (zero when its rate is unlimited).
    #[must_use]
    pub fn service_time(&self, kind: SaQueryKind) -> Duration {
        let rate = match kind {
            SaQueryKind::PathRecord => self.path_rate,
            SaQueryKind::McMember => self.mcmember_rate,
            SaQueryKind::Other => self.other_rate,
        };
        1_000_000_000u64
            .checked_div(rate)
            .map_or(Duration::ZERO, Duration::from_nanos)
    }
}

/// What a MAD costs the hosts' adapters and CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Nanoseconds a port takes to put one MAD on the wire: a port's sends leave one
    /// after another, this far apart. Default 0 (sends leave at once, as before).
    /// A 256-byte MAD plus headers (~330 bytes) serializes in about 260 ns at 4x SDR's
    /// 10 Gb/s signalling (8 Gb/s of data), about 70 ns at 4x QDR.
    #[serde(default)]
    pub send_ns: u64,
    /// Nanoseconds a host takes to receive and process one UD MAD (the completion, the
    /// daemon's wake-up and its handling): a MAD reaches the engine this long after
    /// the host has finished with the one before it (or after its arrival, if the host
    /// was idle), so a multicast that every host receives costs every host. Default 0 (free, as before). Measured on this project's daemon, the
    /// cache-hit path costs about 5.5 µs of CPU per request (BENCHMARKS.md); a received
    /// ACM MAD is of that order.
    #[serde(default)]
    pub recv_ns: u64,
}

impl NicSpec {
    /// Whether MADs cost nothing (the behaviour before this table).
    #[must_use]
    pub fn is_free(&self) -> bool {
        self.send_ns == 0 && self.recv_ns == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_limit_nothing_and_presets_do() {
        assert!(SaSpec::default().is_unlimited());
        assert!(NicSpec::default().is_free());
        let s = SaSpec::scalable_sa(20_000);
        assert!(!s.is_unlimited());
        assert_eq!(
            s.service_time(SaQueryKind::PathRecord),
            Duration::from_micros(50)
        );
        assert_eq!(s.queue, 20_000);
        assert_eq!(
            SaSpec::default().service_time(SaQueryKind::Other),
            Duration::ZERO
        );
    }
}
