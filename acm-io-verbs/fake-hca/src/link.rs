//! The emulated host's connection to the hub, made on first use: one
//! [`HubClient`] owned by a thread of the library, which carries out the commands the
//! verbs and umad calls queue and delivers what the hub sends ([`crate::deliver`]).
//!
//! One thread owns the client because receiving needs it mutably; callers never wait
//! for the socket, only (for a QP number) for the answer the thread hands over.

use crate::config::Config;
use crate::ffi::{EventPipe, lock};
use acm_io_sim::hub::wire::HostMsg;
use acm_io_sim::hub::{HostSetup, HubClient, HubError, Incoming};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Something to do with the hub connection, on its thread.
pub type Command = Box<dyn FnOnce(&HubClient) -> Result<(), HubError> + Send>;

/// The attached host.
pub struct Link {
    /// The settings it was made from.
    pub config: Config,
    /// What the hub said this host is.
    pub setup: HostSetup,
    commands: Mutex<Sender<Command>>,
    wake: EventPipe,
}

static LINK: OnceLock<Option<Link>> = OnceLock::new();

/// The link, attaching on the first call; `None` when the emulation is not configured
/// or the hub refused (said once on stderr).
pub fn link() -> Option<&'static Link> {
    LINK.get_or_init(|| {
        let config = crate::config::current()?.clone();
        match attach(config) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("acm-fake-hca: no emulated HCA: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// The link if it was made already (for calls that must not attach, such as `close`).
pub fn existing() -> Option<&'static Link> {
    LINK.get().and_then(Option::as_ref)
}

/// Why the link could not be made.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("attaching to the hub at {}: {source}", hub.display())]
    Attach {
        hub: std::path::PathBuf,
        source: HubError,
    },
    #[error("starting the hub thread: {0}")]
    Thread(#[from] std::io::Error),
}

fn attach(config: Config) -> Result<Link, LinkError> {
    let (client, setup) =
        HubClient::attach(&config.hub, &config.socket, &config.host).map_err(|source| {
            LinkError::Attach {
                hub: config.hub.clone(),
                source,
            }
        })?;
    HUB_FD.store(client.as_fd().as_raw_fd(), Ordering::Relaxed);
    let (tx, rx) = mpsc::channel();
    let wake = EventPipe::new()?;
    let wake_read = wake.read.try_clone()?;
    // Before the thread starts, so that no change the hub reports comes first.
    crate::deliver::attached(&setup);
    std::thread::Builder::new()
        .name("acm-fake-hca".into())
        .spawn(move || run(client, &wake_read, &rx))?;
    SOCKET_PATH.get_or_init(|| config.socket.clone());
    // SAFETY: `remove_socket` is a plain function that stays loaded for the life of the
    // process (the library is never unloaded: it is preloaded).
    unsafe { libc::atexit(remove_socket) };
    Ok(Link {
        config,
        setup,
        commands: Mutex::new(tx),
        wake,
    })
}

static SOCKET_PATH: OnceLock<std::path::PathBuf> = OnceLock::new();
/// The hub connection's descriptor, for the goodbye at exit.
static HUB_FD: AtomicI32 = AtomicI32::new(-1);

/// At exit the host detaches (so the hub forgets its QPs and groups at once) and its
/// socket file goes. The DETACH is sent straight on the connected socket: the hub
/// thread may be anywhere, and an exit handler must not wait for it.
extern "C" fn remove_socket() {
    let fd = HUB_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let bye = HostMsg::Detach.encode();
        // SAFETY: the hub socket stays open for the life of the process; `bye` is a
        // valid buffer. A full or vanished hub just misses the goodbye.
        unsafe {
            libc::send(
                fd,
                bye.as_ptr().cast(),
                bye.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
    }
    if let Some(p) = SOCKET_PATH.get() {
        let _ = std::fs::remove_file(p);
    }
}

impl Link {
    /// Queues `cmd` for the hub thread.
    pub fn submit(&self, cmd: Command) {
        if lock(&self.commands).send(cmd).is_ok() {
            self.wake.post(&[1]);
        }
    }
}

/// The hub thread: waits on the hub's socket and the wake pipe, runs queued commands,
/// delivers every event; ends when the hub ends the attachment.
fn run(mut client: HubClient, wake: &std::os::fd::OwnedFd, commands: &Receiver<Command>) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: client.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structures.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 && crate::ffi::errno() != libc::EINTR {
            eprintln!("acm-fake-hca: poll: {}", std::io::Error::last_os_error());
            return;
        }
        if fds[1].revents != 0 {
            let mut sink = [0u8; 64];
            // SAFETY: the wake pipe's read end is open; `sink` is writable. Its writer
            // is non-blocking and this end is drained until it would block.
            unsafe {
                crate::ffi::set_flag(wake, libc::O_NONBLOCK).ok();
                while libc::read(wake.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) > 0 {}
            }
        }
        while let Ok(cmd) = commands.try_recv() {
            if let Err(e) = cmd(&client) {
                eprintln!("acm-fake-hca: to the hub: {e}");
            }
        }
        loop {
            match client.recv_incoming(Duration::ZERO) {
                Ok(Some(Incoming::Fabric(ev))) => crate::deliver::event(ev),
                Ok(Some(Incoming::Topology(ev))) => crate::deliver::topology(ev),
                Ok(None) => break,
                Err(HubError::Closed(reason)) => {
                    eprintln!("acm-fake-hca: the hub ended the attachment: {reason}");
                    crate::deliver::hub_gone();
                    return;
                }
                // One bad datagram is skipped; anything else means the socket no
                // longer reaches the hub.
                Err(HubError::Wire(e)) => eprintln!("acm-fake-hca: from the hub: {e}"),
                Err(e) => {
                    eprintln!("acm-fake-hca: lost the hub: {e}");
                    crate::deliver::hub_gone();
                    return;
                }
            }
        }
    }
}
