//! The emulated host's sysfs tree: the parts ibacm reads (`class/infiniband/<dev>/...`
//! and `class/infiniband_mad/...`), written from the host's devices. The
//! `acm-fake-hca-sysfs` binary writes the whole tree before a daemon starts; the
//! library rewrites the parts a topology change touches while it runs, as the kernel's
//! sysfs would change, so that a daemon rescanning sysfs sees devices come and go.
//!
//! Kept free of FFI, like [`crate::layout`], so that both include it (`#[path]`).

use crate::layout;
use acm_engine::{DeviceDesc, PortAttrs, PortState};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The file the generator leaves at the tree's root: the library changes a tree only
/// when it finds it, so that a process pointed at a real `/sys` is never touched.
pub const MARKER: &str = ".acm-fake-hca";

/// Why the tree could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct TreeError {
    path: PathBuf,
    source: std::io::Error,
}

/// Writes the tree for `devices` under `root`, with its [`MARKER`].
pub fn write_tree(root: &Path, devices: &[DeviceDesc]) -> Result<(), TreeError> {
    put(&root.join(MARKER), "written by acm-fake-hca-sysfs")?;
    for i in 0..devices.len() {
        write_device(root, devices, i)?;
    }
    // No IPoIB interfaces: the emulated host's addresses come from its address file.
    let net = root.join("class/net");
    std::fs::create_dir_all(&net).map_err(|source| TreeError { path: net, source })?;
    put(&root.join("class/infiniband_mad/abi_version"), "5")
}

/// Whether `root` is a tree the generator wrote (the library changes no other).
#[must_use]
pub fn is_emulated(root: &Path) -> bool {
    root.join(MARKER).is_file()
}

/// The umad nodes of device `index`: their numbers count every port of the devices
/// before it, as [`layout::umad_ports`] does.
fn umad_nodes(devices: &[DeviceDesc], index: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
    layout::umad_ports(devices)
        .enumerate()
        .filter(move |(_, p)| p.device.0 as usize == index)
        .map(|(n, p)| (n, p.port))
}

/// Writes device `index` of `devices` (its directory and its umad nodes).
pub fn write_device(root: &Path, devices: &[DeviceDesc], index: usize) -> Result<(), TreeError> {
    let Some(d) = devices.get(index) else {
        return Ok(());
    };
    let dev = root.join("class/infiniband").join(&d.name);
    put(&dev.join("node_guid"), &guid(d.guid))?;
    put(&dev.join("node_type"), "1: CA")?;
    for (i, p) in d.ports.iter().enumerate() {
        write_port(&dev.join("ports").join((i + 1).to_string()), p)?;
    }
    let mad = root.join("class/infiniband_mad");
    for (n, port) in umad_nodes(devices, index) {
        let u = mad.join(format!("umad{n}"));
        put(&u.join("ibdev"), &d.name)?;
        put(&u.join("port"), &port.to_string())?;
    }
    Ok(())
}

/// Removes device `index` of `devices` from the tree, as sysfs drops an unplugged
/// HCA's directory and its umad nodes.
pub fn remove_device(root: &Path, devices: &[DeviceDesc], index: usize) -> Result<(), TreeError> {
    let Some(d) = devices.get(index) else {
        return Ok(());
    };
    let mut dirs = vec![root.join("class/infiniband").join(&d.name)];
    dirs.extend(
        umad_nodes(devices, index)
            .map(|(n, _)| root.join("class/infiniband_mad").join(format!("umad{n}"))),
    );
    for dir in dirs {
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(TreeError {
                    path: dir,
                    source: e,
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Rewrites port `port` (from 1) of device `d`.
pub fn rewrite_port(root: &Path, d: &DeviceDesc, port: u8) -> Result<(), TreeError> {
    let Some(p) = d.ports.get(usize::from(port).saturating_sub(1)) else {
        return Ok(());
    };
    let dir = root
        .join("class/infiniband")
        .join(&d.name)
        .join("ports")
        .join(port.to_string());
    // Tables may have shrunk: their old entries go.
    for table in ["gids", "pkeys"] {
        let _ = std::fs::remove_dir_all(dir.join(table));
    }
    write_port(&dir, p)
}

/// Writes one port's directory.
pub fn write_port(dir: &Path, p: &PortAttrs) -> Result<(), TreeError> {
    let active = p.state == PortState::Active;
    put(
        &dir.join("state"),
        if active { "4: ACTIVE" } else { "1: DOWN" },
    )?;
    put(
        &dir.join("link_layer"),
        if p.link_layer_ib {
            "InfiniBand"
        } else {
            "Ethernet"
        },
    )?;
    put(&dir.join("lid"), &format!("{:#x}", p.lid))?;
    put(&dir.join("lid_mask_count"), &p.lmc.to_string())?;
    put(&dir.join("sm_lid"), &format!("{:#x}", p.sm_lid))?;
    put(&dir.join("sm_sl"), &p.sm_sl.to_string())?;
    put(&dir.join("rate"), &rate_text(p))?;
    for (i, g) in p.gids.iter().enumerate() {
        let mut s = String::new();
        for (j, pair) in g.0.chunks(2).enumerate() {
            if j > 0 {
                s.push(':');
            }
            let _ = write!(s, "{:02x}{:02x}", pair[0], pair[1]);
        }
        put(&dir.join("gids").join(i.to_string()), &s)?;
    }
    for (i, k) in p.pkeys.iter().enumerate() {
        put(&dir.join("pkeys").join(i.to_string()), &format!("{k:#06x}"))?;
    }
    Ok(())
}

/// `"10 Gb/sec (4X SDR)"`, as the kernel prints the port's rate.
fn rate_text(p: &PortAttrs) -> String {
    let (width, speed) = layout::width_speed(p.rate);
    let lanes = match width {
        1 => "1X",
        2 => "4X",
        4 => "8X",
        8 => "12X",
        16 => "2X",
        _ => "?",
    };
    let name = match speed {
        1 => "SDR",
        2 => "DDR",
        4 => "QDR",
        8 => "FDR10",
        16 => "FDR",
        32 => "EDR",
        64 => "HDR",
        128 => "NDR",
        256 => "XDR",
        _ => "?",
    };
    let gbps = p.rate.mbps().map_or(0.0, |m| f64::from(m) / 1000.0);
    format!("{gbps} Gb/sec ({lanes} {name})")
}

/// A GUID as sysfs prints it: four groups of four hex digits.
fn guid(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xFFFF,
        (g >> 16) & 0xFFFF,
        g & 0xFFFF
    )
}

fn put(path: &Path, text: &str) -> Result<(), TreeError> {
    let io = |source| TreeError {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, format!("{text}\n")).map_err(io)
}
