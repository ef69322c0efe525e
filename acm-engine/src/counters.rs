//! Performance counters, in the order the client protocol reports them
//! (docs/daemon.md §12).

use acm_proto::client::Status;

/// One counter's position in a PERF_QUERY reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// A resolve reply carried a status other than 0 or ENODATA.
    Error = 0,
    /// A RESOLVE request arrived (global) or a provider handled one (per endpoint).
    Resolve = 1,
    /// A resolve reply carried ENODATA.
    NoData = 2,
    /// An ACM multicast resolve was sent.
    AddrQuery = 3,
    /// A lookup found the address known but the route not.
    AddrCache = 4,
    /// An SA PathRecord query was sent.
    RouteQuery = 5,
    /// A lookup was answered from the cache.
    RouteCache = 6,
}

/// How many counters a PERF_QUERY reply carries.
pub const COUNTER_COUNT: usize = 7;

/// The names `ib_acme` prints, in order.
pub const COUNTER_NAMES: [&str; COUNTER_COUNT] = [
    "Error Count",
    "Resolve Count",
    "No Data",
    "Addr Query Count",
    "Addr Cache Count",
    "Route Query Count",
    "Route Cache Count",
];

/// A set of the seven counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters(pub [u64; COUNTER_COUNT]);

impl Counters {
    /// Adds one to `c`.
    pub fn bump(&mut self, c: Counter) {
        let v = &mut self.0[c as usize];
        *v = v.wrapping_add(1);
    }

    /// Adds `n` to `c`: events counted in a batch (cache hits answered by the daemon's
    /// worker threads, [`crate::Input::CacheHits`]).
    pub fn add(&mut self, c: Counter, n: u64) {
        let v = &mut self.0[c as usize];
        *v = v.wrapping_add(n);
    }

    /// The value of `c`.
    #[must_use]
    pub fn get(&self, c: Counter) -> u64 {
        self.0[c as usize]
    }

    /// Counts a reply's status the way both the core and ibacmp do: ENODATA as
    /// `No Data`, any other failure as `Error Count`.
    pub fn count_status(&mut self, status: Status) {
        match status {
            Status::SUCCESS => {}
            Status::ENODATA => self.bump(Counter::NoData),
            _ => self.bump(Counter::Error),
        }
    }
}

/// What the provider's lookup bounds did, engine-wide since start, so that an
/// administrator can see a flood being refused or cancelled. Not part
/// of PERF_QUERY, whose reply has the reference's fixed list of seven counters; read
/// with [`crate::Engine::lookup_counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LookupCounters {
    /// Requests answered ENOMEM at once because their connection already waited on
    /// `max_pending_per_client` distinct destinations.
    pub rejected: u64,
    /// Lookups stopped because the last connection waiting for them closed.
    pub cancelled: u64,
    /// NODELAY misses that started no background lookup, because the endpoint already
    /// had `max_background_resolves` of them.
    pub background_dropped: u64,
}

/// One of the [`LookupCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupEvent {
    /// [`LookupCounters::rejected`].
    Rejected,
    /// [`LookupCounters::cancelled`].
    Cancelled,
    /// [`LookupCounters::background_dropped`].
    BackgroundDropped,
}

impl LookupCounters {
    /// Adds one to the counter of `ev`.
    pub fn bump(&mut self, ev: LookupEvent) {
        let v = match ev {
            LookupEvent::Rejected => &mut self.rejected,
            LookupEvent::Cancelled => &mut self.cancelled,
            LookupEvent::BackgroundDropped => &mut self.background_dropped,
        };
        *v = v.wrapping_add(1);
    }
}
