//! `<device>/ports/<n>/`: one port's attributes, filled into [`PortInfo`].

use std::io;
use std::path::Path;

use acm_proto::Gid;

use super::attr::{read_optional, read_required};
use super::error::DiscoveryError;
use super::umad_class::UmadDev;
use super::values::{GID, LID, LINK_LAYER, LMC, PKEY, PORT_STATE, RATE, SL};
use crate::port::{LinkLayer, PortInfo};

/// One port as sysfs describes it, with the user MAD device that reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsPort {
    /// The port's attributes. `active_mtu` and `subnet_timeout` are `None`: sysfs does
    /// not publish them (a verbs query or the SA gives them).
    pub info: PortInfo,
    /// `class/infiniband_mad/umad<N>` naming this device and port, if any. An
    /// InfiniBand port without one cannot send SA queries; whether that is fatal is the
    /// caller's choice.
    pub umad: Option<UmadDev>,
}

/// The attributes of the port whose directory is `dir`.
///
/// Read in the order the daemon cares about them, so that a broken file is reported
/// before files that depend on it would be.
pub(super) fn read_port_dir(dir: &Path, number: u8) -> Result<PortInfo, DiscoveryError> {
    let state = read_required(&dir.join("state"), &PORT_STATE)?;
    // Kernels before 2.6.37 have no link_layer file: every port was InfiniBand then.
    let link_layer =
        read_optional(&dir.join("link_layer"), &LINK_LAYER)?.unwrap_or(LinkLayer::InfiniBand);
    let lid = read_required(&dir.join("lid"), &LID)?;
    let lmc = read_required(&dir.join("lid_mask_count"), &LMC)?;
    let sm_lid = read_required(&dir.join("sm_lid"), &LID)?;
    let sm_sl = read_required(&dir.join("sm_sl"), &SL)?;
    let (active_width, active_speed) = read_rate(&dir.join("rate"))?;
    let gids = read_gids(&dir.join("gids"))?;
    let pkeys = read_pkeys(&dir.join("pkeys"))?;
    Ok(PortInfo {
        number,
        state,
        link_layer,
        lid,
        lmc,
        sm_lid,
        sm_sl,
        active_width,
        active_speed,
        active_mtu: None,
        subnet_timeout: None,
        gids,
        pkeys,
    })
}

/// The width and speed codes of `rate`, (0, 0) when unknown.
///
/// The kernel refuses to read `rate` (EINVAL) when the driver reports a width it cannot
/// name, which some drivers do for ports whose link is down. The rate is informational
/// to ibacm (it asks the SA for path rates), so that and a missing file mean "unknown"
/// rather than a failed discovery.
fn read_rate(path: &Path) -> Result<(u8, u16), DiscoveryError> {
    match read_optional(path, &RATE) {
        Ok(rate) => Ok(rate.unwrap_or((0, 0))),
        Err(DiscoveryError::Io { source, .. }) if source.kind() == io::ErrorKind::InvalidInput => {
            Ok((0, 0))
        }
        Err(e) => Err(e),
    }
}

/// `gids/0`, `gids/1`, … up to the first missing file or the first entry whose
/// interface id is zero: the kernel prints unused and invalid entries as zero GIDs, and
/// a port GID always carries the port GUID in its low half.
fn read_gids(dir: &Path) -> Result<Vec<Gid>, DiscoveryError> {
    let mut gids = Vec::new();
    for index in 0..=u16::MAX {
        match read_optional(&dir.join(index.to_string()), &GID)? {
            Some(gid) if gid.interface_id() != 0 => gids.push(gid),
            _ => break,
        }
    }
    Ok(gids)
}

/// `pkeys/0`, `pkeys/1`, … up to the first missing file, every entry kept (zeros
/// included) because a P_Key's table index is what address vectors and QPs name. A
/// port with no P_Key table (iWARP) has no `pkeys` directory: an empty table.
fn read_pkeys(dir: &Path) -> Result<Vec<u16>, DiscoveryError> {
    let mut pkeys = Vec::new();
    for index in 0..=u16::MAX {
        match read_optional(&dir.join(index.to_string()), &PKEY)? {
            Some(pkey) => pkeys.push(pkey),
            None => break,
        }
    }
    Ok(pkeys)
}
