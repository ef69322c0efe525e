//! [`HubClient`]: a host's side of the hub. It turns the engine's fabric operations into
//! datagrams and the hub's datagrams into [`FabricEvent`]s, and answers source lookups
//! itself.

use super::HubError;
use super::server::bind_fresh;
use super::wire::{HostMsg, HostSetup, HubMsg, MAX_DATAGRAM, TopologyEvent};
use crate::fabric;
use acm_engine::{EndpointId, FabricEvent, FabricOp, McastGroup, NeighQuery, OpenQp, SaSend};
use acm_engine::{SourceQuery, UdSend};
use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`HubClient::attach`] waits for the hub's answer.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a send to the hub may block (the hub's queue is full) before it fails.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// What the hub sends a host: the engine's fabric events, and changes of the host's
/// ports and devices (which an emulated HCA turns into async events).
// Fabric events are nearly all of the traffic and go straight on to the engine; a box
// would be one allocation per event to shrink the rare topology change.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Incoming {
    /// A fabric event for the engine.
    Fabric(FabricEvent),
    /// A port or device of this host changed.
    Topology(TopologyEvent),
}

/// One host attached to a hub: see the [module docs](super).
#[derive(Debug)]
pub struct HubClient {
    sock: UnixDatagram,
    path: PathBuf,
    /// The host's addresses with their prefixes, for source lookups.
    ips: Vec<(IpAddr, u8)>,
    /// The host's default route, for source lookups outside its subnets.
    default_route: Option<IpAddr>,
    /// Inputs produced locally, handed out before anything from the hub.
    local: VecDeque<FabricEvent>,
    buf: Vec<u8>,
    detached: bool,
}

fn socket_err<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> HubError + 'p {
    move |source| HubError::Socket {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl HubClient {
    /// Binds `my_path` (replacing a stale socket file), attaches to the hub at
    /// `hub_path` as the spec's host `host_name`, and waits up to
    /// [`ATTACH_TIMEOUT`] for the host's setup.
    ///
    /// # Errors
    /// The socket cannot be bound or reach the hub; the hub refuses
    /// ([`HubError::Refused`], e.g. an unknown host name) or does not answer in time.
    pub fn attach(
        hub_path: impl AsRef<Path>,
        my_path: impl AsRef<Path>,
        host_name: &str,
    ) -> Result<(Self, HostSetup), HubError> {
        Self::attach_timeout(hub_path, my_path, host_name, ATTACH_TIMEOUT)
    }

    /// [`HubClient::attach`] with another wait for the answer.
    ///
    /// # Errors
    /// As for [`HubClient::attach`].
    pub fn attach_timeout(
        hub_path: impl AsRef<Path>,
        my_path: impl AsRef<Path>,
        host_name: &str,
        timeout: Duration,
    ) -> Result<(Self, HostSetup), HubError> {
        let (hub_path, my_path) = (hub_path.as_ref(), my_path.as_ref());
        let sock = bind_fresh(my_path)?;
        let mut client = Self {
            sock,
            path: my_path.to_path_buf(),
            ips: Vec::new(),
            default_route: None,
            local: VecDeque::new(),
            buf: vec![0u8; MAX_DATAGRAM + 1],
            // Nothing to detach until the hub has said yes.
            detached: true,
        };
        // Connected, the socket hears only the hub, and the hub's sends to it are not
        // held to the receive-queue length limit of unconnected datagram sockets.
        client
            .sock
            .connect(hub_path)
            .map_err(socket_err("cannot reach the hub at", hub_path))?;
        client.sock.set_write_timeout(Some(SEND_TIMEOUT))?;
        client.send(&HostMsg::Attach {
            name: host_name.to_owned(),
        })?;
        let deadline = Instant::now() + timeout;
        loop {
            let Some(msg) = client.recv_msg(deadline)? else {
                return Err(HubError::Timeout(timeout));
            };
            match msg {
                HubMsg::Attached(setup) => {
                    client.detached = false;
                    client.default_route = setup.default_route;
                    client.ips = setup
                        .ips
                        .iter()
                        .map(|ip| {
                            let max = if ip.addr.is_ipv4() { 32 } else { 128 };
                            (ip.addr, ip.prefix_len.unwrap_or(max))
                        })
                        .collect();
                    return Ok((client, setup));
                }
                HubMsg::Error { message, .. } => return Err(HubError::Refused(message)),
                HubMsg::Bye { reason } => return Err(HubError::Closed(reason)),
                // Left over from an earlier attachment of this path.
                _ => {}
            }
        }
    }

    /// This host's socket path.
    #[must_use]
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// Asks the hub for an endpoint's QP (answered by a [`FabricEvent::QpOpened`]).
    ///
    /// # Errors
    /// The hub is gone, or its queue stayed full for 5 s.
    pub fn open_qp(&self, qp: &OpenQp) -> Result<(), HubError> {
        self.send_op(&FabricOp::OpenQp(*qp))
    }

    /// Reserves a QPN for an endpoint whose port is not known yet (answered by a
    /// [`FabricEvent::QpOpened`]); its [`HubClient::open_qp`] keeps that QPN.
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn create_qp(&self, ep: EndpointId) -> Result<(), HubError> {
        self.send(&HostMsg::CreateQp { ep })
    }

    /// Destroys an endpoint's QP at the hub.
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn close_qp(&self, ep: EndpointId) -> Result<(), HubError> {
        self.send_op(&FabricOp::CloseQp(ep))
    }

    /// Asks the host's neighbour table, which the hub answers from the spec (with a
    /// [`FabricEvent::NeighAnswer`]).
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn neigh_query(&self, q: &NeighQuery) -> Result<(), HubError> {
        self.send_op(&FabricOp::NeighQuery(*q))
    }

    /// Posts a UD send (answered by a [`FabricEvent::UdSendDone`]).
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn ud_send(&self, send: &UdSend) -> Result<(), HubError> {
        self.send_op(&FabricOp::UdSend(send.clone()))
    }

    /// Attaches an endpoint's QP to a multicast group.
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn mcast_attach(&self, g: &McastGroup) -> Result<(), HubError> {
        self.send_op(&FabricOp::McastAttach(*g))
    }

    /// Detaches an endpoint's QP from a multicast group.
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn mcast_detach(&self, g: &McastGroup) -> Result<(), HubError> {
        self.send_op(&FabricOp::McastDetach(*g))
    }

    /// Sends an SA MAD (answered by a [`FabricEvent::SaResponse`] or
    /// [`FabricEvent::SaSendFailed`]).
    ///
    /// # Errors
    /// As for [`HubClient::open_qp`].
    pub fn sa_send(&self, send: &SaSend) -> Result<(), HubError> {
        self.send_op(&FabricOp::SaSend(send.clone()))
    }

    /// Answers a source lookup locally by [`fabric::route_with_default`] over the
    /// host's addresses and default route, as the simulator does; the answer is the
    /// next [`HubClient::local_event`].
    pub fn source_query(&mut self, q: &SourceQuery) {
        let result =
            fabric::route_with_default(self.ips.iter().copied(), self.default_route, q.dest);
        self.local
            .push_back(FabricEvent::SourceAnswer { id: q.id, result });
    }

    /// An answer made locally (a source lookup), if one waits.
    pub fn local_event(&mut self) -> Option<FabricEvent> {
        self.local.pop_front()
    }

    /// The next event: a locally answered lookup at once, else whatever the hub sends
    /// within `timeout` (`None` when nothing came). Changes of the host's ports and
    /// devices are skipped: an engine fed by this client learns nothing from them
    /// (use [`HubClient::recv_incoming`] to see them).
    ///
    /// # Errors
    /// [`HubError::Closed`] when the hub ended the attachment; a socket error; a
    /// datagram that does not decode.
    pub fn recv_event(&mut self, timeout: Duration) -> Result<Option<FabricEvent>, HubError> {
        self.recv_kind(timeout, |i| match i {
            Incoming::Fabric(ev) => Some(ev),
            Incoming::Topology(_) => None,
        })
    }

    /// The next change of the host's ports or devices the hub sends within `timeout`
    /// (`None` when none came), skipping fabric events: the counterpart of
    /// [`HubClient::recv_event`], for a watcher of the topology alone.
    ///
    /// # Errors
    /// As for [`HubClient::recv_event`].
    pub fn recv_topology(&mut self, timeout: Duration) -> Result<Option<TopologyEvent>, HubError> {
        self.recv_kind(timeout, |i| match i {
            Incoming::Topology(ev) => Some(ev),
            Incoming::Fabric(_) => None,
        })
    }

    /// The first of what comes within `timeout` that `pick` keeps; the rest is
    /// dropped.
    fn recv_kind<T>(
        &mut self,
        timeout: Duration,
        pick: impl Fn(Incoming) -> Option<T>,
    ) -> Result<Option<T>, HubError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(incoming) = self.recv_incoming(left)? else {
                return Ok(None);
            };
            if let Some(kept) = pick(incoming) {
                return Ok(Some(kept));
            }
        }
    }

    /// [`HubClient::recv_event`], with the changes of the host's ports and devices.
    ///
    /// # Errors
    /// As for [`HubClient::recv_event`].
    pub fn recv_incoming(&mut self, timeout: Duration) -> Result<Option<Incoming>, HubError> {
        if let Some(i) = self.local.pop_front() {
            return Ok(Some(Incoming::Fabric(i)));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let Some(msg) = self.recv_msg(deadline)? else {
                return Ok(None);
            };
            match msg {
                HubMsg::Event(ev) => return Ok(Some(Incoming::Fabric(ev))),
                HubMsg::Topology(ev) => return Ok(Some(Incoming::Topology(ev))),
                HubMsg::Bye { reason } => {
                    self.detached = true;
                    return Err(HubError::Closed(reason));
                }
                HubMsg::Error { message, .. } => return Err(HubError::Refused(message)),
                HubMsg::Attached(_) | HubMsg::Done => {}
            }
        }
    }

    /// Detaches from the hub (its QPs, groups and SA sends are forgotten) and removes
    /// the socket file.
    ///
    /// # Errors
    /// The DETACH could not be sent (the hub is gone); the file is removed anyway.
    pub fn detach(mut self) -> Result<(), HubError> {
        if self.detached {
            return Ok(());
        }
        self.detached = true;
        self.send(&HostMsg::Detach)
    }

    /// Sends one of the engine's fabric operations as it is.
    fn send_op(&self, op: &FabricOp) -> Result<(), HubError> {
        self.send_datagram(&HostMsg::encode_op(op))
    }

    fn send(&self, msg: &HostMsg) -> Result<(), HubError> {
        self.send_datagram(&msg.encode())
    }

    fn send_datagram(&self, datagram: &[u8]) -> Result<(), HubError> {
        match self.sock.send(datagram) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(HubError::Timeout(SEND_TIMEOUT)),
            Err(e) => Err(HubError::Io(e)),
        }
    }

    /// The next decodable message from the hub before `deadline`.
    fn recv_msg(&mut self, deadline: Instant) -> Result<Option<HubMsg>, HubError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got = if left.is_zero() {
                // Nothing left to wait: read without blocking. The socket's read
                // timeout cannot say that (zero means "forever", and the least other
                // one is rounded up to a kernel tick, 1–10 ms, which an event loop
                // draining the socket after each wake-up would sleep every time), and
                // making the socket non-blocking would make sends to a busy hub fail.
                nix::sys::socket::recv(
                    self.sock.as_raw_fd(),
                    &mut self.buf,
                    nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                )
                .map_err(io::Error::from)
            } else {
                self.sock.set_read_timeout(Some(left))?;
                self.sock.recv(&mut self.buf)
            };
            match got {
                Ok(n) if n > MAX_DATAGRAM => {
                    return Err(HubError::Io(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "oversized datagram from the hub",
                    )));
                }
                Ok(n) => return Ok(Some(HubMsg::decode(&self.buf[..n])?)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(HubError::Io(e)),
            }
        }
    }
}

/// The host's socket, so an event loop can wait for the hub's datagrams (then call
/// [`HubClient::recv_event`] with a zero timeout until it returns `None`).
impl std::os::fd::AsFd for HubClient {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Drop for HubClient {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self
                .sock
                .set_write_timeout(Some(Duration::from_millis(100)));
            let _ = self.send(&HostMsg::Detach);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
