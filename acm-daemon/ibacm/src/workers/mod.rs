//! Worker threads that answer cache hits beside the engine thread
//! (`worker_threads` ≥ 2).
//!
//! The engine stays single-threaded: one thread (the event loop of
//! [`crate::server`]) owns it, the listener, the fabric, the kernel channel, the
//! signals and every decision about who may connect. The workers own the client
//! connections, shared out as they are accepted (to the worker with the fewest), and
//! answer the requests that are cache hits themselves, from the read-only view of the
//! destination cache the engine publishes ([`acm_engine::CacheView`],
//! [`view_cell`]). Everything else — misses, queries, anything that changes state —
//! they forward to the engine thread, which hands it to the engine and sends each
//! reply back to the worker that owns the connection ([`messages`]). The reasons and
//! the rules:
//!
//! - **No lock on the hit path.** A hit reads the view the worker holds and counts
//!   itself in the worker's own table ([`hits`]); the lock of [`view_cell`] is taken
//!   only to pick up a new publication.
//! - **Invalidations first.** The engine thread publishes after every engine input and
//!   before it carries out the engine's outputs, so nothing the engine reports done
//!   (a log line, a reply, a note to a worker) can be seen before its effect on the
//!   view.
//! - **Order per connection.** A worker answers from the view only while the engine
//!   owes the connection nothing ([`worker`]); so replies on a connection come in the
//!   order the single-threaded daemon gives them.
//! - **Exact counters.** The workers' hits reach the engine's counters before every
//!   batch of forwarded requests the engine thread hands the engine and before every
//!   metrics write ([`hits`]), so a PERF_QUERY counts every hit answered before it was
//!   read.
//! - **The hostile-client bounds hold.** Admission (allow-lists, the connection
//!   limits, accepting in batches, the retries when descriptors run out) stays on the
//!   engine thread; each worker reads at most [`crate::conn::READ_BUDGET`] requests
//!   of a connection per turn, stops reading a connection that does not read its
//!   replies or has [`crate::conn::MAX_FORWARDED`] requests on their way to the
//!   engine, and keeps its connections to its share of `max_queued_reply_bytes`
//!   ([`bound`]).

pub(crate) mod bound;
pub(crate) mod hits;
pub(crate) mod messages;
pub(crate) mod view_cell;
pub(crate) mod worker;

use crate::access::Peer;
use crate::client_waits::shrink_if_sparse;
use crate::conn::Conn;
use acm_engine::{ConnId, EndpointId, Engine};
use hits::{HitMerger, HitTable};
use messages::{EngineNote, ToEngine, ToWorker};
use mio::{Poll, Waker};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use view_cell::ViewCell;

/// The most worker threads: more than a host's ports can keep busy.
pub(crate) const MAX_WORKERS: usize = 256;

/// One worker as the engine thread sees it.
struct Link {
    to: Sender<ToWorker>,
    waker: Waker,
    thread: Option<JoinHandle<()>>,
    /// Its connections.
    conns: usize,
    /// What the engine said to its connections since the last [`Workers::flush`].
    notes: Vec<EngineNote>,
    /// The bytes of the replies among `notes`.
    bytes: Vec<u8>,
}

/// Who owns a connection, and who connected.
#[derive(Debug, Clone, Copy)]
struct Owner {
    worker: usize,
    peer: Option<Peer>,
}

/// The worker threads, from the engine thread.
pub(crate) struct Workers {
    links: Vec<Link>,
    inbox: Receiver<ToEngine>,
    owners: HashMap<u64, Owner>,
    view: Arc<ViewCell>,
    hits: HitMerger,
    bound: Arc<AtomicUsize>,
    /// Per connection, forwarded requests handed to the engine since the last
    /// [`Workers::flush`]; also every connection the engine replied to meanwhile
    /// (with 0), whose worker must hear what the engine still holds.
    settle: HashMap<u64, u32>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("workers", &self.links.len())
            .field("connections", &self.owners.len())
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// Starts `n` workers; `engine_waker` wakes the engine thread when they send to
    /// it; `bound` is `max_queued_reply_bytes`; `epoch` is the engine clock's origin.
    ///
    /// # Errors
    /// A poller, waker or thread could not be made.
    pub(crate) fn start(
        n: usize,
        engine_waker: Arc<Waker>,
        bound: usize,
        epoch: std::time::Instant,
    ) -> io::Result<Self> {
        let n = n.clamp(1, MAX_WORKERS);
        let (to_engine, inbox) = mpsc::channel();
        let view = Arc::new(ViewCell::default());
        let bound = Arc::new(AtomicUsize::new(bound));
        let mut links = Vec::with_capacity(n);
        let mut tables = Vec::with_capacity(n);
        for i in 0..n {
            let poll = Poll::new()?;
            let waker = Waker::new(poll.registry(), worker::WAKE)?;
            let (to, from_engine) = mpsc::channel();
            let hits = Arc::new(HitTable::default());
            tables.push(Arc::clone(&hits));
            let setup = worker::Setup {
                poll,
                inbox: from_engine,
                to_engine: to_engine.clone(),
                engine_waker: Arc::clone(&engine_waker),
                view: Arc::clone(&view),
                hits,
                share: bound::Share::new(Arc::clone(&bound), n),
                epoch,
            };
            let thread = std::thread::Builder::new()
                .name(format!("ibacm-worker-{i}"))
                .spawn(move || worker::run(setup))?;
            links.push(Link {
                to,
                waker,
                thread: Some(thread),
                conns: 0,
                notes: Vec::new(),
                bytes: Vec::new(),
            });
        }
        Ok(Self {
            links,
            inbox,
            owners: HashMap::new(),
            view,
            hits: HitMerger::new(tables),
            bound,
            settle: HashMap::new(),
        })
    }

    /// How many workers run.
    pub(crate) fn count(&self) -> usize {
        self.links.len()
    }

    /// The client connections the workers hold.
    pub(crate) fn connections(&self) -> usize {
        self.owners.len()
    }

    /// Whether connection `id` is one of the workers'.
    pub(crate) fn owns(&self, id: u64) -> bool {
        self.owners.contains_key(&id)
    }

    /// Hands a new connection to the worker with the fewest.
    pub(crate) fn add(&mut self, id: u64, conn: Conn) {
        let peer = conn.peer();
        let Some((worker, link)) = self
            .links
            .iter_mut()
            .enumerate()
            .min_by_key(|(_, l)| l.conns)
        else {
            return;
        };
        link.conns += 1;
        self.owners.insert(id, Owner { worker, peer });
        send(
            link,
            ToWorker::Add {
                id,
                conn: Box::new(conn),
            },
        );
    }

    /// Asks the owner of connection `id` to close it; it is counted out when the
    /// worker says it closed it ([`Workers::closed`]).
    pub(crate) fn close(&mut self, id: u64, why: String) {
        if let Some(o) = self.owners.get(&id) {
            send(&mut self.links[o.worker], ToWorker::Close { id, why });
        }
    }

    /// A worker closed connection `id`: its user, if the connection was still counted.
    pub(crate) fn closed(&mut self, id: u64) -> Option<Option<Peer>> {
        let o = self.owners.remove(&id)?;
        self.links[o.worker].conns -= 1;
        self.settle.remove(&id);
        shrink_if_sparse(&mut self.owners);
        Some(o.peer)
    }

    /// Every connection with who connected (for a reload's allow-lists).
    pub(crate) fn peers(&self) -> impl Iterator<Item = (u64, Option<Peer>)> + '_ {
        self.owners.iter().map(|(&id, o)| (id, o.peer))
    }

    /// Changes the bound on queued replies; workers over their new share cut at once.
    pub(crate) fn set_bound(&mut self, bytes: usize) {
        if self.bound.swap(bytes, Ordering::Relaxed) > bytes {
            for link in &mut self.links {
                send(link, ToWorker::Bound);
            }
        }
    }

    /// The messages the workers sent so far.
    pub(crate) fn received(&mut self) -> Vec<ToEngine> {
        self.inbox.try_iter().collect()
    }

    /// Notes that a forwarded request of connection `id` was handed to the engine.
    pub(crate) fn taken(&mut self, id: u64) {
        *self.settle.entry(id).or_default() += 1;
    }

    /// Queues an engine reply for connection `id` for its worker.
    pub(crate) fn reply(&mut self, id: u64, bytes: &[u8]) {
        if let Some(o) = self.owners.get(&id) {
            let link = &mut self.links[o.worker];
            link.notes.push(EngineNote::Reply {
                id,
                len: bytes.len(),
            });
            link.bytes.extend_from_slice(bytes);
            self.settle.entry(id).or_default();
        }
    }

    /// Queues the engine's close of connection `id` (after its replies).
    pub(crate) fn engine_close(&mut self, id: u64) {
        if let Some(o) = self.owners.get(&id) {
            self.links[o.worker].notes.push(EngineNote::Close { id });
        }
    }

    /// Publishes the engine's view if it changed (before any of its outputs are
    /// carried out: see the module's doc).
    pub(crate) fn publish(&mut self, engine: &mut Engine) {
        if let Some(view) = engine.publish_view() {
            self.view.publish(view);
        }
    }

    /// Calls `give` with each endpoint's cache hits the workers answered since the
    /// last call.
    pub(crate) fn merge_hits(&mut self, give: impl FnMut(EndpointId, u64)) {
        self.hits.merge(give);
    }

    /// Sends each worker what the engine said to its connections, each connection's
    /// replies followed by what the engine took and still holds of it, and wakes it.
    pub(crate) fn flush(&mut self, engine: &Engine) {
        for (id, taken) in self.settle.drain() {
            if let Some(o) = self.owners.get(&id) {
                let pending = engine.client_pending(ConnId(id));
                self.links[o.worker]
                    .notes
                    .push(EngineNote::Settled { id, taken, pending });
            }
        }
        for link in &mut self.links {
            if !link.notes.is_empty() {
                let notes = std::mem::take(&mut link.notes);
                let bytes = std::mem::take(&mut link.bytes);
                send(link, ToWorker::Notes { notes, bytes });
            }
        }
    }
}

/// Sends `msg` to a worker and wakes it. A worker only ends when told to stop, so a
/// failure can only come at the end, when there is nobody left to tell.
fn send(link: &mut Link, msg: ToWorker) {
    if link.to.send(msg).is_ok() {
        let _ = link.waker.wake();
    }
}

impl Drop for Workers {
    /// Stops every worker (their connections close) and waits for them.
    fn drop(&mut self) {
        for link in &mut self.links {
            send(link, ToWorker::Stop);
        }
        for link in &mut self.links {
            if let Some(t) = link.thread.take() {
                let _ = t.join();
            }
        }
    }
}
