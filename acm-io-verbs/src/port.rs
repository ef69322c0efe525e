//! What this crate reports about a port, whichever source it came from: sysfs
//! ([`crate::sysfs`]) or a verbs query (`verbs`, with the `verbs` feature). The daemon
//! turns it into the engine's port description; this crate decides nothing about it.

use acm_proto::Gid;

/// A port's logical state, as the kernel numbers it (`enum ib_port_state`, which sysfs
/// prints as "4: ACTIVE" and `ibv_query_port` returns as `ibv_port_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortState(pub u8);

impl PortState {
    /// No state reported.
    pub const NOP: Self = Self(0);
    /// The link is down.
    pub const DOWN: Self = Self(1);
    /// Link up, not yet configured by the SM.
    pub const INIT: Self = Self(2);
    /// Configured, not yet active.
    pub const ARMED: Self = Self(3);
    /// In service: the only state ibacm uses a port in.
    pub const ACTIVE: Self = Self(4);
    /// Active, deferring.
    pub const ACTIVE_DEFER: Self = Self(5);

    /// Whether the port is ACTIVE.
    #[must_use]
    pub fn is_active(self) -> bool {
        self == Self::ACTIVE
    }
}

/// The link layer of a port.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LinkLayer {
    /// InfiniBand: the only kind ibacm serves.
    #[default]
    InfiniBand,
    /// Ethernet (RoCE): skipped.
    Ethernet,
    /// Anything else the kernel names (skipped).
    Other(String),
}

/// One port's attributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortInfo {
    /// Port number, from 1.
    pub number: u8,
    /// Logical state.
    pub state: PortState,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Base LID.
    pub lid: u16,
    /// LID mask count (LMC).
    pub lmc: u8,
    /// The subnet manager's LID.
    pub sm_lid: u16,
    /// The SL to reach the subnet manager.
    pub sm_sl: u8,
    /// Active link width, as `ibv_port_attr.active_width` codes it (1 = 1X, 2 = 4X,
    /// 4 = 8X, 8 = 12X, 16 = 2X); 0 when unknown.
    pub active_width: u8,
    /// Active lane speed, as `ibv_port_attr.active_speed` (or `active_speed_ex`) codes
    /// it (1 = SDR, 2 = DDR, 4 = QDR, 8 = FDR10, 16 = FDR, 32 = EDR, 64 = HDR,
    /// 128 = NDR, 256 = XDR); 0 when unknown.
    pub active_speed: u16,
    /// Active MTU enum (1 = 256 … 5 = 4096). sysfs does not publish it: `None` there.
    pub active_mtu: Option<u8>,
    /// PortInfo.SubnetTimeout. sysfs does not publish it: `None` there.
    pub subnet_timeout: Option<u8>,
    /// The GID table, in index order, up to (not including) the first entry whose
    /// interface id is zero.
    pub gids: Vec<Gid>,
    /// The pkey table, in index order, membership bit included.
    pub pkeys: Vec<u16>,
}

impl PortInfo {
    /// Whether ibacm can use the port: ACTIVE and InfiniBand.
    #[must_use]
    pub fn usable(&self) -> bool {
        self.state.is_active() && self.link_layer == LinkLayer::InfiniBand
    }
}
