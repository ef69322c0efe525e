//! Where `ibacm` puts an address file it has to generate: at `-A PATH` when it can,
//! else in its run directory, never failing the start for it (see
//! the daemon's `addr_file` module). The unit tests there cover each case; this one
//! checks the daemon uses it: an `-A` path that cannot be created (as `/etc` under
//! systemd's `ProtectSystem=`), the file in the run directory, the log naming it, and
//! the endpoints carrying its names.

#[allow(dead_code)]
mod support {
    pub(crate) mod daemon;
    pub(crate) mod programs;
}

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::daemon::{DEADLINE, KillOnDrop, TempDir, ibacm_command, run_bounded};

#[test]
fn an_unwritable_addr_file_path_is_generated_into_the_run_directory_and_used() {
    let dir = TempDir::new("addrgen");
    let log = dir.join("ibacm.log");
    // Not found when read, and not creatable even by root.
    let wanted = dir.join("read-only-etc").join("ibacm_addr.cfg");
    let mut cmd = ibacm_command(dir.path(), "sim", "", &log);
    cmd.arg("-A").arg(&wanted);
    let out = std::fs::File::create(dir.join("ibacm.stdout")).unwrap();
    let mut child = KillOnDrop(
        cmd.stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ibacm"),
    );
    let stdout = || std::fs::read_to_string(dir.join("ibacm.stdout")).unwrap_or_default();
    let start = Instant::now();
    while !stdout().contains("listening on") {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!(
                "ibacm exited with {status}:\n{}\n{}",
                stdout(),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < DEADLINE,
            "ibacm did not start:\n{}",
            stdout()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let generated = dir.join("ibacm_addr.cfg");
    let text = std::fs::read_to_string(&generated).expect("generated in the run directory");
    // What ib_acme -A would write for node1: its name on the active port, then node1-1.
    assert!(
        text.contains("\nnode1 mlx5_0 1 default\nnode1-1 mlx5_0 1 default\n"),
        "{text}"
    );
    assert!(!wanted.exists());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&format!(
            "address file {} not found; generated {} instead (cannot write {}",
            wanted.display(),
            generated.display(),
            wanted.display()
        )),
        "{logged}"
    );

    // The endpoint answers to the generated names (the demo fabric's own address text
    // has no node1-1).
    let mut acme = Command::new(&*support::programs::program("ib_acme"));
    acme.arg("-S").arg(dir.join("ibacm-unix.sock")).arg("-e");
    let q = run_bounded(acme, DEADLINE);
    let eps = String::from_utf8_lossy(&q.stdout);
    assert!(
        q.status.success() && eps.contains("node1-1"),
        "{q:?}\n{eps}"
    );
}
