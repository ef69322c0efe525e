//! The text of each sysfs attribute and what it means, as pure functions over `&str` so
//! that the formats are tested without a file system.
//!
//! Each format is a [`Value`]: the parser and the phrase an error message uses to say
//! what the kernel writes there. The parsers accept exactly what the kernel prints
//! (after the trailing newline is removed) and return `None` for anything else; none of
//! them panics, whatever the text.

use acm_proto::Gid;

use crate::port::{LinkLayer, PortState};

/// A sysfs value format: how to read it and how to describe it when the text is wrong.
pub(super) struct Value<T> {
    /// `None` when the text is not in this format.
    pub(super) parse: fn(&str) -> Option<T>,
    /// Completes "`"<text>"` is not …" in [`super::DiscoveryError::Malformed`].
    pub(super) expected: &'static str,
}

/// `node_guid`: four groups of four hex digits, `0002:c903:00a1:b2c0`.
pub(super) const GUID: Value<u64> = Value {
    parse: parse_guid,
    expected: "a GUID (such as \"0002:c903:00a1:b2c0\")",
};

/// `node_type`: `"1: CA"`.
pub(super) const NODE_TYPE: Value<u8> = Value {
    parse: parse_numbered,
    expected: "a node type (such as \"1: CA\")",
};

/// `ports/N/state`: `"4: ACTIVE"`.
pub(super) const PORT_STATE: Value<PortState> = Value {
    parse: |s| parse_numbered(s).map(PortState),
    expected: "a port state (such as \"4: ACTIVE\")",
};

/// `ports/N/lid` and `sm_lid`: `"0x1f"`.
pub(super) const LID: Value<u16> = Value {
    parse: parse_hex_u16,
    expected: "a LID in hexadecimal (such as \"0x1f\")",
};

/// `ports/N/lid_mask_count`: 0 to 7 (the LMC is a 3-bit field).
pub(super) const LMC: Value<u8> = Value {
    parse: |s| parse_decimal(s).filter(|&v| v <= 7),
    expected: "an LMC from 0 to 7",
};

/// `ports/N/sm_sl`: 0 to 15 (a service level is 4 bits).
pub(super) const SL: Value<u8> = Value {
    parse: |s| parse_decimal(s).filter(|&v| v <= 15),
    expected: "a service level from 0 to 15",
};

/// `ports/N/gids/I`: the full IPv6-style form the kernel prints,
/// `fe80:0000:0000:0000:0002:c903:00a1:b2c1`.
pub(super) const GID: Value<Gid> = Value {
    parse: |s| s.parse().ok(),
    expected: "a GID (such as \"fe80:0000:0000:0000:0002:c903:00a1:b2c1\")",
};

/// `ports/N/pkeys/I`: `"0xffff"`, membership bit included.
pub(super) const PKEY: Value<u16> = Value {
    parse: parse_hex_u16,
    expected: "a P_Key in hexadecimal (such as \"0xffff\")",
};

/// `ports/N/link_layer`: any text is a link layer; only the two the kernel names today
/// get their own variant.
pub(super) const LINK_LAYER: Value<LinkLayer> = Value {
    parse: |s| Some(parse_link_layer(s)),
    expected: "a link layer",
};

/// `ports/N/rate`: never malformed, unknown parts read as 0.
pub(super) const RATE: Value<(u8, u16)> = Value {
    parse: |s| Some(parse_rate(s)),
    expected: "a rate",
};

/// `infiniband_mad/abi_version` and the like: a plain decimal `u32`.
pub(super) const DECIMAL_U32: Value<u32> = Value {
    parse: parse_decimal,
    expected: "a decimal number",
};

/// `infiniband_mad/umadN/port` and port directory names: 0 to 255.
pub(super) const PORT_NUMBER: Value<u8> = Value {
    parse: parse_decimal,
    expected: "a port number from 0 to 255",
};

/// `infiniband_mad/umadN/ibdev`: a device name, which names a directory under
/// `class/infiniband`: non-empty, no slash, no leading dot (so never `.` or `..`).
pub(super) const DEVICE_NAME: Value<String> = Value {
    parse: |s| (!s.is_empty() && !s.contains('/') && !s.starts_with('.')).then(|| s.to_owned()),
    expected: "a device name",
};

/// A GUID as sysfs prints it: four colon-separated groups of up to four hex digits,
/// most significant first.
pub(super) fn parse_guid(s: &str) -> Option<u64> {
    let mut guid = 0u64;
    let mut groups = 0;
    for group in s.split(':') {
        if group.is_empty() || group.len() > 4 || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        guid = (guid << 16) | u64::from(u16::from_str_radix(group, 16).ok()?);
        groups += 1;
    }
    (groups == 4).then_some(guid)
}

/// `"<n>: <NAME>"` (or `"<n>"` alone, which the kernel prints for a number it has no
/// name for): the number. The name is the kernel's spelling of the same number and is
/// not checked.
pub(super) fn parse_numbered<T: core::str::FromStr>(s: &str) -> Option<T> {
    let number = s.split_once(':').map_or(s, |(n, _)| n);
    parse_decimal(number.trim_end())
}

/// Decimal digits only (no sign, no spaces inside), within `T`'s range.
pub(super) fn parse_decimal<T: core::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `0x` and one or more hex digits, within 16 bits: how the kernel prints LIDs and
/// P_Keys.
pub(super) fn parse_hex_u16(s: &str) -> Option<u16> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(digits, 16).ok()
}

/// The kernel's link-layer names. "InfiniBand" is the only one ibacm serves.
pub(super) fn parse_link_layer(s: &str) -> LinkLayer {
    match s {
        "InfiniBand" => LinkLayer::InfiniBand,
        "Ethernet" => LinkLayer::Ethernet,
        other => LinkLayer::Other(other.to_owned()),
    }
}

/// The `(active_width, active_speed)` codes of a `rate` text such as
/// `"100 Gb/sec (4X EDR)"`, coded as `ibv_port_attr` codes them (see
/// [`crate::port::PortInfo`]).
///
/// Only the parenthesised part is read: the leading figure is their product and adds
/// nothing. A width or speed this code does not know reads as 0 (unknown) rather than
/// failing discovery, because a newer kernel naming a newer speed must not stop the
/// daemon. Kernels before 3.x printed SDR links as `"10 Gb/sec (4X)"`, with no speed
/// name, so a known width without a speed means SDR.
pub(super) fn parse_rate(s: &str) -> (u8, u16) {
    let Some(inner) = s
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inner, _)| inner)
    else {
        return (0, 0);
    };
    let mut words = inner.split_whitespace();
    let width = match words.next() {
        Some("1X") => 1,
        Some("2X") => 16,
        Some("4X") => 2,
        Some("8X") => 4,
        Some("12X") => 8,
        _ => 0,
    };
    let speed = match words.next() {
        None if width != 0 => 1,
        Some("SDR") => 1,
        Some("DDR") => 2,
        Some("QDR") => 4,
        Some("FDR10") => 8,
        Some("FDR") => 16,
        Some("EDR") => 32,
        Some("HDR") => 64,
        Some("NDR") => 128,
        Some("XDR") => 256,
        _ => 0,
    };
    (width, speed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[test]
    fn guid() {
        assert_eq!(
            parse_guid("0002:c903:00a1:b2c0"),
            Some(0x0002_c903_00a1_b2c0)
        );
        assert_eq!(parse_guid("ffff:FFFF:0:1"), Some(0xffff_ffff_0000_0001));
        for bad in [
            "",
            "0002:c903:00a1",
            "0002:c903:00a1:b2c0:0000",
            "0002:c903:00a1:b2c0:",
            "00002:c903:00a1:b2c0",
            "0002:c903:00a1:+2c0",
            "0002:c903:00a1:b2g0",
            "0x0002c90300a1b2c0",
        ] {
            assert_eq!(parse_guid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn state_and_node_type() {
        assert_eq!((PORT_STATE.parse)("4: ACTIVE"), Some(PortState::ACTIVE));
        assert_eq!((PORT_STATE.parse)("1: DOWN"), Some(PortState::DOWN));
        assert_eq!((PORT_STATE.parse)("5: ACTIVE_DEFER"), Some(PortState(5)));
        // A number the kernel has no name for is printed bare.
        assert_eq!((PORT_STATE.parse)("9"), Some(PortState(9)));
        for bad in ["", "ACTIVE", ": ACTIVE", "-4: ACTIVE", "256: X", "4 ACTIVE"] {
            assert_eq!((PORT_STATE.parse)(bad), None, "{bad:?}");
        }
        assert_eq!((NODE_TYPE.parse)("1: CA"), Some(1));
        assert_eq!((NODE_TYPE.parse)("2: switch"), Some(2));
        assert_eq!((NODE_TYPE.parse)("CA"), None);
    }

    #[test]
    fn lids_and_pkeys() {
        assert_eq!((LID.parse)("0x1f"), Some(0x1f));
        assert_eq!((LID.parse)("0x0"), Some(0));
        assert_eq!((LID.parse)("0xbfff"), Some(0xbfff));
        assert_eq!((PKEY.parse)("0xffff"), Some(0xffff));
        assert_eq!((PKEY.parse)("0x8001"), Some(0x8001));
        assert_eq!((PKEY.parse)("0x0000"), Some(0));
        for bad in ["", "0x", "zzz", "1f", "0x10000", "0x+1", "0xfg", "-0x1"] {
            assert_eq!(parse_hex_u16(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn small_decimals() {
        assert_eq!((LMC.parse)("0"), Some(0));
        assert_eq!((LMC.parse)("7"), Some(7));
        assert_eq!((LMC.parse)("8"), None);
        assert_eq!((SL.parse)("15"), Some(15));
        assert_eq!((SL.parse)("16"), None);
        assert_eq!((SL.parse)("+1"), None);
        assert_eq!((PORT_NUMBER.parse)("255"), Some(255));
        assert_eq!((PORT_NUMBER.parse)("256"), None);
        assert_eq!((DECIMAL_U32.parse)("5"), Some(5));
        assert_eq!((DECIMAL_U32.parse)("0x5"), None);
    }

    #[test]
    fn gids() {
        let g = (GID.parse)("fe80:0000:0000:0000:0002:c903:00a1:b2c1").unwrap();
        assert_eq!(
            g,
            Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_00a1_b2c1)
        );
        let zero_iid = (GID.parse)("fe80:0000:0000:0000:0000:0000:0000:0000").unwrap();
        assert_eq!(zero_iid.interface_id(), 0);
        for bad in ["", "fe80:0000", "fe80:0000:0000:0000:0002:c903:00a1:b2cz"] {
            assert_eq!((GID.parse)(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn link_layers() {
        assert_eq!(parse_link_layer("InfiniBand"), LinkLayer::InfiniBand);
        assert_eq!(parse_link_layer("Ethernet"), LinkLayer::Ethernet);
        assert_eq!(
            parse_link_layer("Unknown"),
            LinkLayer::Other("Unknown".into())
        );
    }

    #[test]
    fn rates() {
        let cases: &[(&str, (u8, u16))] = &[
            ("2.5 Gb/sec (1X SDR)", (1, 1)),
            ("10 Gb/sec (4X SDR)", (2, 1)),
            ("20 Gb/sec (4X DDR)", (2, 2)),
            ("40 Gb/sec (4X QDR)", (2, 4)),
            ("40 Gb/sec (4X FDR10)", (2, 8)),
            ("56 Gb/sec (4X FDR)", (2, 16)),
            ("168 Gb/sec (12X FDR)", (8, 16)),
            ("100 Gb/sec (4X EDR)", (2, 32)),
            ("50 Gb/sec (2X HDR)", (16, 64)),
            ("400 Gb/sec (8X HDR)", (4, 64)),
            ("400 Gb/sec (4X NDR)", (2, 128)),
            ("800 Gb/sec (4X XDR)", (2, 256)),
            // Old kernels: SDR had no name.
            ("10 Gb/sec (4X)", (2, 1)),
            // Unknown parts read as 0.
            ("1600 Gb/sec (4X GDR)", (2, 0)),
            ("25 Gb/sec (3X EDR)", (0, 32)),
            ("-2 Gb/sec (-1X)", (0, 0)),
            ("", (0, 0)),
            ("100 Gb/sec", (0, 0)),
            ("(", (0, 0)),
        ];
        for &(text, codes) in cases {
            assert_eq!(parse_rate(text), codes, "{text:?}");
        }
    }

    #[test]
    fn device_names() {
        assert_eq!((DEVICE_NAME.parse)("mlx5_0"), Some("mlx5_0".to_owned()));
        assert_eq!((DEVICE_NAME.parse)(""), None);
        assert_eq!((DEVICE_NAME.parse)("../etc"), None);
        assert_eq!((DEVICE_NAME.parse)(".."), None);
        assert_eq!((DEVICE_NAME.parse)("a/b"), None);
    }

    quickcheck! {
        // Whatever a file holds, parsing it returns a value or None: it never panics.
        fn no_parser_panics(text: String) -> bool {
            let _ = (GUID.parse)(&text);
            let _ = (NODE_TYPE.parse)(&text);
            let _ = (PORT_STATE.parse)(&text);
            let _ = (LID.parse)(&text);
            let _ = (LMC.parse)(&text);
            let _ = (SL.parse)(&text);
            let _ = (GID.parse)(&text);
            let _ = (PKEY.parse)(&text);
            let _ = (DECIMAL_U32.parse)(&text);
            let _ = (PORT_NUMBER.parse)(&text);
            let _ = (DEVICE_NAME.parse)(&text);
            (LINK_LAYER.parse)(&text).is_some() && (RATE.parse)(&text).is_some()
        }

        // Every GUID the kernel could print reads back as itself.
        fn guid_round_trip(guid: u64) -> bool {
            let text = format!(
                "{:04x}:{:04x}:{:04x}:{:04x}",
                guid >> 48,
                (guid >> 32) & 0xffff,
                (guid >> 16) & 0xffff,
                guid & 0xffff
            );
            parse_guid(&text) == Some(guid)
        }
    }
}
