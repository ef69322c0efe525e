//! errno values and their glibc texts.
//!
//! `ib_acme` reports failures as `strerror(errno)`, so scripts that match on its output
//! see glibc's wording. std already asks the C library for that wording when it formats
//! an OS error, but appends " (os error N)"; [`strerror`] strips the suffix.

use std::io;

/// No such file or directory. Also the text Debian's `ib_acme` prints for failures that
/// never set errno (see [`UNSET`]).
pub const ENOENT: i32 = 2;
/// Input/output error: an I/O error that carried no errno.
pub const EIO: i32 = 5;
/// Invalid argument.
pub const EINVAL: i32 = 22;
/// File name too long: a unix socket path that does not fit in `sun_path`.
pub const ENAMETOOLONG: i32 = 36;
/// Protocol error: a reply we cannot make sense of.
pub const EPROTO: i32 = 71;
/// Connection reset by peer: the daemon closed the connection instead of replying.
pub const ECONNRESET: i32 = 104;

/// The errno Debian's `ib_acme` reports for failures detected before any system call
/// failed (a name too long, an address it cannot parse for a perf query, a failed
/// host-name lookup): it prints `strerror(errno)` of whatever an earlier, unrelated call
/// left behind. On Debian that is always ENOENT — libnl probes the missing
/// `/etc/libnl/classid` while the program loads, and the TCP path first tries the usually
/// absent `/run/ibacm-tcp.port` — so we print the same text to stay byte-compatible.
pub const UNSET: i32 = ENOENT;

/// glibc's `strerror` text for `errno` (e.g. "No such file or directory").
#[must_use]
pub fn strerror(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    let suffix = format!(" (os error {errno})");
    match text.strip_suffix(&suffix) {
        Some(t) => t.to_owned(),
        None => text,
    }
}

/// The errno an I/O error stands for: its OS code, or a close equivalent when std
/// produced it without one.
#[must_use]
pub fn of_io(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => ECONNRESET,
        io::ErrorKind::InvalidInput => EINVAL,
        _ => EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_glibc_wording_without_the_std_suffix() {
        assert_eq!(strerror(ENOENT), "No such file or directory");
        assert_eq!(strerror(111), "Connection refused");
        assert_eq!(strerror(99), "Cannot assign requested address");
        assert_eq!(strerror(61), "No data available");
        assert_eq!(strerror(0), "Success");
    }

    #[test]
    fn io_errors_map_to_errno() {
        assert_eq!(of_io(&io::Error::from_raw_os_error(111)), 111);
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "eof");
        assert_eq!(of_io(&eof), ECONNRESET);
        assert_eq!(of_io(&io::Error::other("x")), EIO);
    }
}
