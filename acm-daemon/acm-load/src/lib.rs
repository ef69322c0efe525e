//! `acm-load`: puts many concurrent clients on an ACM daemon (ours or rdma-core's
//! `ibacm`: the client protocol is the same) and reports throughput, errors and
//! latency; and `acm-load --echo-server`, a server that answers every request at once
//! with a fixed reply, which the same client measures to find the socket's own limit.
//!
//! ```text
//! acm-load [-S PATH | --tcp HOST:PORT] [-c N] [--pipeline K]
//!          [--duration SECS | --count N] [--mix KIND=W,...]
//!          [-s SRC] [-d LIST] [--miss-dst LIST] [-f i|n|l|g]
//!          [--timeout SECS] [--no-warmup] [--json] [-q]
//! acm-load --echo-server PATH [--echo-tcp ADDR] [--echo-threads N]
//! ```
//!
//! Each of the `-c` clients is a thread with one connection (`worker`) that keeps
//! `--pipeline` requests in flight (1 by default: a request, its reply, the next) and
//! times each from just before its write to the end of its reply. The kinds of request
//! (`mix`) are `hit` (RESOLVE of the `-d` destinations, which should resolve: each is
//! resolved once before the timing starts unless `--no-warmup`, so that the run
//! measures cache hits), `miss` (RESOLVE of `--miss-dst`, destinations the daemon does
//! not know, each client taking different ones in turn), `nodelay` (RESOLVE of `-d`
//! with the NODELAY flag: answered from the cache only), `perf` (PERF_QUERY of the
//! global counters) and `ep` (EP_QUERY of endpoint 1). Their bytes are built once
//! (`requests`) as `ib_acme` builds them. The run ends after `--count` requests in all
//! or after `--duration` seconds (10 by default); the clients start together once every
//! one is connected and warmed up, and the elapsed time runs from then until the last
//! reply. A progress bar (`progress`) is drawn on stderr when it is a terminal, unless
//! `--quiet`.
//!
//! Every request ends one way (`stats`): answered with status 0 (ok), answered with
//! another status (error `status`; the statuses are counted by value), or unanswered:
//! `closed` (the server closed the connection or a write failed), `short` (the
//! connection ended in the middle of a reply, or a reply too short for its kind),
//! `malformed` (a reply of another version or operation, or a body that is not whole
//! entries), `timeout` (no reply within `--timeout`), `io` (another socket error). After
//! `closed`, `short` or `timeout` the client connects again and goes on. Misses are
//! expected to end with a status (ENODATA for NODELAY, ETIMEDOUT for a resolution
//! nobody answers), so statuses do not make the run fail.
//!
//! Exit status: 0 when every request was answered (whatever its status); 1 when a
//! client could not connect or some request went unanswered (the report is printed
//! first); 2 for usage errors (clap's convention, as `acmdump`; `ib_acme` and `ibacm`
//! exit 1 only because their Debian originals do).
//!
//! # The echo server
//!
//! See `echo`: it frames requests exactly as the daemon does and answers each with a
//! reply of the real size (88 bytes for RESOLVE), tid copied, from `--echo-threads`
//! edge-triggered mio loops (1 by default, like the daemon) that batch reads and
//! writes. Run the same load against it and against the daemon; the daemon's
//! requests/s over the echo server's is the share of the socket's limit it reaches.
//!
//! # `--json`
//!
//! One JSON document on stdout when the run ends (progress and errors go to stderr):
//!
//! ```text
//! {
//!   "tool": "acm-load",
//!   "version": "0.1.0",
//!   "target": { "kind": "unix" | "tcp", "address": "/run/ibacm-unix.sock" },
//!   "clients": 4,
//!   "pipeline": 1,
//!   "mix": { "hit": 90, "miss": 5, "nodelay": 3, "perf": 2 },   kinds sent, with weights
//!   "stop": { "count": 2000 | null, "duration_s": 10.0 | null },
//!   "elapsed_s": 0.153,            start of the clients to the last reply
//!   "requests_per_s": 13071.9,     answered / elapsed_s
//!   "requests": { "sent": 2000, "answered": 2000, "ok": 1900, "unanswered": 0 },
//!   "errors": { "total": 100, "status": 100, "closed": 0, "short": 0,
//!               "malformed": 0, "timeout": 0, "io": 0 },
//!   "status_codes": { "3": 60, "6": 40 },   non-zero statuses by value
//!   "unexpected_replies": 0,       replies whose tid matched no request in flight
//!   "latency_us": LATENCY,         every answered request, any status
//!   "kinds": { "hit": KIND, "miss": KIND, … },              the kinds sent
//!   "connections": { "opened": 4, "reconnects": 0, "failed": 0 },
//!   "warmup": { "requests": 1, "failures": 0 }
//! }
//!
//! LATENCY = { "count": 2000, "min": 5.1, "mean": 12.0, "p50": 11.2, "p90": 15.0,
//!             "p99": 31.5, "p999": 80.3, "max": 120.4 }      microseconds (0 when empty)
//! KIND    = { "sent": 1800, "answered": 1800, "ok": 1800, "errors": ERRORS,
//!             "latency_us": LATENCY }                       ERRORS as "errors" above
//! ```
//!
//! Always `requests.sent = requests.ok + errors.total`, `requests.answered = ok +
//! errors.status`, and each is the sum of its kinds'. Latencies come from an HDR
//! histogram with three significant digits.
//!
//! # Modules
//!
//! | module | purpose |
//! |---|---|
//! | [`args`] | the command line and its checks |
//! | `mix` | kinds of request, `--mix`, the order each client sends them in |
//! | `requests` | address lists and the bytes of every request |
//! | `target` | unix or TCP server, the client's connection |
//! | `worker` | one client: pipeline, framing, timing, error kinds |
//! | `stats` | counters and latency histograms |
//! | `run` | starting, releasing and collecting the clients |
//! | `progress` | the progress bar |
//! | `report` | text and JSON reports |
//! | `echo` | the echo server |

pub mod args;
mod echo;
mod echo_reference;
mod echo_replies;
mod mix;
mod progress;
mod report;
mod requests;
mod run;
mod stats;
mod target;
mod worker;

use args::{ArgsError, LoadConfig, Mode};
use echo::{EchoConfig, EchoServer};
use progress::Progress;
use report::Report;
use std::io::Write;
use std::process::ExitCode;

/// Runs `acm-load` with the process's arguments; returns the exit status.
#[must_use]
pub fn main_from_env() -> ExitCode {
    match args::parse(std::env::args_os()) {
        Ok(Mode::Echo(config)) => serve_echo(&config),
        Ok(Mode::Load(config)) => load(&config),
        Err(ArgsError::Clap(e)) => {
            // Help and --version go to stdout with status 0, errors to stderr with 2.
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
        Err(ArgsError::Usage(m)) => {
            eprintln!("acm-load: error: {m}\n\nFor more information, try '--help'.");
            ExitCode::from(2)
        }
    }
}

fn serve_echo(config: &EchoConfig) -> ExitCode {
    let server = match EchoServer::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("acm-load: cannot start the echo server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    if let Some(p) = &server.unix {
        let _ = writeln!(out, "acm-load: echo server listening on {}", p.display());
    }
    if let Some(a) = server.tcp {
        let _ = writeln!(out, "acm-load: echo server listening on tcp {a}");
    }
    let _ = out.flush();
    drop(out);
    server.wait();
    ExitCode::SUCCESS
}

fn load(config: &LoadConfig) -> ExitCode {
    // One connection first, so that a server that is not there is one clear message.
    match config.target.connect(config.timeout) {
        Ok(s) => s.close(),
        Err(e) => {
            eprintln!("acm-load: cannot connect to {}: {e}", config.target);
            return ExitCode::FAILURE;
        }
    }
    let outcome = match run::run(config, Progress::wanted(config.quiet)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("acm-load: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = Report {
        target: &config.target,
        clients: config.clients,
        pipeline: config.pipeline,
        stop: config.stop,
        mix: config.mix,
        elapsed: outcome.elapsed,
        stats: &outcome.stats,
    };
    let text = if config.json {
        let mut t = serde_json::to_string_pretty(&report.json()).unwrap_or_default();
        t.push('\n');
        t
    } else {
        report.text()
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    let total = outcome.stats.total();
    if outcome.stats.connect_failures > 0 || total.errors.unanswered() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
