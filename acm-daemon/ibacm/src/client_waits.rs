//! How the event loop waits on its clients: busy ones with `ppoll`, quiet ones with
//! epoll.
//!
//! A socket registered with epoll keeps epoll's callback on its wait queue, so every
//! client `send` of a request and every client `recv` of a reply runs that callback,
//! on the client's CPU with interrupts off. A socket in a `ppoll` set has a waiter only
//! while the daemon waits, which under load is seldom: with the busy clients on
//! `ppoll` the daemon served 9 % more cache hits at 16 clients and 10 % more at 256
//! on a CPU of its own (BENCHMARKS.md, "Cache hits against the C ibacm"). But a
//! `ppoll` wait costs in proportion to the sockets in it: with 2,000 idle connections
//! in the set beside one busy client, that client's cache hit took 378 µs where it
//! took 47 µs with epoll (`scripts/idle-clients.sh`).
//!
//! So a client starts on epoll (registered with the poller, edge-triggered, token =
//! its id), moves to the `ppoll` set when it sends a request, while the set holds
//! fewer than [`PPOLL_MAX`] clients, and moves back to epoll after [`PPOLL_IDLE`]
//! without a request. A client that keeps sending stays in the set and never costs an
//! epoll call; a quiet one costs nothing at all; a client that sends now and then pays
//! two `epoll_ctl` calls per busy spell.
//!
//! After a turn that read requests, while at most [`FEW_CLIENTS`] clients are busy,
//! [`ClientWaits::wait`] first looks again without sleeping, for as long as
//! [`super::busy_poll`] has learnt that the clients take to send their next request,
//! so that a client with one request in flight finds the daemon awake instead of
//! paying for its wake-up. With more busy clients it sleeps at once: one of them is
//! always about to send, and while the loop sleeps their requests gather, to be read
//! in one wake-up; a look after every turn finds them one or two at a time, each look
//! a system call over the whole set (it cost up to a quarter of the cache hits at 16
//! clients, BENCHMARKS.md). The event loop needs nothing more
//! for this than what it does anyway: [`ClientWaits::requested`] for each client it
//! read, and one [`ClientWaits::wait`] per turn.

use super::busy_poll::BusyPoll;
use super::conn::{Conn, WaitState};
use acm_engine::{Instant, SeqBuildHasher};
use acm_io_verbs::poll_set::{PollSet, Ready};
use mio::{Interest, Registry, Token};
use std::collections::HashMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// The connection table the event loop keeps, by connection id.
pub(crate) type Conns = HashMap<u64, Conn, SeqBuildHasher>;

/// The most clients in the `ppoll` set: a wait over this many sockets costs a few
/// tens of microseconds, spread over the requests of as many busy clients.
pub const PPOLL_MAX: usize = 256;

/// The most busy clients (in the `ppoll` set) with which a wait looks again before it
/// sleeps (module doc).
pub(crate) const FEW_CLIENTS: usize = 4;

/// How long a client in the `ppoll` set may go without a request before it moves back
/// to epoll: far longer than the gap between the requests of a busy client, far
/// shorter than the life of a quiet one.
pub(crate) const PPOLL_IDLE: Duration = Duration::from_millis(50);

/// The clients on `ppoll` and the set the loop waits on.
#[derive(Debug)]
pub(crate) struct ClientWaits {
    set: PollSet,
    /// The client at each index of `set` past the first, as the set was filled.
    ids: Vec<u64>,
    /// The clients on `ppoll`, in the order they came.
    busy: Vec<u64>,
    /// When the busy clients are next looked at for idleness.
    next_sweep: Instant,
    /// How long a busy client may be quiet before it goes back to epoll.
    idle: Duration,
    /// A client was read since the last wait, which then polls before it sleeps
    /// (while few clients are busy).
    served: bool,
    /// How long that poll lasts.
    busy_poll: BusyPoll,
}

impl Default for ClientWaits {
    fn default() -> Self {
        Self {
            set: PollSet::new(),
            ids: Vec::new(),
            busy: Vec::new(),
            next_sweep: Instant::ZERO,
            idle: PPOLL_IDLE,
            served: false,
            busy_poll: BusyPoll::new(),
        }
    }
}

impl ClientWaits {
    /// No client yet.
    #[must_use]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Moves a busy client back to epoll after `idle` without a request instead of
    /// [`PPOLL_IDLE`] (tests that need a longer or shorter spell).
    pub(crate) fn set_idle(&mut self, idle: Duration) {
        self.idle = idle;
    }

    /// Watches a new client, on epoll until it sends.
    ///
    /// # Errors
    /// epoll refused the socket.
    pub(crate) fn add(&mut self, registry: &Registry, id: u64, conn: &mut Conn) -> io::Result<()> {
        registry.register(conn.source(), token(id), Interest::READABLE)?;
        conn.wait = WaitState::Epoll { write: false };
        Ok(())
    }

    /// Notes that client `id` sent a request at `now`: it moves to the `ppoll` set if it
    /// was on epoll and the set has room (if epoll will not let it go, it stays there),
    /// and the next wait polls before it sleeps (module doc).
    pub(crate) fn requested(
        &mut self,
        registry: &Registry,
        id: u64,
        conn: &mut Conn,
        now: Instant,
    ) {
        self.served = true;
        match &mut conn.wait {
            WaitState::Ppoll { last_request } => *last_request = now,
            WaitState::Epoll { .. } => {
                if self.busy.len() < PPOLL_MAX && registry.deregister(conn.source()).is_ok() {
                    conn.wait = WaitState::Ppoll { last_request: now };
                    self.busy.push(id);
                }
            }
        }
    }

    /// Keeps epoll's interest in writability in step with the replies waiting for a
    /// client on epoll (a client in the `ppoll` set is asked for writability at each
    /// wait).
    ///
    /// # Errors
    /// epoll refused the change; the connection cannot be watched any more.
    pub(crate) fn sync_write(
        &mut self,
        registry: &Registry,
        id: u64,
        conn: &mut Conn,
    ) -> io::Result<()> {
        let want = conn.wants_write();
        if let WaitState::Epoll { write } = conn.wait
            && write != want
        {
            registry.reregister(conn.source(), token(id), interest(want))?;
            conn.wait = WaitState::Epoll { write: want };
        }
        Ok(())
    }

    /// Forgets client `id`, which is being dropped.
    pub(crate) fn remove(&mut self, registry: &Registry, id: u64, conn: &mut Conn) {
        match conn.wait {
            WaitState::Epoll { .. } => {
                // Closing the socket removes it from epoll too; this keeps mio's
                // bookkeeping straight, and a failure changes nothing for the client.
                let _ = registry.deregister(conn.source());
            }
            WaitState::Ppoll { .. } => {
                if let Some(i) = self.busy.iter().position(|&b| b == id) {
                    self.busy.swap_remove(i);
                }
            }
        }
    }

    /// Moves the clients of the `ppoll` set that sent nothing for [`PPOLL_IDLE`] (or
    /// what [`ClientWaits::set_idle`] set) back to epoll, looked at no more often than
    /// a quarter of that. Returns the clients epoll refused, which can no longer be
    /// watched.
    pub(crate) fn sweep(
        &mut self,
        registry: &Registry,
        conns: &mut Conns,
        now: Instant,
    ) -> Vec<u64> {
        let mut refused = Vec::new();
        if now < self.next_sweep {
            return refused;
        }
        self.next_sweep = now + self.idle / 4;
        let mut i = 0;
        while i < self.busy.len() {
            let id = self.busy[i];
            let Some(c) = conns.get_mut(&id) else {
                self.busy.swap_remove(i);
                continue;
            };
            let WaitState::Ppoll { last_request } = c.wait else {
                self.busy.swap_remove(i);
                continue;
            };
            if now.saturating_duration_since(last_request) < self.idle {
                i += 1;
                continue;
            }
            self.busy.swap_remove(i);
            let want = c.wants_write();
            match registry.register(c.source(), token(id), interest(want)) {
                Ok(()) => c.wait = WaitState::Epoll { write: want },
                Err(_) => refused.push(id),
            }
        }
        refused
    }

    /// Waits until the poller (`poller`: mio's own descriptor, first in the set) or a
    /// client of the `ppoll` set is ready, or `timeout` passes. Each client is waited
    /// on for reading while its requests are read and for writing while replies wait
    /// for it.
    ///
    /// After a turn that read a client ([`ClientWaits::requested`]) it polls the set
    /// without sleeping for up to the learnt window first, and learns from what it
    /// finds or, failing that, from how long the sleep lasted (module doc).
    ///
    /// # Errors
    /// `ppoll` failed for another reason than a signal.
    pub(crate) fn wait(
        &mut self,
        poller: BorrowedFd<'_>,
        conns: &Conns,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        self.set.clear();
        self.ids.clear();
        self.set.push(poller, true, false);
        for &id in &self.busy {
            if let Some(c) = conns.get(&id) {
                self.set.push(c.fd(), c.wants_read(), c.wants_write());
                self.ids.push(id);
            }
        }
        // A wait that may not sleep, that follows a turn with no request, or with more
        // than a few clients busy (module doc), is one look and teaches nothing about a
        // few clients' turnaround.
        let served = std::mem::take(&mut self.served);
        if !served || self.busy.len() > FEW_CLIENTS || timeout == Some(Duration::ZERO) {
            return self.set.wait(timeout).map(|_| ());
        }
        let began = std::time::Instant::now();
        let window = self
            .busy_poll
            .window()
            .min(timeout.unwrap_or(Duration::MAX));
        if !window.is_zero() {
            loop {
                if self.set.wait(Some(Duration::ZERO))? > 0 {
                    self.busy_poll.found(began.elapsed());
                    return Ok(());
                }
                if began.elapsed() >= window {
                    break;
                }
                // Gives way to a thread runnable on this CPU, a client woken here
                // most often: it is what the poll waits for, and on a machine with
                // fewer cores than busy threads it would otherwise wait out the poll.
                std::thread::yield_now();
            }
        }
        let rest = timeout.map(|t| t.saturating_sub(began.elapsed()));
        let ready = self.set.wait(rest)? > 0;
        self.busy_poll.slept(began.elapsed(), ready);
        Ok(())
    }

    /// Whether the last wait found the poller ready.
    #[must_use]
    pub(crate) fn poller_ready(&self) -> bool {
        self.set.ready(0).any()
    }

    /// The number of clients the last wait was over.
    #[must_use]
    pub(crate) fn waited(&self) -> usize {
        self.ids.len()
    }

    /// The `i`-th client of the last wait and what it was found ready for.
    #[must_use]
    pub(crate) fn ready(&self, i: usize) -> (u64, Ready) {
        (self.ids[i], self.set.ready(i + 1))
    }
}

/// The connections holding queued replies, the most queued first and the oldest first
/// among equals: the order in which the bound on queued replies closes them.
pub(crate) fn most_queued_first(conns: &Conns) -> Vec<u64> {
    let mut by_size: Vec<(usize, u64)> = conns
        .iter()
        .filter(|(_, c)| c.held() > 0)
        .map(|(&id, c)| (c.held(), id))
        .collect();
    by_size.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    by_size.into_iter().map(|(_, id)| id).collect()
}

/// Gives a connection table's room back as its connections close: halved when under
/// a quarter full (the rehash is paid for by the closes since), as the engine's own
/// table does.
pub(crate) fn shrink_if_sparse<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    table: &mut HashMap<K, V, S>,
) {
    if table.capacity() > 64 && table.len() * 4 < table.capacity() {
        table.shrink_to(table.len() * 2);
    }
}

/// What epoll reported for a quiet client, as the `ppoll` set reports it: a hang-up or
/// an error reads as readable, so that reading finds the end or the failure.
pub(crate) fn ready_of(ev: &mio::event::Event) -> Ready {
    let closed = ev.is_read_closed() || ev.is_error();
    Ready {
        readable: ev.is_readable() || closed,
        writable: ev.is_writable() || ev.is_write_closed(),
        closed,
    }
}

/// A client's token with the poller: its id (ids start above the fixed tokens).
fn token(id: u64) -> Token {
    Token(usize::try_from(id).unwrap_or(usize::MAX))
}

fn interest(write: bool) -> Interest {
    if write {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    }
}

#[cfg(test)]
mod tests {
    use super::super::busy_poll::{BusyPoll, MAX_WINDOW};
    use super::super::listen::Stream;
    use super::{ClientWaits, Conn, Conns, FEW_CLIENTS, WaitState};
    use acm_engine::Instant;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    /// A loop's poller, its waits and one client (id 7) in the `ppoll` set; the
    /// client's peer is returned to send with.
    fn one_busy_client() -> (mio::Poll, ClientWaits, Conns, UnixStream) {
        let poll = mio::Poll::new().unwrap();
        let mut waits = ClientWaits::new();
        let mut conns = Conns::default();
        let peer = add_busy_client(&poll, &mut waits, &mut conns, 7);
        (poll, waits, conns, peer)
    }

    /// Client `id`, connected and read once (so in the `ppoll` set); its peer.
    fn add_busy_client(
        poll: &mio::Poll,
        waits: &mut ClientWaits,
        conns: &mut Conns,
        id: u64,
    ) -> UnixStream {
        let (ours, peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(Stream::Unix(mio::net::UnixStream::from_std(ours)));
        waits.add(poll.registry(), id, &mut conn).unwrap();
        waits.requested(poll.registry(), id, &mut conn, Instant::ZERO);
        assert!(matches!(conn.wait, WaitState::Ppoll { .. }));
        conns.insert(id, conn);
        peer
    }

    #[test]
    fn a_request_already_waiting_is_found_by_the_poll() {
        let (poll, mut waits, conns, mut peer) = one_busy_client();
        waits.busy_poll.slept(Duration::from_micros(10), true);
        let window = waits.busy_poll.window();
        assert!(!window.is_zero());
        peer.write_all(b"x").unwrap();
        waits
            .wait(
                poll.registry().as_fd(),
                &conns,
                Some(Duration::from_secs(5)),
            )
            .unwrap();
        assert_eq!(waits.waited(), 1);
        let (id, ready) = waits.ready(0);
        assert_eq!(id, 7);
        assert!(ready.readable);
        assert!(!waits.poller_ready());
        // A find never narrows the window.
        assert!(waits.busy_poll.window() >= window);
        assert!(!waits.served);
    }

    #[test]
    fn a_client_that_stops_sending_closes_the_window() {
        let (poll, mut waits, mut conns, _peer) = one_busy_client();
        waits.busy_poll = BusyPoll::new();
        waits.busy_poll.slept(MAX_WINDOW / 2, true);
        assert_eq!(waits.busy_poll.window(), MAX_WINDOW);
        let mut windows = Vec::new();
        for _ in 0..5 {
            // Each turn read the client, then nothing came for a millisecond, far past
            // the longest window.
            let conn = conns.get_mut(&7).unwrap();
            waits.requested(poll.registry(), 7, conn, Instant::ZERO);
            waits
                .wait(
                    poll.registry().as_fd(),
                    &conns,
                    Some(Duration::from_millis(1)),
                )
                .unwrap();
            assert!(!waits.ready(0).1.any());
            windows.push(waits.busy_poll.window());
        }
        assert_eq!(
            windows,
            [
                MAX_WINDOW / 2,
                MAX_WINDOW / 4,
                MAX_WINDOW / 8,
                Duration::ZERO,
                Duration::ZERO
            ]
        );
    }

    #[test]
    fn a_wait_after_a_turn_without_requests_learns_nothing() {
        let (poll, mut waits, conns, _peer) = one_busy_client();
        // The turn that added the client read it; that wait learns from its sleep.
        waits
            .wait(
                poll.registry().as_fd(),
                &conns,
                Some(Duration::from_millis(1)),
            )
            .unwrap();
        waits.busy_poll.slept(Duration::from_micros(10), true);
        let window = waits.busy_poll.window();
        // Nothing was read since: a wait that runs out its timeout leaves the window.
        waits
            .wait(
                poll.registry().as_fd(),
                &conns,
                Some(Duration::from_millis(1)),
            )
            .unwrap();
        assert_eq!(waits.busy_poll.window(), window);
    }

    #[test]
    fn with_many_busy_clients_a_wait_sleeps_at_once_and_learns_nothing() {
        let (poll, mut waits, mut conns, _peer) = one_busy_client();
        waits.busy_poll.slept(Duration::from_micros(10), true);
        let window = waits.busy_poll.window();
        assert!(!window.is_zero());
        // FEW_CLIENTS more busy clients, their peers kept open and silent.
        let _peers: Vec<UnixStream> = (8..8 + FEW_CLIENTS as u64)
            .map(|id| add_busy_client(&poll, &mut waits, &mut conns, id))
            .collect();
        assert_eq!(waits.busy.len(), FEW_CLIENTS + 1);
        // Nothing is ready: the wait sleeps out its timeout without a poll, and a gap
        // that long would have narrowed the window had it been taught.
        waits
            .wait(
                poll.registry().as_fd(),
                &conns,
                Some(Duration::from_millis(1)),
            )
            .unwrap();
        assert_eq!(waits.busy_poll.window(), window);
        assert!(!waits.served);
    }
}
