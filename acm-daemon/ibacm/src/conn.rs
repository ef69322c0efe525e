//! One client connection: framing of the byte stream into requests, and a bounded
//! queue of replies for a client that does not read them fast enough.
//!
//! Framing reads the 16-byte header, then the rest of what its length field announces, by
//! acm-proto's rule ([`request_len`]: host order for RESOLVE, big-endian otherwise;
//! docs/protocol/client-messages.md §2), the same rule the engine checks whole requests
//! with. A header that no request can have (wrong version, unknown operation, a length
//! under 16 or over 592) is handed to the engine as it is, and the engine closes the
//! connection without a reply, as the reference does. A peer that stops halfway through a
//! message only ever delays itself.

use super::access::Peer;
use super::listen::Stream;
use acm_proto::client::{HEADER_LEN, MAX_REQUEST_LEN, request_len};
// The client sockets are read and written with the system calls themselves, not
// glibc's cancellable wrappers (`acm_io_verbs::sock_io` says why).
use acm_io_verbs::sock_io;
use std::io;
use std::os::fd::AsFd;

/// Requests read from one connection before the others get their turn.
pub(crate) const READ_BUDGET: usize = 64;

/// Requests of one connection on their way from a worker to the engine (forwarded,
/// not yet taken) beyond which the worker stops reading that connection until the
/// engine catches up: a client pipelining requests the cache view cannot answer
/// cannot make the worker hold an unbounded queue of them (see
/// [`super::workers::worker`]).
pub(crate) const MAX_FORWARDED: u32 = READ_BUDGET as u32;

/// Reply memory freed by closed connections after which the heap is trimmed: a
/// megabyte, so that ordinary clients coming and going (a few KiB each) never pay for a
/// trim while a wave of non-reading clients gives its memory back.
pub(crate) const TRIM_AFTER_BYTES: usize = 1 << 20;

/// Replies waiting for a slow reader, in bytes, beyond which the daemon stops reading
/// that client's requests until it catches up. Every request already read still gets
/// its reply, so the queue's growth is bounded by the engine's per-connection limit.
pub(crate) const BACKLOG_LIMIT: usize = 64 * 1024;

/// The size of one read from a client socket, and the least size of the event loop's
/// read buffer that [`Conn::read_requests`] frames requests in. Several of the largest
/// requests fit, so a client that sends a burst is read in few calls.
pub(crate) const READ_CHUNK: usize = 4096;
const _: () = assert!(READ_CHUNK > MAX_REQUEST_LEN);

/// The step the output buffer grows by, rather than doubling, which would let a full
/// backlog hold up to twice what it queues (128 KiB for 64 KiB). The buffer is freed
/// whenever it drains: a client that reads its replies holds none.
const OUTBUF_STEP: usize = 16 * 1024;

/// What a read produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadOutcome {
    /// The peer closed its side (or the connection failed).
    pub closed: bool,
    /// Reading stopped before the socket ran dry (the budget was spent or the reply
    /// backlog is over its limit): the caller must come back, since the poller will
    /// not report the socket readable again.
    pub paused: bool,
}

/// A connected client.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: Stream,
    /// Bytes read but not yet handed on: part of a request, or whole requests past
    /// the read budget. Empty (and unallocated) for a client between requests.
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// Set after a header no request can have: nothing more is read (replies owed to
    /// earlier requests still go out until the engine's close arrives).
    closing: bool,
    /// The peer shut down its side: read to the end of the stream this time.
    peer_closed: bool,
    /// Who connected, from `SO_PEERCRED` (`None`: a TCP client, or credentials that
    /// could not be read): what its user's connection count and a reload's
    /// allow-lists go by.
    peer: Option<Peer>,
    /// How the event loop waits on this client (see [`super::client_waits`]).
    pub wait: WaitState,
    /// With worker threads, what the engine owes this connection (always nothing
    /// without them).
    pub owes: EngineOwes,
}

/// The requests of a worker's connection that the engine has not answered yet: while
/// there are any, the worker answers nothing from the cache view, so that replies keep
/// the order the engine gives them (see [`super::workers::worker`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EngineOwes {
    /// Forwarded to the engine thread, not yet handed to the engine.
    pub forwarded: u32,
    /// Held by the engine unanswered, as its thread last said.
    pub pending: u32,
}

impl EngineOwes {
    /// Whether the engine owes anything.
    #[must_use]
    pub(crate) const fn any(self) -> bool {
        self.forwarded > 0 || self.pending > 0
    }
}

/// Where a client is waited on: the event loop's `ppoll` set while it is busy, epoll
/// while it is quiet ([`super::client_waits`] says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitState {
    /// Registered with epoll; `write` says whether for writability too.
    Epoll {
        /// Registered for writability as well as readability.
        write: bool,
    },
    /// In the `ppoll` set, since it sent a request at `last_request`.
    Ppoll {
        /// When its last request was read (the engine's clock).
        last_request: acm_engine::Instant,
    },
}

impl Conn {
    /// A new connection on `stream`.
    #[must_use]
    pub(crate) fn new(stream: Stream) -> Self {
        Self {
            stream,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            closing: false,
            peer_closed: false,
            peer: None,
            wait: WaitState::Epoll { write: false },
            owes: EngineOwes::default(),
        }
    }

    /// The connection of `peer`.
    #[must_use]
    pub(crate) fn with_peer(mut self, peer: Option<Peer>) -> Self {
        self.peer = peer;
        self
    }

    /// Who connected, if known.
    #[must_use]
    pub(crate) const fn peer(&self) -> Option<Peer> {
        self.peer
    }

    /// The poller reported that the peer closed its side: the next read goes on to
    /// the end of the stream instead of stopping at a short read.
    pub(crate) fn note_peer_closed(&mut self) {
        self.peer_closed = true;
    }

    /// The socket's descriptor, for the set the event loop waits on.
    #[must_use]
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// The socket as mio sees it, for [`super::client_waits`] to register with the
    /// poller.
    pub(crate) fn source(&mut self) -> &mut dyn mio::event::Source {
        match &mut self.stream {
            Stream::Unix(s) => s,
            Stream::Tcp(s) => s,
        }
    }

    /// Whether requests should be read now: the reply backlog is under its limit, and
    /// so are the requests on their way to the engine
    /// ([`MAX_FORWARDED`]).
    #[must_use]
    pub(crate) fn wants_read(&self) -> bool {
        !self.closing && self.outbuf.len() < BACKLOG_LIMIT && self.owes.forwarded < MAX_FORWARDED
    }

    /// The memory holding replies waiting to be written, in bytes (what the daemon's
    /// bound on queued replies counts): the output buffer's capacity, 0 when nothing
    /// waits.
    #[must_use]
    pub(crate) fn held(&self) -> usize {
        self.outbuf.capacity()
    }

    /// The memory this connection holds: its state, and its input and output buffers.
    #[must_use]
    pub(crate) fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() + self.inbuf.capacity() + self.outbuf.capacity()
    }

    /// Whether replies are waiting for the socket to become writable (the event loop
    /// waits for writability only then, so that a client reading its replies does not
    /// wake it for nothing).
    #[must_use]
    pub(crate) fn wants_write(&self) -> bool {
        !self.outbuf.is_empty()
    }

    /// Reads what the socket has, handing each complete request to `on_request`, at
    /// most `budget` of them so that one busy client cannot starve the others.
    ///
    /// Requests are framed in place in `scratch`, the event loop's one read buffer
    /// (at least [`READ_CHUNK`] bytes, shared by every connection): a request that
    /// arrives whole in one read is neither zeroed nor copied before the engine sees
    /// it. Only what is left over (part of a request, or requests beyond the budget)
    /// is kept with the connection until its next read.
    ///
    /// A read that returns less than asked for has emptied the socket; later bytes
    /// make the socket readable again for the event loop's next wait, so it stops
    /// there instead of paying one more `read` for `WouldBlock` (that read would double
    /// the system calls of a client with one request in flight). After the peer closed
    /// its side it reads on to the end of the stream.
    ///
    /// # Panics
    /// `scratch` is shorter than [`READ_CHUNK`].
    pub(crate) fn read_requests(
        &mut self,
        scratch: &mut [u8],
        budget: usize,
        mut on_request: impl FnMut(&[u8]),
    ) -> ReadOutcome {
        assert!(scratch.len() >= READ_CHUNK, "read buffer too small");
        let scratch = &mut scratch[..READ_CHUNK];
        // What the last read left over comes first.
        let carried = std::mem::take(&mut self.inbuf);
        let (mut start, mut end) = (0, carried.len());
        scratch[..end].copy_from_slice(&carried);
        let mut left = budget;
        let mut drained = false;
        let outcome = loop {
            let (used, n) = self.deliver(&scratch[start..end], left, &mut on_request);
            start += used;
            left -= n;
            if left == 0 || !self.wants_read() {
                break ReadOutcome {
                    closed: false,
                    paused: !self.closing,
                };
            }
            if drained {
                break ReadOutcome::default();
            }
            // What is left is part of one request (shorter than the largest), so the
            // room after it is never empty and a read of 0 bytes means end of stream.
            debug_assert!(end - start < MAX_REQUEST_LEN);
            scratch.copy_within(start..end, 0);
            (start, end) = (0, end - start);
            match sock_io::recv(self.stream.as_fd(), &mut scratch[end..]) {
                Ok(0) => {
                    break ReadOutcome {
                        closed: true,
                        paused: false,
                    };
                }
                Ok(n) => {
                    drained = end + n < READ_CHUNK && !self.peer_closed;
                    end += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    break ReadOutcome::default();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    break ReadOutcome {
                        closed: true,
                        paused: false,
                    };
                }
            }
        };
        if start < end && !outcome.closed {
            // Reuse the carried allocation when there was one; a connection that
            // keeps nothing over holds no input buffer at all.
            let mut keep = carried;
            keep.clear();
            keep.extend_from_slice(&scratch[start..end]);
            self.inbuf = keep;
        }
        outcome
    }

    /// Hands up to `max` complete messages at the front of `bytes` to `on_request`;
    /// returns the bytes they took and how many there were.
    fn deliver(
        &mut self,
        bytes: &[u8],
        max: usize,
        on_request: &mut impl FnMut(&[u8]),
    ) -> (usize, usize) {
        let (mut start, mut n) = (0, 0);
        while n < max && bytes.len() - start >= HEADER_LEN {
            let header = &bytes[start..start + HEADER_LEN];
            let Ok(len) = request_len(header) else {
                // A header no request can have goes to the engine as it is, which
                // closes the connection; nothing after it is read.
                on_request(header);
                self.closing = true;
                start += HEADER_LEN;
                n += 1;
                break;
            };
            if bytes.len() - start < len {
                break;
            }
            on_request(&bytes[start..start + len]);
            start += len;
            n += 1;
        }
        (start, n)
    }

    /// Queues `reply`, writing it at once when nothing is queued before it (one write
    /// per reply in the usual case).
    ///
    /// # Errors
    /// The socket failed; the connection must be dropped.
    pub(crate) fn send(&mut self, reply: &[u8]) -> io::Result<()> {
        if self.outbuf.is_empty() {
            match sock_io::send(self.stream.as_fd(), reply) {
                Ok(n) if n == reply.len() => return Ok(()),
                Ok(n) => self.queue(&reply[n..]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.queue(reply),
                Err(e) => return Err(e),
            }
        } else {
            self.queue(reply);
        }
        Ok(())
    }

    /// Appends `bytes` to the output buffer, growing it by [`OUTBUF_STEP`] at a time.
    fn queue(&mut self, bytes: &[u8]) {
        let need = self.outbuf.len() + bytes.len();
        if need > self.outbuf.capacity() {
            let extra = (need - self.outbuf.len()).next_multiple_of(OUTBUF_STEP);
            self.outbuf.reserve_exact(extra);
        }
        self.outbuf.extend_from_slice(bytes);
    }

    /// Writes queued replies while the socket takes them.
    ///
    /// # Errors
    /// The socket failed; the connection must be dropped.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        while !self.outbuf.is_empty() {
            match sock_io::send(self.stream.as_fd(), &self.outbuf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.outbuf = Vec::new();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    use acm_proto::client::{Direction, HeaderPacket, Opcode};

    /// A request header (version 1) announcing `len` bytes; the header rules themselves
    /// are tested with `request_len` in acm-proto.
    fn header(opcode: Opcode, len: u16) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        let mut p = HeaderPacket::new_unchecked(&mut h[..]);
        p.set_version(1);
        p.set_opcode(opcode);
        p.set_length(Direction::Request, len);
        h
    }

    #[test]
    fn a_stream_is_split_into_messages_across_reads() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(Stream::Unix(mio::net::UnixStream::from_std(a)));
        let mut scratch = [0u8; READ_CHUNK];
        let mut b = b;
        let mut msg = header(Opcode::PERF_QUERY, 16).to_vec();
        msg.extend_from_slice(&header(Opcode::RESOLVE, 24));
        msg.extend_from_slice(&[7; 8]);
        // Half of the second message now, the rest later.
        b.write_all(&msg[..20]).unwrap();
        let mut got = Vec::new();
        let r = conn.read_requests(&mut scratch, 64, |m| got.push(m.to_vec()));
        assert_eq!(r, ReadOutcome::default());
        assert_eq!(got.len(), 1);
        b.write_all(&msg[20..]).unwrap();
        let r = conn.read_requests(&mut scratch, 64, |m| got.push(m.to_vec()));
        assert!(!r.closed);
        assert_eq!(got, vec![msg[..16].to_vec(), msg[16..].to_vec()]);
        // A budget of one: the second of two messages waits for the next call.
        b.write_all(&msg[..16]).unwrap();
        b.write_all(&msg[..16]).unwrap();
        got.clear();
        assert!(
            conn.read_requests(&mut scratch, 1, |m| got.push(m.to_vec()))
                .paused
        );
        assert_eq!(got.len(), 1);
        assert!(
            !conn
                .read_requests(&mut scratch, 1, |m| got.push(m.to_vec()))
                .closed
        );
        assert_eq!(got.len(), 2);
        drop(b);
        assert!(conn.read_requests(&mut scratch, 64, |_| {}).closed);
    }

    #[test]
    fn a_request_cut_by_a_full_read_buffer_is_carried_to_the_next_read() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(Stream::Unix(mio::net::UnixStream::from_std(a)));
        let mut scratch = vec![0u8; READ_CHUNK];
        // 110 requests of 40 bytes, each with its index in its body: the first read
        // fills the buffer and ends 16 bytes into the 103rd.
        let mut sent = Vec::new();
        for i in 0..110u8 {
            let mut m = header(Opcode::RESOLVE, 40).to_vec();
            m.extend_from_slice(&[i; 24]);
            sent.push(m);
        }
        let mut b = b;
        b.write_all(&sent.concat()).unwrap();
        let mut got = Vec::new();
        let mut calls = 0;
        while got.len() < sent.len() {
            let r = conn.read_requests(&mut scratch, 64, |m| got.push(m.to_vec()));
            assert!(!r.closed);
            calls += 1;
            assert!(calls < 10, "requests lost: {} of {}", got.len(), sent.len());
        }
        assert_eq!(got, sent);
        assert!(conn.inbuf.is_empty() && conn.inbuf.capacity() == 0);
        // Nothing more waits: the next read finds the socket empty.
        assert_eq!(
            conn.read_requests(&mut scratch, 64, |_| panic!("no request")),
            ReadOutcome::default()
        );
    }

    #[test]
    fn replies_queue_when_the_peer_does_not_read() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(Stream::Unix(mio::net::UnixStream::from_std(a)));
        let reply = [0x55u8; 600];
        let mut sent = 0;
        while !conn.wants_write() {
            conn.send(&reply).unwrap();
            sent += 1;
        }
        while conn.outbuf.len() < BACKLOG_LIMIT {
            conn.send(&reply).unwrap();
            sent += 1;
        }
        assert!(!conn.wants_read(), "reading pauses over the limit");
        // The peer reads everything; every byte arrives in order.
        let mut b = b;
        b.set_nonblocking(false).unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            b.read_to_end(&mut all).unwrap();
            all
        });
        while conn.wants_write() {
            conn.flush().unwrap();
            std::thread::yield_now();
        }
        drop(conn);
        let all = reader.join().unwrap();
        assert_eq!(all.len(), sent * reply.len());
        assert!(all.iter().all(|&x| x == 0x55));
    }
}
