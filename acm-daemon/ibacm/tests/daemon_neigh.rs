//! `addr_prot` with the neighbour table, through the daemon process and Debian's
//! `ib_acme` (docs/protocol/ipoib-neigh.md): on the demo fabric with node3 running no
//! ibacm, node1's daemon finds node3 with `addr_prot acm,neigh` and `neigh` and times
//! out with the reference's `acm`, in a simulated fabric of its own (`--fabric sim`) and
//! on a fabric hub shared with node2's daemon (`--fabric hub`).
//!
//! Every daemon runs in the foreground in its own temporary run directory and is
//! killed when its test ends. Every wait is bounded.

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod hub_thread;
    pub(crate) mod programs;
}

use acm_io_sim::FabricSpec;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::daemon::{DEADLINE, DEMO, Daemon, TempDir, ib_acme, run_bounded};
use support::hub_thread::HubThread;

/// The demo fabric with node3 running no daemon (its port and 10.0.0.3 stay).
fn demo_without_node3_daemon() -> FabricSpec {
    let text = std::fs::read_to_string(DEMO).expect("demo.toml");
    let mut spec = FabricSpec::parse(&text).expect("a valid fabric");
    spec.hosts[2].daemon = false;
    spec
}

/// Options for node1: short ACM tries (2 × (1024 + 200) ms) so that the fall-through
/// is quick.
fn options(list: &str) -> String {
    format!("log_level 2\naddr_prot {list}\ntimeout 200\nretries 1\nresolve_depth 4\n")
}

/// `ib_acme -f i -s 10.0.0.1 -d 10.0.0.3 -v` against `d`, and how long it took.
fn acme_to_node3(d: &Daemon) -> (Output, Duration) {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S")
        .arg(d.socket())
        .args(["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3", "-v"]);
    let t0 = Instant::now();
    let out = run_bounded(cmd, DEADLINE * 2);
    (out, t0.elapsed())
}

fn assert_not_found(d: &Daemon, out: &Output, context: &str) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("Path information"),
        "{context}: a path to a host nobody answers for:\n{text}\n{}",
        d.diagnostics()
    );
}

#[test]
fn a_daemon_on_a_simulated_fabric_finds_a_host_without_ibacm() {
    let top = TempDir::new("neigh-sim");
    let fabric_file = top.join("fabric.toml");
    std::fs::write(&fabric_file, demo_without_node3_daemon().to_toml()).expect("fabric");
    let fabric = format!("sim:{}:node1", fabric_file.display());
    let acm_tries = Duration::from_millis(2 * (1024 + 200));

    // The reference's setting: nobody answers for 10.0.0.3.
    let d = Daemon::start(&top.subdir("acm"), &fabric, &options("acm"));
    let (out, took) = acme_to_node3(&d);
    assert_not_found(&d, &out, "addr_prot acm");
    assert!(took >= acm_tries, "{took:?}");
    drop(d);

    // ACM first, then the neighbour table once ACM gave up.
    let d = Daemon::start(&top.subdir("both"), &fabric, &options("acm,neigh"));
    let (out, took) = acme_to_node3(&d);
    d.assert_verified_path(&out, 1, 3, "addr_prot acm,neigh");
    assert!(took >= acm_tries, "{took:?}");
    drop(d);

    // The neighbour table alone: no ACM wait.
    let mut d = Daemon::start(&top.subdir("neigh"), &fabric, &options("neigh"));
    let (out, took) = acme_to_node3(&d);
    d.assert_verified_path(&out, 1, 3, "addr_prot neigh");
    assert!(took < acm_tries, "{took:?}");
    d.assert_running();
}

#[test]
fn daemons_on_a_fabric_hub_find_a_host_without_ibacm() {
    let top = TempDir::new("neigh-hub");
    let hub_sock = top.join("hub.sock");
    let hub = HubThread::start(demo_without_node3_daemon(), &hub_sock);
    let fabric = |n: u8| format!("hub:{}:node{n}", hub_sock.display());
    let mut node1 = Daemon::start(&top.subdir("n1"), &fabric(1), &options("acm,neigh"));
    let mut node2 = Daemon::start(&top.subdir("n2"), &fabric(2), &options("acm"));
    // node2 runs ibacm: ACM answers, and the neighbour table is not needed.
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S")
        .arg(node1.socket())
        .args(["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2", "-v"]);
    let out = run_bounded(cmd, DEADLINE * 2);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("dlid: 2\n"),
        "node1 -> node2: {out:?}\n{text}\n{}",
        node1.diagnostics()
    );
    // node3 does not: found after the ACM tries, from the hub's answer.
    let (out, _) = acme_to_node3(&node1);
    node1.assert_verified_path(&out, 1, 3, "node1 -> node3 on the hub");
    node1.assert_running();
    node2.assert_running();
    drop(node1);
    drop(node2);
    hub.stop();
}
