//! The fabric description: which hosts exist, their HCAs, ports, addresses and names,
//! partitions, and the ibacm configuration each host runs with.
//!
//! A fabric is written as a TOML file and read with [`FabricSpec::parse`], or built in
//! code with [`FabricSpec::generate`] for N-host fabrics. [`FabricSpec::to_toml`] writes
//! any spec back out, so a generated fabric can be saved, edited and replayed.
//!
//! # File format
//!
//! Every key except `hosts[].name`, `hosts[].hcas[].name`, `hosts[].hcas[].guid`,
//! `hosts[].hcas[].ports[].lid` (InfiniBand ports) and `hosts[].ips[].addr` has a
//! default. Unknown keys are errors, so a typo never silently becomes a default.
//! GUIDs, the subnet prefix and pkeys may be written as TOML integers (`0xffff`) or as
//! strings (`"0xffff"`, or decimal `"65535"`); [`FabricSpec::to_toml`] writes hex
//! strings, because TOML integers are signed 64-bit and cannot hold a subnet prefix
//! such as `0xfe80000000000000`.
//!
//! Top level:
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `subnet_prefix` | u64 | `0xfe80000000000000` | upper half of every port GID |
//! | `[sm]` | table | see below | the subnet manager / subnet administrator |
//! | `[link]` | table | see below | latencies |
//! | `[sa]` | table | unlimited | the SA's service rates and queue |
//! | `[nic]` | table | free | what a MAD costs its sender's port and its receiver |
//! | `[[hosts]]` | array of tables | none | the hosts, in order (host index 0, 1, …) |
//!
//! `[sm]`: `lid` (default 1; must be the LID of some port, which is where the SM runs),
//! `sl` (default 0; the SL hosts use to reach the SA), `response_us` (default 50; the
//! SA's processing delay per MAD, in microseconds).
//!
//! `[link]`: `latency_us` (default 1; per cable) and `switch_us` (default 1; per switch
//! crossed). Hosts on the same leaf switch are 1 switch (2 cables) apart, others 3
//! switches (4 cables: leaf, spine, leaf); see [`FabricSpec::hops`] and
//! [`FabricSpec::latency`].
//!
//! `[sa]` ([`SaSpec`]): the SA as one server, serving requests one at a time in arrival
//! order. A limited SA serves a request at `max(arrival, end of the previous one) +
//! 1 / rate` and answers after `sm.response_us`.
//!
//! | key | type | default | meaning | where the default comes from |
//! |---|---|---|---|---|
//! | `path_rate` | u64 | 0 (unlimited) | PathRecord queries served per second | the simulator before this table (every scenario keeps its timing); a realistic figure is 20,000–50,000, OpenSM's PathRecord rate as measured by the OFA "Scalable SA" project (2012), which `fabric-bench --sa-rate` and [`SaSpec::scalable_sa`] use |
//! | `mcmember_rate` | u64 | 0 (unlimited) | MCMemberRecord joins and leaves per second | as `path_rate`; no published figure, so [`SaSpec::scalable_sa`] takes the PathRecord rate |
//! | `other_rate` | u64 | 0 (unlimited) | every other SA request per second | as `path_rate` |
//! | `queue` | u32 | 0 (unbounded) | requests held at once, waiting or in service; one more overflows | as `path_rate`; no published figure for OpenSM's backlog, so [`SaSpec::scalable_sa`] holds one second of service (`queue = rate`), half the reference's 2 s per-try timeout |
//! | `overflow` | `"busy"` or `"drop"` | `"busy"` | past the queue: answer at once with MAD status BUSY, or drop (the sender times out) | the IB specification's BUSY status bit exists for an SA that discards a request to be retried later |
//!
//! `[nic]` ([`NicSpec`]): what a MAD costs the port that sends it and the host that
//! receives it.
//!
//! | key | type | default | meaning | where the default comes from |
//! |---|---|---|---|---|
//! | `send_ns` | u64 | 0 (free) | a port's MADs leave one after another, this far apart | the simulator before this table; a realistic figure is ~260 ns (a ~330-byte MAD at 4x SDR's 8 Gb/s of data) to ~70 ns (4x QDR) |
//! | `recv_ns` | u64 | 0 (free) | a host takes this long to take in each UD MAD, one after another, before its engine has it, so a multicast costs every receiver | the simulator before this table; a realistic figure is a few µs, the order of this project's daemon's measured ~5.5 µs of CPU per cache-hit request (BENCHMARKS.md) |
//!
//! The defaults limit nothing, so a file without these tables behaves as before they
//! existed: every scenario keeps its timing and trace. Realistic SA figures are one
//! line away (`SaSpec::scalable_sa`, `fabric-bench --sa-rate`).
//!
//! `[[hosts]]`:
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `name` | string | required | host name (no white space): `gethostname()`, the name in the default address file |
//! | `leaf` | u32 | 0 | the leaf switch the host is cabled to |
//! | `[[hosts.hcas]]` | array of tables | empty | the HCAs, in device discovery order |
//! | `[[hosts.ips]]` | array of tables | empty | the IP addresses the host's netlink reports |
//! | `addr_file` | string | generated | the host's `ibacm_addr.cfg`; without it, [`FabricSpec::addr_file_text`] generates one |
//! | `options` | string | `""` | the host's `ibacm_opts.cfg` |
//! | `hosts_data` | string | none | the host's `ibacm_hosts.data` (for `addr_preload acm_hosts`); none means no file |
//! | `daemon` | bool | true | whether ibacm runs there; `false` leaves a host whose ports the SA knows but that answers no ACM request (the peers of the reference captures); its addresses still answer IPoIB ARP, which `addr_prot neigh` uses (docs/protocol/ipoib-neigh.md §4) |
//! | `default_route` | IP text | none | the source the host's routing picks for a destination outside every IPoIB subnet (its Ethernet address, say); it is not an IPoIB address, so ibacm has no endpoint for it |
//!
//! `[[hosts.hcas]]`: `name` (string, e.g. `"mlx5_0"`), `guid` (node GUID; port `n` has
//! port GUID `guid + n`) and `[[hosts.hcas.ports]]`, the ports in order: the first is
//! port 1.
//!
//! `[[hosts.hcas.ports]]`:
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `lid` | u16 | required for IB | base LID, 1..=0xBFFF, aligned to 2^`lmc` |
//! | `lmc` | u8 | 0 | LID mask control: the port answers to `lid .. lid + 2^lmc` (at most 7) |
//! | `pkeys` | list of u16 | `["0xffff"]` | pkey table in order, bit 15 = full member |
//! | `width` | u8 | 2 (4x) | `ibv_port_attr.active_width` code: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x |
//! | `speed` | u16 | 1 (SDR) | `active_speed` code: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR, 256 XDR |
//! | `mtu` | u32 | 2048 | active MTU in bytes: 256, 512, 1024, 2048 or 4096 |
//! | `subnet_timeout` | u8 | 18 | PortInfo.SubnetTimeout (the SA also uses it as the packet lifetime of paths from this port) |
//! | `sl` | u8 | 0 | the SL the SA puts in paths *to* this port |
//! | `up` | bool | true | whether the port is ACTIVE at start |
//! | `link_layer` | `"ib"` or `"ethernet"` | `"ib"` | Ethernet (RoCE) ports are never used by ibacm; they need no LID |
//!
//! `[[hosts.ips]]`: `addr` (IPv4 or IPv6 text), `prefix` (default 24 for IPv4, 64 for
//! IPv6), `hca` (index in `hcas`, default 0), `port` (from 1, default 1), `pkey`
//! (default `0xffff`; must be a partition in that port's table). The address belongs to
//! the IPoIB interface of that port and partition.
//!
//! [`FabricSpec::parse`] rejects, naming the key: TOML syntax and type errors (with
//! line and column), LID 0 or ≥ 0xC000, overlapping LID ranges, duplicate host names,
//! duplicate port GUIDs, duplicate IP addresses, an IP on a missing HCA or port or
//! partition, an SM LID that no port has, unknown width/speed codes, MTUs that are not
//! an IB MTU, and out-of-range LMC, SL, subnet timeout and prefix values.
//!
//! # Example
//!
//! This is `testdata/fabrics/demo.toml`:
//!
//! ```toml
#![doc = include_str!("../../../testdata/fabrics/demo.toml")]
//! ```
//!
//! # Layout
//!
//! The description types and their serde form are in `types` (with the hex integers of
//! `hex`); reading and writing files in `file`; the checks in `validate`, with their
//! errors in `error`; N-host fabrics in `generate`; and what the simulator derives from a
//! spec (port GUIDs and GIDs, default address files, hops and latencies) in `identity`,
//! `addr_file` and `distance`. Everything public is re-exported here, so paths stay
//! `acm_io_sim::spec::…`.

mod addr_file;
mod distance;
mod error;
mod file;
mod generate;
mod hex;
mod identity;
mod physics;
#[cfg(test)]
mod test_support;
mod types;
mod validate;

pub use error::SpecError;
pub use generate::{GenOptions, MAX_GENERATED_HOSTS};
pub use identity::HostId;
pub use physics::{NicSpec, SaOverflow, SaQueryKind, SaSpec};
pub use types::{
    DEFAULT_SUBNET_PREFIX, FabricSpec, HcaSpec, HostSpec, IpSpec, LinkLayer, LinkSpec, PortSpec,
    SmSpec,
};
