//! C provider plugins (`acm_prov.h`, ibacm_prov(7)): the structures, the loader, a safe
//! wrapper over a loaded provider's callbacks, and the core's functions exported to the
//! providers (docs/providers.md).
//!
//! The daemon's adapter (safe code) owns the objects of [`objects`], calls the
//! callbacks through [`ProviderLibrary`], and receives what providers call back through
//! the [`CoreServices`] it installs once with [`install_core`].

pub mod abi;
mod calls;
pub mod core_api;
mod error;
mod format;
mod library;
pub mod objects;
mod registry;

#[cfg(test)]
mod layout_tests;

pub use core_api::install_core;
pub use error::{CallError, LoadError};
pub use library::{ProviderLibrary, candidates, scan};
pub use objects::{Context, Device, Endpoint, LocalAddress, Port, VerbsHandle};
pub use registry::{AlreadyInstalled, CoreServices, SaRequest, SaToken, deliver_sa};
