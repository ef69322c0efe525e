//! One client: one connection, on its own thread, keeping up to `--pipeline` requests
//! in flight and timing each from just before its write to the end of its reply.
//!
//! Every request is one `write` of the whole message, as libacm does (the reference
//! daemon reads each request with a single `recv`). Replies are framed by their header's
//! length field and matched to requests by tid: each request carries a tid unique in the
//! run (client number in the top 24 bits, a sequence number below), which daemons echo.
//! When the server closes the connection or a reply times out, the requests in flight
//! are counted as failed ([`ErrorKind`]) and the client connects again; if that fails,
//! the client stops.

use super::mix::{Kind, Mix, Picker};
use super::requests::Templates;
use super::stats::{ErrorKind, Stats};
use super::target::{Stream, Target};
use acm_proto::BYTES64_LEN;
use acm_proto::client::{
    ENTRY_LEN, EP_CONFIG_LEN, FrameError, HEADER_LEN, HeaderPacket, MAX_REQUEST_LEN, Operation,
    reply_len,
};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Size of a client's receive buffer: the longest reply a header can announce.
const INBUF: usize = 64 * 1024;
/// Answered requests a client counts before adding them to the shared progress
/// counter (one atomic operation per batch instead of per request).
const PROGRESS_BATCH: u64 = 64;

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many requests in all. Each client sends its share (`count / clients`,
    /// one more for the first `count % clients`), so with a fixed mix the number of
    /// requests of each kind is the same from run to run.
    Count(u64),
    /// After this long, counted by each client from the common start.
    Duration(Duration),
}

/// What one client is to do.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Client number, 0-based.
    pub id: u32,
    /// How many clients the run has (the stride through the destination lists).
    pub clients: u32,
    /// The server.
    pub target: Target,
    /// The request bytes.
    pub templates: Arc<Templates>,
    /// Which kinds, in what proportion.
    pub mix: Mix,
    /// Requests in flight at once (at least 1).
    pub pipeline: usize,
    /// When to stop.
    pub stop: Stop,
    /// Longest wait for a reply (and for a write, and for a TCP connect).
    pub timeout: Duration,
    /// Resolve this client's share of the `--dst` destinations once before the start.
    pub warmup: bool,
}

/// What the clients share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Requests finished (answered or failed), for the progress bar; updated in batches.
    pub done: AtomicU64,
    /// When the timed part began: set by the first thread past the barrier, so that
    /// every client's deadline and the run's elapsed time count from the same instant
    /// (a thread scheduled late would otherwise start its clock late).
    pub start: std::sync::OnceLock<Instant>,
}

struct Pending {
    tid: u64,
    kind: Kind,
    operation: u8,
    sent: Instant,
}

struct Client<'a> {
    plan: &'a Plan,
    shared: &'a Shared,
    stats: Stats,
    stream: Option<Stream>,
    inbuf: Box<[u8]>,
    start: usize,
    end: usize,
    in_flight: Vec<Pending>,
    picker: Picker,
    cursors: [usize; Kind::ALL.len()],
    next_seq: u64,
    /// Requests of the timed part sent so far.
    sent: u64,
    sendbuf: [u8; MAX_REQUEST_LEN],
    unreported: u64,
    warming: bool,
}

/// Runs one client: connect, warm up, wait at `barrier` with the others, then send until
/// the plan says stop and every reply is in. Returns what it counted. The barrier is
/// always reached, even when the connect fails, so the other clients never wait for it.
#[must_use]
pub(crate) fn run(plan: &Plan, shared: &Shared, barrier: &Barrier) -> Stats {
    let mut c = Client {
        plan,
        shared,
        stats: Stats::new(&plan.mix),
        stream: None,
        inbuf: vec![0u8; INBUF].into_boxed_slice(),
        start: 0,
        end: 0,
        in_flight: Vec::with_capacity(plan.pipeline),
        picker: Picker::new(&plan.mix, u64::from(plan.id)),
        cursors: [plan.id as usize; Kind::ALL.len()],
        next_seq: 0,
        sent: 0,
        sendbuf: [0u8; MAX_REQUEST_LEN],
        unreported: 0,
        warming: false,
    };
    let connected = c.connect();
    if connected && plan.warmup {
        c.warm_up();
    }
    barrier.wait();
    if connected {
        c.load();
    }
    if let Some(s) = c.stream.take() {
        s.close();
    }
    c.report_done();
    c.stats
}

impl Client<'_> {
    fn connect(&mut self) -> bool {
        match self.plan.target.connect(self.plan.timeout) {
            Ok(s) => {
                self.stream = Some(s);
                self.stats.connects += 1;
                true
            }
            Err(_) => {
                self.stats.connect_failures += 1;
                false
            }
        }
    }

    /// Sends this client's share of the destinations that should resolve, one at a
    /// time, so that the run measures cache hits. Counted apart from the run.
    fn warm_up(&mut self) {
        let count = self.plan.templates.count(Kind::Hit);
        let (id, stride) = (self.plan.id as usize, self.plan.clients as usize);
        let run_stats = std::mem::replace(&mut self.stats, Stats::new(&Mix::only(Kind::Hit)));
        self.warming = true;
        for i in (id..count).step_by(stride.max(1)) {
            if self.stream.is_none() && !self.reconnect() {
                break;
            }
            self.send(Kind::Hit, i);
            while !self.in_flight.is_empty() {
                self.receive();
            }
        }
        self.warming = false;
        let warm = std::mem::replace(&mut self.stats, run_stats);
        let t = warm.total();
        self.stats.warmup_requests += t.sent;
        self.stats.warmup_failures += t.sent - t.ok;
        self.stats.connects += warm.connects;
        self.stats.reconnects += warm.reconnects;
        self.stats.connect_failures += warm.connect_failures;
    }

    fn reconnect(&mut self) -> bool {
        let ok = self.connect();
        if ok {
            self.stats.reconnects += 1;
        }
        ok
    }

    /// The timed part: keep the pipeline full until the plan says stop, then collect
    /// the replies still due.
    fn load(&mut self) {
        let start = *self.shared.start.get_or_init(Instant::now);
        let deadline = match self.plan.stop {
            Stop::Duration(d) => Some(start + d),
            Stop::Count(_) => None,
        };
        let mut sending = true;
        loop {
            while sending && self.in_flight.len() < self.plan.pipeline {
                if !self.has_more(deadline) || (self.stream.is_none() && !self.reconnect()) {
                    sending = false;
                    break;
                }
                let kind = self.picker.next_kind();
                let i = self.cursors[kind.index()];
                self.cursors[kind.index()] = i.wrapping_add(self.plan.clients as usize);
                self.sent += 1;
                self.send(kind, i);
            }
            if self.in_flight.is_empty() {
                if sending {
                    continue;
                }
                return;
            }
            self.receive();
        }
    }

    /// Whether this client has more requests to send.
    fn has_more(&self, deadline: Option<Instant>) -> bool {
        match (self.plan.stop, deadline) {
            (Stop::Count(n), _) => self.sent < share(n, self.plan.id, self.plan.clients),
            (Stop::Duration(_), Some(d)) => Instant::now() < d,
            (Stop::Duration(_), None) => false,
        }
    }

    /// Writes request `i` of `kind` with a fresh tid.
    fn send(&mut self, kind: Kind, i: usize) {
        let template = self.plan.templates.get(kind, i);
        let n = template.len();
        self.sendbuf[..n].copy_from_slice(template);
        let tid = (u64::from(self.plan.id) << 40) | (self.next_seq & ((1 << 40) - 1));
        self.next_seq += 1;
        HeaderPacket::new_unchecked(&mut self.sendbuf[..n]).set_tid(tid);
        self.stats.sent(kind);
        let Some(stream) = self.stream.as_mut() else {
            self.stats.failed(kind, ErrorKind::Closed);
            return;
        };
        let sent = Instant::now();
        match stream.write_all(&self.sendbuf[..n]) {
            Ok(()) => self.in_flight.push(Pending {
                tid,
                kind,
                operation: HeaderPacket::new_unchecked(template).opcode().operation().0,
                sent,
            }),
            Err(e) => {
                let why = match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ErrorKind::Timeout,
                    io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted => ErrorKind::Closed,
                    _ => ErrorKind::Io,
                };
                self.stats.failed(kind, why);
                self.finish_one();
                self.drop_connection(why);
            }
        }
    }

    /// Handles one reply, reading as much as the socket has if none is buffered; or
    /// ends the connection, failing every request in flight, when the socket does.
    fn receive(&mut self) {
        loop {
            if self.take_frame() {
                return;
            }
            if self.start > 0 {
                self.inbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let Some(stream) = self.stream.as_mut() else {
                self.drop_connection(ErrorKind::Closed);
                return;
            };
            match stream.read(&mut self.inbuf[self.end..]) {
                Ok(0) => {
                    let why = self.ended_mid_reply();
                    self.drop_connection(why);
                    return;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    self.drop_connection(ErrorKind::Timeout);
                    return;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    let why = self.ended_mid_reply();
                    self.drop_connection(why);
                    return;
                }
                Err(_) => {
                    self.drop_connection(ErrorKind::Io);
                    return;
                }
            }
        }
    }

    /// How the connection's end counts: in the middle of a reply it is `Short`.
    fn ended_mid_reply(&self) -> ErrorKind {
        if self.end > self.start {
            ErrorKind::Short
        } else {
            ErrorKind::Closed
        }
    }

    /// Takes one whole reply out of the buffer, if there is one; `true` when something
    /// was done (a reply counted, or the connection given up as unframeable).
    fn take_frame(&mut self) -> bool {
        let avail = self.end - self.start;
        let len = match reply_len(&self.inbuf[self.start..self.end]) {
            Ok(len) => len,
            Err(FrameError::ShortHeader) => return false,
            Err(_) => {
                // Nothing after this can be framed.
                self.drop_connection(ErrorKind::Short);
                return true;
            }
        };
        if avail < len {
            return false;
        }
        let now = Instant::now();
        let frame = &self.inbuf[self.start..self.start + len];
        let tid = HeaderPacket::new_unchecked(frame).tid();
        match self.in_flight.iter().position(|p| p.tid == tid) {
            None => self.stats.unexpected_replies += 1,
            Some(i) => {
                let p = self.in_flight.swap_remove(i);
                match check_reply(frame, p.operation) {
                    Ok(status) => {
                        let nanos = u64::try_from((now - p.sent).as_nanos()).unwrap_or(u64::MAX);
                        self.stats.answered(p.kind, status, nanos);
                    }
                    Err(why) => self.stats.failed(p.kind, why),
                }
                self.finish_one();
            }
        }
        self.start += len;
        true
    }

    /// Fails every request in flight for `why` and closes the connection.
    fn drop_connection(&mut self, why: ErrorKind) {
        for p in std::mem::take(&mut self.in_flight) {
            self.stats.failed(p.kind, why);
            self.finish_one();
        }
        if let Some(s) = self.stream.take() {
            s.close();
        }
        self.start = 0;
        self.end = 0;
    }

    fn finish_one(&mut self) {
        if self.warming {
            return;
        }
        self.unreported += 1;
        if self.unreported >= PROGRESS_BATCH {
            self.report_done();
        }
    }

    fn report_done(&mut self) {
        self.shared
            .done
            .fetch_add(std::mem::take(&mut self.unreported), Ordering::Relaxed);
    }
}

/// Client `id`'s share of `count` requests among `clients`.
#[must_use]
pub(crate) fn share(count: u64, id: u32, clients: u32) -> u64 {
    let clients = u64::from(clients.max(1));
    count / clients + u64::from(u64::from(id) < count % clients)
}

/// Checks that `reply` answers a request of `operation`: its status, or why it is no
/// usable answer. Error replies (status ≠ 0) are taken whatever their body; a success
/// must carry what its operation returns (whole 72-byte entries, at least one, for
/// RESOLVE; whole 8-byte counters, at least one, for PERF_QUERY; an endpoint
/// configuration and whole 64-byte address strings for EP_QUERY).
///
/// # Errors
/// [`ErrorKind::Malformed`] or [`ErrorKind::Short`].
pub(crate) fn check_reply(reply: &[u8], operation: u8) -> Result<u8, ErrorKind> {
    let p = HeaderPacket::new_unchecked(reply);
    if p.version() != acm_proto::client::ACM_VERSION || p.opcode().operation().0 != operation {
        return Err(ErrorKind::Malformed);
    }
    let status = p.status().0;
    if status != 0 {
        return Ok(status);
    }
    let body = reply.len() - HEADER_LEN;
    let (min, unit, base) = match Operation(operation) {
        Operation::RESOLVE => (ENTRY_LEN, ENTRY_LEN, 0),
        Operation::PERF_QUERY => (8, 8, 0),
        Operation::EP_QUERY => (EP_CONFIG_LEN, BYTES64_LEN, EP_CONFIG_LEN),
        _ => return Err(ErrorKind::Malformed),
    };
    if body < min {
        return Err(ErrorKind::Short);
    }
    if !(body - base).is_multiple_of(unit) {
        return Err(ErrorKind::Malformed);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(op: u8, status: u8, body: usize) -> Vec<u8> {
        let len = (HEADER_LEN + body) as u16;
        let mut r = vec![0u8; HEADER_LEN + body];
        let mut h = HeaderPacket::new_unchecked(&mut r[..]);
        h.set_version(acm_proto::client::ACM_VERSION);
        h.set_opcode(acm_proto::client::Opcode(op));
        h.set_status(acm_proto::client::Status(status));
        h.set_length(acm_proto::client::Direction::Response, len);
        r
    }

    #[test]
    fn replies_are_checked_against_their_request() {
        assert_eq!(check_reply(&reply(0x01, 0, 72), 1), Ok(0));
        assert_eq!(check_reply(&reply(0x81, 3, 0), 1), Ok(3));
        assert_eq!(check_reply(&reply(0x01, 0, 0), 1), Err(ErrorKind::Short));
        assert_eq!(
            check_reply(&reply(0x01, 0, 80), 1),
            Err(ErrorKind::Malformed)
        );
        assert_eq!(check_reply(&reply(0x82, 0, 56), 2), Ok(0));
        assert_eq!(
            check_reply(&reply(0x82, 0, 57), 2),
            Err(ErrorKind::Malformed)
        );
        assert_eq!(check_reply(&reply(0x83, 0, 80 + 3 * 64), 3), Ok(0));
        assert_eq!(check_reply(&reply(0x83, 2, 0), 3), Ok(2));
        assert_eq!(
            check_reply(&reply(0x82, 0, 56), 1),
            Err(ErrorKind::Malformed)
        );
        let mut v2 = reply(0x01, 0, 72);
        v2[0] = 2;
        assert_eq!(check_reply(&v2, 1), Err(ErrorKind::Malformed));
    }

    #[test]
    fn shares_add_up() {
        assert_eq!(
            (0..4).map(|i| share(2000, i, 4)).collect::<Vec<_>>(),
            [500; 4]
        );
        assert_eq!(
            (0..3).map(|i| share(10, i, 3)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..4).map(|i| share(2, i, 4)).sum::<u64>(), 2);
    }
}
