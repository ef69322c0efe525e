//! The report of a run, as text (default) or JSON (`--json`; the schema is in the
//! [module docs](super)).

use super::mix::Mix;
use super::stats::{ErrorCounts, ErrorKind, KindStats, LatencySummary, Stats};
use super::target::Target;
use super::worker::Stop;
use acm_proto::client::Status;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::time::Duration;

/// Everything a report says.
#[derive(Debug)]
pub(crate) struct Report<'a> {
    /// The server.
    pub target: &'a Target,
    /// Clients (connections).
    pub clients: u32,
    /// Requests in flight per client.
    pub pipeline: usize,
    /// When the run stopped.
    pub stop: Stop,
    /// The mix.
    pub mix: Mix,
    /// From the common start to the last client's end.
    pub elapsed: Duration,
    /// The merged figures.
    pub stats: &'a Stats,
}

impl Report<'_> {
    /// Requests answered per second.
    #[must_use]
    pub(crate) fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.stats.total().answered() as f64 / secs
        } else {
            0.0
        }
    }

    /// The JSON document.
    #[must_use]
    pub(crate) fn json(&self) -> Value {
        let total = self.stats.total();
        let mut kinds = Map::new();
        for (k, s) in self.stats.kinds() {
            kinds.insert(k.name().to_owned(), kind_json(s));
        }
        let mut mix = Map::new();
        for k in self.mix.kinds() {
            mix.insert(k.name().to_owned(), json!(self.mix.weight(k)));
        }
        let mut codes = Map::new();
        for (code, n) in self.stats.status_codes.iter().enumerate() {
            if *n > 0 {
                codes.insert(code.to_string(), json!(n));
            }
        }
        let (count, duration) = match self.stop {
            Stop::Count(n) => (Some(n), None),
            Stop::Duration(d) => (None, Some(d.as_secs_f64())),
        };
        json!({
            "tool": "acm-load",
            "version": env!("CARGO_PKG_VERSION"),
            "target": { "kind": self.target.kind(), "address": self.target.to_string() },
            "clients": self.clients,
            "pipeline": self.pipeline,
            "mix": mix,
            "stop": { "count": count, "duration_s": duration },
            "elapsed_s": self.elapsed.as_secs_f64(),
            "requests_per_s": self.rate(),
            "requests": {
                "sent": total.sent,
                "answered": total.answered(),
                "ok": total.ok,
                "unanswered": total.errors.unanswered(),
            },
            "errors": errors_json(&total.errors),
            "status_codes": codes,
            "unexpected_replies": self.stats.unexpected_replies,
            "latency_us": latency_json(&LatencySummary::of(&total.latency)),
            "kinds": kinds,
            "connections": {
                "opened": self.stats.connects,
                "reconnects": self.stats.reconnects,
                "failed": self.stats.connect_failures,
            },
            "warmup": {
                "requests": self.stats.warmup_requests,
                "failures": self.stats.warmup_failures,
            },
        })
    }

    /// The text report.
    #[must_use]
    pub(crate) fn text(&self) -> String {
        let total = self.stats.total();
        let mut t = String::new();
        let stop = match self.stop {
            Stop::Count(n) => format!("{n} requests"),
            Stop::Duration(d) => format!("{:.1} s", d.as_secs_f64()),
        };
        let _ = writeln!(
            t,
            "acm-load: {} client{} x pipeline {} on {} ({}), mix {}, {stop}",
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.pipeline,
            self.target,
            self.target.kind(),
            self.mix,
        );
        let _ = writeln!(t, "  elapsed      {:.3} s", self.elapsed.as_secs_f64());
        let _ = writeln!(t, "  throughput   {:.0} requests/s answered", self.rate());
        let _ = writeln!(
            t,
            "  requests     {} sent, {} answered ({} ok, {} with a status), {} unanswered",
            total.sent,
            total.answered(),
            total.ok,
            total.errors.get(ErrorKind::Status),
            total.errors.unanswered()
        );
        let _ = writeln!(t, "  errors       {}", self.errors_text(&total.errors));
        if self.stats.unexpected_replies > 0 {
            let _ = writeln!(
                t,
                "  unexpected   {} replies matching no request",
                self.stats.unexpected_replies
            );
        }
        let _ = writeln!(
            t,
            "  latency      {}",
            latency_text(&LatencySummary::of(&total.latency))
        );
        for (k, s) in self.stats.kinds() {
            let _ = writeln!(
                t,
                "  {:<12} {} sent, {} ok, {} errors; {}",
                k.name(),
                s.sent,
                s.ok,
                s.errors.total(),
                latency_text(&LatencySummary::of(&s.latency))
            );
        }
        let _ = writeln!(
            t,
            "  connections  {} opened, {} reopened, {} failed",
            self.stats.connects, self.stats.reconnects, self.stats.connect_failures
        );
        if self.stats.warmup_requests > 0 {
            let _ = writeln!(
                t,
                "  warm-up      {} requests, {} failed",
                self.stats.warmup_requests, self.stats.warmup_failures
            );
        }
        t
    }

    fn errors_text(&self, e: &ErrorCounts) -> String {
        if e.total() == 0 {
            return "none".into();
        }
        let mut parts = Vec::new();
        for kind in ErrorKind::ALL {
            let n = e.get(kind);
            if n == 0 {
                continue;
            }
            if kind == ErrorKind::Status {
                let codes: Vec<String> = self
                    .stats
                    .status_codes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(c, n)| {
                        let name = u8::try_from(c).ok().and_then(|c| Status(c).name());
                        match name {
                            Some(name) => format!("{c} {name}: {n}"),
                            None => format!("{c}: {n}"),
                        }
                    })
                    .collect();
                parts.push(format!("status {n} ({})", codes.join(", ")));
            } else {
                parts.push(format!("{} {n}", kind.name()));
            }
        }
        parts.join(", ")
    }
}

fn errors_json(e: &ErrorCounts) -> Value {
    let mut m = Map::new();
    m.insert("total".into(), json!(e.total()));
    for kind in ErrorKind::ALL {
        m.insert(kind.name().into(), json!(e.get(kind)));
    }
    Value::Object(m)
}

fn latency_json(l: &LatencySummary) -> Value {
    json!({
        "count": l.count,
        "min": l.min_us,
        "mean": l.mean_us,
        "p50": l.p50_us,
        "p90": l.p90_us,
        "p99": l.p99_us,
        "p999": l.p999_us,
        "max": l.max_us,
    })
}

fn kind_json(s: &KindStats) -> Value {
    json!({
        "sent": s.sent,
        "answered": s.answered(),
        "ok": s.ok,
        "errors": errors_json(&s.errors),
        "latency_us": latency_json(&LatencySummary::of(&s.latency)),
    })
}

fn latency_text(l: &LatencySummary) -> String {
    if l.count == 0 {
        return "no answers".into();
    }
    format!(
        "p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us (mean {:.1} us)",
        l.p50_us, l.p99_us, l.p999_us, l.max_us, l.mean_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Kind;

    #[test]
    fn json_and_text_say_the_same() {
        let mix: Mix = "hit=9,miss=1".parse().unwrap();
        let mut s = Stats::new(&mix);
        for _ in 0..9 {
            s.sent(Kind::Hit);
            s.answered(Kind::Hit, 0, 10_000);
        }
        s.sent(Kind::Miss);
        s.answered(Kind::Miss, 6, 2_000_000);
        s.sent(Kind::Miss);
        s.failed(Kind::Miss, ErrorKind::Closed);
        s.connects = 2;
        let target = Target::Unix("/tmp/x.sock".into());
        let r = Report {
            target: &target,
            clients: 2,
            pipeline: 1,
            stop: Stop::Count(11),
            mix,
            elapsed: Duration::from_secs(2),
            stats: &s,
        };
        let j = r.json();
        assert_eq!(j["requests"]["sent"], 11);
        assert_eq!(j["requests"]["answered"], 10);
        assert_eq!(j["requests"]["unanswered"], 1);
        assert_eq!(j["requests_per_s"], 5.0);
        assert_eq!(j["errors"]["status"], 1);
        assert_eq!(j["errors"]["closed"], 1);
        assert_eq!(j["errors"]["total"], 2);
        assert_eq!(j["status_codes"]["6"], 1);
        assert_eq!(j["kinds"]["hit"]["ok"], 9);
        assert_eq!(j["kinds"]["miss"]["latency_us"]["count"], 1);
        assert_eq!(j["stop"]["count"], 11);
        assert!(j["stop"]["duration_s"].is_null());
        assert_eq!(j["mix"]["miss"], 1);
        assert_eq!(j["target"]["kind"], "unix");
        let t = r.text();
        assert!(t.contains("status 1 (6 ETIMEDOUT: 1), closed 1"), "{t}");
        assert!(t.contains("5 requests/s"), "{t}");
    }
}
