//! The fabric changing under hardware-backend daemons (`verbs`, no `--fabric`) on the
//! emulated HCA: the hub's topology changes (`acm_io_sim::hub::control`) reach each
//! daemon as its HCA's async events and new query results, and the daemons do what
//! the simulator's fault scenarios (acm-io-sim/tests/scenarios_faults.rs) show the
//! engine doing: ports go down and rejoin when they come back, reregistration and an
//! SM failover rejoin, LID, GID and pkey changes are served with the new values and
//! leave no stale route, and devices that die, leave, come back or appear after
//! start are closed and opened whole.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
}

use acm_io_sim::hub::wire::{Control, PortName};
use std::process::Command;
use support::daemon::{DEADLINE, TempDir, ib_acme, run_bounded};
use support::fake_hca::{EmulatedHost, JOINED, RunningHub, change, demo, write_sysfs};

/// The GID of host `n` of the demo fabric.
fn gid(n: u16) -> String {
    format!("fe80::2:c903:a0:b00{n}")
}

/// Node `n`'s address file: its name and a name on partition 0x8001, which the
/// port lacks until a pkey change gives it.
fn addr_file(n: u16) -> String {
    format!("node{n} mlx5_0 1 default\nnode{n}-p1 mlx5_0 1 0x8001\n")
}

const OPTIONS: &str = "log_level 2\naddr_prot acm\nroute_prot sa\ntimeout 500\nretries 2\n";

fn start(dir: &TempDir, hub: &RunningHub, n: u16) -> EmulatedHost {
    let name = format!("node{n}");
    EmulatedHost::config(&dir.subdir(&name), hub, &name, OPTIONS, addr_file(n)).start()
}

/// `ib_acme -S socket args…`: its output and exit status.
fn acme(host: &EmulatedHost, args: &[&str]) -> (String, i32) {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(host.socket()).args(args);
    let out = run_bounded(cmd, DEADLINE);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (text, out.status.code().unwrap_or(-1))
}

/// The value of `key:` in ib_acme's path information.
fn field(out: &str, key: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

/// Resolves `args` on `host`, which must succeed; the path's `dgid`.
fn resolves(host: &EmulatedHost, args: &[&str]) -> String {
    let (out, status) = acme(host, args);
    assert_eq!(status, 0, "{args:?}:\n{out}\nlog:\n{}", host.log());
    field(&out, "dgid").unwrap_or_else(|| panic!("{args:?}: no dgid:\n{out}"))
}

/// Resolving `args` on `host` must fail.
fn fails(host: &EmulatedHost, args: &[&str]) {
    let (out, status) = acme(host, args);
    assert_ne!(status, 0, "{args:?} resolved:\n{out}\nlog:\n{}", host.log());
}

fn port(n: u16) -> PortName {
    PortName {
        host: format!("node{n}"),
        hca: 0,
        port: 1,
    }
}

/// Port down and up, reregistration, an SM failover, LID, GID and pkey changes, each
/// with what the engine does about it on the simulator; and a QP that breaks.
#[test]
fn port_changes_reach_hardware_daemons_as_their_hca_reports_them() {
    let dir = TempDir::new("hw-port-changes");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let n2 = start(&dir, &hub, 2);
    let n3 = start(&dir, &hub, 3);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "3"]), gid(3));

    // Down: the endpoint goes and nothing new resolves; up: it rejoins and serves.
    change(&hub.path, Control::PortDown(port(2)));
    n2.wait_log("port 1 down");
    fails(&n2, &["-f", "l", "-d", "1"]);
    // Its peers' ACM requests no longer reach it: node3 cannot learn its name.
    fails(&n3, &["-f", "n", "-s", "node3", "-d", "node2"]);
    change(&hub.path, Control::PortUp(port(2)));
    n2.wait_log_count(JOINED, 2);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "1"]), gid(1));
    assert_eq!(
        resolves(&n3, &["-f", "n", "-s", "node3", "-d", "node2"]),
        gid(2)
    );

    change(&hub.path, Control::ClientReregister(port(2)));
    n2.wait_log("client reregister on port 1");
    n2.wait_log_count(JOINED, 3);

    // The SM moves to node3's port: both rejoin with the new SM, whose SA answers
    // a path never asked before.
    let before3 = n3.log_count(JOINED);
    change(&hub.path, Control::SmMove { lid: 3 });
    n2.wait_log_count(JOINED, 4);
    n3.wait_log_count(JOINED, before3 + 1);
    assert_eq!(resolves(&n2, &["-f", "g", "-d", &gid(1)]), gid(1));

    // node2 gets LID 0x42: node3 finds it there, from the SA's answer.
    change(
        &hub.path,
        Control::SetLid {
            port: port(2),
            lid: 0x42,
            lmc: 0,
        },
    );
    n2.wait_log("port 1 changed: lid 66");
    let (out, status) = acme(&n3, &["-f", "l", "-d", "66"]);
    assert_eq!(status, 0, "{out}\nlog:\n{}", n3.log());
    assert_eq!(field(&out, "dlid").as_deref(), Some("66"), "{out}");
    assert_eq!(field(&out, "dgid"), Some(gid(2)), "{out}");

    // node2's GID changes: the new one resolves, the old one no longer does.
    let new_gid = "fe80::2:c903:a0:bbbb";
    let changes = n2.log_count("port 1 changed");
    change(
        &hub.path,
        Control::SetGid {
            port: port(2),
            gid: acm_proto::Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_bbbb),
        },
    );
    n2.wait_log_count("port 1 changed", changes + 1);
    assert_eq!(resolves(&n3, &["-f", "g", "-d", new_gid]), new_gid);
    fails(&n3, &["-f", "g", "-d", &gid(2)]);

    // A fatal QP error: the port's endpoints are made anew and join again (with the
    // port's new GID: until a rejoin, paths asked of the SA keep the GID the
    // endpoint's group was joined with, as the reference's do).
    let joined = n2.log_count(JOINED);
    change(&hub.path, Control::QpError(port(2)));
    n2.wait_log("QpError on port 1; recreating the port's endpoints");
    n2.wait_log_count(JOINED, joined + 1);
    assert_eq!(resolves(&n2, &["-f", "g", "-d", &gid(3)]), gid(3));

    // Partition 0x8001 reaches node2's port: its address file's name there gets an
    // endpoint.
    change(
        &hub.path,
        Control::SetPkeys {
            port: port(2),
            pkeys: vec![0xFFFF, 0x8001],
        },
    );
    n2.wait_log("creating endpoint for pkey 0x8001");
    n2.wait_log_count(JOINED, joined + 2);
    // node3's port joins the partition too: its name there resolves node2's, on the
    // new partition, to node2's current GID, once its endpoint there joined.
    let joined3 = n3.log_count(JOINED);
    change(
        &hub.path,
        Control::SetPkeys {
            port: port(3),
            pkeys: vec![0xFFFF, 0x8001],
        },
    );
    n3.wait_log("creating endpoint for pkey 0x8001");
    n3.wait_log_count(JOINED, joined3 + 1);
    let (out, status) = acme(&n3, &["-f", "n", "-s", "node3-p1", "-d", "node2-p1"]);
    assert_eq!(status, 0, "{out}\nlog:\n{}", n3.log());
    assert_eq!(field(&out, "dgid").as_deref(), Some(new_gid), "{out}");
    assert_eq!(field(&out, "pkey").as_deref(), Some("0x8001"), "{out}");
}

/// A device that dies is closed whole (its umad descriptors are not read again) and
/// reopened when it is back; one removed leaves sysfs and is opened again when it
/// returns. (A device that leaves sysfs without an event is closed by the scan: see
/// `a_daemon_waits_for_its_first_device_when_told_to`.)
#[test]
fn dead_and_removed_devices_are_closed_and_reopened() {
    let dir = TempDir::new("hw-device-changes");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let n2 = start(&dir, &hub, 2);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "3"]), gid(3));
    let remove = |fatal| Control::DeviceRemove {
        host: "node2".into(),
        hca: 0,
        fatal,
    };
    let add = || Control::DeviceAdd {
        host: "node2".into(),
        hca: 0,
    };

    change(&hub.path, remove(true));
    n2.wait_log("mlx5_0: fatal device error; closed");
    n2.wait_log("mlx5_0 removed");
    fails(&n2, &["-f", "l", "-d", "1"]);
    change(&hub.path, add());
    n2.wait_log("mlx5_0: device added");
    n2.wait_log_count(JOINED, 2);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "1"]), gid(1));

    // An unplugged HCA's contexts get DEVICE_FATAL too (as from the kernel's
    // disassociation), so either that or the scan closes it.
    change(&hub.path, remove(false));
    n2.wait_log_count("mlx5_0 removed", 2);
    assert!(!n2.sysfs().join("class/infiniband/mlx5_0").exists());
    fails(&n2, &["-f", "g", "-d", &gid(1)]);
    change(&hub.path, add());
    n2.wait_log_count("mlx5_0: device added", 2);
    n2.wait_log_count(JOINED, 3);
    assert_eq!(resolves(&n2, &["-f", "g", "-d", &gid(1)]), gid(1));

    let log = n2.log();
    assert!(
        !log.contains("read failed"),
        "a dead descriptor was read:\n{log}"
    );
}

/// With `wait_for_device 1` a host whose HCA is not there yet starts, says it waits,
/// and serves the HCA once it appears; without it the daemon exits naming what is
/// missing, as the reference does. A device that then leaves sysfs is closed by the
/// scan, and reopened when it is back.
#[test]
fn a_daemon_waits_for_its_first_device_when_told_to() {
    let dir = TempDir::new("hw-wait");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));

    let bare = dir.subdir("bare");
    let sysfs = bare.join("sys");
    write_sysfs(&demo(), "node2", &sysfs);
    support::fake_hca::unplug_sysfs(&sysfs, "mlx5_0");
    // Every default, and never the machine's options file.
    let opts = bare.join("ibacm_opts.cfg");
    std::fs::write(&opts, "# every default\n").expect("options file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibacm"));
    cmd.arg("-P")
        .arg("--run-dir")
        .arg(&bare)
        .arg("-O")
        .arg(&opts)
        .envs(support::fake_hca::env(
            &hub.path,
            "node2",
            &sysfs,
            &bare.join("dev"),
        ));
    let out = run_bounded(cmd, DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no InfiniBand devices"), "{err}");

    let n2 = EmulatedHost::config(
        &dir.subdir("node2"),
        &hub,
        "node2",
        format!("{OPTIONS}wait_for_device 1\n"),
        addr_file(2),
    )
    .ready("waiting for an InfiniBand device")
    .unplugged(&["mlx5_0"])
    .start();
    fails(&n2, &["-f", "l", "-d", "3"]);
    // The driver loads: the device appears in sysfs.
    write_sysfs(&demo(), "node2", &n2.sysfs());
    n2.wait_log("mlx5_0: device added");
    n2.wait_log(JOINED);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "3"]), gid(3));
    // Its driver unbinds it without an event: the scan closes it, and opens it again
    // when it is back.
    support::fake_hca::unplug_sysfs(&n2.sysfs(), "mlx5_0");
    n2.wait_log("mlx5_0: removed; closed");
    fails(&n2, &["-f", "l", "-d", "1"]);
    write_sysfs(&demo(), "node2", &n2.sysfs());
    n2.wait_log_count("mlx5_0: device added", 2);
    n2.wait_log_count(JOINED, 2);
    assert_eq!(resolves(&n2, &["-f", "l", "-d", "1"]), gid(1));
}
