//! `ibacm`'s life as an administrator sees it, as a process: where it logs without an
//! options file and whose options govern it, how SIGTERM and SIGINT stop it (files
//! removed, a last log line, exit 0), what a second instance and a detached start say,
//! and that a failed start leaves no file behind.
//!
//! Unlike the other process tests, these start the daemon without `-O` and without
//! `--log-file` where that is the point; on a simulated fabric the daemon then reads no
//! file of the machine's (see the daemon's `options_source` module), so the tests do
//! not depend on `/etc/rdma`. Every wait is bounded and every daemon is killed when its
//! test ends, a detached one included.

mod support {
    pub(crate) mod programs;
    // Shared with the other process tests; this file needs only a few helpers.
    #[allow(dead_code)]
    pub(crate) mod daemon;
}

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use support::daemon::{Client, DEADLINE, DEMO, IBACM, KillOnDrop, TempDir, header, run_bounded};

/// `ibacm ARGS` in the foreground or not as `args` say, stdout and stderr to files in
/// `dir`; killed on drop.
struct Ibacm {
    child: KillOnDrop,
    out: PathBuf,
    err: PathBuf,
}

impl Ibacm {
    fn spawn(dir: &Path, name: &str, args: &[&str]) -> Self {
        let out = dir.join(format!("{name}.stdout"));
        let err = dir.join(format!("{name}.stderr"));
        let child = Command::new(&*IBACM)
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .spawn()
            .expect("spawn ibacm");
        Self {
            child: KillOnDrop(child),
            out,
            err,
        }
    }

    /// Starts `ibacm -P ARGS` and waits until it says it listens.
    fn start(dir: &Path, name: &str, args: &[&str]) -> Self {
        let mut all = vec!["-P"];
        all.extend_from_slice(args);
        let mut d = Self::spawn(dir, name, &all);
        let start = Instant::now();
        while !d.stdout().contains("listening on") {
            if let Some(s) = d.child.try_wait().expect("try_wait") {
                panic!("ibacm exited with {s}\n{}", d.diagnostics());
            }
            assert!(
                start.elapsed() < DEADLINE,
                "ibacm did not start\n{}",
                d.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn diagnostics(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}",
            self.stdout(),
            std::fs::read_to_string(&self.err).unwrap_or_default()
        )
    }

    fn signal(&self, s: Signal) {
        kill(Pid::from_raw(self.pid() as i32), s).expect("signal the daemon");
    }

    /// Waits for the daemon to exit, failing the test after [`DEADLINE`].
    fn wait(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "ibacm did not exit\n{}",
                self.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Signals the daemon and checks that it exits 0.
    fn stop(mut self, s: Signal) {
        self.signal(s);
        let status = self.wait();
        assert!(
            status.success(),
            "{s} ends in exit 0, not {status}\n{}",
            self.diagnostics()
        );
    }
}

/// A daemon that detached (not our child): killed on drop if still running.
struct Detached(u32);

impl Detached {
    fn running(&self) -> bool {
        Path::new(&format!("/proc/{}", self.0)).exists()
            && !std::fs::read_to_string(format!("/proc/{}/stat", self.0)).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if self.running() {
            let _ = kill(Pid::from_raw(self.0 as i32), Signal::SIGKILL);
        }
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The message part of each log line (after `STAMP: `).
fn log_messages(path: &Path) -> Vec<String> {
    read(path)
        .lines()
        .map(|l| l.get(25..).unwrap_or(l).to_owned())
        .collect()
}

/// A global PERF_QUERY and its reply, on a fresh connection.
fn perf_query(sock: &Path) {
    let mut c = Client::unix(sock);
    let r = c.request(&header(1, 0x02, 16u16.to_be_bytes(), 7));
    assert_eq!(&r[..3], &[1, 0x82, 0], "{r:02x?}");
}

fn run_to_end(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(&*IBACM);
    cmd.args(args);
    run_bounded(cmd, DEADLINE)
}

const RUN_FILES: [&str; 3] = ["ibacm-unix.sock", "ibacm.pid", "ibacm.sock"];

// ---------------------------------------------------------------------------------
// The default log file, the fabric's options, and a clean stop

#[test]
fn a_sim_daemon_without_options_logs_in_its_run_dir_at_the_fabric_level_and_stops_cleanly() {
    let top = TempDir::new("life");
    // Not created beforehand: the daemon makes it.
    let run = top.join("run");
    let run_s = run.to_str().unwrap();
    let log = run.join("ibacm.log");
    let d = Ibacm::start(
        top.path(),
        "first",
        &["--fabric", "sim", "--run-dir", run_s],
    );
    assert_eq!(
        d.stdout(),
        format!(
            "ibacm: listening on {run_s}/ibacm-unix.sock (simulated demo fabric, host node1)\n\
             ibacm: logging to {run_s}/ibacm.log at level 2, options from the built-in demo \
             fabric (testdata/fabrics/demo.toml) host node1\n"
        ),
        "the log is in the run directory, not /var/log"
    );
    let mut want = RUN_FILES.to_vec();
    want.push("ibacm.log");
    want.sort_unstable();
    assert_eq!(names(&run), want);
    perf_query(&run.join("ibacm-unix.sock"));
    let m = log_messages(&log);
    assert_eq!(
        m[..2],
        [
            "main: Assistant to the InfiniBand Communication Manager",
            "main: options from the built-in demo fabric (testdata/fabrics/demo.toml) host node1"
        ]
    );
    assert!(
        m.contains(&"acm_log_options: log level 2".to_owned()),
        "{m:?}"
    );
    // The demo's `log_level 2` governs the logger: a connection is a level-2 line.
    let start = Instant::now();
    while !read(&log).contains("acm_svr_accept: client") {
        assert!(
            start.elapsed() < DEADLINE,
            "no level-2 line:\n{}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    d.stop(Signal::SIGTERM);
    assert_eq!(
        names(&run),
        ["ibacm.log"],
        "socket, symlink and lock file removed"
    );
    assert_eq!(
        log_messages(&log).last().unwrap(),
        "main: exiting on SIGTERM: removed 3 of 3 files"
    );

    // Started again, it appends to the log; SIGINT stops it the same way.
    let before = read(&log);
    let d = Ibacm::start(
        top.path(),
        "second",
        &["--fabric", "sim", "--run-dir", run_s],
    );
    d.stop(Signal::SIGINT);
    let after = read(&log);
    assert!(
        after.starts_with(&before),
        "the log of the daemon started before is kept"
    );
    assert_eq!(
        after.matches("Assistant to the InfiniBand").count(),
        2,
        "{after}"
    );
    assert_eq!(names(&run), ["ibacm.log"]);
    assert_eq!(
        log_messages(&log).last().unwrap(),
        "main: exiting on SIGINT: removed 3 of 3 files"
    );
}

#[test]
fn options_file_and_command_line_take_precedence_over_the_fabric_host_options() {
    let top = TempDir::new("prec");
    let fabric = format!("sim:{DEMO}:node1");

    // The fabric file's host options, named with the file.
    let run = top.subdir("a");
    let d = Ibacm::start(
        top.path(),
        "a",
        &["--fabric", &fabric, "--run-dir", run.to_str().unwrap()],
    );
    d.stop(Signal::SIGTERM);
    let m = log_messages(&run.join("ibacm.log"));
    assert_eq!(m[1], format!("main: options from fabric {DEMO} host node1"));
    assert!(m.contains(&"acm_log_options: log level 2".to_owned()));

    // -O replaces them; its file names no log file, so the log is still the run dir's.
    let run = top.subdir("b");
    let opts = top.join("b.cfg");
    std::fs::write(&opts, "log_level 0\n").unwrap();
    let o = opts.to_str().unwrap();
    let d = Ibacm::start(
        top.path(),
        "b",
        &[
            "--fabric",
            &fabric,
            "--run-dir",
            run.to_str().unwrap(),
            "-O",
            o,
        ],
    );
    perf_query(&run.join("ibacm-unix.sock"));
    d.stop(Signal::SIGTERM);
    let log = read(&run.join("ibacm.log"));
    assert!(
        log.contains(&format!("main: options from {o} (-O)\n")),
        "{log}"
    );
    assert!(log.contains("acm_log_options: log level 0\n"), "{log}");
    assert!(
        !log.contains("acm_svr_accept"),
        "no level-2 line at level 0:\n{log}"
    );

    // A log_file the options name wins over the run directory.
    let run = top.subdir("c");
    let opts = top.join("c.cfg");
    let named = top.join("named.log");
    std::fs::write(&opts, format!("log_file {}\n", named.display())).unwrap();
    let d = Ibacm::start(
        top.path(),
        "c",
        &[
            "--fabric",
            &fabric,
            "--run-dir",
            run.to_str().unwrap(),
            "-O",
            opts.to_str().unwrap(),
        ],
    );
    d.stop(Signal::SIGTERM);
    assert!(read(&named).contains("main: exiting on SIGTERM"));
    assert_eq!(names(&run), Vec::<String>::new(), "no log in the run dir");

    // --log-level beats the fabric's log_level 2.
    let run = top.subdir("d");
    let d = Ibacm::start(
        top.path(),
        "d",
        &[
            "--fabric",
            &fabric,
            "--run-dir",
            run.to_str().unwrap(),
            "--log-level",
            "0",
        ],
    );
    perf_query(&run.join("ibacm-unix.sock"));
    d.stop(Signal::SIGTERM);
    let log = read(&run.join("ibacm.log"));
    assert!(log.contains("acm_log_options: log level 0\n"), "{log}");
    assert!(!log.contains("acm_svr_accept"), "{log}");
}

#[test]
fn in_loop_mode_sigterm_removes_the_port_files() {
    let top = TempDir::new("tcp");
    let run = top.subdir("run");
    let opts = top.join("o.cfg");
    std::fs::write(&opts, "server_mode loop\nserver_port 0\n").unwrap();
    let d = Ibacm::start(
        top.path(),
        "tcp",
        &[
            "--fabric",
            "sim",
            "--run-dir",
            run.to_str().unwrap(),
            "-O",
            opts.to_str().unwrap(),
        ],
    );
    assert_eq!(
        names(&run),
        ["ibacm-tcp.port", "ibacm.log", "ibacm.pid", "ibacm.port"]
    );
    d.stop(Signal::SIGTERM);
    assert_eq!(names(&run), ["ibacm.log"]);
}

#[test]
fn on_a_fabric_hub_sigterm_removes_the_hub_socket_and_keeps_the_generated_address_file() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let top = TempDir::new("hubstop");
    let hub_sock = top.join("hub.sock");
    let spec = acm_io_sim::FabricSpec::parse(&read(Path::new(DEMO))).expect("demo");
    let mut hub = acm_io_sim::hub::Hub::bind(spec, &hub_sock).expect("bind the hub");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let served = std::thread::spawn(move || hub.serve_until(&flag).map_err(|e| e.to_string()));
    let run = top.subdir("run");
    let fabric = format!("hub:{}:node2", hub_sock.display());
    // A hub's hosts take the options file (the machine's by default): an empty one.
    let opts = top.join("empty.cfg");
    std::fs::write(&opts, "").unwrap();
    let d = Ibacm::start(
        top.path(),
        "hub",
        &[
            "--fabric",
            &fabric,
            "--run-dir",
            run.to_str().unwrap(),
            "--log-file",
            "stderr",
            "-O",
            opts.to_str().unwrap(),
        ],
    );
    let mut want = RUN_FILES.to_vec();
    want.extend(["ibacm-hub-node2.sock", "ibacm_addr.cfg"]);
    want.sort_unstable();
    assert_eq!(names(&run), want);
    perf_query(&run.join("ibacm-unix.sock"));
    d.stop(Signal::SIGTERM);
    assert_eq!(
        names(&run),
        ["ibacm_addr.cfg"],
        "the generated address file is configuration, read again at the next start"
    );
    stop.store(true, Ordering::Relaxed);
    assert_eq!(served.join().expect("the hub thread"), Ok(()));
}

// ---------------------------------------------------------------------------------
// The lock, detaching, and failed starts

#[test]
fn a_second_instance_names_the_lock_holder_also_when_detaching() {
    let top = TempDir::new("lock");
    let run = top.subdir("run");
    let r = run.to_str().unwrap();
    let first = Ibacm::start(top.path(), "first", &["--fabric", "sim", "--run-dir", r]);
    let want = format!(
        "ibacm: lock file {r}/ibacm.pid is held by process {}: another ibacm is running there\n",
        first.pid()
    );
    for args in [
        &["-P", "--fabric", "sim", "--run-dir", r][..],
        &["--fabric", "sim", "--run-dir", r][..],
    ] {
        let out = run_to_end(args);
        assert_eq!(out.status.code(), Some(255), "{args:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    assert_eq!(read(&run.join("ibacm.pid")), format!("{}\n", first.pid()));
    perf_query(&run.join("ibacm-unix.sock"));
    first.stop(Signal::SIGTERM);
}

#[test]
fn a_detached_daemon_is_listening_when_the_command_returns() {
    let top = TempDir::new("detach");
    let run = top.join("run");
    let out = run_to_end(&["--fabric", "sim", "--run-dir", run.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let pid: u32 = read(&run.join("ibacm.pid")).trim().parse().expect("a pid");
    let daemon = Detached(pid);
    assert!(daemon.running());
    // No retry: the command returned only once the daemon listened.
    assert!(UnixStream::connect(run.join("ibacm-unix.sock")).is_ok());
    perf_query(&run.join("ibacm-unix.sock"));
    // In a session of its own, in /.
    let stat = read(Path::new(&format!("/proc/{pid}/stat")));
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.to_string(), "session id (setsid): {stat}");
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        Path::new("/")
    );
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    let start = Instant::now();
    while daemon.running() {
        assert!(
            start.elapsed() < DEADLINE,
            "the detached daemon ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(names(&run), ["ibacm.log"]);
}

#[test]
fn a_failed_start_leaves_no_file_behind_and_says_why_also_when_detaching() {
    let top = TempDir::new("fail");
    let bad = top.join("bad.toml");
    std::fs::write(&bad, "hosts = 3\n").unwrap();
    let missing_host = format!("sim:{DEMO}:node9");
    let bad_fabric = format!("sim:{}", bad.display());
    let cases: [(&str, &str); 3] = [
        (
            "sim:/nonexistent.toml",
            "ibacm: cannot read /nonexistent.toml: ",
        ),
        (&bad_fabric, &format!("ibacm: {}: ", bad.display())),
        (
            &missing_host,
            "ibacm: no host node9 in the fabric (hosts: node1, node2, node3)",
        ),
    ];
    for (fabric, message) in cases {
        for foreground in [true, false] {
            let run = top.join("run");
            let mut args = vec!["--fabric", fabric, "--run-dir", run.to_str().unwrap()];
            if foreground {
                args.insert(0, "-P");
            }
            let out = run_to_end(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
            assert!(err.starts_with(message), "{args:?}: {err}");
            assert!(
                !run.exists(),
                "{args:?}: nothing is created, not even the run dir"
            );
        }
    }

    // A failure after the lock was taken (the TCP port is in use): the lock file goes,
    // the log keeps the reason.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let opts = top.join("o.cfg");
    std::fs::write(&opts, format!("server_mode loop\nserver_port {port}\n")).unwrap();
    for foreground in [true, false] {
        let run = top.subdir("busy");
        let mut args = vec!["--fabric", "sim", "--run-dir", run.to_str().unwrap(), "-O"];
        args.push(opts.to_str().unwrap());
        if foreground {
            args.insert(0, "-P");
        }
        let out = run_to_end(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            err.starts_with(&format!("ibacm: cannot listen on 127.0.0.1:{port}: ")),
            "{err}"
        );
        assert_eq!(names(&run), ["ibacm.log"], "{args:?}");
        let last = log_messages(&run.join("ibacm.log")).pop().unwrap();
        assert!(
            last.starts_with("main: exiting: cannot listen on"),
            "{last}"
        );
        std::fs::remove_dir_all(&run).unwrap();
    }
    drop(busy);
}

#[test]
fn a_socket_systemd_passed_survives_sigterm() {
    const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";
    assert!(
        Path::new(ACTIVATE).exists(),
        "{ACTIVATE} is missing: install Debian's `systemd` package (.ci/run does)"
    );
    let top = TempDir::new("sd");
    let sock = top.join("activated.sock");
    let run = top.join("run");
    let log = top.join("ibacm.log");
    let child = Command::new(ACTIVATE)
        .arg("-l")
        .arg(&sock)
        .arg(&*IBACM)
        .args(["--systemd", "--fabric", "sim", "--run-dir"])
        .arg(&run)
        .arg("--log-file")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate starts");
    let mut d = Ibacm {
        child: KillOnDrop(child),
        out: top.join("none.stdout"),
        err: top.join("none.stderr"),
    };
    let start = Instant::now();
    // The first connection makes systemd-socket-activate exec the daemon in its place.
    while UnixStream::connect(&sock).is_err() {
        assert!(
            start.elapsed() < DEADLINE,
            "the activation socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    perf_query(&sock);
    assert!(run.join("ibacm.pid").exists());
    d.signal(Signal::SIGTERM);
    assert!(d.wait().success());
    assert!(
        std::fs::symlink_metadata(&sock).is_ok(),
        "the socket systemd passed is the socket unit's: it stays"
    );
    assert!(
        !run.join("ibacm.pid").exists(),
        "the lock file is ours: it goes"
    );
    assert!(read(&log).contains("main: exiting on SIGTERM"));
}
