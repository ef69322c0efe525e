//! The text helpers behind `acm_format_name` and `acm_if_get_sgid`: an address printed
//! the reference's way, and an IPoIB interface's GID read from sysfs.

use acm_proto::Bytes64;
use acm_proto::client::{AddrType, EpAddress};
use acm_proto::ipoib::{IPOIB_HW_ADDR_LEN, IpoibHwAddrPacket};
use acm_proto::path_record::PathRecordPacket;
use std::net::Ipv6Addr;

/// How `acm_format_name` prints an address of type `ty` (NAME is copied as-is by the
/// caller): dotted IPv4, IPv6/GID text, `SLID(a) DLID(b)` for a path with a DLID (its
/// DGID otherwise), `LID(n)`, else `Unknown`.
pub(crate) fn address(ty: AddrType, a: &[u8]) -> String {
    let unknown = || String::from("Unknown");
    // IPv4, LID and PATH addresses shorter than their encoding name nothing; a shorter
    // IPv6 address or GID is read zero-padded.
    if matches!(ty, AddrType::IP | AddrType::LID | AddrType::PATH) && a.len() < ty.info_len() {
        return unknown();
    }
    if ty == AddrType::PATH {
        let p = PathRecordPacket::new_unchecked(a);
        return if p.dlid() != 0 {
            format!("SLID({}) DLID({})", p.slid(), p.dlid())
        } else {
            Ipv6Addr::from(p.dgid().0).to_string()
        };
    }
    match EpAddress::read(ty, &Bytes64::zero_padded(a)) {
        EpAddress::Ipv4(v4) => v4.to_string(),
        EpAddress::Ipv6(v6) => v6.to_string(),
        EpAddress::Gid(gid) => Ipv6Addr::from(gid.0).to_string(),
        EpAddress::Lid(lid) => format!("LID({lid})"),
        EpAddress::Name(_) | EpAddress::Path(_) | EpAddress::Other => unknown(),
    }
}

/// The GID of IPoIB interface `ifname`: bytes 4..20 of the hardware address in
/// `/sys/class/net/<ifname>/address` (`aa:bb:...`, 20 bytes for IPoIB).
pub(crate) fn interface_gid(ifname: &str) -> Result<[u8; 16], String> {
    if ifname.is_empty() || ifname.contains('/') {
        return Err(format!("bad interface name '{ifname}'"));
    }
    let path = format!("/sys/class/net/{ifname}/address");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("failed to open {path}: {e}"))?;
    parse_hw_gid(&text).ok_or_else(|| format!("failed to read sgid from {path}"))
}

/// The last 16 bytes of a 20-byte colon-separated hardware address.
fn parse_hw_gid(text: &str) -> Option<[u8; 16]> {
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).ok())
        .collect::<Option<_>>()?;
    if bytes.len() != IPOIB_HW_ADDR_LEN {
        return None;
    }
    Some(IpoibHwAddrPacket::new_unchecked(&bytes[..]).gid().0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_print_as_the_reference_does() {
        assert_eq!(address(AddrType::IP, &[10, 0, 0, 1]), "10.0.0.1");
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[15] = 1;
        assert_eq!(address(AddrType::GID, &g), "fe80::1");
        assert_eq!(address(AddrType::LID, &[0, 7]), "LID(7)");
        let mut path = [0u8; 64];
        let mut p = PathRecordPacket::new_unchecked(&mut path[..]);
        p.set_dlid(3);
        p.set_slid(9);
        assert_eq!(address(AddrType::PATH, &path), "SLID(9) DLID(3)");
        assert_eq!(address(AddrType(0x99), &[]), "Unknown");
    }

    #[test]
    fn an_ipoib_hardware_address_holds_the_gid() {
        let text = "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:0b:0c\n";
        let gid = parse_hw_gid(text).unwrap();
        assert_eq!(gid[0], 0xfe);
        assert_eq!(gid[15], 0x0c);
        assert_eq!(parse_hw_gid("00:11:22:33:44:55"), None);
    }
}
