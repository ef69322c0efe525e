//! `ibacm --systemd`: socket activation and readiness notification, driven by
//! systemd's own `systemd-socket-activate` (Debian's `systemd` package), standing in
//! for `ibacm.socket` and `ibacm.service`.

use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

struct Killed(Child, PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
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
fn serves_on_the_socket_systemd_passes_and_notifies_readiness() {
    assert!(
        Path::new(ACTIVATE).exists(),
        "{ACTIVATE} is missing: install Debian's `systemd` package (.ci/run does)"
    );
    let dir = std::env::temp_dir().join(format!("acm-sd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The socket lives outside the run directory, as systemd's /run/ibacm-unix.sock
    // would: the daemon must use it rather than bind its own.
    let sock = dir.join("activated.sock");
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let run_dir = dir.join("run");
    let child = Command::new(ACTIVATE)
        .arg("-l")
        .arg(&sock)
        .arg(format!("--setenv=NOTIFY_SOCKET={}", notify_path.display()))
        .arg(env!("CARGO_BIN_EXE_ibacm"))
        .args(["--systemd", "--fabric", "sim", "--log-file", "stderr"])
        .arg("--run-dir")
        .arg(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate starts");
    let _guard = Killed(child, dir.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut client = loop {
        match UnixStream::connect(&sock) {
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
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).expect("READY=1 within 20 s");
    let msg = String::from_utf8_lossy(&buf[..n]);
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg:?}");
    assert!(
        !run_dir.join("ibacm-unix.sock").exists(),
        "with a passed socket the daemon binds none of its own"
    );
    assert!(
        std::fs::symlink_metadata(run_dir.join("ibacm.sock")).is_ok(),
        "the public symlink is still made in the run directory"
    );
}
