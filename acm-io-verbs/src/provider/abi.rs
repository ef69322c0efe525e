//! The structures of `acm_prov.h` (ibacm_prov(7)) as Rust sees them, `#[repr(C)]` so that
//! a provider built against rdma-core's header reads them where it expects.
//!
//! The layouts are checked against the real header by the `layout` test (a C probe built
//! from `acm_prov.h` reports every size and offset). Byte-order-sensitive fields are kept
//! as raw bytes or as the big-endian integers the header declares; nothing here
//! interprets them.

use acm_proto::mad::MAD_LEN;
use std::ffi::{c_char, c_int, c_void};

/// `ACM_PROV_VERSION`: the only provider interface version there is.
pub const ACM_PROV_VERSION: u32 = 1;

/// `ACM_MSG_HDR_LENGTH + ACM_MSG_DATA_LENGTH`: a whole client message.
pub const ACM_MSG_LEN: usize = acm_proto::client::MAX_REQUEST_LEN;

/// `IBV_EVENT_CLIENT_REREGISTER`, the one port event the reference forwards to a
/// provider's `handle_event`.
pub const IBV_EVENT_CLIENT_REREGISTER: c_int = 17;

/// `struct acm_device`: the device a provider opens, with its verbs context.
#[repr(C)]
#[derive(Debug)]
pub struct AcmDevice {
    /// `struct ibv_context *`; null on the simulated fabrics, which have no verbs.
    pub verbs: *mut c_void,
    /// The node GUID, big-endian (`__be64`).
    pub dev_guid: u64,
}

/// `struct acm_port`.
#[repr(C)]
#[derive(Debug)]
pub struct AcmPort {
    /// The device the port belongs to.
    pub dev: *const AcmDevice,
    /// The port number, from 1.
    pub port_num: u8,
}

/// `struct acm_endpoint`: one (port, pkey).
#[repr(C)]
#[derive(Debug)]
pub struct AcmEndpoint {
    /// The port.
    pub port: *const AcmPort,
    /// The partition key, host order.
    pub pkey: u16,
}

/// `union acm_ep_info`: 64 bytes, aligned as the path record it may hold.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct AcmEpInfo(pub [u8; 64]);

/// `struct acm_address`: a local address of an endpoint.
#[repr(C)]
#[derive(Debug)]
pub struct AcmAddress {
    /// The endpoint.
    pub endpoint: *const AcmEndpoint,
    /// The address bytes, as in a client entry.
    pub info: AcmEpInfo,
    /// A printable form (the reference's `id_string`).
    pub id_string: *mut c_char,
    /// The `ACM_EP_INFO_*` / `ACM_ADDRESS_*` type.
    pub addr_type: u16,
}

/// `struct acm_msg`: a client message as the core hands it to a provider and takes it
/// back; header then 576 bytes of entries.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct AcmMsg(pub [u8; ACM_MSG_LEN]);

/// `open_device(device, &dev_context)`.
pub type OpenDeviceFn = unsafe extern "C" fn(*const AcmDevice, *mut *mut c_void) -> c_int;
/// `close_*(context)`.
pub type CloseFn = unsafe extern "C" fn(*mut c_void);
/// The shape of the calls that open an object under its parent's context:
/// `(object, parent_context, &object_context)`.
pub type OpenChildFn<T> = unsafe extern "C" fn(*const T, *mut c_void, *mut *mut c_void) -> c_int;
/// `open_port(port, dev_context, &port_context)`.
pub type OpenPortFn = OpenChildFn<AcmPort>;
/// `open_endpoint(endpoint, port_context, &ep_context)`.
pub type OpenEndpointFn = OpenChildFn<AcmEndpoint>;
/// `add_address(addr, ep_context, &addr_context)`.
pub type AddAddressFn = OpenChildFn<AcmAddress>;
/// `resolve`/`query(addr_context, msg, id)`.
pub type RequestFn = unsafe extern "C" fn(*mut c_void, *mut AcmMsg, u64) -> c_int;
/// `handle_event(port_context, enum ibv_event_type)`.
pub type HandleEventFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
/// `query_perf(ep_context, values, &count)`.
pub type QueryPerfFn = unsafe extern "C" fn(*mut c_void, *mut u64, *mut u8);

/// `struct acm_provider`: what `provider_query` hands the core.
#[repr(C)]
#[derive(Debug)]
pub struct AcmProvider {
    /// `sizeof(struct acm_provider)` as the provider was built (120 on LP64).
    pub size: usize,
    /// The interface version; must be [`ACM_PROV_VERSION`].
    pub version: u32,
    /// The provider's name, which `provider` lines select.
    pub name: *const c_char,
    /// See [`OpenDeviceFn`].
    pub open_device: Option<OpenDeviceFn>,
    /// Undoes `open_device`.
    pub close_device: Option<CloseFn>,
    /// See [`OpenPortFn`].
    pub open_port: Option<OpenPortFn>,
    /// Undoes `open_port`.
    pub close_port: Option<CloseFn>,
    /// See [`OpenEndpointFn`].
    pub open_endpoint: Option<OpenEndpointFn>,
    /// Undoes `open_endpoint`.
    pub close_endpoint: Option<CloseFn>,
    /// See [`AddAddressFn`].
    pub add_address: Option<AddAddressFn>,
    /// Undoes `add_address`.
    pub remove_address: Option<CloseFn>,
    /// A RESOLVE for a local address.
    pub resolve: Option<RequestFn>,
    /// A QUERY_SA for a local address.
    pub query: Option<RequestFn>,
    /// A port event.
    pub handle_event: Option<HandleEventFn>,
    /// An endpoint's counters.
    pub query_perf: Option<QueryPerfFn>,
}

/// `int provider_query(struct acm_provider **info, uint32_t *version)`.
pub type ProviderQueryFn = unsafe extern "C" fn(*mut *const AcmProvider, *mut u32) -> c_int;

/// `struct ib_mad_addr` (libibumad): where a MAD goes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbMadAddr {
    /// Remote QPN, big-endian.
    pub qpn: u32,
    /// Remote Q_Key, big-endian.
    pub qkey: u32,
    /// Destination LID, big-endian.
    pub lid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub path_bits: u8,
    /// Whether a GRH follows.
    pub grh_present: u8,
    /// GID index of the GRH.
    pub gid_index: u8,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// GRH destination GID.
    pub gid: [u8; 16],
    /// GRH flow label, big-endian.
    pub flow_label: u32,
    /// The pkey index to send with.
    pub pkey_index: u16,
    /// Reserved.
    pub reserved: [u8; 6],
}

/// `struct ib_user_mad` without its flexible data: the 64-byte umad header.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbUserMad {
    /// The agent id the kernel gave.
    pub agent_id: u32,
    /// 0, or the error the kernel returned the MAD with (ETIMEDOUT after the retries).
    pub status: u32,
    /// The response timeout.
    pub timeout_ms: u32,
    /// The retries.
    pub retries: u32,
    /// The MAD's length.
    pub length: u32,
    /// Addressing.
    pub addr: IbMadAddr,
}

/// `struct umad_sa_packet`: a 256-byte SA MAD (header, RMPP, SM key, comp mask, data).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct UmadSaPacket(pub [u8; MAD_LEN]);

/// `struct acm_sa_mad`: an SA MAD a provider allocates from the core, fills, sends, and
/// gets back (response copied over) in its handler.
#[repr(C)]
#[derive(Debug)]
pub struct AcmSaMad {
    /// The provider's own pointer.
    pub context: *mut c_void,
    /// The umad header.
    pub umad: IbUserMad,
    /// The MAD.
    pub sa_mad: UmadSaPacket,
}

/// The handler `acm_alloc_sa_mad` is given.
pub type SaHandlerFn = unsafe extern "C" fn(*mut AcmSaMad);
