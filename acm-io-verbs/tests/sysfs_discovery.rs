//! Discovery over the fixture trees in `testdata/sysfs/` (described in its README):
//! exact results for the good trees, exact messages for the bad ones.

use std::path::{Path, PathBuf};

use acm_io_verbs::sysfs::{
    self, DEFAULT_DEV_ROOT, Discovery, DiscoveryError, IbDevice, NodeType, SkippedPort, SysfsPort,
    UmadDev,
};
use acm_io_verbs::{LinkLayer, PortInfo, PortState};
use acm_proto::Gid;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/sysfs");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

fn discover(name: &str) -> Discovery {
    let root = fixture(name);
    match sysfs::discover(&root) {
        Ok(d) => d,
        Err(e) => panic!("discovering {}: {e}", root.display()),
    }
}

fn discover_err(name: &str) -> DiscoveryError {
    match sysfs::discover(&fixture(name)) {
        Ok(d) => panic!("{name}: expected an error, got {d:?}"),
        Err(e) => e,
    }
}

fn gid(text: &str) -> Gid {
    text.parse().unwrap()
}

fn umad(index: u32) -> Option<UmadDev> {
    Some(UmadDev { index })
}

/// An ACTIVE InfiniBand port with the fields most fixtures share.
fn active_ib(number: u8, lid: u16, gids: &[&str], pkeys: &[u16]) -> PortInfo {
    PortInfo {
        number,
        state: PortState::ACTIVE,
        link_layer: LinkLayer::InfiniBand,
        lid,
        lmc: 0,
        sm_lid: 1,
        sm_sl: 0,
        active_width: 2,
        active_speed: 32,
        active_mtu: None,
        subnet_timeout: None,
        gids: gids.iter().map(|g| gid(g)).collect(),
        pkeys: pkeys.to_vec(),
    }
}

fn names<'a>(devices: impl IntoIterator<Item = &'a IbDevice>) -> Vec<&'a str> {
    devices.into_iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn one_hca_two_ports() {
    let d = discover("one-hca-two-ports");
    let port1 = PortInfo {
        lmc: 2,
        ..active_ib(
            1,
            0x1f,
            &["fe80::2:c903:a1:b2c1", "fec0:0:0:1:2:c903:a1:b2c1"],
            &[0xffff, 0x8001, 0x7fff, 0x0000, 0x0000],
        )
    };
    let port2 = PortInfo {
        number: 2,
        state: PortState::DOWN,
        link_layer: LinkLayer::InfiniBand,
        lid: 0,
        lmc: 0,
        sm_lid: 0,
        sm_sl: 0,
        active_width: 2,
        active_speed: 1,
        active_mtu: None,
        subnet_timeout: None,
        gids: vec![gid("fe80::2:c903:a1:b2c2")],
        pkeys: vec![0xffff, 0x0000],
    };
    let expected = Discovery {
        root: fixture("one-hca-two-ports"),
        infiniband_class: true,
        devices: vec![IbDevice {
            name: "mlx5_0".into(),
            node_guid: 0x0002_c903_00a1_b2c0,
            node_type: NodeType::CA,
            ports: vec![
                SysfsPort {
                    info: port1,
                    umad: umad(0),
                },
                SysfsPort {
                    info: port2,
                    umad: umad(1),
                },
            ],
        }],
        umad_class: true,
        umad_abi_version: Some(5),
    };
    assert_eq!(d, expected);

    let dev = &d.devices[0];
    assert!(dev.port(1).unwrap().info.usable());
    assert!(!dev.port(2).unwrap().info.usable());
    assert_eq!(dev.port(3), None);
    // The port GID carries the port GUID.
    assert_eq!(
        dev.port(1).unwrap().info.gids[0].interface_id(),
        0x0002_c903_00a1_b2c1
    );
    assert_eq!(names(d.require_infiniband().unwrap()), ["mlx5_0"]);
    d.require_umad().unwrap();
}

#[test]
fn read_port_re_reads_one_port() {
    let root = fixture("one-hca-two-ports");
    let d = discover("one-hca-two-ports");
    for number in [1, 2] {
        assert_eq!(
            sysfs::read_port(&root, "mlx5_0", number).unwrap(),
            d.devices[0].port(number).unwrap().info
        );
    }
    let missing = sysfs::read_port(&root, "mlx5_0", 3).unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!(
            "cannot read {}: the file does not exist",
            root.join("class/infiniband/mlx5_0/ports/3/state").display()
        )
    );
    let escape = sysfs::read_port(&root, "..", 1).unwrap_err();
    assert!(
        matches!(&escape, DiscoveryError::Malformed { text, .. } if text == ".."),
        "{escape:?}"
    );
}

#[test]
fn umad_device_paths() {
    let d = discover("one-hca-two-ports");
    let dev = d.devices[0].port(2).unwrap().umad.unwrap();
    assert_eq!(dev.name(), "umad1");
    assert_eq!(
        dev.dev_path(Path::new(DEFAULT_DEV_ROOT)),
        Path::new("/dev/infiniband/umad1")
    );
    assert_eq!(
        dev.dev_path(Path::new("/tmp/dev")),
        Path::new("/tmp/dev/umad1")
    );
}

#[test]
fn roce_device_is_listed_but_not_served() {
    let d = discover("roce-and-ib");
    assert_eq!(names(&d.devices), ["mlx5_0", "mlx5_1"]);
    assert_eq!(names(d.infiniband_devices()), ["mlx5_0"]);
    assert_eq!(names(d.require_infiniband().unwrap()), ["mlx5_0"]);

    let ib = d.device("mlx5_0").unwrap();
    assert_eq!(ib.node_guid, 0x0c42_a103_0065_3a10);
    assert_eq!(
        ib.ports,
        [SysfsPort {
            info: PortInfo {
                active_speed: 64,
                ..active_ib(1, 7, &["fe80::c42:a103:65:3a10"], &[0xffff, 0])
            },
            umad: umad(0),
        }]
    );

    let roce = d.device("mlx5_1").unwrap();
    assert!(!roce.has_infiniband_port());
    assert_eq!(
        roce.ports,
        [SysfsPort {
            info: PortInfo {
                number: 1,
                state: PortState::ACTIVE,
                link_layer: LinkLayer::Ethernet,
                lid: 0,
                lmc: 0,
                sm_lid: 0,
                sm_sl: 0,
                active_width: 1,
                active_speed: 32,
                active_mtu: None,
                subnet_timeout: None,
                gids: vec![
                    gid("fe80::e42:a1ff:fe65:3a20"),
                    gid("fe80::e42:a1ff:fe65:3a20"),
                    gid("::ffff:10.0.0.5"),
                    gid("::ffff:10.0.0.5"),
                ],
                pkeys: vec![0xffff],
            },
            umad: umad(1),
        }]
    );
}

#[test]
fn roce_only_host_has_no_infiniband_devices() {
    let d = discover("roce-only");
    assert_eq!(names(&d.devices), ["mlx5_0"]);
    assert_eq!(d.infiniband_devices().count(), 0);
    let err = d.require_infiniband().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no InfiniBand devices under {}: only Ethernet (RoCE) ports were found (mlx5_0 port 1)",
            fixture("roce-only/class/infiniband").display()
        )
    );
    match err {
        DiscoveryError::NoInfinibandDevices { path, skipped } => {
            assert_eq!(path, fixture("roce-only").join("class/infiniband"));
            assert_eq!(
                skipped,
                [SkippedPort {
                    device: "mlx5_0".into(),
                    port: 1,
                    link_layer: LinkLayer::Ethernet,
                }]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_umad_class() {
    let d = discover("no-umad");
    assert!(!d.umad_class);
    assert_eq!(d.umad_abi_version, None);
    assert_eq!(names(d.require_infiniband().unwrap()), ["mlx5_0"]);
    assert_eq!(d.devices[0].ports.len(), 1);
    assert_eq!(d.devices[0].ports[0].umad, None);
    let err = d.require_umad().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no user MAD devices: {} does not exist (is the ib_umad module loaded?)",
            fixture("no-umad/class/infiniband_mad").display()
        )
    );
    assert!(
        matches!(&err, DiscoveryError::NoUmadClass { path } if *path == fixture("no-umad/class/infiniband_mad"))
    );
}

#[test]
fn empty_class_directory() {
    let d = discover("empty");
    assert!(d.infiniband_class);
    assert_eq!(d.devices, []);
    assert_eq!(d.umad_abi_version, Some(5));
    let err = d.require_infiniband().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "no InfiniBand devices under {}",
            fixture("empty/class/infiniband").display()
        )
    );
    assert!(
        matches!(&err, DiscoveryError::NoInfinibandDevices { skipped, .. } if skipped.is_empty())
    );
}

#[test]
fn missing_class_directory() {
    for tree in ["no-class", "no-such-tree"] {
        let d = discover(tree);
        assert!(!d.infiniband_class, "{tree}");
        assert!(!d.umad_class, "{tree}");
        assert_eq!(d.devices, [], "{tree}");
        let err = d.require_infiniband().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "no InfiniBand devices: {} does not exist (is the ib_core module loaded?)",
                fixture(tree).join("class/infiniband").display()
            )
        );
        assert!(matches!(err, DiscoveryError::NoInfinibandClass { .. }));
        assert!(matches!(
            d.require_umad(),
            Err(DiscoveryError::NoUmadClass { .. })
        ));
    }
}

#[test]
fn natural_order_old_kernels_and_unknown_values() {
    let d = discover("natural-order");
    assert_eq!(names(&d.devices), ["mlx4_0", "mlx5_2", "mlx5_10"]);
    assert_eq!(
        names(d.infiniband_devices()),
        ["mlx4_0", "mlx5_2", "mlx5_10"]
    );

    let mlx4 = d.device("mlx4_0").unwrap();
    let old_port = |number, state, lid, rate: (u8, u16), pkeys: &[u16], umad| SysfsPort {
        info: PortInfo {
            number,
            state,
            // No link_layer file: InfiniBand.
            link_layer: LinkLayer::InfiniBand,
            lid,
            lmc: 0,
            sm_lid: 1,
            sm_sl: 3,
            active_width: rate.0,
            active_speed: rate.1,
            active_mtu: None,
            subnet_timeout: None,
            gids: vec![Gid::from_parts(
                0xfe80_0000_0000_0000,
                0x0002_c903_0010_2e40 + u64::from(number),
            )],
            pkeys: pkeys.to_vec(),
        },
        umad,
    };
    assert_eq!(
        mlx4.ports,
        [
            // "10 Gb/sec (4X)": SDR before it had a name; no pkeys directory.
            old_port(1, PortState::INIT, 3, (2, 1), &[], umad(0)),
            // No rate file: unknown.
            old_port(2, PortState::ACTIVE, 4, (0, 0), &[0xffff], umad(1)),
        ]
    );

    let mlx5_2 = d.device("mlx5_2").unwrap();
    assert_eq!(
        mlx5_2.ports[0].info,
        PortInfo {
            active_speed: 128,
            ..active_ib(1, 2, &["fe80::b859:9f03:d1:a02"], &[0xffff])
        }
    );
    assert_eq!(mlx5_2.ports[0].umad, umad(2));

    let mlx5_10 = d.device("mlx5_10").unwrap();
    // "4X GDR": the width is known, the speed is not.
    assert_eq!(
        mlx5_10.ports[0].info,
        PortInfo {
            active_speed: 0,
            ..active_ib(1, 0x10, &["fe80::b859:9f03:d1:a10"], &[0xffff])
        }
    );
    assert_eq!(mlx5_10.ports[0].umad, None);
}

#[test]
fn malformed_values_name_the_file_and_the_text() {
    let cases = [
        (
            "bad-lid",
            "class/infiniband/mlx5_0/ports/1/lid",
            "\"zzz\" is not a LID in hexadecimal (such as \"0x1f\")",
        ),
        (
            "bad-node-guid",
            "class/infiniband/mlx5_0/node_guid",
            "\"0002:c903:00a1\" is not a GUID (such as \"0002:c903:00a1:b2c0\")",
        ),
        (
            "bad-gid",
            "class/infiniband/mlx5_0/ports/1/gids/0",
            "\"fe80:0000:0000:0000:0002:c903:00a1:b2cz\" is not a GID \
             (such as \"fe80:0000:0000:0000:0002:c903:00a1:b2c1\")",
        ),
        (
            "bad-pkey",
            "class/infiniband/mlx5_0/ports/1/pkeys/0",
            "\"0x1ffff\" is not a P_Key in hexadecimal (such as \"0xffff\")",
        ),
        (
            "bad-state",
            "class/infiniband/mlx5_0/ports/1/state",
            "\"ACTIVE\" is not a port state (such as \"4: ACTIVE\")",
        ),
        (
            "bad-umad-port",
            "class/infiniband_mad/umad0/port",
            "\"one\" is not a port number from 0 to 255",
        ),
    ];
    for (tree, file, tail) in cases {
        let err = discover_err(tree);
        let path = fixture(tree).join(file);
        assert_eq!(
            err.to_string(),
            format!("{}: {tail}", path.display()),
            "{tree}"
        );
        assert!(
            matches!(&err, DiscoveryError::Malformed { path: p, .. } if *p == path),
            "{tree}: {err:?}"
        );
    }
}

#[test]
fn missing_required_file_is_named() {
    let err = discover_err("missing-sm-lid");
    let path = fixture("missing-sm-lid/class/infiniband/mlx5_0/ports/1/sm_lid");
    assert_eq!(
        err.to_string(),
        format!("cannot read {}: the file does not exist", path.display())
    );
    match err {
        DiscoveryError::Io { path: p, source } => {
            assert_eq!(p, path);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
}
