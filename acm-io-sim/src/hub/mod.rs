//! The fabric hub: one simulated fabric shared by separate processes.
//!
//! A [`Hub`] owns a [`FabricSpec`](crate::FabricSpec)'s fabric — the topology, the SA,
//! the QPs and multicast attachments of every host — and listens on a unix datagram
//! socket. Each daemon (or test) binds its own socket, attaches as one host of
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
//! time are the spec's, on the wall clock; no link faults are injected. The topology
//! changes only when asked ([`Hub::apply`], or a control message from any socket,
//! [`control::change`]): ports down and up, LID, pkey and GID changes, an SM failover,
//! client reregistration, HCAs removed, dead and back, with the simulator's rules.
//! Each attached host concerned gets a notice with the port's new attributes, which
//! an emulated HCA turns into async events; an engine attached through
//! [`HubHost`] ignores them.
//!
//! # Source-address lookups
//!
//! [`HubClient`] answers a source lookup locally from the addresses and default route
//! in the host's [`HostSetup`], with the simulator's rule
//! ([`fabric::route_with_default`](crate::fabric::route_with_default): the host's own
//! address, else its first address on the destination's subnet, else its default route
//! of the destination's family, else ENETUNREACH), and the driver feeds the answer at
//! once, without a round trip. The protocol carries it all the same (SOURCE_QUERY,
//! answered by the hub from the spec with the same rule), since it carries every one of
//! the engine's fabric operations.
//!
//! # Protocol
//!
//! One message per datagram. The engine's fabric operations ([`acm_engine::FabricOp`])
//! and fabric events ([`acm_engine::FabricEvent`]) travel as they are, one message type
//! per variant, through one codec ([`wire::HostMsg::Op`], [`wire::HubMsg::Event`]); the
//! hub's own messages (attachment, control, topology notices) sit beside them. Every
//! datagram starts with an 8-byte header; every field
//! is little-endian and at a fixed place, strings are a u16 length and UTF-8 bytes,
//! GIDs and MADs are raw bytes in wire (network) order as the engine holds them. A body
//! whose length is not the header's, or with bytes left over, is malformed.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | message type (table below) |
//! | 1 | 1 | protocol version, 2 ([`wire::VERSION`]) |
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
//! | 0x17 | NEIGH_QUERY | id u64, port, gid (16 bytes), pkey u16, address (as in ATTACHED) | `NeighQuery` (answered by NEIGH_ANSWER, from the spec at once: `fabric::ipoib_neighbour`) |
//! | 0x18 | SOURCE_QUERY | id u64, address (as in ATTACHED) | `SourceQuery` (answered by SOURCE_ANSWER, from the spec at once) |
//!
//! Control messages, from any socket (attached or not), answered by DONE or by ERROR
//! with code 5 ([`wire::error_code::BAD_CHANGE`]); a port name is a host name (str), an
//! HCA index u32 and a port number u8 ([`wire::Control`]):
//!
//! | type | name | body |
//! |---|---|---|
//! | 0x20 | PORT_DOWN | port name |
//! | 0x21 | PORT_UP | port name |
//! | 0x22 | SET_LID | port name, lid u16, lmc u8 |
//! | 0x23 | SET_PKEYS | port name, count u16, the pkeys (u16 each) |
//! | 0x24 | SET_GID | port name, GID 0 (16 bytes) |
//! | 0x25 | SM_MOVE | the new SM's lid u16 |
//! | 0x26 | CLIENT_REREGISTER | port name |
//! | 0x27 | DEVICE_REMOVE | host: str, hca u32, fatal u8 (1: dead but still listed) |
//! | 0x28 | DEVICE_ADD | host: str, hca u32 |
//! | 0x29 | QP_ERROR | port name (every QP of the host on the port breaks) |
//!
//! Hub → host:
//!
//! | type | name | body | engine input |
//! |---|---|---|---|
//! | 0x81 | ATTACHED | host index u32, sm_lid u16, sm_sl u8, name: str, device count u16, devices…, address count u16, addresses…, default route | `DeviceAdded`, `LocalIpAdded` |
//! | 0x82 | ERROR | code u16 ([`wire::error_code`]), message: str | — |
//! | 0x83 | BYE | reason: str | — (the attachment is over: hub shutdown, or the host attached again from another socket) |
//! | 0x90 | QP_OPENED | ep u32, ok u8 (0/1), qpn u32 | `QpOpened` |
//! | 0x91 | UD_RECEIVE | ep u32, slid u16, src_qp u32, dlid_path_bits u8, pkey_index u16, has_grh u8 (0/1), grh (40 bytes, zero without one), mad (the rest of the body; 256 bytes from the hub) | `UdReceive` |
//! | 0x92 | UD_SEND_DONE | ep u32, token u64, ok u8 | `UdSendDone` |
//! | 0x93 | SA_RESPONSE | port, mad (the rest of the body) | `SaResponse` |
//! | 0x94 | SA_SEND_FAILED | port, tid u64, status i32 | `SaSendFailed` |
//! | 0x84 | DONE | — | — (a control message was carried out) |
//! | 0x95 | PORT_CHANGED | port, event u8 (`ibv_event_type`: 9 PORT_ACTIVE, 10 PORT_ERR, 11 LID_CHANGE, 12 PKEY_CHANGE, 13 SM_CHANGE, 17 CLIENT_REREGISTER, 18 GID_CHANGE), the port's attributes now (as in ATTACHED) | — |
//! | 0x96 | DEVICE_GONE | device u32, fatal u8 | — (also sent after ATTACHED for each HCA gone at the time) |
//! | 0x97 | DEVICE_BACK | device (as in ATTACHED) | — |
//! | 0x98 | QP_FATAL | ep u32 | — (the QP goes to the error state) |
//! | 0x99 | NEIGH_ANSWER | id u64, result u8 (0 found, 1 incomplete, 2 unreachable), qpn u32, gid (16 bytes) | `NeighAnswer` |
//! | 0x9A | SOURCE_ANSWER | id u64, source address (as the default route in ATTACHED: family 0 when the lookup failed), errno u8 (0 when it did not) | `SourceAnswer` |
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
//!
mod attach;
pub mod control;
mod host;
mod server;
pub mod wire;

pub use attach::{ATTACH_TIMEOUT, HubClient, Incoming};
pub use host::HubHost;
pub use server::{ChangeError, Hub, HubStats};
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
