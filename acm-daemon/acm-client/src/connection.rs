//! One connection to an ibacm service: how a request goes out (one write of the whole
//! message, as the daemon reads each request with a single `recv`) and how a reply comes
//! back (the 16-byte header, then the rest of the length it declares), and the three
//! calls libacm offers on top of it (resolve, performance counters, endpoints).

use super::addr;
use super::errno;
use super::error::{ClientError, ConnectError};
use super::service::{ServiceAddr, lookup_first, read_port_file};
use acm_proto::client::{
    AddrType, ClientMessage, Direction, EpAddress, EpConfigRepr, EpFlags, EpQueryReplyRepr,
    EpQueryRepr, HEADER_LEN, HeaderRepr, PerfQueryRepr, PerfReplyRepr, ResolveRepr, Status,
    reply_len,
};
use acm_proto::path_record::PathRecordRepr;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// A successful RESOLVE answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveReply {
    /// The path records, in reply order (ibacm sends one).
    pub paths: Vec<PathRecordRepr>,
    /// The source address the daemon chose, as text, when the reply carries one.
    pub source: Option<String>,
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
        let len = reply_len(&reply).map_err(|_| {
            ClientError::Malformed(format!(
                "length {} is shorter than the header",
                header.length
            ))
        })?;
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
        Ok(reply.announced_counters().to_vec())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::PORT_FILE;
    use acm_proto::client::EpAddrRepr;
    use acm_proto::client::Opcode;
    use std::os::unix::net::UnixListener;
    use std::thread;
    use tempfile::TempDir;

    /// Serves one connection: answers each request with the next canned reply. The
    /// socket lives in the returned directory, removed when the caller drops it.
    fn serve(
        replies: Vec<Vec<u8>>,
    ) -> (
        TempDir,
        std::path::PathBuf,
        thread::JoinHandle<Vec<Vec<u8>>>,
    ) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let handle = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            for r in replies {
                let mut h = [0u8; HEADER_LEN];
                if s.read_exact(&mut h).is_err() {
                    break;
                }
                let len = acm_proto::client::request_len(&h).unwrap();
                let mut body = vec![0u8; len - HEADER_LEN];
                s.read_exact(&mut body).unwrap();
                let mut m = h.to_vec();
                m.extend(body);
                seen.push(m);
                s.write_all(&r).unwrap();
            }
            seen
        });
        (dir, path, handle)
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

        let (_dir, sock, server) = serve(vec![ok, err_bytes.to_vec(), bad]);
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
}
