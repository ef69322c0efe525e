//! The event loop: accept clients, frame their requests into the engine, write its
//! replies back, run its timers, log what it says.
//!
//! One thread and one poller (mio, edge-triggered). After every input the backend's
//! outputs are drained before waiting again (str0m's rule). No client can hold up
//! another: reads and writes never block, each connection gets at most
//! [`READ_BUDGET`] requests per turn, and a client that does not read its replies
//! only stops its own requests from being read (see [`super::conn`]).
//!
//! With a backend that serves the kernel, the RDMA_NL_LS socket is one more source:
//! each kernel request goes to the backend, each netlink reply
//! (`ClientOutput::Netlink`) back to the kernel (see [`super::kernel::channel`]).
//!
//! The stop signals are another ([`Server::stop_on`]): the loop returns the signal, and
//! the caller removes its files and logs the end.
//!
//! With allow-lists ([`Server::set_allow_list`]), each new client's credentials are
//! checked before it is watched; a refused one is closed unread, with one log line
//! (see [`super::access`]). With a metrics file ([`Server::set_metrics`]), the loop
//! also wakes to write it (see [`super::metrics`]).

use super::access::{AllowList, Peer, Verdict, proc_groups};
use super::backend::{Backend, BackendError};
use super::conn::Conn;
use super::kernel::channel::KernelChannel;
use super::lifecycle::StopSignals;
use super::listen::{Listener, Stream};
use super::log::{Logger, Priority};
use super::metrics::{MetricsFile, Written};
use crate::metrics::DaemonSample;
use acm_engine::HostOutput;
use acm_engine::{ClientOutput, ConnId, Instant};
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io;
use std::time::Duration;

// Kept apart from the imports above, which change with the engine's `Output` type.
use acm_engine::log::Level;

const LISTENER: Token = Token(0);
const BACKEND: Token = Token(1);
const KERNEL: Token = Token(2);
const SIGNALS: Token = Token(3);
/// The waker C provider plugins' threads fire ([`Server::provider_waker`]).
const PROVIDERS: Token = Token(4);
/// Connection ids start here, so that a connection's token is its id.
const FIRST_CONN: u64 = 16;

/// Requests read from one connection before the others get their turn.
pub const READ_BUDGET: usize = 64;

/// Why the loop ended.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The poller failed.
    #[error("poll: {0}")]
    Poll(#[from] io::Error),
    /// The fabric failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// The daemon's state while it serves.
pub struct Server<B: Backend> {
    poll: Poll,
    listener: Listener,
    backend: B,
    /// The kernel's RDMA_NL_LS socket, if the backend serves the kernel.
    kernel: KernelChannel,
    log: Logger,
    conns: HashMap<u64, Conn>,
    next_conn: u64,
    /// Connections whose reading stopped before their socket ran dry.
    paused: Vec<u64>,
    epoch: std::time::Instant,
    /// SIGTERM and SIGINT, once [`Server::stop_on`] installed them.
    stop: Option<StopSignals>,
    /// Who may connect (everyone unless set).
    allow: AllowList,
    /// The daemon's effective uid, which the allow-lists always let in.
    own_uid: u32,
    /// Client connections served so far.
    accepted: u64,
    /// Client connections refused by the allow-lists so far.
    refused: u64,
    metrics: Option<MetricsFile>,
    /// When the daemon started, in seconds since the Unix epoch (for the metrics).
    started: u64,
}

impl<B: Backend> Server<B> {
    /// A server for `listener`, `backend` and the `kernel` channel, timing the engine
    /// from `epoch`.
    ///
    /// # Errors
    /// The poller cannot be created or refuses a socket.
    pub fn new(
        mut listener: Listener,
        mut backend: B,
        kernel: KernelChannel,
        log: Logger,
        epoch: std::time::Instant,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        match &mut listener {
            Listener::Unix(l) => poll.registry().register(l, LISTENER, Interest::READABLE)?,
            Listener::Tcp(l) => poll.registry().register(l, LISTENER, Interest::READABLE)?,
        }
        backend.register(poll.registry(), BACKEND)?;
        kernel.register(poll.registry(), KERNEL)?;
        Ok(Self {
            poll,
            listener,
            backend,
            kernel,
            log,
            conns: HashMap::new(),
            next_conn: FIRST_CONN,
            paused: Vec::new(),
            epoch,
            stop: None,
            allow: AllowList::default(),
            own_uid: nix::unistd::geteuid().as_raw(),
            accepted: 0,
            refused: 0,
            metrics: None,
            started: std::time::SystemTime::now()
                .checked_sub(epoch.elapsed())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs()),
        })
    }

    /// Lets only `allow`'s users and groups (and root and the daemon's own user)
    /// connect to the unix socket; with a list, TCP clients, which carry no
    /// credentials, are refused.
    pub fn set_allow_list(&mut self, allow: AllowList) {
        self.allow = allow;
    }

    /// Writes `metrics` at once, then every interval.
    pub fn set_metrics(&mut self, metrics: MetricsFile) {
        self.metrics = Some(metrics);
    }

    /// Makes [`Server::run`] return when one of `signals` arrives.
    ///
    /// # Errors
    /// The poller refuses the signal descriptor.
    pub fn stop_on(&mut self, signals: StopSignals) -> io::Result<()> {
        signals.register(self.poll.registry(), SIGNALS)?;
        self.stop = Some(signals);
        Ok(())
    }

    /// A waker that makes the loop feed the backend's engine
    /// [`acm_engine::Input::ProviderWake`] (one per server).
    ///
    /// # Errors
    /// The poller refused it.
    pub fn provider_waker(&self) -> io::Result<mio::Waker> {
        mio::Waker::new(self.poll.registry(), PROVIDERS)
    }

    /// The log, for the caller's last lines.
    pub fn log_mut(&mut self) -> &mut Logger {
        &mut self.log
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Serves until a stop signal arrives (returned) or the fabric fails.
    ///
    /// # Errors
    /// The poller or the fabric failed.
    pub fn run(&mut self) -> Result<nix::sys::signal::Signal, ServerError> {
        let mut events = Events::with_capacity(256);
        let now = self.now();
        self.backend.advance(now, true)?;
        self.dispatch();
        self.write_metrics();
        loop {
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            let mut backend_ready = false;
            let mut providers = false;
            for ev in &events {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    BACKEND => backend_ready = true,
                    PROVIDERS => providers = true,
                    KERNEL => self.read_kernel(),
                    SIGNALS => {
                        if let Some(sig) = self.stop.as_mut().and_then(StopSignals::take) {
                            return Ok(sig);
                        }
                    }
                    Token(t) => {
                        let id = t as u64;
                        if ev.is_writable() || ev.is_write_closed() {
                            self.flush(id);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            if (ev.is_read_closed() || ev.is_error())
                                && let Some(c) = self.conns.get_mut(&id)
                            {
                                c.note_peer_closed();
                            }
                            self.read(id);
                        }
                    }
                }
                self.dispatch();
            }
            self.revisit_paused();
            let now = self.now();
            if providers {
                self.backend.provider_wake(now);
            }
            self.backend.advance(now, backend_ready)?;
            self.dispatch();
            self.write_metrics();
        }
    }

    /// Writes the metrics file if it is due; logs the first of a run of failures and
    /// the recovery after it.
    fn write_metrics(&mut self) {
        let Some(m) = &mut self.metrics else {
            return;
        };
        let now = std::time::Instant::now();
        if m.due() > now {
            return;
        }
        let daemon = DaemonSample {
            clients_connected: self.conns.len() as u64,
            clients_accepted: self.accepted,
            clients_refused: self.refused,
            start_time_seconds: self.started,
        };
        let text = super::metrics::text(self.backend.engine(), daemon);
        match m.write(now, &text) {
            Written::Ok | Written::StillFailing => {}
            Written::Recovered => self.log.log(
                Level::Basic,
                "acm_metrics",
                &format!("metrics file {} written again", m.path().display()),
            ),
            Written::Failed(e) => self.log.log_with(
                Level::Basic,
                Priority::Warning,
                "acm_metrics",
                &format!("cannot write metrics file {}: {e}", m.path().display()),
            ),
        }
    }

    /// How long the poller may sleep: until the backend's next deadline or the metrics
    /// file's, or not at all while a paused connection can be read.
    fn timeout(&self) -> Option<Duration> {
        if self
            .paused
            .iter()
            .any(|id| self.conns.get(id).is_some_and(Conn::wants_read))
        {
            return Some(Duration::ZERO);
        }
        let now = self.now();
        let backend = self
            .backend
            .poll_timeout()
            .map(|t| t.saturating_duration_since(now));
        let metrics = self
            .metrics
            .as_ref()
            .map(|m| m.due().saturating_duration_since(std::time::Instant::now()));
        match (backend, metrics) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok(stream) => self.add(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: log it and wait for the next event
                    // rather than spinning.
                    self.log.log_with(
                        Level::Basic,
                        Priority::Err,
                        "acm_server",
                        &format!("accept failed: {e}"),
                    );
                    return;
                }
            }
        }
    }

    fn add(&mut self, mut stream: Stream) {
        let id = self.next_conn;
        self.next_conn += 1;
        // Writability is watched only while replies wait (see `sync_interest`).
        let interest = Interest::READABLE;
        let token = Token(id as usize);
        let registered = match &mut stream {
            Stream::Unix(s) => {
                let verbose = self.log.enabled(Level::Verbose);
                let cred = (verbose || !self.allow.is_open()).then(|| {
                    nix::sys::socket::getsockopt(&*s, nix::sys::socket::sockopt::PeerCredentials)
                });
                if !self.allow.is_open() {
                    let refused = match &cred {
                        Some(Ok(c)) => self.refusal(Peer {
                            pid: c.pid(),
                            uid: c.uid(),
                            gid: c.gid(),
                        }),
                        Some(Err(e)) => Some(format!("peer credentials unavailable ({e})")),
                        None => None,
                    };
                    if let Some(why) = refused {
                        self.refuse(id, &why);
                        return;
                    }
                }
                if verbose {
                    let who = match cred {
                        Some(Ok(c)) => format!("pid {} uid {} gid {}", c.pid(), c.uid(), c.gid()),
                        Some(Err(e)) => format!("peer credentials unavailable ({e})"),
                        None => String::new(),
                    };
                    self.log.log(
                        Level::Verbose,
                        "acm_svr_accept",
                        &format!("client {id} connected, {who}"),
                    );
                }
                self.poll.registry().register(s, token, interest)
            }
            Stream::Tcp(s) => {
                let peer = || {
                    s.peer_addr()
                        .map_or_else(|_| "unknown peer".into(), |a| a.to_string())
                };
                if !self.allow.is_open() {
                    // Start-up refuses allow-lists with a TCP server mode; this keeps a
                    // listener that is TCP anyway from letting anyone in unchecked.
                    let why = format!("TCP client from {}: no credentials to check", peer());
                    self.refuse(id, &why);
                    return;
                }
                if self.log.enabled(Level::Verbose) {
                    self.log.log(
                        Level::Verbose,
                        "acm_svr_accept",
                        &format!("client {id} connected from {}", peer()),
                    );
                }
                self.poll.registry().register(s, token, interest)
            }
        };
        if let Err(e) = registered {
            self.log.log_with(
                Level::Basic,
                Priority::Err,
                "acm_svr_accept",
                &format!("cannot watch client: {e}"),
            );
            return;
        }
        self.accepted += 1;
        self.conns.insert(id, Conn::new(stream));
        // Anything already sent is read on the first readiness event.
    }

    /// Why the allow-lists refuse `peer`, if they do.
    fn refusal(&self, peer: Peer) -> Option<String> {
        match self.allow.check(peer, self.own_uid, proc_groups) {
            Verdict::Allowed => None,
            Verdict::Refused { groups } => {
                let groups = groups.map_or_else(
                    || "not read".to_owned(),
                    |g| {
                        let g: Vec<String> = g.iter().map(u32::to_string).collect();
                        if g.is_empty() {
                            "none".to_owned()
                        } else {
                            g.join(",")
                        }
                    },
                );
                Some(format!(
                    "pid {} uid {} gid {} (supplementary groups: {groups}) is not in allow_users or allow_groups",
                    peer.pid, peer.uid, peer.gid
                ))
            }
        }
    }

    /// Counts and logs a refused client; dropping its stream, which the caller does
    /// next, closes it before anything of it is read.
    fn refuse(&mut self, id: u64, why: &str) {
        self.refused += 1;
        self.log.log_with(
            Level::Basic,
            Priority::Warning,
            "acm_svr_accept",
            &format!("client {id} refused: {why}"),
        );
    }

    fn read(&mut self, id: u64) {
        let now = self.now();
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let backend = &mut self.backend;
        let r = conn.read_requests(READ_BUDGET, |bytes| {
            backend.client_request(now, ConnId(id), bytes);
        });
        if r.paused && !self.paused.contains(&id) {
            self.paused.push(id);
        }
        if r.closed {
            self.close(id, "connection closed by the client");
        }
    }

    /// Hands every waiting kernel request to the backend, carrying out its outputs
    /// after each.
    fn read_kernel(&mut self) {
        loop {
            let now = self.now();
            let Some(bytes) = self.kernel.next_message(&mut self.log) else {
                return;
            };
            self.backend.netlink(now, bytes);
            self.dispatch();
        }
    }

    fn flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if let Err(e) = conn.flush() {
            self.close(id, &format!("send failed: {e}"));
            return;
        }
        self.sync_interest(id);
    }

    /// Watches connection `id` for writability exactly while replies wait for it.
    fn sync_interest(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let want = c.wants_write();
        if want == c.write_interest {
            return;
        }
        let interest = if want {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        let token = Token(id as usize);
        let r = match c.stream_mut() {
            Stream::Unix(s) => self.poll.registry().reregister(s, token, interest),
            Stream::Tcp(s) => self.poll.registry().reregister(s, token, interest),
        };
        match r {
            Ok(()) => c.write_interest = want,
            Err(e) => self.close(id, &format!("cannot watch client: {e}")),
        }
    }

    fn revisit_paused(&mut self) {
        let ids = std::mem::take(&mut self.paused);
        for id in ids {
            match self.conns.get(&id) {
                Some(c) if c.wants_read() => {
                    self.read(id);
                    self.dispatch();
                }
                Some(_) => self.paused.push(id),
                None => {}
            }
        }
    }

    /// Drops connection `id` and tells the engine.
    fn close(&mut self, id: u64, why: &str) {
        if let Some(mut conn) = self.conns.remove(&id) {
            let _ = match conn.stream_mut() {
                Stream::Unix(s) => self.poll.registry().deregister(s),
                Stream::Tcp(s) => self.poll.registry().deregister(s),
            };
            self.log.log(
                Level::Verbose,
                "acm_svr_receive",
                &format!("client {id}: {why}"),
            );
            let now = self.now();
            self.backend.client_closed(now, ConnId(id));
        }
    }

    /// Carries out everything the backend has for us.
    fn dispatch(&mut self) {
        while let Some(out) = self.backend.poll_output() {
            match out {
                HostOutput::Client(ClientOutput::Reply { conn, reply }) => {
                    let Some(c) = self.conns.get_mut(&conn.0) else {
                        continue;
                    };
                    if let Err(e) = c.send(reply.as_bytes()) {
                        self.close(conn.0, &format!("send failed: {e}"));
                    } else if c.wants_write() != c.write_interest {
                        self.sync_interest(conn.0);
                    }
                }
                // The engine logged why.
                HostOutput::Client(ClientOutput::Close { conn, .. }) => {
                    self.close(conn.0, "closed after a malformed request");
                }
                HostOutput::Client(ClientOutput::Netlink(bytes)) => {
                    self.kernel.send(&bytes, &mut self.log);
                }
                HostOutput::Log(ev) => self.log.event(&ev),
            }
        }
    }
}
