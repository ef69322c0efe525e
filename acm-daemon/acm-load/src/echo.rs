//! The echo server (`acm-load --echo-server PATH`, `--echo-tcp ADDR`): the yardstick for
//! the daemon's throughput. It speaks just enough of the client protocol to be loaded
//! like a daemon: it frames requests by the 16-byte header's length field with the
//! rule the daemon frames them by ([`request_len`], from acm-proto), and answers each with one fixed reply of the
//! size a real daemon sends (an 88-byte RESOLVE success carrying one path, a 72-byte
//! PERF_QUERY reply with seven counters, a 160-byte EP_QUERY reply with one address),
//! the request's tid copied in. It looks nothing up, so a load run against it measures
//! what the socket, the kernel and the client cost; a daemon's result divided by
//! the echo server's is the share of that limit the daemon reaches.
//!
//! It is built to be as cheap per request as a server can be: `--echo-threads` mio event
//! loops (default 1, like the daemon's one loop), edge-triggered, each read taking up to
//! 64 KiB and every whole request in it, and all of its replies going out in one write.
//! A header no request can have closes the connection, as the daemon does. Connections
//! are accepted by a blocking thread per listener and handed to the loops in turn.

use crate::echo_replies::Replies;
use acm_proto::client::{HEADER_LEN, HeaderPacket, request_len};
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

/// The most one read takes.
const READ_CHUNK: usize = 64 * 1024;
/// Replies queued for a client that does not read them, beyond which its requests are
/// left in the socket until it does.
const OUT_LIMIT: usize = 256 * 1024;
/// The token of each loop's waker (connections use their slot numbers).
const WAKER: Token = Token(usize::MAX);

/// Answers every whole request at the start of `input`, appending the replies to
/// `out`; returns how many bytes were consumed, or `None` at a header no request can
/// have (the connection must close).
#[must_use]
pub(crate) fn answer(input: &[u8], out: &mut Vec<u8>, replies: &Replies) -> Option<usize> {
    let mut at = 0;
    while input.len() - at >= HEADER_LEN {
        let head = &input[at..at + HEADER_LEN];
        let len = request_len(head).ok()?;
        let header = HeaderPacket::new_unchecked(head);
        if input.len() - at < len {
            break;
        }
        let reply = replies.for_operation(header.opcode().operation());
        let o = out.len();
        out.extend_from_slice(reply);
        HeaderPacket::new_unchecked(&mut out[o..]).set_tid(header.tid());
        at += len;
    }
    Some(at)
}

/// How the echo server moves bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EchoStyle {
    /// As cheaply per request as a server can: edge-triggered event loops, every whole
    /// request of a 64 KiB read answered, the replies in one write.
    #[default]
    Fast,
    /// The reference daemon's pattern: one thread blocking in `select`, one `recv` and
    /// one `send` per request ([`super::echo_reference`]).
    Reference,
}

/// Where to listen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EchoConfig {
    /// A unix socket path.
    pub unix: Option<PathBuf>,
    /// A TCP address (`127.0.0.1:0` picks a free port).
    pub tcp: Option<SocketAddr>,
    /// Event loops (at least 1; the reference style has one).
    pub threads: usize,
    /// The I/O pattern.
    pub style: EchoStyle,
}

/// A running echo server.
#[derive(Debug)]
pub(crate) struct EchoServer {
    /// The unix socket it listens on.
    pub unix: Option<PathBuf>,
    /// The TCP address it listens on (with the port the system picked).
    pub tcp: Option<SocketAddr>,
    acceptors: Vec<JoinHandle<()>>,
}

impl EchoServer {
    /// Binds the listeners and starts the loops and acceptors.
    ///
    /// # Errors
    /// A listener cannot be set up (the unix path is a live socket or not a socket, the
    /// address is taken, …) or a thread cannot be started.
    pub(crate) fn start(config: &EchoConfig) -> io::Result<Self> {
        if config.style == EchoStyle::Reference {
            return Self::start_reference(config);
        }
        let replies = Arc::new(Replies::new());
        let mut loops = Vec::new();
        for i in 0..config.threads.max(1) {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            let (tx, rx) = mpsc::channel();
            let replies = Arc::clone(&replies);
            std::thread::Builder::new()
                .name(format!("acm-echo-{i}"))
                .spawn(move || event_loop(poll, &rx, &replies))?;
            loops.push((tx, waker));
        }
        let loops = Arc::new(loops);
        let mut server = Self {
            unix: None,
            tcp: None,
            acceptors: Vec::new(),
        };
        if let Some(path) = &config.unix {
            let listener = bind_unix(path)?;
            server.unix = Some(path.clone());
            server.acceptors.push(spawn_acceptor(
                "acm-echo-unix",
                listener,
                &loops,
                accept_unix,
            )?);
        }
        if let Some(addr) = config.tcp {
            let listener = std::net::TcpListener::bind(addr)?;
            server.tcp = Some(listener.local_addr()?);
            server.acceptors.push(spawn_acceptor(
                "acm-echo-tcp",
                listener,
                &loops,
                accept_tcp,
            )?);
        }
        Ok(server)
    }

    /// The reference style: one thread serves the unix socket (the argument parser
    /// refuses TCP and several threads with it).
    fn start_reference(config: &EchoConfig) -> io::Result<Self> {
        let Some(path) = &config.unix else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the reference style serves a unix socket",
            ));
        };
        let listener = bind_unix(path)?;
        let serving = std::thread::Builder::new()
            .name("acm-echo-ref".into())
            .spawn(move || {
                if let Err(e) = super::echo_reference::serve(&listener, &Replies::new()) {
                    eprintln!("acm-load: echo server stopped: {e}");
                }
            })?;
        Ok(Self {
            unix: Some(path.clone()),
            tcp: None,
            acceptors: vec![serving],
        })
    }

    /// Serves until the process ends.
    pub(crate) fn wait(self) {
        for a in self.acceptors {
            let _ = a.join();
        }
    }
}

type Loops = Vec<(Sender<EchoStream>, Arc<Waker>)>;

/// Starts the thread that takes the connections of `listener`, each readied by
/// `accept`, and hands them to the loops in turn; a connection that cannot be readied
/// is dropped.
fn spawn_acceptor<L: Send + 'static>(
    name: &str,
    listener: L,
    loops: &Arc<Loops>,
    accept: fn(&L) -> io::Result<EchoStream>,
) -> io::Result<JoinHandle<()>> {
    let loops = Arc::clone(loops);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let mut next = 0;
            loop {
                if let Ok(stream) = accept(&listener) {
                    hand_over(&loops, &mut next, stream);
                }
            }
        })
}

fn accept_unix(listener: &std::os::unix::net::UnixListener) -> io::Result<EchoStream> {
    let (s, _) = listener.accept()?;
    s.set_nonblocking(true)?;
    Ok(EchoStream::Unix(mio::net::UnixStream::from_std(s)))
}

fn accept_tcp(listener: &std::net::TcpListener) -> io::Result<EchoStream> {
    let (s, _) = listener.accept()?;
    s.set_nonblocking(true)?;
    s.set_nodelay(true)?;
    Ok(EchoStream::Tcp(mio::net::TcpStream::from_std(s)))
}

fn hand_over(loops: &Loops, next: &mut usize, stream: EchoStream) {
    let (tx, waker) = &loops[*next % loops.len()];
    *next += 1;
    if tx.send(stream).is_ok() {
        let _ = waker.wake();
    }
}

/// Binds a unix socket at `path`, replacing a stale socket file (one nobody accepts
/// on) but never a live socket or another kind of file.
fn bind_unix(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by a running server", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    std::os::unix::net::UnixListener::bind(path)
}

/// An accepted connection.
#[derive(Debug)]
enum EchoStream {
    Unix(mio::net::UnixStream),
    Tcp(mio::net::TcpStream),
}

impl EchoStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }

    fn register(&mut self, r: &Registry, t: Token, i: Interest, again: bool) -> io::Result<()> {
        match (self, again) {
            (Self::Unix(s), false) => r.register(s, t, i),
            (Self::Unix(s), true) => r.reregister(s, t, i),
            (Self::Tcp(s), false) => r.register(s, t, i),
            (Self::Tcp(s), true) => r.reregister(s, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) {
        let _ = match self {
            Self::Unix(s) => r.deregister(s),
            Self::Tcp(s) => r.deregister(s),
        };
    }
}

/// One client of the echo server.
struct Conn {
    stream: EchoStream,
    /// The start of a request not yet whole.
    partial: Vec<u8>,
    /// Replies the socket has not taken yet.
    out: Vec<u8>,
    /// Whether writability is asked for (only while `out` holds something).
    writable: bool,
}

impl Conn {
    /// Reads and answers what the socket holds, then writes; `false` when the
    /// connection is over.
    fn service(&mut self, r: &Registry, t: Token, scratch: &mut [u8], replies: &Replies) -> bool {
        loop {
            if !self.flush() {
                return false;
            }
            let Some(drained) = self.read_and_answer(scratch, replies) else {
                return false;
            };
            if !self.flush() {
                return false;
            }
            // Stopped reading with requests left in the socket (too many replies were
            // queued) but the socket took them all: read on, as no new readable edge
            // will come for bytes that were already there.
            if drained || !self.out.is_empty() {
                break;
            }
        }
        let want = !self.out.is_empty();
        if want != self.writable {
            self.writable = want;
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self.stream.register(r, t, interest, true).is_err() {
                return false;
            }
        }
        true
    }

    /// Reads until the socket is empty or [`OUT_LIMIT`] bytes of replies are queued,
    /// answering every whole request: `Some(true)` when the socket was emptied,
    /// `Some(false)` when reading stopped at the limit, `None` when the connection is
    /// over.
    fn read_and_answer(&mut self, scratch: &mut [u8], replies: &Replies) -> Option<bool> {
        while self.out.len() < OUT_LIMIT {
            let n = match self.stream.read(scratch) {
                Ok(0) => return None,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            if self.partial.is_empty() {
                let used = answer(&scratch[..n], &mut self.out, replies)?;
                self.partial.extend_from_slice(&scratch[used..n]);
            } else {
                self.partial.extend_from_slice(&scratch[..n]);
                let used = answer(&self.partial, &mut self.out, replies)?;
                self.partial.drain(..used);
            }
            // A short read emptied the socket; with edge triggering, bytes arriving
            // after it raise a new event, so there is no need to read until WouldBlock.
            if n < scratch.len() {
                return Some(true);
            }
        }
        Some(false)
    }

    /// Writes queued replies while the socket takes them; `false` when it failed.
    fn flush(&mut self) -> bool {
        let mut done = 0;
        while done < self.out.len() {
            match self.stream.write(&self.out[done..]) {
                Ok(0) => return false,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if done == self.out.len() {
            self.out.clear();
        } else {
            self.out.drain(..done);
        }
        true
    }
}

fn event_loop(mut poll: Poll, incoming: &Receiver<EchoStream>, replies: &Replies) {
    let mut events = Events::with_capacity(1024);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut scratch = vec![0u8; READ_CHUNK];
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        for ev in &events {
            if ev.token() == WAKER {
                while let Ok(mut stream) = incoming.try_recv() {
                    let slot = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    let token = Token(slot);
                    if stream
                        .register(poll.registry(), token, Interest::READABLE, false)
                        .is_err()
                    {
                        free.push(slot);
                        continue;
                    }
                    let mut c = Conn {
                        stream,
                        partial: Vec::new(),
                        out: Vec::new(),
                        writable: false,
                    };
                    // Requests may have arrived before registration.
                    if c.service(poll.registry(), token, &mut scratch, replies) {
                        conns[slot] = Some(c);
                    } else {
                        c.stream.deregister(poll.registry());
                        free.push(slot);
                    }
                }
                continue;
            }
            let slot = ev.token().0;
            let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if !c.service(poll.registry(), ev.token(), &mut scratch, replies)
                && let Some(mut c) = conns[slot].take()
            {
                c.stream.deregister(poll.registry());
                free.push(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::client::{Direction, EpQueryReplyRepr, Operation, PerfReplyRepr};

    #[test]
    fn replies_are_real_sizes_and_echo_the_tid() {
        let r = Replies::new();
        let (resolve, perf, ep) = (
            r.for_operation(Operation::RESOLVE),
            r.for_operation(Operation::PERF_QUERY),
            r.for_operation(Operation::EP_QUERY),
        );
        assert_eq!(resolve.len(), 88);
        assert_eq!(&resolve[..8], &[1, 1, 0, 0, 0, 0, 88, 0]);
        assert_eq!(perf.len(), 72);
        let p = PerfReplyRepr::parse(perf, Direction::Response).unwrap();
        assert_eq!((p.announced_counters().len(), p.counters.len()), (7, 7));
        assert_eq!(ep.len(), 160);
        assert!(EpQueryReplyRepr::parse(ep, Direction::Response).is_ok());

        // Two requests and half of a third: two replies, the half left over.
        let req = crate::requests::ip_resolve_request();
        let mut input = req.clone();
        input[8] = 0x11;
        let mut perf = crate::requests::perf_request();
        perf[8] = 0x22;
        input.extend_from_slice(&perf);
        input.extend_from_slice(&req[..100]);
        let mut out = Vec::new();
        assert_eq!(answer(&input, &mut out, &r), Some(176));
        assert_eq!(out.len(), 88 + 72);
        assert_eq!(out[8], 0x11);
        assert_eq!(&out[88..90], &[1, 0x82]);
        assert_eq!(out[88 + 8], 0x22);

        // A header no request can have.
        let mut bad = perf.clone();
        bad[0] = 2;
        assert_eq!(answer(&bad, &mut out, &r), None);
    }

    #[test]
    fn serves_a_unix_socket_and_replaces_only_stale_files() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("e.sock");
        // A stale socket file is replaced.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let server = EchoServer::start(&EchoConfig {
            unix: Some(path.clone()),
            tcp: None,
            threads: 2,
            style: EchoStyle::Fast,
        })
        .unwrap();
        // A live one is not.
        let again = EchoServer::start(&EchoConfig {
            unix: Some(path.clone()),
            tcp: None,
            threads: 1,
            style: EchoStyle::Fast,
        });
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::AddrInUse);
        let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let perf = crate::requests::perf_request();
        for _ in 0..3 {
            c.write_all(&perf).unwrap();
            let mut reply = [0u8; 72];
            c.read_exact(&mut reply).unwrap();
            assert_eq!(&reply[..2], &[1, 0x82]);
        }
        drop(server);
    }
}
