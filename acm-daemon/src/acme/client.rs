//! The connection to an ibacm service: how `-S` names it (spec §1.1), how a request goes
//! out (one write of the whole message, as the daemon reads each request with a single
//! `recv`) and how a reply comes back (the 16-byte header, then the rest of the length it
//! declares).
//!
//! Error values carry what `ib_acme` prints and returns: a unix connect failure returns
//! its errno, a TCP one returns -1, a failed host lookup returns the `EAI_*` code, and a
//! daemon status becomes an errno through libacm's table ([`Status::libacm_errno`]).

use super::addr;
use super::cnum;
use super::errno;
use acm_proto::client::{
    AddrType, ClientMessage, Direction, EpAddress, EpConfigRepr, EpFlags, EpQueryReplyRepr,
    EpQueryRepr, HEADER_LEN, HeaderRepr, PerfQueryRepr, PerfReplyRepr, ResolveRepr, Status,
};
use acm_proto::path_record::PathRecordRepr;
use acm_proto::{Bytes64, client::EpAddrRepr};
use dns_lookup::{AddrInfoHints, SockType};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use thiserror::Error;

/// `-S` when none is given: the daemon's unix socket on Debian.
pub const DEFAULT_SERVICE: &str = "/run/ibacm-unix.sock";
/// Where a daemon in a TCP mode writes its port, read for any `-S` not starting with `/`.
pub const PORT_FILE: &str = "/run/ibacm-tcp.port";
/// The port used when the port file is missing or unreadable.
pub const DEFAULT_PORT: u16 = 6125;

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

/// A successful RESOLVE answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveReply {
    /// The path records, in reply order (ibacm sends one).
    pub paths: Vec<PathRecordRepr>,
    /// The source address the daemon chose, as text, when the reply carries one.
    pub source: Option<String>,
}

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

#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// An open connection to one service; shut down in both directions when dropped, as
/// libacm does on disconnect.
#[derive(Debug)]
pub struct Connection {
    stream: Stream,
}

/// Opens a connection to `svc`. `port_file` is where a TCP service's port is read;
/// `notice` receives the "Failed to read server port" message when that file is junk.
///
/// # Errors
/// [`ConnectError`] with the status and errno `ib_acme` reports.
pub fn connect(
    svc: &str,
    port_file: &Path,
    notice: &mut dyn FnMut(&str),
) -> Result<Connection, ConnectError> {
    match ServiceAddr::of(svc) {
        ServiceAddr::Unix(path) => UnixStream::connect(path)
            .map(|s| Connection {
                stream: Stream::Unix(s),
            })
            .map_err(|e| {
                // std refuses paths longer than sun_path before calling connect.
                let errno = match e.raw_os_error() {
                    Some(n) => n,
                    None if e.kind() == io::ErrorKind::InvalidInput => errno::ENAMETOOLONG,
                    None => errno::of_io(&e),
                };
                ConnectError::Unix { errno }
            }),
        ServiceAddr::Tcp(host) => {
            let pf = read_port_file(port_file);
            if pf.unreadable {
                notice("Failed to read server port");
            }
            let ip = lookup_first(host).map_err(|code| ConnectError::Lookup {
                code,
                errno: pf.open_errno.unwrap_or(errno::UNSET),
            })?;
            TcpStream::connect(SocketAddr::new(ip, pf.port))
                .map(|s| Connection {
                    stream: Stream::Tcp(s),
                })
                .map_err(|e| ConnectError::Tcp {
                    errno: errno::of_io(&e),
                })
        }
    }
}

/// The first address `getaddrinfo(host, AF_UNSPEC, SOCK_STREAM)` returns (libacm tries no
/// other), or the `EAI_*` code.
fn lookup_first(host: &str) -> Result<IpAddr, i32> {
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

impl Connection {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.stream {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        match &mut self.stream {
            Stream::Unix(s) => s.read_exact(buf),
            Stream::Tcp(s) => s.read_exact(buf),
        }
    }

    /// Sends one whole message and reads one whole reply (header first, then the body
    /// its length field announces).
    ///
    /// # Errors
    /// I/O errors, [`ClientError::Closed`] when the daemon hangs up before a full header,
    /// [`ClientError::Malformed`] for a bad header.
    pub fn exchange(&mut self, request: &[u8]) -> Result<(HeaderRepr, Vec<u8>), ClientError> {
        self.write_all(request)?;
        let mut reply = vec![0u8; HEADER_LEN];
        self.read_exact(&mut reply).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ClientError::Closed,
            _ => ClientError::Io(e),
        })?;
        let header = HeaderRepr::parse(&reply, Direction::Response)
            .map_err(|e| ClientError::Malformed(e.to_string()))?;
        if header.version != acm_proto::client::ACM_VERSION {
            return Err(ClientError::Malformed(format!(
                "version {} instead of 1",
                header.version
            )));
        }
        let len = usize::from(header.length);
        if len < HEADER_LEN {
            return Err(ClientError::Malformed(format!(
                "length {len} is shorter than the header"
            )));
        }
        reply.resize(len, 0);
        self.read_exact(&mut reply[HEADER_LEN..])?;
        Ok((header, reply))
    }

    /// Sends a request message and returns the reply checked to answer the same
    /// operation.
    fn call(&mut self, request: &ClientMessage) -> Result<(HeaderRepr, Vec<u8>), ClientError> {
        let op = request.header().opcode.operation();
        let (header, reply) = self.exchange(&request.to_vec(Direction::Request))?;
        if header.opcode.operation() != op {
            return Err(ClientError::Malformed(format!(
                "opcode {:#04x} does not answer operation {:#04x}",
                header.opcode.0, op.0
            )));
        }
        Ok((header, reply))
    }

    /// RESOLVE: the reply's path records and the source the daemon chose.
    ///
    /// Like libacm, every reply entry must be a path record or a source-flagged name or
    /// IP address; we also insist on at least one path record (Debian's `ib_acme` would
    /// print uninitialised memory).
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn resolve(&mut self, request: ResolveRepr) -> Result<ResolveReply, ClientError> {
        let (header, bytes) = self.call(&ClientMessage::Resolve(request))?;
        if header.status != Status::SUCCESS {
            return Err(ClientError::Status(header.status.0));
        }
        let reply = ResolveRepr::parse(&bytes, Direction::Response)
            .map_err(|e| ClientError::Malformed(e.to_string()))?;
        let mut out = ResolveReply {
            paths: Vec::new(),
            source: None,
        };
        for entry in &reply.entries {
            match (entry.addr_type, entry.address()) {
                (AddrType::PATH, EpAddress::Path(p)) => out.paths.push(p),
                (AddrType::NAME | AddrType::IP | AddrType::IP6, addr)
                    if entry.flags.contains(EpFlags::SOURCE) =>
                {
                    out.source = Some(match addr {
                        EpAddress::Name(n) => String::from_utf8_lossy(n).into_owned(),
                        EpAddress::Ipv4(a) => a.to_string(),
                        EpAddress::Ipv6(a) => addr::ntop6(&a.octets()),
                        _ => String::new(),
                    });
                }
                _ => {
                    return Err(ClientError::Malformed(format!(
                        "unexpected entry of type {:#x} with flags {:#x}",
                        entry.addr_type.0, entry.flags.0
                    )));
                }
            }
        }
        if out.paths.is_empty() {
            return Err(ClientError::Malformed("no path record".into()));
        }
        Ok(out)
    }

    /// PERF_QUERY: the counters, as many as the reply's `data[0]` announces (and the body
    /// holds).
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn perf(&mut self, request: PerfQueryRepr) -> Result<Vec<u64>, ClientError> {
        let (header, bytes) = self.call(&ClientMessage::PerfQuery(request))?;
        if header.status != Status::SUCCESS {
            return Err(ClientError::Status(header.status.0));
        }
        let reply = PerfReplyRepr::parse(&bytes, Direction::Response)
            .map_err(|e| ClientError::Malformed(e.to_string()))?;
        let count = usize::from(header.data[0]).min(reply.counters.len());
        Ok(reply.counters[..count].to_vec())
    }

    /// EP_QUERY for endpoint `index` on port `port`.
    ///
    /// # Errors
    /// [`ClientError::Status`] when the daemon has no such endpoint; other
    /// [`ClientError`]s when the exchange fails.
    pub fn endpoint(&mut self, index: u8, port: u8) -> Result<EpConfigRepr, ClientError> {
        let request = EpQueryRepr::new(index, port);
        let (header, bytes) = self.call(&ClientMessage::EpQuery(request))?;
        if header.status != Status::SUCCESS {
            return Err(ClientError::Status(header.status.0));
        }
        let reply = EpQueryReplyRepr::parse(&bytes, Direction::Response)
            .map_err(|e| ClientError::Malformed(e.to_string()))?;
        reply
            .config
            .ok_or_else(|| ClientError::Malformed("success without endpoint data".into()))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Nothing useful can be done if the peer is already gone.
        let _ = match &self.stream {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// A NAME entry, refusing names of 64 bytes or more as libacm does (a name must leave
/// room for its NUL in the 64-byte field).
///
/// # Errors
/// [`ClientError::NameTooLong`].
pub fn name_entry(flags: EpFlags, name: &str) -> Result<EpAddrRepr, ClientError> {
    if name.len() >= acm_proto::BYTES64_LEN {
        return Err(ClientError::NameTooLong);
    }
    Ok(EpAddrRepr::new(
        flags,
        AddrType::NAME,
        Bytes64::zero_padded(name.as_bytes()),
    ))
}

/// A PATH entry asking for the path from LID `slid` (0: any) to `dlid`, as libacm's
/// `ib_acm_resolve_path` sends it.
#[must_use]
pub fn lid_path_entry(flags: EpFlags, slid: u16, dlid: u16) -> EpAddrRepr {
    path_entry(
        flags,
        PathRecordRepr {
            slid,
            dlid,
            ..PathRecordRepr::default()
        },
    )
}

/// A PATH entry asking for the path from GID `sgid` (zero: any) to `dgid`.
#[must_use]
pub fn gid_path_entry(flags: EpFlags, sgid: acm_proto::Gid, dgid: acm_proto::Gid) -> EpAddrRepr {
    path_entry(
        flags,
        PathRecordRepr {
            sgid,
            dgid,
            ..PathRecordRepr::default()
        },
    )
}

/// A reversible, one-path request for `path`'s addresses.
fn path_entry(flags: EpFlags, path: PathRecordRepr) -> EpAddrRepr {
    let path = PathRecordRepr {
        reversible: true,
        numpath: 1,
        ..path
    };
    EpAddrRepr::path(flags, &path)
}

/// An IP or IP6 entry for an address.
#[must_use]
pub fn ip_entry(flags: EpFlags, ip: IpAddr) -> EpAddrRepr {
    match ip {
        IpAddr::V4(a) => EpAddrRepr::ipv4(flags, a),
        IpAddr::V6(a) => EpAddrRepr::ipv6(flags, a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::client::Opcode;
    use std::os::unix::net::UnixListener;
    use std::thread;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("acme-client-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Serves one connection: answers each request with the next canned reply.
    fn serve(
        replies: Vec<Vec<u8>>,
        tag: &str,
    ) -> (std::path::PathBuf, thread::JoinHandle<Vec<Vec<u8>>>) {
        let dir = temp_dir(tag);
        let path = dir.join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let handle = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            for r in replies {
                let mut h = [0u8; 16];
                if s.read_exact(&mut h).is_err() {
                    break;
                }
                let len = usize::from(HeaderRepr::parse(&h, Direction::Request).unwrap().length);
                let mut body = vec![0u8; len - 16];
                s.read_exact(&mut body).unwrap();
                let mut m = h.to_vec();
                m.extend(body);
                seen.push(m);
                s.write_all(&r).unwrap();
            }
            seen
        });
        (path, handle)
    }

    #[test]
    fn port_file_rules() {
        let d = temp_dir("port");
        let f = d.join("port");
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
        let missing = read_port_file(&d.join("none"));
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

    #[test]
    fn unix_connect_failure_returns_errno() {
        let e = connect("/nonexistent/path.sock", Path::new(PORT_FILE), &mut |_| {}).unwrap_err();
        assert_eq!((e.status(), e.errno()), (errno::ENOENT, errno::ENOENT));
        assert_eq!(e.to_string(), "No such file or directory");
        let long = format!("/{}", "x".repeat(200));
        let e = connect(&long, Path::new(PORT_FILE), &mut |_| {}).unwrap_err();
        assert_eq!(e.status(), errno::ENAMETOOLONG);
    }

    #[test]
    fn resolve_reply_with_daemon_source_and_status_errors() {
        let path = PathRecordRepr {
            dlid: 2,
            slid: 1,
            ..Default::default()
        };
        let mut ok = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        ok.push(EpAddrRepr::path(EpFlags(0x2b), &path)).unwrap();
        ok.push(EpAddrRepr::ipv4(
            EpFlags::SOURCE,
            "10.0.0.1".parse().unwrap(),
        ))
        .unwrap();
        let ok = ClientMessage::Resolve(ok).to_vec(Direction::Response);
        let mut err = HeaderRepr::new(Opcode::RESOLVE_ACK);
        err.status = Status::ESRCADDR;
        let mut err_bytes = [0u8; 16];
        err.emit(&mut err_bytes, Direction::Response);
        let mut bad = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        bad.push(EpAddrRepr::ipv4(EpFlags::DEST, "10.0.0.1".parse().unwrap()))
            .unwrap();
        let bad = ClientMessage::Resolve(bad).to_vec(Direction::Response);

        let (sock, server) = serve(vec![ok, err_bytes.to_vec(), bad], "resolve");
        let mut c = connect(sock.to_str().unwrap(), Path::new(PORT_FILE), &mut |_| {}).unwrap();
        let mut req = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
        req.push(EpAddrRepr::ipv4(EpFlags::DEST, "10.0.0.2".parse().unwrap()))
            .unwrap();
        let r = c.resolve(req.clone()).unwrap();
        assert_eq!(r.paths, [path]);
        assert_eq!(r.source.as_deref(), Some("10.0.0.1"));
        let e = c.resolve(req.clone()).unwrap_err();
        assert_eq!(e.errno(), 99);
        let e = c.resolve(req.clone()).unwrap_err();
        assert!(matches!(e, ClientError::Malformed(_)), "{e:?}");
        assert_eq!(e.errno(), errno::EPROTO);
        // The server hung up: no reply.
        let e = c.resolve(req.clone()).unwrap_err();
        assert!(
            matches!(e, ClientError::Closed | ClientError::Io(_)),
            "{e:?}"
        );
        let seen = server.join().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[0],
            ClientMessage::Resolve(req).to_vec(Direction::Request)
        );
    }

    #[test]
    fn names_of_64_bytes_are_refused() {
        assert!(name_entry(EpFlags::DEST, &"a".repeat(63)).is_ok());
        let e = name_entry(EpFlags::DEST, &"a".repeat(64)).unwrap_err();
        assert_eq!(e.errno(), errno::UNSET);
    }
}
