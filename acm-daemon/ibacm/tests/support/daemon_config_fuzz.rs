//! The body of the `daemon_config` fuzz target (`fuzz/fuzz_targets/daemon_config.rs`),
//! shared with the stable smoke test `tests/daemon_config_fuzz_smoke.rs`: the daemon's
//! reading of its options file (the engine's parse, then [`Settings::resolve`] over the
//! daemon's own options, and the `log_file` probe) and of its address file (as handed
//! to the engine, then checked against the discovered devices), on arbitrary bytes.
//!
//! The input is the options file, then, after the first NUL byte, the address file.
//! Checks: no panic; a refused setting names a line of the options file, in the form
//! `opts:LINE: option: ...`; an accepted one is in range; every diagnostic names a line
//! of its file.

use acm_engine::config::{AddrPreload, Options, RoutePreload};
use acm_engine::{DeviceDesc, DeviceId, PortAttrs};
use ibacm::args::{self, Command};
use ibacm::option_bounds::{
    MAX_CONNECTIONS_PER_USER, MAX_MAX_QUEUED_REPLY_BYTES, MAX_METRICS_INTERVAL,
    MIN_CONNECTIONS_PER_USER, MIN_MAX_QUEUED_REPLY_BYTES,
};
use ibacm::{LoadedOptions, Origin, Settings, engine_config, names_log_file, warn_unknown_devices};

/// How many lines `text` has, as the parsers number them (a last line without a line
/// end counts).
fn lines(text: &[u8]) -> usize {
    text.split(|&c| c == b'\n').count().max(1)
}

/// Whether the daemon would start with the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its own settings were accepted.
    Accepted,
    /// One was refused, naming its line.
    Refused,
}

/// Runs the daemon's configuration reading on `data`.
pub fn run(data: &[u8]) -> Outcome {
    let (opts, addr) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (mut options, diagnostics) = Options::parse("opts", opts);
    let Ok(Command::Run(args)) = args::parse(["-P"]) else {
        unreachable!("-P is a valid command line");
    };
    let outcome =
        match Settings::resolve(&options.daemon_options, "opts", &args, options.server_mode) {
            Ok(s) => {
                let bytes = s.max_queued_reply_bytes;
                assert!(
                    (MIN_MAX_QUEUED_REPLY_BYTES..=MAX_MAX_QUEUED_REPLY_BYTES).contains(&bytes),
                    "{bytes}"
                );
                if let Some(n) = s.max_connections_per_user {
                    assert!(
                        (MIN_CONNECTIONS_PER_USER..=MAX_CONNECTIONS_PER_USER).contains(&n),
                        "{n}"
                    );
                }
                if let Some(m) = &s.metrics {
                    let secs = m.interval.as_secs();
                    assert!(
                        (1..=u64::from(MAX_METRICS_INTERVAL)).contains(&secs),
                        "{secs}"
                    );
                    assert!(m.path.is_absolute(), "{}", m.path.display());
                }
                let _ = s.log_lines();
                let _ = s.warnings();
                Outcome::Accepted
            }
            Err(e) => {
                let Origin::File { file, line } = &e.origin else {
                    panic!("the command line had nothing to refuse: {e}");
                };
                assert_eq!(file, "opts");
                assert!(*line >= 1 && *line <= lines(opts), "{e}");
                assert!(
                    e.to_string()
                        .starts_with(&format!("opts:{line}: {}: ", e.option)),
                    "{e}"
                );
                Outcome::Refused
            }
        };
    let _ = names_log_file(opts);

    // The address file as the daemon hands it to the engine. The preload files the
    // options may name are not read: they are other files.
    options.addr_preload = AddrPreload::None;
    options.route_preload = RoutePreload::None;
    let loaded = LoadedOptions {
        options,
        text: Some(opts.to_vec()),
        path: "opts".into(),
        diagnostics,
        settings: Settings::default(),
    };
    let mut logs = Vec::new();
    let mut c = engine_config(&loaded, Some(("addr", addr)), &mut |m| logs.push(m));
    assert!(logs.is_empty(), "{logs:?}");
    let device = DeviceDesc {
        id: DeviceId(0),
        name: "fakeib0".into(),
        guid: 1,
        ports: vec![PortAttrs::default()],
    };
    warn_unknown_devices(&mut c, &[device]);
    for d in &c.diagnostics {
        let within = match d.file.as_str() {
            "opts" => lines(opts),
            "addr" => lines(addr),
            other => panic!("a diagnostic of {other}: {d}"),
        };
        assert!(d.line >= 1 && d.line <= within, "{d}");
    }
    outcome
}
