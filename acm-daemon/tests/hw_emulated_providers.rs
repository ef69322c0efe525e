//! C provider plugins on our daemon's hardware backend (`verbs`, no `--fabric`), on the
//! emulated HCA as the reference host of a hub serving the reference fabric: the
//! device a provider opens carries its real (emulated) verbs context, which the test
//! provider queries itself (`ibv_query_device`, `ibv_query_port`), as libibacmp does
//! to create its own queue pairs. Debian's libibacmp on this backend is in
//! daemon_reference.rs, where it replays every capture.

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod test_provider;
}

use std::path::Path;
use support::daemon::TempDir;
use support::fake_hca::{EmulatedHost, RunningHub};
use support::test_provider::{REFERENCE, assert_resolved_by_test_provider, build, options};

/// What the test provider logs once fakehost's last address is added.
const READY: &str = "add_address: address fd00::1";

/// fakehost on the emulated HCA with the provider libraries of `libs` and `lines`.
fn start(dir: &TempDir, hub: &RunningHub, libs: &Path, lines: &str) -> EmulatedHost {
    let fabric = Path::new(REFERENCE).join("fabric.toml");
    let addr = std::fs::read_to_string(Path::new(REFERENCE).join("ibacm_addr.cfg"))
        .expect("the reference address file");
    EmulatedHost::start(
        &dir.subdir("fakehost"),
        &hub.path,
        &fabric,
        "fakehost",
        &options(libs, lines),
        &addr,
        &[],
        READY,
    )
}

fn hub(dir: &TempDir) -> RunningHub {
    RunningHub::start(
        &Path::new(REFERENCE).join("fabric.toml"),
        dir.join("hub.sock"),
    )
}

#[test]
fn a_c_provider_using_the_device_verbs_context_resolves_by_prefix() {
    let dir = TempDir::new("hwprov-prefix");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &["-DVERBS", "-libverbs"]);
    let hub = hub(&dir);
    let host = start(&dir, &hub, &libs, "provider testprov 0xfe80000000000000\n");
    assert_resolved_by_test_provider(&host.socket(), &|| host.log(), &|| host.log(), true);
    // The context is the emulated device's: its node GUID and port LID, as the fabric
    // gives them to fakehost.
    let log = host.log();
    assert!(
        log.contains("open_device: verbs node guid 0x0002c90300a0b000, 1 ports"),
        "{log}"
    );
    assert!(log.contains("open_port: verbs port 1 lid 1"), "{log}");
    drop(host);
    drop(hub);
}

#[test]
fn a_c_provider_selected_by_default_resolves_on_the_emulated_hca() {
    let dir = TempDir::new("hwprov-default");
    let libs = dir.subdir("libs");
    build(&libs, "libtestprov.so", &[]);
    let hub = hub(&dir);
    let host = start(&dir, &hub, &libs, "provider testprov default\n");
    assert_resolved_by_test_provider(&host.socket(), &|| host.log(), &|| host.log(), true);
    drop(host);
    drop(hub);
}
