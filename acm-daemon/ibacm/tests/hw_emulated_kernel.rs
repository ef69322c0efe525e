//! The kernel's RDMA_NL_LS channel of a daemon on its hardware backend (`verbs`, no
//! `--fabric`, the emulated HCA): a daemon without CAP_NET_ADMIN does not listen on the
//! LS group, since the kernel would refuse every answer and hold each of its path queries
//! for its whole timeout first, and it says why, once. With the capability it listens,
//! or, on a machine whose kernel has no RDMA netlink, says that instead.
//!
//! The capability is dropped with `setpriv --inh-caps=-net_admin
//! --bounding-set=-net_admin`, which needs root; as another user the test says why it
//! is skipped. Whether a listener holds the kernel's queries is not observable without
//! InfiniBand hardware (the kernel must have RDMA netlink loaded); what is checked here
//! is the daemon's decision and its log.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
}

use std::path::Path;
use std::process::Command;
use support::daemon::TempDir;
use support::fake_hca::{EmulatedHost, RunningHub, demo, demo_addr_file};

/// The one line a daemon without the capability logs about the kernel.
const NOT_LISTENING: &str = "acm_init_nl: not listening for kernel path requests: no \
                             CAP_NET_ADMIN, so the kernel would refuse every answer; it \
                             asks the SA directly";

const OPTIONS: &str = "log_level 1\nsupport_ips_in_addr_cfg 1\n";

/// Why the capability cannot be dropped here, if it cannot.
fn cannot_drop_capabilities() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: setpriv cannot change the bounding set".into());
    }
    let probe = Command::new("setpriv")
        .args([
            "--inh-caps=-net_admin",
            "--bounding-set=-net_admin",
            "--",
            "true",
        ])
        .status();
    match probe {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("setpriv cannot drop CAP_NET_ADMIN here ({s})")),
        Err(e) => Some(format!("no setpriv: {e}")),
    }
}

/// Starts host node1 of the demo fabric in `dir`, through `wrapper`.
fn start(dir: &Path, hub: &RunningHub, wrapper: &[&str]) -> EmulatedHost {
    EmulatedHost::config(dir, hub, "node1", OPTIONS, demo_addr_file(1))
        .wrapper(wrapper)
        .start()
}

#[test]
fn without_cap_net_admin_the_daemon_does_not_listen_for_the_kernel_and_says_so_once() {
    if let Some(why) = cannot_drop_capabilities() {
        println!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("hw-nocap");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let mut host = start(
        &dir.subdir("node1"),
        &hub,
        &[
            "setpriv",
            "--inh-caps=-net_admin",
            "--bounding-set=-net_admin",
            "--",
        ],
    );
    // The daemon runs without the capability...
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.pid()))
        .expect("the daemon's status");
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .expect("a CapEff line");
    assert_eq!(
        cap_eff & (1 << 12),
        0,
        "CAP_NET_ADMIN dropped: {cap_eff:#x}"
    );
    // ...and so does not listen for the kernel: one line says why, and no socket was
    // opened (nothing about NETLINK_RDMA itself).
    let log = host.log();
    assert_eq!(host.log_count(NOT_LISTENING), 1, "{log}");
    assert!(!log.contains("NETLINK_RDMA"), "{log}");
    assert!(!log.contains("listening on NETLINK_RDMA"), "{log}");
    // It serves its clients all the same.
    assert!(log.contains("acm_server: listening on"), "{log}");
    host.stop();
    assert_eq!(host.log_count(NOT_LISTENING), 1, "once: {}", host.log());
}

#[test]
fn with_cap_net_admin_the_daemon_listens_or_names_what_the_kernel_lacks() {
    let dir = TempDir::new("hw-cap");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let host = start(&dir.subdir("node1"), &hub, &[]);
    let log = host.log();
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.pid())).expect("status");
    let capable = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|c| c & (1 << 12) != 0);
    if !capable {
        println!("skipped: the tests run without CAP_NET_ADMIN");
        assert_eq!(host.log_count(NOT_LISTENING), 1, "{log}");
        return;
    }
    assert_eq!(host.log_count(NOT_LISTENING), 0, "{log}");
    // This machine's kernel decides which: RDMA netlink there or not.
    let listening = log.contains("acm_init_nl: listening on NETLINK_RDMA");
    let unavailable = log.contains("acm_init_nl: NETLINK_RDMA unavailable");
    println!(
        "with CAP_NET_ADMIN: {}",
        if listening {
            "listening on the LS group"
        } else {
            "the kernel has no RDMA netlink"
        }
    );
    assert!(listening != unavailable, "exactly one of the two: {log}");
}
