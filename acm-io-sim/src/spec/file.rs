//! Reading and writing description files: TOML in, checked spec out, and back.

use super::{FabricSpec, SpecError};

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

    /// The spec as a description file that [`FabricSpec::parse`] reads back to an equal
    /// spec, so generated or edited fabrics can be saved and replayed.
    ///
    /// # Panics
    /// Never for the types here (every value has a TOML form).
    #[must_use]
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("every FabricSpec value has a TOML form")
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{DEMO, minimal};
    use super::super::*;
    use acm_proto::{Gid, Mtu, Rate};
    use std::net::{IpAddr, Ipv4Addr};

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
            s.port_gid(HostId(0), 0, 1),
            "fe80::2:c903:a0:b001".parse::<Gid>().unwrap()
        );
        assert_eq!(
            s.port_gid(HostId(2), 0, 1),
            "fe80::2:c903:a0:b003".parse::<Gid>().unwrap()
        );
        assert_eq!(s.host_index("node2"), Some(HostId(1)));
        assert_eq!(s.host_index("node9"), None);
        assert!(s.hosts[0].options.contains("route_prot sa"));
        assert_eq!(
            s.addr_file_text(HostId(1)),
            "node2 mlx5_0 1 default\n",
            "explicit file"
        );
        assert!(
            s.addr_file_text(HostId(2))
                .ends_with("\nnode3 mlx5_0 1 default\n")
        );
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let s = FabricSpec::parse(&minimal("")).unwrap();
        assert_eq!(s.sm, SmSpec::default());
        assert_eq!(s.link, LinkSpec::default());
        assert_eq!(s.hosts[0].hcas[0].ports[0], PortSpec::ib(1));
        assert_eq!(s.hosts[0].options, "");
        assert_eq!(s.hosts[0].addr_file, None);
        assert_eq!(s.port_guid(HostId(0), 0, 1), 0x101);
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
}
