//! The event loop: accept clients, frame their requests into the engine, write its
//! replies back, run its timers, log what it says.
//!
//! One thread owns the engine. With `worker_threads` 1 it also serves every client;
//! with more, worker threads own the client connections and answer cache hits, and
//! this thread takes what they forward, hands it to the engine and sends the replies
//! back ([`super::workers`] says how order, counters and invalidations are kept); what
//! follows about clients then holds in each worker. After every input the backend's
//! outputs are drained before waiting again (str0m's rule). No client can hold up another: reads and writes never block,
//! each connection gets at most [`READ_BUDGET`] requests per turn, and a client that
//! does not read its replies only stops its own requests from being read (see
//! [`super::conn`]).
//!
//! Two kinds of waiting. The listener, the backend, the kernel channel, the signals,
//! the providers' waker and the quiet clients are registered with one mio poller
//! (epoll, edge-triggered). The busy clients are not: each wait is one `ppoll` over
//! them, with the mio poller's own descriptor first, readable when one of its sources
//! is ready ([`super::client_waits`] says why and when a client moves).
//!
//! With a backend that serves the kernel, the RDMA_NL_LS socket is one more source:
//! each kernel request goes to the backend, each netlink reply
//! (`ClientOutput::Netlink`) back to the kernel (see [`super::kernel::channel`]).
//!
//! The stop signals are another ([`Server::stop_on`]): the loop returns the signal, and
//! the caller removes its files and logs the end. SIGHUP comes the same way and makes
//! the loop read the configuration again ([`Server::reload_with`], [`super::reload`]).
//!
//! When `accept` fails for want of descriptors (EMFILE, ENFILE) or memory, clients
//! still wait in the listen queue, but the edge-triggered poller will not report the
//! listener again until yet another client arrives. The loop therefore tries again
//! itself: on the turn after any connection closes, and every [`ACCEPT_RETRY`] while
//! the failure lasts (a descriptor may also free elsewhere: another process, the
//! metrics file), logging the first failure and the recovery, not every try.
//!
//! At most [`ACCEPT_BATCH`] clients are accepted per turn, so that clients connecting
//! without end (refused ones among them) cannot keep the loop from serving the
//! connected ones.
//!
//! Replies queued for all clients together are bounded
//! ([`Server::set_max_queued_reply_bytes`], `max_queued_reply_bytes`): each connection
//! stops being read at 64 KiB of queued replies, but many such connections could
//! still hold any amount. The bound counts the memory the queues take (a connection
//! that reads its replies holds none). Past it, the connections with the most queued
//! (the ones not reading: a client that reads has next to nothing queued) are closed,
//! until three quarters of the bound are left, so that a steady stream of such clients
//! is cut in batches, each reported by one log line, not one per connection. Their
//! buffers go with them.
//!
//! The engine's lines about malformed requests (origin [`MALFORMED_ORIGIN`], one per
//! connection it closes) and the lines about refused clients each go through a
//! [`RateLimit`]: a few per interval, then one count of the rest.
//!
//! With allow-lists ([`Server::set_allow_list`]), each new client's credentials are
//! checked before it is watched; a refused one is closed unread, with one log line
//! (see [`super::access`]). A reload that changes the lists closes the connected
//! clients of users they no longer let in, in one log line.
//!
//! Each new client is then held to the connection limits ([`super::conn_limits`]):
//! one user other than root and the daemon's may hold `max_connections_per_user`,
//! and all of them together what the descriptor limit leaves once the daemon's own
//! descriptors and root's reserve are set aside. A client over a limit is closed
//! unread, logged like a refused one. With a metrics file ([`Server::set_metrics`]),
//! the loop also wakes to write it (see [`super::metrics`]).

use super::access::{AllowList, Peer, Verdict, proc_groups};
use super::backend::{Backend, BackendError};
use super::client_waits::{ClientWaits, Conns, most_queued_first, ready_of, shrink_if_sparse};
use super::conn::{Conn, READ_BUDGET, READ_CHUNK, TRIM_AFTER_BYTES};
use super::conn_limits::{Admission, ConnLimits, Descriptors};
use super::kernel::channel::KernelChannel;
use super::lifecycle::StopSignals;
use super::listen::{Listener, Stream};
use super::log::{Logger, Priority};
use super::metrics::{MetricsFile, Written};
use super::rate_limit::{self, RateLimit};
use super::reload::Reloader;
use super::workers::Workers;
use super::workers::messages::ToEngine;
use acm_client::metrics::{DaemonSample, ReloadCounts};
use acm_engine::HostOutput;
use acm_engine::{ClientOutput, ConnId, Input, Instant};
use acm_io_verbs::poll_set::Ready;
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

// Kept apart from the imports above, which change with the engine's `Output` type.
use acm_engine::log::Level;

const LISTENER: Token = Token(0);
const BACKEND: Token = Token(1);
const KERNEL: Token = Token(2);
const SIGNALS: Token = Token(3);
/// The loop's waker (mio allows one per poller), which C provider plugins' threads
/// ([`Server::provider_waker`]) and worker threads ([`Server::set_worker_threads`])
/// fire after handing the loop something.
const WAKE: Token = Token(4);
/// Connection ids start here, so that a connection's token is its id.
const FIRST_CONN: u64 = 16;

/// How often accepting is tried again while it fails for want of descriptors or
/// memory, when no connection closes meanwhile: often enough that a waiting client is
/// served well within a second of a descriptor freeing, rarely enough to cost nothing.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Connections accepted (or refused at accept) in one turn of the loop before the
/// connected clients get theirs: users connecting in a loop, whose connections are
/// refused at once or not, must not keep the loop accepting while the listen queue
/// never empties. The rest are accepted on the next turn, which comes at once.
pub(crate) const ACCEPT_BATCH: usize = 256;

/// The origin of the engine's line for a request it refuses to frame (a connection it
/// closes); its only line with this origin (acm-engine's `core::client`).
pub(crate) const MALFORMED_ORIGIN: &str = "acm_svr_receive";

/// The origin of the lines about clients the allow-lists or the connection limits
/// refused.
const REFUSED_ORIGIN: &str = "acm_svr_accept";

/// Why a new client was closed unread, for its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Not in the allow-lists.
    NotAllowed,
    /// Its user holds `max_connections_per_user` already.
    UserLimit,
    /// The connections users other than root may hold together are open.
    SharedLimit,
}

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
    /// Keyed by connection id, which the daemon hands out in sequence.
    conns: Conns,
    /// The one buffer client requests are read into and framed in ([`Conn::read_requests`]).
    read_buf: Box<[u8]>,
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
    /// The connection limits, and the open connections of each user.
    limits: ConnLimits,
    /// Client connections refused at their user's limit so far.
    over_user_limit: u64,
    /// Client connections refused at the limit all users share so far.
    over_shared_limit: u64,
    /// Connected clients closed because reloaded allow-lists no longer let their user
    /// in, so far.
    closed_not_allowed: u64,
    metrics: Option<MetricsFile>,
    /// When the daemon started, in seconds since the Unix epoch (for the metrics).
    started: u64,
    /// Accepting failed for want of resources: since when, and how many tries failed.
    accept_stalled: Option<(std::time::Instant, u64)>,
    /// A connection closed since the last try at accepting.
    closed_since_try: bool,
    /// The last turn accepted [`ACCEPT_BATCH`] connections: more may wait.
    accept_pending: bool,
    /// Memory holding replies queued on all connections, in bytes
    /// ([`Conn::held`]).
    queued: usize,
    /// The bound on `queued`.
    max_queued: usize,
    /// Connections closed for the bound so far (for the metrics).
    closed_unread: u64,
    /// Reply memory of connections closed since the heap was last trimmed, in bytes.
    freed_since_trim: usize,
    /// The limit on the engine's malformed-request lines.
    malformed: RateLimit,
    /// The limit on lines about clients the allow-lists refused: a refused user can
    /// connect in a loop as fast as a malformed one.
    refused_lines: RateLimit,
    /// What SIGHUP reads again, once [`Server::reload_with`] set it.
    reloader: Option<Reloader>,
    /// What reloads did so far (for the metrics).
    reloads: ReloadCounts,
    /// Which clients are waited on with `ppoll` and which with epoll.
    waits: ClientWaits,
    /// The worker threads that own the client connections, when there are any
    /// ([`Server::set_worker_threads`]); without them this thread serves the clients.
    workers: Option<Workers>,
    /// The loop's waker ([`WAKE`]), once made.
    waker: Option<Arc<mio::Waker>>,
    /// The providers were given the waker ([`Server::provider_waker`]): a wake-up may
    /// be theirs, and is handed to the engine as [`Input::ProviderWake`].
    providers_wake: bool,
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
        mut kernel: KernelChannel,
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
        let own_uid = nix::unistd::geteuid().as_raw();
        Ok(Self {
            poll,
            listener,
            backend,
            kernel,
            log,
            conns: HashMap::default(),
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
            next_conn: FIRST_CONN,
            paused: Vec::new(),
            epoch,
            stop: None,
            allow: AllowList::default(),
            own_uid,
            accepted: 0,
            refused: 0,
            // Counted again when serving starts, with every descriptor of the daemon
            // open.
            limits: ConnLimits::new(own_uid, Descriptors::count(0)),
            over_user_limit: 0,
            over_shared_limit: 0,
            closed_not_allowed: 0,
            metrics: None,
            started: std::time::SystemTime::now()
                .checked_sub(epoch.elapsed())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs()),
            accept_stalled: None,
            closed_since_try: false,
            accept_pending: false,
            queued: 0,
            max_queued: usize::try_from(super::settings::DEFAULT_MAX_QUEUED_REPLY_BYTES)
                .unwrap_or(usize::MAX),
            closed_unread: 0,
            freed_since_trim: 0,
            malformed: RateLimit::default(),
            refused_lines: RateLimit::default(),
            reloader: None,
            reloads: ReloadCounts::default(),
            waits: ClientWaits::new(),
            workers: None,
            waker: None,
            providers_wake: false,
        })
    }

    /// Lets only `allow`'s users and groups (and root and the daemon's own user)
    /// connect to the unix socket; with a list, TCP clients, which carry no
    /// credentials, are refused.
    pub fn set_allow_list(&mut self, allow: AllowList) {
        self.allow = allow;
    }

    /// Bounds the replies queued for all clients together to `bytes` (see the module's
    /// doc).
    pub fn set_max_queued_reply_bytes(&mut self, bytes: u64) {
        self.max_queued = usize::try_from(bytes).unwrap_or(usize::MAX);
        if let Some(w) = &mut self.workers {
            w.set_bound(self.max_queued);
        }
    }

    /// Holds each user other than root and the daemon's to `limit` connections
    /// (`None`: half of those all users share; see `conn_limits`).
    pub fn set_max_connections_per_user(&mut self, limit: Option<u32>) {
        self.limits.set_per_user(limit);
    }

    /// Serves the clients on `n` worker threads beside this one, which keeps the engine
    /// (ARCHITECTURE.md, "Threads"); 1 (or 0) keeps everything on this thread. Call it
    /// before any client connects.
    ///
    /// # Errors
    /// A thread, poller or waker could not be made.
    pub fn set_worker_threads(&mut self, n: usize) -> io::Result<()> {
        self.workers = None;
        if n >= 2 {
            let waker = self.waker()?;
            self.workers = Some(Workers::start(n, waker, self.max_queued, self.epoch)?);
        }
        Ok(())
    }

    /// How many worker threads serve the clients (0: this thread does).
    #[must_use]
    pub fn worker_threads(&self) -> usize {
        self.workers.as_ref().map_or(0, Workers::count)
    }

    /// Moves a client waited on with `ppoll` back to epoll after `idle` without a
    /// request (default `client_waits::PPOLL_IDLE`, 50 ms).
    pub fn set_client_idle(&mut self, idle: Duration) {
        self.waits.set_idle(idle);
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

    /// Makes SIGHUP (once [`Server::stop_on`] watches the signals) read the files
    /// `reloader` knows again and apply them.
    pub fn reload_with(&mut self, reloader: Reloader) {
        self.reloader = Some(reloader);
    }

    /// A waker that makes the loop feed the backend's engine
    /// [`acm_engine::Input::ProviderWake`] (one per server).
    ///
    /// # Errors
    /// The poller refused it.
    pub fn provider_waker(&mut self) -> io::Result<Arc<mio::Waker>> {
        self.providers_wake = true;
        self.waker()
    }

    /// The loop's one waker, made on first use.
    fn waker(&mut self) -> io::Result<Arc<mio::Waker>> {
        if let Some(w) = &self.waker {
            return Ok(Arc::clone(w));
        }
        let w = Arc::new(mio::Waker::new(self.poll.registry(), WAKE)?);
        self.waker = Some(Arc::clone(&w));
        Ok(w)
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
        self.count_descriptors();
        let now = self.now();
        self.backend.advance(now, true)?;
        self.dispatch();
        self.write_metrics();
        loop {
            let timeout = self.timeout();
            self.waits
                .wait(self.poll.registry().as_fd(), &self.conns, timeout)?;
            // The mio poller's sources are read only when its descriptor is ready, with
            // no wait of its own.
            if self.waits.poller_ready() {
                if let Err(e) = self.poll.poll(&mut events, Some(Duration::ZERO)) {
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e.into());
                }
            } else {
                events.clear();
            }
            let mut backend_ready = false;
            let mut providers = false;
            // One reading of the clock for the requests of one wake-up: a busy loop
            // handles hundreds in a millisecond or two, far under any timeout the
            // engine keeps, and the clock is a tenth of the daemon's own work per
            // cache hit.
            let woke = self.now();
            for ev in &events {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    BACKEND => backend_ready = true,
                    // The workers' messages are read below, on every turn; the
                    // providers are woken only if they hold the waker.
                    WAKE => providers = self.providers_wake,
                    KERNEL => self.read_kernel(),
                    SIGNALS => {
                        while let Some(sig) = self.stop.as_mut().and_then(StopSignals::take) {
                            if sig != super::lifecycle::RELOAD_SIGNAL {
                                return Ok(sig);
                            }
                            self.reload();
                        }
                    }
                    // A quiet client, on epoll.
                    Token(t) => self.serve_client(t as u64, ready_of(ev), woke),
                }
                self.dispatch();
            }
            // Then the busy clients the wait reported, in the set's order.
            for i in 0..self.waits.waited() {
                let (id, ready) = self.waits.ready(i);
                if ready.any() {
                    self.serve_client(id, ready, woke);
                    self.dispatch();
                }
            }
            self.take_from_workers();
            self.revisit_paused();
            self.retry_accept();
            let now = self.now();
            for id in self.waits.sweep(self.poll.registry(), &mut self.conns, now) {
                self.close(id, "cannot watch client");
            }
            if providers {
                self.backend.handle(now, Input::ProviderWake);
            }
            self.backend.advance(now, backend_ready)?;
            self.dispatch();
            self.bound_queued_replies();
            self.trim_heap();
            self.log_suppressed_counts(std::time::Instant::now());
            self.write_metrics();
        }
    }

    /// Reads the configuration files again and applies them, or logs why not (see
    /// [`super::reload`]).
    fn reload(&mut self) {
        self.reopen_log();
        let Some(reloader) = self.reloader.as_mut() else {
            self.log
                .log(Level::Basic, "acm_reload", "SIGHUP: nothing to reload");
            return;
        };
        reloader.notify_reloading();
        let accepted = reloader.read(&mut self.log);
        if accepted.is_some() {
            self.reloads.applied += 1;
        } else {
            self.reloads.refused += 1;
        }
        // The count is in the metrics file at once, not an interval later: a refused
        // reload is what an administrator's monitoring waits for.
        if let Some(m) = &mut self.metrics {
            m.make_due(std::time::Instant::now());
        }
        if let Some(a) = accepted {
            // The log first, so that the engine's lines pass at the new level.
            self.log.set_max_level(super::log::max_level(a.log_level));
            let now = self.now();
            self.backend.handle(now, Input::Reconfigure(&a.reconfig));
            if let Some(allow) = a.settings.allow {
                self.allow = allow;
                self.close_not_allowed();
            }
            if let Some(limit) = a.settings.max_connections_per_user {
                self.limits.set_per_user(limit);
            }
            // The limit may have been raised (prlimit), devices opened or closed.
            self.count_descriptors();
            if let Some(m) = a.settings.metrics {
                self.metrics = m.map(|m| MetricsFile::new(&m, std::time::Instant::now()));
            }
            if let Some(bytes) = a.settings.max_queued_reply_bytes {
                self.set_max_queued_reply_bytes(bytes);
            }
            self.dispatch();
        }
        if let Some(r) = &self.reloader {
            r.notify_ready();
        }
    }

    /// Opens the log file again, so that lines after a log rotation go to a new file at
    /// the configured path; says so in the new file, or in the old one why not.
    fn reopen_log(&mut self) {
        let Some(result) = self.log.reopen() else {
            return;
        };
        let path = self.log.file_path().map(|p| p.display().to_string());
        let path = path.unwrap_or_default();
        match result {
            Ok(()) => self.log.log(
                Level::Basic,
                "acm_log",
                &format!("SIGHUP: log file {path} reopened"),
            ),
            Err(e) => self.log.log_with(
                Level::Basic,
                Priority::Warning,
                "acm_log",
                &format!("SIGHUP: cannot reopen log file {path}: {e}; writing on to the file open until now"),
            ),
        }
    }

    /// Writes an engine line about a malformed request if the rate limit lets it
    /// through, else counts it.
    fn log_malformed(&mut self, ev: &acm_engine::log::LogEvent) {
        if !self.log.enabled(ev.level) {
            return;
        }
        let now = std::time::Instant::now();
        self.log_suppressed_counts(now);
        if self.malformed.admit(now) == rate_limit::Verdict::Write {
            self.log.event(ev);
        }
    }

    /// Logs how many malformed-request and refused-client lines were left out, once
    /// their interval ended.
    fn log_suppressed_counts(&mut self, now: std::time::Instant) {
        if let Some(s) = self.malformed.take_summary(now) {
            self.log.log(
                Level::Basic,
                MALFORMED_ORIGIN,
                &format!(
                    "{} more malformed connections in the last {} s (the first lines of each interval are logged whole)",
                    s.suppressed,
                    s.interval.as_secs()
                ),
            );
        }
        if let Some(s) = self.refused_lines.take_summary(now) {
            self.log.log_with(
                Level::Basic,
                Priority::Warning,
                REFUSED_ORIGIN,
                &format!(
                    "{} more clients refused in the last {} s (the first lines of each interval are logged whole)",
                    s.suppressed,
                    s.interval.as_secs()
                ),
            );
        }
    }

    /// Writes the metrics file if it is due; logs the first of a run of failures and
    /// the recovery after it.
    fn write_metrics(&mut self) {
        let now = std::time::Instant::now();
        if self.metrics.as_ref().is_none_or(|m| m.due() > now) {
            return;
        }
        self.merge_worker_hits();
        let Some(m) = &mut self.metrics else {
            return;
        };
        let daemon = DaemonSample {
            clients_connected: (self.conns.len()
                + self.workers.as_ref().map_or(0, Workers::connections))
                as u64,
            clients_accepted: self.accepted,
            clients_refused: self.refused,
            clients_over_user_limit: self.over_user_limit,
            clients_over_shared_limit: self.over_shared_limit,
            clients_closed_not_allowed: self.closed_not_allowed,
            clients_user_limit: self.limits.per_user() as u64,
            clients_shared_limit: self.limits.shared() as u64,
            clients_closed_unread: self.closed_unread,
            log_lines_dropped: self.log.dropped_total(),
            start_time_seconds: self.started,
            lookups: self.backend.engine().lookup_counters(),
            reloads: self.reloads,
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
    /// file's (at most [`ACCEPT_RETRY`] while accepting fails), or not at all while a
    /// paused connection can be read, a connection closed during a stall, or clients
    /// wait past a full batch of accepts.
    fn timeout(&self) -> Option<Duration> {
        if self.accept_pending || (self.accept_stalled.is_some() && self.closed_since_try) {
            return Some(Duration::ZERO);
        }
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
        let retry = self.accept_stalled.map(|_| ACCEPT_RETRY);
        let counts = [
            self.malformed.summary_due(),
            self.refused_lines.summary_due(),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.saturating_duration_since(std::time::Instant::now()));
        [backend, metrics, retry, counts]
            .into_iter()
            .flatten()
            .min()
    }

    /// Tries accepting again while a stall lasts, after a connection closed or
    /// [`ACCEPT_RETRY`] after the last try, and after a full batch of accepts.
    fn retry_accept(&mut self) {
        if self.accept_stalled.is_some() || self.accept_pending {
            self.accept_all();
            self.dispatch();
        }
    }

    fn accept_all(&mut self) {
        self.closed_since_try = false;
        self.accept_pending = false;
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok(stream) => {
                    if let Some((since, tries)) = self.accept_stalled.take() {
                        self.log.log_with(
                            Level::Basic,
                            Priority::Warning,
                            "acm_server",
                            &format!(
                                "accepting clients again after {:.1} s ({tries} failed tries)",
                                since.elapsed().as_secs_f64()
                            ),
                        );
                    }
                    self.add(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // A client that went before it was accepted: the next one may be there.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // Out of descriptors, say. The clients stay queued; the loop tries
                    // again (see the module's doc) rather than spinning here.
                    match &mut self.accept_stalled {
                        Some((_, tries)) => *tries += 1,
                        None => {
                            self.accept_stalled = Some((std::time::Instant::now(), 1));
                            self.log.log_with(
                                Level::Basic,
                                Priority::Err,
                                "acm_server",
                                &format!(
                                    "accept failed: {e}; waiting clients are accepted as descriptors free"
                                ),
                            );
                        }
                    }
                    return;
                }
            }
        }
        // A whole batch: the rest wait for the next turn.
        self.accept_pending = true;
    }

    fn add(&mut self, stream: Stream) {
        let id = self.next_conn;
        self.next_conn += 1;
        let cred = match &stream {
            // Always read: the connection limits count connections by user.
            Stream::Unix(s) => Some(
                nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials).map(
                    |c| Peer {
                        pid: c.pid(),
                        uid: c.uid(),
                        gid: c.gid(),
                    },
                ),
            ),
            Stream::Tcp(_) => None,
        };
        let peer = cred.as_ref().and_then(|c| c.as_ref().ok().copied());
        // Who connected, for the log lines.
        let who = || match (&cred, &stream) {
            (Some(Ok(p)), _) => format!("pid {} uid {} gid {}", p.pid, p.uid, p.gid),
            (Some(Err(e)), _) => format!("peer credentials unavailable ({e})"),
            (None, Stream::Tcp(s)) => format!(
                "TCP client from {}",
                s.peer_addr()
                    .map_or_else(|_| "unknown peer".into(), |a| a.to_string())
            ),
            (None, Stream::Unix(_)) => String::new(),
        };
        if !self.allow.is_open() {
            let refused = match (&cred, &stream) {
                (Some(Ok(p)), _) => self.refusal(*p),
                (Some(Err(e)), _) => Some(format!("peer credentials unavailable ({e})")),
                // Start-up refuses allow-lists with a TCP server mode; this keeps a
                // listener that is TCP anyway from letting anyone in unchecked.
                (None, _) => Some(format!("{}: no credentials to check", who())),
            };
            if let Some(why) = refused {
                self.refuse(id, Refusal::NotAllowed, || why);
                return;
            }
        }
        match self.limits.admit(peer.map(|p| p.uid)) {
            Admission::Admitted => {}
            Admission::OverUserLimit { held, limit } => {
                self.refuse(id, Refusal::UserLimit, || {
                    format!(
                        "{}: its user holds {held} connections, max_connections_per_user {limit}",
                        who()
                    )
                });
                return;
            }
            Admission::OverShared { open, shared } => {
                let reserve = self.limits.reserve();
                self.refuse(id, Refusal::SharedLimit, || {
                    format!(
                        "{}: {open} client connections are open, the {shared} that users other than root share ({reserve} more descriptors are kept for root)",
                        who()
                    )
                });
                return;
            }
        }
        if self.log.enabled(Level::Verbose) {
            let line = match &stream {
                Stream::Unix(_) => format!("client {id} connected, {}", who()),
                Stream::Tcp(s) => format!(
                    "client {id} connected from {}",
                    s.peer_addr()
                        .map_or_else(|_| "unknown peer".into(), |a| a.to_string())
                ),
            };
            self.log.log(Level::Verbose, "acm_svr_accept", &line);
        }
        let mut conn = Conn::new(stream).with_peer(peer);
        if let Some(w) = &mut self.workers {
            self.accepted += 1;
            self.limits.opened(peer.map(|p| p.uid));
            w.add(id, conn);
            return;
        }
        if let Err(e) = self.waits.add(self.poll.registry(), id, &mut conn) {
            self.log.log_with(
                Level::Basic,
                Priority::Err,
                "acm_svr_accept",
                &format!("cannot watch client: {e}"),
            );
            return;
        }
        self.accepted += 1;
        self.limits.opened(peer.map(|p| p.uid));
        self.conns.insert(id, conn);
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
    /// next, closes it before anything of it is read (and gives its descriptor back).
    /// `why` is only called for a line the rate limit lets through: a user connecting
    /// in a loop is refused as fast as the kernel queues its connections.
    fn refuse(&mut self, id: u64, reason: Refusal, why: impl FnOnce() -> String) {
        match reason {
            Refusal::NotAllowed => self.refused += 1,
            Refusal::UserLimit => self.over_user_limit += 1,
            Refusal::SharedLimit => self.over_shared_limit += 1,
        }
        let now = std::time::Instant::now();
        self.log_suppressed_counts(now);
        if self.refused_lines.admit(now) == rate_limit::Verdict::Write {
            self.log.log_with(
                Level::Basic,
                Priority::Warning,
                REFUSED_ORIGIN,
                &format!("client {id} refused: {}", why()),
            );
        }
    }

    /// Writes what waits for client `id` if it can take it, and reads its requests if
    /// it sent some (or hung up), as a wait on either side reported it.
    fn serve_client(&mut self, id: u64, ready: Ready, now: Instant) {
        if ready.writable || ready.closed {
            self.flush(id);
        }
        if ready.readable || ready.closed {
            if ready.closed
                && let Some(c) = self.conns.get_mut(&id)
            {
                c.note_peer_closed();
            }
            self.read(id, now);
        }
    }

    fn read(&mut self, id: u64, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let backend = &mut self.backend;
        let r = conn.read_requests(&mut self.read_buf, READ_BUDGET, |bytes| {
            backend.handle(
                now,
                Input::ClientRequest {
                    conn: ConnId(id),
                    bytes,
                },
            );
        });
        if !r.closed {
            self.waits.requested(self.poll.registry(), id, conn, now);
        }
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
            self.backend.handle(now, Input::Netlink(bytes));
            self.dispatch();
        }
    }

    fn flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let before = conn.held();
        let r = conn.flush();
        self.queued -= before - conn.held();
        if let Err(e) = r {
            self.close(id, &format!("send failed: {e}"));
            return;
        }
        if let Err(e) = self.waits.sync_write(self.poll.registry(), id, conn) {
            self.close(id, &format!("cannot watch client: {e}"));
        }
    }

    fn revisit_paused(&mut self) {
        let ids = std::mem::take(&mut self.paused);
        for id in ids {
            match self.conns.get(&id) {
                Some(c) if c.wants_read() => {
                    let now = self.now();
                    self.read(id, now);
                    self.dispatch();
                }
                Some(_) => self.paused.push(id),
                None => {}
            }
        }
    }

    /// Closes the connections with the most queued replies while all queued replies
    /// are over the bound, down to three quarters of it, and says so in one line.
    fn bound_queued_replies(&mut self) {
        if self.queued <= self.max_queued {
            return;
        }
        let over = self.queued;
        let target = self.max_queued / 4 * 3;
        let mut closed = Vec::new();
        for id in most_queued_first(&self.conns) {
            if self.queued <= target {
                break;
            }
            self.close(
                id,
                "closed: not reading its replies while max_queued_reply_bytes was reached",
            );
            closed.push(id);
        }
        self.closed_unread += closed.len() as u64;
        // What the engine says to the closes (lookups cancelled) goes out now.
        self.dispatch();
        // The tables that held them give their room back.
        shrink_if_sparse(&mut self.conns);
        self.paused.retain(|id| self.conns.contains_key(id));
        self.paused.shrink_to(self.paused.len() * 2);
        let shown = first_few(&closed, u64::to_string);
        self.log.log_with(
            Level::Basic,
            Priority::Warning,
            "acm_server",
            &format!(
                "replies queued for clients reached {over} bytes, over max_queued_reply_bytes {}: closed {} clients that were not reading them (client {shown}), {} bytes left queued",
                self.max_queued,
                closed.len(),
                self.queued
            ),
        );
    }

    /// Gives the heap's free pages back to the system once closed connections have
    /// freed [`TRIM_AFTER_BYTES`] of queued replies since the last time, so that the
    /// memory of clients that did not read is returned, not only reused (BENCHMARKS.md,
    /// "Hostile load": 2,000 clients that never read their replies).
    fn trim_heap(&mut self) {
        if self.freed_since_trim >= TRIM_AFTER_BYTES {
            self.freed_since_trim = 0;
            let _ = acm_io_verbs::heap::give_back_free_memory();
        }
    }

    /// Counts the daemon's descriptors (again) for the connection limits, and logs the
    /// limits that follow at level 1.
    fn count_descriptors(&mut self) {
        self.limits.recount();
        self.log
            .log(Level::Config, "acm_server", &self.limits.describe());
    }

    /// Closes the connected clients of users the allow-lists no longer let in, after a
    /// reload changed them, and says so in one line.
    fn close_not_allowed(&mut self) {
        if self.allow.is_open() {
            return;
        }
        let peers = self.conns.iter().map(|(&id, c)| (id, c.peer()));
        let of_workers = self.workers.iter().flat_map(Workers::peers);
        let mut gone: Vec<(u64, Option<u32>)> = peers
            .chain(of_workers)
            .filter(|(_, peer)| {
                peer.is_none_or(|p| {
                    self.allow.check(p, self.own_uid, proc_groups) != Verdict::Allowed
                })
            })
            .map(|(id, peer)| (id, peer.map(|p| p.uid)))
            .collect();
        if gone.is_empty() {
            return;
        }
        gone.sort_unstable();
        for &(id, _) in &gone {
            self.close(
                id,
                "closed: its user is no longer in allow_users or allow_groups",
            );
        }
        self.closed_not_allowed += gone.len() as u64;
        self.paused.retain(|id| self.conns.contains_key(id));
        let shown = first_few(&gone, |(id, uid)| match uid {
            Some(u) => format!("client {id} uid {u}"),
            None => format!("client {id} without credentials"),
        });
        self.log.log_with(
            Level::Basic,
            Priority::Warning,
            REFUSED_ORIGIN,
            &format!(
                "allow_users and allow_groups no longer let in the users of {} connected clients: closed them ({shown})",
                gone.len(),
            ),
        );
    }

    /// Drops connection `id` and tells the engine; a worker's connection is closed by
    /// its worker, and counted out when the worker says so ([`Server::closed_by_worker`]).
    fn close(&mut self, id: u64, why: &str) {
        if let Some(w) = &mut self.workers
            && w.owns(id)
        {
            w.close(id, why.to_owned());
            return;
        }
        if let Some(mut conn) = self.conns.remove(&id) {
            self.waits.remove(self.poll.registry(), id, &mut conn);
            self.queued -= conn.held();
            self.freed_since_trim += conn.held();
            self.count_out(id, conn.peer(), why);
        }
    }

    /// Counts out closed connection `id` of `peer` (the connection limits, the log, the
    /// engine, and the accept retry a freed descriptor allows).
    fn count_out(&mut self, id: u64, peer: Option<Peer>, why: &str) {
        self.limits.closed(peer.map(|p| p.uid));
        self.log.log(
            Level::Verbose,
            "acm_svr_receive",
            &format!("client {id}: {why}"),
        );
        let now = self.now();
        self.backend.handle(now, Input::ClientClosed(ConnId(id)));
        self.closed_since_try = true;
    }

    /// Hands the engine what the workers sent: requests the cache view could not
    /// answer (after the hits the workers counted, so that a PERF_QUERY counts them),
    /// closes, and the cuts for the bound on queued replies.
    fn take_from_workers(&mut self) {
        let Some(w) = &mut self.workers else {
            return;
        };
        for msg in w.received() {
            match msg {
                ToEngine::Requests(requests) => {
                    self.merge_worker_hits();
                    let now = self.now();
                    // Drained as often as the single-threaded loop drains (after at most
                    // READ_BUDGET requests): a worker's turn may forward thousands, and
                    // the engine's output queue would grow to hold all their replies.
                    for (i, (id, bytes)) in requests.iter().enumerate() {
                        let Some(w) = &mut self.workers else {
                            return;
                        };
                        if w.owns(id) {
                            w.taken(id);
                            self.backend.handle(
                                now,
                                Input::ClientRequest {
                                    conn: ConnId(id),
                                    bytes,
                                },
                            );
                        }
                        if (i + 1) % READ_BUDGET == 0 || i + 1 == requests.len() {
                            self.dispatch();
                        }
                    }
                }
                ToEngine::Closed { id, why } => self.closed_by_worker(id, &why),
                ToEngine::Cut { closed, over, left } => {
                    self.closed_unread += closed.len() as u64;
                    let workers = self.worker_threads();
                    let shown = first_few(&closed, u64::to_string);
                    self.log.log_with(
                        Level::Basic,
                        Priority::Warning,
                        "acm_server",
                        &format!(
                            "replies queued for one worker's clients reached {over} bytes, over max_queued_reply_bytes {} shared by {workers} workers: closed {} clients that were not reading them (client {shown}), {left} bytes left queued by that worker",
                            self.max_queued,
                            closed.len(),
                        ),
                    );
                }
            }
        }
    }

    /// A worker closed connection `id`: counted out, and the engine told.
    fn closed_by_worker(&mut self, id: u64, why: &str) {
        let Some(peer) = self.workers.as_mut().and_then(|w| w.closed(id)) else {
            return;
        };
        self.count_out(id, peer, why);
        self.dispatch();
    }

    /// Hands the engine the cache hits the workers answered since the last time.
    fn merge_worker_hits(&mut self) {
        let now = self.now();
        let Some(w) = &mut self.workers else {
            return;
        };
        let backend = &mut self.backend;
        w.merge_hits(|ep, hits| backend.handle(now, Input::CacheHits { ep, hits }));
    }

    /// Carries out everything the backend has for us. Client replies, by far the most
    /// of it, are written from where the backend lends them (no copy on the way); the
    /// rest is taken out and handled one at a time. A connection whose reply could not
    /// be written is closed once the replies lent with it are out.
    fn dispatch(&mut self) {
        loop {
            // With workers, what the engine changed is in their view before any of its
            // outputs is carried out (`workers`' module doc).
            if let Some(w) = &mut self.workers {
                w.publish(self.backend.engine_mut());
            }
            let mut failed = Vec::new();
            let registry = self.poll.registry();
            let workers = &mut self.workers;
            let taken = self.backend.lend_outputs(|out| {
                let HostOutput::Client(ClientOutput::Reply { conn, reply }) = out else {
                    return ControlFlow::Break(());
                };
                if let Some(w) = workers.as_mut() {
                    w.reply(conn.0, reply.as_bytes());
                    return ControlFlow::Continue(());
                }
                if let Err(why) = write_reply(
                    &mut self.conns,
                    &mut self.queued,
                    &mut self.waits,
                    registry,
                    conn.0,
                    reply.as_bytes(),
                ) {
                    failed.push((conn.0, why));
                }
                ControlFlow::Continue(())
            });
            let closed = !failed.is_empty();
            for (id, why) in failed {
                self.close(id, &why);
            }
            match taken {
                Some(out) => self.dispatch_taken(out),
                // A close gives the engine an input, which may have outputs of its own.
                None if closed => {}
                None => break,
            }
        }
        if let Some(w) = &mut self.workers {
            w.flush(self.backend.engine());
        }
    }

    /// An output [`Server::dispatch`] took out of the backend: a close, a netlink reply
    /// or a log line (a reply is written where it is lent, but is handled here too).
    fn dispatch_taken(&mut self, out: HostOutput) {
        match out {
            HostOutput::Client(ClientOutput::Reply { conn, reply }) => {
                if let Some(w) = &mut self.workers {
                    w.reply(conn.0, reply.as_bytes());
                    return;
                }
                let registry = self.poll.registry();
                let (conns, queued, waits) = (&mut self.conns, &mut self.queued, &mut self.waits);
                if let Err(why) =
                    write_reply(conns, queued, waits, registry, conn.0, reply.as_bytes())
                {
                    self.close(conn.0, &why);
                }
            }
            // The engine logged why.
            HostOutput::Client(ClientOutput::Close { conn, .. }) => match &mut self.workers {
                // After the replies before it, by the worker.
                Some(w) => w.engine_close(conn.0),
                None => self.close(conn.0, "closed after a malformed request"),
            },
            HostOutput::Client(ClientOutput::Netlink(bytes)) => {
                self.kernel.send(&bytes, &mut self.log);
            }
            HostOutput::Client(ClientOutput::KernelTimeout { message, wait_ms }) => {
                // The engine times its answers by this wait only once the kernel has it.
                if self.kernel.send(&message, &mut self.log) {
                    let now = self.now();
                    self.backend
                        .handle(now, Input::KernelTimeoutSent { wait_ms });
                }
            }
            HostOutput::Log(ev) if ev.origin == MALFORMED_ORIGIN => self.log_malformed(&ev),
            HostOutput::Log(ev) => self.log.event(&ev),
        }
    }
}

/// The first eight of `items` as `show` writes them, separated by commas, then how many
/// more there are: a log line names a flood's first few, not all of it.
fn first_few<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    const SHOWN: usize = 8;
    let mut text = items
        .iter()
        .take(SHOWN)
        .map(show)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    text
}

/// Writes a reply to client `id` (queued if the socket is full), keeps `queued` (the
/// bytes held for all clients) and the client's wait in step. The error says why the
/// connection must be closed.
fn write_reply(
    conns: &mut Conns,
    queued: &mut usize,
    waits: &mut ClientWaits,
    registry: &mio::Registry,
    id: u64,
    bytes: &[u8],
) -> Result<(), String> {
    let Some(c) = conns.get_mut(&id) else {
        return Ok(());
    };
    let before = c.held();
    let r = c.send(bytes);
    *queued += c.held() - before;
    r.map_err(|e| format!("send failed: {e}"))?;
    waits
        .sync_write(registry, id, c)
        .map_err(|e| format!("cannot watch client: {e}"))
}
