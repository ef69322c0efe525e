//! Waiting on a set of descriptors with `ppoll(2)`.
//!
//! The daemon waits on its busy clients this way instead of keeping them registered
//! with epoll (acm-daemon's `client_waits` module says why: a socket registered with
//! epoll runs epoll's callback on every client `send` and every client `recv` of a
//! reply, on the client's CPU, while a socket nobody is waiting on at that moment has
//! no callback to run). The set is refilled before each wait from the caller's own table; its memory
//! is kept from one wait to the next, so a wait allocates nothing once the set has
//! grown to the number of clients.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// What `ppoll` reported for one descriptor of a [`PollSet`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Data (or the end of the stream) can be read.
    pub readable: bool,
    /// Data can be written.
    pub writable: bool,
    /// The peer hung up, or the descriptor is in error or not open: reading tells
    /// which.
    pub closed: bool,
}

impl Ready {
    /// Whether anything was reported.
    #[must_use]
    pub fn any(self) -> bool {
        self.readable || self.writable || self.closed
    }
}

/// Descriptors to wait on together, each with whether to wait for reading and for
/// writing.
#[derive(Debug, Default)]
pub struct PollSet {
    fds: Vec<libc::pollfd>,
}

impl PollSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the set, keeping its memory.
    pub fn clear(&mut self) {
        self.fds.clear();
    }

    /// The number of descriptors in the set.
    #[must_use]
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// Adds `fd`, waited on for reading if `read` and for writing if `write` (with
    /// neither, only hang-ups and errors are reported); returns its index.
    ///
    /// The set keeps the descriptor's number, not a borrow: the caller refills the set
    /// before each wait, from descriptors it still holds open.
    pub fn push(&mut self, fd: BorrowedFd<'_>, read: bool, write: bool) -> usize {
        let mut events = 0;
        if read {
            events |= libc::POLLIN;
        }
        if write {
            events |= libc::POLLOUT;
        }
        self.fds.push(libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
            revents: 0,
        });
        self.fds.len() - 1
    }

    /// Waits until a descriptor of the set is ready or `timeout` passes (forever with
    /// `None`); returns how many are ready (0 on timeout). A signal ends the wait
    /// early with 0, as a timeout would.
    ///
    /// # Errors
    /// `ppoll` failed for another reason than a signal (the set is larger than the
    /// process's descriptor limit, or memory ran out).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(t.subsec_nanos()).min(999_999_999),
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
        let n = libc::nfds_t::try_from(self.fds.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `fds` points to `n` initialised pollfd structures that live in
        // `self.fds`, borrowed mutably for the whole call, so the kernel's writes of
        // `revents` land in memory we own; `ts_ptr` is null or points to `ts`, alive
        // until the call returns; a null signal mask keeps the thread's own. The
        // descriptor numbers are plain integers to the kernel: one that is no longer
        // open is reported as POLLNVAL, with no effect on memory.
        let r = unsafe { libc::ppoll(self.fds.as_mut_ptr(), n, ts_ptr, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                for f in &mut self.fds {
                    f.revents = 0;
                }
                return Ok(0);
            }
            return Err(e);
        }
        Ok(usize::try_from(r).unwrap_or(0))
    }

    /// What the last wait reported for the descriptor at `index` (nothing for an
    /// index outside the set).
    #[must_use]
    pub fn ready(&self, index: usize) -> Ready {
        let Some(f) = self.fds.get(index) else {
            return Ready::default();
        };
        let r = f.revents;
        Ready {
            readable: r & libc::POLLIN != 0,
            writable: r & libc::POLLOUT != 0,
            closed: r & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PollSet, Ready};
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn reports_what_each_descriptor_is_ready_for() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (c, _d) = UnixStream::pair().unwrap();
        let mut set = PollSet::new();
        assert_eq!(set.push(a.as_fd(), true, false), 0);
        assert_eq!(set.push(c.as_fd(), true, false), 1);
        // Nothing to read yet: the wait times out.
        assert_eq!(set.wait(Some(Duration::from_millis(1))).unwrap(), 0);
        assert_eq!(set.ready(0), Ready::default());

        b.write_all(b"x").unwrap();
        assert_eq!(set.wait(None).unwrap(), 1);
        assert!(set.ready(0).readable);
        assert!(!set.ready(1).any());

        // Waited on for writing, a fresh socket is writable at once.
        set.clear();
        assert!(set.is_empty());
        set.push(c.as_fd(), false, true);
        assert_eq!(set.wait(Some(Duration::ZERO)).unwrap(), 1);
        assert!(set.ready(0).writable);
        assert_eq!(set.ready(5), Ready::default());
    }

    #[test]
    fn a_hang_up_is_reported_without_asking() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let mut set = PollSet::new();
        set.push(a.as_fd(), false, false);
        assert_eq!(set.wait(Some(Duration::ZERO)).unwrap(), 1);
        assert!(set.ready(0).closed);
        assert_eq!(set.len(), 1);
    }
}
