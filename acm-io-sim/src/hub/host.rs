//! [`HubHost`]: an engine whose fabric is a hub. The driver carries the engine's fabric
//! operations to the hub through [`HubClient`]; what the hub sends back is fed with
//! [`HubHost::handle`] after [`HubHost::recv`].

use super::HubError;
use super::attach::HubClient;
use super::wire::HostSetup;
use crate::ProviderFactory;
use acm_engine::HostOutput;
use acm_engine::driver::{self, Fabric};
use acm_engine::{EndpointId, Engine, Input, Instant};
use acm_engine::{FabricEvent, McastGroup, NeighQuery, OpenQp, SaSend, SourceQuery, UdSend};
use std::path::Path;
use std::time::Duration;

/// One host's engine attached to a hub.
pub struct HubHost {
    engine: Engine,
    client: HubClient,
    /// The first hub failure met while carrying out operations; the caller collects it
    /// with [`HubHost::take_error`].
    failed: Option<HubError>,
    /// Multicast attachments made so far (a host is ready once it has its first).
    attached: usize,
}

impl HubHost {
    /// Attaches to the hub at `hub` as `host` through our own socket `my_socket`, and
    /// feeds the engine `config` builds the host's addresses and devices. Drain
    /// [`HubHost::poll_output`] afterwards.
    ///
    /// # Errors
    /// The hub cannot be reached or refuses the host.
    pub fn attach(
        hub: &Path,
        my_socket: &Path,
        host: &str,
        config: impl FnOnce(&HostSetup) -> acm_engine::EngineConfig,
        seed: u64,
        now: Instant,
    ) -> Result<Self, HubError> {
        Self::attach_with_providers(hub, my_socket, host, config, None, seed, now)
    }

    /// As [`HubHost::attach`], with the engine's providers made by `providers` from its
    /// configuration (as [`crate::Sim::driving_with_providers`] makes a driven host's),
    /// or the built-in one alone without. Providers with threads of their own hand
    /// their work in through [`Input::ProviderWake`].
    ///
    /// # Errors
    /// The hub cannot be reached or refuses the host.
    pub fn attach_with_providers(
        hub: &Path,
        my_socket: &Path,
        host: &str,
        config: impl FnOnce(&HostSetup) -> acm_engine::EngineConfig,
        providers: Option<ProviderFactory>,
        seed: u64,
        now: Instant,
    ) -> Result<Self, HubError> {
        let (client, setup) = HubClient::attach(hub, my_socket, host)?;
        let config = config(&setup);
        let engine = match providers {
            Some(mut make) => {
                let list = make(&config);
                Engine::with_providers(config, seed, now, list)
            }
            None => Engine::new(config, seed, now),
        };
        let mut h = Self {
            engine,
            client,
            failed: None,
            attached: 0,
        };
        for ip in setup.ips {
            h.engine.handle(now, Input::LocalIpAdded(ip));
        }
        for dev in setup.devices {
            h.engine.handle(now, Input::DeviceAdded(dev));
        }
        Ok(h)
    }

    /// Feeds one input to the engine. Drain [`HubHost::poll_output`] afterwards.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) {
        driver::handle(self, now, input);
    }

    /// The engine's next client reply, close, netlink reply or log line, once its fabric
    /// operations have gone to the hub.
    pub fn poll_output(&mut self) -> Option<HostOutput> {
        driver::poll_output(self)
    }

    /// The next event from the hub within `timeout`, for [`FabricEvent::as_input`].
    ///
    /// # Errors
    /// As for [`HubClient::recv_event`].
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<FabricEvent>, HubError> {
        self.client.recv_event(timeout)
    }

    /// The first hub failure met while carrying out the engine's operations, if any.
    pub fn take_error(&mut self) -> Option<HubError> {
        self.failed.take()
    }

    /// How many multicast attachments the engine has made.
    #[must_use]
    pub fn attached_groups(&self) -> usize {
        self.attached
    }

    /// The engine, for timers and counters.
    #[must_use]
    pub fn engine_ref(&self) -> &Engine {
        &self.engine
    }

    /// The engine, for what a host asks of it directly rather than through an input
    /// (the cache view it publishes for worker threads).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The hub connection (its socket, for an event loop to wait on).
    #[must_use]
    pub fn client(&self) -> &HubClient {
        &self.client
    }

    /// Detaches from the hub.
    ///
    /// # Errors
    /// As for [`HubClient::detach`].
    pub fn detach(self) -> Result<(), HubError> {
        self.client.detach()
    }

    fn keep(&mut self, r: Result<(), HubError>) {
        if let Err(e) = r {
            self.failed.get_or_insert(e);
        }
    }
}

impl Fabric for HubHost {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn open_qp(&mut self, qp: OpenQp) {
        let r = self.client.open_qp(&qp);
        self.keep(r);
    }

    fn close_qp(&mut self, ep: EndpointId) {
        let r = self.client.close_qp(ep);
        self.keep(r);
    }

    fn ud_send(&mut self, send: &UdSend) {
        let r = self.client.ud_send(send);
        self.keep(r);
    }

    fn mcast_attach(&mut self, group: McastGroup) {
        self.attached += 1;
        let r = self.client.mcast_attach(&group);
        self.keep(r);
    }

    fn mcast_detach(&mut self, group: McastGroup) {
        let r = self.client.mcast_detach(&group);
        self.keep(r);
    }

    fn sa_send(&mut self, send: &SaSend) {
        let r = self.client.sa_send(send);
        self.keep(r);
    }

    fn source_query(&mut self, query: SourceQuery) {
        self.client.source_query(&query);
    }

    fn neigh_query(&mut self, query: NeighQuery) {
        let r = self.client.neigh_query(&query);
        self.keep(r);
    }

    /// Source lookups are answered on the spot.
    fn poll_event(&mut self) -> Option<FabricEvent> {
        self.client.local_event()
    }
}
