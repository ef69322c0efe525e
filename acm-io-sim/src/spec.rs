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
//! | `daemon` | bool | true | whether ibacm runs there; `false` leaves a host whose ports the SA knows but that answers no ACM request (the peers of the reference captures) |
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
#![doc = include_str!("../../testdata/fabrics/demo.toml")]
//! ```

use acm_proto::{Gid, Mtu, Rate};
use core::fmt::Write as _;
use core::time::Duration;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The default subnet prefix, fe80::/64: the link-local prefix every SM uses unless
/// configured otherwise.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// The first LID that is not unicast (multicast LIDs start here).
const MULTICAST_LID_BASE: u32 = 0xC000;

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
    /// The hosts; a host's index here is its identity everywhere else in the simulator.
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
    /// it go unanswered.
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
    #[serde(default = "default_pkeys", with = "hex_vec")]
    pub pkeys: Vec<u16>,
    /// `ibv_port_attr.active_width` code (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x).
    #[serde(default = "default_width")]
    pub width: u8,
    /// `ibv_port_attr.active_speed` code (1 SDR … 256 XDR); the port's rate is
    /// [`acm_engine::device::rate_from_width_speed`] of width and speed, as the engine
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
        acm_engine::device::rate_from_width_speed(self.width, self.speed)
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

/// What [`FabricSpec::parse`] found wrong. Every message names the key (as a path like
/// `hosts[1] (node2).hcas[0].ports[0].lid`) or, for syntax errors, the line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Not TOML, a key of the wrong type, or an unknown key; toml's message (line,
    /// column, a caret under the offending text) is kept whole.
    #[error("{0}")]
    Syntax(String),
    /// A LID (or the end of its LMC range) outside the unicast range 1..=0xBFFF, or not
    /// aligned to its LMC.
    #[error("{field}: LID {lid} ({lid:#06x}) {why}")]
    BadLid {
        /// Where.
        field: String,
        /// The LID.
        lid: u16,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Two ports whose LID ranges overlap.
    #[error("{field}: LID {lid} is already used by {other}")]
    DuplicateLid {
        /// The later port.
        field: String,
        /// The first LID they share.
        lid: u16,
        /// The earlier port.
        other: String,
    },
    /// Two hosts with one name.
    #[error("{field}: host name {name:?} is already used by hosts[{first}]")]
    DuplicateHost {
        /// The later host.
        field: String,
        /// The name.
        name: String,
        /// Index of the first host with it.
        first: usize,
    },
    /// An IP address on an HCA or port the host does not have.
    #[error("{field}: host {host:?} has no port {port} on HCA {hca}")]
    MissingPort {
        /// The IP entry.
        field: String,
        /// The host name.
        host: String,
        /// The HCA index given.
        hca: usize,
        /// The port number given.
        port: u8,
    },
    /// `sm.lid` is no port's LID, so SA MADs would go nowhere.
    #[error("sm.lid: no InfiniBand port has LID {0}")]
    SmLidNotFound(u16),
    /// Any other value out of range or inconsistent.
    #[error("{field}: {message}")]
    Invalid {
        /// Where.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// How [`FabricSpec::generate`] builds a fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenOptions {
    /// Hosts per leaf switch (hosts 1..=n on leaf 0, and so on); 0 is taken as 1.
    pub hosts_per_leaf: usize,
    /// `ibacm_opts.cfg` text for every host.
    pub options: String,
    /// Every port's pkey table (empty means `[0xffff]`); IP addresses go on the first.
    pub pkeys: Vec<u16>,
    /// Also give host `i` the IPv6 address `fd00::i`/64.
    pub ipv6: bool,
    /// `(width, speed)` codes, cycled over the hosts (host 1 gets the first); empty means
    /// `[(2, 1)]`, 4x SDR.
    pub rates: Vec<(u8, u16)>,
}

impl Default for GenOptions {
    fn default() -> Self {
        Self {
            hosts_per_leaf: 32,
            options: String::new(),
            pkeys: default_pkeys(),
            ipv6: false,
            rates: vec![(2, 1)],
        }
    }
}

/// The largest fabric [`FabricSpec::generate`] builds: one unicast LID per host.
pub const MAX_GENERATED_HOSTS: usize = 0xBFFF;

/// Node GUID of generated host 0 (host `i` gets this plus `i * 0x100`).
const GENERATED_GUID_BASE: u64 = 0x0002_c903_0000_0000;

impl FabricSpec {
    /// Reads and checks a fabric description (see the module docs for the format).
    ///
    /// # Errors
    /// A [`SpecError`] naming the line (syntax) or the key (everything else) of the
    /// first problem found.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let spec: Self = toml::from_str(text).map_err(|e| SpecError::Syntax(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The checks [`FabricSpec::parse`] makes after reading, for specs built in code
    /// (the simulator assumes a valid spec: unique LIDs and GIDs, known rates and MTUs).
    ///
    /// # Errors
    /// The first problem found, as for `parse`.
    pub fn validate(&self) -> Result<(), SpecError> {
        let mut names: HashMap<&str, usize> = HashMap::new();
        // base LID -> (end exclusive, path)
        let mut lids: BTreeMap<u32, (u32, String)> = BTreeMap::new();
        let mut guids: HashMap<u64, String> = HashMap::new();
        let mut ips: HashMap<IpAddr, String> = HashMap::new();
        check_range("sm.sl", self.sm.sl, 15)?;
        for (hi, h) in self.hosts.iter().enumerate() {
            let hp = format!("hosts[{hi}] ({})", h.name);
            if h.name.is_empty() || h.name.chars().any(char::is_whitespace) {
                return Err(invalid(
                    format!("hosts[{hi}].name"),
                    format!("{:?} must be non-empty and without white space", h.name),
                ));
            }
            if let Some(&first) = names.get(h.name.as_str()) {
                return Err(SpecError::DuplicateHost {
                    field: format!("hosts[{hi}].name"),
                    name: h.name.clone(),
                    first,
                });
            }
            names.insert(&h.name, hi);
            for (ci, c) in h.hcas.iter().enumerate() {
                let cp = format!("{hp}.hcas[{ci}]");
                if c.name.is_empty() || c.name.chars().any(char::is_whitespace) {
                    return Err(invalid(
                        format!("{cp}.name"),
                        format!("{:?} must be non-empty and without white space", c.name),
                    ));
                }
                if c.ports.len() > 254 {
                    return Err(invalid(
                        format!("{cp}.ports"),
                        format!("{} ports; an HCA has at most 254", c.ports.len()),
                    ));
                }
                for (pi, p) in c.ports.iter().enumerate() {
                    let pp = format!("{cp}.ports[{pi}]");
                    validate_port(&pp, p)?;
                    let guid = c.guid.wrapping_add(pi as u64 + 1);
                    if let Some(other) = guids.insert(guid, pp.clone()) {
                        return Err(invalid(
                            format!("{cp}.guid"),
                            format!("port {} has port GUID {guid:#018x}, as {other} has", pi + 1),
                        ));
                    }
                    if p.link_layer != LinkLayer::Ib {
                        continue;
                    }
                    let base = u32::from(p.lid);
                    let end = base + (1u32 << p.lmc);
                    if let Some((&ob, (oe, other))) = lids.range(..end).next_back()
                        && *oe > base
                    {
                        return Err(SpecError::DuplicateLid {
                            field: format!("{pp}.lid"),
                            lid: base.max(ob) as u16,
                            other: other.clone(),
                        });
                    }
                    lids.insert(base, (end, pp));
                }
            }
            for (ii, ip) in h.ips.iter().enumerate() {
                let ipp = format!("{hp}.ips[{ii}]");
                let max = if ip.addr.is_ipv4() { 32 } else { 128 };
                if ip.prefix > max {
                    return Err(invalid(
                        format!("{ipp}.prefix"),
                        format!("/{} is longer than {max} bits", ip.prefix),
                    ));
                }
                let port = h
                    .hcas
                    .get(ip.hca)
                    .and_then(|c| c.ports.get(usize::from(ip.port).wrapping_sub(1)));
                let Some(port) = port else {
                    return Err(SpecError::MissingPort {
                        field: ipp,
                        host: h.name.clone(),
                        hca: ip.hca,
                        port: ip.port,
                    });
                };
                if !port.pkeys.iter().any(|&k| k | 0x8000 == ip.pkey | 0x8000) {
                    return Err(invalid(
                        format!("{ipp}.pkey"),
                        format!(
                            "{:#06x} is not in the pkey table of HCA {} port {}",
                            ip.pkey, ip.hca, ip.port
                        ),
                    ));
                }
                if let Some(other) = ips.insert(ip.addr, ipp.clone()) {
                    return Err(invalid(
                        format!("{ipp}.addr"),
                        format!("{} is already assigned by {other}", ip.addr),
                    ));
                }
            }
        }
        let sm = u32::from(self.sm.lid);
        let found = lids
            .range(..=sm)
            .next_back()
            .is_some_and(|(_, (end, _))| sm < *end);
        if !found {
            return Err(SpecError::SmLidNotFound(self.sm.lid));
        }
        Ok(())
    }

    /// The spec as a description file that [`FabricSpec::parse`] reads back to an equal
    /// spec, so generated or edited fabrics can be saved and replayed.
    ///
    /// # Panics
    /// Never for the types here (every value has a TOML form).
    #[must_use]
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("every FabricSpec value has a TOML form")
    }

    /// An N-host fabric, the same for the same arguments.
    ///
    /// Host `i` (1-based, index `i - 1`) is named `host{i}`, on leaf
    /// `(i - 1) / hosts_per_leaf`, with one HCA `mlx5_0` of node GUID
    /// `0x0002c90300000000 + i * 0x100` and one port with LID `i`, the options' pkeys
    /// and the `i`-th rate (cycled). Its IPv4 address is `10.(i >> 16).(i >> 8 & 255).(i
    /// & 255)/8`: unique for every `i` below 2^24 and never the network address, since
    /// `i ≥ 1`; with `ipv6` it also has `fd00::i`/64 (`i` in the low bits). Both are on
    /// the first pkey. The SM is on LID 1 (host 1), SL 0.
    ///
    /// # Panics
    /// If `hosts` exceeds [`MAX_GENERATED_HOSTS`] (0xBFFF, the unicast LID space).
    #[must_use]
    pub fn generate(hosts: usize, opts: &GenOptions) -> Self {
        assert!(
            hosts <= MAX_GENERATED_HOSTS,
            "{hosts} hosts need more unicast LIDs than exist (at most {MAX_GENERATED_HOSTS})"
        );
        let pkeys = if opts.pkeys.is_empty() {
            default_pkeys()
        } else {
            opts.pkeys.clone()
        };
        let rates: &[(u8, u16)] = if opts.rates.is_empty() {
            &[(2, 1)]
        } else {
            &opts.rates
        };
        let per_leaf = opts.hosts_per_leaf.max(1);
        let hosts = (1..=hosts)
            .map(|i| {
                let (width, speed) = rates[(i - 1) % rates.len()];
                let port = PortSpec {
                    pkeys: pkeys.clone(),
                    width,
                    speed,
                    ..PortSpec::ib(i as u16)
                };
                let n = i as u32;
                let v4 = Ipv4Addr::new(10, (n >> 16) as u8, (n >> 8) as u8, n as u8);
                let mut ips = vec![IpSpec {
                    pkey: pkeys[0],
                    ..IpSpec::new(IpAddr::V4(v4), 8)
                }];
                if opts.ipv6 {
                    let v6 = Ipv6Addr::from(0xfd00_u128 << 112 | i as u128);
                    ips.push(IpSpec {
                        pkey: pkeys[0],
                        ..IpSpec::new(IpAddr::V6(v6), 64)
                    });
                }
                HostSpec {
                    name: format!("host{i}"),
                    leaf: ((i - 1) / per_leaf) as u32,
                    hcas: vec![HcaSpec {
                        name: "mlx5_0".into(),
                        guid: GENERATED_GUID_BASE + i as u64 * 0x100,
                        ports: vec![port],
                    }],
                    ips,
                    addr_file: None,
                    options: opts.options.clone(),
                    hosts_data: None,
                    daemon: true,
                    default_route: None,
                }
            })
            .collect();
        Self {
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            sm: SmSpec::default(),
            link: LinkSpec::default(),
            hosts,
        }
    }

    /// The index of the host called `name`, so tests can speak of hosts by name.
    #[must_use]
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// The port GUID of port `port` (from 1) of HCA `hca` of host `host`: the node GUID
    /// plus the port number, a common vendor scheme that keeps port GUIDs distinct.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_guid(&self, host: usize, hca: usize, port: u8) -> u64 {
        self.hosts[host].hcas[hca]
            .guid
            .wrapping_add(u64::from(port))
    }

    /// The port's GID (index 0): the subnet prefix and the port GUID.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_gid(&self, host: usize, hca: usize, port: u8) -> Gid {
        Gid::from_parts(self.subnet_prefix, self.port_guid(host, hca, port))
    }

    /// The host's `ibacm_addr.cfg`: its `addr_file`, or else a default in the spirit of
    /// `ib_acme -A` (spec §6.7): a comment header, then `<host> <hca> <port> default` for
    /// the first port of the first HCA and `<host>-<hca>-<port> <hca> <port> default` for
    /// every other port.
    ///
    /// Unlike `ib_acme -A` the default gives the first port only the host name (not also
    /// `<host>-1`) and names the others after device and port rather than a running
    /// index, so a name says where it lives and no port carries two names.
    ///
    /// # Panics
    /// If the host does not exist.
    #[must_use]
    pub fn addr_file_text(&self, host: usize) -> String {
        let h = &self.hosts[host];
        if let Some(text) = &h.addr_file {
            return text.clone();
        }
        let mut out = format!(
            "# ibacm_addr.cfg for {}, generated by acm-io-sim\n\
             # Entry format is: address device port pkey\n",
            h.name
        );
        let mut first = true;
        for c in &h.hcas {
            for port in 1..=c.ports.len() {
                if first {
                    let _ = writeln!(out, "{} {} {port} default", h.name, c.name);
                    first = false;
                } else {
                    let _ = writeln!(
                        out,
                        "{}-{}-{port} {} {port} default",
                        h.name, c.name, c.name
                    );
                }
            }
        }
        out
    }

    /// Switches between two hosts: 0 for the same host (loopback), 1 on the same leaf,
    /// 3 otherwise (leaf, spine, leaf).
    ///
    /// # Panics
    /// If either host does not exist.
    #[must_use]
    pub fn hops(&self, a: usize, b: usize) -> u8 {
        if a == b {
            0
        } else if self.hosts[a].leaf == self.hosts[b].leaf {
            1
        } else {
            3
        }
    }

    /// One-way delivery time between two hosts: `(hops + 1)` cables of `latency_us`
    /// plus `hops` switches of `switch_us` (loopback counts one cable).
    ///
    /// # Panics
    /// If either host does not exist.
    #[must_use]
    pub fn latency(&self, a: usize, b: usize) -> Duration {
        let hops = u64::from(self.hops(a, b));
        let us = (hops + 1)
            .saturating_mul(self.link.latency_us)
            .saturating_add(hops.saturating_mul(self.link.switch_us));
        Duration::from_micros(us)
    }
}

fn validate_port(pp: &str, p: &PortSpec) -> Result<(), SpecError> {
    check_range(&format!("{pp}.lmc"), p.lmc, 7)?;
    check_range(&format!("{pp}.sl"), p.sl, 15)?;
    check_range(&format!("{pp}.subnet_timeout"), p.subnet_timeout, 31)?;
    if p.pkeys.is_empty() {
        return Err(invalid(
            format!("{pp}.pkeys"),
            "the pkey table is empty".into(),
        ));
    }
    if let Some(k) = p.pkeys.iter().find(|&&k| k & 0x7FFF == 0) {
        return Err(invalid(
            format!("{pp}.pkeys"),
            format!("{k:#06x} is not a valid pkey (the low 15 bits are zero)"),
        ));
    }
    if p.rate().mbps().is_none() {
        return Err(invalid(
            format!("{pp}.width"),
            format!(
                "width code {} with speed code {} is no known IB rate",
                p.width, p.speed
            ),
        ));
    }
    if p.mtu_enum().is_none() {
        return Err(invalid(
            format!("{pp}.mtu"),
            format!("{} is not an IB MTU (256, 512, 1024, 2048, 4096)", p.mtu),
        ));
    }
    if p.link_layer != LinkLayer::Ib {
        return Ok(());
    }
    let field = format!("{pp}.lid");
    let base = u32::from(p.lid);
    let end = base + (1u32 << p.lmc);
    if p.lid == 0 {
        return Err(SpecError::BadLid {
            field,
            lid: p.lid,
            why: "is reserved (a port needs a unicast LID, 1..=0xbfff)",
        });
    }
    if end > MULTICAST_LID_BASE {
        return Err(SpecError::BadLid {
            field,
            lid: p.lid,
            why: "is not unicast: LID and LMC range must stay below 0xc000",
        });
    }
    if base & ((1 << p.lmc) - 1) != 0 {
        return Err(SpecError::BadLid {
            field,
            lid: p.lid,
            why: "is not a multiple of 2^lmc",
        });
    }
    Ok(())
}

fn check_range(field: &str, v: u8, max: u8) -> Result<(), SpecError> {
    if v > max {
        return Err(invalid(field.into(), format!("{v} is above {max}")));
    }
    Ok(())
}

fn invalid(field: String, message: String) -> SpecError {
    SpecError::Invalid { field, message }
}

fn default_subnet_prefix() -> u64 {
    DEFAULT_SUBNET_PREFIX
}
fn default_response_us() -> u64 {
    50
}
fn default_pkeys() -> Vec<u16> {
    vec![0xFFFF]
}
fn default_width() -> u8 {
    2
}
fn default_mtu() -> u32 {
    2048
}
fn default_subnet_timeout() -> u8 {
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

/// Integers as hex strings on output; integers or strings (`0x…` hex, or decimal) on
/// input. TOML integers are signed 64-bit, so GUIDs and prefixes above 2^63 need this.
mod hex {
    use core::fmt;
    use core::marker::PhantomData;
    use serde::de::{self, Unexpected};
    use serde::{Deserializer, Serializer};

    pub(super) trait HexInt: Copy + TryFrom<u64> + Into<u64> {
        const DIGITS: usize;
    }
    impl HexInt for u16 {
        const DIGITS: usize = 4;
    }
    impl HexInt for u64 {
        const DIGITS: usize = 16;
    }

    pub(super) fn format<T: HexInt>(v: T) -> String {
        format!("{:#0w$x}", v.into(), w = T::DIGITS + 2)
    }

    pub(super) fn serialize<T: HexInt, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*v))
    }

    pub(super) fn deserialize<'de, T: HexInt, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        d.deserialize_any(HexVisitor(PhantomData))
    }

    pub(super) struct HexVisitor<T>(pub(super) PhantomData<T>);

    impl<T: HexInt> HexVisitor<T> {
        fn narrow<E: de::Error>(&self, v: u64, shown: Unexpected<'_>) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(shown, self))
        }
    }

    impl<T: HexInt> de::Visitor<'_> for HexVisitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "an integer of at most {} hex digits, or a string such as \"0x{}\"",
                T::DIGITS,
                "f".repeat(T::DIGITS)
            )
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            self.narrow(v, Unexpected::Unsigned(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            let u = u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))?;
            self.narrow(u, Unexpected::Signed(v))
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            let t = s.trim().replace('_', "");
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse::<u64>(),
            };
            let v = parsed.map_err(|_| E::invalid_value(Unexpected::Str(s), &self))?;
            self.narrow(v, Unexpected::Str(s))
        }
    }
}

/// A list of pkeys, each as [`hex`] reads and writes them.
mod hex_vec {
    use super::hex::{self, HexVisitor};
    use core::fmt;
    use core::marker::PhantomData;
    use serde::de::{self, DeserializeSeed, SeqAccess};
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u16], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|&k| hex::format(k)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        d.deserialize_seq(ListVisitor)
    }

    struct ListVisitor;
    struct One;

    impl<'de> DeserializeSeed<'de> for One {
        type Value = u16;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u16, D::Error> {
            d.deserialize_any(HexVisitor(PhantomData))
        }
    }

    impl<'de> de::Visitor<'de> for ListVisitor {
        type Value = Vec<u16>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of pkeys such as [\"0xffff\", \"0x8001\"]")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u16>, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = seq.next_element_seed(One)? {
                out.push(k);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = include_str!("../../testdata/fabrics/demo.toml");

    /// One host "a" with one HCA and one port whose keys are `port` (line 7 on).
    fn one_port(port: &str) -> String {
        format!(
            "[[hosts]]\nname = \"a\"\n[[hosts.hcas]]\nname = \"mlx5_0\"\nguid = 0x100\n\
             [[hosts.hcas.ports]]\n{port}\n"
        )
    }

    /// [`one_port`] with LID 1 (line 7) and `extra` from line 8.
    fn minimal(extra: &str) -> String {
        one_port(&format!("lid = 1\n{extra}"))
    }

    #[test]
    fn demo_parses_with_the_documented_values() {
        let s = FabricSpec::parse(DEMO).unwrap();
        assert_eq!(s.subnet_prefix, DEFAULT_SUBNET_PREFIX);
        assert_eq!(
            s.sm,
            SmSpec {
                lid: 1,
                sl: 0,
                response_us: 50
            }
        );
        assert_eq!(s.hosts.len(), 3);
        for (i, h) in s.hosts.iter().enumerate() {
            assert_eq!(h.name, format!("node{}", i + 1));
            assert_eq!(h.hcas.len(), 1);
            let p = &h.hcas[0].ports[0];
            assert_eq!(p.lid, i as u16 + 1);
            assert_eq!(p.pkeys, vec![0xFFFF]);
            assert_eq!(
                (p.rate(), p.mtu_enum()),
                (Rate::RATE_10, Some(Mtu::MTU_2048))
            );
            assert_eq!(p.subnet_timeout, 18);
            assert!(p.up);
            assert_eq!(h.ips.len(), 1);
            assert_eq!(
                h.ips[0].addr,
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1))
            );
            assert_eq!((h.ips[0].prefix, h.ips[0].pkey), (24, 0xFFFF));
        }
        assert_eq!(
            s.port_gid(0, 0, 1),
            "fe80::2:c903:a0:b001".parse::<Gid>().unwrap()
        );
        assert_eq!(
            s.port_gid(2, 0, 1),
            "fe80::2:c903:a0:b003".parse::<Gid>().unwrap()
        );
        assert_eq!(s.host_index("node2"), Some(1));
        assert_eq!(s.host_index("node9"), None);
        assert!(s.hosts[0].options.contains("route_prot sa"));
        assert_eq!(
            s.addr_file_text(1),
            "node2 mlx5_0 1 default\n",
            "explicit file"
        );
        assert!(s.addr_file_text(2).ends_with("\nnode3 mlx5_0 1 default\n"));
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let s = FabricSpec::parse(&minimal("")).unwrap();
        assert_eq!(s.sm, SmSpec::default());
        assert_eq!(s.link, LinkSpec::default());
        assert_eq!(s.hosts[0].hcas[0].ports[0], PortSpec::ib(1));
        assert_eq!(s.hosts[0].options, "");
        assert_eq!(s.hosts[0].addr_file, None);
        assert_eq!(s.port_guid(0, 0, 1), 0x101);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let e = FabricSpec::parse("subnet_prefix = \n[sm]\n").unwrap_err();
        assert!(matches!(e, SpecError::Syntax(_)));
        assert!(e.to_string().contains("line 1"), "{e}");

        let e = FabricSpec::parse(&minimal("mtu = \"big\"")).unwrap_err();
        assert!(e.to_string().contains("line 8"), "{e}");

        let e = FabricSpec::parse(&minimal("lidd = 4")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 8") && msg.contains("lidd"), "{msg}");

        let e = FabricSpec::parse(&minimal("pkeys = [-1]")).unwrap_err();
        assert!(e.to_string().contains("line 8"), "{e}");

        let e = FabricSpec::parse(&minimal("pkeys = [\"0x1ffff\"]")).unwrap_err();
        assert!(e.to_string().contains("0x1ffff"), "{e}");

        let e = FabricSpec::parse("[[hosts]]\nleaf = 1\n").unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let cases: [(&str, &str); 6] = [
            ("lid = 0", "hosts[0] (a).hcas[0].ports[0].lid: LID 0"),
            (
                "lid = 0xc000",
                "hosts[0] (a).hcas[0].ports[0].lid: LID 49152",
            ),
            ("lid = 0xbfff\nlmc = 1", "not unicast"),
            ("lid = 5\nlmc = 2", "not a multiple of 2^lmc"),
            (
                "lid = 1\nmtu = 3000",
                "hosts[0] (a).hcas[0].ports[0].mtu: 3000",
            ),
            ("lid = 1\nwidth = 3", "hosts[0] (a).hcas[0].ports[0].width"),
        ];
        for (port, want) in cases {
            let e = FabricSpec::parse(&one_port(port)).unwrap_err();
            assert!(e.to_string().contains(want), "{port}: {e}");
        }
        let e = FabricSpec::parse(&one_port("lmc = 0")).unwrap_err();
        assert!(
            e.to_string().contains("LID 0"),
            "a missing LID reads as 0: {e}"
        );
        let e = FabricSpec::parse(&minimal("pkeys = []")).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = FabricSpec::parse(&minimal("pkeys = [0x8000]")).unwrap_err();
        assert!(e.to_string().contains("0x8000"), "{e}");
        let e = FabricSpec::parse(&minimal("sl = 16")).unwrap_err();
        assert!(e.to_string().contains(".sl: 16 is above 15"), "{e}");
    }

    #[test]
    fn duplicate_lids_hosts_ips_and_missing_ports() {
        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[2].hcas[0].ports[0].lid = 2;
        let e = FabricSpec::parse(&s.to_toml()).unwrap_err();
        assert_eq!(
            e,
            SpecError::DuplicateLid {
                field: "hosts[2] (node3).hcas[0].ports[0].lid".into(),
                lid: 2,
                other: "hosts[1] (node2).hcas[0].ports[0]".into()
            }
        );
        // Overlap through an LMC range.
        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[1].hcas[0].ports[0].lid = 4;
        s.hosts[1].hcas[0].ports[0].lmc = 2;
        s.hosts[2].hcas[0].ports[0].lid = 7;
        assert!(matches!(
            s.validate(),
            Err(SpecError::DuplicateLid { lid: 7, .. })
        ));
        s.hosts[2].hcas[0].ports[0].lid = 8;
        assert_eq!(s.validate(), Ok(()));

        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[2].name = "node1".into();
        let e = s.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "hosts[2].name: host name \"node1\" is already used by hosts[0]"
        );

        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[1].ips[0].port = 2;
        let e = FabricSpec::parse(&s.to_toml()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hosts[1] (node2).ips[0]: host \"node2\" has no port 2 on HCA 0"
        );
        s.hosts[1].ips[0].port = 1;
        s.hosts[1].ips[0].hca = 1;
        assert!(matches!(
            s.validate(),
            Err(SpecError::MissingPort { hca: 1, .. })
        ));
        s.hosts[1].ips[0].hca = 0;
        s.hosts[1].ips[0].pkey = 0x8001;
        assert!(s.validate().unwrap_err().to_string().contains("0x8001"));

        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[1].ips[0].addr = "10.0.0.1".parse().unwrap();
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("10.0.0.1 is already assigned by hosts[0] (node1).ips[0]")
        );

        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.hosts[1].hcas[0].guid = s.hosts[0].hcas[0].guid;
        assert!(s.validate().unwrap_err().to_string().contains("port GUID"));

        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.sm.lid = 9;
        assert_eq!(
            FabricSpec::parse(&s.to_toml()).unwrap_err(),
            SpecError::SmLidNotFound(9)
        );
    }

    #[test]
    fn ethernet_ports_need_no_lid_and_hold_no_sm() {
        let text = minimal("").replace(
            "[[hosts.hcas.ports]]\nlid = 1\n",
            "[[hosts.hcas.ports]]\nlid = 1\n[[hosts.hcas.ports]]\nlink_layer = \"ethernet\"\n",
        );
        let s = FabricSpec::parse(&text).unwrap();
        assert_eq!(s.hosts[0].hcas[0].ports[1].link_layer, LinkLayer::Ethernet);
        let mut s2 = s.clone();
        s2.hosts[0].hcas[0].ports[0].link_layer = LinkLayer::Ethernet;
        assert_eq!(s2.validate(), Err(SpecError::SmLidNotFound(1)));
        assert_eq!(
            s.addr_file_text(0).lines().skip(2).collect::<Vec<_>>(),
            ["a mlx5_0 1 default", "a-mlx5_0-2 mlx5_0 2 default"]
        );
    }

    #[test]
    fn round_trip_through_toml() {
        let mut s = FabricSpec::parse(DEMO).unwrap();
        s.subnet_prefix = 0xfec0_0000_0000_0001;
        s.hosts[0].hosts_data = Some("10.0.0.2 fe80::2:c903:a0:b002\n".into());
        s.hosts[1].options = "# odd: \"\"\" ''' \\ \t\u{e9}\nlog_level 2\n".into();
        s.hosts[0].hcas[0].guid = u64::MAX - 8;
        s.hosts[0].hcas[0].ports[0].pkeys = vec![0xFFFF, 0x8001, 0x7FFF];
        s.hosts[2].hcas[0].ports[0].link_layer = LinkLayer::Ethernet;
        s.hosts[2].hcas[0].ports[0].up = false;
        s.hosts[2].ips[0] = IpSpec {
            addr: "fd00::3".parse().unwrap(),
            prefix: 64,
            hca: 0,
            port: 1,
            pkey: 0x7FFF,
        };
        let text = s.to_toml();
        assert!(text.contains("\"0xfec0000000000001\""), "{text}");
        assert!(text.contains("\"0x8001\""), "{text}");
        assert_eq!(FabricSpec::parse(&text), Ok(s));

        let g = FabricSpec::generate(
            40,
            &GenOptions {
                hosts_per_leaf: 8,
                options: "route_prot acm\nmin_rate 10\n".into(),
                pkeys: vec![0xFFFF, 0x8002],
                ipv6: true,
                rates: vec![(2, 1), (2, 4), (1, 32)],
            },
        );
        assert_eq!(FabricSpec::parse(&g.to_toml()), Ok(g));
    }

    #[test]
    fn generate_a_thousand_hosts() {
        let g = FabricSpec::generate(
            1000,
            &GenOptions {
                ipv6: true,
                rates: vec![(2, 1), (2, 4)],
                ..GenOptions::default()
            },
        );
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(g.hosts.len(), 1000);
        let mut lids = std::collections::HashSet::new();
        let mut gids = std::collections::HashSet::new();
        let mut ips = std::collections::HashSet::new();
        for (h, host) in g.hosts.iter().enumerate() {
            assert_eq!(host.name, format!("host{}", h + 1));
            assert_eq!(host.leaf, (h / 32) as u32);
            assert!(lids.insert(host.hcas[0].ports[0].lid));
            assert!(gids.insert(g.port_gid(h, 0, 1)));
            for ip in &host.ips {
                assert!(ips.insert(ip.addr));
            }
        }
        assert_eq!((lids.len(), gids.len(), ips.len()), (1000, 1000, 2000));
        let h = 299; // host300
        assert_eq!(
            g.hosts[h].ips[0].addr,
            IpAddr::V4(Ipv4Addr::new(10, 0, 1, 44))
        );
        assert_eq!(
            g.hosts[h].ips[1].addr,
            "fd00::12c".parse::<IpAddr>().unwrap()
        );
        assert_eq!(g.hosts[h].hcas[0].guid, 0x0002_c903_0000_0000 + 300 * 0x100);
        assert_eq!(g.port_guid(h, 0, 1), 0x0002_c903_0001_2c01);
        assert_eq!(g.hosts[0].hcas[0].ports[0].rate(), Rate::RATE_10);
        assert_eq!(g.hosts[1].hcas[0].ports[0].rate(), Rate::RATE_40);
        assert_eq!(g.sm.lid, 1);
    }

    #[test]
    fn generate_at_the_limit_stays_unique() {
        let g = FabricSpec::generate(MAX_GENERATED_HOSTS, &GenOptions::default());
        assert_eq!(g.validate(), Ok(()));
        let last = &g.hosts[MAX_GENERATED_HOSTS - 1];
        assert_eq!(last.hcas[0].ports[0].lid, 0xBFFF);
        assert_eq!(
            last.ips[0].addr,
            IpAddr::V4(Ipv4Addr::new(10, 0, 0xBF, 0xFF))
        );
    }

    #[test]
    #[should_panic(expected = "unicast LIDs")]
    fn generate_refuses_more_hosts_than_lids() {
        let _ = FabricSpec::generate(MAX_GENERATED_HOSTS + 1, &GenOptions::default());
    }

    #[test]
    fn hops_and_latency() {
        let mut g = FabricSpec::generate(
            5,
            &GenOptions {
                hosts_per_leaf: 2,
                ..GenOptions::default()
            },
        );
        g.link = LinkSpec {
            latency_us: 2,
            switch_us: 5,
        };
        assert_eq!(g.hops(0, 0), 0);
        assert_eq!(g.hops(0, 1), 1);
        assert_eq!(g.hops(1, 2), 3);
        assert_eq!(g.hops(4, 0), 3);
        assert_eq!(g.latency(0, 0), Duration::from_micros(2));
        assert_eq!(g.latency(0, 1), Duration::from_micros(2 * 2 + 5));
        assert_eq!(g.latency(3, 0), Duration::from_micros(4 * 2 + 3 * 5));
        assert_eq!(g.latency(3, 0), g.latency(0, 3));
    }

    #[test]
    fn default_addr_file_covers_every_port() {
        let mut g = FabricSpec::generate(2, &GenOptions::default());
        assert_eq!(
            g.addr_file_text(1),
            "# ibacm_addr.cfg for host2, generated by acm-io-sim\n\
             # Entry format is: address device port pkey\n\
             host2 mlx5_0 1 default\n"
        );
        g.hosts[0].hcas[0].ports.push(PortSpec::ib(100));
        g.hosts[0].hcas.push(HcaSpec {
            name: "mlx4_0".into(),
            guid: 0x99,
            ports: vec![PortSpec::ib(101)],
        });
        let lines: Vec<String> = g
            .addr_file_text(0)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect();
        assert_eq!(
            lines,
            [
                "host1 mlx5_0 1 default",
                "host1-mlx5_0-2 mlx5_0 2 default",
                "host1-mlx4_0-1 mlx4_0 1 default"
            ]
        );
    }
}
