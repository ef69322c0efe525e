//! Debian's librdmacm against our daemon: `rdma_getaddrinfo` (from
//! `acm-rdmacm-probe`, built with the emulated HCA) asks the ibacm at the fixed path
//! `/run/ibacm.sock` for routes, as every RDMA program's librdmacm does. Our daemon
//! runs there on its hardware backend, as host node2 of a hub serving the demo
//! fabric, in a private mount namespace whose `/run` is a fresh tmpfs, so the test
//! touches nothing of the machine's. node3 runs another of our daemons (its own run
//! directory, outside the namespace), which answers node2's ACM address resolutions.
//! The probe runs preloaded with the emulated HCA as well (librdmacm asks ibacm only
//! once it has listed a device), as node1, a host with no daemon: two processes
//! cannot attach as one host.
//!
//! The namespaces (mount and PID) are made with `unshare -mpf` as root, and with
//! `unshare -Urmpf` (a user namespace in which the user is root) otherwise. Where
//! neither can be made (no `unshare`, user namespaces disabled) the test prints why
//! and returns without running.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
}

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::daemon::{TempDir, run_bounded};
use support::fake_hca::{EmulatedHost, RunningHub, artifacts, demo, write_sysfs};

/// The GID of host `n` of the demo fabric.
fn gid(n: u16) -> String {
    format!("fe80::2:c903:a0:b00{n}")
}

/// The `unshare` flags that give this user a private mount namespace in which it
/// may mount, and a PID namespace whose first process is the script: when `unshare`
/// is killed (the test's time limit), the script is killed, and with it every process
/// of the namespace, the daemon too.
fn unshare_flags() -> &'static [&'static str] {
    if nix::unistd::geteuid().is_root() {
        &["-m", "-p", "-f", "--kill-child", "--propagation", "private"]
    } else {
        &[
            "-U",
            "-r",
            "-m",
            "-p",
            "-f",
            "--kill-child",
            "--propagation",
            "private",
        ]
    }
}

/// Why the test cannot run here, if it cannot: a private mount namespace with a
/// tmpfs on `/run` is tried.
fn cannot_run() -> Option<String> {
    let tried = Command::new("unshare")
        .args(unshare_flags())
        .args(["sh", "-c", "mount -t tmpfs acm-test /run"])
        .output();
    match tried {
        Err(e) => Some(format!("unshare (util-linux) cannot run: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare {} cannot mount a tmpfs on /run: {}",
            unshare_flags().join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// Single-quotes `p` for the shell.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The probe cases, in order: a name and the probe's arguments. A `-miss` case
/// must come back without a route, every other one with the route to node3, except
/// `unknown`.
fn cases() -> Vec<(&'static str, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    vec![
        // RAI_NUMERICHOST makes librdmacm ask with ACM_FLAGS_NODELAY: nothing is
        // cached yet, so no route (and the daemon resolves in the background).
        (
            "ipv6-nodelay-miss",
            s(&["--numeric", "--src", "fd00::2", "--dst", "fd00::3"]),
        ),
        ("ipv4-src", s(&["--src", "10.0.0.2", "--dst", "10.0.0.3"])),
        ("ipv4", s(&["--dst", "10.0.0.3"])),
        // Now cached: NODELAY answers at once with it.
        (
            "ipv4-nodelay-cached",
            s(&["--numeric", "--dst", "10.0.0.3"]),
        ),
        ("ipv6", s(&["--src", "fd00::2", "--dst", "fd00::3"])),
        ("af-ib", vec!["--ib-dst".into(), gid(3)]),
        (
            "route-hint",
            vec![
                "--dst".into(),
                "10.0.0.3".into(),
                "--hint-dgid".into(),
                gid(3),
            ],
        ),
        ("unknown", s(&["--dst", "10.9.9.9"])),
    ]
}

/// The script run in the namespace: a tmpfs on /run, our daemon in it, each probe
/// case under a `== name` line, then the daemon stopped.
fn script(dir: &Path, hub: &Path) -> String {
    let a = artifacts();
    let probe = a.sysfs.with_file_name("acm-rdmacm-probe");
    let common = format!("LD_PRELOAD={} ACM_FAKE_HCA_HUB={}", q(&a.library), q(hub));
    let daemon_env = format!(
        "{common} ACM_FAKE_HCA_HOST=node2 ACM_SYSFS_ROOT={} ACM_DEV_ROOT={}",
        q(&dir.join("sys")),
        q(&dir.join("dev"))
    );
    let probe_env = format!(
        "{common} ACM_FAKE_HCA_HOST=node1 ACM_FAKE_HCA_SOCKET={}",
        q(&dir.join("probe.hca"))
    );
    let log = dir.join("ibacm.log");
    let mut s = format!(
        "set -e\nmount -t tmpfs acm-test /run\n\
         env {daemon_env} {ibacm} -P -O {opts} -A {addr} >/dev/null 2>&1 &\n\
         pid=$!\n\
         n=0; until grep -q 'join successful' {log} 2>/dev/null && [ -S /run/ibacm.sock ]; do \
           n=$((n+1)); [ $n -lt 400 ] || {{ echo 'the daemon did not start'; cat {log}; kill $pid; exit 1; }}; \
           sleep 0.05; done\n\
         set +e\n",
        ibacm = q(Path::new(env!("CARGO_BIN_EXE_ibacm"))),
        opts = q(&dir.join("ibacm_opts.cfg")),
        addr = q(&dir.join("ibacm_addr.cfg")),
        log = q(&log),
    );
    for (name, args) in cases() {
        let args: Vec<String> = args.iter().map(|x| format!("'{x}'")).collect();
        s.push_str(&format!(
            "echo '== {name}'\nenv {probe_env} {} {} 2>&1\n",
            q(&probe),
            args.join(" ")
        ));
    }
    s.push_str("kill $pid\nwait $pid\n");
    s
}

/// The probe's output for each case.
fn by_case(out: &str) -> Vec<(String, String)> {
    let mut cases: Vec<(String, String)> = Vec::new();
    for line in out.lines() {
        if let Some(name) = line.strip_prefix("== ") {
            cases.push((name.to_owned(), String::new()));
        } else if let Some((_, text)) = cases.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    cases
}

/// The options of both daemons.
const OPTIONS: &str = "log_level 2\nsupport_ips_in_addr_cfg 1\naddr_prot acm\nroute_prot sa\ntimeout 500\nretries 2\n";

/// IPv4 with and without a source, IPv6, an `AF_IB` destination and a route hint
/// each come back with the route to node3; with `RAI_NUMERICHOST` only a cached route
/// comes back; an address no daemon serves comes back with none (librdmacm then goes
/// on without ibacm).
#[test]
fn librdmacm_gets_its_routes_from_our_daemon_at_run_ibacm_sock() {
    if let Some(why) = cannot_run() {
        eprintln!("hw_rdmacm skipped: {why}");
        return;
    }
    let dir = TempDir::new("hw-rdmacm");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let peer = EmulatedHost::config(
        &dir.subdir("node3"),
        &hub,
        "node3",
        OPTIONS,
        "node3 mlx5_0 1 default\n10.0.0.3 mlx5_0 1 default\nfd00::3 mlx5_0 1 default\n",
    )
    .start();
    let host = dir.subdir("node2");
    write_sysfs(&demo(), "node2", &host.join("sys"));
    std::fs::create_dir_all(host.join("dev")).expect("dev dir");
    std::fs::write(
        host.join("ibacm_opts.cfg"),
        format!("log_file {}\n{OPTIONS}", host.join("ibacm.log").display()),
    )
    .expect("options");
    std::fs::write(
        host.join("ibacm_addr.cfg"),
        "node2 mlx5_0 1 default\n10.0.0.2 mlx5_0 1 default\nfd00::2 mlx5_0 1 default\n",
    )
    .expect("address file");
    let mut cmd = Command::new("unshare");
    cmd.args(unshare_flags())
        .args(["sh", "-c"])
        .arg(script(&host, &hub.path));
    let out = run_bounded(cmd, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let log = std::fs::read_to_string(host.join("ibacm.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{text}{}\nlog:\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What librdmacm got, for `--nocapture`.
    println!("{text}");
    let got = by_case(&text);
    assert_eq!(got.len(), cases().len(), "{text}");
    for (name, output) in got {
        let what = format!(
            "{name}:\n{output}\nlog:\n{log}\nnode3's log:\n{}",
            peer.log()
        );
        if name == "unknown" || name.ends_with("-miss") {
            assert!(output.contains("routes 0"), "{what}");
            continue;
        }
        let route = output
            .lines()
            .find(|l| l.starts_with("route "))
            .unwrap_or_else(|| panic!("no route: {what}"));
        assert!(route.contains(&format!("dgid={}", gid(3))), "{what}");
        assert!(route.contains(&format!("sgid={}", gid(2))), "{what}");
        assert!(route.contains("dlid=3 "), "{what}");
    }
    drop(peer);
    drop(hub);
}
