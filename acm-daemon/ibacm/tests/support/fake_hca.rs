//! Running our `ibacm` on its hardware backend without hardware: the emulated HCA
//! (`acm-io-verbs/fake-hca`, an `LD_PRELOAD` library) attached to a fabric hub that
//! runs in the test process, with the host's sysfs tree generated from the fabric
//! description.
//!
//! The library and the sysfs generator are built on first use with the cargo that runs
//! the tests (same profile and target directory), so `cargo test` on a clean checkout
//! needs nothing more.

#![allow(dead_code, unreachable_pub)]

use acm_io_sim::FabricSpec;
use acm_io_sim::hub::Hub;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread;
use std::time::Duration;

/// The built emulation.
#[derive(Debug, Clone)]
pub struct Artifacts {
    /// `libacm_fake_hca.so`.
    pub library: PathBuf,
    /// `acm-fake-hca-sysfs`.
    pub sysfs: PathBuf,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the emulated HCA once per test process and says where it is.
pub fn artifacts() -> &'static Artifacts {
    static BUILT: OnceLock<Artifacts> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace())
            .args(["build", "-q", "-p", "acm-fake-hca"])
            .arg("--message-format=json-render-diagnostics")
            .stderr(Stdio::inherit());
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cargo runs");
        assert!(out.status.success(), "cargo build -p acm-fake-hca failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let find = |suffix: &str| {
            text.split('"')
                .find(|s| s.starts_with('/') && s.ends_with(suffix))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("cargo did not report {suffix}"))
        };
        Artifacts {
            library: find("/libacm_fake_hca.so"),
            sysfs: find("/acm-fake-hca-sysfs"),
        }
    })
}

/// Writes host `host`'s sysfs tree of the fabric at `fabric` under `dir`.
pub fn write_sysfs(fabric: &Path, host: &str, dir: &Path) {
    let st = Command::new(&artifacts().sysfs)
        .arg(fabric)
        .arg(host)
        .arg(dir)
        .status()
        .expect("acm-fake-hca-sysfs runs");
    assert!(st.success(), "acm-fake-hca-sysfs {host} failed");
}

/// A hub serving a fabric from a thread of the test; stopped on drop.
pub struct RunningHub {
    /// Its socket.
    pub path: PathBuf,
    /// The description of the fabric it serves.
    pub fabric: PathBuf,
    flag: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
}

impl RunningHub {
    /// Serves the fabric described at `fabric` on `path`.
    pub fn start(fabric: &Path, path: PathBuf) -> Self {
        let text = std::fs::read_to_string(fabric).expect("fabric file");
        let spec = FabricSpec::parse(&text).expect("valid fabric");
        let mut hub = Hub::bind(spec, &path).expect("bind the hub");
        let flag = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let f = Arc::clone(&flag);
        thread::spawn(move || {
            if let Err(e) = hub.serve_until(&f) {
                eprintln!("hub: {e}");
            }
            drop(hub);
            let _ = tx.send(());
        });
        Self {
            path,
            fabric: fabric.to_owned(),
            flag,
            done,
        }
    }
}

impl Drop for RunningHub {
    fn drop(&mut self) {
        self.flag.store(true, Ordering::Relaxed);
        let _ = self.done.recv_timeout(Duration::from_secs(5));
    }
}

/// The environment that makes a process host `host` of `hub` on the emulated HCA,
/// its sysfs tree at `sysfs` and its umad nodes under `dev`.
pub fn env(hub: &Path, host: &str, sysfs: &Path, dev: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("LD_PRELOAD", artifacts().library.clone()),
        ("ACM_FAKE_HCA_HUB", hub.to_owned()),
        ("ACM_FAKE_HCA_HOST", PathBuf::from(host)),
        ("ACM_SYSFS_ROOT", sysfs.to_owned()),
        ("ACM_DEV_ROOT", dev.to_owned()),
    ]
}

/// Our `ibacm` on its hardware backend, as host `host` of a hub on the emulated HCA,
/// in its own directory; killed on drop.
pub struct EmulatedHost {
    child: std::process::Child,
    dir: PathBuf,
}

/// How long a daemon may take to listen and to join its groups.
const START_LIMIT: Duration = Duration::from_secs(20);

/// Makes a change of the hub's fabric (the hub answers once the hosts concerned have
/// been told), from a control socket beside the hub's.
pub fn change(hub: &Path, change: acm_io_sim::hub::wire::Control) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let me = hub.with_file_name(format!("control-{n}.sock"));
    if let Err(e) = acm_io_sim::hub::control::change(hub, &me, &change) {
        panic!("the hub refused {change:?}: {e}");
    }
}

/// Removes device `device` from the sysfs tree at `sysfs`, as when its driver is not
/// loaded yet: its directory and its umad nodes.
pub fn unplug_sysfs(sysfs: &Path, device: &str) {
    let ib = sysfs.join("class/infiniband");
    std::fs::remove_dir_all(ib.join(device)).expect("device directory");
    let mad = sysfs.join("class/infiniband_mad");
    for e in std::fs::read_dir(&mad).expect("umad class").flatten() {
        let ibdev = std::fs::read_to_string(e.path().join("ibdev")).unwrap_or_default();
        if ibdev.trim() == device {
            std::fs::remove_dir_all(e.path()).expect("umad node");
        }
    }
}

/// The demo fabric (`testdata/fabrics/demo.toml`): node1, node2 and node3 at
/// 10.0.0.1-3, LIDs 1-3.
pub fn demo() -> PathBuf {
    workspace().join("testdata/fabrics/demo.toml")
}

/// Demo host `n`'s address file: its name and its IPv4 address on its one port.
pub fn demo_addr_file(n: u16) -> String {
    format!("node{n} mlx5_0 1 default\n10.0.0.{n} mlx5_0 1 default\n")
}

/// What the daemon logs once an endpoint joined its multicast groups.
pub const JOINED: &str = "join successful";

/// How an [`EmulatedHost`] is started: the required parts from
/// [`EmulatedHost::config`], the rest set by the methods, then [`HostConfig::start`].
pub struct HostConfig<'a> {
    dir: PathBuf,
    hub: &'a RunningHub,
    host: &'a str,
    options: String,
    addr_file: String,
    env: &'a [(&'a str, &'a str)],
    ready: &'a str,
    unplugged: &'a [&'a str],
    wrapper: &'a [&'a str],
}

impl<'a> HostConfig<'a> {
    /// More environment for the daemon (the emulated HCA's knobs).
    pub fn env(mut self, env: &'a [(&'a str, &'a str)]) -> Self {
        self.env = env;
        self
    }

    /// What the log says once the host is ready (default: its first endpoint joined).
    pub fn ready(mut self, what: &'a str) -> Self {
        self.ready = what;
        self
    }

    /// Devices missing from the host's sysfs tree at start; the daemon finds them when
    /// they are written back.
    pub fn unplugged(mut self, devices: &'a [&'a str]) -> Self {
        self.unplugged = devices;
        self
    }

    /// Runs the daemon through `wrapper`, a program and its arguments with the daemon's
    /// command line appended (`setpriv ... --`).
    pub fn wrapper(mut self, wrapper: &'a [&'a str]) -> Self {
        self.wrapper = wrapper;
        self
    }

    /// Starts the daemon and waits until it listens and its log says what
    /// [`HostConfig::ready`] names.
    pub fn start(self) -> EmulatedHost {
        let dir = &self.dir;
        let (sysfs, dev) = (dir.join("sys"), dir.join("dev"));
        write_sysfs(&self.hub.fabric, self.host, &sysfs);
        for d in self.unplugged {
            unplug_sysfs(&sysfs, d);
        }
        std::fs::create_dir_all(&dev).expect("dev dir");
        let log = dir.join("ibacm.log");
        let opts = dir.join("ibacm_opts.cfg");
        std::fs::write(
            &opts,
            format!("{}\nlog_file {}\n", self.options, log.display()),
        )
        .expect("options file");
        let addr = dir.join("ibacm_addr.cfg");
        std::fs::write(&addr, &self.addr_file).expect("address file");
        let mut cmd = match self.wrapper {
            [] => Command::new(env!("CARGO_BIN_EXE_ibacm")),
            [program, args @ ..] => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_ibacm"));
                c
            }
        };
        let child = cmd
            .arg("-P")
            .arg("--run-dir")
            .arg(dir)
            .arg("-O")
            .arg(&opts)
            .arg("-A")
            .arg(&addr)
            .envs(env(&self.hub.path, self.host, &sysfs, &dev))
            .envs(self.env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ibacm starts");
        let h = EmulatedHost {
            child,
            dir: self.dir,
        };
        h.wait_log(self.ready);
        h.wait_for(&format!("{} to listen", self.host), || {
            std::os::unix::net::UnixStream::connect(h.socket()).is_ok()
        });
        h
    }
}

impl EmulatedHost {
    /// Host `host` of the fabric `hub` serves, run in `dir` with `options` (the log
    /// file is added) and the address file `addr_file`; [`HostConfig::start`] starts it.
    pub fn config<'a>(
        dir: &Path,
        hub: &'a RunningHub,
        host: &'a str,
        options: impl Into<String>,
        addr_file: impl Into<String>,
    ) -> HostConfig<'a> {
        HostConfig {
            dir: dir.to_owned(),
            hub,
            host,
            options: options.into(),
            addr_file: addr_file.into(),
            env: &[],
            ready: JOINED,
            unplugged: &[],
            wrapper: &[],
        }
    }

    /// Polls `done` until it holds; fails the test, showing the log, if [`START_LIMIT`]
    /// passes first.
    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + START_LIMIT;
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "waited {START_LIMIT:?} for {what}; log:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to 20 s) until the log says `what`.
    pub fn wait_log(&self, what: &str) {
        self.wait_for(&format!("the daemon to log {what:?}"), || {
            self.log().contains(what)
        });
    }

    /// How many times the log says `what` so far.
    pub fn log_count(&self, what: &str) -> usize {
        self.log().matches(what).count()
    }

    /// Waits (up to 20 s) until the log says `what` at least `n` times.
    pub fn wait_log_count(&self, what: &str, n: usize) {
        self.wait_for(&format!("the daemon to log {what:?} {n} times"), || {
            self.log_count(what) >= n
        });
    }

    /// The host's sysfs tree.
    pub fn sysfs(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("ibacm-unix.sock")
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ibacm.log")).unwrap_or_default()
    }

    /// Stops the daemon with SIGTERM and waits for it: it exits cleanly, and its
    /// emulated HCA detaches from the hub on the way out.
    #[allow(dead_code)]
    pub fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

impl Drop for EmulatedHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
