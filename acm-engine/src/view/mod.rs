//! The engine's published cache view: a read-only snapshot of what a RESOLVE cache hit
//! depends on, which threads other than the engine's answer hits from, without a lock.
//!
//! # Why snapshots
//!
//! A daemon with worker threads owns its client connections on several threads, and
//! nearly every request of a busy fabric is a cache hit. The engine is a single-owner
//! state machine (`&mut self` for every input), so the workers cannot ask it; a lock
//! around it would serialise them again. Instead, the engine thread publishes, after
//! each input, an immutable [`CacheView`] (an `Arc`, swapped into a cell the workers
//! read), and a worker answers a request from the latest one it holds
//! ([`CacheView::answer`]) or, when the view cannot, forwards it to the engine. A view
//! never changes once published (apart from the used marks below), so a reader sees
//! whole entries only and needs no lock; an old view stays valid for whoever still
//! holds it, and goes when the last holder drops it.
//!
//! # What it answers
//!
//! Exactly the engine's own cache hit, byte for byte, and nothing else: a destination
//! RESOLVE, valid by the core's rules (the same functions decide: `resolve_shape`,
//! `dest_entries`), naming its source, whose source address finds (the core's rule)
//! an endpoint served by the built-in `ibacmp` and ready there, and whose destination
//! is cached READY and not stale at the request's minute. The reply is written by the
//! function the engine writes its own with (`request::emit_resolve_reply`). Anything
//! else is forwarded, as is everything while the engine would log a line for such a
//! request (the worker could not put it in order with the engine's) or while
//! `pending_per_conn` is 0 (the core refuses every request then). The counters of the
//! hits answered are handed back with [`crate::Input::CacheHits`], and a hit marks the
//! entry used for the engine's eviction clock (an atomic bit per slot, shared by the
//! view and the cache: `track.rs`), so that entries the workers keep answering are not
//! the first evicted.
//!
//! # How publication stays cheap
//!
//! [`crate::Engine::publish_view`] runs after every input, so it must cost what
//! changed, not what is cached. Each destination cache records the keys it changes
//! inside its own mutating methods (`DestCache::get_mut`, `insert`, `remove`, and so
//! eviction; `iter_mut` marks it all changed), so that no change can bypass the view;
//! the publication looks up only those keys, and writes them into a persistent map
//! (`map.rs`) that copies only the small leaf, directory and root a change lies in,
//! sharing the rest with the views before it. The endpoint table (a few endpoints
//! with their addresses) is walked on each publication and compared with the last
//! one; the log level and `pending_per_conn` likewise. When nothing changed,
//! publication returns `None` and allocates nothing.
//!
//! # The ordering guarantee
//!
//! The daemon publishes after each input and *before* it carries out the engine's
//! outputs. So any reply, log line or fabric operation that follows from a change
//! (an SM event's flush, an eviction, a reload, a port going down) is carried out only
//! once a view without the stale entry is in place: a worker that took its view after
//! the engine reported the change cannot answer from what the change removed. Per
//! connection, a worker asks the view only when the engine holds no request of that
//! connection ([`crate::Engine::client_pending`]), so replies on one connection keep
//! the order of its requests.

mod map;
mod publish;
mod track;

pub(crate) use publish::ViewPublisher;
pub(crate) use track::DestTrack;

use crate::addr::Address;
use crate::core::{DestEntries, ResolveShape, dest_entries, entry_addr, resolve_shape};
use crate::io::EndpointId;
use crate::request::emit_resolve_reply;
use crate::time::Instant;
use acm_proto::client::{ENTRY_LEN, HEADER_LEN, MessagePacket, Operation, Status};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use map::DestMap;
use track::MarkBlock;

/// The longest reply [`CacheView::answer`] writes: a resolve reply carrying its path
/// (the view answers only requests that name their source, which is not echoed).
pub const VIEW_REPLY_MAX: usize = HEADER_LEN + ENTRY_LEN;

/// What [`CacheView::answer`] made of a request.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewAnswer {
    /// `reply[..len]` is the reply, byte-identical to the engine's for this request
    /// now; the hit is to be counted on `ep` ([`crate::Input::CacheHits`]).
    Hit {
        /// The reply's length.
        len: usize,
        /// The endpoint whose cache answered.
        ep: EndpointId,
    },
    /// Not answerable from the view: hand the request to the engine.
    Forward,
}

/// A read-only snapshot of what the engine's cache hits depend on, published by
/// [`crate::Engine::publish_view`] (see the module documentation). `Send` and `Sync`:
/// any number of threads may answer from one view at once.
pub struct CacheView {
    /// Whether anything may be answered: no log line the engine would write for a
    /// resolve, and `pending_per_conn` above 0.
    answering: bool,
    /// Endpoints of the active ports, in the order the core looks a source up.
    endpoints: Vec<ViewEndpoint>,
}

/// One endpoint as the view sees it.
#[derive(Debug, Clone)]
struct ViewEndpoint {
    id: EndpointId,
    /// Its local addresses, in the core's order.
    addrs: Arc<[Address]>,
    /// Served by the built-in `ibacmp`, and ready there.
    answers: bool,
    /// Its READY destinations (empty for an endpoint of another provider).
    dests: DestMap,
    /// The used marks of its cache's slots.
    marks: Arc<[Arc<MarkBlock>]>,
}

/// Parts of the views' maps copied by publications (for tests of what a publication
/// costs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CopyCount {
    /// Roots, directories and leaves copied.
    pub(crate) parts: usize,
    /// Destination entries copied with the leaves.
    pub(crate) entries: usize,
}

impl CacheView {
    /// An empty view that forwards everything (what workers hold before the first
    /// publication).
    #[must_use]
    pub fn empty() -> Self {
        Self {
            answering: false,
            endpoints: Vec::new(),
        }
    }

    /// Answers `request` (one whole client message) at `now` into `reply`, if it is a
    /// cache hit the engine would answer now with the same bytes; otherwise
    /// [`ViewAnswer::Forward`].
    ///
    /// The caller asks only for a connection the engine holds no request of
    /// ([`crate::Engine::client_pending`] is 0), and counts each hit back into the
    /// engine ([`crate::Input::CacheHits`]). `now` is read from the clock the engine's
    /// inputs are timed by.
    pub fn answer(
        &self,
        now: Instant,
        request: &[u8],
        reply: &mut [u8; VIEW_REPLY_MAX],
    ) -> ViewAnswer {
        if !self.answering {
            return ViewAnswer::Forward;
        }
        let Ok(hdr) = acm_proto::client::frame::parse_request(request) else {
            return ViewAnswer::Forward;
        };
        if hdr.opcode.operation() != Operation::RESOLVE {
            return ViewAnswer::Forward;
        }
        let msg = MessagePacket::new_unchecked(request);
        if !matches!(resolve_shape(&msg), ResolveShape::Dest) {
            return ViewAnswer::Forward;
        }
        // Without a source the host's routing picks one: the engine's to ask.
        let Ok(DestEntries {
            src: Some(src),
            dest,
        }) = dest_entries(&msg)
        else {
            return ViewAnswer::Forward;
        };
        let src = entry_addr(&src);
        let dest = entry_addr(&dest);
        // The core's `find_ep_by_addr`: the first endpoint with a matching address.
        let Some(ep) = self
            .endpoints
            .iter()
            .find(|e| e.addrs.iter().any(|a| a.matches_local(&src)))
        else {
            return ViewAnswer::Forward;
        };
        if !ep.answers {
            return ViewAnswer::Forward;
        }
        let Some(d) = ep.dests.get(&dest) else {
            return ViewAnswer::Forward;
        };
        if now.as_minutes() > d.expiry {
            return ViewAnswer::Forward;
        }
        track::mark_used(&ep.marks, d.slot);
        let len = emit_resolve_reply(&hdr, Status::SUCCESS, Some(&d.path), None, reply);
        ViewAnswer::Hit { len, ep: ep.id }
    }
}

impl Default for CacheView {
    fn default() -> Self {
        Self::empty()
    }
}

impl fmt::Debug for CacheView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheView")
            .field("answering", &self.answering)
            .field(
                "endpoints",
                &self.endpoints.iter().map(|e| e.id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// A view is shared by the daemon's threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<CacheView>();
};

#[cfg(test)]
mod tests;
