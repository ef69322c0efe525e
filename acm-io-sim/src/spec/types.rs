//! The description's types, exactly as the TOML file spells them: serde reads and
//! writes them directly, so the defaults and the hex integer forms are declared here
//! next to each field (the format is documented in the parent module).

use super::hex;
use super::physics::{NicSpec, SaSpec};
use acm_proto::{Mtu, Rate};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The default subnet prefix, fe80::/64: the link-local prefix every SM uses unless
/// configured otherwise.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// A whole simulated fabric, as read from a description file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    /// Upper half of every port GID; changing it moves the whole subnet, which is how a
    /// test exercises non-default prefixes (ibacm's `provider ibacmp <prefix>` lines).
    #[serde(default = "default_subnet_prefix", with = "hex")]
    pub subnet_prefix: u64,
    /// Where the SM/SA lives and how slowly it answers.
    #[serde(default)]
    pub sm: SmSpec,
    /// Cable and switch latencies, from which every delivery delay is derived.
    #[serde(default)]
    pub link: LinkSpec,
    /// The SA's service rates and queue (none by default: see [`SaSpec`]).
    #[serde(default, skip_serializing_if = "SaSpec::is_unlimited")]
    pub sa: SaSpec,
    /// What a MAD costs its sender's port and its receiver (nothing by default: see
    /// [`NicSpec`]).
    #[serde(default, skip_serializing_if = "NicSpec::is_free")]
    pub nic: NicSpec,
    /// The hosts; a host's index here is its identity everywhere else in the simulator
    /// (its [`HostId`](super::HostId)).
    #[serde(default)]
    pub hosts: Vec<HostSpec>,
}

/// The subnet manager and its SA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmSpec {
    /// The SM's LID: hosts address SA MADs to it, so it must be some port's LID.
    #[serde(default = "one")]
    pub lid: u16,
    /// The SL hosts use to reach the SM (what `ibv_query_port` reports as `sm_sl`).
    #[serde(default)]
    pub sl: u8,
    /// SA processing delay per MAD, in microseconds, so timeouts and queueing behave as
    /// on a real subnet.
    #[serde(default = "default_response_us")]
    pub response_us: u64,
}

impl Default for SmSpec {
    fn default() -> Self {
        Self {
            lid: 1,
            sl: 0,
            response_us: default_response_us(),
        }
    }
}

/// Latencies of the fabric's cables and switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Per cable, in microseconds.
    #[serde(default = "one_u64")]
    pub latency_us: u64,
    /// Per switch crossed, in microseconds.
    #[serde(default = "one_u64")]
    pub switch_us: u64,
}

impl Default for LinkSpec {
    fn default() -> Self {
        Self {
            latency_us: 1,
            switch_us: 1,
        }
    }
}

/// One host: its HCAs, its IP addresses and the ibacm configuration it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Host name: what `gethostname()` returns there, and the name its default address
    /// file publishes.
    pub name: String,
    /// The leaf switch it hangs off: hosts on the same leaf are one switch apart, others
    /// three, which sets their latency.
    #[serde(default)]
    pub leaf: u32,
    /// HCAs in device discovery order.
    #[serde(default)]
    pub hcas: Vec<HcaSpec>,
    /// The IP addresses netlink reports, each bound to one port and partition.
    #[serde(default)]
    pub ips: Vec<IpSpec>,
    /// The host's `ibacm_addr.cfg` text; `None` means the default
    /// [`FabricSpec::addr_file_text`] generates, as `ib_acme -A` would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr_file: Option<String>,
    /// The host's `ibacm_opts.cfg` text; empty means every option at its default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub options: String,
    /// The host's `ibacm_hosts.data` text (read with `addr_preload acm_hosts`); `None`
    /// means the file does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_data: Option<String>,
    /// Whether an ibacm daemon runs on the host. A host without one still has ports the
    /// SA answers PathRecords for, but its engine is never started, so ACM requests for
    /// it go unanswered; its kernel still answers IPoIB ARP for its addresses
    /// (docs/protocol/ipoib-neigh.md §4).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub daemon: bool,
    /// The address the host's routing picks for a destination in none of its IPoIB
    /// subnets (the default route through another interface). Without it such a lookup
    /// fails with ENETUNREACH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_route: Option<IpAddr>,
}

fn default_true() -> bool {
    true
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_true(v: &bool) -> bool {
    *v
}

/// One HCA (a verbs device).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HcaSpec {
    /// Verbs device name, e.g. `mlx5_0`: address files and logs name devices by it.
    pub name: String,
    /// Node GUID; port `n`'s GUID (and so its GID) is `guid + n`.
    #[serde(with = "hex")]
    pub guid: u64,
    /// The ports; index `i` is port `i + 1`.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
}

/// One HCA port, as the SM configured it at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Base LID. Required for InfiniBand ports (a missing one reads as 0, which is
    /// rejected); ignored for Ethernet ports.
    #[serde(default)]
    pub lid: u16,
    /// LID mask control: the port answers to `2^lmc` LIDs from `lid`, which the SA
    /// honours when a query names one of them.
    #[serde(default)]
    pub lmc: u8,
    /// The pkey table, in table order (bit 15 set for full membership): it decides which
    /// ports can reach each other and which endpoints ibacm opens.
    #[serde(default = "default_pkeys", with = "hex::list")]
    pub pkeys: Vec<u16>,
    /// `ibv_port_attr.active_width` code (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x).
    #[serde(default = "default_width")]
    pub width: u8,
    /// `ibv_port_attr.active_speed` code (1 SDR … 256 XDR); the port's rate is
    /// [`acm_engine::rate_from_width_speed`] of width and speed, as the engine
    /// computes it.
    #[serde(default = "one_u16")]
    pub speed: u16,
    /// Active MTU in bytes.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// PortInfo.SubnetTimeout: sets ibacm's SA timeout and the paths' packet lifetime.
    #[serde(default = "default_subnet_timeout")]
    pub subnet_timeout: u8,
    /// The SL the SA puts in paths to this port, so tests can see the SA's SL reach
    /// clients unchanged.
    #[serde(default)]
    pub sl: u8,
    /// Whether the port is ACTIVE when the simulation starts.
    #[serde(default = "yes")]
    pub up: bool,
    /// InfiniBand or Ethernet; ibacm skips Ethernet (RoCE) ports, and tests check it does.
    #[serde(default)]
    pub link_layer: LinkLayer,
}

impl PortSpec {
    /// An InfiniBand port with every default (4x SDR, MTU 2048, pkey 0xffff, up) and
    /// the given LID, for building specs in code.
    #[must_use]
    pub fn ib(lid: u16) -> Self {
        Self {
            lid,
            lmc: 0,
            pkeys: default_pkeys(),
            width: default_width(),
            speed: 1,
            mtu: default_mtu(),
            subnet_timeout: default_subnet_timeout(),
            sl: 0,
            up: true,
            link_layer: LinkLayer::Ib,
        }
    }

    /// The port's rate enum, computed exactly as the engine computes it from
    /// `ibv_query_port`.
    #[must_use]
    pub fn rate(&self) -> Rate {
        acm_engine::rate_from_width_speed(self.width, self.speed)
    }

    /// The port's MTU enum, or `None` when `mtu` is not an IB MTU.
    #[must_use]
    pub fn mtu_enum(&self) -> Option<Mtu> {
        Mtu::from_bytes(self.mtu)
    }
}

/// A port's link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// InfiniBand: the only kind ibacm uses.
    #[default]
    #[serde(alias = "infiniband")]
    Ib,
    /// Ethernet (RoCE): present on real machines, and ignored by ibacm.
    Ethernet,
}

/// One IP address of a host, on the IPoIB interface of one port and partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawIpSpec")]
pub struct IpSpec {
    /// The address.
    pub addr: IpAddr,
    /// Prefix length (netlink reports it with the address).
    pub prefix: u8,
    /// Index of the HCA in the host's `hcas`.
    pub hca: usize,
    /// Port number on that HCA, from 1.
    pub port: u8,
    /// The partition of the IPoIB interface: the address is assigned to the endpoint of
    /// this pkey.
    #[serde(with = "hex")]
    pub pkey: u16,
}

/// [`IpSpec`] as read, before the prefix default (which depends on the address family)
/// is applied.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIpSpec {
    addr: IpAddr,
    #[serde(default)]
    prefix: Option<u8>,
    #[serde(default)]
    hca: usize,
    #[serde(default = "one_u8")]
    port: u8,
    #[serde(default = "full_default_pkey", with = "hex")]
    pkey: u16,
}

impl From<RawIpSpec> for IpSpec {
    fn from(r: RawIpSpec) -> Self {
        let prefix = r.prefix.unwrap_or(if r.addr.is_ipv4() { 24 } else { 64 });
        Self {
            addr: r.addr,
            prefix,
            hca: r.hca,
            port: r.port,
            pkey: r.pkey,
        }
    }
}

impl IpSpec {
    /// An address on port 1 of HCA 0, in the default partition.
    #[must_use]
    pub fn new(addr: IpAddr, prefix: u8) -> Self {
        Self {
            addr,
            prefix,
            hca: 0,
            port: 1,
            pkey: 0xFFFF,
        }
    }
}

fn default_subnet_prefix() -> u64 {
    DEFAULT_SUBNET_PREFIX
}
fn default_response_us() -> u64 {
    50
}
pub(super) fn default_pkeys() -> Vec<u16> {
    vec![0xFFFF]
}
pub(super) fn default_width() -> u8 {
    2
}
pub(super) fn default_mtu() -> u32 {
    2048
}
pub(super) fn default_subnet_timeout() -> u8 {
    18
}
fn full_default_pkey() -> u16 {
    0xFFFF
}
fn one() -> u16 {
    1
}
fn one_u8() -> u8 {
    1
}
fn one_u16() -> u16 {
    1
}
fn one_u64() -> u64 {
    1
}
fn yes() -> bool {
    true
}
