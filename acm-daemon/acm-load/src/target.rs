//! Where the load goes: a unix stream socket (`-S PATH`, as `ib_acme -S`) or a TCP
//! address (`--tcp HOST:PORT`), and a blocking connection to it.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The service under load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A unix stream socket.
    Unix(PathBuf),
    /// A TCP address (looked up once, before the run).
    Tcp(SocketAddr),
}

impl Target {
    /// Looks up `HOST:PORT` (the first address found is used).
    ///
    /// # Errors
    /// The lookup failed or found nothing.
    pub fn tcp(spec: &str) -> io::Result<Self> {
        spec.to_socket_addrs()?
            .next()
            .map(Self::Tcp)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{spec}: no address found"))
            })
    }

    /// `unix` or `tcp`.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Unix(_) => "unix",
            Self::Tcp(_) => "tcp",
        }
    }

    /// Opens a connection whose reads and writes give up after `timeout`. TCP
    /// connections send without delay (no Nagle), as every request is one whole write.
    ///
    /// # Errors
    /// The connect failed.
    pub fn connect(&self, timeout: Duration) -> io::Result<Stream> {
        let s = match self {
            Self::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
            Self::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, timeout)?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
        };
        s.set_timeouts(timeout)?;
        Ok(s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(p) => write!(f, "{}", p.display()),
            Self::Tcp(a) => write!(f, "{a}"),
        }
    }
}

/// A connected stream.
#[derive(Debug)]
pub enum Stream {
    /// Over a unix socket.
    Unix(UnixStream),
    /// Over TCP.
    Tcp(TcpStream),
}

impl Stream {
    fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        // A zero timeout is refused by the socket layer; it means "no limit" here.
        let t = (!t.is_zero()).then_some(t);
        match self {
            Self::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            Self::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }

    /// Closes both directions (errors are of no use to a closing client).
    pub fn close(&self) {
        let _ = match self {
            Self::Unix(s) => s.shutdown(Shutdown::Both),
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
