//! Everything that crosses the engine boundary: [`Input`]s the driver feeds in and
//! [`Output`]s it drains.
//!
//! The driver (the daemon, the simulator, a test harness) owns every socket, queue pair
//! and clock. It turns what happens there into `Input`s and carries out each `Output`.

use crate::device::{DeviceDesc, DeviceId, PortAttrs, PortId};
use crate::log::LogEvent;
use acm_proto::Gid;
use acm_proto::client::FrameError;
use acm_proto::mad::{MAD_LEN, UmadStatus};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

/// A client connection, named by the driver. An id may be reused after
/// [`Input::ClientClosed`]: replies still owed to the closed connection are dropped, not
/// sent to the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// An endpoint: one (port, pkey) with its own UD queue pair. Assigned by the engine,
/// never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointId(pub u32);

/// A pending source-address lookup (see [`FabricOp::SourceQuery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LookupId(pub u64);

/// A pending neighbour-table lookup (see [`FabricOp::NeighQuery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NeighId(pub u64);

/// A UD send, to be acknowledged with [`Input::UdSendDone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SendToken(pub u64);

/// A 256-byte MAD, inline so that sending one allocates nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct Mad(pub [u8; MAD_LEN]);

impl fmt::Debug for Mad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = acm_proto::mad::MadHeaderPacket::new_unchecked(&self.0[..]);
        write!(
            f,
            "Mad(class {:#04x} method {:#04x} tid {:#x})",
            h.mgmt_class().0,
            h.method().0,
            h.tid()
        )
    }
}

/// The GRH part of an address vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GlobalRoute {
    /// Destination GID (an MGID for multicast).
    pub dgid: Gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub tclass: u8,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
}

/// Where a UD send goes: an `ibv_ah_attr` plus the remote QPN and Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressVector {
    /// Destination LID (an MLID for multicast).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits (low LID bits under LMC).
    pub src_path_bits: u8,
    /// Static rate enum (0 = port rate).
    pub static_rate: u8,
    /// Every ACM send carries a GRH.
    pub grh: GlobalRoute,
    /// Remote QPN (0xFFFFFF for multicast).
    pub remote_qpn: u32,
    /// Remote Q_Key (0x80010000).
    pub remote_qkey: u32,
}

/// Where an SA MAD goes (docs/protocol/sa.md §2): QP1 at the SM's LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaDest {
    /// The SM LID.
    pub dlid: u16,
    /// The SM SL.
    pub sl: u8,
    /// The pkey index (that of 0xFFFF, else the last 0x7FFF, else 0).
    pub pkey_index: u16,
    /// Always 1.
    pub remote_qpn: u32,
    /// Always 0x80010000.
    pub remote_qkey: u32,
}

/// Work-completion data of a received UD MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecvInfo {
    /// The sender's LID.
    pub slid: u16,
    /// The sender's QPN.
    pub src_qp: u32,
    /// The destination LID's path bits.
    pub dlid_path_bits: u8,
    /// The pkey index the packet arrived on.
    pub pkey_index: u16,
}

/// What happened to a port (`ibv_async_event` types, with fresh attributes where the
/// driver re-queries the port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortEvent {
    /// PORT_ACTIVE, with the port's current attributes.
    Active(PortAttrs),
    /// PORT_ERR: the port went down.
    Down,
    /// LID_CHANGE.
    LidChange(PortAttrs),
    /// SM_CHANGE (SM LID or SL changed).
    SmChange(PortAttrs),
    /// GID_CHANGE.
    GidChange(PortAttrs),
    /// PKEY_CHANGE.
    PkeyChange(PortAttrs),
    /// CLIENT_REREGISTER: the SM lost its multicast state; rejoin.
    ClientReregister,
}

/// A local IP address on an IPoIB interface, as the host's netlink reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalIp {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length when the address came from a full walk (the display string is
    /// then `addr/prefix`), `None` for a runtime RTM_NEWADDR (displayed without one).
    pub prefix_len: Option<u8>,
    /// The interface's port GID (bytes 4..19 of its hardware address).
    pub gid: Gid,
    /// The interface's pkey as sysfs shows it.
    pub pkey: u16,
}

/// One thing that happened, fed to [`crate::Engine::handle`].
#[derive(Debug)]
pub enum Input<'a> {
    /// Only time passed: fire due timers. Spurious ticks do nothing.
    Tick,
    /// A device was discovered. Its active ports come up at once.
    DeviceAdded(DeviceDesc),
    /// A device is gone (IBV_EVENT_DEVICE_FATAL, or removal): its ports go down.
    DeviceRemoved(DeviceId),
    /// A port event.
    Port {
        /// Which port.
        port: PortId,
        /// What happened.
        event: PortEvent,
    },
    /// A local IP address appeared (start-up walk or RTM_NEWADDR).
    LocalIpAdded(LocalIp),
    /// A local IP address went away (RTM_DELADDR).
    LocalIpRemoved(IpAddr),
    /// The answer to [`FabricOp::NeighQuery`]: what the host's IPoIB neighbour table
    /// holds for the address now.
    NeighAnswer {
        /// The lookup.
        id: NeighId,
        /// The table's entry.
        result: NeighResult,
    },
    /// A whole client message: the 16-byte header and the body its length announces.
    ClientRequest {
        /// The connection.
        conn: ConnId,
        /// The message.
        bytes: &'a [u8],
    },
    /// The client hung up; replies still pending for it are dropped. Every connection
    /// that sent a RESOLVE must be closed with this, or the engine keeps its few bytes of
    /// book-keeping.
    ClientClosed(ConnId),
    /// The answer to [`FabricOp::SourceQuery`]: the source the host's routing picks, or the
    /// errno the lookup failed with.
    SourceAnswer {
        /// The lookup.
        id: LookupId,
        /// The chosen source, or an errno.
        result: Result<IpAddr, u8>,
    },
    /// The QP requested by [`FabricOp::OpenQp`] exists (or could not be created).
    QpOpened {
        /// The endpoint.
        ep: EndpointId,
        /// Its QPN, or why not.
        result: Result<u32, ()>,
    },
    /// A MAD arrived on an endpoint's UD QP.
    UdReceive {
        /// The endpoint whose QP received it.
        ep: EndpointId,
        /// Work-completion data.
        wc: RecvInfo,
        /// The 40-byte GRH, if the completion had one.
        grh: Option<&'a [u8]>,
        /// The MAD.
        mad: &'a [u8],
    },
    /// A UD send completed (successfully or not).
    UdSendDone {
        /// The endpoint.
        ep: EndpointId,
        /// The send.
        token: SendToken,
        /// Whether the completion was a success.
        ok: bool,
    },
    /// An SA response arrived through umad, or an SA Report (an SM event,
    /// docs/protocol/sa.md §9) the agent receives unasked.
    SaResponse {
        /// The port whose umad agent received it.
        port: PortId,
        /// The MAD (any length ≥ 56; RMPP reassembled).
        mad: &'a [u8],
    },
    /// umad gave a sent SA MAD back with a non-zero status (the kernel's timeout after
    /// its retries, or a send error).
    SaSendFailed {
        /// The port.
        port: PortId,
        /// The TID of the MAD that failed (only the low 32 bits are compared).
        tid: u64,
        /// umad's status.
        status: UmadStatus,
    },
    /// A message from the kernel's RDMA_NL_LS multicast group.
    Netlink(&'a [u8]),
    /// The SET_TIMEOUT of [`ClientOutput::KernelTimeout`] reached the kernel (its send
    /// succeeded): from now on the kernel waits `wait_ms` for each path answer, and the
    /// engine times its error replies by that wait instead of the kernel's default
    /// (docs/protocol/netlink-ls.md §8). Not fed when the send failed or was dropped.
    KernelTimeoutSent {
        /// The wait the kernel applies, as [`ClientOutput::KernelTimeout`] gave it.
        wait_ms: u32,
    },
    /// A provider has work that arrived outside the engine (a plugin answering from its
    /// own thread): every provider's [`crate::provider::Provider::wake`] runs, with a
    /// context, so it can hand that work to the core.
    ProviderWake,
    /// The configuration files were read again (the daemon's SIGHUP): options that can
    /// change at run time take their new values, the others keep theirs and are logged
    /// as needing a restart ([`crate::config::reload`]), and the address file's lines
    /// are added to and removed from the endpoints without touching the rest. The
    /// driver checks the files first: a file with a rejected line is not handed in.
    Reconfigure(&'a crate::config::Reconfig),
    /// `hits` cache hits on endpoint `ep` were answered outside the engine, from a
    /// published [`crate::CacheView`]: they count as the engine's own hits would
    /// (global and the endpoint's `Resolve` and `Route Cache` counters), so that
    /// PERF_QUERY and the metrics stay exact. Nothing else happens.
    CacheHits {
        /// The endpoint the view answered for ([`crate::ViewAnswer::Hit`]).
        ep: EndpointId,
        /// How many hits.
        hits: u64,
    },
}

/// Bytes of one client reply or one owned MAD: inline up to `N` bytes, so that the
/// common sizes allocate nothing, on the heap beyond.
#[derive(Clone, PartialEq, Eq)]
pub struct InlineBytes<const N: usize> {
    inline: [u8; N],
    len: u16,
    heap: Option<Box<[u8]>>,
}

impl<const N: usize> InlineBytes<N> {
    /// Copies `bytes`.
    #[must_use]
    pub fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= N {
            let mut inline = [0u8; N];
            inline[..bytes.len()].copy_from_slice(bytes);
            Self {
                inline,
                len: bytes.len() as u16,
                heap: None,
            }
        } else {
            Self {
                inline: [0; N],
                len: 0,
                heap: Some(bytes.into()),
            }
        }
    }

    /// The first `len` bytes of `inline` (all of them when `len` is larger), moved in
    /// without a copy: for replies built in place.
    #[must_use]
    #[inline]
    pub fn from_array(inline: [u8; N], len: usize) -> Self {
        Self {
            inline,
            len: len.min(N) as u16,
            heap: None,
        }
    }

    /// Takes ownership of `bytes` (copied inline when they fit).
    #[must_use]
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        if bytes.len() <= N {
            Self::new(&bytes)
        } else {
            Self {
                inline: [0; N],
                len: 0,
                heap: Some(bytes.into_boxed_slice()),
            }
        }
    }

    /// The bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.heap {
            Some(h) => h,
            None => &self.inline[..usize::from(self.len)],
        }
    }
}

impl<const N: usize> fmt::Debug for InlineBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.as_bytes().len())
    }
}

/// The reply bytes of one client request. Inline up to 160 bytes (every RESOLVE reply:
/// a path and the chosen source; every PERF_QUERY reply, 72), on the heap for large
/// EP_QUERY replies.
pub type Reply = InlineBytes<160>;

/// A received MAD, owned: inline up to 256 bytes (every UD MAD and every SA answer but
/// an RMPP-reassembled one).
pub type MadBytes = InlineBytes<256>;

/// One thing the driver must do, drained from [`crate::Engine::poll_output`]: for the
/// host (a client, the kernel, the log) or for the fabric. [`crate::driver`] carries
/// out the fabric's share through a [`crate::driver::Fabric`] and hands back the host's
/// as it is (no re-wrapping: the hand-off is on every request's path).
#[derive(Debug)]
#[must_use]
// MADs and replies are inline so that producing an output allocates nothing.
#[allow(clippy::large_enum_variant)]
pub enum Output {
    /// For a client connection, the kernel or the log.
    Host(HostOutput),
    /// For the fabric or the host's routing.
    Fabric(FabricOp),
}

/// What the driver hands back: everything the engine says that is not for the fabric.
#[derive(Debug)]
#[must_use]
pub enum HostOutput {
    /// For a client connection or the kernel.
    Client(ClientOutput),
    /// A log line.
    Log(LogEvent),
}

/// What goes back to the ones who asked: client connections and the kernel.
#[derive(Debug)]
#[must_use]
pub enum ClientOutput {
    /// Write these bytes to the client, in one write.
    Reply {
        /// The connection.
        conn: ConnId,
        /// The reply.
        reply: Reply,
    },
    /// Close the client connection without replying.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: FrameError,
    },
    /// Send this to the kernel's RDMA_NL_LS group.
    Netlink(Vec<u8>),
    /// Send this SET_TIMEOUT to the kernel, as [`ClientOutput::Netlink`], and when the
    /// send succeeds, say so with [`Input::KernelTimeoutSent`]: until then the engine
    /// assumes the kernel's default wait, since a timeout the kernel never received
    /// does not bound its wait.
    KernelTimeout {
        /// The SET_TIMEOUT message.
        message: Vec<u8>,
        /// The wait the kernel will apply: the option's value after the kernel's own
        /// clamping.
        wait_ms: u32,
    },
}

/// What the fabric (and the host's routing) must do. Every backend carries these out
/// through [`crate::driver::Fabric`]; none matches on them itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[allow(clippy::large_enum_variant)]
pub enum FabricOp {
    /// Create an endpoint's UD QP.
    OpenQp(OpenQp),
    /// Destroy the endpoint's QP (the endpoint is gone).
    CloseQp(EndpointId),
    /// Post a UD send.
    UdSend(UdSend),
    /// Attach the endpoint's QP to a multicast group.
    McastAttach(McastGroup),
    /// Detach the endpoint's QP from a multicast group.
    McastDetach(McastGroup),
    /// Send an SA MAD through the port's umad agent.
    SaSend(SaSend),
    /// Ask the host's routing for a source address.
    SourceQuery(SourceQuery),
    /// Ask the host's IPoIB neighbour table for an address's hardware address,
    /// starting resolution when it has none (`addr_prot neigh`).
    NeighQuery(NeighQuery),
}

/// Create the endpoint's UD QP (Q_Key 0x80010000 on `pkey_index`) and post
/// `recv_depth` receives; answer with [`Input::QpOpened`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenQp {
    /// The endpoint.
    pub ep: EndpointId,
    /// Its port.
    pub port: PortId,
    /// Its pkey.
    pub pkey: u16,
    /// The pkey's index in the port table.
    pub pkey_index: u16,
    /// Receive buffers to post.
    pub recv_depth: u32,
    /// Send queue depth needed (resolve_depth + send_depth).
    pub send_depth: u32,
}

/// Post a 256-byte UD send (with a GRH) on the endpoint's QP; acknowledge with
/// [`Input::UdSendDone`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdSend {
    /// The endpoint.
    pub ep: EndpointId,
    /// Echo this in the completion.
    pub token: SendToken,
    /// Where to.
    pub av: AddressVector,
    /// The MAD.
    pub mad: Mad,
}

/// A multicast group to attach an endpoint's QP to, or detach it from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McastGroup {
    /// The endpoint.
    pub ep: EndpointId,
    /// The group.
    pub mgid: Gid,
    /// Its LID.
    pub mlid: u16,
}

/// Send an SA MAD through the port's umad agent with these kernel timeout and retry
/// values. The answer is [`Input::SaResponse`] or [`Input::SaSendFailed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaSend {
    /// The port.
    pub port: PortId,
    /// Its TID (the kernel replaces the upper 32 bits).
    pub tid: u64,
    /// Where to.
    pub dest: SaDest,
    /// umad timeout per try, in ms.
    pub timeout_ms: u32,
    /// umad retries.
    pub retries: u32,
    /// The MAD.
    pub mad: Mad,
}

/// Ask the host's routing which local address it would use to reach `dest` (the
/// reference connects a UDP socket and calls getsockname). Answer with
/// [`Input::SourceAnswer`]; until then the client request waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceQuery {
    /// The lookup.
    pub id: LookupId,
    /// The destination.
    pub dest: IpAddr,
}

/// Look `dest` up in the IPoIB neighbour table of the interface on `gid` (the local
/// port GID its hardware address carries) and partition `pkey`
/// (docs/protocol/ipoib-neigh.md §2). With no usable entry, start the kernel's
/// resolution (ARP, neighbour discovery) and answer [`NeighResult::Incomplete`]: the
/// engine asks again, within its own bound, until the entry is usable or has failed.
/// Answer with [`Input::NeighAnswer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighQuery {
    /// The lookup.
    pub id: NeighId,
    /// The port whose endpoint asks.
    pub port: PortId,
    /// The port's GID (the interface's hardware address carries it).
    pub gid: Gid,
    /// The endpoint's partition (the membership bit is not compared).
    pub pkey: u16,
    /// The address to resolve.
    pub dest: IpAddr,
}

/// What the neighbour table says about an address
/// (docs/protocol/ipoib-neigh.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighResult {
    /// A usable entry: the peer's IPoIB hardware address, decoded.
    Found {
        /// The peer interface's UD QPN.
        qpn: u32,
        /// The peer port's GID.
        gid: Gid,
    },
    /// No usable entry yet: resolution was started or is under way. Ask again later.
    Incomplete,
    /// The address cannot be resolved there: the kernel's resolution failed, no IPoIB
    /// interface matches the query, or the entry is not an IPoIB one.
    Unreachable,
}

/// What the fabric (or the host's routing) reports back, owned: the fabric's half of
/// [`Input`], for drivers that hold it before feeding it (a queue, a socket, a
/// scheduler). [`FabricEvent::as_input`] lends it to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricEvent {
    /// [`Input::QpOpened`].
    QpOpened {
        /// The endpoint.
        ep: EndpointId,
        /// Its QPN, or why not.
        result: Result<u32, ()>,
    },
    /// [`Input::UdReceive`].
    UdReceive {
        /// The endpoint.
        ep: EndpointId,
        /// Work-completion data.
        wc: RecvInfo,
        /// The GRH, if the completion had one.
        grh: Option<[u8; 40]>,
        /// The MAD.
        mad: MadBytes,
    },
    /// [`Input::UdSendDone`].
    UdSendDone {
        /// The endpoint.
        ep: EndpointId,
        /// The send.
        token: SendToken,
        /// Success.
        ok: bool,
    },
    /// [`Input::SaResponse`].
    SaResponse {
        /// The port.
        port: PortId,
        /// The MAD.
        mad: MadBytes,
    },
    /// [`Input::SaSendFailed`].
    SaSendFailed {
        /// The port.
        port: PortId,
        /// The TID.
        tid: u64,
        /// umad's status.
        status: UmadStatus,
    },
    /// [`Input::SourceAnswer`].
    SourceAnswer {
        /// The lookup.
        id: LookupId,
        /// The chosen source, or an errno.
        result: Result<IpAddr, u8>,
    },
    /// [`Input::NeighAnswer`].
    NeighAnswer {
        /// The lookup.
        id: NeighId,
        /// The table's entry.
        result: NeighResult,
    },
}

impl FabricEvent {
    /// The engine input, borrowing the MAD and GRH.
    #[must_use]
    pub fn as_input(&self) -> Input<'_> {
        match self {
            Self::QpOpened { ep, result } => Input::QpOpened {
                ep: *ep,
                result: *result,
            },
            Self::UdReceive { ep, wc, grh, mad } => Input::UdReceive {
                ep: *ep,
                wc: *wc,
                grh: grh.as_ref().map(|g| &g[..]),
                mad: mad.as_bytes(),
            },
            Self::UdSendDone { ep, token, ok } => Input::UdSendDone {
                ep: *ep,
                token: *token,
                ok: *ok,
            },
            Self::SaResponse { port, mad } => Input::SaResponse {
                port: *port,
                mad: mad.as_bytes(),
            },
            Self::SaSendFailed { port, tid, status } => Input::SaSendFailed {
                port: *port,
                tid: *tid,
                status: *status,
            },
            Self::SourceAnswer { id, result } => Input::SourceAnswer {
                id: *id,
                result: *result,
            },
            Self::NeighAnswer { id, result } => Input::NeighAnswer {
                id: *id,
                result: *result,
            },
        }
    }
}
