//! What the engine thread and the worker threads tell each other.
//!
//! Each worker has one channel from the engine thread and all workers share one to it;
//! both are FIFO, which is what keeps a connection's replies in order: the engine
//! thread sends a connection's replies, then how many of its requests it has taken and
//! how many it still holds ([`EngineNote::Settled`]), in that order, and a worker
//! forwards a connection's requests, then its close, in that order.

use crate::conn::Conn;

/// From the engine thread to one worker.
#[derive(Debug)]
pub(crate) enum ToWorker {
    /// A new client, accepted and admitted: the worker owns it from now on.
    Add {
        /// Its connection id.
        id: u64,
        /// The connection.
        conn: Box<Conn>,
    },
    /// What the engine said to this worker's clients, in the engine's order; the
    /// replies' bytes are in `bytes`, one after the other.
    Notes {
        /// The notes.
        notes: Vec<EngineNote>,
        /// The bytes of every [`EngineNote::Reply`] among them.
        bytes: Vec<u8>,
    },
    /// Close connection `id` (the engine closed it, or a reload no longer lets its user
    /// in); the worker answers [`ToEngine::Closed`].
    Close {
        /// The connection.
        id: u64,
        /// Why, for the log line.
        why: String,
    },
    /// Replies queued for all clients are over `max_queued_reply_bytes`: close this
    /// worker's connections that queue the most, as [`super::bound`] says.
    Bound,
    /// The daemon stops: drop every connection and end the thread.
    Stop,
}

/// One thing the engine said about a worker's connection.
#[derive(Debug)]
pub(crate) enum EngineNote {
    /// A reply to write: `len` bytes of the message's `bytes` from the end of the reply
    /// before it.
    Reply {
        /// The connection.
        id: u64,
        /// The reply's length.
        len: usize,
    },
    /// The engine took `taken` more of the connection's forwarded requests and holds
    /// `pending` unanswered; sent after every reply the engine gave it meanwhile.
    Settled {
        /// The connection.
        id: u64,
        /// Forwarded requests handed to the engine since the last note.
        taken: u32,
        /// Requests the engine holds unanswered ([`acm_engine::Engine::client_pending`]).
        pending: u32,
    },
    /// The engine closed the connection (a malformed request); the replies before this
    /// note go out first.
    Close {
        /// The connection.
        id: u64,
    },
}

/// From a worker to the engine thread.
#[derive(Debug)]
pub(crate) enum ToEngine {
    /// Requests the view could not answer, in the order they were read.
    Requests(Frames),
    /// A connection the worker dropped; the engine thread counts it out and tells the
    /// engine.
    Closed {
        /// The connection.
        id: u64,
        /// Why, for the log line.
        why: String,
    },
    /// The worker closed `closed` for the bound on queued replies, which stood at
    /// `over` bytes; `left` remain queued (for the one log line of the cut).
    Cut {
        /// The connections closed, oldest first among equals.
        closed: Vec<u64>,
        /// Queued replies, all workers together, when the cut began.
        over: usize,
        /// Queued replies, all workers together, after it.
        left: usize,
    },
}

/// Messages of several connections in one buffer: one allocation for a turn's worth
/// rather than one per message, which a burst of thousands would scatter over the heap.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    bytes: Vec<u8>,
    /// Each message's connection and length, in order.
    frames: Vec<(u64, usize)>,
}

impl Frames {
    /// Adds `msg`, from connection `id`.
    pub(crate) fn push(&mut self, id: u64, msg: &[u8]) {
        self.bytes.extend_from_slice(msg);
        self.frames.push((id, msg.len()));
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Each message with its connection, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let mut at = 0;
        self.frames.iter().map(move |&(id, len)| {
            let msg = &self.bytes[at..at + len];
            at += len;
            (id, msg)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_in_order_with_their_connections() {
        let mut f = Frames::default();
        assert!(f.is_empty());
        f.push(16, &[1, 2, 3]);
        f.push(17, &[]);
        f.push(16, &[4]);
        assert_eq!(f.len(), 3);
        let got: Vec<(u64, Vec<u8>)> = f.iter().map(|(id, m)| (id, m.to_vec())).collect();
        assert_eq!(got, [(16, vec![1, 2, 3]), (17, vec![]), (16, vec![4])]);
    }
}
