//! The echo server with the reference daemon's I/O pattern (`acm-load --echo-server PATH
//! --echo-style reference`): a second yardstick beside the fast one in [`super::echo`].
//!
//! The C ibacm serves its clients from one thread that blocks in `select()` over the
//! listener and every client socket, then, for each socket `select` marked, accepts one
//! connection or reads one request with a single `recv()` of up to 592 bytes
//! (`sizeof(struct acm_msg)`) and answers it with a single `send()` on a blocking socket
//! (docs/protocol/client-messages.md §2 and §12). A request whose received
//! length differs from its header's length closes the connection, as a malformed one
//! does. Only descriptors below `FD_SETSIZE` fit a `select` set: a connection past
//! that is closed at once, as the reference closes one when its client table is full.
//!
//! The replies are the fast echo server's ([`Replies`]): the two yardsticks differ only
//! in how they move bytes, so a daemon's result divided by each says how much of its
//! cost is the I/O pattern and how much is the work.

use super::echo_replies::Replies;
use acm_proto::client::{HEADER_LEN, HeaderPacket, request_len};
use nix::sys::select::{FdSet, select};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::{UnixListener, UnixStream};

/// The most one `recv` takes: the reference's `struct acm_msg`.
pub(crate) const RECV_SIZE: usize = acm_proto::client::MAX_REQUEST_LEN;
/// Descriptors a `select` set can hold (glibc's `FD_SETSIZE`).
const FD_SETSIZE: i32 = 1024;

/// What became of one request read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// Answered; the connection stays.
    Answered,
    /// The client closed, or sent something the reference would close on.
    Closed,
}

/// Serves `listener` until it fails: one thread, one `select` per turn.
///
/// # Errors
/// `select` or `accept` failed for a reason other than a signal.
pub(crate) fn serve(listener: &UnixListener, replies: &Replies) -> io::Result<()> {
    let mut clients: Vec<UnixStream> = Vec::new();
    let mut buf = [0u8; RECV_SIZE];
    loop {
        let ready = {
            let mut set = FdSet::new();
            set.insert(listener.as_fd());
            for c in &clients {
                set.insert(c.as_fd());
            }
            match select(None, &mut set, None, None, None) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let listener_ready = set.contains(listener.as_fd());
            let marked: Vec<bool> = clients.iter().map(|c| set.contains(c.as_fd())).collect();
            (listener_ready, marked)
        };
        let (listener_ready, marked) = ready;
        // Clients first, in table order, then one accept: the reference's order.
        let mut keep = Vec::with_capacity(clients.len());
        for (c, ready) in clients.drain(..).zip(marked) {
            if !ready {
                keep.push(c);
                continue;
            }
            let mut c = c;
            if serve_one(&mut c, &mut buf, replies) == Served::Answered {
                keep.push(c);
            }
        }
        clients = keep;
        if listener_ready {
            match listener.accept() {
                Ok((s, _)) if s.as_raw_fd() < FD_SETSIZE => clients.push(s),
                // Past the select set: closed at once (dropped).
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// One `recv` and, for a whole request, one `send` of its reply.
fn serve_one(c: &mut UnixStream, buf: &mut [u8; RECV_SIZE], replies: &Replies) -> Served {
    let n = loop {
        match c.read(buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Served::Closed,
        }
    };
    let Some(reply) = reply_for(&buf[..n], replies) else {
        return Served::Closed;
    };
    // A blocking socket: one call sends it all or fails.
    match c.write(&reply) {
        Ok(w) if w == reply.len() => Served::Answered,
        _ => Served::Closed,
    }
}

/// The reply to `received`, one `recv`'s bytes, or `None` when the reference would close
/// the connection: nothing received, a header no request can have, or a length that is
/// not the header's.
fn reply_for(received: &[u8], replies: &Replies) -> Option<Vec<u8>> {
    if received.len() < HEADER_LEN {
        return None;
    }
    let len = request_len(&received[..HEADER_LEN]).ok()?;
    if len != received.len() {
        return None;
    }
    let header = HeaderPacket::new_unchecked(received);
    let mut reply = replies.for_operation(header.opcode().operation()).to_vec();
    HeaderPacket::new_unchecked(&mut reply[..]).set_tid(header.tid());
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::perf_request;

    #[test]
    fn a_reply_needs_exactly_one_whole_request() {
        let r = Replies::new();
        let mut perf = perf_request();
        perf[8] = 0x5a;
        let reply = reply_for(&perf, &r).unwrap();
        assert_eq!(reply.len(), 72);
        assert_eq!(&reply[..2], &[1, 0x82]);
        assert_eq!(reply[8], 0x5a);
        // Short of the header's length, or two requests in one recv: closed, as the
        // reference compares the received count with the header.
        let resolve = crate::requests::ip_resolve_request();
        assert_eq!(reply_for(&resolve, &r).map(|v| v.len()), Some(88));
        assert_eq!(reply_for(&resolve[..100], &r), None);
        assert_eq!(reply_for(&perf[..10], &r), None);
        let mut two = perf.clone();
        two.extend_from_slice(&perf);
        assert_eq!(reply_for(&two, &r), None);
        assert_eq!(reply_for(&[], &r), None);
        let mut bad = perf;
        bad[0] = 2;
        assert_eq!(reply_for(&bad, &r), None);
    }

    #[test]
    fn serves_clients_one_recv_and_one_send_each() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("e.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || serve(&listener, &Replies::new()));
        let perf = perf_request();
        let mut a = UnixStream::connect(&path).unwrap();
        let mut b = UnixStream::connect(&path).unwrap();
        for round in 0..3u8 {
            for c in [&mut a, &mut b] {
                let mut req = perf.clone();
                req[8] = round;
                c.write_all(&req).unwrap();
                let mut reply = [0u8; 72];
                c.read_exact(&mut reply).unwrap();
                assert_eq!((reply[1], reply[8]), (0x82, round));
            }
        }
        // A malformed request closes that client only.
        a.write_all(&[9u8; 16]).unwrap();
        let mut rest = Vec::new();
        assert_eq!(a.read_to_end(&mut rest).unwrap(), 0);
        b.write_all(&perf).unwrap();
        let mut reply = [0u8; 72];
        b.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 0x82);
    }
}
