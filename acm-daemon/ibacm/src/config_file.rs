//! Reading a configuration file the daemon can trust to be one: the only way the daemon
//! reads the options file, the address file, the address preload file
//! (`addr_data_file`) and the route preload file (`route_data_file`), at start and at a
//! reload.
//!
//! The daemon runs as root and reads these files from paths an administrator chose,
//! inside its event loop at a reload; a path that names something other than a file
//! must cost neither the loop nor the memory:
//!
//! - **Never blocks.** The path is looked at (`stat`) before anything is opened, so a
//!   FIFO, a device or a socket is refused without being opened (opening some devices
//!   does something). The file is then opened with `O_NONBLOCK`, so that a FIFO put in
//!   its place between the look and the open does not wait for a writer, and checked
//!   again on the open descriptor (`fstat`), which is what is read.
//! - **Regular files only**, reached through symbolic links (configuration management
//!   often links these files into `/etc`).
//! - **Bounded.** A file over its kind's bound ([`ConfigKind::max_bytes`]) is refused
//!   by its size, and at most one byte more than the bound is ever read, so a file that
//!   grows while it is read is refused too, rather than read without end.
//!
//! What the bytes say is the parsers' business ([`acm_engine::config`]); whether they
//! are text at all is [`text_problem`]'s, which a reload applies (a start reads what it
//! finds, as the reference does).

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Which configuration file, for its size bound and its name in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigKind {
    /// The options file (`ibacm_opts.cfg`, `-O`).
    Options,
    /// The address file (`ibacm_addr.cfg`, `-A`).
    Addresses,
    /// The address preload file (`addr_data_file`).
    Hosts,
    /// The route preload file (`route_data_file`).
    RouteData,
}

/// One mebibyte.
const MIB: u64 = 1 << 20;

impl ConfigKind {
    /// The largest file of this kind that is read.
    ///
    /// The options and address files are written by hand, a few hundred lines at most
    /// (a thousand-name address file is about 30 KiB): 4 MiB leaves room for any real
    /// one and keeps a parse, which runs inside the event loop at a reload, short. The
    /// address preload file has a line (about 40 bytes) per host of the fabric: 16 MiB
    /// is some 400,000 hosts. The route preload file is OpenSM's dump of every path,
    /// which grows with the square of the fabric: 64 MiB holds a few million paths,
    /// more than the reference's preload is used for.
    #[must_use]
    pub(crate) const fn max_bytes(self) -> u64 {
        match self {
            Self::Options | Self::Addresses => 4 * MIB,
            Self::Hosts => 16 * MIB,
            Self::RouteData => 64 * MIB,
        }
    }

    /// What the file is called in messages.
    #[must_use]
    pub(crate) const fn what(self) -> &'static str {
        match self {
            Self::Options => "options file",
            Self::Addresses => "address file",
            Self::Hosts => "address data file",
            Self::RouteData => "route data file",
        }
    }
}

/// Why a configuration file was not read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// It could not be looked at or opened (not "not found", which is no error here).
    #[error("cannot open {what} {}: {source}", path.display())]
    Open {
        /// What file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// It is something other than a regular file.
    #[error("{what} {} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// What file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// What it is instead ("a FIFO", "a character device", ...).
        kind: &'static str,
    },
    /// It is larger than its kind's bound.
    #[error("{what} {} is larger than {max} bytes, the most this daemon reads", path.display())]
    TooLarge {
        /// What file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The bound ([`ConfigKind::max_bytes`]).
        max: u64,
    },
    /// Reading it failed.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The bytes of the `kind` file at `path`; `None` when nothing is there (no such file,
/// or a symbolic link to nothing).
///
/// # Errors
/// The file cannot be opened or read, is not a regular file, or is over its bound.
pub(crate) fn read(path: &Path, kind: ConfigKind) -> Result<Option<Vec<u8>>, FileError> {
    let what = kind.what();
    let max = kind.max_bytes();
    let open_error = |source: io::Error| FileError::Open {
        what,
        path: path.to_path_buf(),
        source,
    };
    // Looked at first, so that what is not a file is never opened.
    match std::fs::metadata(path) {
        Ok(m) => check(path, kind, &m.file_type(), m.len())?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(e)),
    }
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        // Removed between the look and the open.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(e)),
    };
    // The descriptor's own (fstat): what is read, whatever the path names by now.
    let meta = file.metadata().map_err(open_error)?;
    check(path, kind, &meta.file_type(), meta.len())?;
    read_at_most(file, meta.len(), max)
        .map_err(|e| match e {
            Bounded::Over => FileError::TooLarge {
                what,
                path: path.to_path_buf(),
                max,
            },
            Bounded::Io(source) => FileError::Read {
                what,
                path: path.to_path_buf(),
                source,
            },
        })
        .map(Some)
}

/// A regular file within the bound, or the error that says what it is.
fn check(path: &Path, kind: ConfigKind, ty: &FileType, len: u64) -> Result<(), FileError> {
    if !ty.is_file() {
        return Err(FileError::NotRegular {
            what: kind.what(),
            path: path.to_path_buf(),
            kind: describe(ty),
        });
    }
    if len > kind.max_bytes() {
        return Err(FileError::TooLarge {
            what: kind.what(),
            path: path.to_path_buf(),
            max: kind.max_bytes(),
        });
    }
    Ok(())
}

/// Why a bounded read stopped.
enum Bounded {
    /// More than the bound was there.
    Over,
    /// The read failed.
    Io(io::Error),
}

/// `file`'s bytes, reading at most `max + 1` of them; `Over` when there were more
/// than `max` (the file grew past its bound since it was measured at `len`).
fn read_at_most(file: File, len: u64, max: u64) -> Result<Vec<u8>, Bounded> {
    let mut bytes = Vec::with_capacity(usize::try_from(len.min(max)).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Bounded::Io)?;
    if bytes.len() as u64 > max {
        return Err(Bounded::Over);
    }
    Ok(bytes)
}

/// What a file type is, for a message.
fn describe(ty: &FileType) -> &'static str {
    if ty.is_dir() {
        "a directory"
    } else if ty.is_fifo() {
        "a FIFO"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else if ty.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

/// Why a file's bytes are not a configuration's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextProblem {
    /// No bytes at all: what a file being rewritten holds for a moment, and never
    /// anything an administrator meant (a file of comments says "every default").
    Empty,
    /// A byte no text file holds, on line `line` (from 1).
    Binary {
        /// The line of the first such byte.
        line: usize,
        /// The byte.
        byte: u8,
    },
}

impl TextProblem {
    /// The problem as a line of the log about file `name`.
    #[must_use]
    pub(crate) fn describe(self, name: &str) -> String {
        match self {
            Self::Empty => format!(
                "{name}: empty, which is no configuration (a file of comments keeps every default)"
            ),
            Self::Binary { line, byte } => {
                format!("{name}:{line}: byte {byte:#04x}: not a text file")
            }
        }
    }
}

/// Whether `bytes` are a configuration file's text: not empty, and free of the ASCII
/// control bytes no text holds (NUL, 0x01 to 0x08, 0x0E to 0x1F, DEL). Tab, line feed,
/// vertical tab, form feed and carriage return are whitespace to the parsers, and every
/// byte from 0x80 up is text: a Latin-1 or UTF-8 comment or name is as good as ASCII.
/// The reference reads up to the first NUL of a line and on; a file that holds one is a
/// binary, or a file caught while being written over.
#[must_use]
pub(crate) fn text_problem(bytes: &[u8]) -> Option<TextProblem> {
    if bytes.is_empty() {
        return Some(TextProblem::Empty);
    }
    let at = bytes.iter().position(|&b| is_binary(b))?;
    let line = 1 + bytes
        .get(..at)
        .unwrap_or_default()
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    Some(TextProblem::Binary {
        line,
        byte: bytes.get(at).copied().unwrap_or_default(),
    })
}

/// A byte that is no text's.
const fn is_binary(b: u8) -> bool {
    matches!(b, 0x00..=0x08 | 0x0E..=0x1F | 0x7F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let p = dir.path().join("o.cfg");
        std::fs::write(&p, b"log_level 1\n# caf\xe9\n").unwrap();
        assert_eq!(
            read(&p, ConfigKind::Options).unwrap().unwrap(),
            b"log_level 1\n# caf\xe9\n"
        );
        assert!(
            read(&dir.path().join("none"), ConfigKind::Options)
                .unwrap()
                .is_none()
        );
        // Through a symbolic link; a link to nothing is nothing.
        let link = dir.path().join("link.cfg");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(read(&link, ConfigKind::Options).unwrap().is_some());
        let dangling = dir.path().join("dangling.cfg");
        std::os::unix::fs::symlink(dir.path().join("gone"), &dangling).unwrap();
        assert!(read(&dangling, ConfigKind::Options).unwrap().is_none());
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let fifo = dir.path().join("fifo.cfg");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&fifo, ConfigKind::Options).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "options file {} is a FIFO, not a regular file",
                fifo.display()
            )
        );
        let zero = dir.path().join("zero.cfg");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read(&zero, ConfigKind::Addresses).unwrap_err().to_string();
        assert!(
            e.ends_with("is a character device, not a regular file"),
            "{e}"
        );
        let e = read(dir.path(), ConfigKind::Hosts).unwrap_err().to_string();
        assert!(e.starts_with("address data file "), "{e}");
        assert!(e.ends_with("is a directory, not a regular file"), "{e}");
    }

    #[test]
    fn a_file_over_its_bound_is_refused_and_at_the_bound_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let p = dir.path().join("a.cfg");
        let max = ConfigKind::Addresses.max_bytes();
        std::fs::write(&p, vec![b'#'; usize::try_from(max).unwrap()]).unwrap();
        assert_eq!(
            read(&p, ConfigKind::Addresses).unwrap().unwrap().len() as u64,
            max
        );
        std::fs::write(&p, vec![b'#'; usize::try_from(max + 1).unwrap()]).unwrap();
        let e = read(&p, ConfigKind::Addresses).unwrap_err();
        assert!(
            matches!(e, FileError::TooLarge { max: m, .. } if m == max),
            "{e}"
        );
        // A file measured under the bound that has grown over it is cut at one byte
        // more than the bound, and refused.
        let f = File::open(&p).unwrap();
        assert!(matches!(read_at_most(f, 10, 100), Err(Bounded::Over)));
        let f = File::open(&p).unwrap();
        assert!(matches!(read_at_most(f, 10, max + 1), Ok(b) if b.len() as u64 == max + 1));
    }

    #[test]
    fn text_is_anything_but_empty_or_ascii_control_bytes() {
        assert_eq!(text_problem(b""), Some(TextProblem::Empty));
        assert_eq!(text_problem(b"log_level 1\r\n\t# \x0b\x0c\n"), None);
        assert_eq!(text_problem(b"# r\xe9glages caf\xc3\xa9 \x85\xff\n"), None);
        assert_eq!(
            text_problem(b"a 1\nb 2\nc\x003\n"),
            Some(TextProblem::Binary { line: 3, byte: 0 })
        );
        assert_eq!(
            text_problem(b"\x7fELF"),
            Some(TextProblem::Binary {
                line: 1,
                byte: 0x7f
            })
        );
        assert_eq!(
            TextProblem::Binary { line: 3, byte: 0 }.describe("/o.cfg"),
            "/o.cfg:3: byte 0x00: not a text file"
        );
        assert!(
            TextProblem::Empty
                .describe("/o.cfg")
                .starts_with("/o.cfg: empty")
        );
    }
}
