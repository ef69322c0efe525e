//! The host's IPoIB interfaces, read from sysfs (docs/daemon.md §6): which network
//! interfaces sit on an InfiniBand port, with that port's GID and the interface's pkey.
//! This is how an IP address is tied to an endpoint.
//!
//! Everything comes from `<root>/class/net/<if>/`:
//! - `type`: the ARPHRD type; only 32 (ARPHRD_INFINIBAND) is IPoIB;
//! - `address`: the 20-byte IPoIB hardware address (flags, QPN, then the port GID),
//!   colon-separated hex; the GID is bytes 4..20;
//! - `pkey`: hex (`0x8001`), as the kernel shows it, membership bit included;
//! - `ifindex`: decimal.
//!
//! The root is a parameter so that tests (and containers) can point at a copy.

use acm_proto::Gid;
use acm_proto::ipoib::{IPOIB_HW_ADDR_LEN, IpoibHwAddrPacket};
use std::fs;
use std::io;
use std::path::Path;

/// `ARPHRD_INFINIBAND`: the link type of IPoIB interfaces.
pub(crate) const ARPHRD_INFINIBAND: u16 = 32;

/// An IPoIB interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpoibLink {
    /// Its name (`ib0`, `ib0.8001`).
    pub name: String,
    /// Its interface index (what netlink messages name).
    pub ifindex: u32,
    /// The GID of the port it runs on.
    pub gid: Gid,
    /// Its pkey as sysfs shows it (the reference compares it with the membership bit
    /// forced on at start-up, and ignoring it at run time; the engine decides).
    pub pkey: u16,
}

/// Every IPoIB interface under `root`, by ifindex. Interfaces of other types are
/// left out, and so are IPoIB interfaces whose files are missing or malformed (one
/// going away during the walk, say); [`link`] tells why for a given name.
///
/// # Errors
/// `<root>/class/net` cannot be listed.
pub(crate) fn links(root: &Path) -> io::Result<Vec<IpoibLink>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root.join("class/net"))? {
        let Ok(entry) = entry else { continue };
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if let Ok(Some(l)) = link(root, &name) {
            out.push(l);
        }
    }
    out.sort_by_key(|l| l.ifindex);
    Ok(out)
}

/// The IPoIB interface with index `ifindex` (what an RTM_NEWADDR names), or `None`
/// when there is no such interface or it is not IPoIB.
///
/// # Errors
/// `<root>/class/net` cannot be listed, or the interface is IPoIB but its files are
/// malformed.
pub(crate) fn link_by_index(root: &Path, ifindex: u32) -> io::Result<Option<IpoibLink>> {
    for entry in fs::read_dir(root.join("class/net"))? {
        let Ok(entry) = entry else { continue };
        let index = read_trimmed(&entry.path().join("ifindex"))
            .ok()
            .and_then(|s| s.parse::<u32>().ok());
        if index != Some(ifindex) {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Ok(None);
        };
        return link(root, &name);
    }
    Ok(None)
}

/// Interface `name`: `Some` if it is IPoIB, `None` if it is another type.
///
/// # Errors
/// A file is missing or unreadable (`NotFound` when the interface does not exist), or
/// holds something unexpected (`InvalidData`, naming the interface and the file).
pub(crate) fn link(root: &Path, name: &str) -> io::Result<Option<IpoibLink>> {
    let dir = root.join("class/net").join(name);
    let ty: u16 = parse_file(&dir, name, "type", |s| s.parse().ok())?;
    if ty != ARPHRD_INFINIBAND {
        return Ok(None);
    }
    Ok(Some(IpoibLink {
        name: name.to_owned(),
        ifindex: parse_file(&dir, name, "ifindex", |s| s.parse().ok())?,
        gid: parse_file(&dir, name, "address", parse_hw_address)?,
        pkey: parse_file(&dir, name, "pkey", parse_pkey)?,
    }))
}

/// The port GID in an IPoIB hardware address (`80:00:02:08:fe:80:…`, 20 bytes).
#[must_use]
pub(crate) fn parse_hw_address(s: &str) -> Option<Gid> {
    let mut bytes = [0u8; IPOIB_HW_ADDR_LEN];
    let mut parts = s.split(':');
    for b in &mut bytes {
        let p = parts.next()?;
        // Exactly two hex digits (from_str_radix alone would take "+e").
        if p.len() != 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(IpoibHwAddrPacket::new_unchecked(&bytes).gid())
}

/// A sysfs pkey: hex, with or without `0x` (the reference's `strtol(…, 16)`).
#[must_use]
pub(crate) fn parse_pkey(s: &str) -> Option<u16> {
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u16::from_str_radix(hex, 16).ok()
}

fn parse_file<T>(
    dir: &Path,
    name: &str,
    file: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> io::Result<T> {
    let text = read_trimmed(&dir.join(file))?;
    parse(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name}: unexpected {file} {text:?}"),
        )
    })
}

fn read_trimmed(path: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(path)?.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-ipoib")
    }

    /// The port GID of ib0 and ib0.8001 in the fixture.
    fn port_gid() -> Gid {
        Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_000a_bcde)
    }

    #[test]
    fn fixture_links_are_the_ipoib_ones_by_index() {
        let l = links(&fixture()).unwrap();
        assert_eq!(
            l,
            [
                IpoibLink {
                    name: "ib0".into(),
                    ifindex: 3,
                    gid: port_gid(),
                    pkey: 0xffff
                },
                IpoibLink {
                    name: "ib0.8001".into(),
                    ifindex: 5,
                    gid: port_gid(),
                    pkey: 0x8001
                },
            ],
            "eth0 (type 1) and ib1 (malformed address) are left out"
        );
    }

    #[test]
    fn link_tells_other_types_from_malformed_and_missing() {
        let root = fixture();
        assert_eq!(link(&root, "eth0").unwrap(), None);
        let e = link(&root, "ib1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().starts_with("ib1: unexpected address"), "{e}");
        let e = link(&root, "ib9").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn link_by_index_finds_ipoib_only() {
        let root = fixture();
        assert_eq!(link_by_index(&root, 5).unwrap().unwrap().name, "ib0.8001");
        assert_eq!(link_by_index(&root, 3).unwrap().unwrap().pkey, 0xffff);
        assert_eq!(link_by_index(&root, 2).unwrap(), None, "eth0");
        assert_eq!(link_by_index(&root, 99).unwrap(), None);
        assert!(link_by_index(&root, 4).is_err(), "ib1 is malformed");
    }

    #[test]
    fn missing_root_is_an_error() {
        let root = fixture().join("no-such-dir");
        assert_eq!(links(&root).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(link_by_index(&root, 3).is_err());
    }

    #[test]
    fn hardware_address_parsing() {
        let g = parse_hw_address("80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:de");
        assert_eq!(g, Some(port_gid()));
        let upper = parse_hw_address("80:00:02:08:FE:80:00:00:00:00:00:00:00:02:C9:03:00:0A:BC:DE");
        assert_eq!(upper, Some(port_gid()));
        for bad in [
            "",
            "52:54:00:12:34:56",
            "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc",
            "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:de:00",
            "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:d",
            "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:dg",
            "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:+e",
        ] {
            assert_eq!(parse_hw_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn pkey_parsing() {
        assert_eq!(parse_pkey("0xffff"), Some(0xffff));
        assert_eq!(parse_pkey("0x8001"), Some(0x8001));
        assert_eq!(parse_pkey("0X7fff"), Some(0x7fff));
        assert_eq!(parse_pkey("8001"), Some(0x8001));
        assert_eq!(parse_pkey("0x10000"), None);
        assert_eq!(parse_pkey("ffff0"), None);
        assert_eq!(parse_pkey("zz"), None);
        assert_eq!(parse_pkey(""), None);
    }
}
