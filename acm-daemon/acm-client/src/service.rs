//! How `-S` names a service (docs/protocol/client-messages.md §1): a path starting with
//! `/` is the daemon's unix socket; anything else is a host reached over TCP at the port
//! the daemon wrote into its port file, read the way libacm reads it.

use super::cnum;
use super::errno;
use dns_lookup::{AddrInfoHints, SockType};
use std::net::IpAddr;
use std::path::Path;

/// `-S` when none is given: the daemon's unix socket on Debian.
pub const DEFAULT_SERVICE: &str = "/run/ibacm-unix.sock";
/// Where a daemon in a TCP mode writes its port, read for any `-S` not starting with `/`.
pub const PORT_FILE: &str = "/run/ibacm-tcp.port";
/// The port used when the port file is missing or unreadable.
pub const DEFAULT_PORT: u16 = 6125;

/// The ways `-S` can name a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceAddr<'a> {
    /// A path starting with `/`: a unix stream socket.
    Unix(&'a Path),
    /// Anything else: a host name or address for TCP.
    Tcp(&'a str),
}

impl<'a> ServiceAddr<'a> {
    /// Classifies a `-S` item.
    #[must_use]
    pub fn of(svc: &'a str) -> Self {
        if svc.starts_with('/') {
            Self::Unix(Path::new(svc))
        } else {
            Self::Tcp(svc)
        }
    }
}

/// What the port file says. A file that cannot be opened silently means
/// [`DEFAULT_PORT`]; one that holds no number means the default too, with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortFile {
    /// The port to use.
    pub port: u16,
    /// The file exists but holds no number: `ib_acme` says "Failed to read server port".
    pub unreadable: bool,
    /// The errno of a failed open, which the lookup error message reuses.
    pub open_errno: Option<i32>,
}

/// Reads a port file the way libacm does (`scanf("%hu")` of its contents).
#[must_use]
pub fn read_port_file(path: &Path) -> PortFile {
    match std::fs::read(path) {
        Ok(bytes) => match cnum::scan_hu(&String::from_utf8_lossy(&bytes)) {
            Some(port) => PortFile {
                port,
                unreadable: false,
                open_errno: None,
            },
            None => PortFile {
                port: DEFAULT_PORT,
                unreadable: true,
                open_errno: None,
            },
        },
        Err(e) => PortFile {
            port: DEFAULT_PORT,
            unreadable: false,
            open_errno: Some(errno::of_io(&e)),
        },
    }
}

/// The first address `getaddrinfo(host, AF_UNSPEC, SOCK_STREAM)` returns (libacm tries no
/// other), or the `EAI_*` code.
pub(super) fn lookup_first(host: &str) -> Result<IpAddr, i32> {
    /// glibc's EAI_NONAME, for a host name that cannot even be passed to C (a NUL in it).
    const EAI_NONAME: i32 = -2;
    let hints = AddrInfoHints {
        socktype: SockType::Stream.into(),
        ..AddrInfoHints::default()
    };
    let mut answers =
        dns_lookup::getaddrinfo(Some(host), None, Some(hints)).map_err(|e| {
            match e.error_num() {
                0 => EAI_NONAME,
                n => n,
            }
        })?;
    match answers.next() {
        Some(Ok(info)) => Ok(info.sockaddr.ip()),
        _ => Err(EAI_NONAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_file_rules() {
        let d = tempfile::tempdir().expect("a temporary directory");
        let f = d.path().join("port");
        std::fs::write(&f, "16125\n").unwrap();
        assert_eq!(
            read_port_file(&f),
            PortFile {
                port: 16125,
                unreadable: false,
                open_errno: None
            }
        );
        std::fs::write(&f, "junk").unwrap();
        assert_eq!(
            read_port_file(&f),
            PortFile {
                port: 6125,
                unreadable: true,
                open_errno: None
            }
        );
        let missing = read_port_file(&d.path().join("none"));
        assert_eq!(
            (missing.port, missing.unreadable, missing.open_errno),
            (6125, false, Some(errno::ENOENT))
        );
        assert_eq!(
            ServiceAddr::of("/run/x"),
            ServiceAddr::Unix(Path::new("/run/x"))
        );
        assert_eq!(ServiceAddr::of("localhost"), ServiceAddr::Tcp("localhost"));
    }
}
