//! The `acm-fabric-hub` binary: started on `testdata/fabrics/demo.toml`, it serves a
//! host to a `HubClient` and logs the attach and detach. (The hub itself is tested in
//! `acm-io-sim/tests/hub.rs`; this checks only the command line around it.)

#[path = "../../tests/hub_support/mod.rs"]
mod hub_support;

use acm_io_sim::hub::HubClient;
use hub_support::{TempDir, next_change};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant as WallInstant};

/// Starts the binary on `testdata/fabrics/demo.toml`, serving at `hub.sock` in `dir`,
/// and waits (at most 5 s) for the socket to appear; the child and the socket's path.
fn spawn_hub(dir: &TempDir, stderr: Stdio) -> (Child, PathBuf) {
    let hub_path = dir.path("hub.sock");
    let fabric = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/fabrics/demo.toml"
    );
    let child = Command::new(env!("CARGO_BIN_EXE_acm-fabric-hub"))
        .arg("--fabric")
        .arg(fabric)
        .arg("--socket")
        .arg(&hub_path)
        .stderr(stderr)
        .spawn()
        .expect("start acm-fabric-hub");
    let started = WallInstant::now();
    while !hub_path.exists() && started.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(10));
    }
    (child, hub_path)
}

#[test]
fn the_binary_serves_a_fabric_file() {
    use std::io::Read;
    let dir = TempDir::new("bin");
    let (mut child, hub_path) = spawn_hub(&dir, Stdio::piped());
    let attached = HubClient::attach(&hub_path, dir.path("n2.sock"), "node2");
    let (client, setup) = match attached {
        Ok(x) => x,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("attach through the binary: {e}");
        }
    };
    assert_eq!(setup.host, acm_io_sim::HostId(1));
    assert_eq!(setup.devices[0].ports[0].lid, 2);
    client.detach().unwrap();
    // Give the hub a moment to log the detach, then stop it.
    thread::sleep(Duration::from_millis(100));
    child.kill().expect("stop acm-fabric-hub");
    child.wait().expect("reap acm-fabric-hub");
    let mut log = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("host node2 (index 1) attached from"), "{log}");
    assert!(log.contains("host node2 detached"), "{log}");
}

/// `acm-fabric-hub change` asks a running hub for a change, which reaches the attached
/// host; one naming nothing is refused with the hub's reason and exit status 1.
#[test]
fn the_change_subcommand_changes_a_running_hubs_fabric() {
    use acm_io_sim::hub::wire::{PortChange, TopologyEvent};
    let dir = TempDir::new("change");
    let (mut child, hub_path) = spawn_hub(&dir, Stdio::null());
    let bin = env!("CARGO_BIN_EXE_acm-fabric-hub");
    let change = |args: &[&str]| {
        Command::new(bin)
            .arg("change")
            .arg("--socket")
            .arg(&hub_path)
            .args(args)
            .output()
            .expect("run acm-fabric-hub change")
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (mut client, _) =
            HubClient::attach(&hub_path, dir.path("n2.sock"), "node2").expect("attach");
        let out = change(&["set-lid", "node2", "66"]);
        assert!(out.status.success(), "{out:?}");
        match next_change(&mut client) {
            TopologyEvent::Port { change, attrs, .. } => {
                assert_eq!((change, attrs.lid), (PortChange::LidChange, 66));
            }
            other => panic!("{other:?}"),
        }
        let out = change(&["port-down", "node2", "--port", "1"]);
        assert!(out.status.success(), "{out:?}");
        match next_change(&mut client) {
            TopologyEvent::Port { change, .. } => assert_eq!(change, PortChange::Error),
            other => panic!("{other:?}"),
        }
        let out = change(&["device-remove", "node2", "--fatal"]);
        assert!(out.status.success(), "{out:?}");
        assert!(matches!(
            next_change(&mut client),
            TopologyEvent::DeviceGone { fatal: true, .. }
        ));
        let out = change(&["port-up", "node9"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("acm-fabric-hub: "), "{err}");
        assert!(err.contains("node9"), "{err}");
        let out = change(&["set-pkeys", "node2", "0xffff", "zz"]);
        assert_eq!(out.status.code(), Some(2), "a bad pkey is a usage error");
        client.detach().expect("detach");
    }));
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .expect("the test directory")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("change"))
        .collect();
    assert!(left.is_empty(), "control sockets left behind: {left:?}");
}
