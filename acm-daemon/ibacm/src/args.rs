//! `ibacm`'s command line: the reference's short options plus our long ones.
//!
//! Parsed by hand rather than with clap so that the reference's contract holds exactly:
//! an unknown option prints the usage text and exits 1, `-A`/`-O` take their value
//! attached (`-Afile`) or as the next word, and single-letter flags may be grouped
//! (`-DP`).

use std::path::PathBuf;
use thiserror::Error;

/// The usage text, printed for `--help` and for every usage error.
pub const USAGE: &str = "\
usage: ibacm [-D] [-P] [-A addr_file] [-O option_file] [--systemd]
             [--fabric sim[:FILE[:HOST]] | --fabric hub:SOCKET:HOST]
             [--run-dir DIR] [--socket-mode OCTAL] [--socket-group GROUP]
             [--allow-users LIST] [--allow-groups LIST]
             [--metrics-file FILE] [--metrics-interval SECONDS]
             [--max-queued-reply-bytes BYTES] [--max-connections-per-user N]
             [--worker-threads N] [--log-file FILE] [--log-level N]
   -D                 run as a daemon (the default)
   -P                 run in the foreground
   -A addr_file       address file (default /etc/rdma/ibacm_addr.cfg)
   -O option_file     options file (default /etc/rdma/ibacm_opts.cfg)
   --systemd          run under systemd: foreground, socket activation, sd_notify
   --fabric sim[:FILE[:HOST]]
                      run as host HOST (default: the first) of the simulated fabric
                      described by FILE (default: a built-in three-host demo fabric)
   --fabric hub:SOCKET:HOST
                      attach as host HOST to the fabric hub listening on SOCKET
   --run-dir DIR      put the socket, port files, lock file and the default log file
                      in DIR instead of /run (and /var/log)
   --socket-mode OCTAL
                      permissions of the unix socket (default 0777: every local user's
                      RDMA programs resolve through it, as with the reference)
   --socket-group GROUP
                      group (name or gid) of the unix socket (default: the daemon's)
   --allow-users LIST, --allow-groups LIST
                      let only these users or groups (names or ids, separated by
                      commas) connect to the unix socket, root and the daemon's own
                      user always; others are closed at once and logged (default:
                      everyone)
   --metrics-file FILE
                      write the counters, cache sizes and client numbers to FILE in the
                      Prometheus text format (for node_exporter's textfile collector)
   --metrics-interval SECONDS
                      how often to write the metrics file (default 15)
   --max-queued-reply-bytes BYTES
                      replies queued for all clients together beyond which the
                      clients not reading theirs are closed (default 67108864, 64 MiB)
   --max-connections-per-user N
                      client connections one user other than root and the daemon's
                      may hold; more are closed at once and logged (default: half of
                      the descriptors all users share)
   --worker-threads N threads serving clients: 0 one per two CPUs from 4 CPUs
                      up, at most 64, else 1 (the default, unless
                      ACM_WORKER_THREADS says otherwise); 1 a
                      single thread for everything; 2 to 256 that many workers
                      answering cached resolves beside the engine's thread
   --log-file FILE    log here (or stdout, stderr), overriding the options file
   --log-level N      log level 0..2, overriding the options file
   --help             this text
   --version          the version
Without --fabric, ibacm uses the InfiniBand hardware of this machine.";

/// Which fabric the daemon serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricArg {
    /// The machine's InfiniBand hardware.
    Hardware,
    /// An in-process simulated fabric, this daemon being one of its hosts.
    Sim {
        /// The fabric description; `None` is the built-in demo fabric.
        file: Option<PathBuf>,
        /// The host this daemon is; `None` is the first host.
        host: Option<String>,
    },
    /// A fabric hub shared with other processes.
    Hub {
        /// The hub's socket.
        socket: PathBuf,
        /// The host to attach as.
        host: String,
    },
}

/// Everything the command line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `-P` or `--systemd`: stay in the foreground.
    pub foreground: bool,
    /// `--systemd`.
    pub systemd: bool,
    /// `-A`.
    pub addr_file: Option<PathBuf>,
    /// `-O`.
    pub opts_file: Option<PathBuf>,
    /// `--fabric`.
    pub fabric: FabricArg,
    /// `--run-dir`.
    pub run_dir: Option<PathBuf>,
    /// `--log-file`.
    pub log_file: Option<String>,
    /// `--log-level`.
    pub log_level: Option<i32>,
    /// `--socket-mode`: the unix socket's permission bits (`None`: the options file's
    /// `server_socket_mode`, else 0777).
    pub socket_mode: Option<u32>,
    /// `--socket-group`: the unix socket's group, a name or gid.
    pub socket_group: Option<String>,
    /// `--allow-users`: the users allowed to connect (replaces `allow_users`).
    pub allow_users: Option<Vec<String>>,
    /// `--allow-groups`: the groups allowed to connect (replaces `allow_groups`).
    pub allow_groups: Option<Vec<String>>,
    /// `--metrics-file`.
    pub metrics_file: Option<PathBuf>,
    /// `--metrics-interval`, in seconds.
    pub metrics_interval: Option<u32>,
    /// `--max-queued-reply-bytes`.
    pub max_queued_reply_bytes: Option<u64>,
    /// `--max-connections-per-user`.
    pub max_connections_per_user: Option<u32>,
    /// `--worker-threads`.
    pub worker_threads: Option<u32>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the daemon.
    Run(Box<Args>),
    /// Print the usage text and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
}

/// A command line that cannot be run; the caller prints it and the usage text and
/// exits 1, as the reference does.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArgError {
    /// An option nobody knows.
    #[error("unknown option {0}")]
    Unknown(String),
    /// An option without its value.
    #[error("option {0} needs a value")]
    MissingValue(String),
    /// A value that does not parse.
    #[error("bad value for {option}: {value:?} ({why})")]
    BadValue {
        /// The option.
        option: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A positional argument (ibacm takes none).
    #[error("unexpected argument {0:?}")]
    Positional(String),
}

/// Parses the arguments after the program name.
///
/// # Errors
/// See [`ArgError`].
pub fn parse<I, S>(args: I) -> Result<Command, ArgError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut a = Args {
        foreground: false,
        systemd: false,
        addr_file: None,
        opts_file: None,
        fabric: FabricArg::Hardware,
        run_dir: None,
        log_file: None,
        log_level: None,
        socket_mode: None,
        socket_group: None,
        allow_users: None,
        allow_groups: None,
        metrics_file: None,
        metrics_interval: None,
        max_queued_reply_bytes: None,
        max_connections_per_user: None,
        worker_threads: None,
    };
    let mut it = args.into_iter().map(Into::into);
    while let Some(arg) = it.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let mut value = |opt: &str| {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| ArgError::MissingValue(opt.to_owned()))
            };
            match name {
                "systemd" => {
                    a.systemd = true;
                    a.foreground = true;
                }
                "help" => return Ok(Command::Help),
                "version" => return Ok(Command::Version),
                "fabric" => a.fabric = parse_fabric(&value("--fabric")?)?,
                "run-dir" => a.run_dir = Some(PathBuf::from(value("--run-dir")?)),
                "log-file" => a.log_file = Some(value("--log-file")?),
                "socket-mode" => {
                    a.socket_mode = Some(checked(
                        &mut value,
                        "--socket-mode",
                        super::access::parse_mode,
                    )?);
                }
                "socket-group" => a.socket_group = Some(value("--socket-group")?),
                "allow-users" | "allow-groups" => {
                    let list =
                        checked(&mut value, &format!("--{name}"), super::access::split_list)?;
                    if name == "allow-users" {
                        a.allow_users = Some(list);
                    } else {
                        a.allow_groups = Some(list);
                    }
                }
                "metrics-file" => a.metrics_file = Some(PathBuf::from(value("--metrics-file")?)),
                "metrics-interval" => {
                    a.metrics_interval = Some(checked(&mut value, "--metrics-interval", |v| {
                        super::option_values::parse_interval(v)
                            .map_err(|_| "expected whole seconds from 1 to 86400")
                    })?);
                }
                "max-queued-reply-bytes" => {
                    a.max_queued_reply_bytes =
                        Some(checked(&mut value, "--max-queued-reply-bytes", |v| {
                            super::option_values::parse_queued_bytes(v)
                                .map_err(|_| "expected whole bytes from 65536 to 1099511627776")
                        })?);
                }
                "max-connections-per-user" => {
                    a.max_connections_per_user =
                        Some(checked(&mut value, "--max-connections-per-user", |v| {
                            super::option_values::parse_per_user(v)
                                .map_err(|_| "expected whole connections from 1 to 1073741824")
                        })?);
                }
                "worker-threads" => {
                    a.worker_threads = Some(checked(&mut value, "--worker-threads", |v| {
                        super::option_values::parse_worker_threads(v).map_err(
                            |_| "expected a whole number of threads from 0 (chosen from the CPUs) to 256",
                        )
                    })?);
                }
                "log-level" => {
                    a.log_level = Some(checked(&mut value, "--log-level", |v| {
                        v.parse::<i32>().map_err(|_| "not a number")
                    })?);
                }
                _ => return Err(ArgError::Unknown(arg)),
            }
            continue;
        }
        let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) else {
            return Err(ArgError::Positional(arg));
        };
        for (i, c) in flags.char_indices() {
            match c {
                'D' => {}
                'P' => a.foreground = true,
                'A' | 'O' => {
                    let rest = &flags[i + c.len_utf8()..];
                    let v = if rest.is_empty() {
                        it.next()
                            .ok_or_else(|| ArgError::MissingValue(format!("-{c}")))?
                    } else {
                        rest.to_owned()
                    };
                    let slot = if c == 'A' {
                        &mut a.addr_file
                    } else {
                        &mut a.opts_file
                    };
                    *slot = Some(PathBuf::from(v));
                    break;
                }
                _ => return Err(ArgError::Unknown(format!("-{c}"))),
            }
        }
    }
    Ok(Command::Run(Box::new(a)))
}

/// `sim`, `sim:FILE`, `sim:FILE:HOST`, `hub:SOCKET:HOST`.
fn parse_fabric(v: &str) -> Result<FabricArg, ArgError> {
    let bad = |why| ArgError::BadValue {
        option: "--fabric".into(),
        value: v.to_owned(),
        why,
    };
    let (kind, rest) = v.split_once(':').unwrap_or((v, ""));
    match kind {
        "sim" => {
            let (file, host) = match rest.rsplit_once(':') {
                Some((f, h)) if !h.is_empty() => (f, Some(h.to_owned())),
                Some((f, _)) => (f, None),
                None => (rest, None),
            };
            Ok(FabricArg::Sim {
                file: (!file.is_empty()).then(|| PathBuf::from(file)),
                host,
            })
        }
        "hub" => {
            let (socket, host) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("expected hub:SOCKET:HOST"))?;
            if socket.is_empty() || host.is_empty() {
                return Err(bad("expected hub:SOCKET:HOST"));
            }
            Ok(FabricArg::Hub {
                socket: PathBuf::from(socket),
                host: host.to_owned(),
            })
        }
        _ => Err(bad("expected sim[:FILE[:HOST]] or hub:SOCKET:HOST")),
    }
}

/// The value of `option`, taken with `value`, as `parse` reads it; a value it refuses
/// is [`ArgError::BadValue`], saying why.
fn checked<T>(
    value: &mut impl FnMut(&str) -> Result<String, ArgError>,
    option: &str,
    parse: impl FnOnce(&str) -> Result<T, &'static str>,
) -> Result<T, ArgError> {
    let v = value(option)?;
    parse(&v).map_err(|why| ArgError::BadValue {
        option: option.to_owned(),
        value: v.clone(),
        why,
    })
}

/// The run that `words` ask for, for the tests of the modules that take [`Args`];
/// fails the test when they ask for anything else.
#[cfg(test)]
pub(crate) fn run_args(words: &[&str]) -> Args {
    match parse(words.iter().copied()) {
        Ok(Command::Run(a)) => *a,
        other => panic!("{words:?}: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_options() {
        let a = run_args(&["-D", "-P", "-A", "/a.cfg", "-O/o.cfg"]);
        assert!(a.foreground && !a.systemd);
        assert_eq!(a.addr_file, Some(PathBuf::from("/a.cfg")));
        assert_eq!(a.opts_file, Some(PathBuf::from("/o.cfg")));
        assert_eq!(a.fabric, FabricArg::Hardware);
        let a = run_args(&["-DPA", "x"]);
        assert!(a.foreground);
        assert_eq!(a.addr_file, Some(PathBuf::from("x")));
        let a = run_args(&["--systemd"]);
        assert!(a.systemd && a.foreground);
        assert!(!run_args(&[]).foreground, "daemon mode is the default");
    }

    #[test]
    fn long_options() {
        let a = run_args(&[
            "--fabric",
            "sim",
            "--run-dir=/tmp/r",
            "--log-file",
            "stderr",
            "--log-level",
            "2",
        ]);
        assert_eq!(
            a.fabric,
            FabricArg::Sim {
                file: None,
                host: None
            }
        );
        assert_eq!(a.run_dir, Some(PathBuf::from("/tmp/r")));
        assert_eq!(a.log_file.as_deref(), Some("stderr"));
        assert_eq!(a.log_level, Some(2));
        assert_eq!(a.socket_mode, None, "the options file's, or 0777");
        assert_eq!(
            run_args(&["--socket-mode", "0660"]).socket_mode,
            Some(0o660)
        );
        assert!(matches!(
            parse(["--socket-mode", "999"]),
            Err(ArgError::BadValue { .. })
        ));
        assert_eq!(
            run_args(&["--fabric", "sim:/f.toml:node2"]).fabric,
            FabricArg::Sim {
                file: Some(PathBuf::from("/f.toml")),
                host: Some("node2".into())
            }
        );
        assert_eq!(
            run_args(&["--fabric", "sim:/f.toml"]).fabric,
            FabricArg::Sim {
                file: Some(PathBuf::from("/f.toml")),
                host: None
            }
        );
        assert_eq!(
            run_args(&["--fabric", "hub:/run/hub.sock:node3"]).fabric,
            FabricArg::Hub {
                socket: PathBuf::from("/run/hub.sock"),
                host: "node3".into()
            }
        );
        assert_eq!(parse(["--help"]), Ok(Command::Help));
        assert_eq!(parse(["--version"]), Ok(Command::Version));
    }

    #[test]
    fn access_and_metrics_options() {
        let a = run_args(&[
            "--socket-group",
            "rdma",
            "--allow-users",
            "alice, 1001",
            "--allow-groups=rdma",
            "--metrics-file",
            "/var/lib/m.prom",
            "--metrics-interval=5",
            "--max-queued-reply-bytes",
            "1048576",
            "--max-connections-per-user=4096",
            "--worker-threads",
            "16",
        ]);
        assert_eq!(a.socket_group.as_deref(), Some("rdma"));
        assert_eq!(a.allow_users, Some(vec!["alice".into(), "1001".into()]));
        assert_eq!(a.allow_groups, Some(vec!["rdma".into()]));
        assert_eq!(a.metrics_file, Some(PathBuf::from("/var/lib/m.prom")));
        assert_eq!(a.metrics_interval, Some(5));
        assert_eq!(a.max_queued_reply_bytes, Some(1 << 20));
        assert_eq!(a.max_connections_per_user, Some(4096));
        assert_eq!(a.worker_threads, Some(16));
        assert_eq!(run_args(&["--worker-threads=0"]).worker_threads, Some(0));
        assert_eq!(
            run_args(&["--worker-threads", "256"]).worker_threads,
            Some(256)
        );
        let d = run_args(&[]);
        assert_eq!(
            d.worker_threads, None,
            "the file's, the environment's, or 0"
        );
        assert_eq!(
            (
                d.socket_group,
                d.allow_users,
                d.allow_groups,
                d.metrics_file
            ),
            (None, None, None, None)
        );
        for bad in [
            &["--allow-users", "a,,b"][..],
            &["--allow-groups", ""],
            &["--metrics-interval", "0"],
            &["--metrics-interval", "soon"],
            &["--max-queued-reply-bytes", "65535"],
            &["--max-queued-reply-bytes", "-1"],
            &["--max-queued-reply-bytes", "64M"],
            &["--max-connections-per-user", "0"],
            &["--max-connections-per-user", "lots"],
            &["--worker-threads", "257"],
            &["--worker-threads", "-1"],
            &["--worker-threads", "auto"],
        ] {
            assert!(
                matches!(parse(bad.iter().copied()), Err(ArgError::BadValue { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse(["--allow-users"]),
            Err(ArgError::MissingValue("--allow-users".into()))
        );
    }

    #[test]
    fn errors() {
        assert_eq!(parse(["-x"]), Err(ArgError::Unknown("-x".into())));
        assert_eq!(parse(["--nope"]), Err(ArgError::Unknown("--nope".into())));
        assert_eq!(parse(["-A"]), Err(ArgError::MissingValue("-A".into())));
        assert_eq!(parse(["stray"]), Err(ArgError::Positional("stray".into())));
        assert!(matches!(
            parse(["--fabric", "hub:/only-socket"]),
            Err(ArgError::BadValue { .. })
        ));
        assert!(matches!(
            parse(["--fabric", "wire"]),
            Err(ArgError::BadValue { .. })
        ));
        assert!(matches!(
            parse(["--log-level", "high"]),
            Err(ArgError::BadValue { .. })
        ));
    }
}
