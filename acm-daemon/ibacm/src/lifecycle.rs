//! The end of the daemon's life: which files it owns and removes, and the signals that
//! stop it (and SIGHUP, which reloads it: [`super::reload`]).
//!
//! The reference has no signal handling and removes nothing, so a stopped daemon leaves
//! its socket, symlinks, port files and lock file behind, and so does a failed start.
//! Ours records each file it creates ([`RunFiles`]) and removes them when it stops,
//! whether it stops on SIGTERM or SIGINT ([`StopSignals`], read in the event loop) or
//! because start-up failed (the guard's `Drop`). A file is removed only while it is still
//! the one we created (same device, inode and change time: an inode number alone may be
//! reused by a file someone made after removing ours), and the sockets systemd passes in are
//! never recorded: they belong to the socket unit, which outlives the service.

use super::lock::{LockError, PidLock};
use super::paths::RunPaths;
use acm_engine::config::ServerMode;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A file the daemon created, by path and identity.
#[derive(Debug)]
struct Owned {
    path: PathBuf,
    id: FileId,
}

/// What tells one file from another that later took its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl FileId {
    fn of(path: &Path) -> Option<Self> {
        std::fs::symlink_metadata(path).ok().map(|m| Self {
            dev: m.dev(),
            ino: m.ino(),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// The files this daemon created in its run directory (and its lock file), removed when
/// it stops or when this is dropped.
#[derive(Debug, Default)]
pub(crate) struct RunFiles {
    owned: Vec<Owned>,
    lock: Option<PidLock>,
}

impl RunFiles {
    /// Takes the lock on `path`; the lock file is then ours to remove.
    ///
    /// # Errors
    /// See [`LockError`]; a held lock's file is left alone.
    pub(crate) fn lock(&mut self, path: &Path) -> Result<(), LockError> {
        self.lock = Some(PidLock::acquire(path)?);
        Ok(())
    }

    /// Records `path`, which this daemon just created, as its own. A path that does not
    /// exist is not recorded.
    pub(crate) fn own(&mut self, path: &Path) {
        if let Some(id) = FileId::of(path) {
            self.owned.push(Owned {
                path: path.to_path_buf(),
                id,
            });
        }
    }

    /// Records the rendezvous files [`super::listen::open`] created for `mode`: the unix
    /// socket and its public symlink, or the TCP port file and its symlink. With a
    /// listener systemd passed (`inherited`), nothing: the socket and the symlink
    /// (`Symlinks=` of `ibacm.socket`) are the socket unit's, and must survive the
    /// service for the next activation.
    pub(crate) fn own_listener_files(
        &mut self,
        mode: ServerMode,
        public: bool,
        inherited: bool,
        paths: &RunPaths,
    ) {
        match mode {
            ServerMode::Unix if inherited => {}
            ServerMode::Unix => {
                self.own(&paths.unix_socket());
                if public {
                    self.own(&paths.public_socket());
                }
            }
            ServerMode::Loop | ServerMode::Open => {
                self.own(&paths.tcp_port_file());
                if public {
                    self.own(&paths.public_port_file());
                }
            }
        }
    }

    /// After the listener failed part-way in unix mode: the socket it bound, if any (the
    /// listener replaces whatever was at that path before binding, so a socket there now
    /// is the one it made).
    pub(crate) fn own_failed_unix_socket(&mut self, paths: &RunPaths) {
        let path = paths.unix_socket();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            self.own(&path);
        }
    }

    /// How many files are recorded (the lock file included).
    #[must_use]
    pub(crate) fn count(&self) -> usize {
        self.owned.len() + usize::from(self.lock.is_some())
    }

    /// Removes every recorded file that is still the one we created, newest first, and
    /// the lock file last (then releases the lock). Returns what could not be removed.
    pub(crate) fn remove_all(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        while let Some(f) = self.owned.pop() {
            // Replaced by someone else, or already gone: not ours to remove.
            if FileId::of(&f.path) == Some(f.id)
                && let Err(e) = std::fs::remove_file(&f.path)
            {
                problems.push(format!("cannot remove {}: {e}", f.path.display()));
            }
        }
        if let Some(lock) = self.lock.take() {
            let path = lock.path().to_path_buf();
            if let Err(e) = lock.remove() {
                problems.push(format!("cannot remove {}: {e}", path.display()));
            }
        }
        problems
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        // A failed start: nobody is left to tell about a file that would not go.
        let _ = self.remove_all();
    }
}

/// SIGTERM and SIGINT, delivered through a signalfd that the event loop polls, with
/// SIGHUP ([`RELOAD_SIGNAL`]), which the loop takes as "read the configuration again"
/// rather than as the end (its default action would kill the daemon).
///
/// The signals are blocked in the calling thread first (and so in every thread it
/// starts later), which is what makes them queue on the descriptor instead of killing
/// the process. A signalfd needs no handler, so this needs no `unsafe`, unlike a
/// self-pipe written from a `sigaction` handler.
#[derive(Debug)]
pub struct StopSignals {
    fd: SignalFd,
}

/// The signals that stop the daemon cleanly.
pub(crate) const STOP_SIGNALS: [Signal; 2] = [Signal::SIGTERM, Signal::SIGINT];

/// The signal that makes the daemon read its configuration files again.
pub(crate) const RELOAD_SIGNAL: Signal = Signal::SIGHUP;

impl StopSignals {
    /// Blocks [`STOP_SIGNALS`] and [`RELOAD_SIGNAL`] and opens the descriptor they are read from. Call it
    /// before starting threads and before creating any file, so that a signal during
    /// start-up waits for the event loop and still ends in a clean exit.
    ///
    /// # Errors
    /// The mask cannot be changed or the signalfd cannot be created.
    pub fn block() -> io::Result<Self> {
        let mut mask = SigSet::empty();
        for s in STOP_SIGNALS {
            mask.add(s);
        }
        mask.add(RELOAD_SIGNAL);
        mask.thread_block().map_err(io::Error::from)?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// Watches the descriptor with `token`.
    ///
    /// # Errors
    /// The poller refuses it.
    pub fn register(&self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut SourceFd(&self.fd.as_raw_fd()),
            token,
            Interest::READABLE,
        )
    }

    /// The next pending signal (a stop signal or [`RELOAD_SIGNAL`]), if any.
    pub fn take(&mut self) -> Option<Signal> {
        loop {
            match self.fd.read_signal() {
                Ok(Some(info)) => {
                    if let Ok(s) = Signal::try_from(info.ssi_signo as i32) {
                        return Some(s);
                    }
                }
                Ok(None) => return None,
                Err(nix::errno::Errno::EINTR) => {}
                // Nothing else can happen to a valid signalfd; treat it as no signal.
                Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_files_are_removed_only_while_they_are_ours() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let d = t.path();
        let paths = RunPaths::new(d);
        let mut files = RunFiles::default();
        files.lock(&d.join("ibacm.pid")).unwrap();
        std::fs::write(paths.tcp_port_file(), "6125\n").unwrap();
        std::os::unix::fs::symlink("ibacm-tcp.port", paths.public_port_file()).unwrap();
        files.own_listener_files(ServerMode::Loop, true, false, &paths);
        files.own(&d.join("never-created"));
        assert_eq!(files.count(), 3);
        // Replaced behind our back (a new file renamed over it): not ours any more.
        std::fs::write(d.join("new"), "7000\n").unwrap();
        std::fs::rename(d.join("new"), paths.tcp_port_file()).unwrap();
        let problems = files.remove_all();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(std::fs::symlink_metadata(paths.public_port_file()).is_err());
        assert!(!d.join("ibacm.pid").exists());
        assert_eq!(
            std::fs::read_to_string(paths.tcp_port_file()).unwrap(),
            "7000\n"
        );
        assert_eq!(files.count(), 0);
    }

    #[test]
    fn dropping_removes_and_inherited_sockets_are_never_owned() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let d = t.path();
        let paths = RunPaths::new(d);
        let listener = std::os::unix::net::UnixListener::bind(paths.unix_socket()).unwrap();
        std::os::unix::fs::symlink("ibacm-unix.sock", paths.public_socket()).unwrap();
        {
            let mut files = RunFiles::default();
            files.own_listener_files(ServerMode::Unix, true, true, &paths);
            assert_eq!(files.count(), 0, "systemd's socket and symlink");
        }
        assert!(paths.unix_socket().exists());
        {
            let mut files = RunFiles::default();
            files.lock(&d.join("ibacm.pid")).unwrap();
            files.own_failed_unix_socket(&paths);
            assert_eq!(files.count(), 2);
        }
        assert!(!paths.unix_socket().exists() && !d.join("ibacm.pid").exists());
        assert!(std::fs::symlink_metadata(paths.public_socket()).is_ok());
        drop(listener);
    }
}
