//! Why the daemon could not start, or stopped serving: every failure `ibacm` reports as
//! one `ibacm: <message>` line on stderr before exiting with status 1. The messages are
//! part of the interface (tests and administrators read them), so each variant keeps the
//! wording the daemon has always printed.

use super::backend::hw::HardwareError;
use super::config_file::FileError;
use super::listen::ListenError;
use super::lock::LockError;
use super::options_source::OptionsError;
use super::server::ServerError;
use acm_io_sim::hub::HubError;
use acm_io_sim::spec::SpecError;
use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// A start-up failure (or the end of the event loop).
#[derive(Debug, Error)]
pub(crate) enum StartError {
    /// The working directory, which relative paths are resolved against before
    /// detaching, cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(#[source] io::Error),
    /// The stop signals cannot be blocked for the event loop to take them.
    #[error("cannot watch signals: {0}")]
    Signals(#[source] io::Error),
    /// The options cannot be read, or one of the daemon's own is bad.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The address file `-A` names cannot be read.
    #[error(transparent)]
    AddrFile(#[from] FileError),
    /// The hardware backend cannot run on this build or host.
    #[error(transparent)]
    Hardware(#[from] HardwareError),
    /// `--run-dir` cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    RunDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The lock file cannot be opened or written (one another instance holds is
    /// reported with its own exit status instead).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The client listener (or the sockets systemd passed) cannot be set up.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The poller cannot be created.
    #[error("cannot start the event loop: {0}")]
    EventLoop(#[source] io::Error),
    /// The event loop ended with an error.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The `--fabric sim:FILE` description cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFabric {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The fabric description in a file does not parse or is inconsistent.
    #[error("{}: {source}", path.display())]
    FabricFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: SpecError,
    },
    /// The built-in demo fabric does not parse (a build defect).
    #[error("demo fabric: {0}")]
    DemoFabric(#[source] SpecError),
    /// `--fabric sim:FILE:HOST` names a host the fabric does not have.
    #[error("no host {name} in the fabric (hosts: {})", hosts.join(", "))]
    NoSuchHost {
        /// The host asked for.
        name: String,
        /// The fabric's hosts, in order.
        hosts: Vec<String>,
    },
    /// No host of the fabric runs a daemon, so none can be this one.
    #[error("the fabric has no host that runs a daemon")]
    NoDaemonHost,
    /// The fabric hub cannot be reached or refused this host.
    #[error("cannot attach to the fabric hub {}: {source}", socket.display())]
    Hub {
        /// The hub's socket.
        socket: PathBuf,
        /// Why.
        #[source]
        source: HubError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_their_wording() {
        let e = StartError::NoSuchHost {
            name: "node9".into(),
            hosts: vec!["node1".into(), "node2".into()],
        };
        assert_eq!(
            e.to_string(),
            "no host node9 in the fabric (hosts: node1, node2)"
        );
        assert_eq!(
            StartError::NoDaemonHost.to_string(),
            "the fabric has no host that runs a daemon"
        );
        let e = StartError::ReadFabric {
            path: "/x/f.toml".into(),
            source: io::Error::from_raw_os_error(2),
        };
        assert!(e.to_string().starts_with("cannot read /x/f.toml: "), "{e}");
        assert!(
            StartError::from(HardwareError::NoVerbsBuild)
                .to_string()
                .starts_with("this ibacm was built without InfiniBand support; rebuild it with"),
        );
    }
}
