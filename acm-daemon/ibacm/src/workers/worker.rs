//! One worker thread: it owns a share of the client connections, reads their
//! requests, answers the cache hits from the engine's published view and forwards the
//! rest to the engine thread, and writes every reply, its own and the engine's, in
//! the order the connection is owed them.
//!
//! Order on a connection: a worker answers a request from the view only while the
//! engine owes the connection nothing ([`crate::conn::EngineOwes`]: no forwarded
//! request not yet taken, none the engine holds unanswered); otherwise the request
//! goes to the engine behind the others, which answers in the order the
//! single-threaded daemon would. The engine thread's notes say what it took and still
//! holds after the replies they follow.
//!
//! Waiting, reading and writing are the single-threaded loop's, per worker: busy
//! clients on `ppoll`, quiet ones on the worker's own epoll ([`crate::client_waits`]),
//! [`READ_BUDGET`] requests per connection per turn, a connection that does not read
//! its replies only stops its own requests being read ([`crate::conn`]), and so does
//! one with [`crate::conn::MAX_FORWARDED`] requests on their way to the engine.

use super::bound::Share;
use super::hits::HitTable;
use super::messages::{EngineNote, Frames, ToEngine, ToWorker};
use super::view_cell::{HeldView, ViewCell};
use crate::client_waits::{ClientWaits, Conns, most_queued_first, ready_of, shrink_if_sparse};
use crate::conn::{Conn, READ_BUDGET, READ_CHUNK, TRIM_AFTER_BYTES};
use acm_engine::{Instant, VIEW_REPLY_MAX, ViewAnswer};
use acm_io_verbs::poll_set::Ready;
use mio::{Events, Poll, Token, Waker};
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

/// The token of the waker the engine thread fires after sending to this worker;
/// connection ids start above it.
pub(crate) const WAKE: Token = Token(0);

/// Requests of all a worker's connections on their way to the engine beyond which the
/// worker reads no connection until the engine catches up: thousands of clients each
/// pipelining up to [`crate::conn::MAX_FORWARDED`] would otherwise queue a burst the
/// size of all of them at once (the single-threaded loop holds none: it hands each
/// read to the engine before the next).
pub(crate) const WORKER_FORWARD_LIMIT: u32 = 4 * 1024;

/// What a worker starts with.
pub(crate) struct Setup {
    /// Its own poller (the engine thread made it first, for the waker).
    pub poll: Poll,
    /// From the engine thread.
    pub inbox: Receiver<ToWorker>,
    /// To the engine thread, shared by all workers.
    pub to_engine: Sender<ToEngine>,
    /// Wakes the engine thread after sending to it.
    pub engine_waker: Arc<Waker>,
    /// Where the engine's view is published.
    pub view: Arc<ViewCell>,
    /// This worker's hit counts.
    pub hits: Arc<HitTable>,
    /// The bound on replies queued for clients, and this worker's share of it.
    pub share: Share,
    /// The engine's clock's origin.
    pub epoch: std::time::Instant,
}

/// A worker's state.
struct Worker {
    poll: Poll,
    inbox: Receiver<ToWorker>,
    to_engine: Sender<ToEngine>,
    engine_waker: Arc<Waker>,
    view: HeldView,
    hits: Arc<HitTable>,
    share: Share,
    epoch: std::time::Instant,
    conns: Conns,
    waits: ClientWaits,
    read_buf: Box<[u8]>,
    /// Where the view writes a reply.
    reply: Box<[u8; VIEW_REPLY_MAX]>,
    /// The replies the view gave to one read of one connection, written together.
    answered: Vec<u8>,
    /// Requests read this turn for the engine, in order.
    forwarded: Frames,
    /// Messages for the engine thread, sent at the end of the turn (in order).
    out: Vec<ToEngine>,
    /// Connections whose reading stopped before their socket ran dry.
    paused: Vec<u64>,
    /// Reply memory of connections closed since the heap was last trimmed.
    freed_since_trim: usize,
    /// Requests of all its connections forwarded and not yet taken by the engine.
    in_flight: u32,
}

/// Runs a worker until the engine thread says stop (or goes away).
pub(crate) fn run(setup: Setup) {
    let mut w = Worker {
        view: HeldView::new(setup.view),
        poll: setup.poll,
        inbox: setup.inbox,
        to_engine: setup.to_engine,
        engine_waker: setup.engine_waker,
        hits: setup.hits,
        share: setup.share,
        epoch: setup.epoch,
        conns: Conns::default(),
        waits: ClientWaits::new(),
        read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
        reply: Box::new([0; VIEW_REPLY_MAX]),
        answered: Vec::new(),
        forwarded: Frames::default(),
        out: Vec::new(),
        paused: Vec::new(),
        freed_since_trim: 0,
        in_flight: 0,
    };
    w.serve();
}

impl Worker {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn serve(&mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self.timeout();
            if let Err(e) = self
                .waits
                .wait(self.poll.registry().as_fd(), &self.conns, timeout)
                && e.kind() != io::ErrorKind::Interrupted
            {
                // Nothing else can fail a ppoll over valid descriptors; the engine
                // thread finds every client of this worker closed.
                self.close_all(&format!("worker cannot wait: {e}"));
                self.send_out();
                return;
            }
            let woke = self.now();
            self.view.refresh();
            let mut inbox = false;
            if self.waits.poller_ready() {
                if let Err(e) = self.poll.poll(&mut events, Some(Duration::ZERO))
                    && e.kind() != io::ErrorKind::Interrupted
                {
                    self.close_all(&format!("worker cannot poll: {e}"));
                    self.send_out();
                    return;
                }
                for ev in &events {
                    if ev.token() == WAKE {
                        inbox = true;
                        continue;
                    }
                    self.serve_client(ev.token().0 as u64, ready_of(ev), woke);
                }
            } else {
                events.clear();
            }
            for i in 0..self.waits.waited() {
                let (id, ready) = self.waits.ready(i);
                if ready.any() {
                    self.serve_client(id, ready, woke);
                }
            }
            if inbox && self.take_inbox() {
                self.close_all("the daemon is stopping");
                self.send_out();
                return;
            }
            self.revisit_paused();
            let now = self.now();
            for id in self.waits.sweep(self.poll.registry(), &mut self.conns, now) {
                self.close(id, "cannot watch client".into());
            }
            self.cut_if_over();
            self.send_out();
            self.trim_heap();
        }
    }

    /// No sleep while a paused connection can be read; otherwise until woken.
    fn timeout(&self) -> Option<Duration> {
        let readable = self.may_forward()
            && self
                .paused
                .iter()
                .any(|id| self.conns.get(id).is_some_and(Conn::wants_read));
        readable.then_some(Duration::ZERO)
    }

    /// Writes what waits for client `id` if it can take it, and reads its requests if
    /// it sent some (or hung up).
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

    /// Reads client `id`'s requests: the view answers what it can while the engine
    /// owes the connection nothing; from the first it cannot, the rest go to the
    /// engine.
    fn read(&mut self, id: u64, now: Instant) {
        if !self.may_forward() {
            // Read once the engine has caught up (its notes wake this worker).
            if self.conns.contains_key(&id) && !self.paused.contains(&id) {
                self.paused.push(id);
            }
            return;
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let mut forwarding = conn.owes.any();
        let before = self.forwarded.len();
        let (view, hits, reply) = (self.view.get(), &self.hits, &mut self.reply);
        let (answered, forwarded) = (&mut self.answered, &mut self.forwarded);
        let r = conn.read_requests(&mut self.read_buf, READ_BUDGET, |bytes| {
            if !forwarding {
                // Counted before the reply is written: a PERF_QUERY the client sends
                // after reading it sees the hit.
                if let ViewAnswer::Hit { len, ep } = view.answer(now, bytes, reply)
                    && hits.count(ep)
                {
                    answered.extend_from_slice(&reply[..len]);
                    return;
                }
                forwarding = true;
            }
            forwarded.push(id, bytes);
        });
        let n = u32::try_from(self.forwarded.len() - before).unwrap_or(u32::MAX);
        conn.owes.forwarded += n;
        self.in_flight += n;
        let sent = if self.answered.is_empty() {
            Ok(())
        } else {
            let held = conn.held();
            let sent = conn.send(&self.answered);
            self.share.changed(held, conn.held());
            self.answered.clear();
            sent
        };
        if !r.closed {
            self.waits.requested(self.poll.registry(), id, conn, now);
        }
        if r.paused && !self.paused.contains(&id) {
            self.paused.push(id);
        }
        if let Err(e) = sent {
            self.close(id, format!("send failed: {e}"));
        } else if let Err(e) = self.sync_write(id) {
            self.close(id, e);
        } else if r.closed {
            self.close(id, "connection closed by the client".into());
        }
    }

    fn flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let held = conn.held();
        let r = conn.flush();
        self.share.changed(held, conn.held());
        if let Err(e) = r {
            self.close(id, format!("send failed: {e}"));
        } else if let Err(e) = self.sync_write(id) {
            self.close(id, e);
        }
    }

    /// Keeps the client's wait for writability in step with its queued replies.
    fn sync_write(&mut self, id: u64) -> Result<(), String> {
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        self.waits
            .sync_write(self.poll.registry(), id, conn)
            .map_err(|e| format!("cannot watch client: {e}"))
    }

    /// Writes a reply the engine gave.
    fn write(&mut self, id: u64, bytes: &[u8]) {
        let Some(conn) = self.conns.get_mut(&id) else {
            // Closed meanwhile: the engine hears of it from the close.
            return;
        };
        let held = conn.held();
        let sent = conn.send(bytes);
        self.share.changed(held, conn.held());
        if let Err(e) = sent {
            self.close(id, format!("send failed: {e}"));
        } else if let Err(e) = self.sync_write(id) {
            self.close(id, e);
        }
    }

    /// Handles what the engine thread sent; `true` when it says stop.
    fn take_inbox(&mut self) -> bool {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                ToWorker::Add { id, mut conn } => {
                    match self.waits.add(self.poll.registry(), id, &mut conn) {
                        Ok(()) => {
                            self.conns.insert(id, *conn);
                        }
                        Err(e) => self.out.push(ToEngine::Closed {
                            id,
                            why: format!("cannot watch client: {e}"),
                        }),
                    }
                }
                ToWorker::Notes { notes, bytes } => {
                    let mut at = 0;
                    for note in notes {
                        if let EngineNote::Reply { id, len } = note {
                            self.write(id, &bytes[at..at + len]);
                            at += len;
                        } else {
                            self.take_note(note);
                        }
                    }
                }
                ToWorker::Close { id, why } => self.close(id, why),
                ToWorker::Bound => self.cut_if_over(),
                ToWorker::Stop => return true,
            }
        }
        false
    }

    fn take_note(&mut self, note: EngineNote) {
        match note {
            // Taken with the message's bytes, above.
            EngineNote::Reply { .. } => {}
            EngineNote::Settled { id, taken, pending } => {
                // A connection that stopped reading on MAX_FORWARDED is in `paused`
                // and is read again at the end of this turn.
                if let Some(c) = self.conns.get_mut(&id) {
                    let taken = taken.min(c.owes.forwarded);
                    c.owes.forwarded -= taken;
                    c.owes.pending = pending;
                    self.in_flight -= taken;
                }
            }
            EngineNote::Close { id } => self.close(id, "closed after a malformed request".into()),
        }
    }

    fn revisit_paused(&mut self) {
        if !self.may_forward() {
            return;
        }
        let ids = std::mem::take(&mut self.paused);
        for id in ids {
            match self.conns.get(&id) {
                Some(c) if c.wants_read() => {
                    let now = self.now();
                    self.read(id, now);
                }
                Some(_) => self.paused.push(id),
                None => {}
            }
        }
    }

    /// Closes this worker's connections that queue the most while its queued replies
    /// are over its share of the bound (see [`super::bound`]).
    fn cut_if_over(&mut self) {
        let Some((over, target)) = self.share.over() else {
            return;
        };
        let mut closed = Vec::new();
        for id in most_queued_first(&self.conns) {
            if self.share.queued() <= target {
                break;
            }
            self.close(
                id,
                "closed: not reading its replies while max_queued_reply_bytes was reached".into(),
            );
            closed.push(id);
        }
        self.paused.retain(|id| self.conns.contains_key(id));
        if !closed.is_empty() {
            self.out.push(ToEngine::Cut {
                closed,
                over,
                left: self.share.queued(),
            });
        }
    }

    /// Drops connection `id` and tells the engine thread, after the requests it
    /// forwarded for it.
    fn close(&mut self, id: u64, why: String) {
        if let Some(mut conn) = self.conns.remove(&id) {
            self.in_flight -= conn.owes.forwarded;
            shrink_if_sparse(&mut self.conns);
            self.waits.remove(self.poll.registry(), id, &mut conn);
            self.share.changed(conn.held(), 0);
            self.freed_since_trim += conn.footprint();
            self.seal_requests();
            self.out.push(ToEngine::Closed { id, why });
        }
    }

    fn close_all(&mut self, why: &str) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(id, why.into());
        }
    }

    /// Whether connections may be read: the engine has taken all but
    /// [`WORKER_FORWARD_LIMIT`] of this worker's forwarded requests.
    fn may_forward(&self) -> bool {
        self.in_flight < WORKER_FORWARD_LIMIT
    }

    /// Moves the requests read so far into the messages for the engine thread.
    fn seal_requests(&mut self) {
        if !self.forwarded.is_empty() {
            self.out
                .push(ToEngine::Requests(std::mem::take(&mut self.forwarded)));
        }
    }

    /// Sends this turn's messages to the engine thread and wakes it once.
    fn send_out(&mut self) {
        self.seal_requests();
        if self.out.is_empty() {
            return;
        }
        for msg in self.out.drain(..) {
            // The engine thread only goes away after telling the workers to stop.
            let _ = self.to_engine.send(msg);
        }
        let _ = self.engine_waker.wake();
    }

    /// Gives the heap's free pages back once closed connections freed a megabyte (as
    /// the single-threaded loop does), or a sixteenth of that when the last of this
    /// worker's connections went: what passed through the engine thread for them (its
    /// notes, their requests) was freed meanwhile, which the engine thread's own
    /// trims no longer follow.
    fn trim_heap(&mut self) {
        let freed = self.freed_since_trim;
        let after = TRIM_AFTER_BYTES;
        if freed >= after || (self.conns.is_empty() && freed >= after / 16) {
            self.freed_since_trim = 0;
            let _ = acm_io_verbs::heap::give_back_free_memory();
        }
    }
}
