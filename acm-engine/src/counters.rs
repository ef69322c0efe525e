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
