//! The NETLINK_RDMA socket on which the kernel's `ib_sa` multicasts its PathRecord
//! lookups (RDMA_NL_LS, docs/protocol/netlink-ls.md) and on which the replies go back.
//!
//! The daemon only moves bytes here; the engine parses the requests and builds the
//! replies ([`acm_engine::Input::Netlink`], [`acm_engine::ClientOutput::Netlink`]).
//!
//! Differences from the reference, each deliberate: the socket is non-blocking (it sits
//! in the event loop with everything else, where the reference's is blocking in its own
//! `select`), close-on-exec, and datagrams that do not come from the kernel
//! (`nl_pid` ≠ 0) are skipped.

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
    /// RDMA netlink exists but the socket cannot be set up: typically EPERM without
    /// CAP_NET_ADMIN (joining the LS group needs it), or out of descriptors.
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
    /// Opens NETLINK_RDMA and binds it with `nl_pid` = our pid and `nl_groups` = 0x4,
    /// as the reference does.
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
        let addr = NetlinkAddr::new(std::process::id(), RDMA_NL_GROUP_LS_MASK);
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

    /// Takes the socket systemd passed (`ListenNetlink=rdma 4`: already bound to the LS
    /// group) and makes it non-blocking and close-on-exec.
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
}

impl AsFd for LsSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_works_or_says_the_kernel_lacks_rdma_netlink() {
        match LsSocket::open() {
            Ok(s) => {
                // Bound to the LS group under our pid, and non-blocking: nothing waits.
                let a = getsockname::<NetlinkAddr>(s.as_fd().as_raw_fd()).unwrap();
                assert_eq!(a.pid(), std::process::id());
                assert_eq!(a.groups(), 0x4);
                let mut buf = [0u8; 1024];
                assert!(
                    s.recv(&mut buf).is_ok(),
                    "a non-blocking receive never fails"
                );
            }
            Err(e) => {
                // Without RDMA netlink: unsupported. As an ordinary user on an IB host:
                // EPERM at bind. Either way the message says what is missing.
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

    #[test]
    fn from_fd_accepts_a_netlink_socket_and_makes_it_non_blocking() {
        // NETLINK_ROUTE stands in for an inherited netlink socket (every kernel has it).
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::NetlinkRoute,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).unwrap();
        let s = LsSocket::from_fd(fd).unwrap();
        let fl = OFlag::from_bits_truncate(fcntl(&s, FcntlArg::F_GETFL).unwrap());
        assert!(fl.contains(OFlag::O_NONBLOCK));
        let fd_flags = FdFlag::from_bits_truncate(fcntl(&s, FcntlArg::F_GETFD).unwrap());
        assert!(fd_flags.contains(FdFlag::FD_CLOEXEC));
        // Blocking would hang the test here; non-blocking says "nothing yet".
        let mut buf = [0u8; 64];
        assert_eq!(s.recv(&mut buf).unwrap(), None);
    }
}
