//! What a run counts: per kind of request, how many went out, how each ended, and the
//! latency of every answered one in an HDR histogram (nanoseconds, three significant
//! digits, up to 100 s); per run, the non-zero statuses and the connections. Each client
//! keeps its own [`Stats`]; they are merged when the run ends.
//!
//! Every request sent ends exactly one way: answered with status 0 (`ok`), answered with
//! another status ([`ErrorKind::Status`]), or not answered for one of the other
//! [`ErrorKind`]s. So `sent = ok + Σ errors` once a run is over.

use super::mix::{Kind, Mix};
use hdrhistogram::Histogram;

/// Highest latency recorded exactly, in nanoseconds; longer ones count as this.
pub(crate) const LATENCY_MAX_NS: u64 = 100_000_000_000;
/// Significant decimal digits the histogram keeps.
pub(crate) const LATENCY_DIGITS: u8 = 3;

/// How a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ErrorKind {
    /// Answered, with a status other than 0.
    Status,
    /// The server closed the connection (end of file or reset at a message boundary, or
    /// a failed write) before answering.
    Closed,
    /// The connection ended in the middle of the reply, or the reply is shorter than a
    /// reply of its kind can be (a header announcing fewer than 16 bytes, a successful
    /// RESOLVE without a whole entry).
    Short,
    /// A reply that is not an answer to the request: another version or operation, a
    /// body that is not whole entries or counters.
    Malformed,
    /// No reply within `--timeout`.
    Timeout,
    /// Another socket error.
    Io,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub(crate) const ALL: [Self; 6] = [
        Self::Status,
        Self::Closed,
        Self::Short,
        Self::Malformed,
        Self::Timeout,
        Self::Io,
    ];

    /// The name in reports.
    #[must_use]
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Closed => "closed",
            Self::Short => "short",
            Self::Malformed => "malformed",
            Self::Timeout => "timeout",
            Self::Io => "io",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Failures by [`ErrorKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ErrorCounts([u64; ErrorKind::ALL.len()]);

impl ErrorCounts {
    /// Counts one failure of `kind`.
    pub(crate) fn add(&mut self, kind: ErrorKind) {
        self.0[kind.index()] += 1;
    }

    /// Failures of `kind`.
    #[must_use]
    pub(crate) const fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind.index()]
    }

    /// Every failure.
    #[must_use]
    pub(crate) fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Failures other than a non-zero status: requests the server did not answer.
    #[must_use]
    pub(crate) fn unanswered(&self) -> u64 {
        self.total() - self.get(ErrorKind::Status)
    }

    fn merge(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

/// The figures of one kind of request.
#[derive(Debug, Clone)]
pub(crate) struct KindStats {
    /// Requests written.
    pub sent: u64,
    /// Answered with status 0.
    pub ok: u64,
    /// Everything else.
    pub errors: ErrorCounts,
    /// Latency of every answered request (any status), write to complete reply, in ns.
    pub latency: Histogram<u64>,
}

impl Default for KindStats {
    fn default() -> Self {
        Self {
            sent: 0,
            ok: 0,
            errors: ErrorCounts::default(),
            latency: new_histogram(),
        }
    }
}

impl KindStats {
    /// Requests answered, whatever the status.
    #[must_use]
    pub(crate) fn answered(&self) -> u64 {
        self.ok + self.errors.get(ErrorKind::Status)
    }

    fn merge(&mut self, other: &Self) {
        self.sent += other.sent;
        self.ok += other.ok;
        self.errors.merge(&other.errors);
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, LATENCY_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Everything one client (or, merged, the whole run) counted.
#[derive(Debug, Clone)]
pub(crate) struct Stats {
    kinds: [Option<KindStats>; Kind::ALL.len()],
    /// Answers by status byte (index 0 is unused: those are `ok`).
    pub status_codes: [u64; 256],
    /// Replies whose tid matched no request waiting for one (not counted per request).
    pub unexpected_replies: u64,
    /// Connections opened during the run, the first ones included.
    pub connects: u64,
    /// Connections opened again after the server closed one or a reply timed out.
    pub reconnects: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Warm-up requests (before the timing) and how many of them failed.
    pub warmup_requests: u64,
    /// Warm-up requests that got no status-0 answer.
    pub warmup_failures: u64,
}

impl Stats {
    /// Empty figures for the kinds `mix` sends.
    #[must_use]
    pub(crate) fn new(mix: &Mix) -> Self {
        Self {
            kinds: Kind::ALL.map(|k| mix.uses(k).then(KindStats::default)),
            status_codes: [0; 256],
            unexpected_replies: 0,
            connects: 0,
            reconnects: 0,
            connect_failures: 0,
            warmup_requests: 0,
            warmup_failures: 0,
        }
    }

    fn slot(&mut self, kind: Kind) -> &mut KindStats {
        self.kinds[kind.index()].get_or_insert_with(KindStats::default)
    }

    /// The figures of `kind`, if the run sends it.
    #[must_use]
    pub(crate) fn kind(&self, kind: Kind) -> Option<&KindStats> {
        self.kinds[kind.index()].as_ref()
    }

    /// The kinds the run sends with their figures, in report order.
    pub(crate) fn kinds(&self) -> impl Iterator<Item = (Kind, &KindStats)> {
        Kind::ALL
            .into_iter()
            .filter_map(|k| self.kind(k).map(|s| (k, s)))
    }

    /// A request of `kind` went out.
    pub(crate) fn sent(&mut self, kind: Kind) {
        self.slot(kind).sent += 1;
    }

    /// A request of `kind` was answered with `status` after `nanos`.
    pub(crate) fn answered(&mut self, kind: Kind, status: u8, nanos: u64) {
        let s = self.slot(kind);
        s.latency.saturating_record(nanos.max(1));
        if status == 0 {
            s.ok += 1;
        } else {
            s.errors.add(ErrorKind::Status);
            self.status_codes[usize::from(status)] += 1;
        }
    }

    /// A request of `kind` ended without an answer, or with an unusable one.
    pub(crate) fn failed(&mut self, kind: Kind, why: ErrorKind) {
        self.slot(kind).errors.add(why);
    }

    /// Adds another client's figures.
    pub(crate) fn merge(&mut self, other: &Self) {
        for (k, s) in other.kinds() {
            self.slot(k).merge(s);
        }
        for (a, b) in self.status_codes.iter_mut().zip(other.status_codes) {
            *a += b;
        }
        self.unexpected_replies += other.unexpected_replies;
        self.connects += other.connects;
        self.reconnects += other.reconnects;
        self.connect_failures += other.connect_failures;
        self.warmup_requests += other.warmup_requests;
        self.warmup_failures += other.warmup_failures;
    }

    /// Every kind together.
    #[must_use]
    pub(crate) fn total(&self) -> KindStats {
        let mut t = KindStats::default();
        for (_, s) in self.kinds() {
            t.merge(s);
        }
        t
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LatencySummary {
    /// Answers measured.
    pub count: u64,
    /// Fastest.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest.
    pub max_us: f64,
}

impl LatencySummary {
    /// The summary of a histogram in nanoseconds (all zero when it is empty).
    #[must_use]
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        if h.is_empty() {
            return Self {
                count: 0,
                min_us: 0.0,
                mean_us: 0.0,
                p50_us: 0.0,
                p90_us: 0.0,
                p99_us: 0.0,
                p999_us: 0.0,
                max_us: 0.0,
            };
        }
        Self {
            count: h.len(),
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_add_up_and_merge() {
        let mix: Mix = "hit=1,perf=1".parse().unwrap();
        let mut a = Stats::new(&mix);
        for i in 1..=100u64 {
            a.sent(Kind::Hit);
            a.answered(Kind::Hit, 0, i * 1000);
        }
        a.sent(Kind::Perf);
        a.answered(Kind::Perf, 3, 5000);
        a.sent(Kind::Perf);
        a.failed(Kind::Perf, ErrorKind::Closed);
        let mut b = Stats::new(&mix);
        b.sent(Kind::Hit);
        b.failed(Kind::Hit, ErrorKind::Timeout);
        b.reconnects = 1;
        a.merge(&b);

        let t = a.total();
        assert_eq!((t.sent, t.ok, t.answered()), (103, 100, 101));
        assert_eq!(t.errors.get(ErrorKind::Status), 1);
        assert_eq!(t.errors.unanswered(), 2);
        assert_eq!(t.sent, t.ok + t.errors.total());
        assert_eq!(a.status_codes[3], 1);
        assert_eq!(a.reconnects, 1);
        assert!(a.kind(Kind::Miss).is_none());

        let l = LatencySummary::of(&a.kind(Kind::Hit).unwrap().latency);
        assert_eq!(l.count, 100);
        assert!((l.p50_us - 50.0).abs() < 0.1, "{l:?}");
        assert!((l.max_us - 100.0).abs() < 0.1, "{l:?}");
        assert!(l.min_us <= l.p50_us && l.p50_us <= l.p99_us && l.p99_us <= l.p999_us);
        assert_eq!(LatencySummary::of(&new_histogram()).count, 0);
    }
}
