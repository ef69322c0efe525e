//! What can go wrong talking to an ibacm service, with the status and errno `ib_acme`
//! reports for each: a unix connect failure returns its errno, a TCP one returns -1, a
//! failed host lookup returns the `EAI_*` code, and a daemon status becomes an errno
//! through libacm's table ([`Status::libacm_errno`]). Kept apart from the connection so
//! that the tools' reports can name these errors without pulling in sockets.

use super::errno;
use acm_proto::client::Status;
use std::io;
use thiserror::Error;

/// Why a service could not be reached.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// Connecting to the unix socket failed.
    #[error("{}", errno::strerror(*errno))]
    Unix {
        /// The connect errno (also the status `ib_acme` returns).
        errno: i32,
    },
    /// `getaddrinfo` found no address for the host.
    #[error("{}", errno::strerror(*errno))]
    Lookup {
        /// The `EAI_*` code (negative; the status `ib_acme` returns).
        code: i32,
        /// The errno printed: what the failed port-file open left, as in Debian.
        errno: i32,
    },
    /// Creating or connecting the TCP socket failed.
    #[error("{}", errno::strerror(*errno))]
    Tcp {
        /// The errno.
        errno: i32,
    },
}

impl ConnectError {
    /// The value `ib_acme` keeps as its return status.
    #[must_use]
    pub const fn status(&self) -> i32 {
        match self {
            Self::Unix { errno } => *errno,
            Self::Lookup { code, .. } => *code,
            Self::Tcp { .. } => -1,
        }
    }

    /// The errno whose text is printed.
    #[must_use]
    pub const fn errno(&self) -> i32 {
        match self {
            Self::Unix { errno } | Self::Lookup { errno, .. } | Self::Tcp { errno } => *errno,
        }
    }
}

/// Why a request got no usable answer.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The daemon answered with a non-zero status.
    #[error("the daemon answered with status {0}")]
    Status(u8),
    /// Reading or writing the socket failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The daemon closed the connection instead of answering.
    #[error("the daemon closed the connection without replying")]
    Closed,
    /// The reply does not decode, or is not an answer to the request.
    #[error("malformed reply: {0}")]
    Malformed(String),
    /// A name of 64 bytes or more, refused before sending as libacm does.
    #[error("the name is longer than 63 bytes")]
    NameTooLong,
}

impl ClientError {
    /// The errno `ib_acme` prints for this failure.
    ///
    /// Debian's prints a stale errno for a refused name (so do we, see
    /// [`errno::UNSET`]); for replies it cannot use it prints stale values or crashes, so
    /// there we report a real cause: ECONNRESET for a closed connection, EPROTO for a
    /// malformed reply.
    #[must_use]
    pub fn errno(&self) -> i32 {
        match self {
            Self::Status(s) => Status(*s).libacm_errno(),
            Self::Io(e) => errno::of_io(e),
            Self::Closed => errno::ECONNRESET,
            Self::Malformed(_) => errno::EPROTO,
            Self::NameTooLong => errno::UNSET,
        }
    }
}
