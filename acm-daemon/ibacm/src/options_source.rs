//! Which options the daemon runs with, and where they came from.
//!
//! Precedence, highest first:
//!
//! 1. the command line: `--log-file`, `--log-level`, and `--systemd` (which forces the
//!    unix server mode);
//! 2. the options file `-O` names, when given: it replaces the whole options text, also
//!    on a simulated fabric (that is how a test or an administrator overrides a fabric
//!    host's options);
//! 3. on a simulated fabric (`--fabric sim`), the options text the fabric description
//!    gives the host (empty: every default); the machine's `/etc/rdma/ibacm_opts.cfg` is
//!    then not read at all, since it configures the machine's real daemon, not a host of
//!    a simulation;
//! 4. otherwise (hardware, or a fabric hub, whose hosts' options stay with the hub) the
//!    default options file `/etc/rdma/ibacm_opts.cfg`, optional as in the reference.
//!
//! One set of options then governs everything: the logger, the lock file, the server
//! mode and the engine. (Before, a simulated host's engine took the fabric's options but
//! the logger and the listener took the default file's.) The start-up log names the
//! source ([`OptionsSource`]).
//!
//! The default log file also depends on where the daemon runs: `/var/log/ibacm.log` (the
//! reference's) on hardware without `--run-dir`; `RUN_DIR/ibacm.log` with `--run-dir`
//! or on any simulated fabric (RUN_DIR being `/run` without `--run-dir`), so that a
//! test or demo daemon never writes the machine's log. A `log_file` the options text
//! names, or `--log-file`, always wins.

use super::args::{Args, FabricArg};
use super::config::{self, LoadError, LoadedOptions};
use super::settings::{SettingError, Settings};
use acm_engine::config::Options;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where the options came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptionsSource {
    /// The file `-O` named.
    CommandLine(PathBuf),
    /// Host `host` of a simulated fabric; `file` is `None` for the built-in demo fabric.
    Fabric {
        /// The fabric description.
        file: Option<PathBuf>,
        /// The host.
        host: String,
    },
    /// The default options file; `found` is false when it does not exist (defaults).
    DefaultFile {
        /// The file.
        path: PathBuf,
        /// Whether it exists.
        found: bool,
    },
}

impl fmt::Display for OptionsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CommandLine(p) => write!(f, "options from {} (-O)", p.display()),
            Self::Fabric {
                file: Some(p),
                host,
            } => write!(f, "options from fabric {} host {host}", p.display()),
            Self::Fabric { file: None, host } => write!(
                f,
                "options from the built-in demo fabric (testdata/fabrics/demo.toml) host {host}"
            ),
            Self::DefaultFile { path, found: true } => {
                write!(f, "options from {}", path.display())
            }
            Self::DefaultFile { path, found: false } => {
                write!(f, "options from {} (not found: defaults)", path.display())
            }
        }
    }
}

/// A simulated fabric's options for the daemon's host: the fabric file (`None`: the
/// built-in demo), the host's name and its options text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FabricHostOptions<'a> {
    /// The fabric description.
    pub file: Option<&'a Path>,
    /// The host.
    pub host: &'a str,
    /// Its options text.
    pub text: &'a str,
}

/// Why the options cannot be had.
#[derive(Debug, Error)]
pub(crate) enum OptionsError {
    /// The options file cannot be read, or a line of it is bad.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The file `-O` names does not exist: a mistyped name must not run the daemon on
    /// every default unnoticed.
    #[error("options file {} (-O) not found", .0.display())]
    NamedFileMissing(PathBuf),
    /// One of the daemon's own settings in a fabric host's options is bad.
    #[error(transparent)]
    Setting(#[from] SettingError),
}

/// The options by the precedence above, with the default log file placed for
/// `run_dir`.
///
/// # Errors
/// The options file exists but cannot be read (or is no regular file, or is over its
/// bound), the file `-O` names does not exist, or one of the daemon's own settings is
/// bad; the message names the file (and line).
pub(crate) fn load(
    args: &Args,
    fabric: Option<FabricHostOptions<'_>>,
    run_dir: &Path,
) -> Result<(LoadedOptions, OptionsSource), OptionsError> {
    let read = |path: &Path| config::load_options(path, args);
    let (mut loaded, source) = match (&args.opts_file, fabric) {
        (Some(path), _) => {
            let loaded = read(path)?;
            // A mistyped -O must not run the daemon on every default unnoticed.
            if loaded.text.is_none() {
                return Err(OptionsError::NamedFileMissing(path.clone()));
            }
            (loaded, OptionsSource::CommandLine(path.clone()))
        }
        (None, Some(f)) => {
            let name = format!("{}:ibacm_opts.cfg", f.host);
            let (mut options, diagnostics) = Options::parse(&name, f.text);
            config::apply_overrides(&mut options, args);
            // The daemon's own settings (access control, metrics) too, as from a file.
            let settings =
                Settings::resolve(&options.daemon_options, &name, args, options.server_mode)?;
            let loaded = LoadedOptions {
                options,
                text: Some(f.text.as_bytes().to_vec()),
                // What the start-up log shows as the options file.
                path: f.file.map_or_else(
                    || PathBuf::from("(built-in demo fabric)"),
                    Path::to_path_buf,
                ),
                diagnostics,
                settings,
            };
            let source = OptionsSource::Fabric {
                file: f.file.map(Path::to_path_buf),
                host: f.host.to_owned(),
            };
            (loaded, source)
        }
        (None, None) => {
            let path = PathBuf::from(config::DEFAULT_OPTS_FILE);
            let loaded = read(&path)?;
            let found = loaded.text.is_some();
            (loaded, OptionsSource::DefaultFile { path, found })
        }
    };
    place_log_file(&mut loaded, args, run_dir);
    Ok((loaded, source))
}

/// The default log file's place (see the module's doc): `RUN_DIR/ibacm.log` unless the
/// options or `--log-file` name one, or the daemon runs on hardware without
/// `--run-dir`. A reload reads the options file through this too, so that an unchanged
/// file reads as unchanged.
pub(crate) fn place_log_file(loaded: &mut LoadedOptions, args: &Args, run_dir: &Path) {
    let keeps_machine_log = args.run_dir.is_none() && args.fabric == FabricArg::Hardware;
    let named =
        args.log_file.is_some() || names_log_file(loaded.text.as_deref().unwrap_or_default());
    if !named && !keeps_machine_log {
        loaded.options.log_file = run_dir.join("ibacm.log").display().to_string();
    }
}

/// Whether an options file's bytes set `log_file`, by the parser's own rules (comments,
/// case, line length, a name without a value, bytes that are not UTF-8): a sentinel
/// value put first survives only if no later line sets the option.
#[must_use]
pub fn names_log_file(text: &[u8]) -> bool {
    const SENTINEL: &str = "\u{1}unset";
    let mut probe = format!("log_file {SENTINEL}\n").into_bytes();
    probe.extend_from_slice(text);
    Options::parse("", &probe).0.log_file != SENTINEL
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::run_args;

    #[test]
    fn a_log_file_line_is_recognised_as_the_parser_reads_it() {
        assert!(names_log_file(b"log_file /x.log\n"));
        assert!(names_log_file(b"LOG_FILE stdout\n"));
        assert!(!names_log_file(b"# log_file /x.log\nlog_level 2\n"));
        assert!(
            !names_log_file(b"log_file\n"),
            "a name without a value sets nothing"
        );
        assert!(!names_log_file(b""));
        // Latin-1 in a comment, and in the file name itself (a path is bytes).
        assert!(names_log_file(
            b"# r\xe9glages\nlog_file /var/log/caf\xe9.log\n"
        ));
        assert!(!names_log_file(
            b"# journal \xe9crit ailleurs\nlog_level 1\n"
        ));
    }

    #[test]
    fn fabric_options_govern_and_the_log_moves_to_the_run_dir() {
        let run = Path::new("/tmp/r");
        let a = run_args(&["--fabric", "sim", "--run-dir", "/tmp/r"]);
        let f = FabricHostOptions {
            file: None,
            host: "node1",
            text: "log_level 2\n",
        };
        let (l, src) = load(&a, Some(f), run).unwrap();
        assert_eq!(l.options.log_level, 2);
        assert_eq!(l.options.log_file, "/tmp/r/ibacm.log");
        assert_eq!(
            src.to_string(),
            "options from the built-in demo fabric (testdata/fabrics/demo.toml) host node1"
        );
        // The fabric's own log_file wins over the default; --log-file over both.
        let f = FabricHostOptions {
            file: Some(Path::new("/f.toml")),
            host: "n2",
            text: "log_file stderr\n",
        };
        let (l, src) = load(&a, Some(f), run).unwrap();
        assert_eq!(l.options.log_file, "stderr");
        assert_eq!(src.to_string(), "options from fabric /f.toml host n2");
        let a = run_args(&[
            "--fabric",
            "sim",
            "--log-file",
            "stdout",
            "--log-level",
            "0",
        ]);
        let (l, _) = load(&a, Some(f), Path::new("/run")).unwrap();
        assert_eq!(
            (l.options.log_file.as_str(), l.options.log_level),
            ("stdout", 0)
        );
    }

    #[test]
    fn an_options_file_replaces_the_fabric_options() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let o = dir.path().join("o.cfg");
        std::fs::write(&o, "log_level 1\n").unwrap();
        let a = run_args(&["--fabric", "sim", "-O", o.to_str().unwrap()]);
        let f = FabricHostOptions {
            file: None,
            host: "node1",
            text: "log_level 2\n",
        };
        let (l, src) = load(&a, Some(f), Path::new("/run")).unwrap();
        assert_eq!(l.options.log_level, 1);
        assert_eq!(l.options.log_file, "/run/ibacm.log", "any simulated fabric");
        assert_eq!(src, OptionsSource::CommandLine(o.clone()));
        // On hardware without --run-dir the reference's log stays.
        let a = run_args(&["-O", o.to_str().unwrap()]);
        let (l, _) = load(&a, None, Path::new("/run")).unwrap();
        assert_eq!(l.options.log_file, "/var/log/ibacm.log");
        // A file -O names must exist (the default one need not).
        let missing = dir.path().join("missing.cfg");
        let a = run_args(&["-O", missing.to_str().unwrap()]);
        assert_eq!(
            load(&a, None, Path::new("/run")).unwrap_err().to_string(),
            format!("options file {} (-O) not found", missing.display())
        );
    }
}
