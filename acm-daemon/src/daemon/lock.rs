//! The pid/lock file: one daemon per lock path.
//!
//! A POSIX record lock (`fcntl(F_SETLK)`, what the reference's `lockf(F_TLOCK)` takes),
//! so our daemon and the reference's exclude each other too. The file holds the pid.
//! Unlike the reference, the file is truncated before the pid is written, so a shorter
//! pid leaves no stale digits behind.

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why the lock was not taken.
#[derive(Debug, Error)]
pub enum LockError {
    /// The file cannot be opened or created.
    #[error("cannot open lock file {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Another process holds the lock.
    #[error("lock file {0} is held by another process")]
    Held(PathBuf),
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
pub struct PidLock {
    _file: File,
    path: PathBuf,
}

impl PidLock {
    /// Takes the lock on `path` and writes our pid into it.
    ///
    /// # Errors
    /// See [`LockError`].
    pub fn acquire(path: &Path) -> Result<Self, LockError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            .open(path)
            .map_err(|source| LockError::Open {
                path: path.to_path_buf(),
                source,
            })?;
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
                    LockError::Held(path.to_path_buf())
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
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_pid_and_creates_with_mode_0640() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("acm-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ibacm.pid");
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
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_directory_is_an_open_error() {
        assert!(matches!(
            PidLock::acquire(Path::new("/nonexistent-dir/ibacm.pid")),
            Err(LockError::Open { .. })
        ));
    }
}
