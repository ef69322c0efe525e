//! The daemon's own options, which the reference does not have: access control
//! ([`super::access`]), the metrics file ([`super::metrics`]), the bound on replies
//! queued for clients ([`super::server`]) and on each user's connections
//! ([`super::conn_limits`]), the number of threads serving clients
//! ([`super::worker_threads`]), from the options
//! file's lines ([`acm_engine::config::DAEMON_OPTIONS`]) and the command line, which
//! overrides them (and, for `worker_threads` alone, the environment, which they both
//! override).
//!
//! Unlike the reference's options, whose bad values the reference logs and reads as
//! something else, a bad value here stops the start with the file and line: guessing
//! would open the daemon to users it was meant to refuse, or write metrics nowhere.
//!
//! | option | command line | default | meaning |
//! |---|---|---|---|
//! | `server_socket_mode` | `--socket-mode` | 0777 | the unix socket's permission bits, in octal |
//! | `server_socket_group` | `--socket-group` | the daemon's | the unix socket's group, a name or gid |
//! | `allow_users` | `--allow-users` | everyone | users (names or uids) allowed to connect; lines add up |
//! | `allow_groups` | `--allow-groups` | everyone | groups (names or gids) allowed to connect; lines add up |
//! | `metrics_file` | `--metrics-file` | none | write metrics there, in the Prometheus text format |
//! | `metrics_interval` | `--metrics-interval` | 15 | seconds between two writes of the metrics file |
//! | `max_queued_reply_bytes` | `--max-queued-reply-bytes` | 67108864 (64 MiB) | replies queued for all clients together beyond which the ones not reading are closed |
//! | `max_connections_per_user` | `--max-connections-per-user` | half the connections all users share | client connections one user other than root and the daemon's may hold |
//! | `wait_for_device` | `--systemd` turns it on | 0 | on hardware, start without an InfiniBand device and wait for one, rather than exit |
//! | `worker_threads` | `--worker-threads` | `ACM_WORKER_THREADS`, else 0 | threads serving clients: 0 one worker per two CPUs from 4 CPUs up (at most 64), 1 one thread for everything, N that many workers beside the engine's thread |
//!
//! A command-line list replaces the file's list of the same kind.

use super::access::{self, AccessConfig, Id, Kind};
use super::args::Args;
use super::option_values::{
    parse_interval, parse_per_user, parse_queued_bytes, parse_switch, parse_worker_threads,
};
use super::worker_threads::{self, WORKER_THREADS_ENV};
use acm_engine::config::{OptionLine, ServerMode};
use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The metrics file's default interval, in seconds: Prometheus's default scrape
/// interval, so that a scrape of node_exporter rarely sees the same values twice.
pub(crate) const DEFAULT_METRICS_INTERVAL: u32 = 15;

/// `max_queued_reply_bytes`' default, 64 MiB: a thousand clients that stopped reading
/// with a full per-connection backlog (64 KiB, [`super::conn::BACKLOG_LIMIT`]) each,
/// far more than a healthy daemon ever queues (its clients read each reply as it
/// comes: a few KiB in all), and little beside a server's memory. Without a bound,
/// 8,000 such clients held 1.16 GB.
pub(crate) const DEFAULT_MAX_QUEUED_REPLY_BYTES: u64 = 64 << 20;

/// Where and how often the metrics file is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// The file.
    pub path: PathBuf,
    /// The time between two writes.
    pub interval: Duration,
}

/// The daemon's own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Socket permissions and allow-lists.
    pub access: AccessConfig,
    /// The metrics file, if one is asked for.
    pub metrics: Option<MetricsConfig>,
    /// Replies queued for all clients together, in bytes, beyond which the clients
    /// with the most queued are closed.
    pub max_queued_reply_bytes: u64,
    /// Client connections one user other than root and the daemon's may hold; `None`
    /// derives it from the descriptor limit (`conn_limits`).
    pub max_connections_per_user: Option<u32>,
    /// On hardware, start without an InfiniBand device and serve the first that
    /// appears, rather than exit (`--systemd` turns it on too: a unit started before
    /// the driver is loaded must not fail).
    pub wait_for_device: bool,
    /// `worker_threads` as configured: 0 chosen from the CPUs, 1 single-threaded, N that many
    /// workers (`worker_threads::worker_count` says how many to start).
    pub worker_threads: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            access: AccessConfig::default(),
            metrics: None,
            max_queued_reply_bytes: DEFAULT_MAX_QUEUED_REPLY_BYTES,
            max_connections_per_user: None,
            wait_for_device: false,
            worker_threads: 0,
        }
    }
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of the options file.
    File {
        /// The file's name.
        file: String,
        /// The line, from 1.
        line: usize,
    },
    /// The command line.
    CommandLine,
    /// An environment variable.
    Environment {
        /// Its name.
        variable: &'static str,
    },
}

/// A setting the daemon refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SettingError {
    /// Where it was given.
    pub origin: Origin,
    /// The option's name in the options file.
    pub option: &'static str,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::File { file, line } => {
                write!(f, "{file}:{line}: {}: {}", self.option, self.message)
            }
            Origin::CommandLine => write!(f, "{}: {}", flag(self.option), self.message),
            Origin::Environment { variable } => {
                write!(f, "{variable}: {}: {}", self.option, self.message)
            }
        }
    }
}

/// The command-line flag of an option.
#[must_use]
pub(crate) fn flag(option: &'static str) -> &'static str {
    match option {
        "server_socket_mode" => "--socket-mode",
        "server_socket_group" => "--socket-group",
        "allow_users" => "--allow-users",
        "allow_groups" => "--allow-groups",
        "metrics_file" => "--metrics-file",
        "metrics_interval" => "--metrics-interval",
        "max_queued_reply_bytes" => "--max-queued-reply-bytes",
        "max_connections_per_user" => "--max-connections-per-user",
        "worker_threads" => "--worker-threads",
        other => other,
    }
}

impl Settings {
    /// The settings from the options file's `lines` (the file named `file`), then the
    /// command line's, for a daemon listening in `server_mode`; `worker_threads` from
    /// this process's environment (`ACM_WORKER_THREADS`) when neither sets it.
    ///
    /// # Errors
    /// The first bad value: a mode that is not octal, a name the user or group
    /// database does not know, an empty list, a relative metrics file, an interval
    /// out of range, or an allow-list with a TCP server mode, whose clients carry no
    /// credentials.
    pub fn resolve(
        lines: &[OptionLine],
        file: &str,
        args: &Args,
        server_mode: ServerMode,
    ) -> Result<Self, SettingError> {
        let env = std::env::var_os(WORKER_THREADS_ENV);
        Self::resolve_with_env(lines, file, args, server_mode, env.as_deref())
    }

    /// [`Settings::resolve`] with [`WORKER_THREADS_ENV`]'s value given (`None`: not
    /// set), so that tests need not change the process's environment.
    ///
    /// # Errors
    /// As [`Settings::resolve`].
    pub(crate) fn resolve_with_env(
        lines: &[OptionLine],
        file: &str,
        args: &Args,
        server_mode: ServerMode,
        worker_threads_env: Option<&OsStr>,
    ) -> Result<Self, SettingError> {
        let mut s = Self::default();
        let mut worker_threads = None;
        let mut metrics_file: Option<PathBuf> = None;
        let mut interval = DEFAULT_METRICS_INTERVAL;
        // Where the allow-lists were given, for the server-mode check.
        let mut allow_origin = None;
        for l in lines {
            let err = |message: String| SettingError {
                origin: Origin::File {
                    file: file.to_owned(),
                    line: l.line,
                },
                option: l.name,
                message,
            };
            let v = utf8(&l.value).map_err(err)?;
            if v.is_empty() {
                return Err(err("needs a value".into()));
            }
            match l.name {
                "server_socket_mode" => {
                    s.access.socket.mode =
                        Some(access::parse_mode(one(v).map_err(err)?).map_err(|m| err(m.into()))?);
                }
                "server_socket_group" => {
                    s.access.socket.group =
                        Some(access::lookup(Kind::Group, one(v).map_err(err)?).map_err(err)?);
                }
                "allow_users" | "allow_groups" => {
                    let kind = if l.name == "allow_users" {
                        Kind::User
                    } else {
                        Kind::Group
                    };
                    let ids = ids(kind, v).map_err(err)?;
                    let list = if kind == Kind::User {
                        &mut s.access.allow.users
                    } else {
                        &mut s.access.allow.groups
                    };
                    list.extend(ids);
                    allow_origin.get_or_insert((
                        Origin::File {
                            file: file.to_owned(),
                            line: l.line,
                        },
                        l.name,
                    ));
                }
                "metrics_file" => {
                    let p = PathBuf::from(one(v).map_err(err)?);
                    if p.is_relative() {
                        return Err(err("must be an absolute path".into()));
                    }
                    metrics_file = Some(p);
                }
                "metrics_interval" => {
                    interval = parse_interval(one(v).map_err(err)?).map_err(err)?;
                }
                "wait_for_device" => {
                    s.wait_for_device = parse_switch(one(v).map_err(err)?).map_err(err)?;
                }
                "max_connections_per_user" => {
                    s.max_connections_per_user =
                        Some(parse_per_user(one(v).map_err(err)?).map_err(err)?);
                }
                "worker_threads" => {
                    worker_threads = Some(parse_worker_threads(one(v).map_err(err)?).map_err(err)?);
                }
                _ => {
                    s.max_queued_reply_bytes =
                        parse_queued_bytes(one(v).map_err(err)?).map_err(err)?;
                }
            }
        }
        let cli = |option: &'static str| {
            move |message: String| SettingError {
                origin: Origin::CommandLine,
                option,
                message,
            }
        };
        if let Some(m) = args.socket_mode {
            s.access.socket.mode = Some(m);
        }
        if let Some(g) = &args.socket_group {
            s.access.socket.group =
                Some(access::lookup(Kind::Group, g).map_err(cli("server_socket_group"))?);
        }
        if let Some(users) = &args.allow_users {
            s.access.allow.users = lookup_all(Kind::User, users).map_err(cli("allow_users"))?;
            allow_origin = Some((Origin::CommandLine, "allow_users"));
        }
        if let Some(groups) = &args.allow_groups {
            s.access.allow.groups = lookup_all(Kind::Group, groups).map_err(cli("allow_groups"))?;
            allow_origin = Some((Origin::CommandLine, "allow_groups"));
        }
        if let Some(p) = &args.metrics_file {
            metrics_file = Some(p.clone());
        }
        if let Some(i) = args.metrics_interval {
            interval = i;
        }
        if let Some(n) = args.max_queued_reply_bytes {
            s.max_queued_reply_bytes = n;
        }
        if let Some(n) = args.max_connections_per_user {
            s.max_connections_per_user = Some(n);
        }
        s.wait_for_device |= args.systemd;
        s.worker_threads = match args.worker_threads.or(worker_threads) {
            Some(n) => n,
            None => worker_threads::from_environment(worker_threads_env)
                .map_err(|message| SettingError {
                    origin: Origin::Environment {
                        variable: WORKER_THREADS_ENV,
                    },
                    option: "worker_threads",
                    message,
                })?
                .unwrap_or_default(),
        };
        if !s.access.allow.is_open()
            && server_mode != ServerMode::Unix
            && let Some((origin, option)) = allow_origin
        {
            return Err(SettingError {
                origin,
                option,
                message: "needs server_mode unix: TCP clients carry no credentials to check".into(),
            });
        }
        s.metrics = metrics_file.map(|path| MetricsConfig {
            path,
            interval: Duration::from_secs(u64::from(interval)),
        });
        Ok(s)
    }

    /// The settings as start-up log lines, in the style of the reference's option
    /// lines; nothing for what is left at its default.
    #[must_use]
    pub fn log_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let a = &self.access;
        if let Some(m) = a.socket.mode {
            lines.push(format!("server_socket_mode {m:04o}"));
        }
        if let Some(g) = &a.socket.group {
            lines.push(format!("server_socket_group {g}"));
        }
        let list = |ids: &[Id]| ids.iter().map(Id::to_string).collect::<Vec<_>>().join(", ");
        if !a.allow.users.is_empty() {
            lines.push(format!("allow_users {}", list(&a.allow.users)));
        }
        if !a.allow.groups.is_empty() {
            lines.push(format!("allow_groups {}", list(&a.allow.groups)));
        }
        if let Some(m) = &self.metrics {
            lines.push(format!("metrics_file {}", m.path.display()));
            lines.push(format!("metrics_interval {} s", m.interval.as_secs()));
        }
        if self.wait_for_device {
            lines.push("wait_for_device 1".to_owned());
        }
        if self.max_queued_reply_bytes != DEFAULT_MAX_QUEUED_REPLY_BYTES {
            lines.push(format!(
                "max_queued_reply_bytes {}",
                self.max_queued_reply_bytes
            ));
        }
        if let Some(n) = self.max_connections_per_user {
            lines.push(format!("max_connections_per_user {n}"));
        }
        lines
    }
}

impl Settings {
    /// What in these settings probably does not do what was meant, for the log.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        let socket = &self.access.socket;
        let mode = socket.mode.unwrap_or(super::listen::DEFAULT_SOCKET_MODE);
        match &socket.group {
            // Connecting needs write permission on the socket file.
            Some(g) if mode & 0o002 != 0 => vec![format!(
                "server_socket_group {g} restricts nothing while server_socket_mode {mode:04o} lets every user connect"
            )],
            _ => Vec::new(),
        }
    }
}

/// A value as text. Names are looked up in the user and group databases and paths are
/// opened, so a byte that is not UTF-8 cannot be guessed at: read as U+FFFD it would
/// name another user, group or file.
///
/// # Errors
/// The first byte that is not UTF-8, with the text before it.
fn utf8(v: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(v).map_err(|e| {
        let good = String::from_utf8_lossy(&v[..e.valid_up_to()]);
        format!(
            "the value is not UTF-8 text: byte {:#04x} after '{good}' (write names and paths in UTF-8)",
            v[e.valid_up_to()]
        )
    })
}

/// A value that must be one word.
fn one(v: &str) -> Result<&str, String> {
    if v.split_ascii_whitespace().count() == 1 {
        Ok(v)
    } else {
        Err(format!("expected one value, not '{v}'"))
    }
}

/// The ids of a list value.
fn ids(kind: Kind, v: &str) -> Result<Vec<Id>, String> {
    let names = access::split_list(v).map_err(str::to_owned)?;
    lookup_all(kind, &names)
}

fn lookup_all(kind: Kind, names: &[String]) -> Result<Vec<Id>, String> {
    names.iter().map(|n| access::lookup(kind, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::config::Options;

    use crate::args::run_args;

    /// The settings of options file `text` and command line `words`, with
    /// `ACM_WORKER_THREADS` unset whatever this process's environment holds.
    fn from(text: &str, words: &[&str]) -> Result<Settings, SettingError> {
        from_env(text, words, None)
    }

    fn from_env(text: &str, words: &[&str], env: Option<&str>) -> Result<Settings, SettingError> {
        let (o, _) = Options::parse("opts.cfg", text);
        Settings::resolve_with_env(
            &o.daemon_options,
            "opts.cfg",
            &run_args(words),
            o.server_mode,
            env.map(OsStr::new),
        )
    }

    fn error(text: &str, words: &[&str]) -> String {
        from(text, words).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_reference_open_socket_and_no_metrics() {
        let s = from("", &[]).unwrap();
        assert_eq!(s, Settings::default());
        assert!(s.access.allow.is_open());
        assert_eq!(s.access.socket.mode, None);
        assert!(s.log_lines().is_empty());
        assert!(s.warnings().is_empty());
    }

    #[test]
    fn a_group_with_a_mode_open_to_all_is_warned_about() {
        let s = from("server_socket_group 0\n", &[]).unwrap();
        assert_eq!(
            s.warnings(),
            [
                "server_socket_group 0 restricts nothing while server_socket_mode 0777 lets every user connect"
            ]
        );
        assert!(
            from("server_socket_group 0\nserver_socket_mode 0770\n", &[])
                .unwrap()
                .warnings()
                .is_empty()
        );
    }

    #[test]
    fn file_values_then_command_line_overrides() {
        let text = "\
server_socket_mode 0770
server_socket_group root
allow_users root, 4242
allow_users 4243
allow_groups 0
metrics_file /var/lib/node_exporter/ibacm.prom
metrics_interval 30
max_queued_reply_bytes 1048576
max_connections_per_user 5000
";
        let s = from(text, &[]).unwrap();
        assert_eq!(s.max_queued_reply_bytes, 1 << 20);
        assert_eq!(s.max_connections_per_user, Some(5000));
        assert_eq!(s.access.socket.mode, Some(0o770));
        assert_eq!(s.access.socket.group.as_ref().map(|g| g.id), Some(0));
        let uids: Vec<u32> = s.access.allow.users.iter().map(|u| u.id).collect();
        assert_eq!(uids, [0, 4242, 4243], "lines add up");
        assert_eq!(s.access.allow.groups[0].id, 0);
        assert_eq!(
            s.metrics,
            Some(MetricsConfig {
                path: "/var/lib/node_exporter/ibacm.prom".into(),
                interval: Duration::from_secs(30),
            })
        );
        assert_eq!(
            s.log_lines(),
            [
                "server_socket_mode 0770",
                "server_socket_group root (0)",
                "allow_users root (0), 4242, 4243",
                "allow_groups 0",
                "metrics_file /var/lib/node_exporter/ibacm.prom",
                "metrics_interval 30 s",
                "max_queued_reply_bytes 1048576",
                "max_connections_per_user 5000",
            ]
        );
        let s = from(
            text,
            &[
                "--socket-mode",
                "0700",
                "--allow-users",
                "7",
                "--metrics-file",
                "/tmp/m.prom",
                "--metrics-interval",
                "1",
                "--max-queued-reply-bytes",
                "65536",
                "--max-connections-per-user",
                "7",
            ],
        )
        .unwrap();
        assert_eq!(s.max_queued_reply_bytes, 65536);
        assert_eq!(s.max_connections_per_user, Some(7));
        assert_eq!(s.access.socket.mode, Some(0o700));
        let uids: Vec<u32> = s.access.allow.users.iter().map(|u| u.id).collect();
        assert_eq!(uids, [7], "the command line's list replaces the file's");
        assert_eq!(s.access.allow.groups.len(), 1, "the other list stays");
        let m = s.metrics.unwrap();
        assert_eq!(
            (m.path.to_str(), m.interval.as_secs()),
            (Some("/tmp/m.prom"), 1)
        );
        // The interval alone asks for no file.
        assert_eq!(from("metrics_interval 5\n", &[]).unwrap().metrics, None);
        let d = from("", &[]).unwrap();
        assert_eq!(d.max_queued_reply_bytes, DEFAULT_MAX_QUEUED_REPLY_BYTES);
        assert_eq!(d.max_connections_per_user, None, "derived at run time");
        assert!(d.log_lines().is_empty(), "a default is not logged");
    }

    #[test]
    fn waiting_for_a_device_is_asked_by_the_file_or_by_systemd() {
        assert!(!from("", &[]).unwrap().wait_for_device);
        let s = from("wait_for_device yes\n", &[]).unwrap();
        assert!(s.wait_for_device);
        assert_eq!(s.log_lines(), ["wait_for_device 1"]);
        assert!(!from("wait_for_device 0\n", &[]).unwrap().wait_for_device);
        assert!(from("", &["--systemd"]).unwrap().wait_for_device);
        assert_eq!(
            error("wait_for_device maybe\n", &[]),
            "opts.cfg:1: wait_for_device: expected 1 or 0 (yes or no), not 'maybe'"
        );
    }

    #[test]
    fn bad_values_name_the_file_and_line() {
        assert_eq!(
            error("retries 1\nserver_socket_mode 0999\n", &[]),
            "opts.cfg:2: server_socket_mode: expected octal permission bits such as 0770 (at most 0777)"
        );
        assert_eq!(
            error("allow_users root, no-such-user-acm\n", &[]),
            "opts.cfg:1: allow_users: no user named 'no-such-user-acm'"
        );
        assert_eq!(
            error("\n\nallow_groups\n", &[]),
            "opts.cfg:3: allow_groups: needs a value"
        );
        assert_eq!(
            error("allow_groups root,,0\n", &[]),
            "opts.cfg:1: allow_groups: expected names or numbers separated by commas, with none empty"
        );
        assert_eq!(
            error("server_socket_group no-such-group-acm\n", &[]),
            "opts.cfg:1: server_socket_group: no group named 'no-such-group-acm'"
        );
        assert_eq!(
            error("server_socket_mode 0770 0660\n", &[]),
            "opts.cfg:1: server_socket_mode: expected one value, not '0770 0660'"
        );
        assert_eq!(
            error("metrics_file ibacm.prom\n", &[]),
            "opts.cfg:1: metrics_file: must be an absolute path"
        );
        assert_eq!(
            error("metrics_interval 0\n", &[]),
            "opts.cfg:1: metrics_interval: expected whole seconds from 1 to 86400, not '0'"
        );
        for v in ["65535", "1099511627777", "-1", "64M", "1e6"] {
            assert_eq!(
                error(&format!("\nmax_queued_reply_bytes {v}\n"), &[]),
                format!(
                    "opts.cfg:2: max_queued_reply_bytes: expected whole bytes from 65536 to 1099511627776, not '{v}'"
                )
            );
        }
        for v in ["0", "1073741825", "-1", "10k", "many"] {
            assert_eq!(
                error(&format!("\nmax_connections_per_user {v}\n"), &[]),
                format!(
                    "opts.cfg:2: max_connections_per_user: expected whole connections from 1 to 1073741824, not '{v}'"
                )
            );
        }
        // A byte that is not UTF-8 (Latin-1 here) in a name or path is refused with its
        // line, not read as U+FFFD.
        for (text, option, before) in [
            (
                &b"# r\xe9glages\nallow_users ren\xe9\n"[..],
                "allow_users",
                "ren",
            ),
            (
                b"\nallow_groups root, \xe9quipe\n",
                "allow_groups",
                "root, ",
            ),
            (
                b"\nserver_socket_group gr\xfcn\n",
                "server_socket_group",
                "gr",
            ),
            (
                b"\nmetrics_file /var/lib/caf\xe9.prom\n",
                "metrics_file",
                "/var/lib/caf",
            ),
        ] {
            let (o, _) = Options::parse("opts.cfg", text);
            let e = Settings::resolve_with_env(
                &o.daemon_options,
                "opts.cfg",
                &run_args(&[]),
                o.server_mode,
                None,
            )
            .unwrap_err()
            .to_string();
            // The value's byte: the last one above 0x7f.
            let byte = *text.iter().rev().find(|&&b| b > 0x7f).unwrap();
            assert_eq!(
                e,
                format!(
                    "opts.cfg:2: {option}: the value is not UTF-8 text: byte {byte:#04x} after '{before}' (write names and paths in UTF-8)"
                )
            );
        }
        assert_eq!(
            error("server_mode loop\nallow_groups 0\n", &[]),
            "opts.cfg:2: allow_groups: needs server_mode unix: TCP clients carry no credentials to check"
        );
        // --systemd forces unix.
        let (mut o, _) = Options::parse("o", "server_mode open\nallow_users 1\n");
        super::super::config::apply_overrides(&mut o, &run_args(&["--systemd"]));
        assert!(
            Settings::resolve_with_env(&o.daemon_options, "o", &run_args(&[]), o.server_mode, None)
                .is_ok()
        );
        // The command line's values are named by their flags.
        assert_eq!(
            error("", &["--allow-users", "no-such-user-acm"]),
            "--allow-users: no user named 'no-such-user-acm'"
        );
        assert_eq!(
            error("server_mode open\n", &["--allow-groups", "0"]),
            "--allow-groups: needs server_mode unix: TCP clients carry no credentials to check"
        );
        assert_eq!(
            error("", &["--socket-group", "no-such-group-acm"]),
            "--socket-group: no group named 'no-such-group-acm'"
        );
    }

    #[test]
    fn worker_threads_from_the_command_line_over_the_file_over_the_environment() {
        let threads = |text: &str, words: &[&str], env: Option<&str>| {
            from_env(text, words, env).unwrap().worker_threads
        };
        assert_eq!(threads("", &[], None), 0, "chosen from the CPUs by default");
        assert_eq!(threads("worker_threads 4\n", &[], None), 4);
        assert_eq!(threads("WORKER_THREADS 1\n", &[], None), 1, "any case");
        assert_eq!(
            threads("worker_threads 4\nworker_threads 256\n", &[], None),
            256,
            "the last line"
        );
        assert_eq!(threads("", &[], Some("1")), 1, "the environment's default");
        assert_eq!(threads("worker_threads 4\n", &[], Some("1")), 4);
        assert_eq!(
            threads("worker_threads 4\n", &["--worker-threads", "2"], Some("1")),
            2
        );
        assert_eq!(threads("", &["--worker-threads=0"], Some("8")), 0);
        // The environment is not read when the file or the command line sets it: a bad
        // value there is no error then.
        assert_eq!(threads("worker_threads 3\n", &[], Some("lots")), 3);
        assert_eq!(threads("", &["--worker-threads", "3"], Some("lots")), 3);
        // Not logged with the daemon's other settings: the start logs what it becomes
        // (worker_threads::worker_threads_line), CPUs included.
        assert!(
            from("worker_threads 4\n", &[])
                .unwrap()
                .log_lines()
                .is_empty()
        );
    }

    #[test]
    fn a_bad_worker_threads_names_its_file_and_line_or_its_variable() {
        for v in ["257", "-1", "4k", "many", "1.5"] {
            assert_eq!(
                error(&format!("log_level 1\nworker_threads {v}\n"), &[]),
                format!(
                    "opts.cfg:2: worker_threads: expected a whole number of threads from 0 (chosen from the CPUs) to 256, not '{v}'"
                )
            );
        }
        assert_eq!(
            error("worker_threads 2 4\n", &[]),
            "opts.cfg:1: worker_threads: expected one value, not '2 4'"
        );
        assert_eq!(
            from_env("", &[], Some("1000")).unwrap_err().to_string(),
            "ACM_WORKER_THREADS: worker_threads: expected a whole number of threads from 0 (chosen from the CPUs) to 256, not '1000'"
        );
        assert_eq!(
            from_env("", &[], Some("1000")).unwrap_err().origin,
            Origin::Environment {
                variable: "ACM_WORKER_THREADS"
            }
        );
    }
}
