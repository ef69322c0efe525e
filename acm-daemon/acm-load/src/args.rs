//! The command line: clap's parsing, then the checks that turn it into a [`Mode`]. Any
//! failure here is a usage error (exit status 2, as clap's own, with a message naming
//! the argument).

use super::echo::{EchoConfig, EchoStyle};
use super::mix::Mix;
use super::requests::{Addresses, Templates};
use super::target::Target;
use super::worker::Stop;
use acm_client::addr::AddrFormat;
use clap::{ArgGroup, Parser};
use std::ffi::OsString;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Most clients (one thread each).
pub const MAX_CLIENTS: u32 = 4096;
/// Most requests in flight per client.
pub const MAX_PIPELINE: u32 = 1024;
/// The unix socket used when neither `-S` nor `--tcp` is given (as `ib_acme`).
pub const DEFAULT_SOCKET: &str = "/run/ibacm-unix.sock";
/// The run's length when neither `--duration` nor `--count` is given.
pub const DEFAULT_DURATION_SECS: f64 = 10.0;

/// Load an ACM daemon (ours or rdma-core's ibacm) with many concurrent clients, or serve
/// fixed replies as the yardstick for such a load.
#[derive(Debug, Parser)]
#[command(
    name = "acm-load",
    version,
    after_help = "Exit status: 0 when every request got an answer (any status); 1 when a \
                  client could not connect or requests went unanswered (closed, short, \
                  malformed, timeout, io); 2 for usage errors.",
    group(
        ArgGroup::new("echo")
            .args(["echo_server", "echo_tcp"])
            .multiple(true)
            .conflicts_with_all([
                "socket", "tcp", "clients", "pipeline", "duration", "count", "mix", "src",
                "dst", "miss_dst", "format", "timeout", "no_warmup", "json",
            ])
    )
)]
pub struct Args {
    /// The daemon's unix socket, as `ib_acme -S` [default: /run/ibacm-unix.sock].
    #[arg(
        short = 'S',
        long = "socket",
        value_name = "PATH",
        conflicts_with = "tcp"
    )]
    pub socket: Option<PathBuf>,
    /// Connect over TCP instead (a daemon with `server_mode loop` or `open`).
    #[arg(long, value_name = "HOST:PORT")]
    pub tcp: Option<String>,
    /// Concurrent clients, one connection and one thread each.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CLIENTS)))]
    pub clients: u32,
    /// Requests each client keeps in flight. Above 1 only for our daemon: the reference
    /// reads each request with one recv and closes connections whose requests arrive
    /// together.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PIPELINE)))]
    pub pipeline: u32,
    /// Run for this long [default: 10].
    #[arg(
        long,
        value_name = "SECS",
        conflicts_with = "count",
        allow_negative_numbers = true
    )]
    pub duration: Option<f64>,
    /// Send this many requests in all, shared by the clients.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Kinds of request and their weights: hit (RESOLVE of -d), miss (RESOLVE of
    /// --miss-dst), nodelay (RESOLVE of -d with NODELAY), perf (PERF_QUERY), ep
    /// (EP_QUERY of endpoint 1).
    #[arg(long, value_name = "KIND=W,...", default_value = "hit=100")]
    pub mix: String,
    /// Source address (IP or name), as `ib_acme -s`; without it the daemon picks one.
    #[arg(short = 's', long = "src", value_name = "ADDR")]
    pub src: Option<String>,
    /// Destinations that resolve, for hits and NODELAY requests: a list of addresses,
    /// bracket lists (`10.0.0.[2-3]`) and ranges (`10.0.0.2-10.0.0.9`).
    #[arg(short = 'd', long = "dst", value_name = "LIST")]
    pub dst: Option<String>,
    /// Destinations for misses, as -d [default: 198.18.0.1-198.18.255.254, or
    /// 2001:2::1-2001:2::ffff with an IPv6 source].
    #[arg(long = "miss-dst", value_name = "LIST")]
    pub miss_dst: Option<String>,
    /// Address format, as `ib_acme -f`: i (IP), n (name), l (LID), g (GID); without it an
    /// IP literal is an IP and anything else a name.
    #[arg(short = 'f', long = "format", value_name = "i|n|l|g")]
    pub format: Option<String>,
    /// Longest wait for one reply; a client whose reply is late counts its requests in
    /// flight as timed out and connects again. A miss waits for the daemon's whole
    /// resolution (its timeout and retries, queued behind other misses): raise this for
    /// mixes with misses.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub timeout: f64,
    /// Do not resolve the -d destinations once before the timing starts.
    #[arg(long)]
    pub no_warmup: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar (it is shown only when stderr is a terminal anyway).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Serve fixed replies on this unix socket instead, until killed.
    #[arg(long = "echo-server", value_name = "PATH")]
    pub echo_server: Option<PathBuf>,
    /// Serve fixed replies on this TCP address (`127.0.0.1:0` picks a port; the
    /// address is printed).
    #[arg(long = "echo-tcp", value_name = "ADDR")]
    pub echo_tcp: Option<String>,
    /// Event loops of the echo server.
    #[arg(long = "echo-threads", value_name = "N", default_value_t = 1, requires = "echo",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub echo_threads: u32,
    /// How the echo server moves bytes: `fast` (event loops, every whole request of a
    /// read answered, replies in one write) or `reference` (the C ibacm's pattern: one
    /// thread blocking in select, one recv and one send per request; unix socket only).
    #[arg(long = "echo-style", value_name = "STYLE", value_enum, default_value_t = EchoStyle::Fast,
          requires = "echo")]
    pub echo_style: EchoStyle,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Mode {
    /// Serve fixed replies.
    Echo(EchoConfig),
    /// Load a server.
    Load(Box<LoadConfig>),
}

/// A checked load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server.
    pub target: Target,
    /// Clients.
    pub clients: u32,
    /// Requests in flight per client.
    pub pipeline: usize,
    /// When to stop.
    pub stop: Stop,
    /// The mix.
    pub mix: Mix,
    /// The request bytes.
    pub templates: Arc<Templates>,
    /// Longest wait for a reply.
    pub timeout: Duration,
    /// Resolve the hit destinations once before the timing.
    pub warmup: bool,
    /// JSON report.
    pub json: bool,
    /// No progress bar.
    pub quiet: bool,
}

/// A command line that cannot be run.
#[derive(Debug, Error)]
pub enum ArgsError {
    /// clap refused it (or it asked for help or the version: not an error then).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// A value clap accepted but that does not work.
    #[error("{0}")]
    Usage(String),
}

/// Parses `args` (the program name first).
///
/// # Errors
/// [`ArgsError`].
pub fn parse<I, T>(args: I) -> Result<Mode, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let a = Args::try_parse_from(args)?;
    if a.echo_server.is_some() || a.echo_tcp.is_some() {
        if a.echo_style == EchoStyle::Reference {
            if a.echo_tcp.is_some() {
                return Err(ArgsError::Usage(
                    "--echo-style reference serves a unix socket (--echo-server) only".into(),
                ));
            }
            if a.echo_threads != 1 {
                return Err(ArgsError::Usage(
                    "--echo-style reference has one thread, as the reference daemon".into(),
                ));
            }
        }
        let tcp = match &a.echo_tcp {
            Some(spec) => Some(lookup(spec, "--echo-tcp")?),
            None => None,
        };
        return Ok(Mode::Echo(EchoConfig {
            unix: a.echo_server.clone(),
            tcp,
            threads: a.echo_threads as usize,
            style: a.echo_style,
        }));
    }
    let usage = |m: String| Err(ArgsError::Usage(m));
    let target = match (&a.socket, &a.tcp) {
        (_, Some(spec)) => Target::Tcp(lookup(spec, "--tcp")?),
        (Some(p), None) => Target::Unix(p.clone()),
        (None, None) => Target::Unix(PathBuf::from(DEFAULT_SOCKET)),
    };
    let stop = match (a.duration, a.count) {
        (Some(d), _) if !(d.is_finite() && d > 0.0 && d < 1e9) => {
            return usage(format!("--duration {d}: give a number of seconds above 0"));
        }
        (Some(d), _) => Stop::Duration(Duration::from_secs_f64(d)),
        (None, Some(0)) => return usage("--count 0: give at least one request".into()),
        (None, Some(n)) => Stop::Count(n),
        (None, None) => Stop::Duration(Duration::from_secs_f64(DEFAULT_DURATION_SECS)),
    };
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout < 1e6) {
        return usage(format!(
            "--timeout {}: give a number of seconds above 0",
            a.timeout
        ));
    }
    let mix: Mix = match a.mix.parse() {
        Ok(m) => m,
        Err(e) => return usage(format!("--mix {}: {e}", a.mix)),
    };
    let format = match a.format.as_deref() {
        None => AddrFormat::Unspecified,
        Some(f) => match AddrFormat::from_flag(f) {
            Some(f) => f,
            None => return usage(format!("-f {f}: the format is one of i, n, l or g")),
        },
    };
    let addrs = Addresses {
        format,
        src: a.src.clone(),
        dst: a.dst.clone(),
        miss: a.miss_dst.clone(),
    };
    let templates = match Templates::build(&addrs, &mix) {
        Ok(t) => t,
        Err(e) => return usage(e.to_string()),
    };
    Ok(Mode::Load(Box::new(LoadConfig {
        target,
        clients: a.clients,
        pipeline: a.pipeline as usize,
        stop,
        mix,
        templates: Arc::new(templates),
        timeout: Duration::from_secs_f64(a.timeout),
        warmup: !a.no_warmup,
        json: a.json,
        quiet: a.quiet,
    })))
}

/// `HOST:PORT` to a socket address, as a usage error when it is none.
fn lookup(spec: &str, option: &str) -> Result<std::net::SocketAddr, ArgsError> {
    match spec.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(ArgsError::Usage(format!(
            "{option} {spec}: no address found"
        ))),
        Err(e) => Err(ArgsError::Usage(format!(
            "{option} {spec}: {e} (give HOST:PORT)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Kind;

    fn load(args: &[&str]) -> LoadConfig {
        let mut v = vec!["acm-load"];
        v.extend_from_slice(args);
        match parse(v).unwrap() {
            Mode::Load(c) => *c,
            Mode::Echo(e) => panic!("echo: {e:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        let mut v = vec!["acm-load"];
        v.extend_from_slice(args);
        match parse(v) {
            Err(ArgsError::Usage(m)) => m,
            Err(ArgsError::Clap(e)) => {
                assert_eq!(e.exit_code(), 2, "{e}");
                e.to_string()
            }
            Ok(m) => panic!("accepted: {m:?}"),
        }
    }

    #[test]
    fn defaults_and_choices() {
        let c = load(&["-d", "10.0.0.2"]);
        assert_eq!(c.target, Target::Unix(DEFAULT_SOCKET.into()));
        assert_eq!((c.clients, c.pipeline), (1, 1));
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(10)));
        assert_eq!(c.mix.kinds().collect::<Vec<_>>(), [Kind::Hit]);
        assert!(c.warmup);

        let c = load(&[
            "-S",
            "/tmp/a.sock",
            "-c",
            "16",
            "--pipeline",
            "4",
            "--count",
            "500",
            "--mix",
            "hit=90,miss=5,nodelay=3,perf=2",
            "-s",
            "10.0.0.1",
            "-d",
            "10.0.0.[2-3]",
            "--miss-dst",
            "10.9.0.1-10.9.0.9",
            "--json",
            "-q",
            "--no-warmup",
        ]);
        assert_eq!(c.target, Target::Unix("/tmp/a.sock".into()));
        assert_eq!((c.clients, c.pipeline, c.stop), (16, 4, Stop::Count(500)));
        assert_eq!(c.templates.count(Kind::Miss), 9);
        assert!(c.json && c.quiet && !c.warmup);

        let c = load(&["--tcp", "127.0.0.1:6125", "--mix", "perf"]);
        assert_eq!(c.target, Target::Tcp("127.0.0.1:6125".parse().unwrap()));

        match parse([
            "acm-load",
            "--echo-server",
            "/tmp/e.sock",
            "--echo-threads",
            "2",
        ]) {
            Ok(Mode::Echo(e)) => {
                assert_eq!(e.unix, Some("/tmp/e.sock".into()));
                assert_eq!(e.threads, 2);
                assert_eq!(e.style, EchoStyle::Fast);
            }
            other => panic!("{other:?}"),
        }
        match parse([
            "acm-load",
            "--echo-server",
            "/tmp/e.sock",
            "--echo-style",
            "reference",
        ]) {
            Ok(Mode::Echo(e)) => assert_eq!((e.threads, e.style), (1, EchoStyle::Reference)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_command_lines_say_why() {
        assert!(error(&["-c", "0", "-d", "x"]).contains("--clients"));
        assert!(error(&["--mix", "hit=1,bogus", "-d", "x"]).contains("unknown request kind"));
        assert!(error(&["--mix", "hit=1"]).contains("-d/--dst"));
        assert!(error(&["--count", "0", "-d", "x"]).contains("--count 0"));
        assert!(error(&["--duration", "-1", "-d", "x"]).contains("--duration"));
        assert!(error(&["--duration", "1", "--count", "5", "-d", "x"]).contains("cannot be used"));
        assert!(error(&["-S", "/a", "--tcp", "h:1", "-d", "x"]).contains("cannot be used"));
        assert!(error(&["--tcp", "nowhere", "-d", "x"]).contains("HOST:PORT"));
        assert!(error(&["-f", "x", "-d", "x"]).contains("-f x"));
        assert!(error(&["-d", "10.0.0.[3-1]"]).contains("ends before it starts"));
        assert!(error(&["-s", "10.0.0.1", "-d", "fd00::1"]).contains("families"));
        assert!(error(&["--echo-server", "/e", "-c", "2"]).contains("cannot be used"));
        assert!(error(&["--echo-style", "reference", "-d", "x"]).contains("required"));
        assert!(
            error(&["--echo-tcp", "127.0.0.1:0", "--echo-style", "reference"])
                .contains("unix socket")
        );
        assert!(
            error(&[
                "--echo-server",
                "/e",
                "--echo-threads",
                "2",
                "--echo-style",
                "reference"
            ])
            .contains("one thread")
        );
        assert!(error(&["--echo-threads", "2", "-d", "x"]).contains("required"));
        assert!(error(&["--timeout", "0", "-d", "x"]).contains("--timeout"));
    }
}
