//! The pid/lock file: one daemon per lock path.
//!
//! A POSIX record lock (`fcntl(F_SETLK)`, what the reference's `lockf(F_TLOCK)` takes),
//! so our daemon and the reference's exclude each other too. The file holds the pid.
//! Unlike the reference, the file is truncated before the pid is written, so a shorter
//! pid leaves no stale digits behind; a refused instance is told which process holds the
//! lock; and a daemon that stops removes the file ([`PidLock::remove`]).

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why the lock was not taken.
#[derive(Debug, Error)]
pub(crate) enum LockError {
    /// The file cannot be opened or created.
    #[error("cannot open lock file {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Another process holds the lock.
    #[error("lock file {} is held by {}", path.display(), holder_text(*holder))]
    Held {
        /// The file.
        path: PathBuf,
        /// The holder's pid, as the kernel reports the lock's owner (or, failing that,
        /// as the file says).
        holder: Option<u32>,
    },
    /// The pid cannot be written.
    #[error("cannot write lock file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The held lock; released when the process exits (or this is dropped).
#[derive(Debug)]
pub(crate) struct PidLock {
    file: File,
    path: PathBuf,
}

impl PidLock {
    /// Takes the lock on `path` and writes our pid into it.
    ///
    /// # Errors
    /// See [`LockError`].
    pub(crate) fn acquire(path: &Path) -> Result<Self, LockError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            // The run directory may be one a user can write (`--run-dir`): a link
            // planted at the name must not make the daemon truncate its target.
            .custom_flags(
                nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits(),
            )
            .open(path)
            .map_err(|source| LockError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(LockError::Open {
                path: path.to_path_buf(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        let lock = libc::flock {
            l_type: libc::F_WRLCK as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: 0,
            l_len: 0,
            l_pid: 0,
        };
        if let Err(e) = fcntl(&file, FcntlArg::F_SETLK(&lock)) {
            return Err(
                if matches!(e, nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) {
                    LockError::Held {
                        path: path.to_path_buf(),
                        holder: holder(&file),
                    }
                } else {
                    LockError::Open {
                        path: path.to_path_buf(),
                        source: e.into(),
                    }
                },
            );
        }
        let write = |file: &mut File| -> io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())?;
            file.flush()
        };
        write(&mut file).map_err(|source| LockError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    #[must_use]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the lock file, then releases the lock (by closing it), for a daemon that
    /// stops. The path is unlinked only while it still names the file we locked: a file
    /// that someone replaced belongs to them.
    ///
    /// # Errors
    /// The file cannot be inspected or removed (the lock is released all the same).
    pub(crate) fn remove(self) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let ours = self.file.metadata()?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => {
                std::fs::remove_file(&self.path)
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Who holds the lock on `file`: the owner `F_GETLK` reports, else the pid the file
/// holds (a holder on another host of a network file system has no local pid).
fn holder(file: &File) -> Option<u32> {
    let mut probe = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    if fcntl(file, FcntlArg::F_GETLK(&mut probe)).is_ok()
        && probe.l_type != libc::F_UNLCK as libc::c_short
        && probe.l_pid > 0
    {
        return u32::try_from(probe.l_pid).ok();
    }
    let mut text = String::new();
    let mut f = file;
    f.seek(SeekFrom::Start(0)).ok()?;
    io::Read::read_to_string(&mut f, &mut text).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn holder_text(holder: Option<u32>) -> String {
    holder.map_or_else(
        || "another process".to_owned(),
        |pid| format!("process {pid}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_pid_and_creates_with_mode_0640() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.pid");
        std::fs::write(&path, "123456789\n").unwrap();
        let lock = PidLock::acquire(&path).expect("free");
        assert_eq!(
            std::fs::read_to_string(lock.path()).unwrap(),
            format!("{}\n", std::process::id()),
            "no stale digits"
        );
        drop(lock);
        let _ = std::fs::remove_file(&path);
        let lock = PidLock::acquire(&path).expect("free");
        let mode = std::fs::metadata(lock.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777 & !0o022, 0o640 & !0o022);
        drop(lock);
    }

    #[test]
    fn a_second_lock_names_the_holder_and_remove_deletes_only_our_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.pid");
        let lock = PidLock::acquire(&path).expect("free");
        // A process never conflicts with its own record lock, so F_GETLK finds no
        // holder here and the pid comes from the file (the refused second daemon, a
        // separate process, gets it from F_GETLK: tests/daemon_lifecycle.rs).
        let file = File::open(&path).unwrap();
        assert_eq!(
            holder(&file),
            Some(std::process::id()),
            "the file's pid, since F_GETLK does not report our own lock"
        );
        let err = LockError::Held {
            path: path.clone(),
            holder: Some(42),
        };
        assert!(
            err.to_string().ends_with("ibacm.pid is held by process 42"),
            "{err}"
        );
        lock.remove().unwrap();
        assert!(!path.exists(), "removed");
        // A lock file replaced by someone else stays.
        let lock = PidLock::acquire(&path).expect("free");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "other\n").unwrap();
        lock.remove().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "other\n");
    }

    #[test]
    fn a_missing_directory_is_an_open_error() {
        assert!(matches!(
            PidLock::acquire(Path::new("/nonexistent-dir/ibacm.pid")),
            Err(LockError::Open { .. })
        ));
    }
}
