//! The daemon's log: the reference's line format
//! (`YYYY-MM-DDTHH:MM:SS.mmm: <origin>: <message>`, local time, flushed per line) to
//! `stdout`, `stderr` or a file opened truncated at start, with a fallback to stdout
//! when the file cannot be opened (as the reference).

use acm_engine::log::LogEvent;
use std::fs::File;
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

/// The log: a sink and the level at or below which lines are written.
#[derive(Debug)]
pub struct Logger {
    sink: Sink,
    level: i32,
}

impl Logger {
    /// Opens `target` (`stdout`, `stderr`, case-insensitive, or a path). A path that
    /// cannot be created falls back to stdout; the error is returned beside the logger
    /// so the caller can report it once the log is up.
    #[must_use]
    pub fn open(target: &str, level: i32) -> (Self, Option<io::Error>) {
        let (sink, err) = if target.eq_ignore_ascii_case("stdout") {
            (Sink::Stdout, None)
        } else if target.eq_ignore_ascii_case("stderr") {
            (Sink::Stderr, None)
        } else {
            match File::create(target) {
                Ok(f) => (Sink::File(f), None),
                Err(e) => (Sink::Stdout, Some(e)),
            }
        };
        (Self { sink, level }, err)
    }

    /// A logger that keeps its lines (for tests).
    #[must_use]
    pub fn memory(level: i32) -> Self {
        Self {
            sink: Sink::Memory(Vec::new()),
            level,
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

    /// The level lines must be at or below to be written.
    #[must_use]
    pub fn level(&self) -> i32 {
        self.level
    }

    /// Writes `message` from `origin` if `level` is enabled.
    pub fn log(&mut self, level: i32, origin: &str, message: &str) {
        if level > self.level {
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
        self.log(ev.level as i32, ev.origin, &ev.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_reference_format_and_respect_the_level() {
        let mut l = Logger::memory(1);
        l.log(
            0,
            "main",
            "Assistant to the InfiniBand Communication Manager",
        );
        l.log(2, "acm_svr_receive", "not written");
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
    fn an_unwritable_file_falls_back_to_stdout() {
        let (l, err) = Logger::open("/nonexistent-dir/ibacm.log", 0);
        assert!(err.is_some());
        assert!(matches!(l.sink, Sink::Stdout));
        let (l, err) = Logger::open("STDERR", 0);
        assert!(err.is_none() && matches!(l.sink, Sink::Stderr));
    }
}
