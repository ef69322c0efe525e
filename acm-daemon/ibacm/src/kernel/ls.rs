//! The NETLINK_RDMA socket on which the kernel's `ib_sa` multicasts its PathRecord
//! lookups (RDMA_NL_LS, docs/protocol/netlink-ls.md) and on which the replies go back.
//!
//! The daemon only moves bytes here; the engine parses the requests and builds the
//! replies ([`acm_engine::Input::Netlink`], [`acm_engine::ClientOutput::Netlink`]).
//!
//! Differences from the reference, each deliberate: the socket is non-blocking (it sits
//! in the event loop with everything else, where the reference's is blocking in its own
//! `select`), close-on-exec, bound with the port id the kernel chooses rather than
//! `getpid()` (inside a PID namespace that number may already name another netlink
//! socket, and the bind would fail with EADDRINUSE), and datagrams that do not come from
//! the kernel (`nl_pid` ≠ 0: another daemon's answers on the group) are skipped. It can
//! also leave the group ([`LsSocket::leave_group`]) when the kernel refuses its answers.

use acm_proto::netlink::RDMA_NL_GROUP_LS_MASK;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, SockaddrLike,
    SockaddrStorage, bind, getsockname, recvfrom, sendto, socket,
};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use thiserror::Error;

/// Why the NETLINK_RDMA socket cannot be had. Every case leaves the daemon running:
/// the kernel then asks the SA itself, as it does when no daemon listens.
#[derive(Debug, Error)]
pub enum LsOpenError {
    /// The kernel has no RDMA netlink (ib_core absent or built without it). Expected on
    /// machines without InfiniBand; worth a warning, not an error.
    #[error("the kernel has no RDMA netlink: {0}")]
    Unsupported(Errno),
    /// RDMA netlink exists but the socket cannot be set up: out of descriptors, or, on
    /// kernels that keep the LS group to privileged processes, EPERM at bind.
    #[error("cannot {step} the NETLINK_RDMA socket: {errno}")]
    Failed {
        /// The system call that failed ("create", "bind", "configure").
        step: &'static str,
        /// Its error.
        errno: Errno,
    },
    /// A socket handed to [`LsSocket::from_fd`] is not a netlink socket.
    #[error("the inherited socket is not a netlink socket")]
    NotNetlink,
}

impl LsOpenError {
    /// Whether the kernel simply lacks RDMA netlink (as opposed to a real failure).
    #[must_use]
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Self::Unsupported(_))
    }
}

/// The RDMA_NL_LS socket: NETLINK_RDMA, bound to the LS multicast group (mask 0x4).
#[derive(Debug)]
pub struct LsSocket {
    fd: OwnedFd,
}

impl LsSocket {
    /// Opens NETLINK_RDMA and binds it to the LS group (`nl_groups` = 0x4), with the
    /// port id the kernel picks (`nl_pid` = 0; it tries our pid first).
    ///
    /// # Errors
    /// [`LsOpenError::Unsupported`] when the kernel has no RDMA netlink
    /// (EPROTONOSUPPORT or EAFNOSUPPORT from `socket`, ENOENT from `bind` when the
    /// protocol went away in between); [`LsOpenError::Failed`] otherwise.
    pub fn open() -> Result<Self, LsOpenError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRDMA,
        )
        .map_err(|errno| match errno {
            Errno::EPROTONOSUPPORT | Errno::EAFNOSUPPORT => LsOpenError::Unsupported(errno),
            errno => LsOpenError::Failed {
                step: "create",
                errno,
            },
        })?;
        let addr = NetlinkAddr::new(0, RDMA_NL_GROUP_LS_MASK);
        bind(fd.as_raw_fd(), &addr).map_err(|errno| match errno {
            // The kernel reports an unregistered netlink protocol as ENOENT at bind.
            Errno::ENOENT => LsOpenError::Unsupported(errno),
            errno => LsOpenError::Failed {
                step: "bind",
                errno,
            },
        })?;
        Ok(Self { fd })
    }

    /// Takes the socket systemd passed (`ListenNetlink=rdma 4`: bound to the LS group)
    /// and makes it non-blocking and close-on-exec. Whether it is still in the group
    /// (a daemon before this one may have left it) is [`LsSocket::in_group`]'s to say.
    ///
    /// # Errors
    /// [`LsOpenError::NotNetlink`] when `fd` is not a netlink socket (a different
    /// netlink protocol cannot be told apart and is accepted; it would just never
    /// carry LS requests); [`LsOpenError::Failed`] when its flags cannot be set.
    pub fn from_fd(fd: OwnedFd) -> Result<Self, LsOpenError> {
        let is_netlink = getsockname::<SockaddrStorage>(fd.as_raw_fd())
            .is_ok_and(|a| a.family() == Some(AddressFamily::Netlink));
        if !is_netlink {
            return Err(LsOpenError::NotNetlink);
        }
        let configure = |errno| LsOpenError::Failed {
            step: "configure",
            errno,
        };
        let fl = fcntl(&fd, FcntlArg::F_GETFL).map_err(configure)?;
        let fl = OFlag::from_bits_truncate(fl) | OFlag::O_NONBLOCK;
        fcntl(&fd, FcntlArg::F_SETFL(fl)).map_err(configure)?;
        fcntl(&fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(configure)?;
        Ok(Self { fd })
    }

    /// Receives one datagram from the kernel into `buf`: `Some(len)`, or `None` when
    /// nothing is waiting. A datagram longer than `buf` is cut (the engine then
    /// rejects it). Datagrams from user space are skipped.
    ///
    /// # Errors
    /// The receive failed. ENOBUFS means the kernel dropped requests because our queue
    /// was full; the socket stays usable (the kernel retries those lookups with the SA).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match recvfrom::<NetlinkAddr>(self.fd.as_raw_fd(), buf) {
                Ok((_, Some(from))) if from.pid() != 0 => {}
                Ok((n, _)) => return Ok(Some(n)),
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sends a reply to the kernel: to `{nl_pid 0, nl_groups 0x4}`, as the reference.
    /// The kernel gets it; the group's other listeners (another daemon) get a copy; the
    /// sender does not.
    ///
    /// # Errors
    /// The send failed (EPERM without CAP_NET_ADMIN, ENOBUFS, ...).
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let to = NetlinkAddr::new(0, RDMA_NL_GROUP_LS_MASK);
        loop {
            match sendto(self.fd.as_raw_fd(), bytes, &to, MsgFlags::empty()) {
                Ok(_) => return Ok(()),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether the socket is a member of the LS group.
    ///
    /// # Errors
    /// `getsockname` failed.
    pub fn in_group(&self) -> io::Result<bool> {
        let a = getsockname::<NetlinkAddr>(self.fd.as_raw_fd())?;
        Ok(a.groups() & RDMA_NL_GROUP_LS_MASK != 0)
    }

    /// Joins the LS group again (a socket systemd kept after an earlier daemon left it),
    /// keeping the port id and any other group.
    ///
    /// # Errors
    /// The rebind failed.
    pub fn join_group(&self) -> io::Result<()> {
        let a = getsockname::<NetlinkAddr>(self.fd.as_raw_fd())?;
        let to = NetlinkAddr::new(a.pid(), a.groups() | RDMA_NL_GROUP_LS_MASK);
        bind(self.fd.as_raw_fd(), &to)?;
        Ok(())
    }

    /// Leaves the LS group, so that the kernel stops sending its requests here (with no
    /// listener left it asks the SA at once). Binding again with the same port id and
    /// no group does it; no capability is needed. The socket itself stays: systemd may
    /// hold the same one.
    ///
    /// # Errors
    /// The rebind failed.
    pub fn leave_group(&self) -> io::Result<()> {
        let a = getsockname::<NetlinkAddr>(self.fd.as_raw_fd())?;
        let to = NetlinkAddr::new(a.pid(), a.groups() & !RDMA_NL_GROUP_LS_MASK);
        bind(self.fd.as_raw_fd(), &to)?;
        Ok(())
    }
}

impl AsFd for LsSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn open_works_or_says_the_kernel_lacks_rdma_netlink() {
        match LsSocket::open() {
            Ok(s) => {
                // Bound to the LS group under a port id the kernel chose, and
                // non-blocking: nothing waits.
                let a = getsockname::<NetlinkAddr>(s.as_fd().as_raw_fd()).unwrap();
                assert_ne!(a.pid(), 0);
                assert_eq!(a.groups(), 0x4);
                assert!(s.in_group().unwrap());
                let mut buf = [0u8; 1024];
                assert!(
                    s.recv(&mut buf).is_ok(),
                    "a non-blocking receive never fails"
                );
            }
            Err(e) => {
                // Without RDMA netlink: unsupported. On a kernel that keeps the group to
                // privileged processes, as an ordinary user: EPERM at bind. Either way the
                // message says what is missing.
                let text = e.to_string();
                assert!(
                    text.contains("RDMA netlink") || text.contains("NETLINK_RDMA"),
                    "{text}"
                );
                if !e.is_unsupported() {
                    assert!(
                        matches!(
                            e,
                            LsOpenError::Failed {
                                errno: Errno::EPERM | Errno::EACCES,
                                ..
                            }
                        ),
                        "{e:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unsupported_is_told_apart_and_reads_clearly() {
        let e = LsOpenError::Unsupported(Errno::EPROTONOSUPPORT);
        assert!(e.is_unsupported());
        assert_eq!(
            e.to_string(),
            "the kernel has no RDMA netlink: EPROTONOSUPPORT: Protocol not supported"
        );
        let e = LsOpenError::Failed {
            step: "bind",
            errno: Errno::EPERM,
        };
        assert!(!e.is_unsupported());
        assert!(
            e.to_string()
                .starts_with("cannot bind the NETLINK_RDMA socket: EPERM")
        );
    }

    #[test]
    fn from_fd_refuses_a_non_netlink_socket() {
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let e = LsSocket::from_fd(OwnedFd::from(a)).unwrap_err();
        assert!(matches!(e, LsOpenError::NotNetlink));
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(matches!(
            LsSocket::from_fd(OwnedFd::from(f)),
            Err(LsOpenError::NotNetlink)
        ));
    }

    /// A NETLINK_ROUTE socket bound to `groups` with the port id the kernel picks,
    /// standing in for an LS socket (every kernel has NETLINK_ROUTE; groups 0x1 and 0x4
    /// are RTMGRP_LINK and RTMGRP_IPV4_IFADDR there, which any process may join).
    pub(crate) fn route_netlink_fd(groups: u32) -> OwnedFd {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::NetlinkRoute,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, groups)).unwrap();
        fd
    }

    /// [`route_netlink_fd`] as an [`LsSocket`].
    fn route_socket(groups: u32) -> LsSocket {
        LsSocket::from_fd(route_netlink_fd(groups)).unwrap()
    }

    #[test]
    fn leaving_and_joining_the_group_keeps_the_port_and_the_other_groups() {
        let s = route_socket(0x4 | 0x1);
        let before = getsockname::<NetlinkAddr>(s.as_fd().as_raw_fd()).unwrap();
        assert!(s.in_group().unwrap());
        s.leave_group().unwrap();
        assert!(!s.in_group().unwrap());
        let left = getsockname::<NetlinkAddr>(s.as_fd().as_raw_fd()).unwrap();
        assert_eq!(left.pid(), before.pid(), "same port id");
        assert_eq!(left.groups(), 0x1, "the other group stays");
        // Leaving twice is harmless.
        s.leave_group().unwrap();
        s.join_group().unwrap();
        assert!(s.in_group().unwrap());
        let back = getsockname::<NetlinkAddr>(s.as_fd().as_raw_fd()).unwrap();
        assert_eq!((back.pid(), back.groups()), (before.pid(), 0x5));
    }

    #[test]
    fn from_fd_accepts_a_netlink_socket_and_makes_it_non_blocking() {
        // NETLINK_ROUTE stands in for an inherited netlink socket (every kernel has it).
        let s = route_socket(0);
        let fl = OFlag::from_bits_truncate(fcntl(&s, FcntlArg::F_GETFL).unwrap());
        assert!(fl.contains(OFlag::O_NONBLOCK));
        let fd_flags = FdFlag::from_bits_truncate(fcntl(&s, FcntlArg::F_GETFD).unwrap());
        assert!(fd_flags.contains(FdFlag::FD_CLOEXEC));
        // Blocking would hang the test here; non-blocking says "nothing yet".
        let mut buf = [0u8; 64];
        assert_eq!(s.recv(&mut buf).unwrap(), None);
    }
}
