//! What a run of `ib_acme` finds, in the terms every output format reports it: the
//! `-P` mode asked for, the counters' names, and why a resolve, a perf query or a
//! generated file failed. The queries (`resolve`, `perf`, `generate`) produce these and
//! the formats (`format`) render them; keeping them here lets both sides depend on
//! this module instead of on each other.

use acm_client::ClientError;
use acm_client::errno;
use acm_engine::COUNTER_NAMES;
use acm_io_verbs::sysfs::DiscoveryError;
use thiserror::Error;

/// What `-P` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PerfMode {
    /// The counters in one CSV row (global, or of the endpoint index).
    Row,
    /// The same counters one per line (`-P col`).
    Column,
    /// Every endpoint, 1, 2, … until one is missing (`-P all`).
    All,
    /// The endpoint owning the `-s` address (`-P s`).
    BySource,
}

/// Which file is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// The address file (`-A`).
    Address,
    /// The options file (`-O`).
    Options,
}

impl FileKind {
    /// The word `ib_acme`'s messages use ("address" / "option").
    #[must_use]
    pub(crate) const fn word(self) -> &'static str {
        match self {
            Self::Address => "address",
            Self::Options => "option",
        }
    }
}

/// Why a file was not generated.
#[derive(Debug, Error)]
pub(crate) enum GenerateError {
    /// The output directory cannot be used.
    #[error("Failed to open directory {dir}: {}", errno::strerror(*.errno))]
    Directory {
        /// The directory as given.
        dir: String,
        /// Why.
        errno: i32,
    },
    /// The file cannot be created or written.
    #[error("{}", errno::strerror(*.errno))]
    File {
        /// Why.
        errno: i32,
    },
    /// No InfiniBand device was found (Debian's libibverbs message).
    #[error("ibv_get_device_list - no devices present?")]
    NoDevices,
    /// The host name cannot be read.
    #[error("gethostname failed: {}", errno::strerror(*.errno))]
    HostName {
        /// Why.
        errno: i32,
    },
    /// sysfs holds a device that does not read as the kernel writes it (a missing or
    /// malformed attribute); the message names the file. A system call's failure is
    /// [`GenerateError::File`] instead, as Debian reports it.
    #[error("{0}")]
    Sysfs(DiscoveryError),
}

impl GenerateError {
    /// The lines `ib_acme` prints for this failure of a `kind` file.
    #[must_use]
    pub(crate) fn text(&self, kind: FileKind) -> Vec<String> {
        let open_failed = |errno: i32| {
            format!(
                "Failed to open {} configuration file: {}",
                kind.word(),
                errno::strerror(errno)
            )
        };
        match self {
            // Debian reports the directory, then the file it therefore could not open.
            Self::Directory { errno, .. } => vec![self.to_string(), open_failed(*errno)],
            Self::File { errno } => vec![open_failed(*errno)],
            Self::NoDevices | Self::HostName { .. } | Self::Sysfs(_) => vec![self.to_string()],
        }
    }

    /// The errno behind the failure, if any.
    #[must_use]
    pub(crate) const fn errno(&self) -> Option<i32> {
        match self {
            Self::Directory { errno, .. } | Self::File { errno } | Self::HostName { errno } => {
                Some(*errno)
            }
            Self::NoDevices | Self::Sysfs(_) => None,
        }
    }
}

/// Keys for JSON output, in the order of `acm_engine::COUNTER_NAMES`.
pub(crate) const COUNTER_KEYS: [&str; 7] = [
    "error_count",
    "resolve_count",
    "no_data",
    "addr_query_count",
    "addr_cache_count",
    "route_query_count",
    "route_cache_count",
];

/// The display name of counter `i`; counters past the known seven (which Debian's
/// `ib_acme` crashes on) are "Unknown".
#[must_use]
pub(crate) fn counter_name(i: usize) -> &'static str {
    COUNTER_NAMES.get(i).copied().unwrap_or("Unknown")
}

/// Why a perf query failed; `text` gives the lines `ib_acme` prints for it.
#[derive(Debug, Error)]
pub(crate) enum PerfFailure {
    /// `-P s` with a source of a format that has no wire type (LID, GID).
    #[error("Unsupported src_type {0}")]
    UnsupportedSrcType(u8),
    /// `-P s -f i` with a source that is not an IP address.
    #[error("inet_pton error on src address ({0}): 0x0")]
    BadSrcAddress(String),
    /// The by-address query itself failed (reported twice by `ib_acme`).
    #[error("ib_acm_query_perf failed: {}", errno::strerror(.0.errno()))]
    ByAddress(ClientError),
    /// A global or by-index query failed.
    #[error("{}", errno::strerror(.0.errno()))]
    Query(ClientError),
}

impl PerfFailure {
    /// The errno `ib_acme` prints after "Failed to query perf data:".
    #[must_use]
    pub(crate) fn errno(&self) -> i32 {
        match self {
            Self::ByAddress(e) | Self::Query(e) => e.errno(),
            Self::UnsupportedSrcType(_) | Self::BadSrcAddress(_) => errno::UNSET,
        }
    }

    /// The lines `ib_acme` prints for this failure on service `svc`.
    #[must_use]
    pub(crate) fn text(&self, svc: &str) -> Vec<String> {
        let last = format!(
            "{svc}: Failed to query perf data: {}",
            errno::strerror(self.errno())
        );
        match self {
            Self::Query(_) => vec![last],
            _ => vec![self.to_string(), last],
        }
    }
}

/// Why one resolve attempt failed; `Display` is the line `ib_acme` prints.
#[derive(Debug, Error)]
pub(crate) enum ResolveFailure {
    /// An address that does not parse for its format (`role` is Debian's word for it:
    /// "source", "destination", or "dest" for GIDs).
    #[error("inet_pton error on {role} address ({text}): 0x0")]
    BadAddress {
        /// Which address.
        role: &'static str,
        /// The text as given.
        text: String,
    },
    /// `-f i` with an IPv4 source and an IPv6 destination or the reverse.
    #[error("source and destination address families don't match")]
    FamilyMismatch,
    /// The request failed in the library or in the daemon.
    #[error("{call} failed: {}", errno::strerror(.error.errno()))]
    Request {
        /// The libacm call `ib_acme` names (`ib_acm_resolve_ip`, `_name` or `_path`).
        call: &'static str,
        /// What went wrong.
        error: ClientError,
    },
}

impl ResolveFailure {
    /// The errno behind the failure, when there is one.
    #[must_use]
    pub(crate) fn errno(&self) -> Option<i32> {
        match self {
            Self::Request { error, .. } => Some(error.errno()),
            _ => None,
        }
    }
}
