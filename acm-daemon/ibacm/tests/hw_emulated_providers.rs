//! C provider plugins on our daemon's hardware backend (`verbs`, no `--fabric`), on the
//! emulated HCA as the reference host of a hub serving the reference fabric: the
//! device a provider opens carries its real (emulated) verbs context, which the test
//! provider queries itself (`ibv_query_device`, `ibv_query_port`), as libibacmp does
//! to create its own queue pairs. Debian's libibacmp in our daemon talks the ACM
//! protocol with our built-in provider in others, both ways; its replay of every
//! capture is in daemon_reference.rs.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
    pub(crate) mod test_provider;
}

use acm_io_sim::hub::wire::Control;
use std::path::Path;
use std::process::Command;
use support::daemon::{DEADLINE, TempDir, ib_acme, run_bounded};
use support::fake_hca::{EmulatedHost, RunningHub, change, demo, demo_addr_file, write_sysfs};
use support::test_provider::{REFERENCE, assert_resolved_by_test_provider, build, options};

/// What the test provider logs once fakehost's last address is added.
const READY: &str = "add_address: address fd00::1";

/// fakehost on the emulated HCA with the provider libraries of `libs` and `lines`.
fn start(dir: &TempDir, hub: &RunningHub, libs: &Path, lines: &str) -> EmulatedHost {
    let addr = std::fs::read_to_string(Path::new(REFERENCE).join("ibacm_addr.cfg"))
        .expect("the reference address file");
    EmulatedHost::config(
        &dir.subdir("fakehost"),
        hub,
        "fakehost",
        options(libs, lines),
        &addr,
    )
    .ready(READY)
    .start()
}

fn hub(dir: &TempDir) -> RunningHub {
    RunningHub::start(
        &Path::new(REFERENCE).join("fabric.toml"),
        dir.join("hub.sock"),
    )
}

#[test]
fn a_c_provider_using_the_device_verbs_context_resolves_by_prefix() {
    let dir = TempDir::new("hwprov-prefix");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &["-DVERBS", "-libverbs"]);
    let hub = hub(&dir);
    let host = start(&dir, &hub, &libs, "provider testprov 0xfe80000000000000\n");
    assert_resolved_by_test_provider(&host.socket(), &|| host.log(), &|| host.log(), true);
    // The context is the emulated device's: its node GUID and port LID, as the fabric
    // gives them to fakehost.
    let log = host.log();
    assert!(
        log.contains("open_device: verbs node guid 0x0002c90300a0b000, 1 ports"),
        "{log}"
    );
    assert!(log.contains("open_port: verbs port 1 lid 1"), "{log}");
    drop(host);
    drop(hub);
}

#[test]
fn a_c_provider_selected_by_default_resolves_on_the_emulated_hca() {
    let dir = TempDir::new("hwprov-default");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &[]);
    let hub = hub(&dir);
    let host = start(&dir, &hub, &libs, "provider testprov default\n");
    assert_resolved_by_test_provider(&host.socket(), &|| host.log(), &|| host.log(), true);
    drop(host);
    drop(hub);
}

/// Debian's own provider (package `ibacm`).
const DEBIAN_LIBIBACMP: &str = "/usr/lib/x86_64-linux-gnu/ibacm/libibacmp.so";

/// `ib_acme -S socket args…`: its output, with the exit status checked.
fn resolved(socket: &Path, args: &[&str], what: &str, log: &dyn Fn() -> String) -> String {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(socket).args(args);
    let out = run_bounded(cmd, DEADLINE);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what}:\n{text}\nlog:\n{}", log());
    text
}

/// node1 runs Debian's libibacmp (`builtin_provider no`), node2 and node3 our built-in
/// provider, all on the emulated HCA with `addr_prot acm` and `route_prot acm`: node2
/// finds node1 by ACM multicast, which libibacmp answers, and node1 finds node3, whose
/// built-in provider answers libibacmp's request; libibacmp's MADs cross the emulated
/// fabric on its own QPs.
#[test]
fn debian_libibacmp_and_the_builtin_provider_resolve_each_other_over_acm() {
    assert!(
        Path::new(DEBIAN_LIBIBACMP).exists(),
        "{DEBIAN_LIBIBACMP} is missing: install Debian's `ibacm` package (.ci/run does)"
    );
    let dir = TempDir::new("hwprov-acm");
    let libs = dir.subdir("libs");
    // A copy: the loader skips symbolic links, as the reference does.
    std::fs::copy(DEBIAN_LIBIBACMP, libs.join("libibacmp.so")).expect("copy libibacmp");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let common = "log_level 2\nsupport_ips_in_addr_cfg 1\naddr_prot acm\nroute_prot acm\n\
                  timeout 500\nretries 2\n";
    let start = |n: u16, extra: &str| {
        let name = format!("node{n}");
        EmulatedHost::config(
            &dir.subdir(&name),
            &hub,
            &name,
            format!("{common}{extra}"),
            demo_addr_file(n),
        )
        .start()
    };
    let c = start(
        1,
        &format!(
            "provider_lib_path {}\nbuiltin_provider no\n",
            libs.display()
        ),
    );
    let (n2, n3) = (start(2, ""), start(3, ""));
    assert!(
        c.log().contains("libibacmp.so: loaded provider 'ibacmp'"),
        "{}",
        c.log()
    );
    for (from, to, host) in [(2, 1, &n2), (1, 3, &c)] {
        let (src, dst) = (format!("10.0.0.{from}"), format!("10.0.0.{to}"));
        let what = format!("node{from} → node{to} by IPv4");
        let out = resolved(
            &host.socket(),
            &["-f", "i", "-s", &src, "-d", &dst],
            &what,
            &|| host.log(),
        );
        assert!(
            out.contains(&format!("  dgid: fe80::2:c903:a0:b00{to}\n")),
            "{what}:\n{out}"
        );
        assert!(out.contains(&format!("  dlid: {to}\n")), "{what}:\n{out}");
        let (s, d) = (format!("node{from}"), format!("node{to}"));
        let out = resolved(
            &host.socket(),
            &["-f", "n", "-s", &s, "-d", &d],
            &format!("node{from} → node{to} by name"),
            &|| host.log(),
        );
        assert!(out.contains(&format!("  dlid: {to}\n")), "{out}");
    }
    // The C provider answered node2's multicast request, and had its own answered.
    let log = c.log();
    assert!(log.contains("acmp_process_addr_req"), "{log}");
    assert!(log.contains("acmp_process_addr_resp"), "{log}");
    drop(n3);
    drop(n2);
    drop(c);
    drop(hub);
}

/// A C provider is told of every device, including one that appears after start and
/// one that dies and comes back, each time with the device's current verbs context:
/// the test provider queries it (node GUID, port LID) and serves the endpoint.
#[test]
fn a_c_provider_gets_the_verbs_context_of_devices_that_come_later_or_come_back() {
    let dir = TempDir::new("hwprov-hotplug");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &["-DVERBS", "-libverbs"]);
    let hub = hub(&dir);
    let fabric = Path::new(REFERENCE).join("fabric.toml");
    let addr = std::fs::read_to_string(Path::new(REFERENCE).join("ibacm_addr.cfg"))
        .expect("the reference address file");
    let host = EmulatedHost::config(
        &dir.subdir("fakehost"),
        &hub,
        "fakehost",
        format!(
            "{}wait_for_device 1\n",
            options(&libs, "provider testprov 0xfe80000000000000\n")
        ),
        &addr,
    )
    .ready("waiting for an InfiniBand device")
    .unplugged(&["fakeib0"])
    .start();
    let queried = "open_port: verbs port 1 lid 1";
    // The driver loads.
    write_sysfs(&fabric, "fakehost", &host.sysfs());
    host.wait_log("fakeib0: device added");
    host.wait_log(READY);
    host.wait_log(queried);
    assert_resolved_by_test_provider(&host.socket(), &|| host.log(), &|| host.log(), true);

    // It dies and comes back: a new context, which the provider is given.
    let device = |fatal| Control::DeviceRemove {
        host: "fakehost".into(),
        hca: 0,
        fatal,
    };
    change(&hub.path, device(true));
    host.wait_log("fakeib0: fatal device error; closed");
    change(
        &hub.path,
        Control::DeviceAdd {
            host: "fakehost".into(),
            hca: 0,
        },
    );
    host.wait_log_count("fakeib0: device added", 2);
    host.wait_log_count(queried, 2);
    let log = host.log();
    assert_eq!(
        log.matches("open_device: verbs node guid 0x0002c90300a0b000, 1 ports")
            .count(),
        2,
        "{log}"
    );
    assert!(!log.contains("query_device failed"), "{log}");
    assert!(!log.contains("query_port failed"), "{log}");
    let out = support::test_provider::acme(&host.socket(), &support::test_provider::RESOLVE);
    assert!(out.contains("  dlid: 2\n"), "{out}\n{}", host.log());
    drop(host);
    drop(hub);
}

/// Debian's libibacmp in a daemon started before its HCA (`wait_for_device 1`): the
/// device that appears is given to it with its verbs context, on which libibacmp opens
/// its own; it joins, and node2's built-in provider finds node1 by ACM multicast,
/// which libibacmp answers.
#[test]
fn debian_libibacmp_serves_a_device_that_appears_after_start() {
    assert!(
        Path::new(DEBIAN_LIBIBACMP).exists(),
        "{DEBIAN_LIBIBACMP} is missing: install Debian's `ibacm` package (.ci/run does)"
    );
    let dir = TempDir::new("hwprov-late");
    let libs = dir.subdir("libs");
    std::fs::copy(DEBIAN_LIBIBACMP, libs.join("libibacmp.so")).expect("copy libibacmp");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let common = "log_level 2\nsupport_ips_in_addr_cfg 1\naddr_prot acm\nroute_prot acm\n\
                  timeout 500\nretries 2\n";
    let c = EmulatedHost::config(
        &dir.subdir("node1"),
        &hub,
        "node1",
        format!(
            "{common}provider_lib_path {}\nbuiltin_provider no\nwait_for_device 1\n",
            libs.display()
        ),
        demo_addr_file(1),
    )
    .ready("waiting for an InfiniBand device")
    .unplugged(&["mlx5_0"])
    .start();
    let n2 = EmulatedHost::config(
        &dir.subdir("node2"),
        &hub,
        "node2",
        common,
        demo_addr_file(2),
    )
    .start();
    write_sysfs(&demo(), "node1", &c.sysfs());
    c.wait_log("mlx5_0: device added");
    c.wait_log("acmp_process_join_resp: join successful");
    let out = resolved(
        &n2.socket(),
        &["-f", "n", "-s", "node2", "-d", "node1"],
        "node2 → node1 by name",
        &|| format!("node2:\n{}\nnode1:\n{}", n2.log(), c.log()),
    );
    assert!(out.contains("  dgid: fe80::2:c903:a0:b001\n"), "{out}");
    let out = resolved(
        &c.socket(),
        &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2"],
        "node1 → node2 by IPv4",
        &|| c.log(),
    );
    assert!(out.contains("  dlid: 2\n"), "{out}");
    assert!(c.log().contains("acmp_process_addr_req"), "{}", c.log());
    drop(n2);
    drop(c);
    drop(hub);
}
