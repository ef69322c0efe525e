//! The event loop's end of the kernel's RDMA_NL_LS channel: which socket it uses (the
//! one systemd passed, else one of our own, else none), reading it dry on readiness,
//! and sending the engine's replies. Kept out of the server so that the loop only
//! says *when* (see [`crate::daemon::server`]).
//!
//! Only a backend that serves the kernel (real hardware) gets a socket: the kernel's
//! requests name its devices and ports, which a simulated fabric does not have. Without
//! a socket the kernel asks the SA itself, exactly as when no daemon runs; so every
//! failure here is logged and the daemon carries on, as the reference does.

use super::ls::{LsOpenError, LsSocket};
use crate::daemon::log::Logger;
use acm_engine::log::Level;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Receive buffer. A kernel request is under 200 bytes (the reference reads 592); a
/// longer datagram is cut and the engine rejects it.
const RECV_BUF: usize = 4096;

/// The kernel channel: an [`LsSocket`], or nothing.
#[derive(Debug)]
pub struct KernelChannel {
    sock: Option<LsSocket>,
    buf: Vec<u8>,
}

impl KernelChannel {
    /// No channel: kernel path requests go to the SA directly.
    #[must_use]
    pub fn none() -> Self {
        Self {
            sock: None,
            buf: Vec::new(),
        }
    }

    /// The channel over `sock`.
    #[must_use]
    pub fn with_socket(sock: LsSocket) -> Self {
        Self {
            sock: Some(sock),
            buf: vec![0; RECV_BUF],
        }
    }

    /// Sets the channel up for a backend that does (`serves_kernel`) or does not serve
    /// the kernel: the socket systemd passed (`inherited`) if any, else a new one.
    /// Every failure is logged (level 0) and gives no channel.
    #[must_use]
    pub fn setup(serves_kernel: bool, inherited: Option<OwnedFd>, log: &mut Logger) -> Self {
        if !serves_kernel {
            if inherited.is_some() {
                log.log(
                    Level::Config,
                    "acm_init_nl",
                    "ignoring the netlink socket systemd passed: this fabric has no \
                     kernel devices",
                );
            }
            return Self::none();
        }
        let (opened, what) = match inherited {
            Some(fd) => (LsSocket::from_fd(fd), "the netlink socket systemd passed"),
            None => (LsSocket::open(), "NETLINK_RDMA"),
        };
        match opened {
            Ok(sock) => {
                log.log(
                    Level::Config,
                    "acm_init_nl",
                    &format!("listening on {what}"),
                );
                Self::with_socket(sock)
            }
            Err(e) => {
                log.log(Level::Basic, "acm_init_nl", &unavailable(&e));
                Self::none()
            }
        }
    }

    /// Whether there is a socket.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.sock.is_some()
    }

    /// Registers the socket, if any, for readability.
    ///
    /// # Errors
    /// The poller refused it.
    pub fn register(&self, registry: &Registry, token: Token) -> io::Result<()> {
        match &self.sock {
            Some(s) => registry.register(
                &mut SourceFd(&s.as_fd().as_raw_fd()),
                token,
                Interest::READABLE,
            ),
            None => Ok(()),
        }
    }

    /// The next kernel message, or `None` once the socket is empty (or there is none).
    /// Call until `None` on every readiness event (the poller is edge-triggered).
    /// ENOBUFS (requests the kernel dropped; it asks the SA for those) is logged and
    /// reading goes on; another error is logged and ends this round.
    pub fn next_message(&mut self, log: &mut Logger) -> Option<&[u8]> {
        let sock = self.sock.as_ref()?;
        loop {
            match sock.recv(&mut self.buf) {
                Ok(Some(n)) => return Some(&self.buf[..n]),
                Ok(None) => return None,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                    log.log(
                        Level::Config,
                        "acm_nl_receive",
                        "kernel requests were lost (receive queue full)",
                    );
                }
                Err(e) => {
                    log.log(
                        Level::Basic,
                        "acm_nl_receive",
                        &format!("netlink receive failed: {e}"),
                    );
                    return None;
                }
            }
        }
    }

    /// Sends a reply to the kernel; dropped silently when there is no socket. A failure
    /// is logged (level 1): the kernel times out and asks the SA.
    pub fn send(&self, bytes: &[u8], log: &mut Logger) {
        if let Some(s) = &self.sock
            && let Err(e) = s.send(bytes)
        {
            log.log(
                Level::Config,
                "acm_nl_send",
                &format!("netlink send failed: {e}"),
            );
        }
    }
}

/// The start-up warning for a channel that cannot be had.
fn unavailable(e: &LsOpenError) -> String {
    format!("NETLINK_RDMA unavailable ({e}); kernel path requests will go to the SA directly")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::log::max_level;
    use nix::errno::Errno;

    #[test]
    fn backend_without_kernel_gets_no_channel_and_drops_the_inherited_fd() {
        let mut log = Logger::memory(max_level(1));
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let ch = KernelChannel::setup(false, Some(OwnedFd::from(a)), &mut log);
        assert!(!ch.is_open());
        assert_eq!(log.lines().len(), 1, "{:?}", log.lines());
        assert!(log.lines()[0].contains("ignoring the netlink socket systemd passed"));
        // Nothing inherited: nothing to say.
        let mut log = Logger::memory(max_level(2));
        let mut ch = KernelChannel::setup(false, None, &mut log);
        assert!(log.lines().is_empty());
        assert!(ch.next_message(&mut log).is_none());
        ch.send(b"dropped", &mut log);
        assert!(log.lines().is_empty(), "no socket: dropped silently");
    }

    #[test]
    fn serving_backend_opens_or_warns_at_level_0() {
        let mut log = Logger::memory(max_level(0));
        let ch = KernelChannel::setup(true, None, &mut log);
        if ch.is_open() {
            assert!(log.lines().is_empty(), "{:?}", log.lines());
        } else {
            assert_eq!(log.lines().len(), 1);
            let line = &log.lines()[0];
            assert!(line.contains("acm_init_nl: "), "{line}");
            assert!(
                line.ends_with("; kernel path requests will go to the SA directly\n"),
                "{line:?}"
            );
        }
    }

    #[test]
    fn an_inherited_socket_that_is_not_netlink_is_refused_with_a_warning() {
        let mut log = Logger::memory(max_level(0));
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let ch = KernelChannel::setup(true, Some(OwnedFd::from(a)), &mut log);
        assert!(!ch.is_open());
        assert!(
            log.lines()[0].contains("the inherited socket is not a netlink socket"),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn warning_texts() {
        assert_eq!(
            unavailable(&LsOpenError::Unsupported(Errno::EPROTONOSUPPORT)),
            "NETLINK_RDMA unavailable (the kernel has no RDMA netlink: EPROTONOSUPPORT: \
             Protocol not supported); kernel path requests will go to the SA directly"
        );
        let e = LsOpenError::Failed {
            step: "bind",
            errno: Errno::EPERM,
        };
        assert!(
            unavailable(&e).starts_with(
                "NETLINK_RDMA unavailable (cannot bind the NETLINK_RDMA socket: EPERM"
            )
        );
    }
}
