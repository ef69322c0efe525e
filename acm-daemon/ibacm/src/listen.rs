//! The client listener for each `server_mode`, with the reference's socket files, port
//! files and symlinks, or the stream socket systemd passed in.
//!
//! The listen queue is the system's longest (`listen(2)` with -1, which Linux reads as
//! `net.core.somaxconn`, 4096 by default): a burst of clients, or clients arriving
//! while the daemon is out of descriptors, wait in the kernel's queue instead of being
//! refused. A socket systemd passed keeps the unit's `Backlog=` (by default also the
//! kernel's limit), which is the administrator's to set.

use super::access::SocketAccess;
use super::paths::RunPaths;
use acm_engine::config::ServerMode;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The unix socket's default permissions: librdmacm in every user's process connects to
/// it, so any local user must be able to (the reference binds with umask 0).
pub(crate) const DEFAULT_SOCKET_MODE: u32 = 0o777;

/// A listener that cannot be set up; the daemon exits.
#[derive(Debug, Error)]
pub(crate) enum ListenError {
    /// The socket cannot be bound.
    #[error("cannot listen on {what}: {source}")]
    Bind {
        /// The address or path.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// The public symlink for librdmacm cannot be made (fatal in unix mode, as in the
    /// reference).
    #[error("cannot create symlink {path}: {source}")]
    Symlink {
        /// The link.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The socket file's group or mode cannot be set.
    #[error("cannot set the group or mode of {path}: {source}")]
    Permissions {
        /// The socket file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The port file cannot be written.
    #[error("cannot write {path}: {source}")]
    PortFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// systemd passed something that is neither a listening stream socket nor a netlink
    /// socket.
    #[error("systemd passed fd {0}, which is neither a listening stream socket nor netlink")]
    Inherited(usize),
}

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    /// `server_mode unix`.
    Unix(UnixListener),
    /// `server_mode loop` or `open`.
    Tcp(TcpListener),
}

/// An accepted client connection.
#[derive(Debug)]
pub enum Stream {
    /// Over the unix socket.
    Unix(UnixStream),
    /// Over TCP.
    Tcp(TcpStream),
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Self::Unix(s) => s.as_fd(),
            Self::Tcp(s) => s.as_fd(),
        }
    }
}

impl Listener {
    /// Accepts one pending connection.
    ///
    /// # Errors
    /// `WouldBlock` when none is pending; the accept error otherwise.
    pub fn accept(&self) -> io::Result<Stream> {
        match self {
            Self::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Self::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
        }
    }

    /// Where clients connect, for the start-up message.
    #[must_use]
    pub fn describe(&self, paths: &RunPaths) -> String {
        match self {
            Self::Unix(l) => l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_else(|| paths.unix_socket().display().to_string()),
            Self::Tcp(l) => l
                .local_addr()
                .map_or_else(|_| "tcp".to_owned(), |a| format!("tcp {a}")),
        }
    }
}

/// What systemd passed in: a client listener, a netlink socket, or both.
#[derive(Debug, Default)]
pub(crate) struct Inherited {
    /// The `ListenStream=` socket.
    pub listener: Option<std::os::unix::net::UnixListener>,
    /// The `ListenNetlink=` socket.
    pub netlink: Option<OwnedFd>,
}

/// Takes the sockets systemd passed (`LISTEN_FDS`, at most two). Unlike the reference,
/// each fd is inspected itself (the reference always looks at fd 3).
///
/// # Errors
/// An fd that is neither kind.
pub(crate) fn inherit_from_systemd() -> Result<Inherited, ListenError> {
    let mut fds = listenfd::ListenFd::from_env();
    let mut got = Inherited::default();
    for idx in 0..fds.len().min(2) {
        if let Ok(Some(l)) = fds.take_unix_listener(idx) {
            got.listener = Some(l);
            continue;
        }
        match fds.take_custom::<OwnedFd>(
            idx,
            nix::libc::AF_NETLINK,
            nix::libc::SOCK_RAW,
            "netlink socket",
        ) {
            Ok(Some(fd)) => got.netlink = Some(fd),
            _ => return Err(ListenError::Inherited(idx)),
        }
    }
    // The LISTEN_* variables stay set (removing them is `unsafe` in edition 2024);
    // children cannot use them, since listenfd marks the fds close-on-exec.
    Ok(got)
}

/// Opens the listener for `mode`, creating and removing the rendezvous files as the
/// reference does (docs/protocol/client-messages.md §1). `public` is false with
/// `acme_plus_kernel_only`: the librdmacm symlinks are then not created. The unix
/// socket gets `socket`'s group and mode (by default mode 0777 and the daemon's group);
/// a socket systemd passed keeps the unit's `SocketMode=` and `SocketGroup=` unless
/// `socket` sets them.
///
/// # Errors
/// See [`ListenError`]; in TCP modes a symlink failure is only returned in the
/// warnings.
pub(crate) fn open(
    mode: ServerMode,
    port: u16,
    paths: &RunPaths,
    socket: &SocketAccess,
    public: bool,
    inherited: Option<std::os::unix::net::UnixListener>,
    warnings: &mut Vec<String>,
) -> Result<Listener, ListenError> {
    match mode {
        ServerMode::Unix => {
            remove_quietly(&paths.tcp_port_file());
            remove_quietly(&paths.public_port_file());
            let listener = match inherited {
                Some(l) => {
                    l.set_nonblocking(true)
                        .map_err(|source| ListenError::Bind {
                            what: "the socket systemd passed".into(),
                            source,
                        })?;
                    if socket.mode.is_some() || socket.group.is_some() {
                        let path = l
                            .local_addr()
                            .ok()
                            .and_then(|a| a.as_pathname().map(Path::to_path_buf));
                        if let Some(p) = path {
                            set_permissions(&p, socket.mode, socket.group.as_ref().map(|g| g.id))?;
                        }
                    }
                    UnixListener::from_std(l)
                }
                None => {
                    let l = bind_unix(&paths.unix_socket(), socket)?;
                    system_backlog(&l, &paths.unix_socket().display().to_string())?;
                    l
                }
            };
            if public {
                relink(&paths.public_socket(), "ibacm-unix.sock").map_err(|source| {
                    ListenError::Symlink {
                        path: paths.public_socket(),
                        source,
                    }
                })?;
            }
            Ok(Listener::Unix(listener))
        }
        ServerMode::Loop | ServerMode::Open => {
            remove_quietly(&paths.unix_socket());
            remove_quietly(&paths.public_socket());
            let ip = if mode == ServerMode::Loop {
                Ipv4Addr::LOCALHOST
            } else {
                Ipv4Addr::UNSPECIFIED
            };
            let addr = SocketAddr::from((ip, port));
            let listener = TcpListener::bind(addr).map_err(|source| ListenError::Bind {
                what: addr.to_string(),
                source,
            })?;
            system_backlog(&listener, &addr.to_string())?;
            let bound = listener.local_addr().map_or(port, |a| a.port());
            super::safe_file::replace(
                &paths.tcp_port_file(),
                format!("{bound}\n").as_bytes(),
                0o644,
            )
            .map_err(|source| ListenError::PortFile {
                path: paths.tcp_port_file(),
                source,
            })?;
            if public && let Err(e) = relink(&paths.public_port_file(), "ibacm-tcp.port") {
                warnings.push(format!(
                    "cannot create symlink {}: {e}",
                    paths.public_port_file().display()
                ));
            }
            Ok(Listener::Tcp(listener))
        }
    }
}

/// Binds `path` with `socket`'s group and mode (0777 by default: any local user may
/// connect, as with the reference's umask 0), replacing a stale socket file.
fn bind_unix(path: &Path, socket: &SocketAccess) -> Result<UnixListener, ListenError> {
    remove_quietly(path);
    let l = UnixListener::bind(path).map_err(|source| ListenError::Bind {
        what: path.display().to_string(),
        source,
    })?;
    // chmod after bind rather than umask(0) around it: the same result without touching
    // process-wide state. Until then the file has the umask's mode (0755 with the usual
    // 022), which lets no other user connect, so a narrower mode has no window.
    set_permissions(
        path,
        Some(socket.mode.unwrap_or(DEFAULT_SOCKET_MODE)),
        socket.group.as_ref().map(|g| g.id),
    )?;
    Ok(l)
}

/// Sets `listener`'s queue to the system's longest. mio's TCP bind asks for 128, as
/// the standard library does; calling `listen` again on a listening socket only
/// changes its queue length. (mio's unix bind already asks for the maximum; asking
/// again keeps that from depending on a library's choice.)
fn system_backlog(listener: &impl std::os::fd::AsFd, what: &str) -> Result<(), ListenError> {
    use nix::sys::socket::{Backlog, listen};
    listen(listener, Backlog::MAXALLOWABLE).map_err(|e| ListenError::Bind {
        what: what.to_owned(),
        source: e.into(),
    })
}

/// Gives the socket file `path` group `gid` (first, since changing the owner may clear
/// mode bits), then `mode`.
fn set_permissions(path: &Path, mode: Option<u32>, gid: Option<u32>) -> Result<(), ListenError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |source| ListenError::Permissions {
        path: path.to_path_buf(),
        source,
    };
    if gid.is_some() {
        std::os::unix::fs::chown(path, None, gid).map_err(fail)?;
    }
    if let Some(m) = mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).map_err(fail)?;
    }
    Ok(())
}

/// Replaces `link` with a relative symlink to `target`.
fn relink(link: &Path, target: &str) -> io::Result<()> {
    remove_quietly(link);
    std::os::unix::fs::symlink(target, link)
}

fn remove_quietly(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary directory")
    }

    /// [`open`] with the default socket access and no inherited socket.
    fn open_default(
        mode: ServerMode,
        port: u16,
        paths: &RunPaths,
        public: bool,
        warnings: &mut Vec<String>,
    ) -> Listener {
        open(
            mode,
            port,
            paths,
            &SocketAccess::default(),
            public,
            None,
            warnings,
        )
        .unwrap()
    }

    #[test]
    fn unix_mode_makes_the_socket_and_public_link_and_removes_port_files() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir();
        let p = RunPaths::new(d.path());
        std::fs::write(p.tcp_port_file(), "6125\n").unwrap();
        let mut w = Vec::new();
        let l = open_default(ServerMode::Unix, 6125, &p, true, &mut w);
        assert!(matches!(l, Listener::Unix(_)));
        assert!(!p.tcp_port_file().exists());
        let mode = std::fs::metadata(p.unix_socket())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o777);
        assert_eq!(
            std::fs::read_link(p.public_socket()).unwrap(),
            Path::new("ibacm-unix.sock")
        );
        drop(l);
        // acme_plus_kernel_only: no public link.
        std::fs::remove_file(p.public_socket()).unwrap();
        let narrow = SocketAccess {
            mode: Some(0o700),
            group: None,
        };
        let _l = open(ServerMode::Unix, 6125, &p, &narrow, false, None, &mut w).unwrap();
        assert!(std::fs::symlink_metadata(p.public_socket()).is_err());
        let mode = std::fs::metadata(p.unix_socket())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "--socket-mode");
    }

    #[test]
    fn socket_group_and_mode_are_set_on_bound_and_passed_sockets() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = dir();
        let p = RunPaths::new(d.path());
        // A group this process may give its files: its own (any group as root).
        let gid = nix::unistd::getegid().as_raw();
        let socket = SocketAccess {
            mode: Some(0o660),
            group: Some(super::super::access::Id {
                written: gid.to_string(),
                id: gid,
            }),
        };
        let mut w = Vec::new();
        let l = open(ServerMode::Unix, 6125, &p, &socket, true, None, &mut w).unwrap();
        let m = std::fs::metadata(p.unix_socket()).unwrap();
        assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o660, gid));
        drop(l);
        // A socket systemd passed keeps its mode unless one is configured.
        let passed = d.path().join("passed.sock");
        let std_l = std::os::unix::net::UnixListener::bind(&passed).unwrap();
        std::fs::set_permissions(&passed, std::fs::Permissions::from_mode(0o666)).unwrap();
        let _l = open(
            ServerMode::Unix,
            6125,
            &p,
            &SocketAccess::default(),
            true,
            Some(std_l),
            &mut w,
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&passed).unwrap().permissions().mode() & 0o777,
            0o666
        );
        let std_l = std::os::unix::net::UnixListener::bind(d.path().join("passed2.sock")).unwrap();
        let _l = open(
            ServerMode::Unix,
            6125,
            &p,
            &socket,
            true,
            Some(std_l),
            &mut w,
        )
        .unwrap();
        let m = std::fs::metadata(d.path().join("passed2.sock")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o660);
    }

    #[test]
    fn loop_mode_writes_the_port_file_and_link() {
        let d = dir();
        let p = RunPaths::new(d.path());
        let mut w = Vec::new();
        let l = open_default(ServerMode::Loop, 0, &p, true, &mut w);
        let Listener::Tcp(t) = &l else { panic!() };
        let addr = t.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        assert_eq!(
            std::fs::read_to_string(p.tcp_port_file()).unwrap(),
            format!("{}\n", addr.port())
        );
        assert_eq!(
            std::fs::read_to_string(p.public_port_file()).unwrap(),
            format!("{}\n", addr.port()),
            "the link resolves to the port file"
        );
        assert!(w.is_empty());
        assert!(!p.unix_socket().exists());
    }

    /// The kernel's longest listen queue.
    fn somaxconn() -> u32 {
        std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn the_listen_queue_is_the_systems_longest() {
        use std::os::fd::AsRawFd;
        let d = dir();
        let p = RunPaths::new(d.path());
        let mut w = Vec::new();
        let l = open_default(ServerMode::Loop, 0, &p, false, &mut w);
        let Listener::Tcp(t) = &l else { panic!() };
        let port = t.local_addr().unwrap().port();
        // ss(8) shows a listening socket's queue limit as its Send-Q.
        match std::process::Command::new("ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
        {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                let send_q: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.split_whitespace().nth(2))
                    .collect();
                assert_eq!(send_q, [somaxconn().to_string()], "not mio's 128: {text}");
            }
            other => eprintln!("ss(8) not usable ({other:?}): the TCP queue is not checked"),
        }
        drop(l);
        // The unix socket: more clients than the libraries' usual 128 wait in the queue
        // unaccepted (a connect to a full queue would fail with EAGAIN).
        let l = open_default(ServerMode::Unix, 0, &p, false, &mut w);
        let addr = nix::sys::socket::UnixAddr::new(&p.unix_socket()).unwrap();
        let waiting: Vec<_> = (0..300)
            .map(|i| {
                let s = nix::sys::socket::socket(
                    nix::sys::socket::AddressFamily::Unix,
                    nix::sys::socket::SockType::Stream,
                    nix::sys::socket::SockFlag::SOCK_NONBLOCK,
                    None,
                )
                .unwrap();
                nix::sys::socket::connect(s.as_raw_fd(), &addr)
                    .unwrap_or_else(|e| panic!("client {i}: {e}"));
                s
            })
            .collect();
        assert_eq!(waiting.len(), 300);
        drop(l);
    }
}
