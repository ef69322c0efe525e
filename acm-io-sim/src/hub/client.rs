//! [`HubClient`]: a host's side of the hub. It turns the engine's fabric outputs into
//! datagrams and the hub's datagrams into owned inputs, and answers source lookups
//! itself.

use super::HubError;
use super::server::bind_fresh;
use super::wire::{HostMsg, HostSetup, HubMsg, MAX_DATAGRAM};
use crate::fabric;
use acm_engine::PortId;
use acm_engine::io::{EndpointId, Input, LookupId, Output, RecvInfo, SendToken};
use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`HubClient::attach`] waits for the hub's answer.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a send to the hub may block (the hub's queue is full) before it fails.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// An input from the fabric, owned; [`HubInput::as_input`] lends it to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubInput {
    /// `Input::SourceAnswer`, answered locally from the host's addresses.
    SourceAnswer {
        /// The lookup.
        id: LookupId,
        /// The chosen source, or an errno.
        result: Result<IpAddr, u8>,
    },
    /// `Input::QpOpened`.
    QpOpened {
        /// The endpoint.
        ep: EndpointId,
        /// Its QPN, or why not.
        result: Result<u32, ()>,
    },
    /// `Input::UdReceive` (always with a GRH).
    UdReceive {
        /// The endpoint.
        ep: EndpointId,
        /// Work-completion data.
        wc: RecvInfo,
        /// The GRH.
        grh: [u8; 40],
        /// The MAD.
        mad: Box<[u8; 256]>,
    },
    /// `Input::UdSendDone`.
    UdSendDone {
        /// The endpoint.
        ep: EndpointId,
        /// The send.
        token: SendToken,
        /// Success.
        ok: bool,
    },
    /// `Input::SaResponse`.
    SaResponse {
        /// The port.
        port: PortId,
        /// The MAD.
        mad: Vec<u8>,
    },
    /// `Input::SaSendFailed`.
    SaSendFailed {
        /// The port.
        port: PortId,
        /// The TID.
        tid: u64,
        /// umad's status.
        status: i32,
    },
}

impl HubInput {
    /// The engine input, borrowing the MAD and GRH.
    #[must_use]
    pub fn as_input(&self) -> Input<'_> {
        match self {
            Self::SourceAnswer { id, result } => Input::SourceAnswer {
                id: *id,
                result: *result,
            },
            Self::QpOpened { ep, result } => Input::QpOpened {
                ep: *ep,
                result: *result,
            },
            Self::UdReceive { ep, wc, grh, mad } => Input::UdReceive {
                ep: *ep,
                wc: *wc,
                grh: Some(&grh[..]),
                mad: &mad[..],
            },
            Self::UdSendDone { ep, token, ok } => Input::UdSendDone {
                ep: *ep,
                token: *token,
                ok: *ok,
            },
            Self::SaResponse { port, mad } => Input::SaResponse { port: *port, mad },
            Self::SaSendFailed { port, tid, status } => Input::SaSendFailed {
                port: *port,
                tid: *tid,
                status: *status,
            },
        }
    }
}

/// One host attached to a hub: see the [module docs](super).
#[derive(Debug)]
pub struct HubClient {
    sock: UnixDatagram,
    path: PathBuf,
    /// The host's addresses with their prefixes, for source lookups.
    ips: Vec<(IpAddr, u8)>,
    /// Inputs produced locally, handed out before anything from the hub.
    local: VecDeque<HubInput>,
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

    /// Carries out an engine output that touches the fabric: QP, multicast, UD and SA
    /// outputs go to the hub; a source lookup is answered locally (the next
    /// [`HubClient::recv_input`] returns it) by [`fabric::route_source`] over the
    /// host's addresses. Returns false, doing nothing, for the outputs that are the
    /// caller's business (client replies and closes, netlink replies, logs).
    ///
    /// # Errors
    /// The hub is gone, or its queue stayed full for 5 s.
    pub fn send_output(&mut self, out: &Output) -> Result<bool, HubError> {
        let msg = match out {
            Output::SourceQuery { id, dest } => {
                let result = fabric::route_source(self.ips.iter().copied(), *dest);
                self.local
                    .push_back(HubInput::SourceAnswer { id: *id, result });
                return Ok(true);
            }
            Output::OpenQp {
                ep,
                port,
                pkey,
                pkey_index,
                recv_depth,
                send_depth,
            } => HostMsg::OpenQp {
                ep: *ep,
                port: *port,
                pkey: *pkey,
                pkey_index: *pkey_index,
                recv_depth: *recv_depth,
                send_depth: *send_depth,
            },
            Output::CloseQp { ep } => HostMsg::CloseQp { ep: *ep },
            Output::UdSend { ep, token, av, mad } => HostMsg::UdSend {
                ep: *ep,
                token: *token,
                av: *av,
                mad: Box::new(mad.0),
            },
            Output::McastAttach { ep, mgid, mlid } => HostMsg::McastAttach {
                ep: *ep,
                mgid: *mgid,
                mlid: *mlid,
            },
            Output::McastDetach { ep, mgid, mlid } => HostMsg::McastDetach {
                ep: *ep,
                mgid: *mgid,
                mlid: *mlid,
            },
            Output::SaSend {
                port,
                tid,
                dest,
                timeout_ms,
                retries,
                mad,
            } => HostMsg::SaSend {
                port: *port,
                tid: *tid,
                dest: *dest,
                timeout_ms: *timeout_ms,
                retries: *retries,
                mad: Box::new(mad.0),
            },
            Output::ClientReply { .. }
            | Output::ClientClose { .. }
            | Output::NetlinkReply(_)
            | Output::Log(_) => return Ok(false),
        };
        self.send(&msg)?;
        Ok(true)
    }

    /// The next input: a locally answered lookup at once, else whatever the hub sends
    /// within `timeout` (`None` when nothing came).
    ///
    /// # Errors
    /// [`HubError::Closed`] when the hub ended the attachment; a socket error; a
    /// datagram that does not decode.
    pub fn recv_input(&mut self, timeout: Duration) -> Result<Option<HubInput>, HubError> {
        if let Some(i) = self.local.pop_front() {
            return Ok(Some(i));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let Some(msg) = self.recv_msg(deadline)? else {
                return Ok(None);
            };
            let input = match msg {
                HubMsg::QpOpened { ep, qpn } => HubInput::QpOpened {
                    ep,
                    result: qpn.ok_or(()),
                },
                HubMsg::UdReceive { ep, wc, grh, mad } => HubInput::UdReceive { ep, wc, grh, mad },
                HubMsg::UdSendDone { ep, token, ok } => HubInput::UdSendDone { ep, token, ok },
                HubMsg::SaResponse { port, mad } => HubInput::SaResponse { port, mad },
                HubMsg::SaSendFailed { port, tid, status } => {
                    HubInput::SaSendFailed { port, tid, status }
                }
                HubMsg::Bye { reason } => {
                    self.detached = true;
                    return Err(HubError::Closed(reason));
                }
                HubMsg::Error { message, .. } => return Err(HubError::Refused(message)),
                HubMsg::Attached(_) => continue,
            };
            return Ok(Some(input));
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

    fn send(&self, msg: &HostMsg) -> Result<(), HubError> {
        match self.sock.send(&msg.encode()) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(HubError::Timeout(SEND_TIMEOUT)),
            Err(e) => Err(HubError::Io(e)),
        }
    }

    /// The next decodable message from the hub before `deadline`.
    fn recv_msg(&mut self, deadline: Instant) -> Result<Option<HubMsg>, HubError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // A zero timeout means "block forever" to the socket: poll for 1 µs.
            self.sock
                .set_read_timeout(Some(left.max(Duration::from_micros(1))))?;
            match self.sock.recv(&mut self.buf) {
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
/// [`HubClient::recv_input`] with a zero timeout until it returns `None`).
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
