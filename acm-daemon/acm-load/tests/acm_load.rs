//! `acm-load` as a process: against its own echo server (unix and TCP, pipelined),
//! against our daemon on the simulated demo fabric with a mix of hits, misses, NODELAY
//! misses and PERF_QUERYs, against scripted servers that close, cut short or garble
//! their replies (each counted as its kind of error), and with bad command lines.
//!
//! Every run is bounded in time; counts are small (these are checks, not benchmarks).

// The daemon's process-test helpers, shared with the daemon's own tests.
#[allow(dead_code)]
#[path = "../../ibacm/tests/support/daemon.rs"]
mod daemon;
#[path = "../../ibacm/tests/support/programs.rs"]
mod programs;

use daemon::{DEADLINE, Daemon, KillOnDrop, TempDir, run_bounded};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const ACM_LOAD: &str = env!("CARGO_BIN_EXE_acm-load");
/// The longest one `acm-load` run may take here.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// An `acm-load --echo-server` process, killed on drop.
struct Echo {
    _child: KillOnDrop,
    /// The TCP address it printed, when asked to listen on TCP.
    tcp: Option<String>,
}

impl Echo {
    /// Starts the echo server with `args` and waits for its "listening" lines (one per
    /// listener).
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(ACM_LOAD)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn acm-load --echo-server");
        let listeners = args.iter().filter(|a| a.starts_with("--echo-")).count()
            - args.iter().filter(|a| **a == "--echo-threads").count();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut tcp = None;
        for _ in 0..listeners {
            let line = rx
                .recv_timeout(DEADLINE)
                .expect("the echo server says where it listens");
            assert!(
                line.starts_with("acm-load: echo server listening on "),
                "{line}"
            );
            if let Some(a) = line.strip_prefix("acm-load: echo server listening on tcp ") {
                tcp = Some(a.to_owned());
            }
        }
        Self {
            _child: KillOnDrop(child),
            tcp,
        }
    }
}

fn acm_load(args: &[&str]) -> Output {
    let mut cmd = Command::new(ACM_LOAD);
    cmd.args(args);
    run_bounded(cmd, RUN_LIMIT)
}

/// Runs `acm-load --json …` and returns its exit code and document.
fn json_run(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = acm_load(&all);
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{text}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), doc)
}

/// `acm-load --json` on `sock`: `count` requests of `mix` by 4 clients, from 10.0.0.1 to
/// 10.0.0.2.
fn four_clients_to_node2(sock: &str, count: &str, mix: &str) -> (i32, Value) {
    json_run(&[
        "-S", sock, "--count", count, "-c", "4", "-s", "10.0.0.1", "-d", "10.0.0.2", "--mix", mix,
    ])
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The invariants every report keeps: each request ends exactly one way, the kinds add
/// up to the totals, latencies are ordered.
fn assert_consistent(doc: &Value) {
    let req = &doc["requests"];
    let err = &doc["errors"];
    let by_kind: u64 = ["status", "closed", "short", "malformed", "timeout", "io"]
        .iter()
        .map(|k| n(&err[k]))
        .sum();
    assert_eq!(n(&err["total"]), by_kind, "{doc:#}");
    assert_eq!(n(&req["sent"]), n(&req["ok"]) + n(&err["total"]), "{doc:#}");
    assert_eq!(
        n(&req["answered"]),
        n(&req["ok"]) + n(&err["status"]),
        "{doc:#}"
    );
    assert_eq!(n(&req["unanswered"]), n(&req["sent"]) - n(&req["answered"]));
    let codes: u64 = doc["status_codes"]
        .as_object()
        .expect("status_codes")
        .values()
        .map(n)
        .sum();
    assert_eq!(codes, n(&err["status"]), "{doc:#}");
    let kinds = doc["kinds"].as_object().expect("kinds");
    for field in ["sent", "answered", "ok"] {
        let sum: u64 = kinds.values().map(|k| n(&k[field])).sum();
        assert_eq!(sum, n(&req[field]), "{field}: {doc:#}");
    }
    let lat = &doc["latency_us"];
    assert_eq!(n(&lat["count"]), n(&req["answered"]));
    if n(&lat["count"]) > 0 {
        let order = ["min", "p50", "p90", "p99", "p999", "max"].map(|k| f(&lat[k]));
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{lat}");
        assert!(order[0] > 0.0, "{lat}");
    }
    assert!(f(&doc["elapsed_s"]) > 0.0);
}

#[test]
fn echo_server_answers_every_request_of_every_kind() {
    let dir = TempDir::new("load-echo");
    let sock = dir.join("echo.sock");
    let sock = sock.to_str().expect("utf-8 path");
    let _echo = Echo::start(&["--echo-server", sock]);
    let (code, doc) = four_clients_to_node2(sock, "2000", "hit=90,nodelay=4,perf=4,ep=2");
    assert_eq!(code, 0, "{doc:#}");
    assert_consistent(&doc);
    assert_eq!(doc["tool"], "acm-load");
    assert_eq!(doc["target"]["kind"], "unix");
    assert_eq!(doc["target"]["address"], sock);
    assert_eq!((n(&doc["clients"]), n(&doc["pipeline"])), (4, 1));
    assert_eq!(n(&doc["stop"]["count"]), 2000);
    assert!(doc["stop"]["duration_s"].is_null());
    assert_eq!(n(&doc["requests"]["sent"]), 2000);
    assert_eq!(n(&doc["requests"]["ok"]), 2000);
    assert_eq!(n(&doc["errors"]["total"]), 0);
    assert_eq!(n(&doc["unexpected_replies"]), 0);
    assert!(f(&doc["requests_per_s"]) > 0.0);
    // Each client sends 500 requests, five whole rounds of the mix: the proportions
    // are exact.
    let kinds = &doc["kinds"];
    for (k, w) in [("hit", 90), ("nodelay", 4), ("perf", 4), ("ep", 2)] {
        assert_eq!(n(&doc["mix"][k]), w);
        assert_eq!(n(&kinds[k]["sent"]), w * 20, "{k}");
        assert_eq!(n(&kinds[k]["ok"]), w * 20, "{k}");
    }
    assert!(kinds.get("miss").is_none());
    assert_eq!(n(&doc["connections"]["opened"]), 4);
    assert_eq!(n(&doc["connections"]["failed"]), 0);
    assert_eq!(n(&doc["warmup"]["requests"]), 1);
    assert_eq!(n(&doc["warmup"]["failures"]), 0);

    // The text report says the same.
    let out = acm_load(&["-S", sock, "--count", "100", "-c", "2", "-d", "10.0.0.2"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("100 sent, 100 answered (100 ok"), "{text}");
    assert!(text.contains("errors       none"), "{text}");
    assert!(out.stderr.is_empty(), "no progress bar off a terminal");
}

#[test]
fn echo_server_over_tcp_with_pipelining_and_a_duration() {
    let echo = Echo::start(&["--echo-tcp", "127.0.0.1:0", "--echo-threads", "2"]);
    let addr = echo.tcp.clone().expect("the TCP address");
    let (code, doc) = json_run(&[
        "--tcp",
        &addr,
        "--count",
        "1000",
        "-c",
        "2",
        "--pipeline",
        "8",
        "-d",
        "10.0.0.2",
        "--mix",
        "hit=3,perf=1",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_consistent(&doc);
    assert_eq!(doc["target"]["kind"], "tcp");
    assert_eq!(n(&doc["pipeline"]), 8);
    assert_eq!(n(&doc["requests"]["ok"]), 1000);

    let (code, doc) = json_run(&[
        "--tcp",
        &addr,
        "--duration",
        "0.3",
        "-c",
        "2",
        "-d",
        "10.0.0.2",
        "--no-warmup",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_consistent(&doc);
    assert!(n(&doc["requests"]["ok"]) > 0);
    assert_eq!(f(&doc["stop"]["duration_s"]), 0.3);
    assert!(f(&doc["elapsed_s"]) >= 0.3);
    assert_eq!(n(&doc["warmup"]["requests"]), 0);
}

#[test]
fn our_daemon_answers_a_mix_of_hits_misses_and_perf_queries() {
    let dir = TempDir::new("load-daemon");
    // Several ACM resolves at once, and a failed one ends after one try: a miss takes
    // the subnet timeout (~1.07 s on the demo fabric) plus 10 ms.
    let d = Daemon::start(
        dir.path(),
        "sim",
        "log_level 0\nresolve_depth 8\ntimeout 10\nretries 0\n",
    );
    let sock = d.socket();
    let sock = sock.to_str().expect("utf-8 path");
    let (code, doc) = four_clients_to_node2(sock, "400", "hit=90,miss=2,perf=8");
    assert_eq!(code, 0, "{doc:#}\n{}", d.diagnostics());
    assert_consistent(&doc);
    let (req, kinds) = (&doc["requests"], &doc["kinds"]);
    assert_eq!(n(&req["sent"]), 400);
    assert_eq!(n(&req["answered"]), 400, "every request answered");
    assert_eq!(n(&doc["warmup"]["failures"]), 0, "10.0.0.2 resolves");
    assert_eq!(
        n(&kinds["hit"]["ok"]),
        n(&kinds["hit"]["sent"]),
        "hits succeed"
    );
    assert_eq!(n(&kinds["perf"]["ok"]), n(&kinds["perf"]["sent"]));
    // 100 requests per client, one round of the mix each.
    assert_eq!(n(&kinds["hit"]["sent"]), 360);
    assert_eq!(n(&kinds["perf"]["sent"]), 32);
    let misses = n(&kinds["miss"]["sent"]);
    assert_eq!(misses, 8);
    // Nobody answers for 198.18.x.y: each miss times out.
    assert_eq!(n(&kinds["miss"]["errors"]["status"]), misses, "{doc:#}");
    assert_eq!(n(&doc["status_codes"]["6"]), misses, "ETIMEDOUT");
    assert_eq!(n(&doc["errors"]["status"]), misses);
    assert_eq!(n(&req["unanswered"]), 0);
    // The misses took the fabric's timeout; the hits did not wait for them.
    assert!(
        f(&kinds["miss"]["latency_us"]["min"]) > 500_000.0,
        "{doc:#}"
    );
    assert!(f(&kinds["hit"]["latency_us"]["p50"]) < 100_000.0, "{doc:#}");

    // NODELAY for destinations not in the cache: ENODATA at once, counted by status.
    let (code, doc) = json_run(&[
        "-S",
        sock,
        "--count",
        "50",
        "-c",
        "2",
        "-s",
        "10.0.0.1",
        "-d",
        "198.18.7.1-198.18.7.9",
        "--mix",
        "nodelay",
        "--no-warmup",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert_consistent(&doc);
    assert_eq!(n(&doc["requests"]["answered"]), 50);
    assert_eq!(n(&doc["status_codes"]["3"]), 50, "ENODATA: {doc:#}");
}

/// How a scripted server misbehaves after reading one request.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Close the connection without a reply.
    Close,
    /// Write the first 20 bytes of an 88-byte reply, then close.
    HalfReply,
    /// Answer with another operation's reply (tid kept), then close.
    WrongOperation,
    /// Never answer.
    Silence,
}

/// A unix socket server that reads 16-byte requests (PERF_QUERYs) and misbehaves.
fn scripted_server(path: &Path, how: Misbehaviour) {
    let listener = UnixListener::bind(path).expect("bind the scripted server");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            let Ok(mut s) = s else { break };
            let mut req = [0u8; 16];
            while s.read_exact(&mut req).is_ok() {
                match how {
                    Misbehaviour::Close => break,
                    Misbehaviour::HalfReply => {
                        let mut r = vec![0u8; 20];
                        r[..16].copy_from_slice(&req);
                        r[1] = 0x01;
                        r[6..8].copy_from_slice(&88u16.to_ne_bytes());
                        let _ = s.write_all(&r);
                        break;
                    }
                    Misbehaviour::WrongOperation => {
                        let mut r = req.to_vec();
                        r[1] = 0x83;
                        r[2] = 0;
                        r[6..8].copy_from_slice(&16u16.to_be_bytes());
                        let _ = s.write_all(&r);
                    }
                    Misbehaviour::Silence => {
                        held.push(s);
                        break;
                    }
                }
            }
        }
    });
}

#[test]
fn replies_that_never_come_or_are_broken_are_counted_by_kind() {
    let dir = TempDir::new("load-bad");
    for (name, how, field, args) in [
        (
            "close",
            Misbehaviour::Close,
            "closed",
            &["--count", "6"][..],
        ),
        (
            "half",
            Misbehaviour::HalfReply,
            "short",
            &["--count", "6"][..],
        ),
        (
            "wrong",
            Misbehaviour::WrongOperation,
            "malformed",
            &["--count", "6"][..],
        ),
        (
            "silent",
            Misbehaviour::Silence,
            "timeout",
            &["--count", "2", "--timeout", "0.2"][..],
        ),
    ] {
        let sock = dir.join(&format!("{name}.sock"));
        scripted_server(&sock, how);
        let sock = sock.to_str().expect("utf-8 path");
        let mut all = vec!["-S", sock, "-c", "1", "--mix", "perf"];
        all.extend_from_slice(args);
        let (code, doc) = json_run(&all);
        assert_eq!(code, 1, "{name}: unanswered requests fail the run\n{doc:#}");
        assert_consistent(&doc);
        let sent = n(&doc["requests"]["sent"]);
        assert!(sent > 0, "{name}");
        assert_eq!(n(&doc["errors"][field]), sent, "{name}: {doc:#}");
        assert_eq!(n(&doc["errors"]["total"]), sent, "{name}: {doc:#}");
        assert_eq!(n(&doc["requests"]["answered"]), 0, "{name}");
        // A request that went unanswered cost its connection: the client connected
        // again for the next one. A garbled answer does not.
        let reconnects = if field == "malformed" { 0 } else { sent - 1 };
        assert_eq!(
            n(&doc["connections"]["reconnects"]),
            reconnects,
            "{name}: {doc:#}"
        );
    }
}

#[test]
fn bad_command_lines_exit_2_with_a_message() {
    for (args, says) in [
        (&["-c", "0", "-d", "10.0.0.2"][..], "--clients"),
        (
            &["--mix", "hit=1,bogus=2", "-d", "10.0.0.2"][..],
            "unknown request kind 'bogus'",
        ),
        (&["--mix", "hit"][..], "-d/--dst"),
        (
            &["--count", "5", "--duration", "1", "-d", "x"][..],
            "cannot be used with",
        ),
        (&["--tcp", "no-port", "-d", "x"][..], "HOST:PORT"),
        (&["-d", "10.0.0.9-10.0.0.1"][..], "ends before it starts"),
        (
            &["--echo-server", "/tmp/x.sock", "-c", "2"][..],
            "cannot be used with",
        ),
        (&["--bogus"][..], "unexpected argument"),
    ] {
        let out = acm_load(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Nothing listening: a clear message and status 1.
    let dir = TempDir::new("load-none");
    let missing = dir.join("none.sock");
    let out = acm_load(&["-S", missing.to_str().expect("utf-8"), "-d", "10.0.0.2"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect to"), "{err}");
    // Help is not an error.
    let out = acm_load(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--echo-server"));
}
