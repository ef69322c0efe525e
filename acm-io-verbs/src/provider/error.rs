//! Why a provider library was not loaded, or why one of its callbacks failed: each names
//! the file (or the provider) and the reason, for the daemon's log.

use std::path::PathBuf;

/// A file of `provider_lib_path` that is not used as a provider.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The directory could not be listed.
    #[error("{}: cannot read the provider directory: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `lstat` says it is not a regular file (a symbolic link, a directory, ...): the
    /// reference skips those too.
    #[error("{}: skipped, not a regular file ({what})", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// `dlopen` refused it (not a shared object, missing dependency, ...).
    #[error("{}: cannot load: {reason}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// `dlerror`'s text.
        reason: String,
    },
    /// It has no `provider_query`.
    #[error("{}: no provider_query symbol: {reason}", path.display())]
    NoQuery {
        /// The file.
        path: PathBuf,
        /// `dlerror`'s text.
        reason: String,
    },
    /// `provider_query` returned an error or no provider.
    #[error("{}: provider_query failed (returned {ret}, provider {})", path.display(), if *null { "null" } else { "set" })]
    QueryFailed {
        /// The file.
        path: PathBuf,
        /// What it returned.
        ret: i32,
        /// Whether the provider pointer was left null.
        null: bool,
    },
    /// The interface version is not 1.
    #[error("{}: provider interface version {found}, expected {expected}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// What it reported.
        found: u32,
        /// [`super::abi::ACM_PROV_VERSION`].
        expected: u32,
    },
    /// `struct acm_provider` has another size than ours: built against another header.
    #[error("{}: struct acm_provider is {found} bytes, expected {expected}", path.display())]
    Size {
        /// The file.
        path: PathBuf,
        /// What it reported.
        found: usize,
        /// Ours.
        expected: usize,
    },
    /// The provider's name is missing, empty or not UTF-8.
    #[error("{}: the provider has no usable name", path.display())]
    Name {
        /// The file.
        path: PathBuf,
    },
}

/// A provider callback that failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The provider left the callback null.
    #[error("provider {provider}: no {call} callback")]
    Missing {
        /// The provider's name.
        provider: String,
        /// Which callback.
        call: &'static str,
    },
    /// The callback returned non-zero.
    #[error("provider {provider}: {call} failed (returned {ret})")]
    Failed {
        /// The provider's name.
        provider: String,
        /// Which callback.
        call: &'static str,
        /// What it returned.
        ret: i32,
    },
}
