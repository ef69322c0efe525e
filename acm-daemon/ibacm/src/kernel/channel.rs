//! The event loop's end of the kernel's RDMA_NL_LS channel: which socket it uses (the
//! one systemd passed, else one of our own, else none), reading it dry on readiness,
//! and sending the engine's replies. Kept out of the server so that the loop only
//! says *when* (see [`crate::server`]).
//!
//! Only a backend that serves the kernel (real hardware) gets a socket: the kernel's
//! requests name its devices and ports, which a simulated fabric does not have. Without
//! a socket the kernel asks the SA itself, exactly as when no daemon runs; so every
//! failure here is logged and the daemon carries on, as the reference does.
//!
//! A listener whose answers the kernel refuses is worse than none: the kernel sends it
//! every path query and waits its whole timeout for each before asking the SA. So the
//! channel listens only when this process may answer ([`super::caps`]), and leaves the
//! LS group at the first answer the kernel refuses with EPERM; either is said once in
//! the log.

use super::caps::{self, AnswerPermission};
use super::ls::{LsOpenError, LsSocket};
use crate::log::Logger;
use acm_engine::log::Level;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Receive buffer. A kernel request is under 200 bytes (the reference reads 592); a
/// longer datagram is cut and the engine rejects it.
const RECV_BUF: usize = 4096;

/// What the channel needs of its socket: [`LsSocket`], or a stand-in in tests.
pub trait LsTransport: AsFd {
    /// One datagram from the kernel, `None` when nothing waits ([`LsSocket::recv`]).
    ///
    /// # Errors
    /// The receive failed.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>>;

    /// Sends one message to the kernel ([`LsSocket::send`]).
    ///
    /// # Errors
    /// The send failed.
    fn send(&self, bytes: &[u8]) -> io::Result<()>;

    /// Leaves the LS group ([`LsSocket::leave_group`]).
    ///
    /// # Errors
    /// The kernel refused.
    fn leave_group(&self) -> io::Result<()>;
}

impl LsTransport for LsSocket {
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        Self::recv(self, buf)
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        Self::send(self, bytes)
    }

    fn leave_group(&self) -> io::Result<()> {
        Self::leave_group(self)
    }
}

/// The kernel channel: a socket on the LS group, or nothing.
#[derive(Debug)]
pub struct KernelChannel<S: LsTransport = LsSocket> {
    sock: Option<S>,
    buf: Vec<u8>,
    /// Where the socket is registered, to take it out when the channel closes.
    registry: Option<Registry>,
}

impl KernelChannel {
    /// Sets the channel up for a backend that does (`serves_kernel`) or does not serve
    /// the kernel: the socket systemd passed (`inherited`) if any, else a new one, and
    /// none when this process may not answer the kernel. Every failure is logged
    /// (level 0) and gives no channel.
    #[must_use]
    pub fn setup(serves_kernel: bool, inherited: Option<OwnedFd>, log: &mut Logger) -> Self {
        let permission = if serves_kernel {
            caps::answer_permission()
        } else {
            AnswerPermission::Granted
        };
        Self::setup_with(serves_kernel, inherited, &permission, log)
    }

    /// [`KernelChannel::setup`] with the permission decided already.
    #[must_use]
    pub fn setup_with(
        serves_kernel: bool,
        inherited: Option<OwnedFd>,
        permission: &AnswerPermission,
        log: &mut Logger,
    ) -> Self {
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
        match permission {
            AnswerPermission::Denied(why) => {
                log.log(Level::Basic, "acm_init_nl", &not_listening(why));
                // systemd keeps its own copy of the socket it passed: unless it leaves
                // the group, the kernel keeps seeing a listener.
                if let Some(fd) = inherited
                    && let Ok(s) = LsSocket::from_fd(fd)
                    && let Err(e) = s.leave_group()
                {
                    log.log(
                        Level::Basic,
                        "acm_init_nl",
                        &format!("cannot leave the LS group of the socket systemd passed: {e}"),
                    );
                }
                return Self::none();
            }
            AnswerPermission::Unknown(why) => log.log(
                Level::Config,
                "acm_init_nl",
                &format!(
                    "cannot tell whether the kernel takes our answers ({why}); listening, \
                     and leaving the LS group if it refuses one"
                ),
            ),
            AnswerPermission::Granted => {}
        }
        let (opened, what) = match inherited {
            Some(fd) => (
                LsSocket::from_fd(fd).and_then(|s| rejoin(s, log)),
                "the netlink socket systemd passed",
            ),
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
}

impl<S: LsTransport> KernelChannel<S> {
    /// No channel: kernel path requests go to the SA directly.
    #[must_use]
    pub fn none() -> Self {
        Self {
            sock: None,
            buf: Vec::new(),
            registry: None,
        }
    }

    /// The channel over `sock`.
    #[must_use]
    pub fn with_socket(sock: S) -> Self {
        Self {
            sock: Some(sock),
            buf: vec![0; RECV_BUF],
            registry: None,
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
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let Some(s) = &self.sock else {
            return Ok(());
        };
        registry.register(
            &mut SourceFd(&s.as_fd().as_raw_fd()),
            token,
            Interest::READABLE,
        )?;
        self.registry = Some(registry.try_clone()?);
        Ok(())
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

    /// Sends a message to the kernel; whether it went out. Dropped silently when there
    /// is no socket. A failure is logged (level 1): for a reply, the kernel times out and
    /// asks the SA. EPERM, the kernel refusing this process's answers, makes the
    /// channel leave the LS group and close, said once in the log.
    pub fn send(&mut self, bytes: &[u8], log: &mut Logger) -> bool {
        let Some(s) = &self.sock else {
            return false;
        };
        match s.send(bytes) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => {
                self.stop_listening(log);
                false
            }
            Err(e) => {
                log.log(
                    Level::Config,
                    "acm_nl_send",
                    &format!("netlink send failed: {e}"),
                );
                false
            }
        }
    }

    /// The kernel refused an answer: leaves the LS group, so that it stops sending us
    /// requests it would wait on in vain, and closes the channel. Said once (level 0):
    /// there is no channel afterwards.
    fn stop_listening(&mut self, log: &mut Logger) {
        let Some(s) = self.sock.take() else {
            return;
        };
        let left = s.leave_group();
        if let Some(registry) = self.registry.take() {
            let _ = registry.deregister(&mut SourceFd(&s.as_fd().as_raw_fd()));
        }
        let mut line = String::from(
            "the kernel refused our answer (EPERM: this process lacks CAP_NET_ADMIN in the \
             initial user namespace); ",
        );
        match left {
            Ok(()) => line.push_str(
                "left the LS group: kernel path requests go to the SA directly from now on",
            ),
            Err(e) => line.push_str(&format!(
                "stopped listening, but leaving the LS group failed ({e}): the kernel may \
                 wait for us until its timeout"
            )),
        }
        log.log(Level::Basic, "acm_nl_send", &line);
    }
}

/// A socket systemd passed, back in the LS group if an earlier daemon left it.
fn rejoin(s: LsSocket, log: &mut Logger) -> Result<LsSocket, LsOpenError> {
    let failed = |e: io::Error| LsOpenError::Failed {
        step: "join the LS group with",
        errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
    };
    if !s.in_group().map_err(failed)? {
        s.join_group().map_err(failed)?;
        log.log(
            Level::Config,
            "acm_init_nl",
            "the netlink socket systemd passed had left the LS group; joined it again",
        );
    }
    Ok(s)
}

/// The start-up line for a process whose answers the kernel would refuse.
fn not_listening(why: &str) -> String {
    format!(
        "not listening for kernel path requests: {why}, so the kernel would refuse every \
         answer; it asks the SA directly"
    )
}

/// The start-up warning for a channel that cannot be had.
fn unavailable(e: &LsOpenError) -> String {
    format!("NETLINK_RDMA unavailable ({e}); kernel path requests will go to the SA directly")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::max_level;
    use nix::errno::Errno;
    use nix::sys::socket::{NetlinkAddr, getsockname};
    use std::cell::{Cell, RefCell};
    use std::os::fd::BorrowedFd;
    use std::os::unix::net::UnixDatagram;
    use std::rc::Rc;

    /// What a [`FakeTransport`] was asked, kept after the channel dropped it.
    #[derive(Debug, Default)]
    struct Asked {
        sent: RefCell<Vec<Vec<u8>>>,
        left: Cell<u32>,
    }

    /// A transport whose sends fail with `errno` (0: succeed).
    #[derive(Debug)]
    struct FakeTransport {
        fd: UnixDatagram,
        errno: i32,
        asked: Rc<Asked>,
    }

    impl FakeTransport {
        fn failing_with(errno: i32) -> (Self, Rc<Asked>) {
            let asked = Rc::new(Asked::default());
            let t = Self {
                fd: UnixDatagram::pair().unwrap().0,
                errno,
                asked: Rc::clone(&asked),
            };
            (t, asked)
        }
    }

    impl AsFd for FakeTransport {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    impl LsTransport for FakeTransport {
        fn recv(&self, _buf: &mut [u8]) -> io::Result<Option<usize>> {
            Ok(None)
        }

        fn send(&self, bytes: &[u8]) -> io::Result<()> {
            self.asked.sent.borrow_mut().push(bytes.to_vec());
            match self.errno {
                0 => Ok(()),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        }

        fn leave_group(&self) -> io::Result<()> {
            self.asked.left.set(self.asked.left.get() + 1);
            Ok(())
        }
    }

    /// A NETLINK_ROUTE socket bound to `groups`, standing in for the LS socket systemd
    /// passes.
    fn netlink_in_group(groups: u32) -> OwnedFd {
        crate::kernel::ls::tests::route_netlink_fd(groups)
    }

    fn groups_of(fd: &OwnedFd) -> u32 {
        getsockname::<NetlinkAddr>(fd.as_raw_fd()).unwrap().groups()
    }

    #[test]
    fn backend_without_kernel_gets_no_channel_and_drops_the_inherited_fd() {
        let mut log = Logger::memory(max_level(1));
        let (a, _b) = UnixDatagram::pair().unwrap();
        let ch = KernelChannel::setup(false, Some(OwnedFd::from(a)), &mut log);
        assert!(!ch.is_open());
        assert_eq!(log.lines().len(), 1, "{:?}", log.lines());
        assert!(log.lines()[0].contains("ignoring the netlink socket systemd passed"));
        // Nothing inherited: nothing to say.
        let mut log = Logger::memory(max_level(2));
        let mut ch = KernelChannel::setup(false, None, &mut log);
        assert!(log.lines().is_empty());
        assert!(ch.next_message(&mut log).is_none());
        assert!(!ch.send(b"dropped", &mut log));
        assert!(log.lines().is_empty(), "no socket: dropped silently");
    }

    #[test]
    fn serving_backend_opens_or_warns_at_level_0() {
        let mut log = Logger::memory(max_level(0));
        let ch = KernelChannel::setup_with(true, None, &AnswerPermission::Granted, &mut log);
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
    fn without_permission_it_does_not_listen_and_says_why_once() {
        let mut log = Logger::memory(max_level(3));
        let ch = KernelChannel::setup_with(
            true,
            None,
            &AnswerPermission::Denied("no CAP_NET_ADMIN"),
            &mut log,
        );
        assert!(!ch.is_open());
        assert_eq!(log.lines().len(), 1, "{:?}", log.lines());
        assert!(
            log.lines()[0].contains(
                "acm_init_nl: not listening for kernel path requests: no CAP_NET_ADMIN, so \
                 the kernel would refuse every answer; it asks the SA directly"
            ),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn without_permission_the_socket_systemd_passed_leaves_the_group() {
        // systemd keeps its copy of the socket: the group must be left, not just our
        // descriptor closed.
        let fd = netlink_in_group(0x4);
        let systemds_copy = fd.try_clone().unwrap();
        let mut log = Logger::memory(max_level(1));
        let ch = KernelChannel::setup_with(
            true,
            Some(fd),
            &AnswerPermission::Denied("no CAP_NET_ADMIN"),
            &mut log,
        );
        assert!(!ch.is_open());
        assert_eq!(groups_of(&systemds_copy), 0, "no longer a listener");
        assert_eq!(log.lines().len(), 1, "{:?}", log.lines());
    }

    #[test]
    fn a_passed_socket_that_had_left_the_group_joins_it_again() {
        let fd = netlink_in_group(0);
        let systemds_copy = fd.try_clone().unwrap();
        let mut log = Logger::memory(max_level(1));
        let ch = KernelChannel::setup_with(true, Some(fd), &AnswerPermission::Granted, &mut log);
        assert!(ch.is_open());
        assert_eq!(groups_of(&systemds_copy), 0x4);
        assert!(
            log.lines()
                .iter()
                .any(|l| l.contains("had left the LS group; joined it again")),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn unknown_permission_listens_and_says_so() {
        let mut log = Logger::memory(max_level(1));
        let ch = KernelChannel::setup_with(
            true,
            Some(netlink_in_group(0x4)),
            &AnswerPermission::Unknown("/proc/self/status: gone".into()),
            &mut log,
        );
        assert!(ch.is_open());
        assert!(
            log.lines()[0].contains("cannot tell whether the kernel takes our answers"),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn the_first_answer_refused_with_eperm_leaves_the_group_once() {
        let mut log = Logger::memory(max_level(1));
        let (t, asked) = FakeTransport::failing_with(nix::libc::EPERM);
        let mut ch = KernelChannel::with_socket(t);
        let poll = mio::Poll::new().unwrap();
        ch.register(poll.registry(), Token(7)).unwrap();
        assert!(!ch.send(b"answer 1", &mut log));
        assert!(!ch.is_open(), "no longer listening");
        assert_eq!(asked.left.get(), 1, "the group was left");
        // Later answers are dropped without a word; the log has one line.
        assert!(!ch.send(b"answer 2", &mut log));
        assert!(ch.next_message(&mut log).is_none());
        assert_eq!(asked.sent.borrow().len(), 1, "nothing more was sent");
        assert_eq!(log.lines().len(), 1, "{:?}", log.lines());
        assert!(
            log.lines()[0].contains(
                "acm_nl_send: the kernel refused our answer (EPERM: this process lacks \
                 CAP_NET_ADMIN in the initial user namespace); left the LS group: kernel \
                 path requests go to the SA directly from now on"
            ),
            "{:?}",
            log.lines()
        );
    }

    #[test]
    fn other_send_errors_keep_listening() {
        let (t, asked) = FakeTransport::failing_with(nix::libc::ENOBUFS);
        let mut ch = KernelChannel::with_socket(t);
        let mut log = Logger::memory(max_level(1));
        assert!(!ch.send(b"x", &mut log));
        assert!(!ch.send(b"y", &mut log));
        assert!(ch.is_open(), "a full buffer is no refusal");
        assert_eq!(asked.left.get(), 0);
        assert_eq!(asked.sent.borrow().len(), 2);
        assert_eq!(log.lines().len(), 2, "each failure logged");
        assert!(log.lines()[0].contains("netlink send failed"));

        let (t, asked) = FakeTransport::failing_with(0);
        let mut ch = KernelChannel::with_socket(t);
        assert!(ch.send(b"z", &mut log), "a send that works says so");
        assert_eq!(asked.sent.borrow()[0], b"z");
    }

    #[test]
    fn leaving_happens_on_the_socket_itself() {
        // The real socket: after EPERM-style closing, the group is left. NETLINK_ROUTE
        // stands in; its sends do not fail for root, so the closing is driven directly.
        let fd = netlink_in_group(0x4);
        let copy = fd.try_clone().unwrap();
        let mut ch = KernelChannel::with_socket(LsSocket::from_fd(fd).unwrap());
        let mut log = Logger::memory(max_level(1));
        ch.stop_listening(&mut log);
        assert!(!ch.is_open());
        assert_eq!(groups_of(&copy), 0);
        assert_eq!(log.lines().len(), 1);
    }

    #[test]
    fn an_inherited_socket_that_is_not_netlink_is_refused_with_a_warning() {
        let mut log = Logger::memory(max_level(0));
        let (a, _b) = UnixDatagram::pair().unwrap();
        let ch = KernelChannel::setup_with(
            true,
            Some(OwnedFd::from(a)),
            &AnswerPermission::Granted,
            &mut log,
        );
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
