//! The rules every exported C entry point follows: no panic crosses the FFI boundary,
//! and failures are reported the C way (a return value and `errno`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};

/// Runs `f`; a panic inside it (a bug of the emulation) is reported on stderr and
/// turned into `fallback` with `errno` EIO, because unwinding into C is undefined
/// behaviour and the caller can cope with a failed call.
pub fn guard<T>(name: &str, fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("acm-fake-hca: {name} panicked; failing the call with EIO");
            set_errno(libc::EIO);
            fallback
        }
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Locks `m` even if a thread panicked while holding it: the emulation's state stays
/// usable (each update is small and leaves it consistent), and a C caller must never
/// see a panic.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A pipe whose read end is handed to the application (a completion channel, a
/// context's async-event descriptor) and whose write end the emulation keeps: a real
/// descriptor that poll, epoll and blocking reads work on natively.
#[derive(Debug)]
pub struct EventPipe {
    /// The application's end.
    pub read: std::os::fd::OwnedFd,
    /// The emulation's end (non-blocking: a full pipe drops the notification rather
    /// than stall the hub thread, which only happens when nobody reads).
    pub write: std::os::fd::OwnedFd,
}

impl EventPipe {
    /// A fresh close-on-exec pipe.
    pub fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        set_flag(&write, libc::O_NONBLOCK)?;
        Ok(Self { read, write })
    }

    /// [`EventPipe::new`] for a C entry point that fails with NULL: on failure errno
    /// says why (EMFILE when the error carries no errno) and there is no pipe.
    pub fn new_or_errno() -> Option<Self> {
        Self::new()
            .map_err(|e| set_errno(e.raw_os_error().unwrap_or(libc::EMFILE)))
            .ok()
    }

    /// Writes one fixed-size record (at most `PIPE_BUF` bytes, so it is atomic).
    pub fn post(&self, record: &[u8]) {
        use std::os::fd::AsRawFd;
        debug_assert!(record.len() <= libc::PIPE_BUF);
        // SAFETY: the descriptor is open while `self` is; `record` is a valid buffer.
        let _ =
            unsafe { libc::write(self.write.as_raw_fd(), record.as_ptr().cast(), record.len()) };
    }
}

/// Adds `flag` to a descriptor's status flags.
pub fn set_flag(fd: &impl std::os::fd::AsRawFd, flag: i32) -> std::io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL only read and change the open descriptor's flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | flag) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads exactly one `N`-byte record from `fd` as `read(2)` would for the caller: it
/// blocks on a blocking descriptor and fails with EAGAIN on an empty non-blocking one
/// (errno set either way).
pub fn read_record<const N: usize>(fd: i32) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    loop {
        // SAFETY: `b` is a writable buffer of N bytes; `fd` is the caller's descriptor.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), N) };
        if n == N as isize {
            return Some(b);
        }
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n >= 0 {
            // Records are written whole; a short read means the writer is gone.
            set_errno(libc::EIO);
        }
        return None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_panic_becomes_the_fallback_with_eio() {
        let r = guard("test", -1, || -> i32 { panic!("boom") });
        assert_eq!((r, errno()), (-1, libc::EIO));
        assert_eq!(guard("test", -1, || 7), 7);
    }

    #[test]
    fn records_cross_the_pipe_whole_and_an_empty_pipe_says_eagain() {
        let p = EventPipe::new().unwrap();
        set_flag(&p.read, libc::O_NONBLOCK).unwrap();
        p.post(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            read_record::<8>(p.read.as_raw_fd()),
            Some([1, 2, 3, 4, 5, 6, 7, 8])
        );
        assert_eq!(read_record::<8>(p.read.as_raw_fd()), None);
        assert_eq!(errno(), libc::EAGAIN);
    }
}
