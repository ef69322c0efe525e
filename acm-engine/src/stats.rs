//! What monitoring reads from an engine directly: each endpoint with what EP_QUERY
//! tells about it, its PERF_QUERY counters, and the size, bound and evictions of its
//! destination cache.
//!
//! The daemon's metrics file is built from this. A client cannot have the cache sizes:
//! PERF_QUERY and EP_QUERY have no field for them, and a new operation or field would
//! be an extension of the wire protocol that the reference's clients do not know.

use crate::core::Core;
use crate::counters::Counters;
use crate::io::EndpointId;
use crate::provider::Provider;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

/// How many destinations an endpoint's cache holds, by state (docs/ibacmp.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Nothing known yet (a resolution is about to start, or failed).
    pub init: usize,
    /// An ACM multicast resolve is out.
    pub query_addr: usize,
    /// The peer's address is known, its route not.
    pub addr_resolved: usize,
    /// An SA PathRecord query is out.
    pub query_route: usize,
    /// The path is known: requests for it are answered from the cache.
    pub ready: usize,
    /// The most entries the cache may hold (`max_dest_cache_bytes` over the most one
    /// entry costs).
    pub limit: usize,
    /// Entries evicted to make room for new ones since the endpoint opened.
    pub evictions: u64,
}

impl CacheStats {
    /// Every destination cached, whatever its state.
    #[must_use]
    pub const fn total(&self) -> usize {
        self.init + self.query_addr + self.addr_resolved + self.query_route + self.ready
    }
}

/// One endpoint, as monitoring sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStats {
    /// Its number, from 1, in the enumeration order of docs/daemon.md §13: the index a
    /// PERF_QUERY names it by, and an EP_QUERY for port 0, so that a client's labels
    /// and these agree.
    pub index: usize,
    /// The engine's id.
    pub id: EndpointId,
    /// The device's node GUID.
    pub guid: u64,
    /// The port number.
    pub port: u8,
    /// The partition key, with the membership bit.
    pub pkey: u16,
    /// The provider serving it.
    pub provider: String,
    /// Its local addresses (names and IP addresses).
    pub addresses: usize,
    /// Its counters, if its provider keeps any.
    pub counters: Option<Counters>,
    /// Its destination cache, if its provider has one.
    pub cache: Option<CacheStats>,
}

impl Core {
    /// Every endpoint of an active port, in enumeration order (docs/daemon.md §13),
    /// with what `providers` count and cache for it
    /// ([`crate::Engine::endpoint_stats`]).
    pub(crate) fn endpoint_stats(&self, providers: &[Box<dyn Provider>]) -> Vec<EndpointStats> {
        self.enumerate(0)
            .enumerate()
            .filter_map(|(i, id)| {
                let e = self.endpoint(id)?;
                let dev = self.device(e.port.device)?;
                let provider = providers.get(e.provider);
                Some(EndpointStats {
                    index: i + 1,
                    id,
                    guid: dev.guid,
                    port: e.port.port,
                    pkey: e.pkey,
                    provider: self
                        .provider_names
                        .get(e.provider)
                        .cloned()
                        .unwrap_or_default(),
                    addresses: e.addrs.len(),
                    counters: provider.and_then(|p| p.perf(id)),
                    cache: provider.and_then(|p| p.cache_stats(id)),
                })
            })
            .collect()
    }
}
