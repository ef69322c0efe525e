//! The checks a description must pass: unique names, LIDs, GUIDs and addresses, values
//! in range, and IP addresses on ports and partitions that exist. The simulator relies
//! on them instead of checking again.

use super::{FabricSpec, LinkLayer, PortSpec, SpecError};
use acm_proto::MULTICAST_LID_BASE;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

impl FabricSpec {
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
    if end > u32::from(MULTICAST_LID_BASE) {
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{DEMO, minimal, one_port};
    use super::super::*;

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
            s.addr_file_text(HostId(0))
                .lines()
                .skip(2)
                .collect::<Vec<_>>(),
            ["a mlx5_0 1 default", "a-mlx5_0-2 mlx5_0 2 default"]
        );
    }
}
