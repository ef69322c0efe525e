//! The options file (`ibacm_opts.cfg`, docs/daemon.md §7), including its `provider` lines
//! (docs/daemon.md §4).
//!
//! The reference reads this file twice (once in the core, once in the provider) plus a
//! third time for the `provider` lines; [`Options::parse`] does all three over the same
//! text and yields one typed [`Options`], so each setting lives in one place.

use super::diagnostic::{Diagnostic, Severity};
use super::lex::{self, Scanner};
use acm_proto::{Mtu, Rate};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The name of the provider that is built in: the default provider of every port unless a
/// `provider <name> default` line says otherwise (docs/daemon.md §4).
pub const BUILTIN_PROVIDER: &str = "ibacmp";

/// The accepted range of every numeric option (inclusive). A value below its minimum
/// (or with no digits) is warned and leaves the setting unchanged (the default, unless
/// an earlier line set it); a value above its maximum is warned and clamped to it.
pub mod range {
    /// `log_level`: 0 basic, 1 configuration, 2 every operation.
    pub const LOG_LEVEL: (i32, i32) = (0, 2);
    /// `umad_debug_level`: 0 off, more is more libibumad output.
    pub const UMAD_DEBUG_LEVEL: (i32, i32) = (0, i32::MAX);
    /// `server_port`: a TCP port (the reference kept the low 16 bits of any number).
    pub const SERVER_PORT: (u16, u16) = (1, u16::MAX);
    /// `timeout` in ms: at least 1 (0 would retry at once), at most 10 minutes.
    pub const TIMEOUT: (u32, u32) = (1, 600_000);
    /// `retries`: each retry of an unanswered lookup costs a whole `timeout` more.
    pub const RETRIES: (u32, u32) = (0, 100);
    /// `sa_depth`: SA MADs outstanding per port.
    pub const SA_DEPTH: (u32, u32) = (1, 1024);
    /// `addr_timeout`, `route_timeout` in minutes; −1 is never.
    pub const EXPIRY: (i32, i32) = (-1, i32::MAX);
    /// `resolve_depth`, `send_depth`: MADs outstanding per endpoint (each outstanding
    /// resolve is a multicast every host receives).
    pub const DEPTH: (u32, u32) = (1, 256);
    /// `recv_depth`: receive buffers posted per endpoint.
    pub const RECV_DEPTH: (u32, u32) = (1, 65_536);
    /// `max_pending_per_client`.
    pub const MAX_PENDING_PER_CLIENT: (u32, u32) = (1, 65_536);
    /// `max_background_resolves` (0: NODELAY never leaves a lookup behind).
    pub const MAX_BACKGROUND_RESOLVES: (u32, u32) = (0, 65_536);
    /// `max_dest_cache_bytes`: at least 64 KiB (a few hundred destinations), at most
    /// 1 TiB (a bound above the machine's memory bounds nothing, but a typing slip
    /// should not pass for one).
    pub const MAX_DEST_CACHE_BYTES: (u64, u64) = (64 << 10, 1 << 40);
    /// `sa_busy_retries`: BUSY answers waited out per SA MAD (0: the reference's
    /// behaviour, BUSY fails the query).
    pub const SA_BUSY_RETRIES: (u32, u32) = (0, 1000);
    /// `sa_backoff_ms`: the first back-off after a BUSY answer, in ms (at most a
    /// minute; it doubles up to 64 times that).
    pub const SA_BACKOFF: (u32, u32) = (1, 60_000);
    /// `acm_timeout_max`: the longest ACM retry wait (beyond the subnet timeout) the
    /// measured round trip may stretch it to, in ms (0: always `timeout`).
    pub const ACM_TIMEOUT_MAX: (u32, u32) = (0, 600_000);
    /// `sa_timeout_max`: the longest per-try SA timeout the round trip may stretch it
    /// to, in ms (0: no adaptation, always `timeout`); at most 10 minutes, as `timeout`.
    pub const SA_TIMEOUT_MAX: (u32, u32) = (0, 600_000);
    /// `kernel_timeout` in ms: 0 leaves the kernel's wait alone; the kernel itself keeps
    /// any other value within 100 to 200,000 ms.
    pub const KERNEL_TIMEOUT: (u32, u32) = (0, 200_000);
    /// `provider_timeout` in ms: at least 100 (a provider's answer crosses threads), at
    /// most an hour.
    pub const PROVIDER_TIMEOUT: (u32, u32) = (100, 3_600_000);
}

/// The default `sa_busy_retries`. An SA that answers BUSY is one that works: each
/// BUSY costs the SA almost nothing and the back-off (20 ms doubling to 1.28 s, with
/// jitter) spreads the retries. 32 of them outlast about 30 s of back-to-back
/// refusals, far beyond any queue a working SA drains; the bound is there only so that
/// an SA that answers nothing but BUSY (a broken one) still ends in a failure.
pub const DEFAULT_SA_BUSY_RETRIES: u32 = 32;

/// The default `sa_backoff_ms`: short enough to lose little when the BUSY was a passing
/// burst, and doubling (with jitter) to 1.28 s within six refusals, past the wait of a
/// saturated SA's queue (one second of service in the simulator's job-start storm,
/// BENCHMARKS.md, "The job-start storm against a finite SA", where the SA
/// stays busy to the end and the BUSY answers cost no simulated time).
pub const DEFAULT_SA_BACKOFF_MS: u32 = 20;

/// The default `acm_timeout_max`, in ms: as [`DEFAULT_SA_TIMEOUT_MAX_MS`], for the same
/// reason (receivers slow to answer are waited for, not asked again by multicast).
pub const DEFAULT_ACM_TIMEOUT_MAX_MS: u32 = 16_000;

/// The default `sa_timeout_max`, in ms: 8 times the reference's 2 s timeout, so a
/// queueing SA (whose round trip the timeout follows) can take up to 16 s per try
/// before a MAD is retried.
pub const DEFAULT_SA_TIMEOUT_MAX_MS: u32 = 16_000;

/// The default `max_dest_cache_bytes`, 64 MiB per endpoint: about 257,000
/// destinations (a destination costs at most 261 bytes), several times the largest
/// fabrics' host counts, while a peer that makes up requesters (each request it sends
/// from a new source address makes every receiver cache that address) can make one
/// endpoint's cache hold no more than that. Without a bound in bytes, a bound of 2^20
/// entries let such a peer take about 270 MB per endpoint.
pub const DEFAULT_MAX_DEST_CACHE_BYTES: u64 = 64 << 20;

/// The default `provider_timeout`: a minute, longer than a lookup that waits behind a
/// few others in libibacmp's queue takes with the reference's default `timeout` and
/// `retries` (6 s each way), while a provider that hangs still frees its clients.
pub const DEFAULT_PROVIDER_TIMEOUT_MS: u32 = 60_000;

/// The default `resolve_depth` (the reference's is 1).
///
/// A lookup nobody answers holds its credit for the whole retry cycle (4 s with the
/// reference fabric's `timeout 1000` and `retries 1`, 9 s with the defaults): at depth
/// 1 a single unreachable destination makes every other new destination of the
/// endpoint wait that long. At depth D, fewer than D such lookups delay nobody; more,
/// from one client, delay another client's new destination by one lookup (credits go
/// round-robin over the clients); more, one per client, are served in turn, D at a
/// time. Depth costs multicast traffic when every host starts resolving at once: each
/// outstanding request is a MAD every host receives. Measured on the simulator
/// (`cargo run --release -p acm-io-sim --example resolve_depth`, figures in
/// BENCHMARKS.md, "`resolve_depth` and fair resolution"): a new destination asked
/// beside 4 unanswered lookups waits 3.5 s at depths 1 to 4 and 114 µs at 8; beside
/// 256 unanswered lookups of 256 clients, 1,036 s at depth 1, 129 s at 8, 64 s at 16;
/// a 256-host all-to-all storm is answered in the same 16.3 ms at every depth but
/// sends 512 ACM MADs at depth 1,
/// 2,816 at 4, 5,888 at 8 and 12,032 at 16. 8 absorbs a handful of dead destinations
/// and divides a many-client miss storm by 8, for about 11 times the storm's
/// multicasts; 16 would double that traffic again for a benefit only when 8 or more
/// lookups go unanswered at once.
pub const DEFAULT_RESOLVE_DEPTH: u32 = 8;

/// Where the daemon listens for clients (`server_mode`,
/// docs/protocol/client-messages.md §1), so the daemon can pick its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServerMode {
    /// A unix socket (the default, and what every unrecognised value means).
    #[default]
    Unix,
    /// TCP on 127.0.0.1:`server_port`.
    Loop,
    /// TCP on every address, port `server_port`.
    Open,
}

/// One way of learning a destination IP's GID (an item of `addr_prot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddrProt {
    /// ACM resolution over IB multicast: the peer's ibacm answers (the reference's only
    /// protocol, and the default).
    #[default]
    Acm,
    /// The host's IPoIB neighbour table (ours): the kernel's ARP or neighbour discovery
    /// learns the peer's QPN and GID from its IPoIB hardware address, so the peer needs
    /// no ibacm (docs/protocol/ipoib-neigh.md §2). IP destinations only.
    Neigh,
}

impl AddrProt {
    /// Every protocol, in the order [`AddrProt::name`] documents them.
    pub const ALL: [Self; 2] = [Self::Acm, Self::Neigh];

    /// The name the options file spells it with.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Acm => "acm",
            Self::Neigh => "neigh",
        }
    }
}

/// `addr_prot`: the address protocols in the order they are tried, each at most once.
/// A destination whose lookup fails or times out with one goes on to the next; the last
/// one's failure is the client's answer. A small `Copy` list, so providers can keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrProts {
    items: [AddrProt; AddrProt::ALL.len()],
    len: u8,
}

impl Default for AddrProts {
    /// `acm` alone, as the reference.
    fn default() -> Self {
        Self::one(AddrProt::Acm)
    }
}

impl AddrProts {
    /// A list of one protocol.
    #[must_use]
    pub const fn one(p: AddrProt) -> Self {
        Self {
            items: [p; AddrProt::ALL.len()],
            len: 1,
        }
    }

    /// The list of `items`, in order; `None` if it is empty or names a protocol twice.
    #[must_use]
    pub fn new(items: &[AddrProt]) -> Option<Self> {
        if items.is_empty() || items.len() > AddrProt::ALL.len() {
            return None;
        }
        let mut out = Self::one(items[0]);
        for &p in &items[1..] {
            if out.contains(p) {
                return None;
            }
            out.items[usize::from(out.len)] = p;
            out.len += 1;
        }
        Some(out)
    }

    /// The protocols, in the order they are tried.
    #[must_use]
    pub fn as_slice(&self) -> &[AddrProt] {
        &self.items[..usize::from(self.len)]
    }

    /// The protocol tried in place `i` (0 first).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<AddrProt> {
        self.as_slice().get(i).copied()
    }

    /// Whether `p` is in the list.
    #[must_use]
    pub fn contains(&self, p: AddrProt) -> bool {
        self.as_slice().contains(&p)
    }

    /// Parses an `addr_prot` value: names separated by commas, without spaces,
    /// case-insensitively. The error says what is wrong, for the diagnostic.
    ///
    /// # Errors
    /// An empty item, an unknown name or a name given twice.
    pub fn parse(value: &[u8]) -> Result<Self, String> {
        let mut items = Vec::new();
        for item in value.split(|&b| b == b',') {
            if item.is_empty() {
                return Err(String::from("an empty protocol name"));
            }
            let Some(p) = AddrProt::ALL.iter().copied().find(|p| eq(item, p.name())) else {
                return Err(format!(
                    "unknown protocol '{}' (known: acm, neigh)",
                    text(item)
                ));
            };
            if items.contains(&p) {
                return Err(format!("'{}' is listed twice", p.name()));
            }
            items.push(p);
        }
        Self::new(&items).ok_or_else(|| String::from("an empty list"))
    }
}

impl core::fmt::Display for AddrProts {
    /// The options file's spelling: `acm,neigh`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, p) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(p.name())?;
        }
        Ok(())
    }
}

/// How routes (paths) are found once the address is known (`route_prot`,
/// docs/ibacmp.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RouteProt {
    /// A PathRecord query to the SA (the default).
    #[default]
    Sa,
    /// The path is built from the multicast group; group 1 is joined.
    Acm,
}

/// Whether local addresses get ready-made loopback cache entries (`loopback_prot`,
/// docs/ibacmp.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LoopbackProt {
    /// Every local address gets a READY entry (the default).
    #[default]
    Local,
    /// Local addresses are resolved over the network like any other.
    None,
}

/// Whether routes are preloaded from a file when an endpoint is created
/// (docs/ibacmp.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RoutePreload {
    /// No route preload (the default; `none` or `no`).
    #[default]
    None,
    /// OpenSM's full path-record dump (`opensm_full_v1`), read from `route_data_file`.
    OpensmFullV1,
}

/// Whether addresses are preloaded from a file when an endpoint is created
/// (docs/ibacmp.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddrPreload {
    /// No address preload (the default; `none` or `no`).
    #[default]
    None,
    /// `<address> <GID>` lines (`acm_hosts`), read from `addr_data_file`.
    AcmHosts,
}

/// What a `provider` line applies to (docs/daemon.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderTarget {
    /// `provider <name> default`: ports that no prefix rule claims.
    Default,
    /// `provider <name> <prefix>`: ports whose GID 0 subnet prefix equals this number
    /// (the prefix as a number, i.e. `Gid::subnet_prefix()`; the file gives it in the
    /// same order, e.g. `0xfe80000000000000`).
    SubnetPrefix(u64),
}

/// One `provider <name> <prefix|default>` line, in file order, so ports can be assigned
/// to providers as the reference assigns them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderRule {
    /// The provider's name, as written (the reference compares it case-insensitively).
    pub name: String,
    /// What the rule covers.
    pub target: ProviderTarget,
}

/// The options of ours that only the daemon reads (access control, metrics, the bounds
/// on queued replies and on each user's connections, the threads serving clients). The
/// reference ignores names it does not know, so a file that uses them still works with
/// it. Their values are checked by the daemon, which also looks names up in the user
/// and group databases, so [`Options::parse`] only collects them
/// ([`Options::daemon_options`]).
pub const DAEMON_OPTIONS: [&str; 10] = [
    "server_socket_group",
    "server_socket_mode",
    "allow_users",
    "allow_groups",
    "metrics_file",
    "metrics_interval",
    "max_queued_reply_bytes",
    "max_connections_per_user",
    "wait_for_device",
    "worker_threads",
];

/// One line of a [`DAEMON_OPTIONS`] option, as written, so that the daemon can check it
/// and name the line when it refuses it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OptionLine {
    /// The line number, from 1.
    pub line: usize,
    /// The option, as spelled in [`DAEMON_OPTIONS`] (the file's spelling may differ in
    /// case).
    pub name: &'static str,
    /// Everything after the name on the whole line, without surrounding whitespace: a
    /// list may hold spaces, and a line is not cut at 119 bytes as the reference's
    /// options are (empty when the line has only the name). Bytes as written: a name or
    /// path that is not UTF-8 must be refused by the daemon with its line, not replaced
    /// by U+FFFD here (which would name another user, group or file).
    pub value: Vec<u8>,
}

/// Every setting of the options file (docs/daemon.md §7), typed, with the reference's
/// defaults, so the core, the provider and the daemon read their settings from one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `log_file`: `stdout`, `stderr` (case-insensitive) or a path.
    pub log_file: String,
    /// `log_level`: 0 basic, 1 verbose configuration, 2 verbose operation.
    pub log_level: i32,
    /// `umad_debug_level`: > 0 turns on libibumad debugging.
    pub umad_debug_level: i32,
    /// `lock_file`: the pid/lock file.
    pub lock_file: String,
    /// `server_port`: TCP port for `loop`/`open`. The reference stores `atoi(value)` in a
    /// 16-bit short (`70000` became 4464, `-1` 65535); here values outside 1..=65535
    /// are warned ([`range::SERVER_PORT`]).
    pub server_port: u16,
    /// `server_mode`.
    pub server_mode: ServerMode,
    /// `acme_plus_kernel_only`: suppresses the public rendezvous symlinks
    /// (docs/protocol/client-messages.md §1).
    pub acme_plus_kernel_only: bool,
    /// `provider_lib_path`: the directory of loadable providers.
    pub provider_lib_path: String,
    /// `builtin_provider` (ours, yes by default): whether the built-in Rust `ibacmp` is
    /// registered. With `no`, a loaded provider library named `ibacmp` (Debian's
    /// libibacmp.so) serves in its place (docs/providers.md §1).
    pub builtin_provider: bool,
    /// `provider_timeout` (ours, ms): how long a provider library has to answer a
    /// request before the core answers it ETIMEDOUT (docs/providers.md §4). The
    /// reference waits for ever; a library such as libibacmp queues its lookups behind
    /// one another (one send outstanding per endpoint), so an answer may come several
    /// of its own timeouts after the request.
    pub provider_timeout: u32,
    /// `support_ips_in_addr_cfg`: whether IP literals in the address file are accepted
    /// (the engine applies it; [`crate::config::AddrFile`] keeps every line).
    pub support_ips_in_addr_cfg: bool,
    /// `timeout` in ms: the SA MAD timeout and the extra ACM retry interval. The
    /// reference wrapped negative values (`-5` became 4294967291); here they are
    /// warned and ignored ([`range::TIMEOUT`]).
    pub timeout_ms: u32,
    /// `retries`: SA MAD retries and ACM retransmissions ([`range::RETRIES`]).
    pub retries: u32,
    /// `sa_depth`: outstanding SA MADs per port ([`range::SA_DEPTH`]); with
    /// `sa_adaptive_depth`, the ceiling of the adaptive window.
    pub sa_depth: u32,
    /// `sa_busy_retries` (not in the reference): how many BUSY answers one SA MAD
    /// waits out (back-off, then sent again) before the query fails; 0 fails it at the
    /// first, as the reference does ([`DEFAULT_SA_BUSY_RETRIES`]).
    pub sa_busy_retries: u32,
    /// `sa_backoff_ms` (not in the reference): the first back-off after a BUSY answer,
    /// doubling with each further BUSY of the same MAD up to 64 times, each drawn
    /// between half and one and a half of that from the engine's seed
    /// ([`DEFAULT_SA_BACKOFF_MS`]).
    pub sa_backoff_ms: u32,
    /// `sa_timeout_max` in ms (not in the reference): the per-try SA timeout follows
    /// the measured round trip (smoothed, plus four deviations) between `timeout` and
    /// this; 0 keeps it at `timeout`, as the reference does
    /// ([`DEFAULT_SA_TIMEOUT_MAX_MS`]).
    pub sa_timeout_max_ms: u32,
    /// `sa_adaptive_depth` (not in the reference): SA MADs in flight per port start
    /// at `sa_depth`, halve after a BUSY answer or a timeout and grow back by one per
    /// window of answers, never above `sa_depth`; `no` keeps `sa_depth` fixed, as the
    /// reference does.
    pub sa_adaptive_depth: bool,
    /// `acm_timeout_max` in ms (not in the reference): the wait before an ACM request
    /// is sent again (after the subnet timeout) follows the endpoint's measured
    /// request-to-response round trip between `timeout` and this; 0 keeps it at
    /// `timeout`, as the reference does ([`DEFAULT_ACM_TIMEOUT_MAX_MS`]).
    pub acm_timeout_max_ms: u32,
    /// `provider` lines, in file order.
    pub providers: Vec<ProviderRule>,
    /// `addr_prot`: the address protocols, in the order they are tried (`acm` alone by
    /// default, as the reference).
    pub addr_prot: AddrProts,
    /// `addr_timeout` in minutes, raw; −1 means never (see [`expiry_minutes`]).
    pub addr_timeout: i32,
    /// `route_prot`.
    pub route_prot: RouteProt,
    /// `route_timeout` in minutes, raw; −1 (the default) means never. Only the lower-case
    /// option name is recognised.
    pub route_timeout: i32,
    /// `loopback_prot`.
    pub loopback_prot: LoopbackProt,
    /// `resolve_depth`: outstanding ACM address lookups per endpoint. The reference's
    /// default is 1; ours is [`DEFAULT_RESOLVE_DEPTH`] (why: there). `resolve_depth 1`
    /// behaves as the reference does.
    pub resolve_depth: u32,
    /// `max_pending_per_client` (not in the reference): how many distinct destinations
    /// one client connection may wait on at once. A request for one more is answered
    /// ENOMEM at once, for that client only; cache hits and requests joining a lookup
    /// the client already waits on are always served. librdmacm and libacm ask one
    /// thing at a time per connection, so only a flood reaches the bound.
    pub max_pending_per_client: u32,
    /// `max_background_resolves` (not in the reference): how many lookups per endpoint
    /// may run, or wait for a credit, with nobody waiting for them (the warm-up a
    /// NODELAY miss leaves behind). A NODELAY miss beyond it is answered ENODATA as
    /// always, but starts no lookup. Background lookups only get a credit when no
    /// lookup someone waits for is queued.
    pub max_background_resolves: u32,
    /// `max_dest_cache_bytes` (not in the reference): the memory one endpoint's
    /// destination cache may take, in bytes. The cache holds at most this over the most
    /// one entry costs (261 bytes: the entry, its share of the index and of the free
    /// list); when it is full, a new destination evicts the idle entry used least
    /// recently (a second-chance clock). Entries that requests wait on or whose
    /// lookup is under way are never evicted, nor the host's own addresses (cached even
    /// over the bound) and the preloaded hosts and routes (which count against it). The
    /// reference's cache has no bound.
    pub max_dest_cache_bytes: u64,
    /// `kernel_timeout` (not in the reference): how long, in ms, the kernel should wait
    /// for the daemon's answer to each of its path requests before it asks the SA itself
    /// (docs/protocol/netlink-ls.md §8). 0, the default, leaves the kernel's own wait
    /// (2000 ms) alone, as the reference does; the daemon answers every path request
    /// within the wait either way, counting this one only once it reached the kernel.
    /// Address requests (IP_RESOLVE) are not bound by it
    /// (docs/protocol/netlink-ls.md §7).
    pub kernel_timeout: u32,
    /// `send_depth`: outstanding ACM responses per endpoint.
    pub send_depth: u32,
    /// `recv_depth`: receive buffers per endpoint.
    pub recv_depth: u32,
    /// `min_mtu`, converted from bytes to the IB enum (anything unknown is 2048).
    pub min_mtu: Mtu,
    /// `min_rate`, converted from Gb/s to the IB enum (anything unknown is 10 Gb/s).
    pub min_rate: Rate,
    /// `route_preload`.
    pub route_preload: RoutePreload,
    /// `route_data_file`: the route preload file.
    pub route_data_file: String,
    /// `addr_preload`.
    pub addr_preload: AddrPreload,
    /// `addr_data_file`: the address preload file.
    pub addr_data_file: String,
    /// `sm_events` (not in the reference; yes by default): whether each port subscribes
    /// with the SA to the traps that say a port GID came or went (64/65) and that a
    /// multicast group was created or deleted (66/67), so that a Report invalidates the
    /// cache entries concerned at once (docs/protocol/sa.md §9). With `no`, nothing is
    /// subscribed and cached addresses and routes stay until they expire, as with the
    /// reference.
    pub sm_events: bool,
    /// The lines of the daemon's own options ([`DAEMON_OPTIONS`]), in file order.
    pub daemon_options: Vec<OptionLine>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            log_file: String::from("/var/log/ibacm.log"),
            log_level: 0,
            umad_debug_level: 0,
            lock_file: String::from("/run/ibacm.pid"),
            server_port: 6125,
            server_mode: ServerMode::Unix,
            acme_plus_kernel_only: false,
            provider_lib_path: String::from("/usr/lib/x86_64-linux-gnu/ibacm"),
            builtin_provider: true,
            provider_timeout: DEFAULT_PROVIDER_TIMEOUT_MS,
            support_ips_in_addr_cfg: false,
            timeout_ms: 2000,
            retries: 2,
            sa_depth: 1,
            sa_busy_retries: DEFAULT_SA_BUSY_RETRIES,
            sa_backoff_ms: DEFAULT_SA_BACKOFF_MS,
            sa_timeout_max_ms: DEFAULT_SA_TIMEOUT_MAX_MS,
            sa_adaptive_depth: true,
            acm_timeout_max_ms: DEFAULT_ACM_TIMEOUT_MAX_MS,
            providers: Vec::new(),
            addr_prot: AddrProts::one(AddrProt::Acm),
            addr_timeout: 1440,
            route_prot: RouteProt::Sa,
            route_timeout: -1,
            loopback_prot: LoopbackProt::Local,
            resolve_depth: DEFAULT_RESOLVE_DEPTH,
            max_pending_per_client: 64,
            max_background_resolves: 64,
            max_dest_cache_bytes: DEFAULT_MAX_DEST_CACHE_BYTES,
            kernel_timeout: 0,
            send_depth: 1,
            recv_depth: 1024,
            min_mtu: Mtu::MTU_2048,
            min_rate: Rate::RATE_10,
            route_preload: RoutePreload::None,
            route_data_file: String::from("/etc/rdma/ibacm_route.data"),
            addr_preload: AddrPreload::None,
            addr_data_file: String::from("/etc/rdma/ibacm_hosts.data"),
            sm_events: true,
            daemon_options: Vec::new(),
        }
    }
}

/// The expiry time, in minutes, of an entry stored at `now_min` with a timeout of `raw`
/// minutes, computed as the reference does: the signed option is added as an unsigned
/// 32-bit value, so −1 (never) means "in 2³² − 1 minutes" (about 8000 years) rather
/// than a special case. The addition wraps like C's unsigned arithmetic.
#[must_use]
pub const fn expiry_minutes(raw: i32, now_min: u64) -> u64 {
    now_min.wrapping_add(raw as u32 as u64)
}

/// `min_mtu`'s conversion: bytes to the IB MTU enum.
fn mtu_from_bytes(bytes: i32) -> Option<Mtu> {
    u32::try_from(bytes).ok().and_then(Mtu::from_bytes)
}

/// `min_rate`'s conversion: whole Gb/s (2 meaning 2.5) to the IB rate enum; only the
/// values the reference knows.
fn rate_from_gbps(gbps: i32) -> Option<Rate> {
    Some(match gbps {
        2 => Rate::RATE_2_5,
        5 => Rate::RATE_5,
        10 => Rate::RATE_10,
        14 => Rate::RATE_14,
        20 => Rate::RATE_20,
        25 => Rate::RATE_25,
        30 => Rate::RATE_30,
        40 => Rate::RATE_40,
        56 => Rate::RATE_56,
        60 => Rate::RATE_60,
        80 => Rate::RATE_80,
        100 => Rate::RATE_100,
        112 => Rate::RATE_112,
        120 => Rate::RATE_120,
        168 => Rate::RATE_168,
        200 => Rate::RATE_200,
        300 => Rate::RATE_300,
        _ => return None,
    })
}

/// The [`DAEMON_OPTIONS`] entry `name` spells (case-insensitively, as every option but
/// `route_timeout`).
fn daemon_option(name: &[u8]) -> Option<&'static str> {
    DAEMON_OPTIONS.iter().copied().find(|d| eq(name, d))
}

/// `s` without C whitespace at either end.
/// ASCII case-insensitive equality, as `strcasecmp` in the C locale.
fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Bytes as text for values and messages (invalid UTF-8 shown with U+FFFD).
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The parse state: the options so far and the diagnostics.
struct Parser<'f> {
    file: &'f str,
    opts: Options,
    diags: Vec<Diagnostic>,
}

impl Parser<'_> {
    fn diag(&mut self, line: usize, severity: Severity, message: String) {
        self.diags
            .push(Diagnostic::new(self.file, line, severity, message));
    }

    /// An `atoi` option, with a warning when the value is not entirely a number.
    fn int(&mut self, line: usize, name: &[u8], value: &[u8]) -> i32 {
        let n = lex::atoi(value);
        if !lex::is_number(value, 10) {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "value '{}' of option '{}' is not a number; read as {n}",
                    text(value),
                    text(name)
                ),
            );
        }
        n
    }

    /// A numeric option with a range (see [`Options`]): `None` (setting left unchanged,
    /// with a warning) when the value has no digits or is below `min`; `max` (with a
    /// warning) when it is above. Trailing junk after the digits is warned and ignored.
    /// The reference reads these with `atoi` and keeps whatever comes out (`timeout -5`
    /// became 4294967291 ms, a lookup that never ends; `log_level banana` 0), silently.
    fn ranged(
        &mut self,
        line: usize,
        name: &[u8],
        value: &[u8],
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let (n, end) = lex::strtol(value, 10);
        if end == 0 {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "value '{}' of option '{}' is not a number; setting left unchanged",
                    text(value),
                    text(name)
                ),
            );
            return None;
        }
        if end != value.len() {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "value '{}' of option '{}' is not a number; read as {n}",
                    text(value),
                    text(name)
                ),
            );
        }
        if n < min {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "option '{}' {n} is below its minimum {min}; setting left unchanged",
                    text(name)
                ),
            );
            return None;
        }
        if n > max {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "option '{}' {n} is above its maximum {max}; using {max}",
                    text(name)
                ),
            );
            return Some(max);
        }
        Some(n)
    }

    /// A yes/no option (`yes`, `true`, `1` or `no`, `false`, `0`, any case); anything
    /// else is warned, naming file and line, and leaves the setting unchanged.
    fn yes_no(&mut self, line: usize, name: &[u8], value: &[u8]) -> Option<bool> {
        if ["yes", "true", "1"].iter().any(|w| eq(value, w)) {
            Some(true)
        } else if ["no", "false", "0"].iter().any(|w| eq(value, w)) {
            Some(false)
        } else {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "value '{}' of option '{}' is not yes or no; setting left unchanged",
                    text(value),
                    text(name)
                ),
            );
            None
        }
    }

    /// [`Parser::ranged`] for an unsigned option: sets `*slot` when the value is usable.
    fn set_u32(
        &mut self,
        line: usize,
        name: &[u8],
        value: &[u8],
        range: (u32, u32),
        slot: fn(&mut Options) -> &mut u32,
    ) {
        if let Some(n) = self.ranged(line, name, value, range.0.into(), range.1.into()) {
            *slot(&mut self.opts) = n as u32;
        }
    }

    /// [`Parser::ranged`] for a signed option.
    fn set_i32(
        &mut self,
        line: usize,
        name: &[u8],
        value: &[u8],
        range: (i32, i32),
        slot: fn(&mut Options) -> &mut i32,
    ) {
        if let Some(n) = self.ranged(line, name, value, range.0.into(), range.1.into()) {
            *slot(&mut self.opts) = n as i32;
        }
    }

    /// The warning for an enumerated value that the reference does not know.
    fn unchanged(&mut self, line: usize, name: &[u8], value: &[u8]) {
        self.diag(
            line,
            Severity::Warning,
            format!(
                "invalid value '{}' for option '{}'; setting left unchanged",
                text(value),
                text(name)
            ),
        );
    }

    /// One `<name> <value>` line of the core's and the provider's option parsers.
    fn option(&mut self, line: usize, name: &[u8], value: &[u8]) {
        let lower = name.to_ascii_lowercase();
        match lower.as_slice() {
            b"log_file" => self.opts.log_file = text(value),
            b"log_level" => self.set_i32(line, name, value, range::LOG_LEVEL, |o| &mut o.log_level),
            b"umad_debug_level" => {
                self.set_i32(line, name, value, range::UMAD_DEBUG_LEVEL, |o| {
                    &mut o.umad_debug_level
                });
            }
            b"lock_file" => self.opts.lock_file = text(value),
            b"server_port" => {
                let (min, max) = range::SERVER_PORT;
                if let Some(n) = self.ranged(line, name, value, min.into(), max.into()) {
                    self.opts.server_port = n as u16;
                }
            }
            b"server_mode" => {
                self.opts.server_mode = if eq(value, "open") {
                    ServerMode::Open
                } else if eq(value, "loop") {
                    ServerMode::Loop
                } else {
                    if !eq(value, "unix") {
                        self.diag(
                            line,
                            Severity::Warning,
                            format!("unknown server_mode '{}'; using unix", text(value)),
                        );
                    }
                    ServerMode::Unix
                };
            }
            b"acme_plus_kernel_only" => {
                let (n, _) = lex::strtol(value, 0);
                let on = eq(value, "true") || eq(value, "yes") || n != 0;
                let plain = ["true", "yes", "false", "no"].iter().any(|w| eq(value, w));
                if !plain && !lex::is_number(value, 0) {
                    self.diag(
                        line,
                        Severity::Warning,
                        format!(
                            "value '{}' of option 'acme_plus_kernel_only' is neither yes/true nor a number; read as {}",
                            text(value),
                            if on { "yes" } else { "no" }
                        ),
                    );
                }
                self.opts.acme_plus_kernel_only = on;
            }
            b"provider_lib_path" => self.opts.provider_lib_path = text(value),
            b"builtin_provider" => {
                if ["yes", "true", "1"].iter().any(|w| eq(value, w)) {
                    self.opts.builtin_provider = true;
                } else if ["no", "false", "0"].iter().any(|w| eq(value, w)) {
                    self.opts.builtin_provider = false;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            b"support_ips_in_addr_cfg" => {
                self.opts.support_ips_in_addr_cfg = self.int(line, name, value) != 0;
            }
            b"timeout" => self.set_u32(line, name, value, range::TIMEOUT, |o| &mut o.timeout_ms),
            b"retries" => self.set_u32(line, name, value, range::RETRIES, |o| &mut o.retries),
            b"sa_depth" => self.set_u32(line, name, value, range::SA_DEPTH, |o| &mut o.sa_depth),
            b"sa_busy_retries" => {
                self.set_u32(line, name, value, range::SA_BUSY_RETRIES, |o| {
                    &mut o.sa_busy_retries
                });
            }
            b"sa_backoff_ms" => {
                self.set_u32(line, name, value, range::SA_BACKOFF, |o| &mut o.sa_backoff_ms);
            }
            b"sa_timeout_max" => {
                self.set_u32(line, name, value, range::SA_TIMEOUT_MAX, |o| {
                    &mut o.sa_timeout_max_ms
                });
            }
            b"acm_timeout_max" => {
                self.set_u32(line, name, value, range::ACM_TIMEOUT_MAX, |o| {
                    &mut o.acm_timeout_max_ms
                });
            }
            b"sa_adaptive_depth" => {
                if let Some(on) = self.yes_no(line, name, value) {
                    self.opts.sa_adaptive_depth = on;
                }
            }
            b"addr_prot" => match AddrProts::parse(value) {
                Ok(list) => self.opts.addr_prot = list,
                Err(why) => self.diag(
                    line,
                    Severity::Warning,
                    format!(
                        "invalid value '{}' for option '{}': {why}; setting left unchanged",
                        text(value),
                        text(name)
                    ),
                ),
            },
            b"addr_timeout" => {
                self.set_i32(line, name, value, range::EXPIRY, |o| &mut o.addr_timeout);
            }
            b"route_prot" => {
                if eq(value, "sa") {
                    self.opts.route_prot = RouteProt::Sa;
                } else if eq(value, "acm") {
                    self.opts.route_prot = RouteProt::Acm;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            b"route_timeout" if name == b"route_timeout" => {
                self.set_i32(line, name, value, range::EXPIRY, |o| &mut o.route_timeout);
            }
            b"route_timeout" => self.diag(
                line,
                Severity::Notice,
                format!(
                    "unknown option '{}' ignored (the name route_timeout must be written in lower case)",
                    text(name)
                ),
            ),
            b"loopback_prot" => {
                if eq(value, "local") {
                    self.opts.loopback_prot = LoopbackProt::Local;
                } else if eq(value, "none") {
                    self.opts.loopback_prot = LoopbackProt::None;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            b"resolve_depth" => {
                self.set_u32(line, name, value, range::DEPTH, |o| &mut o.resolve_depth);
            }
            b"max_pending_per_client" => {
                self.set_u32(line, name, value, range::MAX_PENDING_PER_CLIENT, |o| {
                    &mut o.max_pending_per_client
                });
            }
            b"provider_timeout" => {
                self.set_u32(line, name, value, range::PROVIDER_TIMEOUT, |o| {
                    &mut o.provider_timeout
                });
            }
            b"max_background_resolves" => {
                self.set_u32(line, name, value, range::MAX_BACKGROUND_RESOLVES, |o| {
                    &mut o.max_background_resolves
                });
            }
            b"max_dest_cache_bytes" => {
                let (min, max) = range::MAX_DEST_CACHE_BYTES;
                // Both bounds are far inside i64.
                if let Some(n) = self.ranged(line, name, value, min as i64, max as i64) {
                    self.opts.max_dest_cache_bytes = n as u64;
                }
            }
            b"kernel_timeout" => {
                self.set_u32(line, name, value, range::KERNEL_TIMEOUT, |o| {
                    &mut o.kernel_timeout
                });
            }
            b"send_depth" => self.set_u32(line, name, value, range::DEPTH, |o| &mut o.send_depth),
            b"recv_depth" => {
                self.set_u32(line, name, value, range::RECV_DEPTH, |o| &mut o.recv_depth);
            }
            b"min_mtu" => {
                let n = self.int(line, name, value);
                self.opts.min_mtu = mtu_from_bytes(n).unwrap_or_else(|| {
                    self.diag(
                        line,
                        Severity::Warning,
                        format!("min_mtu {n} is not 256, 512, 1024, 2048 or 4096; using 2048"),
                    );
                    Mtu::MTU_2048
                });
            }
            b"min_rate" => {
                let n = self.int(line, name, value);
                self.opts.min_rate = rate_from_gbps(n).unwrap_or_else(|| {
                    self.diag(
                        line,
                        Severity::Warning,
                        format!("min_rate {n} is not a known rate in Gb/s; using 10"),
                    );
                    Rate::RATE_10
                });
            }
            b"route_preload" => {
                if eq(value, "none") || eq(value, "no") {
                    self.opts.route_preload = RoutePreload::None;
                } else if eq(value, "opensm_full_v1") {
                    self.opts.route_preload = RoutePreload::OpensmFullV1;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            b"route_data_file" => self.opts.route_data_file = text(value),
            b"addr_preload" => {
                if eq(value, "none") || eq(value, "no") {
                    self.opts.addr_preload = AddrPreload::None;
                } else if eq(value, "acm_hosts") {
                    self.opts.addr_preload = AddrPreload::AcmHosts;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            b"addr_data_file" => self.opts.addr_data_file = text(value),
            b"sm_events" => {
                if ["yes", "true", "1"].iter().any(|w| eq(value, w)) {
                    self.opts.sm_events = true;
                } else if ["no", "false", "0"].iter().any(|w| eq(value, w)) {
                    self.opts.sm_events = false;
                } else {
                    self.unchanged(line, name, value);
                }
            }
            // `provider` lines (and anything else starting with "provider", as the
            // reference's keyword test reads them) are handled by `provider_line`.
            l if l.starts_with(b"provider") => {}
            _ => self.diag(line, Severity::Notice, format!("unknown option '{}' ignored", text(name))),
        }
    }

    /// One line of the reference's separate `provider` parser (docs/daemon.md §4): the
    /// first token must begin with `provider` (case-insensitively, only the first 8
    /// characters are compared), then a name, then `default` or a subnet prefix
    /// (`strtoull` base 0).
    fn provider_line(&mut self, line: usize, chunk: &[u8]) {
        if chunk.first() == Some(&b'#') {
            return;
        }
        let mut sc = Scanner::new(chunk);
        let Some(keyword) = sc.token() else { return };
        if !keyword.get(..8).is_some_and(|k| eq(k, "provider")) {
            return;
        }
        let exact = eq(keyword, "provider");
        let (Some(name), Some(target)) = (sc.token(), sc.token()) else {
            if exact {
                self.diag(
                    line,
                    Severity::Warning,
                    String::from(
                        "provider line needs a name and a subnet prefix or 'default'; ignored",
                    ),
                );
            }
            return;
        };
        if !exact {
            self.diag(
                line,
                Severity::Warning,
                format!(
                    "'{}' is read as a provider line, because only its first 8 characters are compared",
                    text(keyword)
                ),
            );
        }
        let target = if eq(target, "default") {
            ProviderTarget::Default
        } else {
            let (prefix, _) = lex::strtoull(target, 0);
            if !lex::is_number(target, 0) {
                self.diag(
                    line,
                    Severity::Warning,
                    format!(
                        "subnet prefix '{}' is not a number; read as {prefix:#x}",
                        text(target)
                    ),
                );
            }
            ProviderTarget::SubnetPrefix(prefix)
        };
        self.opts.providers.push(ProviderRule {
            name: text(name),
            target,
        });
    }
}

impl Options {
    /// Parses the options file `text` (named `file` in diagnostics) by the reference's
    /// rules (docs/daemon.md §7), starting from the defaults.
    ///
    /// * The text is read in 120-byte `fgets` chunks: a line longer than 119 bytes is
    ///   split, and each piece is parsed as a line of its own.
    /// * A `#` in column 0 (of a chunk) makes a comment.
    /// * The first two whitespace-separated fields are read as `%31s %255s` (an
    ///   over-long name spills into the value); lines with fewer than 2 are ignored.
    /// * Names are case-insensitive, except `route_timeout`; unknown names, and names
    ///   without a value, are ignored (a [`Severity::Notice`]). A later line overrides
    ///   an earlier one.
    /// * Numbers are checked against [`range`]: no digits or below the minimum leaves
    ///   the setting unchanged, above the maximum clamps, both with a warning (the
    ///   reference's `atoi` read junk as 0 and wrapped negatives, silently).
    /// * An unrecognised value of an enumerated option leaves it unchanged (a warning);
    ///   `server_mode`, `min_mtu` and `min_rate` fall back to unix, 2048 and 10 instead.
    /// * `provider` lines are read by a separate pass in 128-byte chunks
    ///   (docs/daemon.md §4) and collected, in file order, in [`Options::providers`].
    /// * A line that starts with one of our [`DAEMON_OPTIONS`] is kept whole, whatever
    ///   its length, in [`Options::daemon_options`]; the reference ignores such lines.
    #[must_use]
    pub fn parse(file: &str, text: &(impl AsRef<[u8]> + ?Sized)) -> (Self, Vec<Diagnostic>) {
        let text = text.as_ref();
        let mut p = Parser {
            file,
            opts: Self::default(),
            diags: Vec::new(),
        };
        let whole: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        // The line of the chunk before, to tell a line's first chunk from the rest.
        let mut previous = 0;
        // A daemon option's line, read whole: its other chunks are not options.
        let mut taken = 0;
        for (line, chunk) in lex::chunks(text, lex::LINE_120) {
            let first = line != previous;
            previous = line;
            if line == taken || chunk.first() == Some(&b'#') {
                continue;
            }
            let mut sc = Scanner::new(chunk);
            let Some(name) = sc.string(31) else { continue };
            if first
                && let Some(d) = daemon_option(name)
                && let Some(text) = whole.get(line - 1)
            {
                let value = lex::trim(text).get(name.len()..).unwrap_or_default();
                p.opts.daemon_options.push(OptionLine {
                    line,
                    name: d,
                    value: lex::trim(value).to_vec(),
                });
                taken = line;
                continue;
            }
            let Some(value) = sc.string(255) else {
                // The reference skips a name alone without a word; it is said here, so
                // that a reload, which takes only lines it can read, refuses it (a
                // file cut short while being written ends in one). A lone `provider`
                // is the provider pass's to warn about.
                if !eq(name, "provider") {
                    p.diag(
                        line,
                        Severity::Notice,
                        format!(
                            "option '{}' has no value; line ignored",
                            String::from_utf8_lossy(name)
                        ),
                    );
                }
                continue;
            };
            p.option(line, name, value);
        }
        for (line, chunk) in lex::chunks(text, lex::LINE_128) {
            p.provider_line(line, chunk);
        }
        let mut diags = p.diags;
        // Both passes report in file order.
        diags.sort_by_key(|d| d.line);
        (p.opts, diags)
    }

    /// The provider a port with GID 0 subnet prefix `subnet_prefix` belongs to, by the
    /// `provider` lines alone: the first rule in file order with that prefix, else the
    /// last `default` rule (a later one overrides), else [`BUILTIN_PROVIDER`].
    ///
    /// This assumes every named provider exists; see
    /// [`Options::provider_for_loaded`] for the reference's exact behaviour, which
    /// ignores lines that name a provider it has not loaded.
    #[must_use]
    pub fn provider_for(&self, subnet_prefix: u64) -> Option<&str> {
        let by_prefix = self
            .providers
            .iter()
            .find(|r| r.target == ProviderTarget::SubnetPrefix(subnet_prefix));
        let default = || {
            self.providers
                .iter()
                .rev()
                .find(|r| r.target == ProviderTarget::Default)
        };
        Some(
            by_prefix
                .or_else(default)
                .map_or(BUILTIN_PROVIDER, |r| r.name.as_str()),
        )
    }

    /// The provider a port belongs to when exactly the providers `loaded` exist (in load
    /// order), as the reference decides (docs/daemon.md §4): lines naming a provider that
    /// is not loaded are ignored (names compared case-insensitively); the first loaded
    /// provider with a rule for `subnet_prefix` wins; else the last valid `default` line;
    /// else [`BUILTIN_PROVIDER`] if it is loaded. `None` means the port has no provider
    /// and stays unused. The name returned is the one from `loaded`.
    #[must_use]
    pub fn provider_for_loaded<'a>(
        &self,
        subnet_prefix: u64,
        loaded: &[&'a str],
    ) -> Option<&'a str> {
        let loaded_name = |rule: &ProviderRule| {
            loaded
                .iter()
                .copied()
                .find(|l| l.eq_ignore_ascii_case(&rule.name))
        };
        let by_prefix = loaded.iter().copied().find(|l| {
            self.providers.iter().any(|r| {
                r.target == ProviderTarget::SubnetPrefix(subnet_prefix)
                    && l.eq_ignore_ascii_case(&r.name)
            })
        });
        by_prefix
            .or_else(|| {
                self.providers
                    .iter()
                    .rev()
                    .filter(|r| r.target == ProviderTarget::Default)
                    .find_map(loaded_name)
            })
            .or_else(|| loaded.iter().copied().find(|l| *l == BUILTIN_PROVIDER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn parse(text: &str) -> (Options, Vec<Diagnostic>) {
        Options::parse("opts.cfg", text)
    }

    fn only(text: &str) -> Options {
        parse(text).0
    }

    fn severities(d: &[Diagnostic]) -> Vec<(usize, Severity)> {
        d.iter().map(|d| (d.line, d.severity)).collect()
    }

    #[test]
    fn defaults() {
        let (o, d) = parse("");
        assert!(d.is_empty());
        assert_eq!(o, Options::default());
        assert_eq!(o.log_file, "/var/log/ibacm.log");
        assert_eq!(o.log_level, 0);
        assert_eq!(o.umad_debug_level, 0);
        assert_eq!(o.lock_file, "/run/ibacm.pid");
        assert_eq!(o.server_port, 6125);
        assert_eq!(o.server_mode, ServerMode::Unix);
        assert!(!o.acme_plus_kernel_only);
        assert_eq!(o.provider_lib_path, "/usr/lib/x86_64-linux-gnu/ibacm");
        assert!(!o.support_ips_in_addr_cfg);
        assert_eq!((o.timeout_ms, o.retries, o.sa_depth), (2000, 2, 1));
        assert_eq!(
            (o.sa_busy_retries, o.sa_backoff_ms, o.sa_timeout_max_ms),
            (32, 20, 16_000)
        );
        assert!(o.sa_adaptive_depth);
        assert_eq!(o.acm_timeout_max_ms, 16_000);
        assert!(o.providers.is_empty());
        assert_eq!(o.addr_prot, AddrProts::default());
        assert_eq!(o.addr_timeout, 1440);
        assert_eq!(o.route_prot, RouteProt::Sa);
        assert_eq!(o.route_timeout, -1);
        assert_eq!(o.loopback_prot, LoopbackProt::Local);
        assert_eq!((o.resolve_depth, o.send_depth, o.recv_depth), (8, 1, 1024));
        assert_eq!(o.min_mtu, Mtu(4));
        assert_eq!(o.min_rate, Rate(3));
        assert_eq!(o.route_preload, RoutePreload::None);
        assert_eq!(o.route_data_file, "/etc/rdma/ibacm_route.data");
        assert_eq!(o.addr_preload, AddrPreload::None);
        assert_eq!(o.addr_data_file, "/etc/rdma/ibacm_hosts.data");
        assert_eq!(o.provider_for(0xfe80_0000_0000_0000), Some("ibacmp"));
    }

    #[test]
    fn test_vector_20() {
        let (o, _) = parse("Route_Timeout 5\n");
        assert_eq!(o.route_timeout, -1);
        assert_eq!(only("route_timeout 5\n").route_timeout, 5);
        assert_eq!(only("server_mode bogus\n").server_mode, ServerMode::Unix);
        assert!(only("acme_plus_kernel_only 0x1\n").acme_plus_kernel_only);
        assert_eq!(only("min_mtu 3000\n").min_mtu, Mtu(4));
        assert_eq!(only("min_rate 2\n").min_rate, Rate(2));
        assert_eq!(
            only("route_preload full_opensm_v1\n").route_preload,
            RoutePreload::None
        );
        let o = only("provider ibacmp 0xfe80000000000000\n");
        assert_eq!(
            o.providers,
            [ProviderRule {
                name: "ibacmp".into(),
                target: ProviderTarget::SubnetPrefix(0xfe80_0000_0000_0000)
            }]
        );
        assert_eq!(o.provider_for(0xfe80_0000_0000_0000), Some("ibacmp"));
    }

    #[test]
    fn reference_file() {
        let (o, d) = parse(include_str!(
            "../../../testdata/reference-fabric/ibacm_opts.cfg"
        ));
        assert!(d.is_empty(), "{d:?}");
        let expected = Options {
            log_level: 2,
            server_mode: ServerMode::Unix,
            acme_plus_kernel_only: false,
            support_ips_in_addr_cfg: true,
            timeout_ms: 1000,
            retries: 1,
            addr_prot: AddrProts::default(),
            addr_timeout: 1440,
            route_prot: RouteProt::Sa,
            route_timeout: -1,
            loopback_prot: LoopbackProt::Local,
            addr_preload: AddrPreload::AcmHosts,
            route_preload: RoutePreload::None,
            ..Options::default()
        };
        assert_eq!(o, expected);
    }

    #[test]
    fn every_option_is_read() {
        let text = "\
LOG_FILE stderr
Log_Level 1
umad_debug_level 3
lock_file /tmp/x.pid
server_port 7000
server_mode OPEN
acme_plus_kernel_only YES
provider_lib_path /opt/p
builtin_provider NO
provider_timeout 5000
support_ips_in_addr_cfg 5
timeout 100
retries 4
sa_depth 8
sa_busy_retries 0
sa_backoff_ms 5
sa_timeout_max 0
sa_adaptive_depth no
acm_timeout_max 0
addr_prot ACM,neigh
addr_timeout -1
route_prot acm
route_timeout 30
loopback_prot none
resolve_depth 2
max_dest_cache_bytes 1048576
send_depth 3
recv_depth 16
min_mtu 4096
min_rate 40
route_preload opensm_full_v1
route_data_file /r
addr_preload acm_hosts
addr_data_file /h
sm_events NO
";
        let (o, d) = parse(text);
        assert!(d.is_empty(), "{d:?}");
        let expected = Options {
            log_file: "stderr".into(),
            log_level: 1,
            umad_debug_level: 3,
            lock_file: "/tmp/x.pid".into(),
            server_port: 7000,
            server_mode: ServerMode::Open,
            acme_plus_kernel_only: true,
            provider_lib_path: "/opt/p".into(),
            builtin_provider: false,
            provider_timeout: 5000,
            support_ips_in_addr_cfg: true,
            timeout_ms: 100,
            retries: 4,
            sa_depth: 8,
            sa_busy_retries: 0,
            sa_backoff_ms: 5,
            sa_timeout_max_ms: 0,
            sa_adaptive_depth: false,
            acm_timeout_max_ms: 0,
            providers: Vec::new(),
            addr_prot: AddrProts::new(&[AddrProt::Acm, AddrProt::Neigh]).expect("a list"),
            addr_timeout: -1,
            route_prot: RouteProt::Acm,
            route_timeout: 30,
            loopback_prot: LoopbackProt::None,
            resolve_depth: 2,
            max_pending_per_client: 64,
            max_background_resolves: 64,
            max_dest_cache_bytes: 1 << 20,
            kernel_timeout: 0,
            send_depth: 3,
            recv_depth: 16,
            min_mtu: Mtu::MTU_4096,
            min_rate: Rate::RATE_40,
            route_preload: RoutePreload::OpensmFullV1,
            route_data_file: "/r".into(),
            addr_preload: AddrPreload::AcmHosts,
            addr_data_file: "/h".into(),
            sm_events: false,
            daemon_options: Vec::new(),
        };
        assert_eq!(o, expected);
        assert!(only("sm_events no\nsm_events yes").sm_events);
        assert!(
            only("sm_events maybe").sm_events,
            "a bad value keeps the default"
        );
        // And back.
        assert!(only("sa_adaptive_depth YES\n").sa_adaptive_depth);
        let (o, d) = parse("sa_adaptive_depth no\nsa_adaptive_depth maybe\n");
        assert!(!o.sa_adaptive_depth, "a bad value leaves the earlier one");
        assert_eq!(severities(&d), [(2, Severity::Warning)]);
        let o = only(
            "server_mode loop\nroute_prot SA\nloopback_prot LOCAL\nroute_preload no\naddr_preload None\nserver_mode Unix\n",
        );
        assert_eq!(o.server_mode, ServerMode::Unix);
        assert_eq!(o.route_prot, RouteProt::Sa);
        assert_eq!(o.loopback_prot, LoopbackProt::Local);
        assert_eq!(
            only("route_preload opensm_full_v1\nroute_preload none").route_preload,
            RoutePreload::None
        );
        assert_eq!(
            only("addr_preload acm_hosts\naddr_preload no").addr_preload,
            AddrPreload::None
        );
        assert_eq!(only("server_mode loop").server_mode, ServerMode::Loop);
    }

    #[test]
    fn line_rules() {
        // Comments only in column 0; fewer than two fields ignored (a name alone with
        // a notice, blank lines silently); later lines win.
        let (o, d) = parse("#log_level 2\n log_level 1\nlog_level\n\n  \t\nretries 7\nretries 9\n");
        assert_eq!(o.log_level, 1);
        assert_eq!(o.retries, 9);
        assert_eq!(severities(&d), [(3, Severity::Notice)]);
        assert_eq!(
            d[0].message,
            "option 'log_level' has no value; line ignored"
        );
        // Tabs, CR and trailing junk after the two fields.
        assert_eq!(only("\tretries\t5\tignored words\r\n").retries, 5);
        // An unknown option is a notice.
        let (o, d) = parse("bogus 1\nRoute_Timeout 5\n");
        assert_eq!(o, Options::default());
        assert_eq!(
            severities(&d),
            [(1, Severity::Notice), (2, Severity::Notice)]
        );
        assert_eq!(d[0].message, "unknown option 'bogus' ignored");
        assert!(d[1].message.contains("lower case"));
    }

    #[test]
    fn daemon_options_are_kept_whole_with_their_lines() {
        let users = ["user"; 40].join(", ");
        let text = alloc::format!(
            "retries 4\nALLOW_GROUPS  rdma, 1000 \r\nallow_users {users}\nserver_socket_mode\n#allow_users x\n metrics_file /m\nretries 5\n"
        );
        let (o, d) = parse(&text);
        // No notice for our names, nor for the rest of the long line.
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(o.retries, 5);
        let line = |line, name, value: &str| OptionLine {
            line,
            name,
            value: value.as_bytes().to_vec(),
        };
        assert_eq!(
            o.daemon_options,
            [
                line(2, "allow_groups", "rdma, 1000"),
                line(3, "allow_users", &users),
                line(4, "server_socket_mode", ""),
                line(6, "metrics_file", "/m"),
            ]
        );
        // Only a line's first chunk names an option: a long line of another option
        // whose second chunk starts with our name stays the reference's business.
        let cut = alloc::format!("{}allow_users x\n", "y".repeat(119));
        assert!(parse(&cut).0.daemon_options.is_empty());
    }

    #[test]
    fn long_lines_are_split_into_chunks() {
        // 119 bytes of padding as the first chunk, so "retries 3" starts the second.
        let line = alloc::format!("{}retries 3\n", "x".repeat(119));
        let (o, d) = parse(&line);
        assert_eq!(o.retries, 3);
        // The first chunk is one 119-byte token, which `%31s%255s` reads as two fields:
        // an unknown option of 31 x's.
        assert_eq!(severities(&d), [(1, Severity::Notice)]);
        assert_eq!(
            d[0].message,
            alloc::format!("unknown option '{}' ignored", "x".repeat(31))
        );
        // A line whose second chunk begins with '#' has a comment there.
        let line = alloc::format!("{}#retries 3\n", "x".repeat(119));
        assert_eq!(only(&line).retries, 2);
        // Two fields in the first chunk, the rest lost to the next chunk.
        let line = alloc::format!("log_file /{}\n", "p".repeat(130));
        let (o, d) = parse(&line);
        assert_eq!(o.log_file.len(), 119 - "log_file ".len());
        // The tail chunk is one token of 21 bytes: a name without a value, ignored
        // with a notice (which also says the path was cut).
        assert_eq!(severities(&d), [(1, Severity::Notice)]);
        assert_eq!(
            d[0].message,
            alloc::format!("option '{}' has no value; line ignored", "p".repeat(21))
        );
    }

    #[test]
    fn fields_are_cut_like_sscanf() {
        // A 31-character name limit: the rest of the token becomes the value.
        let name = "a".repeat(40);
        let (o, d) = parse(&alloc::format!("{name} 1\n"));
        assert_eq!(o, Options::default());
        assert_eq!(
            d[0].message,
            alloc::format!("unknown option '{}' ignored", "a".repeat(31))
        );
        // The 255-character value limit is never reached: a 120-byte chunk is shorter.
        // (So the reference's 128-byte path buffers cannot overflow either.)
        let (o, _) = parse(&alloc::format!("lock_file {}\n", "l".repeat(100)));
        assert_eq!(o.lock_file.len(), 100);
    }

    #[test]
    fn numbers_are_range_checked() {
        let (o, d) = parse("retries 3x\ntimeout junk\nlog_level -2\nserver_port 70000\n");
        assert_eq!(o.retries, 3, "trailing junk: the number, with a warning");
        assert_eq!(o.timeout_ms, 2000, "no digits: unchanged");
        assert_eq!(o.log_level, 0, "below the minimum: unchanged");
        assert_eq!(o.server_port, 65535, "above the maximum: clamped");
        assert_eq!(
            severities(&d),
            [
                (1, Severity::Warning),
                (2, Severity::Warning),
                (3, Severity::Warning),
                (4, Severity::Warning)
            ]
        );
        assert_eq!(
            d[0].message,
            "value '3x' of option 'retries' is not a number; read as 3"
        );
        assert_eq!(
            d[1].message,
            "value 'junk' of option 'timeout' is not a number; setting left unchanged"
        );
        assert_eq!(
            d[2].message,
            "option 'log_level' -2 is below its minimum 0; setting left unchanged"
        );
        assert_eq!(
            d[3].message,
            "option 'server_port' 70000 is above its maximum 65535; using 65535"
        );
        assert!(!only("support_ips_in_addr_cfg 0").support_ips_in_addr_cfg);
        assert!(!only("support_ips_in_addr_cfg yes").support_ips_in_addr_cfg);
        assert!(only("support_ips_in_addr_cfg -1").support_ips_in_addr_cfg);
        assert_eq!(only("umad_debug_level 1").umad_debug_level, 1);
        assert_eq!(only("addr_timeout 10").addr_timeout, 10);
        // An earlier line's value survives a bad later one.
        assert_eq!(only("timeout 500\ntimeout -5").timeout_ms, 500);
    }

    /// Values that would wrap silently if read into the option's type unchecked, and
    /// every numeric option at and past its bounds: each out-of-range value warns with
    /// file and line.
    #[test]
    fn every_numeric_option_warns_out_of_range() {
        type Get = fn(&Options) -> i64;
        let cases: [(&str, Get, i64); 7] = [
            ("timeout -5", |o| o.timeout_ms.into(), 2000),
            ("retries 99999999999", |o| o.retries.into(), 100),
            ("send_depth -1", |o| o.send_depth.into(), 1),
            ("log_level banana", |o| o.log_level.into(), 0),
            ("resolve_depth 0", |o| o.resolve_depth.into(), 8),
            ("sa_depth 0", |o| o.sa_depth.into(), 1),
            ("addr_timeout -2", |o| o.addr_timeout.into(), 1440),
        ];
        for (text, get, want) in cases {
            let (o, d) = Options::parse("ibacm_opts.cfg", &format!("# a comment\n{text}\n"));
            assert_eq!(get(&o), want, "{text}");
            assert_eq!(severities(&d), [(2, Severity::Warning)], "{text}: {d:?}");
            assert!(
                format!("{}", d[0]).starts_with("ibacm_opts.cfg:2: "),
                "{}",
                d[0]
            );
        }
        let bounds: [(&str, i64, i64); 21] = [
            ("log_level", 0, 2),
            ("umad_debug_level", 0, i64::from(i32::MAX)),
            ("server_port", 1, 65535),
            ("timeout", 1, 600_000),
            ("retries", 0, 100),
            ("sa_depth", 1, 1024),
            ("addr_timeout", -1, i64::from(i32::MAX)),
            ("route_timeout", -1, i64::from(i32::MAX)),
            ("resolve_depth", 1, 256),
            ("send_depth", 1, 256),
            ("recv_depth", 1, 65_536),
            ("max_pending_per_client", 1, 65_536),
            ("max_background_resolves", 0, 65_536),
            ("max_dest_cache_bytes", 65_536, 1 << 40),
            ("kernel_timeout", 0, 200_000),
            ("provider_timeout", 100, 3_600_000),
            ("timeout", 1, 600_000),
            ("sa_busy_retries", 0, 1000),
            ("sa_backoff_ms", 1, 60_000),
            ("sa_timeout_max", 0, 600_000),
            ("acm_timeout_max", 0, 600_000),
        ];
        for (name, min, max) in bounds {
            let (_, d) = parse(&format!("{name} {min}\n{name} {max}\n"));
            assert!(d.is_empty(), "{name} at its bounds: {d:?}");
            let (o, d) = parse(&format!("{name} {}\n", min - 1));
            assert_eq!(severities(&d), [(1, Severity::Warning)], "{name} below");
            assert_eq!(o, Options::default(), "{name} below: unchanged");
            let (_, d) = parse(&format!("{name} {}\n", max + 1));
            assert_eq!(severities(&d), [(1, Severity::Warning)], "{name} above");
            assert!(d[0].message.ends_with(&format!("using {max}")), "{name}");
        }
    }

    #[test]
    fn latin1_bytes_do_not_break_the_file() {
        let text =
            b"# r\xe9glages du d\xe9mon\nretries 4\nlock_file /run/ibacm-\xe9.pid\ntimeout 9\xe9\n";
        let (o, d) = Options::parse("ibacm_opts.cfg", &text[..]);
        assert_eq!(o.retries, 4);
        assert_eq!(o.lock_file, "/run/ibacm-\u{fffd}.pid");
        assert_eq!(o.timeout_ms, 9);
        assert_eq!(severities(&d), [(4, Severity::Warning)]);
    }

    #[test]
    fn acme_plus_kernel_only_values() {
        for (v, want) in [
            ("true", true),
            ("TRUE", true),
            ("Yes", true),
            ("1", true),
            ("0x1", true),
            ("010", true),
            ("-1", true),
            ("no", false),
            ("false", false),
            ("0", false),
            ("0x0", false),
            ("on", false),
            ("7junk", true),
        ] {
            let (o, d) = parse(&alloc::format!("acme_plus_kernel_only {v}"));
            assert_eq!(o.acme_plus_kernel_only, want, "{v}");
            assert_eq!(d.len(), usize::from(v == "on" || v == "7junk"), "{v}");
        }
        // Turning it off again.
        assert!(!only("acme_plus_kernel_only yes\nacme_plus_kernel_only no").acme_plus_kernel_only);
    }

    #[test]
    fn enumerated_values_left_unchanged() {
        let (o, d) = parse(
            "route_prot acm\nroute_prot bogus\naddr_prot sa\nloopback_prot none\nloopback_prot x\n\
             route_preload opensm_full_v1\nroute_preload full_opensm_v1\naddr_preload acm_hosts\naddr_preload y\n",
        );
        assert_eq!(o.route_prot, RouteProt::Acm);
        assert_eq!(o.addr_prot, AddrProts::default());
        assert_eq!(o.loopback_prot, LoopbackProt::None);
        assert_eq!(o.route_preload, RoutePreload::OpensmFullV1);
        assert_eq!(o.addr_preload, AddrPreload::AcmHosts);
        assert_eq!(
            severities(&d),
            [
                (2, Severity::Warning),
                (3, Severity::Warning),
                (5, Severity::Warning),
                (7, Severity::Warning),
                (9, Severity::Warning)
            ]
        );
        assert_eq!(
            d[0].message,
            "invalid value 'bogus' for option 'route_prot'; setting left unchanged"
        );
        let (o, d) = parse("server_mode open\nserver_mode bogus\n");
        assert_eq!(o.server_mode, ServerMode::Unix);
        assert_eq!(severities(&d), [(2, Severity::Warning)]);
    }

    #[test]
    fn addr_prot_is_an_ordered_list() {
        use AddrProt::{Acm, Neigh};
        assert_eq!(
            only("").addr_prot.as_slice(),
            [Acm],
            "the reference's default"
        );
        assert_eq!(only("addr_prot neigh\n").addr_prot.as_slice(), [Neigh]);
        assert_eq!(
            only("addr_prot acm,neigh\n").addr_prot.as_slice(),
            [Acm, Neigh]
        );
        assert_eq!(
            only("addr_prot NEIGH,Acm\n").addr_prot.as_slice(),
            [Neigh, Acm],
            "names are case-insensitive; the order is the file's"
        );
        assert_eq!(
            only("addr_prot acm,neigh\n").addr_prot.to_string(),
            "acm,neigh"
        );
        assert_eq!(only("addr_prot neigh\n").addr_prot.get(1), None);
    }

    #[test]
    fn bad_addr_prot_lists_name_file_line_and_item() {
        for (value, why) in [
            ("acm,arp", "unknown protocol 'arp' (known: acm, neigh)"),
            ("neigh,neigh", "'neigh' is listed twice"),
            ("acm,", "an empty protocol name"),
            (",neigh", "an empty protocol name"),
            ("sa", "unknown protocol 'sa' (known: acm, neigh)"),
        ] {
            let (o, d) = parse(&format!("addr_prot neigh\n# x\naddr_prot {value}\n"));
            assert_eq!(
                o.addr_prot.as_slice(),
                [AddrProt::Neigh],
                "{value}: the setting before stays"
            );
            assert_eq!(severities(&d), [(3, Severity::Warning)], "{value}");
            assert_eq!(
                d[0].to_string(),
                format!(
                    "opts.cfg:3: invalid value '{value}' for option 'addr_prot': {why}; setting left unchanged"
                ),
            );
        }
        // A space ends the value, as for every option: "acm, neigh" is "acm,".
        let (o, d) = parse("addr_prot acm, neigh\n");
        assert_eq!(o.addr_prot, AddrProts::default());
        assert!(d[0].message.contains("an empty protocol name"), "{d:?}");
    }

    #[test]
    fn mtu_and_rate_conversions() {
        for (bytes, code) in [
            (256, 1),
            (512, 2),
            (1024, 3),
            (2048, 4),
            (4096, 5),
            (3000, 4),
            (0, 4),
            (-256, 4),
        ] {
            assert_eq!(
                only(&alloc::format!("min_mtu 4096\nmin_mtu {bytes}")).min_mtu,
                Mtu(code),
                "{bytes}"
            );
        }
        for (gbps, code) in [
            (2, 2),
            (5, 5),
            (10, 3),
            (14, 11),
            (20, 6),
            (25, 15),
            (30, 4),
            (40, 7),
            (56, 12),
            (60, 8),
            (80, 9),
            (100, 16),
            (112, 13),
            (120, 10),
            (168, 14),
            (200, 17),
            (300, 18),
            (400, 3),
            (3, 3),
        ] {
            assert_eq!(
                only(&alloc::format!("min_rate 40\nmin_rate {gbps}")).min_rate,
                Rate(code),
                "{gbps}"
            );
        }
        // "2.5" is atoi 2 with a junk warning, and still 2.5 Gb/s.
        let (o, d) = parse("min_rate 2.5");
        assert_eq!(o.min_rate, Rate::RATE_2_5);
        assert_eq!(severities(&d), [(1, Severity::Warning)]);
        let (_, d) = parse("min_mtu 3000");
        assert_eq!(
            d[0].message,
            "min_mtu 3000 is not 256, 512, 1024, 2048 or 4096; using 2048"
        );
        let (_, d) = parse("min_rate 7");
        assert_eq!(severities(&d), [(1, Severity::Warning)]);
    }

    #[test]
    fn builtin_provider_takes_yes_or_no_and_warns_on_anything_else() {
        assert!(only("builtin_provider yes").builtin_provider);
        assert!(!only("builtin_provider no").builtin_provider);
        let (o, d) = parse("builtin_provider maybe\n");
        assert!(o.builtin_provider, "left at its default");
        assert_eq!(d.len(), 1);
        let shown = alloc::format!("{}", d[0]);
        assert!(shown.contains(":1: "), "{shown}");
        assert!(shown.contains("'maybe'"), "{shown}");
    }

    #[test]
    fn provider_lines() {
        let text = "\
provider ibacmp 0xfe80000000000000
PROVIDER other 0xfe80000000000001
provider dflt DEFAULT
provider second default
provider ibacmp
provider
#provider x default
provider_lib_path /usr/lib/ibacm
provider_lib_path /lib/x default
provider bad 12junk
";
        let (o, d) = parse(text);
        assert_eq!(o.provider_lib_path, "/lib/x");
        let rule = |n: &str, t| ProviderRule {
            name: n.into(),
            target: t,
        };
        assert_eq!(
            o.providers,
            [
                rule(
                    "ibacmp",
                    ProviderTarget::SubnetPrefix(0xfe80_0000_0000_0000)
                ),
                rule("other", ProviderTarget::SubnetPrefix(0xfe80_0000_0000_0001)),
                rule("dflt", ProviderTarget::Default),
                rule("second", ProviderTarget::Default),
                rule("/lib/x", ProviderTarget::Default),
                rule("bad", ProviderTarget::SubnetPrefix(12)),
            ]
        );
        assert_eq!(
            severities(&d),
            [
                (5, Severity::Warning),
                (6, Severity::Warning),
                (9, Severity::Warning),
                (10, Severity::Warning)
            ]
        );
        assert_eq!(o.provider_for(0xfe80_0000_0000_0000), Some("ibacmp"));
        assert_eq!(o.provider_for(0xfe80_0000_0000_0001), Some("other"));
        // The last default line wins.
        assert_eq!(o.provider_for(0x1234), Some("/lib/x"));
        assert_eq!(o.provider_for(12), Some("bad"));
        // What the reference does with only ibacmp loaded: lines for others ignored.
        assert_eq!(
            o.provider_for_loaded(0xfe80_0000_0000_0000, &["ibacmp"]),
            Some("ibacmp")
        );
        assert_eq!(
            o.provider_for_loaded(0xfe80_0000_0000_0001, &["ibacmp"]),
            Some("ibacmp")
        );
        assert_eq!(
            o.provider_for_loaded(0xfe80_0000_0000_0001, &["ibacmp", "OTHER"]),
            Some("OTHER")
        );
        assert_eq!(
            o.provider_for_loaded(0x1234, &["ibacmp", "Second"]),
            Some("Second")
        );
        assert_eq!(o.provider_for_loaded(0x1234, &["x"]), None);
        assert_eq!(o.provider_for_loaded(0x1234, &[]), None);
        // A provider line longer than 119 bytes is still whole in the 128-byte pass.
        let pad = " ".repeat(100);
        let o = only(&alloc::format!("provider{pad}ibacmp default"));
        assert_eq!(o.providers, [rule("ibacmp", ProviderTarget::Default)]);
        // The first 8 characters only.
        let (o, d) = parse("providers x default\n");
        assert_eq!(o.providers, [rule("x", ProviderTarget::Default)]);
        assert_eq!(severities(&d), [(1, Severity::Warning)]);
        assert_eq!(only("provid x default").providers, []);
    }

    #[test]
    fn expiry_uses_unsigned_arithmetic() {
        assert_eq!(expiry_minutes(1440, 100), 1540);
        assert_eq!(expiry_minutes(-1, 100), 100 + u64::from(u32::MAX));
        assert_eq!(expiry_minutes(-2, 0), u64::from(u32::MAX) - 1);
        assert_eq!(expiry_minutes(1, u64::MAX), 0);
    }

    quickcheck::quickcheck! {
        fn never_panics(text: String) -> bool {
            let _ = Options::parse("f", &text);
            true
        }

        fn never_panics_on_option_lines(lines: Vec<(u8, u8, String)>) -> bool {
            const NAMES: [&str; 30] = [
                "log_file", "log_level", "umad_debug_level", "lock_file", "server_port", "server_mode",
                "acme_plus_kernel_only", "provider_lib_path", "support_ips_in_addr_cfg", "timeout",
                "retries", "sa_depth", "provider", "addr_prot", "addr_timeout", "route_prot",
                "route_timeout", "Route_Timeout", "loopback_prot", "resolve_depth", "send_depth",
                "recv_depth", "min_mtu", "min_rate", "route_preload", "route_data_file",
                "addr_preload", "addr_data_file", "#", "providerx",
            ];
            const VALUES: [&str; 8] = ["0", "-1", "0x", "99999999999999999999", "default", "acm", "", "\u{e9}"];
            let mut text = String::new();
            for (n, v, extra) in &lines {
                let name = NAMES.get(usize::from(*n) % NAMES.len()).copied().unwrap_or("");
                let value = VALUES.get(usize::from(*v) % VALUES.len()).copied().unwrap_or("");
                text.push_str(&alloc::format!("{name} {value}{extra} {extra}\n"));
            }
            let (o, _) = Options::parse("f", &text);
            o.provider_for(0).is_some()
        }
    }
}
