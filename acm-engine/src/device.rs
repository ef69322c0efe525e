//! What the driver tells the engine about devices and ports.
//!
//! The driver discovers hardware (verbs, or the simulated fabric) and describes it with
//! these plain values; the engine never queries anything itself.

use acm_proto::{Gid, Mtu, Rate};
use alloc::string::String;
use alloc::vec::Vec;

/// The driver's name for a device: its position in discovery order. The engine walks
/// devices newest first, as the reference does (it pushes each on the front of a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId(pub u32);

/// One port of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId {
    /// The device.
    pub device: DeviceId,
    /// The port number, from 1.
    pub port: u8,
}

/// The port's logical state (`ibv_port_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortState {
    /// Down, or anything that is not active.
    #[default]
    Down,
    /// ACTIVE: the only state in which the reference uses a port.
    Active,
}

/// A port's attributes, as `ibv_query_port` and the GID/pkey table queries give them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortAttrs {
    /// Logical state.
    pub state: PortState,
    /// Whether the link layer is InfiniBand (RoCE ports are never used).
    pub link_layer_ib: bool,
    /// Base LID.
    pub lid: u16,
    /// LID mask control: the port answers to `lid .. lid + 2^lmc`.
    pub lmc: u8,
    /// The SM's LID: where SA MADs go.
    pub sm_lid: u16,
    /// The SL to reach the SM.
    pub sm_sl: u8,
    /// The GID table, up to the first entry with a zero interface id.
    pub gids: Vec<Gid>,
    /// The pkey table, in table order, membership bit included.
    pub pkeys: Vec<u16>,
    /// The active rate as an IB rate enum (see [`rate_from_width_speed`]).
    pub rate: Rate,
    /// The active MTU enum.
    pub mtu: Mtu,
    /// PortInfo.SubnetTimeout: the SA's response time is 4.096 µs × 2^value.
    pub subnet_timeout: u8,
}

impl PortAttrs {
    /// The mask that clears the LMC bits of a LID (`0xFFFF - (2^lmc - 1)`).
    #[must_use]
    pub fn lid_mask(&self) -> u16 {
        let span = 1u32 << self.lmc.min(7);
        (0x1_0000u32 - span) as u16
    }

    /// The reference's subnet timeout in milliseconds: `2^(SubnetTimeout - 8)` when
    /// SubnetTimeout ≥ 8, else 0 (an approximation of 4.096 µs × 2^value).
    #[must_use]
    pub fn subnet_timeout_ms(&self) -> u64 {
        if self.subnet_timeout >= 8 {
            1u64 << (self.subnet_timeout - 8).min(40)
        } else {
            0
        }
    }

    /// The pkey index SA MADs use: that of 0xFFFF, else the last 0x7FFF, else 0.
    #[must_use]
    pub fn sa_pkey_index(&self) -> u16 {
        if let Some(i) = self.pkeys.iter().position(|&p| p == 0xFFFF) {
            return i as u16;
        }
        self.pkeys
            .iter()
            .rposition(|&p| p == 0x7FFF)
            .map_or(0, |i| i as u16)
    }

    /// The index of exactly `pkey` in the table, or 0 (the reference's fallback).
    #[must_use]
    pub fn pkey_index(&self, pkey: u16) -> u16 {
        self.pkeys
            .iter()
            .position(|&p| p == pkey)
            .map_or(0, |i| i as u16)
    }

    /// The index of `gid` in the GID table.
    #[must_use]
    pub fn gid_index(&self, gid: &Gid) -> Option<u8> {
        self.gids.iter().position(|g| g == gid).map(|i| i as u8)
    }

    /// GID index 0, the port GID every join and loopback path uses.
    #[must_use]
    pub fn gid0(&self) -> Gid {
        self.gids.first().copied().unwrap_or(Gid::ZERO)
    }

    /// Whether the port can be used: active, and InfiniBand.
    #[must_use]
    pub fn usable(&self) -> bool {
        self.state == PortState::Active && self.link_layer_ib
    }
}

/// A device as discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDesc {
    /// The driver's id for it.
    pub id: DeviceId,
    /// The verbs device name, e.g. `mlx5_0`.
    pub name: String,
    /// The node GUID, as a number (it goes on the wire big-endian).
    pub guid: u64,
    /// The ports, numbered from 1; index `i` is port `i + 1`.
    pub ports: Vec<PortAttrs>,
}

/// The IB rate enum for a link's active width and speed codes (`ibv_port_attr`
/// `active_width` / `active_speed`, with `active_speed_ex` codes for HDR and later).
///
/// The reference only knows speeds up to EDR and widths 1x/4x/8x/12x and returns 0 for
/// anything else (docs/reference-quirks.md §16); this also knows 2x, HDR (64), NDR (128)
/// and XDR (256). Unknown codes still give [`Rate`] 0, which joins would carry as "rate
/// 0".
#[must_use]
pub fn rate_from_width_speed(width: u8, speed: u16) -> Rate {
    let lanes: u32 = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => return Rate(0),
    };
    // Per-lane data rate in Mb/s as the IB rate enums count it.
    let lane_mbps: u32 = match speed {
        1 => 2_500,
        2 => 5_000,
        4 | 8 => 10_000, // QDR, FDR10 (FDR10 4x is advertised as 40 Gb/s)
        16 => 14_000,
        32 => 25_000,
        64 => 50_000,
        128 => 100_000,
        256 => 200_000,
        _ => return Rate(0),
    };
    Rate::from_mbps(lanes * lane_mbps).unwrap_or(Rate(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn rates_of_common_links() {
        assert_eq!(rate_from_width_speed(2, 1), Rate::RATE_10); // 4x SDR
        assert_eq!(rate_from_width_speed(2, 4), Rate::RATE_40); // 4x QDR
        assert_eq!(rate_from_width_speed(2, 16), Rate::RATE_56); // 4x FDR
        assert_eq!(rate_from_width_speed(2, 32), Rate::RATE_100); // 4x EDR
        assert_eq!(rate_from_width_speed(2, 64), Rate::RATE_200); // 4x HDR
        assert_eq!(rate_from_width_speed(2, 128), Rate::RATE_400); // 4x NDR
        assert_eq!(rate_from_width_speed(1, 1), Rate::RATE_2_5);
        assert_eq!(rate_from_width_speed(8, 4), Rate::RATE_120);
        assert_eq!(rate_from_width_speed(3, 1), Rate(0));
    }

    #[test]
    fn port_derived_values() {
        let p = PortAttrs {
            lmc: 2,
            subnet_timeout: 18,
            pkeys: vec![0x7fff, 0x8001, 0x7fff],
            ..PortAttrs::default()
        };
        assert_eq!(p.lid_mask(), 0xfffc);
        assert_eq!(p.subnet_timeout_ms(), 1024);
        assert_eq!(p.sa_pkey_index(), 2);
        assert_eq!(p.pkey_index(0x8001), 1);
        assert_eq!(p.pkey_index(0x1234), 0);
        let q = PortAttrs {
            subnet_timeout: 7,
            pkeys: vec![0xffff],
            ..PortAttrs::default()
        };
        assert_eq!(q.subnet_timeout_ms(), 0);
        assert_eq!(q.sa_pkey_index(), 0);
    }
}
