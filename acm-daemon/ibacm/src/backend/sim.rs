//! `--fabric sim[:FILE[:HOST]]`: the whole fabric in this process. Every host's engine
//! runs in the simulator; this daemon serves one host's clients. The simulator's clock
//! is moved to the daemon's elapsed real time before each input, so timeouts and
//! retries take as long as they would on a real fabric.

use super::{Backend, BackendError};
use acm_engine::HostOutput;
use acm_engine::{EngineConfig, Input, Instant};
use acm_io_sim::{FabricSpec, HostId, Sim};
use mio::{Registry, Token};
use std::collections::BTreeMap;
use std::io;
use std::ops::ControlFlow;

/// The demo fabric `--fabric sim` runs without a file (`testdata/fabrics/demo.toml`).
pub const DEMO_FABRIC: &str = include_str!("../../../../testdata/fabrics/demo.toml");

/// The simulator, driven for one host.
pub struct SimBackend {
    sim: Sim,
    host: HostId,
    label: String,
}

impl SimBackend {
    /// Starts `spec` with this daemon as host `host`, running with `config` (the
    /// daemon's own option and address files) instead of the spec's.
    #[must_use]
    pub fn new(
        spec: FabricSpec,
        host: HostId,
        config: EngineConfig,
        seed: u64,
        label: String,
    ) -> Self {
        let sim = Sim::driving(spec, seed, BTreeMap::from([(host, config)]), host);
        Self { sim, host, label }
    }

    /// [`SimBackend::new`], this host's engine running the providers `factory` makes
    /// (the built-in and the loaded C plugins).
    #[must_use]
    pub fn with_providers(
        spec: FabricSpec,
        host: HostId,
        config: EngineConfig,
        seed: u64,
        label: String,
        factory: acm_io_sim::ProviderFactory,
    ) -> Self {
        let configs = BTreeMap::from([(host, config)]);
        let sim = Sim::driving_with_providers(spec, seed, configs, host, factory);
        Self { sim, host, label }
    }

    /// The host this daemon is.
    #[must_use]
    pub fn host(&self) -> HostId {
        self.host
    }
}

impl Backend for SimBackend {
    fn describe(&self) -> String {
        format!(
            "{}, host {}",
            self.label,
            self.sim.spec().hosts[self.host.index()].name
        )
    }

    fn register(&mut self, _registry: &Registry, _token: Token) -> io::Result<()> {
        // Nothing to wait for but the clock.
        Ok(())
    }

    fn handle(&mut self, now: Instant, input: Input<'_>) {
        self.sim.run_until(now);
        self.sim.driven_input(input);
    }

    fn advance(&mut self, now: Instant, _io_ready: bool) -> Result<(), BackendError> {
        self.sim.run_until(now);
        Ok(())
    }

    fn lend_outputs(
        &mut self,
        mut f: impl FnMut(&HostOutput) -> ControlFlow<()>,
    ) -> Option<HostOutput> {
        // The simulator keeps the driven host's outputs; they come out by value.
        while let Some(out) = self.sim.poll_driven_output() {
            if f(&out).is_break() {
                return Some(out);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.sim.next_due()
    }

    fn engine(&self) -> &acm_engine::Engine {
        self.sim.engine(self.host)
    }

    fn engine_mut(&mut self) -> &mut acm_engine::Engine {
        self.sim.engine_mut(self.host)
    }
}
