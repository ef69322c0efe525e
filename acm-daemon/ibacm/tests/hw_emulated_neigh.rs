//! `addr_prot neigh,acm` on the hardware backend (`verbs`, no `--fabric`), each daemon
//! on the emulated HCA as one host of a hub serving `testdata/fabrics/demo.toml`
//! (docs/protocol/ipoib-neigh.md §2, §3). The emulated host has no IPoIB interfaces
//! (its sysfs `class/net` is empty), so the backend answers the neighbour question
//! *unreachable* at once without asking the machine's kernel, and the lookup goes on to
//! ACM: what a host whose IPoIB interface is missing does. The rtnetlink half itself
//! needs a real IPoIB interface and is not run here.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
}

use std::process::Command;
use support::daemon::{DEADLINE, TempDir, ib_acme, run_bounded};
use support::fake_hca::{EmulatedHost, RunningHub, demo, demo_addr_file};

#[test]
fn without_an_ipoib_interface_the_table_gives_way_to_acm() {
    let dir = TempDir::new("hw-neigh");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let options = "log_level 2\nsupport_ips_in_addr_cfg 1\naddr_prot neigh,acm\n\
                   route_prot sa\ntimeout 500\nretries 2\n";
    let hosts: Vec<EmulatedHost> = (1..=2)
        .map(|n| {
            let name = format!("node{n}");
            EmulatedHost::config(&dir.subdir(&name), &hub, &name, options, demo_addr_file(n))
                .start()
        })
        .collect();
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S")
        .arg(hosts[0].socket())
        .args(["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2", "-v"]);
    let out = run_bounded(cmd, DEADLINE);
    let text = String::from_utf8_lossy(&out.stdout);
    let log = hosts[0].log();
    assert!(
        out.status.success() && text.contains("dlid: 2\n"),
        "node1 -> node2: {out:?}\n{text}\nlog:\n{log}"
    );
    assert!(
        log.contains(
            "no IPoIB interface on gid fe80::2:c903:a0:b001 pkey 0xffff to resolve 10.0.0.2"
        ),
        "the backend's answer is logged:\n{log}"
    );
    drop(hosts);
    drop(hub);
}
