//! C provider plugins in the daemon (docs/providers.md): loading `provider_lib_path` at
//! start, choosing which libraries serve (names already taken are skipped; the built-in
//! `ibacmp` is left out with `builtin_provider no`), and making the engine's provider
//! list: the built-in first, then each library through its [`adapter::CProvider`].
//!
//! Everything C lives in acm-io-verbs; this is safe code.

pub(crate) mod adapter;
pub(crate) mod message;
pub(crate) mod services;

use acm_engine::EngineConfig;
use acm_engine::acmp::Acmp;
use acm_engine::config::{BUILTIN_PROVIDER, Options};
use acm_engine::provider::Provider;
use acm_io_verbs::provider::{ProviderLibrary, install_core, scan};
use adapter::{CProvider, VerbsLookup};
use services::{Shared, Slot};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The providers this daemon runs (cheap to clone: the libraries are shared).
#[derive(Clone)]
pub(crate) struct Plugins {
    builtin: bool,
    libs: Vec<(Slot, Rc<ProviderLibrary>)>,
    shared: Arc<Shared>,
}

impl Plugins {
    /// Loads every provider of `o.provider_lib_path`, logging each file that is used or
    /// not and why; `opts_file` is what `acm_get_opts_file` returns. Without `verbs`
    /// (the simulated fabrics, whose devices have no verbs context), a library that
    /// calls verbs itself is skipped: it would crash on the null context.
    pub(crate) fn load(
        o: &Options,
        opts_file: &str,
        verbs: bool,
        log: &mut dyn FnMut(String),
    ) -> Self {
        let shared = Arc::new(Shared::new(o.log_level, opts_file));
        // Before any library is opened: their constructors may log already.
        let installed = install_core(shared.clone());
        let builtin = o.builtin_provider;
        if !builtin {
            log("builtin_provider no: the built-in ibacmp is not registered".into());
        }
        let mut names: Vec<String> = Vec::new();
        if builtin {
            names.push(BUILTIN_PROVIDER.to_owned());
        }
        let mut libs = Vec::new();
        let found = match (installed, scan(Path::new(&o.provider_lib_path))) {
            (Ok(()), Ok(f)) => f,
            (Err(e), _) => {
                log(format!("{e}; no provider library is loaded"));
                Vec::new()
            }
            (_, Err(e)) => {
                log(e.to_string());
                Vec::new()
            }
        };
        for r in found {
            match r {
                Ok(lib) => {
                    let taken = names.iter().any(|n| n.eq_ignore_ascii_case(lib.name()));
                    if taken {
                        log(format!(
                            "{}: provider '{}' is loaded already; skipped",
                            lib.path().display(),
                            lib.name()
                        ));
                        continue;
                    }
                    if !verbs && lib.uses_verbs() {
                        log(format!(
                            "{}: provider '{}' calls verbs itself, and this fabric's devices \
                             have no verbs context; skipped",
                            lib.path().display(),
                            lib.name()
                        ));
                        continue;
                    }
                    log(format!(
                        "{}: loaded provider '{}'",
                        lib.path().display(),
                        lib.name()
                    ));
                    names.push(lib.name().to_owned());
                    let slot = Slot::try_from(libs.len() + 1).unwrap_or(Slot::MAX);
                    libs.push((slot, Rc::new(lib)));
                }
                Err(e) => log(e.to_string()),
            }
        }
        Self {
            builtin,
            libs,
            shared,
        }
    }

    /// Whether the engine runs exactly the built-in provider, as without plugins.
    #[must_use]
    pub(crate) fn builtin_only(&self) -> bool {
        self.builtin && self.libs.is_empty()
    }

    /// Whether any library serves: the event loop then needs a waker for them.
    #[must_use]
    pub(crate) fn has_libraries(&self) -> bool {
        !self.libs.is_empty()
    }

    /// The queue the libraries' threads hand their work to.
    #[must_use]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The engine's providers for `config`, in load order: the built-in (unless
    /// `builtin_provider no`), then each library. `verbs` finds a device's verbs
    /// context on hardware.
    #[must_use]
    pub(crate) fn providers(
        &self,
        config: &EngineConfig,
        verbs: &VerbsLookup,
    ) -> Vec<Box<dyn Provider>> {
        let mut v: Vec<Box<dyn Provider>> = Vec::new();
        if self.builtin {
            v.push(Box::new(Acmp::new(config)));
        }
        let budget = budget(config);
        for (slot, lib) in &self.libs {
            v.push(Box::new(CProvider::new(
                Rc::clone(lib),
                Arc::clone(&self.shared),
                *slot,
                budget,
                Rc::clone(verbs),
            )));
        }
        v
    }
}

/// How long a library has to answer a request before the core answers ETIMEDOUT: the
/// option `provider_timeout`. Not derived from `timeout` and `retries`: a provider may
/// queue a lookup behind others (libibacmp keeps one send outstanding per endpoint),
/// so its answer can come several of its own timeouts after the request.
#[must_use]
pub(crate) fn budget(config: &EngineConfig) -> Duration {
    Duration::from_millis(u64::from(config.options.provider_timeout))
}

/// A lookup for backends without verbs: every device's context is null.
#[must_use]
pub(crate) fn no_verbs() -> VerbsLookup {
    Rc::new(|_| None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_provider_timeout_option() {
        let mut c = EngineConfig::default();
        assert_eq!(budget(&c), Duration::from_secs(60));
        c.options.provider_timeout = 400;
        assert_eq!(budget(&c), Duration::from_millis(400));
    }

    #[test]
    fn a_missing_directory_is_logged_and_only_the_builtin_serves() {
        let mut c = EngineConfig::default();
        c.options.provider_lib_path = "/nonexistent/acm-providers".into();
        let mut lines = Vec::new();
        let p = Plugins::load(&c.options, "/etc/x", false, &mut |l| lines.push(l));
        assert!(!p.has_libraries());
        assert!(
            lines[0].contains("cannot read the provider directory"),
            "{lines:?}"
        );
        let names: Vec<String> = p
            .providers(&c, &no_verbs())
            .iter()
            .map(|p| p.name().to_owned())
            .collect();
        assert_eq!(names, ["ibacmp"]);
    }
}
