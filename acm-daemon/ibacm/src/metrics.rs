//! `--metrics-file` (`metrics_file`, `metrics_interval`): the daemon's counters, cache
//! sizes and client numbers written every interval in the Prometheus text format
//! ([`acm_client::metrics`], the same text `ib_acme -P --format prometheus` prints, plus
//! what only the daemon knows), for node_exporter's textfile collector.
//!
//! The numbers come from the engine directly ([`acm_engine::Engine::endpoint_stats`]),
//! not through the client protocol, so the file also has the cache sizes no client
//! can ask for. Each write goes to a temporary file in the same directory, which is then
//! renamed over the file ([`safe_file::replace`], which also keeps whoever may write the
//! directory from redirecting the write): a reader sees the old text or the new one,
//! never half of one. The temporary name does not end in `.prom`, so the collector never
//! reads it. The file's mode is 0644 whatever the umask: node_exporter does not run as
//! root.
//!
//! The file is left in place when the daemon stops; node_exporter's
//! `node_textfile_mtime_seconds` tells a file that is no longer updated.

use super::safe_file;
use super::settings::MetricsConfig;
use acm_client::metrics::{DaemonSample, EndpointSample, Snapshot, render};
use acm_engine::Engine;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The metrics file and when it is next due.
#[derive(Debug)]
pub struct MetricsFile {
    path: PathBuf,
    interval: Duration,
    next: Instant,
    /// The last write failed (its error was logged; the next one is not, until a write
    /// succeeds again).
    failing: bool,
}

/// What a write did, for the log.
#[derive(Debug)]
pub enum Written {
    /// Written, as the writes before.
    Ok,
    /// Written again after failures.
    Recovered,
    /// Failed; the error is new (log it).
    Failed(io::Error),
    /// Failed again (already logged).
    StillFailing,
}

impl MetricsFile {
    /// A file per `config`, first due at once.
    #[must_use]
    pub fn new(config: &MetricsConfig, now: Instant) -> Self {
        Self {
            path: config.path.clone(),
            interval: config.interval,
            next: now,
            failing: false,
        }
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the next write is due.
    #[must_use]
    pub const fn due(&self) -> Instant {
        self.next
    }

    /// Makes the next write due at `now` (something the file shows has just changed).
    pub fn make_due(&mut self, now: Instant) {
        self.next = self.next.min(now);
    }

    /// Writes `text`, and sets the next write one interval after `now`.
    pub fn write(&mut self, now: Instant, text: &str) -> Written {
        self.next = now + self.interval;
        match safe_file::replace(&self.path, text.as_bytes(), 0o644) {
            Ok(()) if self.failing => {
                self.failing = false;
                Written::Recovered
            }
            Ok(()) => Written::Ok,
            Err(_) if self.failing => Written::StillFailing,
            Err(e) => {
                self.failing = true;
                Written::Failed(e)
            }
        }
    }
}

/// The daemon's snapshot: the engine's counters and endpoints, and `daemon`.
#[must_use]
pub(crate) fn snapshot(engine: &Engine, daemon: DaemonSample) -> Snapshot {
    Snapshot {
        service: None,
        up: None,
        global: Some(engine.counters().0.to_vec()),
        endpoints: engine
            .endpoint_stats()
            .into_iter()
            .map(|e| EndpointSample {
                index: e.index,
                guid: e.guid,
                port: e.port,
                pkey: e.pkey,
                provider: e.provider,
                addresses: e.addresses,
                counters: e.counters.map(|c| c.0.to_vec()),
                cache: e.cache,
            })
            .collect(),
        daemon: Some(daemon),
    }
}

/// The text for `engine` and `daemon`.
#[must_use]
pub(crate) fn text(engine: &Engine, daemon: DaemonSample) -> String {
    render(&[snapshot(engine, daemon)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_the_file_and_failures_are_reported_once() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().join("metrics");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("ibacm.prom");
        let config = MetricsConfig {
            path: path.clone(),
            interval: Duration::from_secs(15),
        };
        let t0 = Instant::now();
        let mut m = MetricsFile::new(&config, t0);
        assert_eq!(m.due(), t0, "due at once");
        assert!(matches!(m.write(t0, "a 1\n"), Written::Ok));
        assert_eq!(m.due(), t0 + Duration::from_secs(15));
        // A reload makes it due at once; never later than it was.
        let t1 = t0 + Duration::from_secs(2);
        m.make_due(t1);
        assert_eq!(m.due(), t1);
        m.make_due(t0 + Duration::from_secs(60));
        assert_eq!(m.due(), t1);
        assert!(matches!(m.write(t0, "a 2\n"), Written::Ok));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o644);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["ibacm.prom"], "no temporary file left");

        // The directory goes away: one failure to log, then silence, then recovery.
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(m.write(t0, "a 3\n"), Written::Failed(_)));
        assert!(matches!(m.write(t0, "a 3\n"), Written::StillFailing));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(m.write(t0, "a 4\n"), Written::Recovered));
        assert!(matches!(m.write(t0, "a 5\n"), Written::Ok));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 5\n");
    }

    #[test]
    fn the_snapshot_is_the_engine_s() {
        let engine = Engine::new(
            acm_engine::EngineConfig::default(),
            0,
            acm_engine::Instant::ZERO,
        );
        let d = DaemonSample {
            clients_connected: 1,
            clients_accepted: 2,
            clients_refused: 3,
            clients_closed_unread: 5,
            log_lines_dropped: 8,
            clients_over_user_limit: 6,
            start_time_seconds: 4,
            reloads: acm_client::metrics::ReloadCounts {
                applied: 6,
                refused: 7,
            },
            ..DaemonSample::default()
        };
        let s = snapshot(&engine, d);
        assert_eq!(s.global, Some(vec![0; 7]));
        assert!(s.endpoints.is_empty());
        assert_eq!(s.daemon, Some(d));
        let t = text(&engine, d);
        assert!(t.contains("acm_clients_refused_total 3\n"), "{t}");
        assert!(t.contains("acm_clients_closed_unread_total 5\n"), "{t}");
        assert!(t.contains("acm_log_lines_dropped_total 8\n"), "{t}");
        assert!(t.contains("acm_clients_over_user_limit_total 6\n"), "{t}");
        assert!(t.contains("acm_lookups_cancelled_total 0\n"), "{t}");
        assert!(t.contains("acm_reloads_total 6\n"), "{t}");
        assert!(t.contains("acm_reload_refused_total 7\n"), "{t}");
    }
}
