//! SIGHUP against a running `ibacm` process (docs/daemon.md §14): an
//! address-file name added is resolved as a source by Debian's `ib_acme`, a name
//! removed no longer is while the others still are, a file with a malformed line is
//! refused whole (the log names file and line, the running names stay), a
//! `log_level` change applies at once, and so does a metrics file; an option that needs
//! a restart keeps its running value and the log names its line.

#[allow(dead_code)]
mod support {
    pub(crate) mod daemon;
    pub(crate) mod programs;
}

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::daemon::{DEADLINE, DEMO, Daemon, TempDir, ib_acme, run_bounded};

/// Whether Debian's `ib_acme` gets a path from name `src` (one of this host's) to
/// node2, another host of the demo fabric.
fn resolves(d: &Daemon, src: &str) -> bool {
    resolves_to(d, src, "node2")
}

/// Whether Debian's `ib_acme` gets a path from name `src` to name `dst`.
fn resolves_to(d: &Daemon, src: &str, dst: &str) -> bool {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S")
        .arg(d.socket())
        .args(["-f", "n", "-s", src, "-d", dst]);
    let out = run_bounded(cmd, DEADLINE);
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Path information")
}

/// Sends SIGHUP and waits for the reload's last line (applied or refused); returns
/// what the log gained.
fn reload(d: &mut Daemon, log: &Path) -> String {
    let before = std::fs::read_to_string(log).unwrap_or_default().len();
    let pid = Pid::from_raw(i32::try_from(d.pid()).expect("a pid"));
    kill(pid, Signal::SIGHUP).expect("send SIGHUP");
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let new = text.get(before..).unwrap_or_default();
        if new.contains("config: reloaded: ") || new.contains("reload refused") {
            d.assert_running();
            return new.to_owned();
        }
        d.assert_running();
        assert!(
            start.elapsed() < DEADLINE,
            "no reload logged within {DEADLINE:?}\n{}",
            d.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_adds_and_removes_names_and_refuses_a_malformed_file() {
    let dir = TempDir::new("reload");
    let addr = dir.join("addr.cfg");
    let log = dir.join("ibacm.log");
    std::fs::write(&addr, "node1 mlx5_0 1 default\n").expect("write the address file");
    let mut d = Daemon::start_with(
        dir.path(),
        &format!("sim:{DEMO}:node1"),
        "log_level 1\n",
        &["-A", addr.to_str().expect("utf-8")],
    );
    assert!(resolves(&d, "node1"));
    assert!(!resolves(&d, "node1-extra"), "not a name of ours yet");

    // Added.
    std::fs::write(
        &addr,
        "node1 mlx5_0 1 default\nnode1-extra mlx5_0 1 default\n",
    )
    .expect("write the address file");
    let said = reload(&mut d, &log);
    assert!(
        said.contains("config: reloaded: 1 addresses added, 0 removed\n"),
        "{said}"
    );
    assert!(resolves(&d, "node1-extra"), "the added name is a source");
    assert!(resolves(&d, "node1"));

    // Malformed: a line without its fields and a bad pkey. Nothing of the file is
    // taken, not even its good new name, and the log says where.
    std::fs::write(
        &addr,
        "node1 mlx5_0 1 default\nnode1-extra mlx5_0 1 default\nnode1-more mlx5_0 1 default\n\
         node1-half mlx5_0\nnode1-bad mlx5_0 1 zz\n",
    )
    .expect("write the address file");
    let said = reload(&mut d, &log);
    let shown = addr.display();
    assert!(
        said.contains(&format!(
            "{shown}:4: line ignored: expected '<name> <device> <port> <pkey>'"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("{shown}:5: invalid pkey 'zz'; line skipped")),
        "{said}"
    );
    assert!(
        said.contains("reload refused (2 problems above); the running configuration stays"),
        "{said}"
    );
    assert!(!resolves(&d, "node1-more"), "a refused file adds nothing");
    assert!(resolves(&d, "node1-extra"), "the running names stay");

    // Removed, with log_level 1 -> 2.
    std::fs::write(&addr, "node1 mlx5_0 1 default\n").expect("write the address file");
    std::fs::write(dir.join("ibacm_opts.cfg"), "log_level 2\n").expect("write the options");
    let said = reload(&mut d, &log);
    assert!(
        said.contains("config: reloaded: 0 addresses added, 1 removed, log_level 1 -> 2\n"),
        "{said}"
    );
    assert!(
        !resolves(&d, "node1-extra"),
        "the removed name is no source"
    );
    assert!(resolves(&d, "node1"), "the other name still is");
    // Level 2 logs each client's connection, which level 1 did not.
    let text = std::fs::read_to_string(&log).expect("the log");
    let (before, after) = text
        .split_once("log_level 1 -> 2")
        .expect("the reload line");
    assert!(!before.contains("acm_svr_accept: client"), "{before}");
    assert!(after.contains("acm_svr_accept: client"), "{after}");
    d.assert_running();
}

#[test]
fn options_that_need_a_restart_keep_their_running_value_and_name_their_line() {
    let dir = TempDir::new("reload-opts");
    let log = dir.join("ibacm.log");
    let metrics = dir.join("ibacm.prom");
    let mut d = Daemon::start(dir.path(), &format!("sim:{DEMO}:node1"), "log_level 0\n");
    std::fs::write(
        dir.join("ibacm_opts.cfg"),
        format!(
            "log_level 0\n# moved\nserver_mode loop\nmetrics_file {}\n",
            metrics.display()
        ),
    )
    .expect("write the options");
    let said = reload(&mut d, &log);
    // A daemon option that applies at once: the metrics file is written.
    assert!(
        said.contains(&format!(
            "daemon settings reloaded: metrics file {} every 15 s",
            metrics.display()
        )),
        "{said}"
    );
    let start = Instant::now();
    while !metrics.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "no metrics file\n{}",
            d.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let opts = dir.join("ibacm_opts.cfg");
    assert!(
        said.contains(&format!(
            "{}:3: server_mode changed from unix to loop: needs a restart; unix stays until then",
            opts.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(
            "config: reloaded: 0 addresses added, 0 removed, 1 changed options need a restart"
        ),
        "{said}"
    );
    // Still on the unix socket.
    assert!(resolves(&d, "node1"));
}

#[test]
fn a_fabric_hub_host_reloads_the_address_file_its_run_directory_keeps() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = TempDir::new("reload-hub");
    let hub_sock = dir.join("hub.sock");
    let text = std::fs::read_to_string(DEMO).expect("the demo fabric");
    let spec = acm_io_sim::FabricSpec::parse(&text).expect("the demo fabric parses");
    let mut hub = acm_io_sim::hub::Hub::bind(spec, &hub_sock).expect("bind the hub");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let served = std::thread::spawn(move || hub.serve_until(&flag).map_err(|e| e.to_string()));
    let run = dir.subdir("run");
    let log = run.join("ibacm.log");
    let fabric = format!("hub:{}:node2", hub_sock.display());
    {
        let mut d = Daemon::start(&run, &fabric, "log_level 0\n");
        // Generated at start in the run directory, and read again at a reload.
        let addr = run.join("ibacm_addr.cfg");
        let mut text = std::fs::read_to_string(&addr).expect("the generated address file");
        // A source must be one of the host's names; node2 is, and is its own
        // destination (a loopback path).
        assert!(resolves_to(&d, "node2", "node2"));
        assert!(!resolves_to(&d, "node2-extra", "node2"));
        text.push_str("node2-extra mlx5_0 1 default\n");
        std::fs::write(&addr, text).expect("write the address file");
        let said = reload(&mut d, &log);
        assert!(
            said.contains(&format!(
                "SIGHUP: reading {}",
                run.join("ibacm_opts.cfg").display()
            )) && said.contains(&format!("and {} again", addr.display())),
            "{said}"
        );
        assert!(
            said.contains("config: reloaded: 1 addresses added, 0 removed\n"),
            "{said}"
        );
        assert!(resolves_to(&d, "node2-extra", "node2"));
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(served.join().expect("the hub thread"), Ok(()));
}
