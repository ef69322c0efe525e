//! The fabric hub: one simulated fabric shared by separate processes.
//!
//! A [`Hub`] owns a [`FabricSpec`](crate::FabricSpec)'s fabric — the topology, the SA,
//! the QPs and multicast attachments of every host — and listens on a unix datagram
//! socket. Each daemon (or test driver) binds its own socket, attaches as one host of
//! the spec with [`HubHost::attach`] (or [`HubClient::attach`] for the bare
//! connection), which feeds the [`HostSetup`] it gets back to its engine
//! (`Input::LocalIpAdded` for each address, `Input::DeviceAdded` for each device). From
//! then on the engine's driver carries its fabric operations to the hub through the
//! [`acm_engine::driver::Fabric`] that [`HubHost`] is, and the events from
//! [`HubHost::recv`] go back to the engine.
//!
//! The hub delivers with the simulator's rules (shared in [`crate::fabric`]): UD
//! unicast and multicast with the pkey, Q_Key and port checks and a GRH on every
//! receive, and umad SA sends with the kernel's TID rewrite, per-try timeout and
//! retries. Unlike [`crate::Sim`] it runs in **real time and is not deterministic**:
//! it is for multi-process integration tests. Link latencies and the SA's response
//! time are the spec's, on the wall clock; no faults are injected; the topology does
//! not change while the hub runs.
//!
//! # Source-address lookups
//!
//! A source lookup never reaches the hub: [`HubClient`] answers it locally from
//! the addresses and default route in the host's [`HostSetup`], with the simulator's
//! rule ([`fabric::route_with_default`](crate::fabric::route_with_default): the host's
//! own address, else its first address on the destination's subnet, else its default
//! route of the destination's family, else ENETUNREACH), and the driver feeds the
//! answer at once.
//!
//! # Protocol
//!
//! One message per datagram. Every datagram starts with an 8-byte header; every field
//! is little-endian and at a fixed place, strings are a u16 length and UTF-8 bytes,
//! GIDs and MADs are raw bytes in wire (network) order as the engine holds them. A body
//! whose length is not the header's, or with bytes left over, is malformed.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | message type (table below) |
//! | 1 | 1 | protocol version, 1 ([`wire::VERSION`]) |
//! | 2 | 2 | reserved, 0 |
//! | 4 | 4 | body length (datagram length − 8) |
//!
//! The hub knows a host by the path of the socket it sends from: a host must bind its
//! socket before it sends ATTACH, and everything it sends afterwards must come from
//! that socket. [`HubClient`] also connects its socket to the hub, so it hears nobody
//! else.
//!
//! Host → hub (body fields in order; `port` is a u32 device index then a u8 port
//! number):
//!
//! | type | name | body | engine output |
//! |---|---|---|---|
//! | 0x01 | ATTACH | name: str | — (answered by ATTACHED or ERROR) |
//! | 0x02 | DETACH | — | — (the hub forgets the host's QPs, groups and SA sends) |
//! | 0x10 | OPEN_QP | ep u32, port, pkey u16, pkey_index u16, recv_depth u32, send_depth u32 | `OpenQp` (answered by QP_OPENED) |
//! | 0x11 | CLOSE_QP | ep u32 | `CloseQp` |
//! | 0x12 | UD_SEND | ep u32, token u64, dlid u16, sl u8, src_path_bits u8, static_rate u8, dgid (16 bytes), flow_label u32, hop_limit u8, tclass u8, sgid_index u8, remote_qpn u32, remote_qkey u32, mad (256 bytes) | `UdSend` (answered by UD_SEND_DONE) |
//! | 0x13 | MCAST_ATTACH | ep u32, mgid (16 bytes), mlid u16 | `McastAttach` |
//! | 0x14 | MCAST_DETACH | ep u32, mgid (16 bytes), mlid u16 | `McastDetach` |
//! | 0x15 | SA_SEND | port, tid u64, dlid u16, sl u8, pkey_index u16, remote_qpn u32, remote_qkey u32, timeout_ms u32, retries u32, mad (256 bytes) | `SaSend` (answered by SA_RESPONSE or SA_SEND_FAILED) |
//! | 0x16 | CREATE_QP | ep u32 | — (answered by QP_OPENED; for emulated verbs, whose QPs are numbered before they have a port) |
//!
//! Hub → host:
//!
//! | type | name | body | engine input |
//! |---|---|---|---|
//! | 0x81 | ATTACHED | host index u32, sm_lid u16, sm_sl u8, name: str, device count u16, devices…, address count u16, addresses…, default route | `DeviceAdded`, `LocalIpAdded` |
//! | 0x82 | ERROR | code u16 ([`wire::error_code`]), message: str | — |
//! | 0x83 | BYE | reason: str | — (the attachment is over: hub shutdown, or the host attached again from another socket) |
//! | 0x90 | QP_OPENED | ep u32, ok u8 (0/1), qpn u32 | `QpOpened` |
//! | 0x91 | UD_RECEIVE | ep u32, slid u16, src_qp u32, dlid_path_bits u8, pkey_index u16, grh (40 bytes), mad (256 bytes) | `UdReceive` |
//! | 0x92 | UD_SEND_DONE | ep u32, token u64, ok u8 | `UdSendDone` |
//! | 0x93 | SA_RESPONSE | port, mad (the rest of the body) | `SaResponse` |
//! | 0x94 | SA_SEND_FAILED | port, tid u64, status i32 | `SaSendFailed` |
//!
//! In ATTACHED, a device is: id u32, node GUID u64, name: str, port count u8, then per
//! port: active u8, link layer IB u8, lid u16, lmc u8, sm_lid u16, sm_sl u8, rate u8
//! (IB rate enum), mtu u8 (IB MTU enum), subnet_timeout u8, GID count u8, the GIDs
//! (16 bytes each), pkey count u16, the pkeys (u16 each). An address is: family u8
//! (4 or 6), address (16 bytes; IPv4 in the first 4), prefix u8 (0xFF for none), port
//! GID (16 bytes), pkey u16. The default route is a family u8 (0 for none, 4 or 6) and an
//! address (16 bytes).
//!
//! # Semantics
//!
//! * ATTACH of a host that is already attached replaces the old attachment (a restarted
//!   daemon): the old socket gets BYE, the old QPs, groups and SA sends are forgotten,
//!   and the new attachment gets fresh QPNs and a fresh umad agent id, as a restarted
//!   host in the simulator does. An unknown host name is refused with ERROR.
//! * QPNs start at 0x48 (plus 0x100 per earlier attachment of the host); OPEN_QP on a
//!   port the host does not have fails (ok = 0). CREATE_QP reserves the endpoint's
//!   next QPN without a port (nothing reaches it yet); the endpoint's OPEN_QP then
//!   binds that QPN to the port, and CLOSE_QP or DETACH drops the reservation.
//! * UD_SEND_DONE is sent at once (always ok); each receiver gets UD_RECEIVE after the
//!   spec's latency between the two hosts.
//! * SA_SEND: the hub rewrites the TID's upper 32 bits with the host's agent id, passes
//!   the MAD to the SA after the latency to the SM's host if the port is up and the
//!   destination LID is the SM's, and answers after the SA's response time plus the
//!   latency back. Each try times out after `timeout_ms`; after `retries` retries the
//!   hub sends SA_SEND_FAILED with status 110 (ETIMEDOUT). A response that matches no
//!   outstanding send is dropped.
//! * The hub never blocks on a slow host: a message its socket does not take within
//!   2 ms waits in the host's outbox and is retried; a host that leaves 4096 messages
//!   unread, or whose socket is gone, is detached.

mod client;
mod host;
mod server;
pub mod wire;

pub use client::{ATTACH_TIMEOUT, HubClient};
pub use host::HubHost;
pub use server::{Hub, HubStats};
pub use wire::{HostSetup, WireError};

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong between a hub and a host.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// A socket could not be bound or could not reach its peer.
    #[error("{what} {}: {source}", path.display())]
    Socket {
        /// What was being done.
        what: &'static str,
        /// The socket path.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A send or receive failed.
    #[error("hub socket: {0}")]
    Io(#[from] io::Error),
    /// A datagram did not decode.
    #[error("malformed datagram: {0}")]
    Wire(#[from] WireError),
    /// The hub refused a request (ERROR).
    #[error("the hub refused: {0}")]
    Refused(String),
    /// The hub ended the attachment (BYE).
    #[error("the hub ended the attachment: {0}")]
    Closed(String),
    /// No answer, or no room in the hub's queue, within this time.
    #[error("the hub did not respond within {0:?}")]
    Timeout(Duration),
}
