//! The C test provider (tests/fixtures/providers/test_provider.c), compiled by the
//! tests with the system C compiler, and what a daemon it serves must show: shared by
//! the simulated-fabric tests (daemon_providers.rs) and the emulated-HCA ones
//! (hw_emulated_providers.rs), so both check the same behaviour.

#![allow(dead_code, unreachable_pub)]

use super::daemon::{ib_acme, run_bounded};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The reference fabric (testdata/reference-fabric): fakehost, LID 1, 10.0.0.1; LIDs 2-4
/// exist for the SA.
pub const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/reference-fabric"
);

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/providers/test_provider.c"
);

/// Compiles the test provider with `flags` (its `-D` variants, libraries) into
/// `dir/name`.
pub fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-O1", "-Wall"])
        .arg("-o")
        .arg(&out)
        .arg(SOURCE)
        .args(flags)
        .arg("-lpthread");
    let o = run_bounded(cmd, Duration::from_secs(60));
    assert!(
        o.status.success(),
        "{cc} failed (the test needs a C compiler and libibverbs-dev, libibumad-dev):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Options for fakehost with providers from `libs` and `lines` (provider lines); a
/// provider has 400 ms to answer.
pub fn options(libs: &Path, lines: &str) -> String {
    format!(
        "log_level 2\nsupport_ips_in_addr_cfg 1\ntimeout 200\nretries 0\nprovider_timeout 400\n\
         provider_lib_path {}\n{lines}",
        libs.display()
    )
}

/// Runs Debian's ib_acme against the daemon listening on `socket` with `args`; its
/// standard output.
pub fn acme(socket: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(socket).args(args);
    let o = run_bounded(cmd, Duration::from_secs(20));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The resolve every test makes: fakehost's 10.0.0.1 to 10.0.0.2 (LID 2).
pub const RESOLVE: [&str; 6] = ["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2"];

/// Checks that the test provider serves fakehost's endpoint on the daemon at `socket`:
/// a resolve through the SA, its perf values and name, its log lines with format
/// arguments (`verbs` says whether its device has a verbs context), its counters in
/// the global ones. `log` reads the daemon's log; `diagnostics` says more on failure.
pub fn assert_resolved_by_test_provider(
    socket: &Path,
    log: &dyn Fn() -> String,
    diagnostics: &dyn Fn() -> String,
    verbs: bool,
) {
    let out = acme(socket, &RESOLVE);
    assert!(out.contains("Path information"), "{out}\n{}", diagnostics());
    assert!(out.contains("  dlid: 2\n"), "{out}");
    assert!(out.contains("  slid: 1\n"), "{out}");
    assert!(out.contains("  dgid: fe80::2:c903:a0:b002\n"), "{out}");
    assert!(out.contains("return status 0x0"), "{out}");
    // Its endpoint's counters come from its query_perf; the provider's name from
    // EP_QUERY.
    let perf = acme(socket, &["-f", "i", "-s", "10.0.0.1", "-Ps"]);
    assert!(perf.contains(",0,1,0,0,0,1,42\n"), "{perf}");
    let eps = acme(socket, &["-e", "1"]);
    assert!(eps.contains(",1,testprov,"), "{eps}");
    let log = log();
    // acm_write with format arguments, from the event loop and from its own threads.
    let presence = if verbs { "present" } else { "absent" };
    assert!(
        log.contains(&format!(
            "open_device: device 0x0002c90300a0b000, verbs {presence}"
        )),
        "{log}"
    );
    assert!(
        log.contains("open_port: port 1 gid0 fe80::2:c903:a0:b001 index 0"),
        "{log}"
    );
    assert!(log.contains("resolve: resolve 10.0.0.2 from "), "{log}");
    assert!(log.contains("answer: answering id "), "{log}");
    // acm_increment_counter reaches the global counters: one resolve counted by the core
    // and one by the provider, one route query.
    let global = acme(socket, &["-P"]);
    assert!(global.contains(",0,2,0,0,0,1,0\n"), "{global}");
}
