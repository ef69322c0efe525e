//! The daemon's log: the reference's line format
//! (`YYYY-MM-DDTHH:MM:SS.mmm: <origin>: <message>`, local time, flushed per line) to
//! `stdout`, `stderr` or a file, with a fallback to stdout when the file cannot be opened
//! (as the reference). Unlike the reference, which truncates the file at every start, it
//! is opened for appending: a restart must not erase the log of the run before it,
//! which is often the one an administrator wants to read.
//!
//! Lines carry the engine's [`Level`], so the daemon's own lines and the engine's are
//! filtered by one rule ([`max_level`]).

use acm_engine::log::{Level, LogEvent};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};

/// Where lines go.
#[derive(Debug)]
enum Sink {
    Stdout,
    Stderr,
    File(File),
    /// Collected in memory (tests).
    Memory(Vec<String>),
}

/// The log: a sink and the most verbose level written (`None`: nothing is).
#[derive(Debug)]
pub struct Logger {
    sink: Sink,
    max: Option<Level>,
}

/// The most verbose level written for a `log_level` option value: 0, 1 and 2 (or more)
/// write up to [`Level::Basic`], [`Level::Config`] and [`Level::Verbose`]. A negative
/// value writes nothing, as in the reference, which compares each line's level with the
/// option (the engine does not: it queues its level-0 lines anyway, and they stop here).
#[must_use]
pub const fn max_level(log_level: i32) -> Option<Level> {
    match log_level {
        i32::MIN..=-1 => None,
        0 => Some(Level::Basic),
        1 => Some(Level::Config),
        _ => Some(Level::Verbose),
    }
}

impl Logger {
    /// Opens `target` (`stdout`, `stderr`, case-insensitive, or a path, created if
    /// missing and appended to). A path that cannot be opened falls back to stdout; the error is returned beside the logger
    /// so the caller can report it once the log is up.
    #[must_use]
    pub fn open(target: &str, max: Option<Level>) -> (Self, Option<io::Error>) {
        let (sink, err) = if target.eq_ignore_ascii_case("stdout") {
            (Sink::Stdout, None)
        } else if target.eq_ignore_ascii_case("stderr") {
            (Sink::Stderr, None)
        } else {
            match OpenOptions::new().append(true).create(true).open(target) {
                Ok(f) => (Sink::File(f), None),
                Err(e) => (Sink::Stdout, Some(e)),
            }
        };
        (Self { sink, max }, err)
    }

    /// A logger that keeps its lines (for tests).
    #[must_use]
    pub fn memory(max: Option<Level>) -> Self {
        Self {
            sink: Sink::Memory(Vec::new()),
            max,
        }
    }

    /// The lines a [`Logger::memory`] kept.
    #[must_use]
    pub fn lines(&self) -> &[String] {
        match &self.sink {
            Sink::Memory(v) => v,
            _ => &[],
        }
    }

    /// Whether lines of `level` are written (callers check before gathering costly
    /// details for a line).
    #[must_use]
    pub fn enabled(&self, level: Level) -> bool {
        self.max.is_some_and(|max| level <= max)
    }

    /// Writes `message` from `origin` if `level` is enabled.
    pub fn log(&mut self, level: Level, origin: &str, message: &str) {
        if !self.enabled(level) {
            return;
        }
        let stamp = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.3f");
        let line = format!("{stamp}: {origin}: {message}\n");
        // A log that cannot be written must not stop the daemon; the line is lost.
        let _ = match &mut self.sink {
            Sink::Stdout => io::stdout().lock().write_all(line.as_bytes()),
            Sink::Stderr => io::stderr().lock().write_all(line.as_bytes()),
            Sink::File(f) => f.write_all(line.as_bytes()),
            Sink::Memory(v) => {
                v.push(line);
                Ok(())
            }
        };
    }

    /// Writes an engine log event (the engine filtered it by its own `log_level`,
    /// which is the same option, so it is written unless `--log-level` lowered ours).
    pub fn event(&mut self, ev: &LogEvent) {
        self.log(ev.level, ev.origin, &ev.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_reference_format_and_respect_the_level() {
        let mut l = Logger::memory(max_level(1));
        l.log(
            Level::Basic,
            "main",
            "Assistant to the InfiniBand Communication Manager",
        );
        l.log(Level::Verbose, "acm_svr_receive", "not written");
        assert_eq!(l.lines().len(), 1);
        let line = &l.lines()[0];
        // 2026-11-20T10:11:12.345: main: ...
        let (stamp, rest) = line.split_at(23);
        assert_eq!(
            rest,
            ": main: Assistant to the InfiniBand Communication Manager\n"
        );
        let b = stamp.as_bytes();
        assert_eq!(
            (b[4], b[7], b[10], b[13], b[16], b[19]),
            (b'-', b'-', b'T', b':', b':', b'.')
        );
        assert!(stamp.bytes().filter(u8::is_ascii_digit).count() == 17);
    }

    #[test]
    fn log_level_option_maps_to_the_most_verbose_level_written() {
        assert_eq!(max_level(-1), None);
        assert_eq!(max_level(0), Some(Level::Basic));
        assert_eq!(max_level(1), Some(Level::Config));
        assert_eq!(max_level(7), Some(Level::Verbose));
        let mut silent = Logger::memory(max_level(-1));
        silent.log(Level::Basic, "main", "not written");
        assert!(silent.lines().is_empty() && !silent.enabled(Level::Basic));
        let verbose = Logger::memory(max_level(2));
        assert!(verbose.enabled(Level::Verbose));
    }

    #[test]
    fn a_log_file_is_appended_to_not_truncated() {
        let dir = crate::test_dir::TestDir::new("log-append");
        let path = dir.join("ibacm.log");
        std::fs::write(&path, "the previous run\n").unwrap();
        let (mut l, err) = Logger::open(path.to_str().unwrap(), max_level(0));
        assert!(err.is_none());
        l.log(Level::Basic, "main", "this run");
        drop(l);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("the previous run\n"), "{text}");
        assert!(text.ends_with(": main: this run\n"), "{text}");
    }

    #[test]
    fn an_unwritable_file_falls_back_to_stdout() {
        let (l, err) = Logger::open("/nonexistent-dir/ibacm.log", max_level(0));
        assert!(err.is_some());
        assert!(matches!(l.sink, Sink::Stdout));
        let (l, err) = Logger::open("STDERR", max_level(0));
        assert!(err.is_none() && matches!(l.sink, Sink::Stderr));
    }
}
