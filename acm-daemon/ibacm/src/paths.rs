//! The rendezvous files, all in one run directory (`/run` unless `--run-dir`): the unix
//! socket and its public symlink, the TCP port file and its symlink, the lock file.

use std::path::{Path, PathBuf};

/// The reference's run directory.
pub const DEFAULT_RUN_DIR: &str = "/run";
/// The lock file the `lock_file` option defaults to.
pub(crate) const DEFAULT_LOCK_FILE: &str = "/run/ibacm.pid";

/// Every file name the daemon creates in its run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPaths {
    /// The directory.
    pub dir: PathBuf,
}

impl RunPaths {
    /// The files of run directory `dir`.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The listening unix socket (`ib_acme`'s default service).
    #[must_use]
    pub fn unix_socket(&self) -> PathBuf {
        self.dir.join("ibacm-unix.sock")
    }

    /// The public name librdmacm connects to: a relative symlink to the socket.
    #[must_use]
    pub fn public_socket(&self) -> PathBuf {
        self.dir.join("ibacm.sock")
    }

    /// The TCP port for `ib_acme` in loop and open modes.
    #[must_use]
    pub fn tcp_port_file(&self) -> PathBuf {
        self.dir.join("ibacm-tcp.port")
    }

    /// The port file librdmacm reads: a relative symlink to the TCP port file.
    #[must_use]
    pub fn public_port_file(&self) -> PathBuf {
        self.dir.join("ibacm.port")
    }

    /// The lock file when the options leave `lock_file` at its default: in the run
    /// directory, so `--run-dir` instances do not collide.
    #[must_use]
    pub fn lock_file(&self, option: &str) -> PathBuf {
        if option == DEFAULT_LOCK_FILE {
            self.dir.join("ibacm.pid")
        } else {
            Path::new(option).to_path_buf()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_names() {
        let p = RunPaths::new(DEFAULT_RUN_DIR);
        assert_eq!(p.unix_socket(), Path::new("/run/ibacm-unix.sock"));
        assert_eq!(p.public_socket(), Path::new("/run/ibacm.sock"));
        assert_eq!(p.tcp_port_file(), Path::new("/run/ibacm-tcp.port"));
        assert_eq!(p.public_port_file(), Path::new("/run/ibacm.port"));
        assert_eq!(p.lock_file(DEFAULT_LOCK_FILE), Path::new(DEFAULT_LOCK_FILE));
        let r = RunPaths::new("/tmp/r");
        assert_eq!(
            r.lock_file(DEFAULT_LOCK_FILE),
            Path::new("/tmp/r/ibacm.pid")
        );
        assert_eq!(r.lock_file("/var/lock/x"), Path::new("/var/lock/x"));
    }
}
