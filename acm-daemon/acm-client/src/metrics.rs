//! The daemon's numbers in the Prometheus text exposition format (version 0.0.4), shared
//! by `ib_acme --format prometheus`, which reads them over the client protocol, and the
//! daemon's `--metrics-file`, which reads them from its engine; one renderer, so that
//! both give the same series under the same names and labels.
//!
//! Every name starts with `acm_`; counters end in `_total`. The families, in the order
//! they are written (a family without samples is left out, with its `HELP` and `TYPE`):
//!
//! | family | type | labels | from |
//! |---|---|---|---|
//! | `acm_up` | gauge | | `ib_acme`: 1 when the service answered, 0 when it could not be reached |
//! | `acm_errors_total` … `acm_route_cache_hits_total` | counter | | the global PERF_QUERY counters |
//! | `acm_endpoint_info` | gauge (1) | endpoint, guid, port, pkey, provider | EP_QUERY |
//! | `acm_endpoint_addresses` | gauge | endpoint, guid, port, pkey | EP_QUERY's address count |
//! | `acm_endpoint_errors_total` … | counter | endpoint, guid, port, pkey | PERF_QUERY of the endpoint |
//! | `acm_endpoint_cache_entries` | gauge | endpoint, guid, port, pkey, state | the daemon only |
//! | `acm_endpoint_cache_limit_entries` | gauge | endpoint, guid, port, pkey | the daemon only: `max_dest_cache_bytes` in entries |
//! | `acm_endpoint_cache_evictions_total` | counter | endpoint, guid, port, pkey | the daemon only |
//! | `acm_clients_connected` | gauge | | the daemon only |
//! | `acm_clients_accepted_total`, `acm_clients_refused_total` | counter | | the daemon only |
//! | `acm_clients_over_user_limit_total`, `acm_clients_over_shared_limit_total` | counter | | the daemon only: refused at the connection limits |
//! | `acm_clients_user_limit`, `acm_clients_shared_limit` | gauge | | the daemon only: the connection limits in force |
//! | `acm_clients_closed_not_allowed_total` | counter | | the daemon only: closed when a reload narrowed the allow-lists |
//! | `acm_clients_closed_unread_total` | counter | | the daemon only: closed at `max_queued_reply_bytes` |
//! | `acm_lookups_rejected_total`, `acm_lookups_cancelled_total`, `acm_background_resolves_dropped_total` | counter | | the daemon only (`acm_engine::LookupCounters`) |
//! | `acm_log_lines_dropped_total` | counter | | the daemon only: log lines its log file (or stream) did not take |
//! | `acm_reloads_total`, `acm_reload_refused_total` | counter | | the daemon only: SIGHUP reloads applied and refused |
//! | `acm_start_time_seconds` | gauge | | the daemon only |
//!
//! The seven counters are, in the order of docs/daemon.md §12 (`ib_acme -P`'s columns):
//! `errors`, `resolves`, `no_data`, `addr_queries`, `addr_cache_hits`,
//! `route_queries`, `route_cache_hits`. A reply with more counters than these has the
//! rest left out: nothing says what they count.
//!
//! `endpoint` is the endpoint's number as `ib_acme -P N` and an EP_QUERY for port 0
//! count it (docs/daemon.md §13), `guid` and `pkey` are written as `ib_acme -e` writes them
//! (`0x0002c90300a0b000`, `0xffff`). Cache sizes are not in the client protocol, so only
//! the daemon's file has them (see `acm_engine::EndpointStats`).

use acm_engine::{CacheStats, LookupCounters};
use std::fmt::Write as _;

/// What the global counters are called, and what each counts (docs/daemon.md §12).
const GLOBAL_COUNTERS: [(&str, &str); 7] = [
    (
        "errors",
        "Resolve replies with a status other than success and ENODATA (ib_acme -P's Error Count).",
    ),
    (
        "resolves",
        "RESOLVE requests received from clients and the kernel (Resolve Count).",
    ),
    ("no_data", "Resolve replies with status ENODATA (No Data)."),
    (
        "addr_queries",
        "ACM multicast address resolutions sent (Addr Query Count).",
    ),
    (
        "addr_cache_hits",
        "Lookups that found the address known but not its route (Addr Cache Count).",
    ),
    (
        "route_queries",
        "SA PathRecord queries sent, ib_acme -v's included (Route Query Count).",
    ),
    (
        "route_cache_hits",
        "Lookups answered from the route cache (Route Cache Count).",
    ),
];

/// The same for one endpoint's counters, which its provider keeps.
const ENDPOINT_COUNTERS: [&str; 7] = [
    "Replies of the endpoint's provider that carried an error (ib_acme -P N's Error Count).",
    "Resolves the endpoint's provider handled (Resolve Count).",
    "ENODATA replies of the endpoint, an endpoint not ready included (No Data).",
    "ACM multicast address resolutions the endpoint sent (Addr Query Count).",
    "Lookups on the endpoint that found the address known but not its route (Addr Cache Count).",
    "SA PathRecord queries the endpoint sent (Route Query Count).",
    "Lookups on the endpoint answered from its route cache (Route Cache Count).",
];

/// One daemon's numbers at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// A `service` label for every sample: `ib_acme` sets it when it queries several
    /// services, whose series must stay apart.
    pub service: Option<String>,
    /// Whether the service answered (`ib_acme`; the daemon writes no `acm_up`, since a
    /// file it no longer updates would claim it still runs).
    pub up: Option<bool>,
    /// The global counters, if they were read.
    pub global: Option<Vec<u64>>,
    /// The endpoints, in their order.
    pub endpoints: Vec<EndpointSample>,
    /// The daemon's own numbers (its file only).
    pub daemon: Option<DaemonSample>,
}

/// One endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSample {
    /// Its number, from 1 (docs/daemon.md §13).
    pub index: usize,
    /// The device's node GUID.
    pub guid: u64,
    /// The port number.
    pub port: u8,
    /// The partition key.
    pub pkey: u16,
    /// The provider's name.
    pub provider: String,
    /// How many local addresses it has.
    pub addresses: usize,
    /// Its counters, if they were read.
    pub counters: Option<Vec<u64>>,
    /// Its destination cache, if known.
    pub cache: Option<CacheStats>,
}

/// The daemon's own numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaemonSample {
    /// Client connections open now.
    pub clients_connected: u64,
    /// Client connections served since the start (refused ones not included).
    pub clients_accepted: u64,
    /// Client connections refused by the allow-lists since the start.
    pub clients_refused: u64,
    /// Client connections refused because their user held `max_connections_per_user`.
    pub clients_over_user_limit: u64,
    /// Client connections of users other than root and the daemon's refused because
    /// the connections they share were all open (the rest is root's reserve).
    pub clients_over_shared_limit: u64,
    /// Connected clients closed because reloaded allow-lists no longer let their user
    /// in.
    pub clients_closed_not_allowed: u64,
    /// The connections one user other than root and the daemon's may hold now.
    pub clients_user_limit: u64,
    /// The connections users other than root and the daemon's may hold together now.
    pub clients_shared_limit: u64,
    /// Client connections closed because all queued replies reached
    /// `max_queued_reply_bytes` while they were not reading theirs.
    pub clients_closed_unread: u64,
    /// Log lines lost because the log could not be written (a full disk, say).
    pub log_lines_dropped: u64,
    /// When the daemon started, in seconds since the Unix epoch.
    pub start_time_seconds: u64,
    /// What the engine's lookup bounds did: requests refused over
    /// `max_pending_per_client`, lookups cancelled when their clients closed, NODELAY
    /// warm-ups not started over `max_background_resolves`.
    pub lookups: LookupCounters,
    /// What reloads (SIGHUP) did.
    pub reloads: ReloadCounts,
}

/// The reloads (SIGHUP) of a daemon since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloads applied.
    pub applied: u64,
    /// Reloads refused: a file missing, unreadable, no regular file, over its bound,
    /// not text, or with a line its parser does not take; the running configuration
    /// stayed.
    pub refused: u64,
}

/// One metric family being gathered: its samples as `(labels, value)` lines.
struct Family {
    name: String,
    kind: &'static str,
    help: String,
    samples: Vec<(String, u64)>,
}

impl Family {
    fn new(name: impl Into<String>, kind: &'static str, help: &str) -> Self {
        Self {
            name: name.into(),
            kind,
            help: help.to_owned(),
            samples: Vec::new(),
        }
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {} {}", self.name, escape_help(&self.help));
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, value) in &self.samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{} {value}", self.name);
            } else {
                let _ = writeln!(out, "{}{{{labels}}} {value}", self.name);
            }
        }
    }
}

/// Labels as they go between the braces: `a="x",b="y"`.
fn labels(pairs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in pairs {
        if !s.is_empty() {
            s.push(',');
        }
        let _ = write!(s, "{k}=\"{}\"", escape_label(v));
    }
    s
}

/// A label value: backslash, double quote and line feed escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A HELP text: backslash and line feed escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Where a daemon family's value is in a [`DaemonSample`].
type DaemonValue = fn(&DaemonSample) -> u64;

/// The daemon's own families (its metrics file only), in the order they are written:
/// name, type, help, and where the value is.
const DAEMON_FAMILIES: [(&str, &str, &str, DaemonValue); 16] = [
    (
        "acm_clients_connected",
        "gauge",
        "Client connections open now (the kernel's netlink channel is not one).",
        |d| d.clients_connected,
    ),
    (
        "acm_clients_accepted_total",
        "counter",
        "Client connections served since the daemon started (refused ones are counted apart).",
        |d| d.clients_accepted,
    ),
    (
        "acm_clients_refused_total",
        "counter",
        "Client connections refused by allow_users and allow_groups since the daemon started.",
        |d| d.clients_refused,
    ),
    (
        "acm_clients_over_user_limit_total",
        "counter",
        "Client connections closed at accept because their user already held max_connections_per_user (root and the daemon's user have no such limit).",
        |d| d.clients_over_user_limit,
    ),
    (
        "acm_clients_over_shared_limit_total",
        "counter",
        "Client connections of users other than root and the daemon's closed at accept because the connections they share were all open (the descriptors left are root's reserve).",
        |d| d.clients_over_shared_limit,
    ),
    (
        "acm_clients_user_limit",
        "gauge",
        "Client connections one user other than root and the daemon's may hold (max_connections_per_user, or half of acm_clients_shared_limit).",
        |d| d.clients_user_limit,
    ),
    (
        "acm_clients_shared_limit",
        "gauge",
        "Client connections users other than root and the daemon's may hold together: the descriptor limit less the daemon's own descriptors and root's reserve.",
        |d| d.clients_shared_limit,
    ),
    (
        "acm_clients_closed_not_allowed_total",
        "counter",
        "Connected clients closed because a reload changed allow_users or allow_groups so that they no longer let their user in.",
        |d| d.clients_closed_not_allowed,
    ),
    (
        "acm_clients_closed_unread_total",
        "counter",
        "Client connections closed because the replies queued for all clients reached max_queued_reply_bytes while they were not reading theirs.",
        |d| d.clients_closed_unread,
    ),
    (
        "acm_lookups_rejected_total",
        "counter",
        "Resolve requests answered ENOMEM at once because their connection already waited on max_pending_per_client destinations.",
        |d| d.lookups.rejected,
    ),
    (
        "acm_lookups_cancelled_total",
        "counter",
        "Lookups stopped because every client waiting for them closed.",
        |d| d.lookups.cancelled,
    ),
    (
        "acm_background_resolves_dropped_total",
        "counter",
        "NODELAY misses that started no background lookup because the endpoint already had max_background_resolves.",
        |d| d.lookups.background_dropped,
    ),
    (
        "acm_log_lines_dropped_total",
        "counter",
        "Log lines lost since the daemon started because the log file or stream could not be written (a full disk, say); the log says how many when writing works again.",
        |d| d.log_lines_dropped,
    ),
    (
        "acm_reloads_total",
        "counter",
        "Reloads (SIGHUP) applied since the daemon started (refused ones are counted apart).",
        |d| d.reloads.applied,
    ),
    (
        "acm_reload_refused_total",
        "counter",
        "Reloads (SIGHUP) refused since the daemon started: a configuration file missing, unreadable, not a regular file, over its size bound, not text, or with a line its parser does not take; the running configuration stayed.",
        |d| d.reloads.refused,
    ),
    (
        "acm_start_time_seconds",
        "gauge",
        "When the daemon started, in seconds since the Unix epoch; its counters started from 0 then.",
        |d| d.start_time_seconds,
    ),
];

/// Renders `snapshots` (one per daemon) as one exposition: each family once, with the
/// samples of every snapshot under it.
#[must_use]
pub fn render(snapshots: &[Snapshot]) -> String {
    let mut up = Family::new(
        "acm_up",
        "gauge",
        "Whether the service answered (1) or could not be reached (0).",
    );
    let mut global: Vec<Family> = GLOBAL_COUNTERS
        .iter()
        .map(|(n, h)| Family::new(format!("acm_{n}_total"), "counter", h))
        .collect();
    let mut info = Family::new(
        "acm_endpoint_info",
        "gauge",
        "The daemon's endpoints (a port and partition each), with the provider serving each; always 1.",
    );
    let mut addresses = Family::new(
        "acm_endpoint_addresses",
        "gauge",
        "Local addresses (names and IP addresses) of the endpoint.",
    );
    let mut endpoint: Vec<Family> = GLOBAL_COUNTERS
        .iter()
        .zip(ENDPOINT_COUNTERS)
        .map(|((n, _), h)| Family::new(format!("acm_endpoint_{n}_total"), "counter", h))
        .collect();
    let mut cache = Family::new(
        "acm_endpoint_cache_entries",
        "gauge",
        "Destinations in the endpoint's cache, by state: init, query_addr (an ACM resolve is out), addr_resolved, query_route (an SA query is out), ready.",
    );
    let mut cache_limit = Family::new(
        "acm_endpoint_cache_limit_entries",
        "gauge",
        "The most destinations the endpoint's cache may hold (max_dest_cache_bytes over the most one entry costs).",
    );
    let mut evictions = Family::new(
        "acm_endpoint_cache_evictions_total",
        "counter",
        "Idle destinations evicted from the endpoint's full cache to make room for new ones, since the endpoint opened.",
    );
    let mut daemon: Vec<Family> = DAEMON_FAMILIES
        .iter()
        .map(|(n, k, h, _)| Family::new(*n, k, h))
        .collect();

    for snap in snapshots {
        let svc: Vec<(&str, &str)> = snap
            .service
            .as_deref()
            .map(|s| ("service", s))
            .into_iter()
            .collect();
        let plain = labels(&svc);
        if let Some(u) = snap.up {
            up.samples.push((plain.clone(), u64::from(u)));
        }
        if let Some(c) = &snap.global {
            for (f, v) in global.iter_mut().zip(c) {
                f.samples.push((plain.clone(), *v));
            }
        }
        for ep in &snap.endpoints {
            let index = ep.index.to_string();
            let guid = format!("0x{:016x}", ep.guid);
            let port = ep.port.to_string();
            let pkey = format!("0x{:04x}", ep.pkey);
            let mut base = svc.clone();
            base.extend([
                ("endpoint", index.as_str()),
                ("guid", guid.as_str()),
                ("port", port.as_str()),
                ("pkey", pkey.as_str()),
            ]);
            let mut with_provider = base.clone();
            with_provider.push(("provider", &ep.provider));
            info.samples.push((labels(&with_provider), 1));
            let base_labels = labels(&base);
            addresses
                .samples
                .push((base_labels.clone(), ep.addresses as u64));
            if let Some(c) = &ep.counters {
                for (f, v) in endpoint.iter_mut().zip(c) {
                    f.samples.push((base_labels.clone(), *v));
                }
            }
            if let Some(c) = &ep.cache {
                for (state, n) in [
                    ("init", c.init),
                    ("query_addr", c.query_addr),
                    ("addr_resolved", c.addr_resolved),
                    ("query_route", c.query_route),
                    ("ready", c.ready),
                ] {
                    let mut l = base.clone();
                    l.push(("state", state));
                    cache.samples.push((labels(&l), n as u64));
                }
                cache_limit
                    .samples
                    .push((base_labels.clone(), c.limit as u64));
                evictions.samples.push((base_labels.clone(), c.evictions));
            }
        }
        if let Some(d) = &snap.daemon {
            for (f, (.., value)) in daemon.iter_mut().zip(&DAEMON_FAMILIES) {
                f.samples.push((plain.clone(), value(d)));
            }
        }
    }

    let mut out = String::new();
    up.write(&mut out);
    for f in &global {
        f.write(&mut out);
    }
    info.write(&mut out);
    addresses.write(&mut out);
    for f in &endpoint {
        f.write(&mut out);
    }
    for f in [&cache, &cache_limit, &evictions]
        .into_iter()
        .chain(&daemon)
    {
        f.write(&mut out);
    }
    out
}

#[cfg(test)]
#[path = "../tests/support/prometheus.rs"]
mod validator;

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(index: usize) -> EndpointSample {
        EndpointSample {
            index,
            guid: 0x0002_c903_00a0_b000,
            port: 1,
            pkey: 0xffff,
            provider: "ibacmp".into(),
            addresses: 3,
            counters: Some(vec![1, 18, 2, 3, 3, 9, 8]),
            cache: None,
        }
    }

    #[test]
    fn ib_acme_view_of_one_service() {
        let snap = Snapshot {
            up: Some(true),
            global: Some(vec![6, 24, 2, 3, 3, 9, 14]),
            endpoints: vec![endpoint(1)],
            ..Snapshot::default()
        };
        let text = render(&[snap]);
        validator::check(&text).unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn daemon_view_with_cache_sizes_and_its_own_numbers() {
        let mut ep = endpoint(1);
        ep.cache = Some(CacheStats {
            init: 0,
            query_addr: 1,
            addr_resolved: 2,
            query_route: 0,
            ready: 3,
            limit: 257_122,
            evictions: 12,
        });
        let mut second = endpoint(2);
        second.pkey = 0x8001;
        second.counters = None;
        second.cache = Some(CacheStats::default());
        let snap = Snapshot {
            global: Some(vec![0; 7]),
            endpoints: vec![ep, second],
            daemon: Some(DaemonSample {
                clients_connected: 2,
                clients_accepted: 10,
                clients_refused: 1,
                clients_over_user_limit: 5,
                clients_over_shared_limit: 6,
                clients_closed_not_allowed: 3,
                clients_user_limit: 4096,
                clients_shared_limit: 8192,
                clients_closed_unread: 4,
                log_lines_dropped: 7,
                start_time_seconds: 1_780_000_000,
                lookups: LookupCounters {
                    rejected: 4032,
                    cancelled: 64,
                    background_dropped: 7,
                },
                reloads: ReloadCounts {
                    applied: 3,
                    refused: 2,
                },
            }),
            ..Snapshot::default()
        };
        let text = render(&[snap]);
        validator::check(&text).unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn several_services_share_each_family_and_labels_are_escaped() {
        let a = Snapshot {
            service: Some("/run/a \"x\"\\y.sock".into()),
            up: Some(true),
            global: Some(vec![1, 2, 3, 4, 5, 6, 7, 99]),
            endpoints: vec![endpoint(1)],
            ..Snapshot::default()
        };
        let b = Snapshot {
            service: Some("node2".into()),
            up: Some(false),
            ..Snapshot::default()
        };
        let text = render(&[a, b]);
        validator::check(&text).unwrap();
        assert!(
            text.contains(
                "acm_up{service=\"/run/a \\\"x\\\"\\\\y.sock\"} 1\nacm_up{service=\"node2\"} 0\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE acm_resolves_total counter").count(), 1);
        // The eighth counter has no name and is left out.
        assert!(!text.contains(" 99\n"), "{text}");
    }

    #[test]
    fn nothing_known_renders_nothing() {
        assert_eq!(render(&[Snapshot::default()]), "");
        assert_eq!(render(&[]), "");
    }

    #[test]
    fn the_validator_refuses_what_prometheus_would() {
        let good = "# HELP acm_x_total X.\n# TYPE acm_x_total counter\nacm_x_total{a=\"1\"} 3\n";
        validator::check(good).unwrap();
        for bad in [
            "acm_x_total 3",                                              // no newline
            "# TYPE acm_x_total counter\nacm_x_total{a=1} 3\n",           // unquoted
            "# TYPE acm_x_total counter\nacm_x_total three\n",            // value
            "# TYPE acm_x counter\nacm_x 3\n",                            // no _total
            "# TYPE acm_x_total counter\nacm_x_total 1\nacm_x_total 2\n", // repeated
            "# TYPE acm_x_total counter\n# TYPE acm_x_total counter\n",   // two TYPEs
            "# TYPE acm_a gauge\nacm_a 1\n# TYPE acm_b gauge\nacm_b 1\nacm_a{x=\"\"} 1\n", // split
            "acm_a 1\n",                                                  // no TYPE
            "# TYPE acm_a gauge\nacm_b 1\n",                              // other family
        ] {
            assert!(validator::check(bad).is_err(), "{bad:?}");
        }
    }
}
