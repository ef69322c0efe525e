//! What the core's exported functions may touch from a provider's threads: the services
//! the daemon installs once at start, the GID tables of the ports handed to providers,
//! the endpoints they may allocate SA MADs on, and the SA MADs they hold.
//!
//! Everything here is behind a mutex or set once, because libibacmp and its kind call the
//! core from their own completion and retry threads. Objects are keyed by the address of
//! the C structure the provider was given, so a pointer it passes back is looked up, never
//! trusted.

use super::abi::{AcmSaMad, SaHandlerFn};
use acm_proto::mad::{MAD_LEN, UmadStatus};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};

/// An SA MAD a provider asked the core to send.
#[derive(Debug, Clone)]
pub struct SaRequest {
    /// Which MAD, for [`deliver_sa`].
    pub token: SaToken,
    /// The key the endpoint was registered with (the daemon's endpoint id).
    pub endpoint: u64,
    /// The 256-byte MAD as the provider filled it.
    pub mad: [u8; MAD_LEN],
}

/// An SA MAD in a provider's hands, as the core's services see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SaToken(pub(crate) usize);

/// The daemon's side of the core API, called from any thread.
pub trait CoreServices: Send + Sync {
    /// The `log_level` option: messages above it are not formatted.
    fn log_level(&self) -> i32;
    /// A log line a provider wrote (`acm_write`), already formatted.
    fn write_log(&self, level: i32, text: &str);
    /// `acm_resolve_response`: the provider's answer to request `id`.
    fn resolve_response(&self, id: u64, msg: &[u8]) -> i32;
    /// `acm_query_response`: the provider's answer to QUERY_SA `id`.
    fn query_response(&self, id: u64, msg: &[u8]) -> i32;
    /// `acm_send_sa_mad`: returns 0 when taken.
    fn send_sa(&self, request: SaRequest) -> i32;
    /// `acm_increment_counter` with a valid index (0..7).
    fn increment_counter(&self, index: usize);
    /// `acm_get_opts_file`: the options file's path.
    fn opts_file(&self) -> &CStr;
}

static SERVICES: OnceLock<Arc<dyn CoreServices>> = OnceLock::new();

/// The services were installed already (once per process).
#[derive(Debug, thiserror::Error)]
#[error("the core services for providers are installed already")]
pub struct AlreadyInstalled;

/// Stores the daemon's services for every provider of this process (once); the public
/// entry point is `core_api::install_core`, which also keeps the exported functions linked.
pub(crate) fn set_services(services: Arc<dyn CoreServices>) -> Result<(), AlreadyInstalled> {
    SERVICES.set(services).map_err(|_| AlreadyInstalled)
}

pub(crate) fn services() -> Option<&'static Arc<dyn CoreServices>> {
    SERVICES.get()
}

/// An SA MAD allocated for a provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MadEntry {
    pub(crate) endpoint: u64,
    pub(crate) handler: Option<SaHandlerFn>,
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// GID tables by `struct acm_port` address.
    pub(crate) ports: HashMap<usize, Vec<[u8; 16]>>,
    /// Endpoint keys by `struct acm_endpoint` address.
    pub(crate) endpoints: HashMap<usize, u64>,
    /// Live SA MADs by `struct acm_sa_mad` address.
    pub(crate) mads: HashMap<usize, MadEntry>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// The registry, even if a thread panicked while holding it (its maps stay consistent:
/// every update is a single insert or remove).
pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands the answer to an SA MAD back to its provider: the response (or the error umad
/// gave) is copied over the MAD and the provider's handler runs, on the calling thread.
/// Returns false when the provider freed the MAD meanwhile, or never had it.
pub fn deliver_sa(token: SaToken, result: Result<&[u8], UmadStatus>) -> bool {
    let entry = registry().mads.get(&token.0).copied();
    let Some(entry) = entry else {
        return false;
    };
    let mad = token.0 as *mut AcmSaMad;
    // SAFETY: the address is in the registry, so it is a live allocation of
    // `acm_alloc_sa_mad` that `acm_free_sa_mad` has not released; the provider does not
    // touch a MAD while it is being sent (the interface's rule), so nothing else
    // writes it now.
    unsafe {
        match result {
            Ok(resp) => {
                let n = resp.len().min(MAD_LEN);
                (&mut (*mad).sa_mad.0)[..n].copy_from_slice(&resp[..n]);
                (*mad).umad.status = 0;
                (*mad).umad.length = (std::mem::size_of::<super::abi::IbUserMad>() + n) as u32;
            }
            Err(status) => (*mad).umad.status = status.0.unsigned_abs(),
        }
    }
    if let Some(handler) = entry.handler {
        // SAFETY: the handler was given with this MAD by the provider, for exactly this
        // call; the registry lock is not held, so it may call the core again.
        unsafe { handler(mad) };
    }
    true
}
