//! C provider plugins (acm_prov.h) loaded by our daemon on the simulated reference
//! fabric: a small test provider (tests/fixtures/providers/test_provider.c), compiled
//! here with the system C compiler, resolves through the core's SA agent from its own
//! threads and is selected by a `provider` line, by subnet prefix and by `default`;
//! Debian's `ib_acme` checks what clients see; on the fabric hub (`--fabric hub`) too.
//! Broken libraries beside it are each logged with their file and reason, and the
//! daemon serves with the others.

mod support {
    pub(crate) mod programs;
    // Shared with the other process tests; this file needs only a few helpers.
    #[allow(dead_code)]
    pub(crate) mod daemon;
    // Its hub only: no emulated HCA here.
    pub(crate) mod fake_hca;
    pub(crate) mod test_provider;
}

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::daemon::{Daemon, TempDir, run_bounded};
use support::test_provider::{REFERENCE, RESOLVE, build, options};

fn start(dir: &TempDir, opts: &str) -> Daemon {
    let fabric = format!("sim:{REFERENCE}/fabric.toml:fakehost");
    let addr = format!("{REFERENCE}/ibacm_addr.cfg");
    Daemon::start_with(dir.path(), &fabric, opts, &["-A", &addr])
}

/// The daemon with the test provider built with `flags` and named `name` (in `dir`'s
/// `libs`), selected for every address.
fn start_named_provider(dir: &TempDir, name: &str, flags: &[&str]) -> Daemon {
    let libs = dir.subdir("libs");
    let prov_name = format!("-DPROV_NAME=\"{name}\"");
    let mut flags = flags.to_vec();
    flags.push(&prov_name);
    build(&libs, &format!("{name}.so"), &flags);
    start(dir, &options(&libs, &format!("provider {name} default\n")))
}

/// A RESOLVE on `d` fails with ETIMEDOUT: its provider did not answer in time.
fn assert_resolve_times_out(d: &Daemon) {
    let out = acme(d, &RESOLVE);
    assert!(
        out.contains("ib_acm_resolve_ip failed: Connection timed out"),
        "{out}\n{}",
        d.diagnostics()
    );
}

/// Runs Debian's ib_acme against `d` with `args`; its standard output.
fn acme(d: &Daemon, args: &[&str]) -> String {
    support::test_provider::acme(&d.socket(), args)
}

fn log(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.join("ibacm.log")).unwrap_or_default()
}

fn assert_resolved_by_test_provider(d: &mut Daemon, dir: &TempDir) {
    support::test_provider::assert_resolved_by_test_provider(
        &d.socket(),
        &|| log(dir),
        &|| d.diagnostics(),
        false,
    );
    d.assert_running();
}

#[test]
fn a_c_provider_selected_by_prefix_resolves_through_the_sa() {
    let dir = TempDir::new("prov-prefix");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &[]);
    let opts = options(&libs, "provider testprov 0xfe80000000000000\n");
    let mut d = start(&dir, &opts);
    assert_resolved_by_test_provider(&mut d, &dir);
    // QUERY_SA (`-v`) goes through its query callback and the SA too.
    let out = acme(&d, &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2", "-v"]);
    assert!(
        out.contains("return status 0x0"),
        "{out}\n{}",
        d.diagnostics()
    );
}

#[test]
fn a_c_provider_selected_by_default_resolves_through_the_sa() {
    let dir = TempDir::new("prov-default");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &[]);
    let mut d = start(&dir, &options(&libs, "provider testprov default\n"));
    assert_resolved_by_test_provider(&mut d, &dir);
}

/// On the hub backend (`--fabric hub`) the engine runs the loaded providers too, as on
/// the in-process simulator.
#[test]
fn a_c_provider_serves_on_the_fabric_hub() {
    let dir = TempDir::new("prov-hub");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &[]);
    let hub = support::fake_hca::RunningHub::start(
        &Path::new(REFERENCE).join("fabric.toml"),
        dir.join("hub.sock"),
    );
    let fabric = format!("hub:{}:fakehost", hub.path.display());
    let addr = format!("{REFERENCE}/ibacm_addr.cfg");
    let opts = options(&libs, "provider testprov default\n");
    let mut d = Daemon::start_with(dir.path(), &fabric, &opts, &["-A", &addr]);
    assert_resolved_by_test_provider(&mut d, &dir);
    drop(d);
    drop(hub);
}

#[test]
fn broken_libraries_are_logged_and_the_others_serve() {
    let dir = TempDir::new("prov-bad");
    let libs = dir.subdir("libs");
    let good = build(&libs, "libtestprov.so", &[]);
    build(&libs, "noquery.so", &["-DNO_QUERY"]);
    build(
        &libs,
        "version.so",
        &["-DWRONG_VERSION", "-DPROV_NAME=\"v2\""],
    );
    build(&libs, "size.so", &["-DWRONG_SIZE", "-DPROV_NAME=\"short\""]);
    build(&libs, "twin.so", &[]); // a second "testprov": the name is taken
    std::fs::write(libs.join("notelf.so"), b"not a shared object\n").unwrap();
    std::os::unix::fs::symlink(&good, libs.join("link.so")).unwrap();
    let mut d = start(&dir, &options(&libs, "provider testprov default\n"));
    assert_resolved_by_test_provider(&mut d, &dir);
    let log = log(&dir);
    for (file, why) in [
        ("noquery.so", "no provider_query symbol"),
        ("version.so", "provider interface version 2, expected 1"),
        ("size.so", "struct acm_provider is 112 bytes, expected 120"),
        ("twin.so", "provider 'testprov' is loaded already; skipped"),
        ("notelf.so", "cannot load"),
        ("link.so", "skipped, not a regular file (a symbolic link)"),
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(&format!("{file}: ")))
            .unwrap_or_else(|| panic!("no line for {file}:\n{log}"));
        assert!(line.contains(why), "{file}: {line}");
        assert!(line.contains("acm_open_providers: "), "{line}");
    }
}

#[test]
fn a_provider_whose_open_device_fails_leaves_its_port_unused() {
    let dir = TempDir::new("prov-failopen");
    let mut d = start_named_provider(&dir, "failopen", &["-DFAIL_OPEN_DEVICE"]);
    let out = acme(&d, &RESOLVE);
    assert!(!out.contains("Path information"), "{out}");
    // ENODATA: the endpoint exists, the provider has no context for it.
    assert!(
        out.contains("ib_acm_resolve_ip failed: No data available"),
        "{out}\n{}",
        d.diagnostics()
    );
    d.assert_running();
    let log = log(&dir);
    assert!(
        log.contains("open_device: refusing device 0x2c90300a0b000 on purpose"),
        "{log}"
    );
    assert!(
        log.contains("failopen.so: provider failopen: open_device failed (returned -1)"),
        "{log}"
    );
}

#[test]
fn a_provider_that_never_answers_gets_etimedout_from_the_core() {
    let dir = TempDir::new("prov-silent");
    let mut d = start_named_provider(&dir, "silent", &["-DSILENT"]);
    assert_resolve_times_out(&d);
    d.assert_running();
    assert!(
        log(&dir).contains("silent: no answer to request"),
        "{}",
        log(&dir)
    );
    // The daemon still serves: EP_QUERY answers.
    assert!(acme(&d, &["-e", "1"]).contains(",1,silent,"));
}

#[test]
fn a_late_answer_is_dropped_after_the_core_answered_etimedout() {
    let dir = TempDir::new("prov-late");
    // Budget: provider_timeout 400 ms; the provider answers after 800 ms.
    let mut d = start_named_provider(&dir, "slow", &["-DSLOW_MS=800"]);
    assert_resolve_times_out(&d);
    // The answer still comes, later: dropped, and said so.
    let start = std::time::Instant::now();
    while !log(&dir).contains("slow: late or unknown resolve answer") {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no line for the late answer\n{}",
            d.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d.assert_running();
    assert!(acme(&d, &["-e", "1"]).contains(",1,slow,"));
}

#[test]
fn ibacm_exports_the_core_api_to_providers() {
    let out = run_bounded(
        {
            let mut c = Command::new("nm");
            c.arg("-D")
                .arg("--defined-only")
                .arg(&*support::daemon::IBACM);
            c
        },
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for name in acm_io_verbs::provider::core_api::EXPORTED_NAMES {
        assert!(
            text.lines().any(|l| l.ends_with(&format!(" T {name}"))),
            "ibacm does not export {name}"
        );
    }
}

/// Debian's own provider (package `ibacm`).
const DEBIAN_LIBIBACMP: &str = "/usr/lib/x86_64-linux-gnu/ibacm/libibacmp.so";

#[test]
fn debian_libibacmp_loads_and_is_refused_cleanly_on_the_simulated_fabric() {
    assert!(
        Path::new(DEBIAN_LIBIBACMP).exists(),
        "{DEBIAN_LIBIBACMP} is missing: install Debian's ibacm package"
    );
    let dir = TempDir::new("prov-debian");
    let libs = dir.subdir("libs");
    // A copy: a symbolic link would be skipped before it is even opened.
    std::fs::copy(DEBIAN_LIBIBACMP, libs.join("libibacmp.so")).unwrap();
    // With the built-in registered, its name is taken.
    {
        let run = TempDir::new("prov-debian-builtin");
        let mut d = start(&run, &options(&libs, ""));
        d.assert_running();
        assert!(acme(&d, &["-e", "1"]).contains(",1,ibacmp,"));
        let log = log(&run);
        assert!(
            log.contains("libibacmp.so: provider 'ibacmp' is loaded already; skipped"),
            "{log}"
        );
    }
    // Without it, the library would serve, but it calls verbs on the device context,
    // which the simulated fabric does not have: refused, and the port has no provider.
    let mut d = start(&dir, &options(&libs, "builtin_provider no\n"));
    d.assert_running();
    let log = log(&dir);
    assert!(
        log.contains("libibacmp.so: provider 'ibacmp' calls verbs itself"),
        "{log}"
    );
    assert!(log.contains("no provider for port 1"), "{log}");
    let out = acme(&d, &RESOLVE);
    assert!(!out.contains("Path information"), "{out}");
    d.assert_running();
}
