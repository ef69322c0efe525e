//! `ibacm` without `--fabric`: the hardware backend. Every failure reachable without
//! InfiniBand ends the daemon with one line on stderr naming what is missing, a
//! non-zero exit status, and no panic; nothing listens.
//!
//! Built without the `verbs` feature the line says how to rebuild. Built with it, the
//! discovery checks are driven through fixture sysfs trees (`ACM_SYSFS_ROOT`), and the
//! real `/sys` of a host without InfiniBand (CI) shows what an administrator sees
//! when the daemon is started on a host it cannot serve.

mod support {
    pub(crate) mod programs;
    // Shared with the other process tests; this file needs only a few helpers.
    #[allow(dead_code)]
    pub(crate) mod daemon;
}

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::daemon::{DEADLINE, IBACM, TempDir, run_bounded};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sysfs")
        .join(name)
}

/// Runs `ibacm -P` on the hardware backend in a fresh run directory, with `sysfs` as
/// its sysfs root (`None`: the real one).
fn run_on_hardware(sysfs: Option<&Path>) -> (Output, TempDir) {
    let dir = TempDir::new("hw");
    // An options file of its own, so that the machine's never matters (a file -O names
    // must exist).
    std::fs::write(dir.join("ibacm_opts.cfg"), "# every default\n").expect("options file");
    let mut cmd = Command::new(&*IBACM);
    cmd.arg("-P")
        .arg("--run-dir")
        .arg(dir.path())
        .arg("-O")
        .arg(dir.join("ibacm_opts.cfg"))
        .arg("--log-file")
        .arg(dir.join("ibacm.log"));
    match sysfs {
        Some(root) => cmd.env("ACM_SYSFS_ROOT", root),
        None => cmd.env_remove("ACM_SYSFS_ROOT"),
    };
    (run_bounded(cmd, DEADLINE), dir)
}

/// The failure contract; returns the one line.
fn assert_one_line_failure(out: &Output, dir: &TempDir) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "exited with 1, not a signal: {out:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert!(stderr.starts_with("ibacm: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        !dir.join("ibacm-unix.sock").exists(),
        "nothing listens without hardware"
    );
    stderr
}

#[cfg(not(feature = "verbs"))]
#[test]
fn a_build_without_verbs_says_how_to_rebuild() {
    let (out, dir) = run_on_hardware(Some(&fixture("one-hca-two-ports")));
    let line = assert_one_line_failure(&out, &dir);
    assert!(line.contains("built without InfiniBand support"), "{line}");
    assert!(line.contains("--features verbs"), "{line}");
    assert!(line.contains("--fabric sim"), "{line}");
}

#[cfg(feature = "verbs")]
mod with_verbs {
    use super::*;

    #[test]
    fn no_infiniband_class_names_the_module() {
        let (out, dir) = run_on_hardware(Some(&fixture("no-class")));
        let line = assert_one_line_failure(&out, &dir);
        assert!(line.contains("class/infiniband does not exist"), "{line}");
        assert!(line.contains("ib_core"), "{line}");
    }

    #[test]
    fn only_roce_ports_is_no_infiniband_device() {
        let (out, dir) = run_on_hardware(Some(&fixture("roce-only")));
        let line = assert_one_line_failure(&out, &dir);
        assert!(line.contains("no InfiniBand devices under"), "{line}");
        assert!(line.contains("Ethernet"), "{line}");
    }

    #[test]
    fn no_umad_class_names_the_module() {
        let (out, dir) = run_on_hardware(Some(&fixture("no-umad")));
        let line = assert_one_line_failure(&out, &dir);
        assert!(line.contains("ib_umad"), "{line}");
    }

    #[test]
    fn a_malformed_sysfs_file_is_named() {
        let (out, dir) = run_on_hardware(Some(&fixture("bad-lid")));
        let line = assert_one_line_failure(&out, &dir);
        assert!(line.contains("/lid"), "names the file: {line}");
    }

    /// sysfs shows an HCA but libibverbs cannot open it (no uverbs device here): the
    /// failure comes from verbs, after the lock and the log, still in one line.
    #[test]
    fn a_device_verbs_cannot_open_is_reported() {
        let (out, dir) = run_on_hardware(Some(&fixture("one-hca-two-ports")));
        if out.status.success() {
            panic!("a fixture HCA cannot be opened: {out:?}");
        }
        let line = assert_one_line_failure(&out, &dir);
        assert!(
            line.contains("cannot list RDMA devices")
                || line.contains("no RDMA device named mlx5_0"),
            "{line}"
        );
        let log = std::fs::read_to_string(dir.join("ibacm.log")).unwrap_or_default();
        assert!(log.contains("acm_open_devices"), "logged too:\n{log}");
    }

    /// On a host without InfiniBand, `ibacm -P` fails in one line that says why.
    /// On a host with an HCA the daemon would start instead; the hardware suite
    /// (`--features hw-tests`) covers that.
    #[test]
    fn this_host_without_infiniband_fails_in_one_line() {
        if Path::new("/sys/class/infiniband").exists() {
            eprintln!("skipped: this host has InfiniBand; see tests/hw_two_host.rs");
            return;
        }
        let (out, dir) = run_on_hardware(None);
        let line = assert_one_line_failure(&out, &dir);
        assert!(line.contains("ib_core"), "{line}");
    }
}
