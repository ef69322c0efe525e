//! Files the daemon writes, as root, into directories others may write: the metrics
//! file (node_exporter's textfile directory is usually writable by node_exporter's own
//! user), the TCP port file and the generated address file (in a run directory that
//! `--run-dir` may put anywhere). Whoever can write such a directory can plant a
//! symbolic link or a FIFO at the name the daemon is about to use; a plain
//! create-and-truncate would then write, truncate or chmod whatever the link points to,
//! or block the event loop. So every file is created afresh and never through a link
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`), and its mode is set on the open descriptor.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `path` for writing with `mode` (less the umask); fails if anything at all is
/// there, a dangling link included, and never follows a link.
///
/// # Errors
/// The name exists (`AlreadyExists`), or the file cannot be created.
pub(crate) fn create_exclusive(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .mode(mode)
        .open(path)
}

/// Writes `bytes` to a new file at `path` (see [`create_exclusive`]), which is removed
/// again if the write fails.
///
/// # Errors
/// The name exists, or the file cannot be created or written.
pub(crate) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut f = create_exclusive(path, mode)?;
    f.write_all(bytes).inspect_err(|_| {
        // The name is ours: this call created it.
        let _ = std::fs::remove_file(path);
    })
}

/// Replaces `path` with `bytes` atomically: a new temporary file beside it (its name
/// starts with a dot and ends in `.tmp`), written with exactly `mode` whatever the
/// umask, then renamed over `path`. A reader sees the old content or the new, never half
/// of it; a link at `path` is replaced, not followed.
///
/// Whatever is at the temporary name already (a file left by a crash between create and
/// rename, or something planted) is unlinked, which never follows a link, and the create
/// is tried once more; if something is planted again in between, this call fails and the
/// next tries anew.
///
/// # Errors
/// `path` has no file name, or a step fails (the temporary file is then removed).
pub(crate) fn replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = temporary_name(path)?;
    let mut f = match create_exclusive(&tmp, mode) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp)?;
            create_exclusive(&tmp, mode)?
        }
        other => other?,
    };
    let result = f
        .set_permissions(Permissions::from_mode(mode))
        .and_then(|()| f.write_all(bytes))
        .and_then(|()| {
            drop(f);
            std::fs::rename(&tmp, path)
        });
    if result.is_err() {
        // The name is ours: this call created it.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `DIR/.NAME.tmp` for `DIR/NAME`.
fn temporary_name(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Ok(path.with_file_name(format!(".{}.tmp", name.to_string_lossy())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// A 0600 file holding "secret", as a link's target.
    fn victim(dir: &TempDir, name: &str) -> PathBuf {
        let v = dir.path().join(name);
        std::fs::write(&v, "secret\n").unwrap();
        std::fs::set_permissions(&v, Permissions::from_mode(0o600)).unwrap();
        v
    }

    fn assert_untouched(v: &Path) {
        assert_eq!(
            std::fs::read_to_string(v).unwrap(),
            "secret\n",
            "{}",
            v.display()
        );
        assert_eq!(mode(v), 0o600, "{} chmodded", v.display());
    }

    #[test]
    fn links_planted_at_either_name_are_replaced_never_followed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm.prom");
        let tmp = dir.path().join(".ibacm.prom.tmp");
        let (v1, v2) = (victim(&dir, "v1"), victim(&dir, "v2"));
        symlink(&v1, &tmp).unwrap();
        symlink(&v2, &path).unwrap();
        replace(&path, b"a 1\n", 0o644).unwrap();
        assert_untouched(&v1);
        assert_untouched(&v2);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "the link itself is replaced");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 1\n");
        assert_eq!(mode(&path), 0o644);
        assert!(
            std::fs::symlink_metadata(&tmp).is_err(),
            "no temporary file left"
        );

        // A dangling link at the temporary name is not followed into a new file, and
        // a stale file a crash left there is replaced.
        symlink(dir.path().join("not-there"), &tmp).unwrap();
        replace(&path, b"a 2\n", 0o644).unwrap();
        assert!(std::fs::symlink_metadata(dir.path().join("not-there")).is_err());
        std::fs::write(&tmp, "half a write").unwrap();
        replace(&path, b"a 3\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 3\n");
        assert!(std::fs::symlink_metadata(&tmp).is_err());
    }

    #[test]
    fn a_fifo_at_the_temporary_name_neither_blocks_nor_is_written() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ibacm-tcp.port");
        let tmp = dir.path().join(".ibacm-tcp.port.tmp");
        nix::unistd::mkfifo(&tmp, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        replace(&path, b"6125\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "6125\n");
    }

    #[test]
    fn write_new_refuses_any_existing_name_and_leaves_it_alone() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let v = victim(&dir, "v");
        let link = dir.path().join("ibacm_addr.cfg");
        symlink(&v, &link).unwrap();
        let e = write_new(&link, b"x\n", 0o644).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_untouched(&v);
        let dangling = dir.path().join("dangling");
        symlink(dir.path().join("target"), &dangling).unwrap();
        assert!(write_new(&dangling, b"x\n", 0o644).is_err());
        assert!(std::fs::symlink_metadata(dir.path().join("target")).is_err());
        let fresh = dir.path().join("fresh");
        write_new(&fresh, b"x\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "x\n");
    }
}
