//! The C objects the core hands a provider (`struct acm_device`, `acm_port`,
//! `acm_endpoint`, `acm_address`), owned on the Rust side at stable addresses, and the
//! opaque contexts a provider gives back for them.
//!
//! A child keeps its parent alive (`Rc`), so the pointers inside a structure never
//! dangle while a provider may follow them. Ports and endpoints are registered for the
//! core's exported functions while they live.

use super::abi::{AcmAddress, AcmDevice, AcmEndpoint, AcmEpInfo, AcmPort};
use super::registry::registry;
use std::ffi::{CString, c_void};
use std::ptr::NonNull;
use std::rc::Rc;

/// A device's verbs context, for `acm_device.verbs`: kept open while a provider may use
/// it.
#[derive(Clone)]
pub struct VerbsHandle {
    ptr: NonNull<c_void>,
    _keep: Rc<dyn std::any::Any>,
}

impl std::fmt::Debug for VerbsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VerbsHandle")
    }
}

#[cfg(feature = "verbs")]
impl crate::verbs::VerbsDevice {
    /// The device's verbs context for a C provider (`acm_device.verbs`); it stays open
    /// as long as the handle lives, even if the device itself is closed first.
    #[must_use]
    pub fn provider_handle(&self) -> VerbsHandle {
        VerbsHandle {
            ptr: self.inner.ctx.cast(),
            _keep: self.inner.clone(),
        }
    }
}

/// `struct acm_device`.
#[derive(Debug)]
pub struct Device {
    raw: Box<AcmDevice>,
    _verbs: Option<VerbsHandle>,
}

impl Device {
    /// A device with node GUID `guid` (host order) and, on hardware, its verbs context.
    #[must_use]
    pub fn new(guid: u64, verbs: Option<VerbsHandle>) -> Rc<Self> {
        let raw = Box::new(AcmDevice {
            verbs: verbs
                .as_ref()
                .map_or(std::ptr::null_mut(), |v| v.ptr.as_ptr()),
            dev_guid: guid.to_be(),
        });
        Rc::new(Self { raw, _verbs: verbs })
    }

    pub(crate) fn as_ptr(&self) -> *const AcmDevice {
        &raw const *self.raw
    }
}

/// `struct acm_port`, with the GID table `acm_get_gid` and `acm_gid_index` read.
#[derive(Debug)]
pub struct Port {
    raw: Box<AcmPort>,
    _dev: Rc<Device>,
}

impl Port {
    /// Port `num` of `dev`, with its GID table.
    #[must_use]
    pub fn new(dev: &Rc<Device>, num: u8, gids: Vec<[u8; 16]>) -> Rc<Self> {
        let raw = Box::new(AcmPort {
            dev: dev.as_ptr(),
            port_num: num,
        });
        let port = Rc::new(Self {
            raw,
            _dev: Rc::clone(dev),
        });
        registry().ports.insert(port.key(), gids);
        port
    }

    /// The port's GID table changed.
    pub fn set_gids(&self, gids: Vec<[u8; 16]>) {
        registry().ports.insert(self.key(), gids);
    }

    fn key(&self) -> usize {
        self.as_ptr() as usize
    }

    pub(crate) fn as_ptr(&self) -> *const AcmPort {
        &raw const *self.raw
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        registry().ports.remove(&self.key());
    }
}

/// `struct acm_endpoint`, registered under the daemon's key for it (SA MADs a provider
/// allocates on it go out on its port).
#[derive(Debug)]
pub struct Endpoint {
    raw: Box<AcmEndpoint>,
    _port: Rc<Port>,
}

impl Endpoint {
    /// The endpoint (`port`, `pkey`), known to the core's services as `key`.
    #[must_use]
    pub fn new(port: &Rc<Port>, pkey: u16, key: u64) -> Rc<Self> {
        let raw = Box::new(AcmEndpoint {
            port: port.as_ptr(),
            pkey,
        });
        let ep = Rc::new(Self {
            raw,
            _port: Rc::clone(port),
        });
        registry().endpoints.insert(ep.key(), key);
        ep
    }

    fn key(&self) -> usize {
        self.as_ptr() as usize
    }

    pub(crate) fn as_ptr(&self) -> *const AcmEndpoint {
        &raw const *self.raw
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        registry().endpoints.remove(&self.key());
    }
}

/// `struct acm_address`: a local address of an endpoint.
#[derive(Debug)]
pub struct LocalAddress {
    raw: Box<AcmAddress>,
    _id: CString,
    _ep: Rc<Endpoint>,
}

impl LocalAddress {
    /// Address `info` of type `addr_type` on `ep`, printed as `id` (NUL bytes dropped).
    #[must_use]
    pub fn new(ep: &Rc<Endpoint>, addr_type: u16, info: [u8; 64], id: &str) -> Self {
        let id = CString::new(id.replace('\0', "")).unwrap_or_default();
        let raw = Box::new(AcmAddress {
            endpoint: ep.as_ptr(),
            info: AcmEpInfo(info),
            id_string: id.as_ptr().cast_mut(),
            addr_type,
        });
        Self {
            raw,
            _id: id,
            _ep: Rc::clone(ep),
        }
    }

    pub(crate) fn as_ptr(&self) -> *const AcmAddress {
        &raw const *self.raw
    }
}

/// The context a provider returned for one of its objects, given back on every later
/// call about that object. Opaque: only the provider reads it.
#[derive(Debug)]
pub struct Context(pub(crate) *mut c_void);
