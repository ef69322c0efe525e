//! Reading and writing a connected socket with the system call itself.
//!
//! glibc's `recv` and `send` are thread-cancellation points: around each system call
//! they switch the calling thread to asynchronous cancellation and back, two atomic
//! updates of the thread's state that a Rust program, which never cancels a thread,
//! does not need. On the daemon's cache-hit path, one `recv` and one `send` per
//! request, the two wrappers took 116 of the 2,490 user-space instructions of a request
//! (counted with `acm-daemon/scripts/instructions.sh`; BENCHMARKS.md, "Cache hits
//! against the C ibacm"). These two
//! functions make the same system calls (`recvfrom` and `sendto` without an address)
//! through `syscall(2)`, which is not a cancellation point: 92 to 101 instructions
//! fewer per request.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Reads into `buf` what the socket has, as `recv(fd, buf, len, 0)` does: the number
/// of bytes read, 0 at the end of the stream.
///
/// Every argument goes to `syscall(2)` as a full register (`c_long`, pointers,
/// `usize`), the width it reads each one with.
///
/// # Errors
/// The system call's error (`WouldBlock` on a non-blocking socket with nothing to
/// read, `Interrupted` if a signal came first).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes, borrowed mutably for
    // the whole call, so the kernel writes only memory we own; the address and its
    // length are null, which recvfrom(2) takes as "no source address wanted"; the
    // descriptor is borrowed, so it stays open for the call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            libc::c_long::from(fd.as_raw_fd()),
            buf.as_mut_ptr(),
            buf.len(),
            libc::c_long::from(0),
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    result(n)
}

/// Writes what of `buf` the socket takes, as `send(fd, buf, len, MSG_NOSIGNAL)` does
/// (a peer that has gone gives `BrokenPipe`, never SIGPIPE): the number of bytes
/// written.
///
/// # Errors
/// The system call's error (`WouldBlock` when the socket's buffer is full).
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of `buf.len()` bytes, which the kernel only reads;
    // the destination address and its length are null and zero, which sendto(2) takes
    // on a connected socket as send(2); the descriptor is borrowed, so it stays open.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(fd.as_raw_fd()),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            libc::c_long::from(0),
        )
    };
    result(n)
}

/// The byte count a system call returned, or the error `errno` holds when it returned
/// a negative value.
fn result(n: libc::c_long) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::{recv, send};
    use std::io::ErrorKind;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn moves_bytes_and_reports_the_end_and_would_block() {
        let (a, b) = UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            recv(b.as_fd(), &mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        assert_eq!(send(a.as_fd(), b"hello").unwrap(), 5);
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        drop(a);
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap(), 0, "end of stream");
    }

    #[test]
    fn a_gone_peer_is_an_error_not_a_signal() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        // Rust's runtime ignores SIGPIPE, so what this can check is the error; with
        // MSG_NOSIGNAL a process that keeps SIGPIPE's default gets the same.
        assert_eq!(
            send(a.as_fd(), b"x").unwrap_err().kind(),
            ErrorKind::BrokenPipe
        );
    }
}
