//! SIGHUP: the options file and the address file read again while the daemon runs
//! (docs/daemon.md §14). The reference has no reload: its daemon "must be stopped and
//! restarted if a cluster is reconfigured", which drops every cache and every client.
//!
//! - **The files.** The same ones as at start: the options file `-O` named, else the
//!   default one (on a simulated fabric without `-O` the options come from the fabric
//!   description, which is not read again); the address file `-A` named, else the
//!   default one (on a simulated fabric without `-A`, the fabric's address text, not
//!   read again). A generated address file is never regenerated: it reflects the host
//!   name and ports, which a reload does not change (an administrator who copies the
//!   generated file to `/etc/rdma/ibacm_addr.cfg` and edits it makes it the one read).
//! - **Only what can be trusted.** A reload replaces a running configuration that
//!   works, and a file caught in the middle of a rewrite (empty, cut short, gone for a
//!   moment) must not replace it: dropping `allow_users` serves a user refused a moment
//!   before, dropping `support_ips_in_addr_cfg` loses addresses. So each file is read
//!   as [`config_file::read`] reads every configuration file (a regular file within its
//!   bound, opened without blocking, so a FIFO or a device costs the event loop
//!   nothing), must be text ([`config_file::text_problem`]: not empty, no NUL or other
//!   control byte), and every one of its lines must be one its parser takes as
//!   written: a line skipped, warned about or noticed (an unknown option name, a name
//!   without a value) refuses it. A file that was there when last read (at start, or
//!   at the last reload accepted) and is gone refuses it too; one absent then and now
//!   is no change (Debian ships no options file, and a default address file missing at
//!   start was generated elsewhere). A bad setting of the daemon's own refuses it.
//! - **All or nothing.** A refusal applies nothing of either file: the running
//!   configuration stays, the log names each problem's file and line (of each file,
//!   the first 10 notices and 100 warnings or errors whole, then how many more:
//!   [`acm_engine::config::summarize`]) and ends with `reload refused`, and the
//!   daemon's metrics count it (`acm_reload_refused_total`; `acm_reloads_total` counts
//!   those applied). A start is not as strict: it reads a bad line the way the
//!   reference does (skipped, or a value read as something else, with a warning), since
//!   a daemon that does not start serves nobody.
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
//!   exists already, and so does `wait_for_device`, read only by a start, and
//!   `worker_threads`, as the threads serving clients are started once (each owns its
//!   connections; moving them between threads at a reload is not worth what a reload
//!   is for). The command line still overrides the files.
//! - **systemd.** Under `--systemd`, `RELOADING=1` is sent before the files are read
//!   and `READY=1` after (`ExecReload=` in ibacm.service sends the SIGHUP).

use super::access::{AccessConfig, AllowList, SocketAccess};
use super::addr_file::{self, AddrFileSpec};
use super::args::{Args, FabricArg};
use super::config::{self, LoadedOptions};
use super::config_file::{self, ConfigKind};
use super::log::{Logger, Priority};
use super::options_source::{self, OptionsSource};
use super::settings::{MetricsConfig, Settings};
use acm_engine::config::{AddrFile, Diagnostic, OptionLines, Options, Reconfig, reload, summarize};
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
    /// Whether the options file was there when last read (at start, or at the last
    /// reload accepted): a file absent then and now is no change (Debian ships none),
    /// a file that has gone since is a refusal (it may be in the middle of a rewrite).
    options_present: bool,
    /// The same for the address file (a default one absent at start was generated
    /// elsewhere, which a reload does not read).
    addr_present: bool,
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
        let addr_present = addr_path.as_deref().is_some_and(Path::exists);
        Self {
            args: args.clone(),
            run_dir,
            options_path,
            addr_path,
            options_present: opts.text.is_some(),
            addr_present,
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
        let mut notes = Vec::new();
        let options = self.read_options(&mut notes);
        let addresses = self.read_addresses(&mut notes);
        for n in notes {
            log.log(Level::Basic, ORIGIN, &n);
        }
        let (options, addresses) = match (options, addresses) {
            (Ok(o), Ok(a)) => (o, a),
            (o, a) => {
                let refused = [o.err(), a.err()];
                refuse(refused.iter().flatten(), log);
                return None;
            }
        };
        let (options, option_lines, settings) = match options {
            Some(loaded) => {
                self.options_present = true;
                let lines = OptionLines::scan(
                    &loaded.path.display().to_string(),
                    loaded.text.as_deref().unwrap_or_default(),
                );
                (loaded.options, lines, loaded.settings)
            }
            None => (
                self.running.clone(),
                OptionLines::default(),
                self.settings.clone(),
            ),
        };
        if addresses.is_some() {
            self.addr_present = true;
        }
        let settings = self.settings_changes(&settings, &option_lines, log);
        let reconfig = Reconfig {
            options,
            option_lines,
            addr_file: addresses,
        };
        self.running = reload::apply_live(&self.running, &reconfig.options);
        Some(Accepted {
            log_level: self.running.log_level,
            reconfig,
            settings,
        })
    }

    /// The options file as read now; `Ok(None)` when the running
    /// options stay (they come from a fabric description, or the file was absent when
    /// last read and still is).
    ///
    /// # Errors
    /// What refuses the reload.
    fn read_options(&self, notes: &mut Vec<String>) -> Result<Option<LoadedOptions>, Problems> {
        let Some(path) = &self.options_path else {
            return Ok(None);
        };
        let name = path.display().to_string();
        let Some(text) = read_trusted(path, ConfigKind::Options, self.options_present)? else {
            notes.push(format!(
                "options file {name} still absent: the running options stay"
            ));
            return Ok(None);
        };
        let mut loaded = config::parse_options(path, Some(text), &self.args)
            .map_err(|e| Problems::one(e.to_string()))?;
        // Every line the parser did not take as written, an unknown option included:
        // the file is not what its author meant, or not yet what it will be.
        if !loaded.diagnostics.is_empty() {
            return Err(Problems::of_diagnostics(&loaded.diagnostics));
        }
        options_source::place_log_file(&mut loaded, &self.args, &self.run_dir);
        Ok(Some(loaded))
    }

    /// The address file as read now; `Ok(None)` keeps the running addresses (they come
    /// from a fabric description, or the file was absent when last read and still is).
    ///
    /// # Errors
    /// What refuses the reload.
    fn read_addresses(&self, notes: &mut Vec<String>) -> Result<Option<AddrFile>, Problems> {
        let Some(path) = &self.addr_path else {
            return Ok(None);
        };
        let name = path.display().to_string();
        let Some(text) = read_trusted(path, ConfigKind::Addresses, self.addr_present)? else {
            notes.push(format!(
                "address file {name} still absent: the running addresses stay"
            ));
            return Ok(None);
        };
        let (file, diags) = AddrFile::parse(&name, &text);
        // Every diagnostic of this parser is a line it skipped.
        if !diags.is_empty() {
            return Err(Problems::of_diagnostics(&diags));
        }
        Ok(Some(file))
    }

    /// What differs in the daemon's own settings: the changes that apply, and a line
    /// for each that needs a restart. The running settings become the new ones, but
    /// for those needing a restart, which keep their running values until then.
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
            worker_threads,
        } = new;
        // Each with what changed, when it did.
        let at_start = [
            (
                "server_socket_mode",
                (old.access.socket.mode != *mode).then(|| "changed".to_owned()),
                "the socket exists already",
            ),
            (
                "server_socket_group",
                (old.access.socket.group != *group).then(|| "changed".to_owned()),
                "the socket exists already",
            ),
            (
                "wait_for_device",
                (old.wait_for_device != *wait_for_device).then(|| "changed".to_owned()),
                "it only decides whether a start without a device waits",
            ),
            (
                "worker_threads",
                (old.worker_threads != *worker_threads)
                    .then(|| format!("changed from {} to {worker_threads}", old.worker_threads)),
                "the threads serving clients are started once",
            ),
        ];
        for (name, changed, why) in at_start {
            if let Some(changed) = changed {
                log.log_with(
                    Level::Basic,
                    Priority::Warning,
                    ORIGIN,
                    &format!(
                        "{}: {name} {changed}: needs a restart ({why})",
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
        let workers = self.settings.worker_threads;
        self.settings = new.clone();
        self.settings.access.socket = socket;
        self.settings.wait_for_device = wait;
        self.settings.worker_threads = workers;
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
pub(crate) fn options_path(source: &OptionsSource) -> Option<PathBuf> {
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
pub(crate) fn addr_path(args: &Args, run_dir: &Path) -> Option<PathBuf> {
    match &args.fabric {
        FabricArg::Sim { .. } => args.addr_file.clone(),
        FabricArg::Hub { .. } => Some(
            addr_file::hub_spec(args.addr_file.as_deref(), args.run_dir.as_deref(), run_dir).path,
        ),
        FabricArg::Hardware => Some(AddrFileSpec::from_arg(args.addr_file.as_deref()).path),
    }
}

/// The bytes of the `kind` file at `path` if a reload can trust them to be a
/// configuration: a regular file within its bound ([`config_file::read`]), holding text
/// ([`config_file::text_problem`]). `Ok(None)` when the file is absent and was absent
/// when last read (`was_present` false).
///
/// # Errors
/// The file is gone since it was last read, cannot be read, or is no configuration.
fn read_trusted(
    path: &Path,
    kind: ConfigKind,
    was_present: bool,
) -> Result<Option<Vec<u8>>, Problems> {
    let name = path.display().to_string();
    match config_file::read(path, kind) {
        Ok(Some(text)) => match config_file::text_problem(&text) {
            Some(p) => Err(Problems::one(p.describe(&name))),
            None => Ok(Some(text)),
        },
        Ok(None) if !was_present => Ok(None),
        Ok(None) => Err(Problems::one(format!(
            "{} {name} not found, where it was when last read",
            kind.what()
        ))),
        Err(e) => Err(Problems::one(e.to_string())),
    }
}

/// What is wrong with one file: the lines to log (every diagnostic's, up to its
/// severity's bound: [`acm_engine::config::summarize`]), and how many problems in all.
#[derive(Debug, Default)]
struct Problems {
    lines: Vec<String>,
    count: usize,
    left_out: usize,
}

impl Problems {
    /// A single problem.
    fn one(problem: String) -> Self {
        Self {
            lines: vec![problem],
            count: 1,
            left_out: 0,
        }
    }

    /// One problem per diagnostic, whatever its severity.
    fn of_diagnostics(diags: &[Diagnostic]) -> Self {
        let s = summarize(diags);
        Self {
            lines: s.lines,
            count: diags.len(),
            left_out: s.left_out,
        }
    }
}

/// Logs the problems of each file (a bounded number each) and the refusal.
fn refuse<'a>(files: impl Iterator<Item = &'a Problems>, log: &mut Logger) {
    let (mut total, mut left_out) = (0, 0);
    for p in files {
        for line in &p.lines {
            log.log_with(Level::Basic, Priority::Warning, ORIGIN, line);
        }
        total += p.count;
        left_out += p.left_out;
    }
    let counted = if left_out == 0 {
        format!("{total} problems above")
    } else {
        format!("{total} problems, {} shown above", total - left_out)
    };
    log.log_with(
        Level::Basic,
        Priority::Warning,
        ORIGIN,
        &format!("reload refused ({counted}); the running configuration stays"),
    );
}

/// A file's path, or what stands for it when there is none.
fn shown(path: Option<&PathBuf>, instead: &str) -> String {
    path.map_or_else(|| instead.to_owned(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::run_args;
    use tempfile::TempDir;

    /// A reloader over `dir`'s o.cfg and a.cfg, running with `opts`.
    fn reloader(dir: &TempDir, opts: &str) -> Reloader {
        reloader_with_args(dir, opts, &[])
    }

    /// [`reloader`] for a daemon whose command line has `more` too.
    fn reloader_with_args(dir: &TempDir, opts: &str, more: &[&str]) -> Reloader {
        let o = dir.path().join("o.cfg");
        std::fs::write(&o, opts).unwrap();
        let mut words = vec!["-O", o.to_str().unwrap(), "--run-dir", "/tmp/r"];
        words.extend_from_slice(more);
        let a = run_args(&words);
        let mut loaded = config::load_options(&o, &a).unwrap();
        options_source::place_log_file(&mut loaded, &a, dir.path());
        Reloader::new(
            &a,
            dir.path().to_path_buf(),
            Some(o),
            Some(dir.path().join("a.cfg")),
            &loaded,
        )
    }

    #[test]
    fn a_bad_line_in_either_file_refuses_the_whole_reload_naming_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(dir.path().join("o.cfg"), "log_level 2\n").unwrap();
        std::fs::write(
            dir.path().join("a.cfg"),
            "ok mlx5_0 1 default\nbad mlx5_0 1 zz\n",
        )
        .unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_none());
        let lines = log.lines().join("\n");
        let a = dir.path().join("a.cfg");
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
        std::fs::write(dir.path().join("a.cfg"), "ok mlx5_0 1 default\n").unwrap();
        std::fs::write(dir.path().join("o.cfg"), "log_level 2\ntimeout -5\n").unwrap();
        assert!(r.read(&mut log).is_none());
        assert!(
            log.lines().join("\n").contains(&format!(
                "{}:2: option 'timeout' -5 is below its minimum 1",
                dir.path().join("o.cfg").display()
            )),
            "{:?}",
            log.lines()
        );
        assert_eq!(r.running.log_level, 1);
    }

    #[test]
    fn an_accepted_reload_hands_over_both_files_and_the_changed_settings() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(
            dir.path().join("o.cfg"),
            "log_level 2\n# caf\u{e9}\nmax_queued_reply_bytes 1048576\nmax_connections_per_user 100\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.cfg"),
            b"# h\xf4te\nn1 mlx5_0 1 default\n",
        )
        .unwrap();
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
        // The address file, read at the last reload, has gone: refused.
        std::fs::remove_file(dir.path().join("a.cfg")).unwrap();
        assert!(r.read(&mut log).is_none());
        assert!(
            log.lines().join("\n").contains(&format!(
                "address file {} not found, where it was when last read",
                dir.path().join("a.cfg").display()
            )),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn an_unknown_option_or_a_name_without_a_value_refuses_the_reload() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(dir.path().join("a.cfg"), "n1 mlx5_0 1 default\n").unwrap();
        let o = dir.path().join("o.cfg");
        let mut log = Logger::memory(Some(Level::Basic));
        std::fs::write(&o, "log_level 2\nbogus 1\nallow_users root\n").unwrap();
        assert!(r.read(&mut log).is_none());
        std::fs::write(&o, "log_level 2\ntimeout\n").unwrap();
        assert!(r.read(&mut log).is_none());
        let lines = log.lines().join("\n");
        for want in [
            format!("{}:2: unknown option 'bogus' ignored", o.display()),
            format!(
                "{}:2: option 'timeout' has no value; line ignored",
                o.display()
            ),
            "reload refused (1 problems above); the running configuration stays".to_owned(),
        ] {
            assert!(lines.contains(&want), "no '{want}' in:\n{lines}");
        }
        assert_eq!(r.running.log_level, 1);
        assert!(r.settings.access.allow.users.is_empty());
    }

    #[test]
    fn many_problems_are_logged_a_few_whole_then_counted() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(&dir, "log_level 1\n");
        std::fs::write(
            dir.path().join("a.cfg"),
            "n1 mlx5_0 1 default\nbad mlx5_0 1 zz\n",
        )
        .unwrap();
        let text: String = (0..25).map(|i| format!("unknown_{i} 1\n")).collect();
        let o = dir.path().join("o.cfg");
        std::fs::write(&o, text).unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_none());
        let lines = log.lines();
        // The SIGHUP line, ten of the options file's and its count, the address file's
        // one, the end.
        let n = acm_engine::config::NOTICES_LOGGED;
        assert_eq!(lines.len(), 1 + n + 1 + 1 + 1, "{lines:#?}");
        assert!(lines[n].contains("unknown_9"), "{lines:#?}");
        assert!(
            lines[n + 1].ends_with(&format!(
                "{}: and 15 more notices (lines 11 to 25)\n",
                o.display()
            )),
            "{lines:#?}"
        );
        assert!(lines[n + 2].contains("invalid pkey"), "{lines:#?}");
        assert!(
            lines.last().is_some_and(|l| l.ends_with(
                ": acm_reload: reload refused (26 problems, 11 shown above); the running configuration stays\n"
            )),
            "{lines:#?}"
        );
    }

    /// The options and address files as a rewrite or a hostile hand may leave them:
    /// each refuses the reload, naming the file, and the running allow-list and
    /// options stay.
    #[test]
    fn a_file_that_is_no_configuration_refuses_the_reload_and_keeps_the_running_one() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(&dir, "allow_users root\nsupport_ips_in_addr_cfg 1\n");
        let allow = r.settings.access.allow.clone();
        assert!(!allow.users.is_empty());
        std::fs::write(dir.path().join("a.cfg"), "n1 mlx5_0 1 default\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_some(), "{:?}", log.lines());
        let big = usize::try_from(ConfigKind::Options.max_bytes()).unwrap() + 1;
        for file in ["o.cfg", "a.cfg"] {
            let path = dir.path().join(file);
            let good = std::fs::read(&path).unwrap();
            let name = path.display().to_string();
            let cases: [(&str, &dyn Fn()); 6] = [
                ("empty", &|| std::fs::write(&path, b"").unwrap()),
                ("binary", &|| {
                    std::fs::write(&path, b"\x7fELF\x02\x01\x00\x00").unwrap()
                }),
                ("missing", &|| std::fs::remove_file(&path).unwrap()),
                ("FIFO", &|| {
                    std::fs::remove_file(&path).unwrap();
                    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
                        .unwrap();
                }),
                ("/dev/zero", &|| {
                    std::fs::remove_file(&path).unwrap();
                    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
                }),
                ("too large", &|| {
                    std::fs::write(&path, vec![b'#'; big]).unwrap()
                }),
            ];
            for (what, make) in cases {
                make();
                let before = log.lines().len();
                assert!(r.read(&mut log).is_none(), "{file} {what} accepted");
                let said = log.lines()[before..].join("\n");
                assert!(said.contains(&name), "{file} {what}: {said}");
                assert!(said.contains("reload refused (1 problems above)"), "{said}");
                assert_eq!(r.settings.access.allow, allow, "{file} {what}");
                assert!(r.running.support_ips_in_addr_cfg, "{file} {what}");
                let _ = std::fs::remove_file(&path);
                std::fs::write(&path, &good).unwrap();
            }
        }
        assert!(r.read(&mut log).is_some(), "the good files again");
    }

    #[test]
    fn a_file_absent_at_start_and_still_absent_is_no_change() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let o = dir.path().join("o.cfg");
        // As the default options file, which Debian does not ship.
        let a = run_args(&["--run-dir", "/tmp/r"]);
        let mut loaded = config::load_options(&o, &a).unwrap();
        options_source::place_log_file(&mut loaded, &a, dir.path());
        let mut r = Reloader::new(
            &a,
            dir.path().to_path_buf(),
            Some(o.clone()),
            Some(dir.path().join("a.cfg")),
            &loaded,
        );
        let mut log = Logger::memory(Some(Level::Basic));
        let acc = r.read(&mut log).expect("accepted");
        assert!(acc.reconfig.addr_file.is_none());
        assert_eq!(
            reload::option_changes(&r.running, &acc.reconfig.options),
            []
        );
        let lines = log.lines().join("\n");
        assert!(
            lines.contains(&format!(
                "options file {} still absent: the running options stay",
                o.display()
            )) && lines.contains("still absent: the running addresses stay"),
            "{lines}"
        );
        // Written: read. Gone again: refused, as a file in the middle of a rewrite.
        std::fs::write(&o, "log_level 2\n").unwrap();
        assert_eq!(r.read(&mut log).expect("accepted").log_level, 2);
        std::fs::remove_file(&o).unwrap();
        assert!(r.read(&mut log).is_none());
        assert_eq!(r.running.log_level, 2);
    }

    #[test]
    fn wait_for_device_and_the_socket_mode_need_a_restart_and_keep_their_values() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut r = reloader(
            &dir,
            "wait_for_device 0
",
        );
        std::fs::write(
            dir.path().join("o.cfg"),
            "wait_for_device 1
server_socket_mode 0600
",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.cfg"),
            "n1 mlx5_0 1 default
",
        )
        .unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_some());
        let lines = log.lines().join("\n");
        let o = dir.path().join("o.cfg");
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

    #[test]
    fn worker_threads_needs_a_restart_and_keeps_its_running_value() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("a.cfg"), "n1 mlx5_0 1 default\n").unwrap();
        let o = dir.path().join("o.cfg");
        let mut r = reloader(&dir, "worker_threads 2\n");
        assert_eq!(r.settings.worker_threads, 2);
        std::fs::write(&o, "log_level 1\nworker_threads 4\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        let a = r.read(&mut log).expect("accepted: the rest applies");
        assert_eq!(a.log_level, 1);
        let lines = log.lines().join("\n");
        assert!(
            lines.contains(&format!(
                "{}:2: worker_threads changed from 2 to 4: needs a restart (the threads serving clients are started once)",
                o.display()
            )),
            "{lines}"
        );
        assert!(!lines.contains("daemon settings reloaded"), "{lines}");
        assert_eq!(r.settings.worker_threads, 2, "the running value stays");
        // The file as at start again: nothing to say.
        std::fs::write(&o, "worker_threads 2\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_some());
        assert!(
            !log.lines().join("\n").contains("worker_threads"),
            "{:?}",
            log.lines()
        );
        // A bad value refuses the reload, naming its line, as at start.
        std::fs::write(&o, "worker_threads 300\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_none());
        let lines = log.lines().join("\n");
        assert!(
            lines.contains(&format!(
                "{}:1: worker_threads: expected a whole number of threads from 0 (chosen from the CPUs) to 256, not '300'",
                o.display()
            )),
            "{lines}"
        );
        // The command line overrides the file, so the file's change changes nothing.
        let mut r = reloader_with_args(&dir, "worker_threads 2\n", &["--worker-threads", "3"]);
        assert_eq!(r.settings.worker_threads, 3);
        std::fs::write(&o, "worker_threads 8\n").unwrap();
        let mut log = Logger::memory(Some(Level::Basic));
        assert!(r.read(&mut log).is_some());
        assert!(
            !log.lines().join("\n").contains("worker_threads"),
            "{:?}",
            log.lines()
        );
        assert_eq!(r.settings.worker_threads, 3);
    }
}
