//! `acm-engine`: the sans-IO ACM resolution state machine.
//!
//! **It performs no I/O and reads no clock or entropy; all time is passed in.** It holds
//! everything the reference daemon core (`ibacm`) and its default provider (`ibacmp`)
//! decide: request validation, destination and route caches, the ACM multicast
//! protocol (MAD class 0x2C), SA PathRecord queries and MCMemberRecord joins, retries,
//! credits, perf counters, and config-file parsing.
//!
//! # Driving an engine
//!
//! The API follows quinn-proto and str0m. Methods fall in three groups:
//!
//! * **Inputs**: [`Engine::handle`] takes one [`Input`] at an instant. It also fires
//!   every timer due at that instant (looked at once per instant, and again by every
//!   [`Input::Tick`]: see [`Engine::handle`]), so a driver that never sends
//!   [`Input::Tick`] is still correct as long as its clock moves, and spurious ticks do
//!   nothing. An instant earlier than the last one seen is taken as the last one: the
//!   engine's clock never goes back.
//! * **Outputs**: [`Engine::poll_output`] returns the next [`Output`] in causal order:
//!   for a client ([`ClientOutput`]), for the fabric ([`FabricOp`]) or for the log.
//! * **Timing**: [`Engine::poll_timeout`] is the earliest instant at which the engine
//!   wants [`Input::Tick`]; it is pure, so a simulator can ask thousands of engines.
//!
//! The run loop:
//!
//! 1. Build the engine with [`Engine::new`] (config, seed, now).
//! 2. Feed the devices with [`Input::DeviceAdded`] and the host's IPoIB addresses with
//!    [`Input::LocalIpAdded`].
//! 3. **Drain the outputs until there are none before waiting again**, carrying out
//!    each in order. Backends do it through [`driver`]: they implement
//!    [`driver::Fabric`] once, and [`driver::poll_output`] carries out the fabric
//!    operations, feeds back what the fabric answers at once, and hands back only
//!    client replies and log lines. A driver may hand over several inputs (the requests
//!    of one socket read) before it drains: the engine assumes nothing about when an
//!    operation is carried out, so that is the same as a fabric that answers later.
//! 4. Wait for I/O or for `poll_timeout`, whichever comes first; then go to 3 with the
//!    new input (or `Input::Tick`).
//!
//! ```
//! use acm_engine::{Engine, EngineConfig, Input, Instant};
//! let mut engine = Engine::new(EngineConfig::default(), 1, Instant::ZERO);
//! engine.handle(Instant::from_millis(5), Input::Tick);
//! while let Some(out) = engine.poll_output() {
//!     // carry it out
//!     let _ = out;
//! }
//! assert_eq!(engine.poll_timeout(), None);
//! ```
//!
//! # How an input reaches a provider
//!
//! Inside, an engine is the core (the reference's `acm.c`: devices, ports, endpoints,
//! request validation, the SA agent, netlink) and its providers ([`provider::Provider`],
//! `ibacmp` by default). The core decides and never calls a provider: for each input it
//! returns what the providers must be told, one call (a client's RESOLVE, an SA answer)
//! or a plan of several with its own work between them (a port that comes up: open the
//! port, then make its endpoints, then subscribe to the SA's events). The engine's
//! dispatch (`engine.rs`) routes every input and makes every such call, lending the
//! provider the core as its [`provider::Ctx`]; so one file shows how any input reaches
//! a provider. A client request's header is parsed once, when its frame is checked,
//! and travels typed from there to the reply.
#![no_std]
#![cfg_attr(not(fuzzing), warn(missing_docs))]

extern crate alloc;

pub mod acmp;
mod addr;
pub mod config;
mod core;
mod counters;
mod device;
pub mod driver;
mod engine;
mod fxhash;
mod io;
pub mod log;
pub mod provider;
mod request;
mod rtt;
mod stats;
mod time;
mod view;

// The engine's vocabulary, one path each: the modules that define it are private.
pub use addr::Address;
use config::{AddrFile, HostEntry, Options, RouteData};
pub use counters::{COUNTER_COUNT, COUNTER_NAMES, Counter, Counters, LookupCounters, LookupEvent};
pub use device::{DeviceDesc, DeviceId, PortAttrs, PortId, PortState, rate_from_width_speed};
pub use engine::Engine;
pub use fxhash::{SeqBuildHasher, SeqHasher};
pub use io::{
    AddressVector, ClientOutput, ConnId, EndpointId, FabricEvent, FabricOp, GlobalRoute,
    HostOutput, InlineBytes, Input, LocalIp, LookupId, Mad, MadBytes, McastGroup, NeighId,
    NeighQuery, NeighResult, OpenQp, Output, PortEvent, RecvInfo, Reply, SaDest, SaSend, SendToken,
    SourceQuery, UdSend,
};
pub use stats::{CacheStats, EndpointStats};
pub use time::Instant;
pub use view::{CacheView, VIEW_REPLY_MAX, ViewAnswer};

use alloc::vec::Vec;

/// Bounds on every queue, so that no client or peer can make the engine grow without
/// limit. Each overflow answers with a defined status, noted per field. (The
/// destination cache is bounded by the `max_dest_cache_bytes` option, and evicts.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Requests one client connection may have waiting (overflow: ENOMEM reply).
    pub pending_per_conn: u32,
    /// Requests waiting for a source-address lookup (overflow: ENOMEM reply).
    pub source_lookups: usize,
    /// Requests queued on one destination (overflow: ENOMEM reply).
    pub queued_per_dest: usize,
    /// ACM MADs waiting for a send credit per endpoint queue (overflow: the resolve
    /// fails with ENOMEM, a response is dropped and logged).
    pub send_queue: usize,
    /// SA MADs waiting for a credit per port (overflow: the query fails with ENOMEM).
    pub sa_queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            pending_per_conn: 4096,
            source_lookups: 4096,
            queued_per_dest: 4096,
            send_queue: 4096,
            sa_queue: 4096,
        }
    }
}

/// Everything an engine is configured with, already parsed.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// `ibacm_opts.cfg`.
    pub options: Options,
    /// `ibacm_addr.cfg`; `None` when the file is missing (endpoints then get only the
    /// host's IPoIB addresses, as the reference when generation fails).
    pub addr_file: Option<AddrFile>,
    /// `addr_preload acm_hosts` data (used only if the option selects it).
    pub hosts: Vec<HostEntry>,
    /// `route_preload opensm_full_v1` data (used only if the option selects it).
    pub route_data: Option<RouteData>,
    /// Queue bounds.
    pub limits: Limits,
    /// What the config parsers reported (unknown options, rejected lines): the engine
    /// logs each at start, naming file and line.
    pub diagnostics: Vec<config::Diagnostic>,
    /// The `nlmsg_pid` of netlink replies (the daemon's pid; the kernel does not check
    /// it).
    pub netlink_pid: u32,
}
