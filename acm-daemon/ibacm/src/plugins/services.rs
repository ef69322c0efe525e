//! The core's services for C providers ([`CoreServices`]), called from the providers'
//! own threads: everything they hand over is queued, and the event loop is woken to
//! feed the engine [`acm_engine::Input::ProviderWake`], where each adapter drains the
//! queue with a context. Nothing here touches engine state.

use acm_io_verbs::provider::{CoreServices, SaRequest};
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// What a provider handed the core from outside the event loop.
#[derive(Debug)]
pub(crate) enum Event {
    /// `acm_resolve_response` or `acm_query_response`.
    Answered {
        /// The request's id.
        id: u64,
        /// The message, as long as its header said.
        msg: Vec<u8>,
        /// Whether it answers a query (`acm_query_response`), not a resolve.
        query: bool,
    },
    /// `acm_send_sa_mad` (boxed: the MAD is 256 bytes, the other events a few words).
    Sa(Box<SaRequest>),
    /// `acm_increment_counter`.
    Counter(usize),
    /// `acm_write`, already formatted: origin (the C function name before `: `, when
    /// there is one) and text.
    Log {
        /// The level.
        level: i32,
        /// Where it came from.
        origin: &'static str,
        /// The text.
        text: String,
    },
}

/// Distinct log origins kept (each is leaked once, so that log events can name it);
/// beyond this, lines are attributed to "provider".
const MAX_ORIGINS: usize = 256;

/// Where an event goes: the slot of the provider it belongs to, from the high bits of a
/// request id or an endpoint key ([`request_id`], [`endpoint_key`]); counters and log
/// lines belong to no provider in particular and go to [`COMMON`].
pub(crate) type Slot = u16;

/// The slot every adapter drains besides its own.
pub(crate) const COMMON: Slot = 0;

/// The id of request `seq` of the provider in `slot`.
#[must_use]
pub(crate) fn request_id(slot: Slot, seq: u64) -> u64 {
    (u64::from(slot) << 48) | (seq & 0xFFFF_FFFF_FFFF)
}

/// The slot of the provider that request `id` ([`request_id`]) belongs to.
#[must_use]
fn request_slot(id: u64) -> Slot {
    (id >> 48) as Slot
}

/// The key of endpoint `ep` of the provider in `slot`.
#[must_use]
pub(crate) fn endpoint_key(slot: Slot, ep: u32) -> u64 {
    (u64::from(slot) << 32) | u64::from(ep)
}

/// The queues between the providers' threads and the event loop, one per slot.
pub(crate) struct Shared {
    queue: Mutex<HashMap<Slot, VecDeque<Event>>>,
    waker: OnceLock<Arc<mio::Waker>>,
    log_level: AtomicI32,
    opts_file: CString,
    origins: Mutex<HashSet<&'static str>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Services for a daemon logging at `log_level`, whose options file is `opts_file`.
    #[must_use]
    pub(crate) fn new(log_level: i32, opts_file: &str) -> Self {
        Self {
            queue: Mutex::new(HashMap::new()),
            waker: OnceLock::new(),
            log_level: AtomicI32::new(log_level),
            opts_file: CString::new(opts_file.replace('\0', "")).unwrap_or_default(),
            origins: Mutex::new(HashSet::new()),
        }
    }

    /// The event loop's waker, once it exists; wakes it at once if events are waiting.
    pub(crate) fn set_waker(&self, waker: Arc<mio::Waker>) {
        let waiting = lock(&self.queue).values().any(|q| !q.is_empty());
        if self.waker.set(waker).is_ok() && waiting {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            // A failed wake only delays the events to the loop's next turn.
            let _ = w.wake();
        }
    }

    pub(super) fn push(&self, slot: Slot, ev: Event) {
        lock(&self.queue).entry(slot).or_default().push_back(ev);
        self.wake();
    }

    /// The next event for the provider in `slot` (its own, then common ones), if any;
    /// the lock is not held while it is handled.
    pub(super) fn pop(&self, slot: Slot) -> Option<Event> {
        let mut q = lock(&self.queue);
        [slot, COMMON]
            .into_iter()
            .find_map(|s| q.get_mut(&s).and_then(VecDeque::pop_front))
    }

    /// A provider's answer to request `id`, queued for the provider's adapter.
    fn answered(&self, id: u64, msg: &[u8], query: bool) -> i32 {
        let event = Event::Answered {
            id,
            msg: msg.to_vec(),
            query,
        };
        self.push(request_slot(id), event);
        0
    }

    fn origin(&self, name: &str) -> &'static str {
        let mut set = lock(&self.origins);
        if let Some(&o) = set.get(name) {
            return o;
        }
        if set.len() >= MAX_ORIGINS {
            return "provider";
        }
        let o: &'static str = Box::leak(name.to_owned().into_boxed_str());
        set.insert(o);
        o
    }
}

/// Splits `func: text` as the reference's `acm_log` writes it.
fn split_origin(line: &str) -> Option<(&str, &str)> {
    let (origin, text) = line.split_once(": ")?;
    let plain = !origin.is_empty()
        && origin.len() <= 64
        && origin
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    plain.then_some((origin, text))
}

impl CoreServices for Shared {
    fn log_level(&self) -> i32 {
        self.log_level.load(Ordering::Relaxed)
    }

    fn write_log(&self, level: i32, text: &str) {
        let line = text.trim_end_matches('\n');
        let (origin, text) = match split_origin(line) {
            Some((o, t)) => (self.origin(o), t.to_owned()),
            None => ("provider", line.to_owned()),
        };
        self.push(
            COMMON,
            Event::Log {
                level,
                origin,
                text,
            },
        );
    }

    fn resolve_response(&self, id: u64, msg: &[u8]) -> i32 {
        self.answered(id, msg, false)
    }

    fn query_response(&self, id: u64, msg: &[u8]) -> i32 {
        self.answered(id, msg, true)
    }

    fn send_sa(&self, request: SaRequest) -> i32 {
        self.push(
            (request.endpoint >> 32) as Slot,
            Event::Sa(Box::new(request)),
        );
        0
    }

    fn increment_counter(&self, index: usize) {
        self.push(COMMON, Event::Counter(index));
    }

    fn opts_file(&self) -> &CStr {
        &self.opts_file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_keep_the_c_function_as_origin() {
        let s = Shared::new(2, "/etc/rdma/ibacm_opts.cfg");
        s.write_log(0, "acmp_open_dev: opened mlx5_0\n");
        s.write_log(1, "no origin here\n");
        let Some(Event::Log { origin, text, .. }) = s.pop(3) else {
            panic!("a log event");
        };
        assert_eq!((origin, text.as_str()), ("acmp_open_dev", "opened mlx5_0"));
        let Some(Event::Log { origin, text, .. }) = s.pop(3) else {
            panic!("a log event");
        };
        assert_eq!((origin, text.as_str()), ("provider", "no origin here"));
        assert!(s.pop(3).is_none());
        assert_eq!(s.opts_file().to_str(), Ok("/etc/rdma/ibacm_opts.cfg"));
    }

    #[test]
    fn answers_go_to_the_slot_of_their_provider() {
        let s = Shared::new(0, "");
        s.resolve_response(request_id(2, 5), &[0; 16]);
        s.increment_counter(1);
        assert!(matches!(s.pop(1), Some(Event::Counter(1))), "common to all");
        assert!(s.pop(1).is_none(), "slot 2's answer is not slot 1's");
        assert!(
            matches!(s.pop(2), Some(Event::Answered { id, query: false, .. }) if id == request_id(2, 5))
        );
        assert_eq!(endpoint_key(3, 9) >> 32, 3);
    }
}
