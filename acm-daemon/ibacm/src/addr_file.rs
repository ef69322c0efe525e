//! Where the daemon's address file comes from, and where a missing one is written.
//!
//! The reference answers a missing address file by running `ib_acme -A`, which always
//! writes `/etc/rdma/ibacm_addr.cfg` whatever `-A` said; under systemd's
//! `ProtectSystem=` `/etc` is read-only, so generation fails and the endpoints keep only
//! their IP addresses (docs/daemon.md §5, docs/reference-quirks.md §25). This daemon never writes
//! `/etc` unasked:
//!
//! - The configured file (`-A PATH`, else `/etc/rdma/ibacm_addr.cfg`) is read when it
//!   exists ([`super::config_file::read`]: a regular file within its bound). A file
//!   that exists but cannot be read is reported and not replaced: it is the
//!   administrator's. When `-A` named it, the daemon does not start at all
//!   ([`check_named`]): the administrator asked for that file.
//! - A missing **default** file is generated into the run directory
//!   (`RUN_DIR/ibacm_addr.cfg`, `/run` unless `--run-dir`), which the daemon must be able
//!   to write anyway (its socket link and lock file live there), and the log says where.
//!   It is never read back as configuration: it is regenerated at every start, since it
//!   only reflects the host name and ports of the moment. An administrator who wants to
//!   edit it copies it to `/etc/rdma/ibacm_addr.cfg`.
//! - A missing **explicit** `-A PATH` is generated at PATH, since that is where the
//!   administrator asked for it; when PATH cannot be written (a read-only `/etc` under
//!   `ProtectSystem=`), into the run directory instead.
//! - When no place can be written, the generated text is still used, from memory: the
//!   names are derived from the host and its ports and are as valid unsaved; only the
//!   copy for the administrator is missing, which the log says.

use super::config::generated_addr_file;
use super::config_file::{self, ConfigKind, FileError};
use super::safe_file;
use acm_engine::DeviceDesc;
use std::path::{Path, PathBuf};

/// The file name of a generated address file in the run directory.
pub(crate) const GENERATED_NAME: &str = "ibacm_addr.cfg";

/// Which address file the daemon was told to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddrFileSpec {
    /// The file read when it exists.
    pub path: PathBuf,
    /// Whether the command line named it (`-A`): a missing file is then generated there
    /// rather than in the run directory.
    pub explicit: bool,
}

impl AddrFileSpec {
    /// `-A PATH` when given, else the reference's default path.
    #[must_use]
    pub(crate) fn from_arg(arg: Option<&Path>) -> Self {
        arg.map_or_else(
            || Self {
                path: PathBuf::from(super::config::DEFAULT_ADDR_FILE),
                explicit: false,
            },
            |p| Self {
                path: p.to_path_buf(),
                explicit: true,
            },
        )
    }
}

/// The address file of a fabric hub's host: `-A PATH` when given; with `--run-dir` and
/// no `-A`, `RUN_DIR/ibacm_addr.cfg` (generated there at the first start, read back at
/// the next and at a reload) rather than the machine's `/etc` one; else the default.
#[must_use]
pub(crate) fn hub_spec(
    addr_arg: Option<&Path>,
    run_dir_arg: Option<&Path>,
    run_dir: &Path,
) -> AddrFileSpec {
    match (addr_arg, run_dir_arg) {
        (None, Some(_)) => AddrFileSpec {
            path: run_dir.join(GENERATED_NAME),
            explicit: true,
        },
        (a, _) => AddrFileSpec::from_arg(a),
    }
}

/// Checks, before anything is created, the address file `-A` named: one that exists
/// must be a regular file within its bound that can be read. A missing one is no error:
/// it is generated there ([`load_or_generate`]).
///
/// # Errors
/// What [`config_file::read`] says about it.
pub(crate) fn check_named(path: &Path) -> Result<(), FileError> {
    config_file::read(path, ConfigKind::Addresses).map(|_| ())
}

/// The address file's bytes and the name its diagnostics carry (the file it was read
/// from or written to; the configured path when it could not be saved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddrText {
    /// The file's name, for diagnostics.
    pub name: String,
    /// Its bytes: an administrator's file may hold Latin-1 names or comments, which
    /// the engine's parser reads as the reference does (see [`super::config`]).
    pub text: Vec<u8>,
}

/// The address file for host `host` with `devices`: read, or generated as the module
/// documentation says. `None` only when the configured file exists but cannot be read
/// (the engine then has only its IP addresses, as the reference without a file).
pub(crate) fn load_or_generate(
    spec: &AddrFileSpec,
    run_dir: &Path,
    host: &str,
    devices: &[DeviceDesc],
    log: &mut dyn FnMut(String),
) -> Option<AddrText> {
    match config_file::read(&spec.path, ConfigKind::Addresses) {
        Ok(Some(text)) => {
            return Some(AddrText {
                name: spec.path.display().to_string(),
                text,
            });
        }
        Ok(None) => {}
        Err(e) => {
            log(e.to_string());
            return None;
        }
    }
    let text = generated_addr_file(host, devices);
    let fallback = run_dir.join(GENERATED_NAME);
    let mut targets = Vec::with_capacity(2);
    if spec.explicit {
        targets.push(spec.path.clone());
    }
    if !targets.contains(&fallback) {
        targets.push(fallback);
    }
    let mut failures = Vec::new();
    for target in targets {
        // The administrator's path was just found missing: created, never replaced. The
        // run directory's copy is the daemon's own, regenerated at every start.
        let saved = if target == spec.path {
            safe_file::write_new(&target, text.as_bytes(), 0o644)
        } else {
            safe_file::replace(&target, text.as_bytes(), 0o644)
        };
        match saved {
            Ok(()) => {
                let why = if target == spec.path {
                    String::new()
                } else if failures.is_empty() {
                    format!(" (copy it to {} to keep or edit it)", spec.path.display())
                } else {
                    format!(" instead ({})", failures.join("; "))
                };
                log(format!(
                    "address file {} not found; generated {}{why}",
                    spec.path.display(),
                    target.display()
                ));
                return Some(AddrText {
                    name: target.display().to_string(),
                    text: text.into_bytes(),
                });
            }
            Err(e) => failures.push(format!("cannot write {}: {e}", target.display())),
        }
    }
    log(format!(
        "address file {} not found; generated it but could not save it ({}), using it \
         from memory",
        spec.path.display(),
        failures.join("; ")
    ));
    Some(AddrText {
        name: spec.path.display().to_string(),
        text: text.into_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::{PortAttrs, PortState};

    fn devices() -> Vec<DeviceDesc> {
        vec![DeviceDesc {
            id: acm_engine::DeviceId(0),
            name: "mlx5_0".into(),
            guid: 1,
            ports: vec![PortAttrs {
                state: PortState::Active,
                link_layer_ib: true,
                ..PortAttrs::default()
            }],
        }]
    }

    fn run(spec: &AddrFileSpec, run_dir: &Path) -> (Option<AddrText>, Vec<String>) {
        let mut logs = Vec::new();
        let got = load_or_generate(spec, run_dir, "node9.example", &devices(), &mut |l| {
            logs.push(l);
        });
        (got, logs)
    }

    #[test]
    fn an_existing_file_is_read_and_nothing_is_written() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("mine.cfg");
        std::fs::write(&path, "h mlx5_0 1 default\n").unwrap();
        let spec = AddrFileSpec::from_arg(Some(&path));
        let (got, logs) = run(&spec, t.path());
        let got = got.unwrap();
        assert_eq!(got.text, b"h mlx5_0 1 default\n");
        assert_eq!(got.name, path.display().to_string());
        assert!(logs.is_empty(), "{logs:?}");
        assert!(!t.path().join(GENERATED_NAME).exists());
    }

    #[test]
    fn a_missing_default_file_is_generated_in_the_run_directory() {
        let t = tempfile::tempdir().unwrap();
        // The default path stands in for /etc/rdma/ibacm_addr.cfg: not explicit, so it
        // is never written even where it could be.
        let spec = AddrFileSpec {
            path: t.path().join("etc-rdma-ibacm_addr.cfg"),
            explicit: false,
        };
        let run_dir = t.path().join("run");
        std::fs::create_dir(&run_dir).unwrap();
        let (got, logs) = run(&spec, &run_dir);
        let got = got.unwrap();
        let generated = run_dir.join(GENERATED_NAME);
        assert_eq!(std::fs::read(&generated).unwrap(), got.text);
        let text = String::from_utf8(got.text.clone()).unwrap();
        assert!(text.contains("\nnode9 mlx5_0 1 default\n"), "{text}");
        assert_eq!(got.name, generated.display().to_string());
        assert!(
            !spec.path.exists(),
            "the configured default is never written"
        );
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(
            logs[0].contains("not found; generated") && logs[0].contains("copy it to"),
            "{logs:?}"
        );
        // Regenerated, not read back, at the next start.
        std::fs::write(&generated, "stale mlx5_0 1 default\n").unwrap();
        let (again, _) = run(&spec, &run_dir);
        assert_eq!(again.unwrap().text, got.text);
    }

    #[test]
    fn the_real_default_is_the_references_path_and_not_explicit() {
        let spec = AddrFileSpec::from_arg(None);
        assert_eq!(spec.path, Path::new("/etc/rdma/ibacm_addr.cfg"));
        assert!(!spec.explicit);
    }

    #[test]
    fn a_missing_explicit_file_is_generated_where_the_command_line_says() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("addr.cfg");
        let spec = AddrFileSpec::from_arg(Some(&path));
        let run_dir = t.path().join("run");
        std::fs::create_dir(&run_dir).unwrap();
        let (got, logs) = run(&spec, &run_dir);
        let got = got.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), got.text);
        assert_eq!(got.name, path.display().to_string());
        assert!(!run_dir.join(GENERATED_NAME).exists());
        assert_eq!(
            logs,
            [format!(
                "address file {} not found; generated {}",
                path.display(),
                path.display()
            )]
        );
    }

    #[test]
    fn an_unwritable_explicit_path_falls_back_to_the_run_directory() {
        let t = tempfile::tempdir().unwrap();
        // A file in a directory that does not exist: not found when read, and not
        // creatable, even by root (who may write a read-only directory).
        let path = t.path().join("missing-dir").join("addr.cfg");
        let spec = AddrFileSpec::from_arg(Some(&path));
        let (got, logs) = run(&spec, t.path());
        let got = got.unwrap();
        let generated = t.path().join(GENERATED_NAME);
        assert_eq!(std::fs::read(&generated).unwrap(), got.text);
        assert_eq!(got.name, generated.display().to_string());
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(
            logs[0].contains(&format!("generated {} instead", generated.display()))
                && logs[0].contains(&format!("cannot write {}", path.display())),
            "{logs:?}"
        );
    }

    #[test]
    fn with_nowhere_to_write_the_text_is_used_from_memory() {
        let t = tempfile::tempdir().unwrap();
        let spec = AddrFileSpec::from_arg(Some(&t.path().join("missing-dir").join("addr.cfg")));
        let (got, logs) = run(&spec, &t.path().join("missing-run-dir"));
        let got = got.unwrap();
        let text = String::from_utf8(got.text).unwrap();
        assert!(text.contains("\nnode9-1 mlx5_0 1 default\n"));
        assert_eq!(got.name, spec.path.display().to_string());
        assert!(
            logs[0].contains("could not save it") && logs[0].contains("from memory"),
            "{logs:?}"
        );
    }

    #[test]
    fn an_unreadable_file_is_reported_and_left_alone() {
        let t = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading fails with something other
        // than "not found", whoever runs the test.
        let path = t.path().join("addr.cfg");
        std::fs::create_dir(&path).unwrap();
        let spec = AddrFileSpec::from_arg(Some(&path));
        let (got, logs) = run(&spec, t.path());
        assert!(got.is_none());
        assert_eq!(
            logs,
            [format!(
                "address file {} is a directory, not a regular file",
                path.display()
            )]
        );
        assert!(check_named(&path).is_err());
        assert!(!t.path().join(GENERATED_NAME).exists());
    }
}
