//! Observability of `ibacm` as a process: the metrics file (written at start, then
//! every interval, replaced atomically, valid Prometheus text), `ib_acme -P --format
//! prometheus` against the running daemon (the same series as the file), and the
//! syslog priority prefixes of log lines the journal reads.

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod programs;
    #[path = "../../../acm-client/tests/support/prometheus.rs"]
    pub(crate) mod prometheus;
}

use acm_io_sim::sim::requests;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::daemon::{Client, DEADLINE, Daemon, TempDir, ibacm_command, run_bounded};
use support::prometheus;

/// Our `ib_acme`.
/// Our `ib_acme`.
fn ours() -> std::path::PathBuf {
    support::programs::program("ib_acme")
}

/// Our `ib_acme -S sock args…`, run to completion.
fn ours_on(sock: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(ours());
    cmd.arg("-S").arg(sock).args(args);
    run_bounded(cmd, DEADLINE)
}

/// Polls `f` until it gives something, for at most [`DEADLINE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(start.elapsed() < DEADLINE, "{what} within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the sample line starting with `series ` in `text`.
fn value(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Resolves 10.0.0.2 from 10.0.0.1 over `sock`; the reply's status.
fn resolve(sock: &Path) -> u8 {
    let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let reply = Client::unix(sock).request(&requests::resolve_ip(Some(src), dst, false));
    reply[2]
}

const EP1: &str = "endpoint=\"1\",guid=\"0x0002c90300a0b000\",port=\"1\",pkey=\"0xffff\"";

#[test]
fn the_metrics_file_appears_is_updated_and_parses() {
    let dir = TempDir::new("metrics");
    let prom_dir = dir.subdir("textfile");
    let file = prom_dir.join("ibacm.prom");
    let options = format!("metrics_file {}\nmetrics_interval 1\n", file.display());
    let d = Daemon::start(dir.path(), "sim", &options);
    let first = wait_for("the metrics file", || std::fs::read_to_string(&file).ok());
    let samples = prometheus::check(&first).unwrap_or_else(|e| panic!("{e}\n{first}"));
    assert!(samples > 20, "{first}");
    assert_eq!(value(&first, "acm_resolves_total"), Some(0), "{first}");
    assert!(first.contains("# TYPE acm_endpoint_cache_entries gauge\n"));
    assert!(first.contains("# TYPE acm_clients_refused_total counter\n"));
    assert!(
        !first.contains("acm_up"),
        "the daemon claims no liveness: {first}"
    );
    let mode = std::fs::metadata(&file).unwrap().mode();
    assert_eq!(mode & 0o777, 0o644);
    let log = std::fs::read_to_string(dir.join("ibacm.log")).unwrap();
    assert!(
        log.contains(&format!(
            "acm_log_options: metrics_file {}\n",
            file.display()
        )),
        "{log}"
    );

    // A resolve shows in the next write: the counters, the ready cache entry, a
    // client served.
    assert_eq!(resolve(&d.socket()), 0);
    let ready = format!("acm_endpoint_cache_entries{{{EP1},state=\"ready\"}}");
    let before_ready = value(&first, &ready).expect("the ready entries");
    let after = wait_for("a write with the resolve", || {
        let t = std::fs::read_to_string(&file).ok()?;
        (value(&t, "acm_resolves_total") == Some(1)).then_some(t)
    });
    prometheus::check(&after).unwrap_or_else(|e| panic!("{e}\n{after}"));
    assert_eq!(
        value(&after, &format!("acm_endpoint_resolves_total{{{EP1}}}")),
        Some(1)
    );
    assert_eq!(value(&after, &ready), Some(before_ready + 1), "{after}");
    assert!(value(&after, "acm_clients_accepted_total").unwrap() >= 2);
    assert!(value(&after, "acm_start_time_seconds").unwrap() > 1_600_000_000);

    // Written again and again, by rename: the file's inode changes, no temporary
    // file stays beside it.
    let inode = std::fs::metadata(&file).unwrap().ino();
    wait_for("another write", || {
        (std::fs::metadata(&file).ok()?.ino() != inode).then_some(())
    });
    let names: Vec<String> = std::fs::read_dir(&prom_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ibacm.prom"]);
    drop(d);
}

#[test]
fn ib_acme_prints_the_same_series_as_the_metrics_file() {
    let dir = TempDir::new("acme-prom");
    let file = dir.join("ibacm.prom");
    let d = Daemon::start_with(
        dir.path(),
        "sim",
        "",
        &[
            "--metrics-file",
            file.to_str().unwrap(),
            "--metrics-interval",
            "1",
        ],
    );
    assert_eq!(resolve(&d.socket()), 0);
    let sock = d.socket();
    let out = ours_on(&sock, &["-P", "--format", "prometheus"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    prometheus::check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(value(&text, "acm_up"), Some(1));
    assert_eq!(value(&text, "acm_resolves_total"), Some(1));
    assert!(text.contains(&format!(
        "acm_endpoint_info{{{EP1},provider=\"ibacmp\"}} 1\n"
    )));
    assert_eq!(
        value(&text, &format!("acm_endpoint_route_queries_total{{{EP1}}}")),
        Some(1)
    );

    // Every sample ib_acme printed but acm_up is in the daemon's file once it has
    // been written after the resolve (ib_acme's queries count nothing).
    let shared: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("acm_up"))
        .collect();
    assert!(shared.len() > 10, "{text}");
    let metrics = wait_for("the file with ib_acme's samples", || {
        let t = std::fs::read_to_string(&file).ok()?;
        shared
            .iter()
            .all(|s| t.lines().any(|l| l == *s))
            .then_some(t)
    });
    prometheus::check(&metrics).unwrap();

    // -P N narrows the endpoints to endpoint N; one the daemon lacks is said on stderr.
    let out = ours_on(&sock, &["-P", "7", "--format=prometheus"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        " Endpoint 7 is not available\n"
    );
    assert!(!text.contains("endpoint="), "{text}");
    assert_eq!(value(&text, "acm_resolves_total"), Some(1));
}

/// Starts the daemon on the demo fabric logging to stderr, which goes to a file; with
/// `journal`, `JOURNAL_STREAM` names that file as the journal's stream. Returns the
/// stderr text once it says the daemon listens, after `then` ran.
fn stderr_log(dir: &TempDir, journal: bool, options: &str, then: impl FnOnce(&Path)) -> String {
    let err_path = dir.join("stderr");
    let err = std::fs::File::create(&err_path).unwrap();
    let meta = err.metadata().unwrap();
    let mut cmd = ibacm_command(dir.path(), "sim", options, Path::new("stderr"));
    if journal {
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    } else {
        cmd.env_remove("JOURNAL_STREAM");
    }
    let out_path = dir.join("stdout");
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(err)
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn ibacm");
    wait_for("ibacm listening", || {
        std::fs::read_to_string(&out_path)
            .ok()?
            .contains("listening on")
            .then_some(())
    });
    then(&dir.join("ibacm-unix.sock"));
    std::thread::sleep(Duration::from_millis(200));
    let _ = child.kill();
    let _ = child.wait();
    std::fs::read_to_string(&err_path).unwrap()
}

#[test]
fn log_lines_to_the_journal_carry_syslog_priorities() {
    let dir = TempDir::new("journal");
    let root = nix::unistd::geteuid().is_root();
    let text = stderr_log(&dir, true, "log_level 2\nallow_users 4242\n", |sock| {
        assert_eq!(resolve(sock), 0);
        if root {
            // A refused client: a warning.
            use std::os::unix::process::CommandExt;
            let mut cmd = Command::new(ours());
            cmd.arg("-S").arg(sock).arg("-P").uid(65534).gid(65534);
            let _ = run_bounded(cmd, DEADLINE);
        }
    });
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("<5>")
            && lines[0].ends_with(": main: Assistant to the InfiniBand Communication Manager"),
        "{text}"
    );
    for l in &lines {
        let p = l.get(..3).unwrap_or_default();
        assert!(["<4>", "<5>", "<6>", "<7>"].contains(&p), "{l}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("<7>") && l.contains("acm_svr_accept")),
        "a level-2 line is debug: {text}"
    );
    if root {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("<4>") && l.contains("refused")),
            "{text}"
        );
    } else {
        println!("skipped: the refused client's warning needs a second uid, so root");
    }

    // Not the journal's stream, and no --systemd: the reference's lines as they are.
    let dir = TempDir::new("nojournal");
    let text = stderr_log(&dir, false, "", |_| {});
    assert!(
        text.lines().next().is_some_and(|l| l
            .ends_with(": main: Assistant to the InfiniBand Communication Manager")
            && !l.starts_with('<')),
        "{text}"
    );
}
