//! `ibacm --systemd`: socket activation and readiness notification, driven by
//! systemd's own `systemd-socket-activate` (Debian's `systemd` package) with what the
//! shipped units say (`dist/systemd/ibacm.socket` and `ibacm.service`): the socket
//! unit's `ListenStream=` sockets, moved into a temporary directory, and the service's
//! `ExecStart=` arguments. The units are also checked against the daemon's own
//! defaults, so that they cannot drift apart.

use acm_proto::netlink::RDMA_NL_GROUP_LS_MASK;
use ibacm::{DEFAULT_RUN_DIR, RunPaths};
use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";
const UNITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/systemd");
/// Where the package and the install script put the daemon (Debian's path).
const INSTALLED_IBACM: &str = "/usr/sbin/ibacm";

struct Killed(Child, PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// A unit file's `(section, key, value)` entries in file order. Enough of systemd's
/// syntax for our units: sections, `Key=Value`, `#`/`;` comments; a continuation line
/// fails the test rather than being misread.
fn unit_entries(name: &str) -> Vec<(String, String, String)> {
    let path = Path::new(UNITS).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut section = String::new();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        assert!(
            !line.ends_with('\\'),
            "{name}:{}: continuation lines are not understood by this test",
            n + 1
        );
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_owned();
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{name}:{}: not Key=Value: {line:?}", n + 1));
        out.push((section.clone(), k.trim().to_owned(), v.trim().to_owned()));
    }
    out
}

/// Every value of `key` in `section`.
fn values<'a>(entries: &'a [(String, String, String)], section: &str, key: &str) -> Vec<&'a str> {
    entries
        .iter()
        .filter(|(s, k, _)| s == section && k == key)
        .map(|(_, _, v)| v.as_str())
        .collect()
}

/// A global PERF_QUERY.
fn perf_query() -> [u8; 16] {
    let mut m = [0u8; 16];
    m[0] = 1;
    m[1] = 2;
    m[6..8].copy_from_slice(&16u16.to_be_bytes());
    m
}

#[test]
fn the_shipped_units_match_the_daemons_defaults() {
    let socket = unit_entries("ibacm.socket");
    let defaults = RunPaths::new(DEFAULT_RUN_DIR);
    let default_socket = defaults.unix_socket();
    let default_link = defaults.public_socket();
    assert_eq!(
        values(&socket, "Socket", "ListenStream"),
        [default_socket.to_str().unwrap()],
        "the socket unit listens where ibacm and ib_acme expect the socket"
    );
    assert_eq!(
        values(&socket, "Socket", "Symlinks"),
        [default_link.to_str().unwrap()],
        "the public name librdmacm connects to"
    );
    assert_eq!(
        values(&socket, "Socket", "ListenNetlink"),
        [format!("rdma {RDMA_NL_GROUP_LS_MASK}").as_str()],
        "systemd binds nl_groups to the number given: the LS group's mask"
    );
    let service = unit_entries("ibacm.service");
    assert_eq!(values(&service, "Service", "Type"), ["notify"]);
    assert_eq!(
        values(&service, "Service", "ExecStart"),
        [format!("{INSTALLED_IBACM} --systemd").as_str()]
    );
    assert_eq!(values(&service, "Unit", "Wants")[0], "ibacm.socket");
}

#[test]
fn serves_on_the_socket_systemd_passes_and_notifies_readiness() {
    assert!(
        Path::new(ACTIVATE).exists(),
        "{ACTIVATE} is missing: install Debian's `systemd` package (.ci/run does)"
    );
    let dir = std::env::temp_dir().join(format!("acm-sd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // What ibacm.socket listens on, each stream socket moved into `dir` under its own
    // file name: outside the run directory, as /run/ibacm-unix.sock is outside a
    // --run-dir, so the daemon must use it rather than bind its own.
    // systemd-socket-activate cannot make the ListenNetlink= socket (nor the
    // Symlinks=), and without RDMA netlink here the daemon could not use it anyway;
    // the test above checks its value.
    let socket = unit_entries("ibacm.socket");
    let mut streams = Vec::new();
    for (section, key, value) in &socket {
        match (section.as_str(), key.as_str()) {
            ("Socket", "ListenStream") => {
                let name = Path::new(value)
                    .file_name()
                    .unwrap_or_else(|| panic!("ListenStream={value} is not a path"));
                streams.push(dir.join(name));
            }
            ("Socket", "ListenNetlink") => {}
            ("Socket", k) if k.starts_with("Listen") => {
                panic!("ibacm.socket has {k}=, which this test does not pass")
            }
            _ => {}
        }
    }
    assert!(!streams.is_empty(), "ibacm.socket has no ListenStream=");

    // The service's command line, with the binary under test and the options that
    // keep this run off the hardware and out of /run and /var/log.
    let service = unit_entries("ibacm.service");
    let exec = values(&service, "Service", "ExecStart");
    let mut argv = exec[0].split_whitespace();
    assert_eq!(argv.next(), Some(INSTALLED_IBACM));
    let unit_args: Vec<&str> = argv.collect();
    let notify_expected = values(&service, "Service", "Type") == ["notify"];

    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let run_dir = dir.join("run");
    let mut cmd = Command::new(ACTIVATE);
    for s in &streams {
        cmd.arg("-l").arg(s);
    }
    let child = cmd
        .arg(format!("--setenv=NOTIFY_SOCKET={}", notify_path.display()))
        .arg(env!("CARGO_BIN_EXE_ibacm"))
        .args(&unit_args)
        .args(["--fabric", "sim", "--log-file", "stderr"])
        .arg("--run-dir")
        .arg(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate starts");
    let mut guard = Killed(child, dir.clone());
    let sock = &streams[0];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut client = loop {
        match UnixStream::connect(sock) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the activation socket never appeared: {e}"),
        }
    };
    // The first connection starts the daemon, which answers on the passed socket.
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    client.write_all(&perf_query()).unwrap();
    let mut reply = [0u8; 16];
    client
        .read_exact(&mut reply)
        .expect("a reply on the activated socket");
    assert_eq!((reply[0], reply[1], reply[2]), (1, 0x82, 0), "{reply:?}");
    if notify_expected {
        let mut buf = [0u8; 256];
        let n = notify.recv(&mut buf).expect("READY=1 within 20 s");
        let msg = String::from_utf8_lossy(&buf[..n]);
        assert!(msg.lines().any(|l| l == "READY=1"), "{msg:?}");
        // `systemctl reload` runs ExecReload=, with $MAINPID the daemon's (the
        // activation program execs it); the daemon says RELOADING=1, then READY=1.
        for reload in values(&service, "Service", "ExecReload") {
            let line = reload.replace("$MAINPID", &guard.0.id().to_string());
            let mut argv = line.split_whitespace();
            let status = Command::new(argv.next().expect("a program"))
                .args(argv)
                .status()
                .expect("run ExecReload=");
            assert!(status.success(), "{line}: {status}");
            let n = notify.recv(&mut buf).expect("RELOADING=1 within 20 s");
            let msg = String::from_utf8_lossy(&buf[..n]);
            assert!(msg.lines().any(|l| l == "RELOADING=1"), "{msg:?}");
            assert!(
                msg.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
                "{msg:?}"
            );
            let n = notify.recv(&mut buf).expect("READY=1 within 20 s");
            let msg = String::from_utf8_lossy(&buf[..n]);
            assert!(msg.lines().any(|l| l == "READY=1"), "{msg:?}");
        }
    }
    assert!(
        !run_dir.join("ibacm-unix.sock").exists(),
        "with a passed socket the daemon binds none of its own"
    );
    assert!(
        std::fs::symlink_metadata(run_dir.join("ibacm.sock")).is_ok(),
        "the public symlink is still made in the run directory"
    );

    // Stopped as systemd stops it, the daemon leaves the socket it was given in place:
    // ibacm.socket still listens there and starts the daemon again on the next
    // connection.
    drop(client);
    // kill(1) rather than nix, whose signal feature this package does not enable.
    let term = Command::new("kill")
        .args(["-TERM", &guard.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while guard.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "ibacm ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    for s in &streams {
        assert!(
            s.exists(),
            "{} was removed: a passed socket belongs to systemd",
            s.display()
        );
    }
}
