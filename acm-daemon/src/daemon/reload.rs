//! SIGHUP: the options file and the address file read again while the daemon runs
//! (docs/daemon.md §14). The reference has no reload: its daemon "must be stopped and
//! restarted if a cluster is reconfigured", which drops every cache and every client.
//!
//! - **The files.** The same ones as at start: the options file `-O` named, else the
//!   default one (on a simulated fabric without `-O` the options come from the fabric
//!   description, which is not read again); the address file `-A` named, else the
//!   default one (on a simulated fabric without `-A`, the fabric's address text, not
//!   read again). A generated address file is never regenerated: it reflects the host
//!   name and ports, which a reload does not change. When the configured address file
//!   is missing, the running addresses stay (an administrator who copies the generated
//!   file to `/etc/rdma/ibacm_addr.cfg` and edits it makes it the one read).
//! - **All or nothing, and stricter than a start.** A start reads a bad line the way
//!   the reference does (skipped, or a value read as something else, with a warning),
//!   since a daemon that does not start serves nobody. A reload replaces a running
//!   configuration that works, so a file with a line the parsers skip or warn about is
//!   refused whole: nothing of either file is applied, and the log names each file and
//!   line, to fix before the next SIGHUP. An unreadable file, or a bad setting of the
//!   daemon's own, is refused the same way. Notices (an unknown option name) are
//!   logged and do not refuse the reload.
//! - **What changes.** The engine applies the options that can change at run time
//!   and the address file's additions and removals, and logs the options that need a
//!   restart with their file and line ([`acm_engine::config::reload`] has the table).
//!   Of the daemon's own options, `allow_users`, `allow_groups`, `metrics_file`,
//!   `metrics_interval`, `max_queued_reply_bytes` and `max_connections_per_user`
//!   apply at once. New clients are checked against new allow-lists, and the
//!   connected clients of users they no longer let in are closed: an administrator
//!   who narrows them means to shut those users out, not only their next
//!   connection. A lowered `max_connections_per_user` refuses a user's next
//!   connections and leaves those it holds (they are within what the daemon can
//!   serve; closing some would pick among them blindly).
//!   `server_socket_mode` and `server_socket_group` need a restart, as the socket
//!   exists already, and so does `wait_for_device`, read only by a start. The command
//!   line still overrides the files.
//! - **systemd.** Under `--systemd`, `RELOADING=1` is sent before the files are read
//!   and `READY=1` after (`ExecReload=` in ibacm.service sends the SIGHUP).

use super::access::{AccessConfig, AllowList, SocketAccess};
use super::addr_file::{self, AddrFileSpec};
use super::args::{Args, FabricArg};
use super::config::{self, LoadedOptions};
use super::log::{Logger, Priority};
use super::options_source::{self, OptionsSource};
use super::settings::{MetricsConfig, Settings};
use acm_engine::config::{AddrFile, OptionLines, Options, Reconfig, Severity, reload};
use acm_engine::log::Level;
use std::path::{Path, PathBuf};

/// The origin of the daemon's reload lines in the log.
const ORIGIN: &str = "acm_reload";

/// Where the files come from, and what runs now, to tell what a reload changes.
#[derive(Debug)]
pub struct Reloader {
    args: Args,
    run_dir: PathBuf,
    /// The options file read again; `None` when the options come from a simulated
    /// fabric's description.
    options_path: Option<PathBuf>,
    /// The address file read again; `None` when the addresses come from a simulated
    /// fabric's description.
    addr_path: Option<PathBuf>,
    /// The engine's options now in force.
    running: Options,
    /// The daemon's own settings now in force.
    settings: Settings,
}

/// What an accepted reload changes.
#[derive(Debug)]
pub struct Accepted {
    /// For the engine.
    pub reconfig: Reconfig,
    /// The `log_level` the daemon's own log filters with from now on.
    pub log_level: i32,
    /// The daemon's own settings that changed.
    pub settings: SettingsDelta,
}

/// The daemon's own settings a reload changed, each `Some` when it changed.
#[derive(Debug, Default)]
pub struct SettingsDelta {
    /// New allow-lists.
    pub allow: Option<AllowList>,
    /// A new metrics file (`Some(None)`: no more metrics file).
    pub metrics: Option<Option<MetricsConfig>>,
    /// A new bound on queued replies.
    pub max_queued_reply_bytes: Option<u64>,
    /// A new per-user connection limit (`Some(None)`: derived again).
    pub max_connections_per_user: Option<Option<u32>>,
}

impl Reloader {
    /// A reloader for a daemon started with `args` in `run_dir`, running with `opts`,
    /// whose options come from `options_path` and addresses from `addr_path` (each
    /// `None` when it is not a file that can be read again).
    #[must_use]
    pub fn new(
        args: &Args,
        run_dir: PathBuf,
        options_path: Option<PathBuf>,
        addr_path: Option<PathBuf>,
        opts: &LoadedOptions,
    ) -> Self {
        Self {
            args: args.clone(),
            run_dir,
            options_path,
            addr_path,
            running: opts.options.clone(),
            settings: opts.settings.clone(),
        }
    }

    /// Under systemd, says a reload begins (with the monotonic time it asks for).
    pub fn notify_reloading(&self) {
        if self.args.systemd {
            let mut states = vec![sd_notify::NotifyState::Reloading];
            if let Ok(t) = sd_notify::NotifyState::monotonic_usec_now() {
                states.push(t);
            }
            let _ = sd_notify::notify(false, &states);
        }
    }

    /// Under systemd, says the reload is over.
    pub fn notify_ready(&self) {
        if self.args.systemd {
            let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        }
    }

    /// Reads the files again and logs what is wrong with them. `None` when the reload
    /// is refused (the running configuration stays); otherwise what to apply, which
    /// the reloader now takes as running.
    pub fn read(&mut self, log: &mut Logger) -> Option<Accepted> {
        log.log(
            Level::Basic,
            ORIGIN,
            &format!(
                "SIGHUP: reading {} and {} again",
                shown(
                    self.options_path.as_ref(),
                    "options from the fabric description"
                ),
                shown(
                    self.addr_path.as_ref(),
                    "addresses from the fabric description"
                )
            ),
        );
        let mut refused = Vec::new();
        let mut notes = Vec::new();
        let (options, option_lines, settings) = self.read_options(&mut refused, &mut notes);
        let addr_file = self.read_addresses(&mut refused, &mut notes);
        for n in notes {
            log.log(Level::Basic, ORIGIN, &n);
        }
        if !refused.is_empty() {
            for r in &refused {
                log.log_with(Level::Basic, Priority::Warning, ORIGIN, r);
            }
            log.log_with(
                Level::Basic,
                Priority::Warning,
                ORIGIN,
                &format!(
                    "reload refused ({} problems above); the running configuration stays",
                    refused.len()
                ),
            );
            return None;
        }
        let settings = self.settings_changes(&settings, &option_lines, log);
        let reconfig = Reconfig {
            options,
            option_lines,
            addr_file,
        };
        self.running = reload::apply_live(&self.running, &reconfig.options);
        Some(Accepted {
            log_level: self.running.log_level,
            reconfig,
            settings,
        })
    }

    /// The options file as read now (the running options when it is not a file), the
    /// lines that set each option, and the daemon's settings.
    fn read_options(
        &self,
        refused: &mut Vec<String>,
        notes: &mut Vec<String>,
    ) -> (Options, OptionLines, Settings) {
        let keep = || {
            (
                self.running.clone(),
                OptionLines::default(),
                self.settings.clone(),
            )
        };
        let Some(path) = &self.options_path else {
            return keep();
        };
        let mut loaded = match config::load_options(path, &self.args) {
            Ok(l) => l,
            Err(e) => {
                refused.push(e.to_string());
                return keep();
            }
        };
        options_source::place_log_file(&mut loaded, &self.args, &self.run_dir);
        for d in &loaded.diagnostics {
            if d.severity >= Severity::Warning {
                refused.push(d.to_string());
            } else {
                notes.push(d.to_string());
            }
        }
        let name = path.display().to_string();
        if loaded.text.is_none() {
            notes.push(format!(
                "options file {name} not found: every option at its default"
            ));
        }
        let lines = OptionLines::scan(&name, loaded.text.as_deref().unwrap_or_default());
        (loaded.options, lines, loaded.settings)
    }

    /// The address file as read now; `None` keeps the running addresses.
    fn read_addresses(
        &self,
        refused: &mut Vec<String>,
        notes: &mut Vec<String>,
    ) -> Option<AddrFile> {
        let path = self.addr_path.as_ref()?;
        let name = path.display().to_string();
        match config::read_optional(path) {
            Ok(Some(text)) => {
                let (file, diags) = AddrFile::parse(&name, &text);
                // Every diagnostic of this parser is a line it skipped.
                refused.extend(diags.iter().map(ToString::to_string));
                Some(file)
            }
            Ok(None) => {
                notes.push(format!(
                    "address file {name} not found; the running addresses stay"
                ));
                None
            }
            Err(e) => {
                refused.push(format!("cannot read address file {name}: {e}"));
                None
            }
        }
    }

    /// What differs in the daemon's own settings: the changes that apply, and a line
    /// for each that needs a restart. The running settings become the new ones, but
    /// for the socket's, which stay until a restart.
    fn settings_changes(
        &mut self,
        new: &Settings,
        lines: &OptionLines,
        log: &mut Logger,
    ) -> SettingsDelta {
        let old = &self.settings;
        // Destructured so that a new setting fails to compile here until it is given
        // its place (applied, or needing a restart).
        let Settings {
            access:
                AccessConfig {
                    socket: SocketAccess { mode, group },
                    allow,
                },
            metrics,
            max_queued_reply_bytes,
            max_connections_per_user,
            wait_for_device,
        } = new;
        let at_start = [
            (
                "server_socket_mode",
                old.access.socket.mode != *mode,
                "the socket exists already",
            ),
            (
                "server_socket_group",
                old.access.socket.group != *group,
                "the socket exists already",
            ),
            (
                "wait_for_device",
                old.wait_for_device != *wait_for_device,
                "it only decides whether a start without a device waits",
            ),
        ];
        for (name, changed, why) in at_start {
            if changed {
                log.log_with(
                    Level::Basic,
                    Priority::Warning,
                    ORIGIN,
                    &format!(
                        "{}: {name} changed: needs a restart ({why})",
                        lines.place(name)
                    ),
                );
            }
        }
        let allow = (old.access.allow != *allow).then(|| allow.clone());
        let metrics = (old.metrics != *metrics).then(|| metrics.clone());
        let max_queued = (old.max_queued_reply_bytes != *max_queued_reply_bytes)
            .then_some(*max_queued_reply_bytes);
        let per_user = (old.max_connections_per_user != *max_connections_per_user)
            .then_some(*max_connections_per_user);
        let mut changed = Vec::new();
        if allow.is_some() {
            changed.push("allow_users/allow_groups".to_owned());
        }
        if let Some(m) = &metrics {
            changed.push(m.as_ref().map_or_else(
                || "metrics file off".to_owned(),
                |m| {
                    format!(
                        "metrics file {} every {} s",
                        m.path.display(),
                        m.interval.as_secs()
                    )
                },
            ));
        }
        if let Some(b) = max_queued {
            changed.push(format!("max_queued_reply_bytes {b}"));
        }
        if let Some(n) = per_user {
            changed.push(n.map_or_else(
                || "max_connections_per_user derived".to_owned(),
                |n| format!("max_connections_per_user {n}"),
            ));
        }
        if !changed.is_empty() {
            log.log(
                Level::Basic,
                ORIGIN,
                &format!("daemon settings reloaded: {}", changed.join(", ")),
            );
        }
        let socket = self.settings.access.socket.clone();
        let wait = self.settings.wait_for_device;
        self.settings = new.clone();
        self.settings.access.socket = socket;
        self.settings.wait_for_device = wait;
        SettingsDelta {
            allow,
            metrics,
            max_queued_reply_bytes: max_queued,
            max_connections_per_user: per_user,
        }
    }
}

/// The options file a reload reads: the one read at start, unless the options came
/// from a simulated fabric's description.
#[must_use]
pub fn options_path(source: &OptionsSource) -> Option<PathBuf> {
    match source {
        OptionsSource::CommandLine(p) | OptionsSource::DefaultFile { path: p, .. } => {
            Some(p.clone())
        }
        OptionsSource::Fabric { .. } => None,
    }
}

/// The address file a reload reads: the one each backend reads at start
/// ([`super::addr_file`]), unless it came from a simulated fabric's description.
#[must_use]
pub fn addr_path(args: &Args, run_dir: &Path) -> Option<PathBuf> {
    match &args.fabric {
        FabricArg::Sim { .. } => args.addr_file.clone(),
        FabricArg::Hub { .. } => Some(
            addr_file::hub_spec(args.addr_file.as_deref(), args.run_dir.as_deref(), run_dir).path,
        ),
        FabricArg::Hardware => Some(AddrFileSpec::from_arg(args.addr_file.as_deref()).path),
    }
}

/// A file's path, or what stands for it when there is none.
fn shown(path: Option<&PathBuf>, instead: &str) -> String {
    path.map_or_else(|| instead.to_owned(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::args::{Command, parse};
    use crate::test_dir::TestDir;

    fn args(a: &[&str]) -> Args {
        match parse(a.iter().copied()) {
            Ok(Command::Run(a)) => *a,
            other => panic!("{other:?}"),
        }
    }

    /// A reloader over `dir`'s o.cfg and a.cfg, running with `opts`.
    fn reloader(dir: &TestDir, opts: &str) -> Reloader {
        let o = dir.join("o.cfg");
        std::fs::write(&o, opts).unwrap();
        let a = args(&["-O", o.to_str().unwrap(), "--run-dir", "/tmp/r"]);
        let mut loaded = config::load_options(&o, &a).unwrap();
        options_source::place_log_file(&mut loaded, &a, dir.path());
        Reloader::new(
            &a,
            dir.path().to_path_buf(),
            Some(o),
            Some(dir.join("a.cfg")),
            &loaded,
        )
    }

    #[test]
    fn a_bad_line_in_either_file_refuses_the_whole_reload_naming_it() {
        let dir = TestDir::new("reload-bad");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(dir.join("o.cfg"), "log_level 2\n").unwrap();
        std::fs::write(dir.join("a.cfg"), "ok mlx5_0 1 default\nbad mlx5_0 1 zz\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_none());
        let lines = log.lines().join("\n");
        let a = dir.join("a.cfg");
        assert!(
            lines.contains(&format!(
                "{}:2: invalid pkey 'zz'; line skipped",
                a.display()
            )),
            "{lines}"
        );
        assert!(
            lines.contains("reload refused (1 problems above)"),
            "{lines}"
        );
        // A warned option line refuses it too; the running level stays 1.
        std::fs::write(dir.join("a.cfg"), "ok mlx5_0 1 default\n").unwrap();
        std::fs::write(dir.join("o.cfg"), "log_level 2\ntimeout -5\n").unwrap();
        assert!(r.read(&mut log).is_none());
        assert!(
            log.lines().join("\n").contains(&format!(
                "{}:2: option 'timeout' -5 is below its minimum 1",
                dir.join("o.cfg").display()
            )),
            "{:?}",
            log.lines()
        );
        assert_eq!(r.running.log_level, 1);
    }

    #[test]
    fn an_accepted_reload_hands_over_both_files_and_the_changed_settings() {
        let dir = TestDir::new("reload-ok");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(
            dir.join("o.cfg"),
            "log_level 2\nbogus 1\nmax_queued_reply_bytes 1048576\nmax_connections_per_user 100\n",
        )
        .unwrap();
        std::fs::write(dir.join("a.cfg"), "n1 mlx5_0 1 default\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        let a = r.read(&mut log).expect("accepted");
        assert_eq!(a.log_level, 2);
        assert_eq!(a.reconfig.options.log_level, 2);
        assert_eq!(
            a.reconfig.addr_file.as_ref().map(|f| f.lines.len()),
            Some(1)
        );
        assert_eq!(a.settings.max_queued_reply_bytes, Some(1 << 20));
        assert_eq!(a.settings.max_connections_per_user, Some(Some(100)));
        assert!(a.settings.allow.is_none() && a.settings.metrics.is_none());
        let lines = log.lines().join("\n");
        assert!(lines.contains("unknown option 'bogus' ignored"), "{lines}");
        assert!(
            lines.contains(
                "daemon settings reloaded: max_queued_reply_bytes 1048576, max_connections_per_user 100"
            ),
            "{lines}"
        );
        // The same files again: nothing of the daemon's changes; the log file stays
        // in the run directory as at start.
        let a = r.read(&mut log).expect("accepted");
        assert_eq!(a.settings.max_queued_reply_bytes, None);
        assert_eq!(a.settings.max_connections_per_user, None);
        assert_eq!(reload::option_changes(&r.running, &a.reconfig.options), []);
        // A missing address file keeps the running addresses.
        std::fs::remove_file(dir.join("a.cfg")).unwrap();
        let a = r.read(&mut log).expect("accepted");
        assert!(a.reconfig.addr_file.is_none());
        assert!(
            log.lines()
                .join("\n")
                .contains("not found; the running addresses stay"),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn wait_for_device_and_the_socket_mode_need_a_restart_and_keep_their_values() {
        let dir = TestDir::new("reload-start-only");
        let mut r = reloader(
            &dir,
            "wait_for_device 0
",
        );
        std::fs::write(
            dir.join("o.cfg"),
            "wait_for_device 1
server_socket_mode 0600
",
        )
        .unwrap();
        std::fs::write(
            dir.join("a.cfg"),
            "n1 mlx5_0 1 default
",
        )
        .unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_some());
        let lines = log.lines().join("\n");
        let o = dir.join("o.cfg");
        assert!(
            lines.contains(&format!(
                "{}:1: wait_for_device changed: needs a restart",
                o.display()
            )),
            "{lines}"
        );
        assert!(
            lines.contains(&format!(
                "{}:2: server_socket_mode changed: needs a restart",
                o.display()
            )),
            "{lines}"
        );
        assert!(!r.settings.wait_for_device);
    }
}
