//! The daemon's log: the reference's line format
//! (`YYYY-MM-DDTHH:MM:SS.mmm: <origin>: <message>`, local time, flushed per line) to
//! `stdout`, `stderr` or a file, with a fallback to stdout when the file cannot be opened
//! (as the reference). Unlike the reference, which truncates the file at every start, it
//! is opened for appending: a restart must not erase the log of the run before it,
//! which is often the one an administrator wants to read.
//!
//! A log file the daemon creates gets mode 0640 ([`LOG_FILE_MODE`], less what the
//! umask takes away), where the reference's gets 0644: at level 2 it records every
//! client's uid and the addresses each resolved, which other users need not read. A
//! file that exists keeps its mode (and owner): an administrator who widened it for a
//! log reader meant to.
//!
//! The file is opened without following a link at its name and without blocking (a
//! FIFO planted there with no reader makes the open fail rather than hang the start).
//! [`Logger::reopen`] opens the same path again, for SIGHUP: after logrotate (or an
//! administrator) moved or deleted the file, new lines go to a new file at the
//! configured path instead of the old inode. A line the sink does not take (a full
//! disk, an I/O error) is lost but counted ([`Logger::dropped_total`], exported as a
//! metric), and the next line that can be written is preceded by one saying how many
//! were lost and why.
//!
//! Lines carry the engine's [`Level`], so the daemon's own lines and the engine's are
//! filtered by one rule ([`max_level`]).
//!
//! Under systemd, a line written to stdout or stderr may start with a syslog priority,
//! `<N>` as sd-daemon(3) describes, which the journal strips and keeps as the line's
//! level ([`Logger::use_journal_prefixes`]). The engine's levels carry no severity (the
//! reference logs errors at level 0 with its configuration), so they map to notice,
//! info and debug ([`Priority::of`]); the daemon's own warnings and errors say so
//! ([`Logger::log_with`]).

use acm_engine::log::{Level, LogEvent};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The mode of a log file the daemon creates: the owner writes, its group reads.
pub(crate) const LOG_FILE_MODE: u32 = 0o640;

/// The origin of the logger's own lines (lines lost).
const LOG_ORIGIN: &str = "acm_log";

/// Opens `path` for appending, created with mode 0640 (`LOG_FILE_MODE`) if missing; never through
/// a link at the name, never blocking.
fn open_file(path: impl AsRef<std::path::Path>) -> io::Result<File> {
    use nix::fcntl::OFlag;
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(LOG_FILE_MODE)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Where lines go.
#[derive(Debug)]
enum Sink {
    Stdout,
    Stderr,
    File {
        /// Where it is appended to.
        file: File,
        /// The configured path, opened again by [`Logger::reopen`].
        path: PathBuf,
    },
    /// Collected in memory (tests).
    Memory(Vec<String>),
}

/// The log: a sink and the most verbose level written (`None`: nothing is).
#[derive(Debug)]
pub struct Logger {
    sink: Sink,
    max: Option<Level>,
    /// Start each line with its syslog priority (for the journal).
    prefixes: bool,
    /// Lines lost since the last line written, and the error of the last loss.
    lost: Option<(u64, io::Error)>,
    /// Lines lost since the logger was opened.
    dropped_total: u64,
}

/// A syslog priority, as the journal reads it from a `<N>` line prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// `<3>`: the daemon cannot do something it should.
    Err = 3,
    /// `<4>`: something an administrator should look at (a refused client).
    Warning = 4,
    /// `<5>`: level 0 lines: configuration, start-up, and the engine's errors.
    Notice = 5,
    /// `<6>`: level 1 lines, the verbose configuration.
    Info = 6,
    /// `<7>`: level 2 lines, one or more per request.
    Debug = 7,
}

impl Priority {
    /// The priority of a line of `level` that says nothing more about itself.
    #[must_use]
    pub const fn of(level: Level) -> Self {
        match level {
            Level::Basic => Self::Notice,
            Level::Config => Self::Info,
            Level::Verbose => Self::Debug,
        }
    }
}

/// Whether `fd` is the journal's stream: systemd sets `JOURNAL_STREAM` to the device
/// and inode numbers of the stream it connects stdout and stderr to (systemd.exec(5)),
/// so a match means the journal reads what is written there.
fn is_journal_stream(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let Ok(v) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
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
    /// Opens `target` (`stdout`, `stderr`, case-insensitive, or a path, created with
    /// mode 0640 (`LOG_FILE_MODE`) if missing and appended to). A path that cannot be opened
    /// falls back to stdout; the error is returned beside the logger so the caller can
    /// report it once the log is up.
    #[must_use]
    pub fn open(target: &str, max: Option<Level>) -> (Self, Option<io::Error>) {
        let (sink, err) = if target.eq_ignore_ascii_case("stdout") {
            (Sink::Stdout, None)
        } else if target.eq_ignore_ascii_case("stderr") {
            (Sink::Stderr, None)
        } else {
            match open_file(target) {
                Ok(file) => (
                    Sink::File {
                        file,
                        path: PathBuf::from(target),
                    },
                    None,
                ),
                Err(e) => (Sink::Stdout, Some(e)),
            }
        };
        (
            Self {
                sink,
                max,
                prefixes: false,
                lost: None,
                dropped_total: 0,
            },
            err,
        )
    }

    /// Opens the log file's path again (SIGHUP), so that a file moved away by log
    /// rotation, or deleted, is followed by a new one there. `None` when the log is not
    /// a file; an error when the path cannot be opened, in which case lines keep going
    /// to the file open until now.
    pub fn reopen(&mut self) -> Option<io::Result<()>> {
        let Sink::File { file, path } = &mut self.sink else {
            return None;
        };
        Some(open_file(path).map(|new| *file = new))
    }

    /// The log file's path, when the log is a file.
    #[must_use]
    pub fn file_path(&self) -> Option<&std::path::Path> {
        match &self.sink {
            Sink::File { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Lines lost since the logger was opened, because the sink did not take them.
    #[must_use]
    pub const fn dropped_total(&self) -> u64 {
        self.dropped_total
    }

    /// Whether lines go to standard error (where a failure's message is printed
    /// anyway).
    #[must_use]
    pub const fn is_stderr(&self) -> bool {
        matches!(self.sink, Sink::Stderr)
    }

    /// A logger that keeps its lines (for tests).
    #[must_use]
    pub fn memory(max: Option<Level>) -> Self {
        Self {
            sink: Sink::Memory(Vec::new()),
            max,
            prefixes: false,
            lost: None,
            dropped_total: 0,
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

    /// Filters from now on with `max` (a reload changed `log_level`).
    pub fn set_max_level(&mut self, max: Option<Level>) {
        self.max = max;
    }

    /// Whether lines of `level` are written (callers check before gathering costly
    /// details for a line).
    #[must_use]
    pub fn enabled(&self, level: Level) -> bool {
        self.max.is_some_and(|max| level <= max)
    }

    /// Starts each line with its syslog priority when the journal reads it: the log
    /// goes to stdout or stderr and the daemon runs with `--systemd` (`systemd`), or
    /// that stream is the one `JOURNAL_STREAM` names. A log file never gets them.
    pub fn use_journal_prefixes(&mut self, systemd: bool) {
        use std::os::fd::AsFd;
        self.prefixes = match self.sink {
            Sink::Stdout => systemd || is_journal_stream(io::stdout().as_fd()),
            Sink::Stderr => systemd || is_journal_stream(io::stderr().as_fd()),
            Sink::File { .. } | Sink::Memory(_) => false,
        };
    }

    /// Turns the priority prefixes on or off whatever the sink (for tests).
    pub fn set_prefixes(&mut self, on: bool) {
        self.prefixes = on;
    }

    /// Writes `message` from `origin` if `level` is enabled.
    pub fn log(&mut self, level: Level, origin: &str, message: &str) {
        self.log_with(level, Priority::of(level), origin, message);
    }

    /// Writes `message` from `origin` if `level` is enabled, with the journal
    /// priority `priority` (a warning or an error of the daemon's own).
    pub fn log_with(&mut self, level: Level, priority: Priority, origin: &str, message: &str) {
        if !self.enabled(level) {
            return;
        }
        let stamp = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.3f");
        if let Some((n, e)) = &self.lost {
            let notice = self.format(
                &stamp,
                Priority::Warning,
                LOG_ORIGIN,
                &format!("{n} log lines lost: {e}"),
            );
            if self.write(&notice).is_ok() {
                self.lost = None;
            }
        }
        let line = self.format(&stamp, priority, origin, message);
        // A log that cannot be written must not stop the daemon; the line is lost,
        // and counted.
        if let Err(e) = self.write(&line) {
            self.dropped_total += 1;
            let n = self.lost.as_ref().map_or(0, |(n, _)| *n);
            self.lost = Some((n + 1, e));
        }
    }

    /// `message` as a line, with its priority prefix when the journal reads it.
    fn format(
        &self,
        stamp: &impl std::fmt::Display,
        priority: Priority,
        origin: &str,
        message: &str,
    ) -> String {
        if self.prefixes {
            format!("<{}>{stamp}: {origin}: {message}\n", priority as u8)
        } else {
            format!("{stamp}: {origin}: {message}\n")
        }
    }

    /// Writes one whole line to the sink.
    fn write(&mut self, line: &str) -> io::Result<()> {
        match &mut self.sink {
            Sink::Stdout => io::stdout().lock().write_all(line.as_bytes()),
            Sink::Stderr => io::stderr().lock().write_all(line.as_bytes()),
            Sink::File { file, .. } => file.write_all(line.as_bytes()),
            Sink::Memory(v) => {
                v.push(line.to_owned());
                Ok(())
            }
        }
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
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.log");
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
    fn a_new_log_file_is_0640_and_an_old_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let new = dir.path().join("new.log");
        let (mut l, err) = Logger::open(new.to_str().unwrap(), max_level(0));
        assert!(err.is_none());
        l.log(Level::Basic, "main", "x");
        // The umask may take more away, never add: nothing for others, nothing
        // writable by the group.
        let m = mode(&new);
        assert_eq!(m & !LOG_FILE_MODE, 0, "{m:o}");
        assert_eq!(m & 0o600, 0o600, "{m:o}");
        let old = dir.path().join("old.log");
        std::fs::write(&old, "").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let _ = Logger::open(old.to_str().unwrap(), max_level(0));
        assert_eq!(mode(&old), 0o644, "an existing file keeps its mode");
    }

    #[test]
    fn journal_prefixes_carry_the_priority() {
        let mut l = Logger::memory(max_level(2));
        l.set_prefixes(true);
        l.log(Level::Basic, "main", "up");
        l.log(Level::Config, "acm_log_options", "x");
        l.log(Level::Verbose, "acm_svr_receive", "y");
        l.log_with(Level::Basic, Priority::Warning, "acm_svr_accept", "refused");
        l.log_with(Level::Basic, Priority::Err, "acm_server", "accept failed");
        let prefixes: Vec<&str> = l.lines().iter().map(|x| &x[..3]).collect();
        assert_eq!(prefixes, ["<5>", "<6>", "<7>", "<4>", "<3>"]);
        // After the prefix, the reference's format.
        assert!(l.lines()[0][3..].ends_with(": main: up\n"));
        assert_eq!(l.lines()[0].len(), 3 + 23 + ": main: up\n".len());
        // A file never gets them, nor, without --systemd, a stream that is not the
        // journal's (this test's stdout is not).
        let mut m = Logger::memory(max_level(0));
        m.use_journal_prefixes(true);
        m.log(Level::Basic, "main", "up");
        assert!(!m.lines()[0].starts_with('<'));
        let (mut out, _) = Logger::open("stdout", max_level(0));
        out.use_journal_prefixes(true);
        assert!(out.prefixes);
        if std::env::var_os("JOURNAL_STREAM").is_none() {
            out.use_journal_prefixes(false);
            assert!(!out.prefixes);
        }
    }

    #[test]
    fn reopen_follows_a_rotated_file_with_a_new_one() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.log");
        let (mut l, err) = Logger::open(path.to_str().unwrap(), max_level(0));
        assert!(err.is_none());
        assert_eq!(l.file_path(), Some(path.as_path()));
        l.log(Level::Basic, "main", "before");
        std::fs::rename(&path, dir.path().join("ibacm.log.1")).unwrap();
        l.log(Level::Basic, "main", "still the old inode");
        assert!(matches!(l.reopen(), Some(Ok(()))));
        l.log(Level::Basic, "main", "after");
        let old = std::fs::read_to_string(dir.path().join("ibacm.log.1")).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert!(old.contains(": main: before\n") && old.contains("still the old inode"));
        assert!(!old.contains("after"), "{old}");
        assert_eq!(new.lines().count(), 1, "{new}");
        assert!(new.ends_with(": main: after\n"), "{new}");

        // A path that cannot be opened any more keeps the file open until now.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(l.reopen(), Some(Err(_))));
        l.log(Level::Basic, "main", "kept");
        assert_eq!(
            l.dropped_total(),
            0,
            "the file open until now (unlinked) took it"
        );
        // Not a file: nothing to reopen.
        assert!(Logger::memory(max_level(0)).reopen().is_none());
    }

    #[test]
    fn lines_lost_are_counted_and_reported_when_writing_works_again() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.log");
        let (mut l, _) = Logger::open(path.to_str().unwrap(), max_level(0));
        // A full disk: /dev/full fails every write with ENOSPC.
        let full = OpenOptions::new().append(true).open("/dev/full").unwrap();
        l.sink = Sink::File {
            file: full,
            path: path.clone(),
        };
        l.log(Level::Basic, "main", "lost 1");
        l.log(Level::Basic, "main", "lost 2");
        assert_eq!(l.dropped_total(), 2);
        assert!(matches!(l.reopen(), Some(Ok(()))));
        l.log(Level::Basic, "main", "written");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0]
                .ends_with(": acm_log: 2 log lines lost: No space left on device (os error 28)"),
            "{text}"
        );
        assert!(lines[1].ends_with(": main: written"), "{text}");
        assert_eq!(l.dropped_total(), 2, "the total stays");
        l.log(Level::Basic, "main", "again");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    }

    #[test]
    fn a_link_or_a_fifo_at_the_log_path_is_not_opened() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "x\n").unwrap();
        let link = dir.path().join("ibacm.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let (l, err) = Logger::open(link.to_str().unwrap(), max_level(0));
        assert!(err.is_some() && matches!(l.sink, Sink::Stdout));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "x\n");
        let fifo = dir.path().join("fifo.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (l, err) = Logger::open(fifo.to_str().unwrap(), max_level(0));
        assert!(
            err.is_some() && matches!(l.sink, Sink::Stdout),
            "no reader: ENXIO"
        );
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
