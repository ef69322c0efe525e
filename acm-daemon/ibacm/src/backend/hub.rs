//! `--fabric hub:SOCKET:HOST`: this host's engine in this process, its fabric traffic
//! (UD MADs, SA MADs, QPs, multicast) through a fabric hub that other daemon
//! processes share. Real time, like a real fabric.

use super::{Backend, BackendError};
use acm_engine::HostOutput;
use acm_engine::{EngineConfig, Input, Instant};
use acm_io_sim::ProviderFactory;
use acm_io_sim::hub::{HostSetup, HubError, HubHost};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::collections::VecDeque;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::Duration;

/// An engine attached to a fabric hub.
pub(crate) struct HubBackend {
    host: HubHost,
    /// Outputs for the event loop (client, netlink and log ones).
    out: VecDeque<HostOutput>,
    label: String,
    /// A fabric error seen while draining, reported by the next `advance`.
    failed: Option<HubError>,
}

impl HubBackend {
    /// Attaches to the hub at `hub` as `host` through our own socket `my_socket`, and
    /// brings the engine up with the host's devices and addresses;
    /// `providers` makes the engine's providers (the built-in one alone without).
    ///
    /// # Errors
    /// The hub cannot be reached or refuses the host.
    pub(crate) fn attach(
        hub: &Path,
        my_socket: &Path,
        host: &str,
        config: impl FnOnce(&HostSetup) -> EngineConfig,
        providers: Option<ProviderFactory>,
        seed: u64,
        now: Instant,
    ) -> Result<Self, HubError> {
        let attached =
            HubHost::attach_with_providers(hub, my_socket, host, config, providers, seed, now)?;
        let mut b = Self {
            host: attached,
            out: VecDeque::new(),
            label: format!("fabric hub {}, host {host}", hub.display()),
            failed: None,
        };
        b.drain();
        b.pump(now);
        match b.failed.take() {
            Some(e) => Err(e),
            None => Ok(b),
        }
    }

    fn input(&mut self, now: Instant, input: Input<'_>) {
        self.host.handle(now, input);
        self.drain();
    }

    /// Feeds the engine whatever the hub sent.
    fn pump(&mut self, now: Instant) {
        while self.failed.is_none() {
            match self.host.recv(Duration::ZERO) {
                Ok(Some(ev)) => self.input(now, ev.as_input()),
                Ok(None) => break,
                Err(e) => self.failed = Some(e),
            }
        }
    }

    /// Keeps what the engine has for the event loop (its fabric operations went to the
    /// hub on the way).
    fn drain(&mut self) {
        while let Some(out) = self.host.poll_output() {
            self.out.push_back(out);
        }
        if let Some(e) = self.host.take_error() {
            self.failed.get_or_insert(e);
        }
    }
}

impl Backend for HubBackend {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let fd = self.host.client().as_fd().as_raw_fd();
        registry.register(&mut SourceFd(&fd), token, Interest::READABLE)
    }

    fn handle(&mut self, now: Instant, input: Input<'_>) {
        self.input(now, input);
    }

    fn advance(&mut self, now: Instant, io_ready: bool) -> Result<(), BackendError> {
        self.input(now, Input::Tick);
        // The hub's datagrams are read when the poller reports them, and then all of
        // them (the registration is edge-triggered); a turn that only served clients
        // reads nothing, as with the other backends. What the engine's operations
        // answer on the spot (source lookups) comes through the driver, not the socket.
        if io_ready {
            self.pump(now);
        }
        match self.failed.take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn lend_outputs(
        &mut self,
        mut f: impl FnMut(&HostOutput) -> ControlFlow<()>,
    ) -> Option<HostOutput> {
        super::lend_queued(&mut self.out, &mut f)
    }

    fn engine(&self) -> &acm_engine::Engine {
        self.host.engine_ref()
    }

    fn engine_mut(&mut self) -> &mut acm_engine::Engine {
        self.host.engine_mut()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.host.engine_ref().poll_timeout()
    }
}
