//! The README's commands, run as written, so that an example that stops working (the
//! way the `--mix` example once timed out) fails a test.
//!
//! Every command of every ```sh block of README.md is either run here, in README order,
//! or in [`NOT_RUN`] with the reason; a new command must be one or the other. Running
//! one translates it mechanically into its equivalent in a test: `cargo run … --bin X
//! --` becomes the binary cargo built for this test, `ib_acme` is Debian's, paths under
//! `/tmp/` move into a temporary directory, `--duration N` becomes 1 second, the fixed
//! TCP port 6125 becomes a free one, and relative paths are read from the workspace
//! root. A daemon (`ibacm -P`) or a command ending in `&` is left running until the
//! end, when the daemons are stopped with SIGTERM and must exit 0 (a daemon on the run
//! directory of one still running stops that one first, as its reader would with
//! Ctrl-C); every other command must exit 0.
//!
//! `testdata/reference-fabric/run-daemon.sh`, which the README names, is checked here
//! too: it must run the binary cargo reports having built, wherever the target
//! directory is.

mod support {
    pub(crate) mod programs;
    // Shared with the other process tests; this file needs only a few helpers.
    #[allow(dead_code)]
    pub(crate) mod daemon;
}

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::daemon::{DEADLINE, KillOnDrop, TempDir, ib_acme};

/// README commands this test does not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "apt-get install -y ibacm systemd pkg-config libibverbs-dev libibumad-dev librdmacm-dev libclang-dev",
        "installs packages (as root); CI's .ci/run does it",
    ),
    (
        "ACM_WORKER_THREADS=2 cargo test --workspace",
        "the test suite itself, every daemon with two worker threads",
    ),
    (
        "ACM_WORKER_THREADS=1 cargo test -p acm-io-verbs -p ibacm --features ibacm/verbs",
        "the test suite itself, with the verbs feature and without worker threads (CI)",
    ),
    (
        "cargo build --release -p ibacm -p ib_acme -p acmdump -p acm-load --features ibacm/verbs",
        "a release build with libibverbs (CI builds it)",
    ),
    (
        "sudo packaging/install.sh",
        "installs into /usr/local as root; CI checks the install and the package",
    ),
    (
        "packaging/install.sh --prefix /usr --destdir /tmp/stage",
        "a release build and a staged install (minutes); CI runs it",
    ),
    (
        "packaging/deb/build.sh .",
        "builds the Debian package (a release build with verbs); CI runs it",
    ),
    (
        "packaging/deb/check.sh acm-rs_*.deb",
        "checks the package build.sh made; CI runs it",
    ),
    (
        "sudo apt install ./acm-rs_*.deb",
        "installs the package as root",
    ),
    (
        "ACM_SIM_SEED=0x1234 cargo test -p acm-io-sim --test scenarios_faults",
        "another crate's test suite",
    ),
    (
        "cargo run --release -p acm-fabric-hub -- --fabric testdata/fabrics/demo.toml --socket /tmp/fabric.sock",
        "another package's binary, tested by acm-io-sim/fabric-hub/tests/binary.rs",
    ),
    (
        "cargo run --release -p fabric-bench -- --hosts 1024 --pattern all-to-all",
        "a benchmark of another package (minutes in a debug build)",
    ),
    (
        "sudo ACM_HW_LOCAL_IP=192.168.10.1 ACM_HW_PEER_IP=192.168.10.2 cargo test -p ibacm --features hw-tests --test hw_two_host -- --test-threads 1",
        "needs two hosts with InfiniBand",
    ),
    (
        "cargo test -p ibacm --features ibacm/verbs --test daemon_reference --test hw_emulated_fabric --test hw_hotplug --test hw_emulated_providers --test hw_rdmacm",
        "the test suite itself, with the verbs feature (CI)",
    ),
    (
        "cargo test -p ibacm --features ibacm/verbs --test hw_emulated_providers --test daemon_reference",
        "the test suite itself, with the verbs feature (CI)",
    ),
    (
        "cargo build -p acm-fake-hca -p acm-fabric-hub -p ibacm --features ibacm/verbs",
        "a build with libibverbs; the emulated-HCA tests build what they need",
    ),
    (
        "target/debug/acm-fabric-hub --fabric testdata/fabrics/demo.toml --socket /tmp/fabric.sock &",
        "the emulated-host walkthrough: acm-daemon/ibacm/tests/hw_emulated_fabric.rs does the same",
    ),
    (
        "target/debug/acm-fake-hca-sysfs testdata/fabrics/demo.toml node1 /tmp/node1/sys",
        "the emulated-host walkthrough (as above)",
    ),
    (
        "mkdir -p /tmp/node1/dev",
        "the emulated-host walkthrough (as above)",
    ),
    (
        "ACM_FAKE_HCA_HUB=/tmp/fabric.sock ACM_FAKE_HCA_HOST=node1 ACM_SYSFS_ROOT=/tmp/node1/sys ACM_DEV_ROOT=/tmp/node1/dev LD_PRELOAD=target/debug/libacm_fake_hca.so target/debug/ibacm -P --run-dir /tmp/node1 &",
        "the emulated-host walkthrough (as above; needs the verbs build)",
    ),
    (
        "ib_acme -S /tmp/node1/ibacm-unix.sock -f l -d 2",
        "the emulated-host walkthrough (as above)",
    ),
    (
        "target/debug/acm-fabric-hub change --socket /tmp/fabric.sock port-down node1",
        "the emulated-host walkthrough; acm-io-sim/fabric-hub/tests/binary.rs runs the subcommand",
    ),
    (
        "target/debug/acm-fabric-hub change --socket /tmp/fabric.sock port-up node1",
        "the emulated-host walkthrough (as above)",
    ),
];

/// The commands of README.md's ```sh blocks, continuation lines joined and trailing
/// comments removed, in order.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        if line.trim_start().starts_with('#') {
            continue;
        }
        let line = line.split(" #").next().unwrap_or(line).trim();
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        if !pending.is_empty() {
            out.push(std::mem::take(&mut pending));
        }
    }
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary cargo built for this test run.
fn our_binary(name: &str) -> PathBuf {
    match name {
        "ibacm" | "ib_acme" | "acmdump" | "acm-load" => support::programs::program(name),
        other => panic!("the README runs an unknown binary {other}"),
    }
}

/// Shell words, with single quotes (all the README uses).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// What the README's paths and fixed values become in this test.
struct Env {
    tmp: TempDir,
    port: u16,
}

impl Env {
    fn arg(&self, w: &str) -> String {
        let w = match w.strip_prefix("/tmp/") {
            Some(rest) => format!("{}/{rest}", self.tmp.path().display()),
            None => w.to_owned(),
        };
        w.replace("127.0.0.1:6125", &format!("127.0.0.1:{}", self.port))
    }

    /// The command for README words `w` (a program and its arguments).
    fn command(&self, w: &[String]) -> (Command, String) {
        let (program, rest) = match w {
            [cargo, run, rest @ ..] if cargo == "cargo" && run == "run" => {
                // Each program is its own package, named after it: `cargo run -p NAME`.
                let bin = rest
                    .iter()
                    .position(|a| a == "-p")
                    .map(|i| rest[i + 1].as_str())
                    .expect("cargo run -p NAME");
                let dashes = rest.iter().position(|a| a == "--").expect("cargo run … --");
                (our_binary(bin).display().to_string(), &rest[dashes + 1..])
            }
            [ib, rest @ ..] if ib == "ib_acme" => (ib_acme().to_owned(), rest),
            other => panic!("no translation for {other:?}"),
        };
        let mut args = Vec::new();
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            args.push(self.arg(a));
            if a == "--duration" {
                it.next();
                args.push("1".to_owned());
            }
        }
        let mut cmd = Command::new(&program);
        cmd.args(&args).current_dir(root());
        let shown = format!("{program} {}", args.join(" "));
        (cmd, shown)
    }
}

/// A process left running until the end of the test.
struct Running {
    child: KillOnDrop,
    what: String,
    daemon: bool,
    /// A daemon's `--run-dir`.
    run_dir: Option<String>,
}

impl Running {
    /// Stops a daemon with SIGTERM; it must exit 0.
    fn stop(&mut self) {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            assert!(start.elapsed() < DEADLINE, "{} ignored SIGTERM", self.what);
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "{}: {status}", self.what);
    }
}

fn run(mut cmd: Command, stdin: Option<&str>, what: &str) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    // acm-load's mix example takes about 13 s; leave it room on a loaded machine.
    let limit = Duration::from_secs(60);
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Waits until `ok` holds, or fails naming `what`.
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_readme_command_runs_as_written() {
    let env = Env {
        tmp: TempDir::new("readme"),
        port: std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port(),
    };
    let commands = readme_commands();
    let skipped: Vec<&str> = NOT_RUN.iter().map(|(c, _)| *c).collect();
    for (c, why) in NOT_RUN {
        assert!(
            commands.iter().any(|x| x == c),
            "NOT_RUN lists a command the README no longer has ({why}): {c}"
        );
    }
    let mut running: Vec<Running> = Vec::new();
    let mut ran = 0;
    for line in &commands {
        if skipped.contains(&line.as_str()) {
            continue;
        }
        ran += 1;
        let mut w = words(line);
        let background = w.last().is_some_and(|l| l == "&");
        if background {
            w.pop();
        }
        // printf 'TEXT' > FILE
        if w[0] == "printf" {
            assert_eq!((w.len(), w[2].as_str()), (4, ">"), "{line}");
            let mut text = w[1].replace("\\n", "\n");
            if text.contains("server_mode loop") {
                // The README's port 6125 is fixed; the test's is free.
                text.push_str(&format!("server_port {}\n", env.port));
            }
            std::fs::write(env.arg(&w[3]), text).expect("printf's file");
            continue;
        }
        // echo 'TEXT' | COMMAND
        let (stdin, w) = match w.iter().position(|x| x == "|") {
            Some(i) => {
                assert_eq!((i, w[0].as_str()), (2, "echo"), "{line}");
                (Some(format!("{}\n", w[1])), w[i + 1..].to_vec())
            }
            None => (None, w),
        };
        let (mut cmd, what) = env.command(&w);
        let is_daemon = what.starts_with(&our_binary("ibacm").display().to_string());
        let run_dir = w
            .iter()
            .position(|a| a == "--run-dir")
            .map(|i| env.arg(&w[i + 1]));
        if is_daemon && let Some(i) = running.iter().position(|r| r.run_dir == run_dir) {
            running.remove(i).stop();
        }
        if is_daemon || background {
            let out = env.tmp.join(&format!("bg{ran}.stdout"));
            cmd.stdin(Stdio::null())
                .stdout(std::fs::File::create(&out).expect("stdout file"))
                .stderr(Stdio::null());
            let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
            running.push(Running {
                child: KillOnDrop(child),
                what: what.clone(),
                daemon: is_daemon,
                run_dir: run_dir.filter(|_| is_daemon),
            });
            if is_daemon {
                wait_for(&format!("{what} never said it listens"), || {
                    std::fs::read_to_string(&out).is_ok_and(|t| t.contains("listening on"))
                });
                let said = std::fs::read_to_string(&out).unwrap();
                if line.ends_with("--run-dir /tmp/acm") {
                    // The README quotes this line.
                    let dir = env.tmp.join("acm");
                    assert_eq!(
                        said.lines().next().unwrap(),
                        format!(
                            "ibacm: listening on {}/ibacm-unix.sock (simulated demo fabric, \
                             host node1)",
                            dir.display()
                        )
                    );
                }
            } else if let Some(i) = w.iter().position(|a| a == "--echo-server") {
                let sock = env.arg(&w[i + 1]);
                wait_for(&format!("{what} never listened on {sock}"), || {
                    UnixStream::connect(&sock).is_ok()
                });
            }
            continue;
        }
        let out = run(cmd, stdin.as_deref(), &what);
        assert!(
            out.status.success(),
            "README: {line}\nran: {what}\nexit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(ran >= 10, "only {ran} README commands ran: {commands:?}");
    for mut r in running {
        if r.daemon {
            r.stop();
        }
    }
}

/// `run-daemon.sh` without `$IBACM` builds the daemon and runs the binary cargo reports,
/// so `CARGO_TARGET_DIR` (or a configured target-dir) is honoured. Cargo itself is
/// stood in for by a script that answers as `cargo build --message-format=json` does,
/// naming a binary in a target directory of the test's: a real nested build could
/// rebuild, under other tests' feet, the very binary they run.
#[test]
fn run_daemon_sh_runs_the_binary_cargo_reports() {
    let tmp = TempDir::new("rundaemon");
    let bin = tmp.subdir("bin");
    let target = tmp.subdir("elsewhere/debug");
    let daemon = target.join("ibacm");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ibacm"), &daemon).expect("symlink");
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n\
             echo '{{\"reason\":\"compiler-artifact\",\"target\":{{\"kind\":[\"lib\"],\
             \"name\":\"acm_daemon\"}},\"executable\":null,\"fresh\":true}}'\n\
             echo '{{\"reason\":\"compiler-artifact\",\"target\":{{\"kind\":[\"bin\"],\
             \"name\":\"ibacm\"}},\"filenames\":[\"{0}\"],\"executable\":\"{0}\",\
             \"fresh\":true}}'\n\
             echo '{{\"reason\":\"build-finished\",\"success\":true}}'\n",
            daemon.display()
        ),
    )
    .expect("the stand-in cargo");
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let run = tmp.join("run");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tmp.join("script.stdout");
    let mut child = Running {
        child: KillOnDrop(
            Command::new(root().join("testdata/reference-fabric/run-daemon.sh"))
                .arg(&run)
                .env_remove("IBACM")
                .env("PATH", path)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&out).expect("stdout"))
                .stderr(Stdio::null())
                .spawn()
                .expect("run-daemon.sh starts"),
        ),
        what: "run-daemon.sh".into(),
        daemon: true,
        run_dir: None,
    };
    wait_for("run-daemon.sh's daemon never listened", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("listening on"))
    });
    // The script execs the daemon, so its pid is the daemon's, and its argv[0] is the
    // path the script chose: the one cargo reported, not target/debug/ibacm.
    let pid = child.child.id();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    assert_eq!(Path::new(std::str::from_utf8(argv0).unwrap()), daemon);
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
    assert_eq!(exe, Path::new(env!("CARGO_BIN_EXE_ibacm")));
    kill(Pid::from_raw(child.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    wait_for("the daemon ignored SIGTERM", || {
        child.child.try_wait().ok().flatten().is_some()
    });
}
