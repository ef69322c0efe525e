//! Debian's `ib_acme`, and ours, against our daemon on the reference fabric: for every
//! shared real-ibacm case, the same command (service name substituted) must print what
//! Debian's printed against the real daemon, exit status included, with the cases run
//! in the recorded order so that the perf counters match. Each client gets a daemon of
//! its own, so both see the same counters.
//!
//! The daemon runs through `testdata/reference-fabric/run-daemon.sh`, as a user
//! would. Debian's `ib_acme` comes from the `ibacm` package, which `.ci/run` installs.
//!
//! With the `verbs` feature the same cases also run against the daemon's hardware
//! backend (no `--fabric`) on the emulated HCA (`acm-io-verbs/fake-hca`, preloaded),
//! attached as the reference host to a hub serving the same fabric: everything from
//! verbs, umad and sysfs up is then the code that runs on real InfiniBand hosts.

#[path = "support/programs.rs"]
mod programs;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DEBIAN_IB_ACME: &str = "/usr/bin/ib_acme";
/// The service name the captures were recorded through.
const CAPTURED_SERVICE: &str = "/tmp/acmproxy.sock";

// Shared with acm-engine/tests/replay.rs, where it is a public support module.
#[allow(unreachable_pub)]
#[path = "../../../acm-engine/tests/support/capture_order.rs"]
mod capture_order;

use capture_order::{FRESH, ORDER, UNSHIPPED, unshipped_requests};

#[cfg(feature = "verbs")]
#[path = "support/fake_hca.rs"]
mod fake_hca;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A daemon started by run-daemon.sh (or on the emulated HCA), killed on drop.
struct Daemon {
    child: Child,
    dir: PathBuf,
    /// The hub the emulated HCA is attached to, stopped after the daemon.
    #[cfg(feature = "verbs")]
    _hub: Option<fake_hca::RunningHub>,
}

fn run_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acm-ref-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("run dir");
    dir
}

impl Daemon {
    fn start(tag: &str) -> Self {
        let dir = run_dir(tag);
        let child = Command::new(repo().join("testdata/reference-fabric/run-daemon.sh"))
            .arg(&dir)
            .env("IBACM", env!("CARGO_BIN_EXE_ibacm"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run-daemon.sh starts");
        Self::wait(Self {
            child,
            dir,
            #[cfg(feature = "verbs")]
            _hub: None,
        })
    }

    /// Our daemon's hardware backend on the emulated HCA, as the reference host of a
    /// hub serving the reference fabric, with run-daemon.sh's files.
    #[cfg(feature = "verbs")]
    fn start_emulated(tag: &str) -> Self {
        Self::start_emulated_with(tag, |_| String::new())
    }

    /// As [`Daemon::start_emulated`], with the options `extra` gives for the run
    /// directory appended.
    #[cfg(feature = "verbs")]
    fn start_emulated_with(tag: &str, extra: impl FnOnce(&Path) -> String) -> Self {
        let dir = run_dir(tag);
        let here = repo().join("testdata/reference-fabric");
        let fabric = here.join("fabric.toml");
        let hub = fake_hca::RunningHub::start(&fabric, dir.join("hub.sock"));
        let (sysfs, dev) = (dir.join("sys"), dir.join("dev"));
        fake_hca::write_sysfs(&fabric, "fakehost", &sysfs);
        std::fs::create_dir_all(&dev).expect("dev dir");
        let mut opts = std::fs::read_to_string(here.join("ibacm_opts.cfg")).expect("options");
        opts.push_str(&format!(
            "log_file {}\naddr_data_file {}\n",
            dir.join("ibacm.log").display(),
            here.join("ibacm_hosts.data").display()
        ));
        opts.push_str(&extra(&dir));
        std::fs::write(dir.join("ibacm_opts.cfg"), opts).expect("options file");
        let child = Command::new(env!("CARGO_BIN_EXE_ibacm"))
            .arg("-P")
            .arg("--run-dir")
            .arg(&dir)
            .arg("-O")
            .arg(dir.join("ibacm_opts.cfg"))
            .arg("-A")
            .arg(here.join("ibacm_addr.cfg"))
            .envs(fake_hca::env(&hub.path, "fakehost", &sysfs, &dev))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ibacm starts");
        Self::wait(Self {
            child,
            dir,
            _hub: Some(hub),
        })
    }

    fn wait(d: Self) -> Self {
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(d.socket()).is_err() {
            assert!(
                Instant::now() < deadline,
                "the daemon did not listen in 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The endpoint joins its multicast groups within a few SA round trips.
        std::thread::sleep(Duration::from_millis(200));
        d
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("ibacm-unix.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ibacm.log")).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The captured command's arguments, its output and its exit status.
struct Case {
    args: Vec<String>,
    output: String,
    status: i32,
}

fn case(name: &str) -> Case {
    let path = repo().join(format!(
        "testdata/captures/real-ibacm/{name}.client-output.txt"
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines: Vec<&str> = text.lines().collect();
    let cmd = lines
        .remove(0)
        .strip_prefix("$ ib_acme ")
        .expect("command line");
    let last = lines.pop().expect("status line");
    let status = last
        .strip_prefix("[exit status: ")
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{name}: status line {last:?}"));
    let mut output = lines.join("\n");
    output.push('\n');
    Case {
        args: cmd.split_whitespace().map(str::to_owned).collect(),
        output,
        status,
    }
}

/// Runs ib_acme binary `bin` with the case's arguments against `socket`; stdout and
/// stderr interleaved as the capture recorded them.
fn run_ib_acme(bin: &str, args: &[String], socket: &Path) -> (String, i32) {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace(CAPTURED_SERVICE, &socket.display().to_string()))
        .collect();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {bin} \"$@\" 2>&1"))
        .arg("ib_acme")
        .args(&args)
        .output()
        .expect("ib_acme runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn check_case(bin: &str, d: &Daemon, name: &str) {
    let c = case(name);
    let (got, status) = run_ib_acme(bin, &c.args, &d.socket());
    let want = c
        .output
        .replace(CAPTURED_SERVICE, &d.socket().display().to_string());
    assert_eq!(
        (got.as_str(), status),
        (want.as_str(), c.status),
        "{name} with {bin}: output differs\ndaemon log:\n{}",
        d.log()
    );
}

/// One raw request on its own connection; returns the reply.
fn raw_request(socket: &Path, msg: &[u8]) -> Vec<u8> {
    let mut s = UnixStream::connect(socket).expect("connect");
    // Behind the NODELAY cases' lookups, which still retry (resolve_depth 1).
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(msg).unwrap();
    let mut hdr = [0u8; 16];
    s.read_exact(&mut hdr).expect("reply header");
    // The daemon writes a reply's length as the reference does, in host order for
    // some replies (error replies to RESOLVE among them) and big-endian for others;
    // only one reading is a message size.
    let raw = [hdr[6], hdr[7]];
    let host = usize::from(u16::from_ne_bytes(raw));
    let len = if (16..=592).contains(&host) {
        host
    } else {
        usize::from(u16::from_be_bytes(raw))
    };
    let mut body = vec![0u8; len.saturating_sub(16)];
    s.read_exact(&mut body).expect("reply body");
    let mut all = hdr.to_vec();
    all.extend(body);
    all
}

fn unshipped(d: &Daemon) {
    for (req, status) in unshipped_requests() {
        let r = raw_request(&d.socket(), &req);
        assert_eq!(r[2], status, "unshipped request\n{}", d.log());
    }
}

fn require_ib_acme() {
    assert!(
        Path::new(DEBIAN_IB_ACME).exists(),
        "{DEBIAN_IB_ACME} is missing: install Debian's `ibacm` package (.ci/run does)"
    );
}

fn replay_all(bin: &str, tag: &str) {
    replay_on(bin, &Daemon::start(tag));
}

fn replay_on(bin: &str, d: &Daemon) {
    for name in ORDER {
        if *name == UNSHIPPED {
            unshipped(d);
        } else {
            check_case(bin, d, name);
        }
        // The capture run's commands came one after another; let background lookups
        // (an ACM request still retrying after a NODELAY reply) settle as they did.
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn debian_ib_acme_prints_the_captured_output_for_every_case() {
    require_ib_acme();
    replay_all(DEBIAN_IB_ACME, "debian");
}

#[test]
fn our_ib_acme_prints_the_captured_output_for_every_case() {
    replay_all(
        programs::program("ib_acme").to_str().expect("a UTF-8 path"),
        "ours",
    );
}

#[test]
fn a_fresh_daemon_reports_the_captured_first_perf_row() {
    require_ib_acme();
    let ours = programs::program("ib_acme");
    for (bin, tag) in [
        (DEBIAN_IB_ACME, "fresh-debian"),
        (ours.to_str().expect("a UTF-8 path"), "fresh-ours"),
    ] {
        let d = Daemon::start(tag);
        check_case(bin, &d, FRESH);
    }
}

#[cfg(feature = "verbs")]
#[test]
fn debian_ib_acme_on_the_hardware_backend_with_an_emulated_hca_prints_every_case() {
    require_ib_acme();
    replay_on(DEBIAN_IB_ACME, &Daemon::start_emulated("hw-debian"));
}

#[cfg(feature = "verbs")]
#[test]
fn a_fresh_hardware_backend_reports_the_captured_first_perf_row() {
    require_ib_acme();
    check_case(DEBIAN_IB_ACME, &Daemon::start_emulated("hw-fresh"), FRESH);
}

/// Debian's own provider (package `ibacm`), run by our daemon instead of the built-in.
#[cfg(feature = "verbs")]
const DEBIAN_LIBIBACMP: &str = "/usr/lib/x86_64-linux-gnu/ibacm/libibacmp.so";

/// Our hardware backend on the emulated HCA with Debian's `libibacmp.so` serving
/// (`builtin_provider no`): the C provider opens its own verbs objects on the device's
/// context and sends its SA queries through the core, as under the reference daemon.
/// No mount namespace is needed: libibacmp opens no file under `/sys` or `/dev` itself
/// (its `umad_init` does nothing), so the emulation's `ACM_SYSFS_ROOT` tree is all it
/// sees, through the core.
#[cfg(feature = "verbs")]
fn start_with_libibacmp(tag: &str) -> Daemon {
    assert!(
        Path::new(DEBIAN_LIBIBACMP).exists(),
        "{DEBIAN_LIBIBACMP} is missing: install Debian's `ibacm` package (.ci/run does)"
    );
    Daemon::start_emulated_with(tag, |dir| {
        let libs = dir.join("providers");
        std::fs::create_dir_all(&libs).expect("provider directory");
        // A copy: the loader skips symbolic links, as the reference does.
        std::fs::copy(DEBIAN_LIBIBACMP, libs.join("libibacmp.so")).expect("copy libibacmp");
        format!(
            "provider_lib_path {}\nbuiltin_provider no\n",
            libs.display()
        )
    })
}

#[cfg(feature = "verbs")]
#[test]
fn debian_libibacmp_in_our_daemon_on_the_emulated_hca_prints_every_case() {
    require_ib_acme();
    let d = start_with_libibacmp("hw-libibacmp");
    assert!(
        d.log().contains("libibacmp.so: loaded provider 'ibacmp'"),
        "{}",
        d.log()
    );
    replay_on(DEBIAN_IB_ACME, &d);
}

#[cfg(feature = "verbs")]
#[test]
fn debian_libibacmp_in_a_fresh_daemon_reports_the_captured_first_perf_row() {
    require_ib_acme();
    check_case(
        DEBIAN_IB_ACME,
        &start_with_libibacmp("hw-libibacmp-fresh"),
        FRESH,
    );
}

#[test]
fn every_shipped_case_is_run() {
    let dir = repo().join("testdata/captures/real-ibacm");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(case) = name.strip_suffix(".client-output.txt") {
            assert!(ORDER.contains(&case) || case == FRESH, "{case} is not run");
        }
    }
}
