//! [`Engine`]: the core plus its providers, and the input dispatch.
//!
//! This file is the one place where an input is routed: [`Engine::handle`] hands it to
//! the core, which decides and returns what the providers must be told (a
//! `ProviderCall`, or a `Plan` of several with the core's own work between them), or
//! routes it straight to the provider it belongs to (an endpoint's receive, a
//! neighbour answer). `Engine::call` is the one place a provider hook is called, with
//! the core lent as its [`Ctx`]. The core itself never calls a provider (see
//! `core/provider_call.rs`).

use crate::acmp::Acmp;
use crate::core::{Call, Core, Plan, ProviderCall, Step};
use crate::io::{Input, Output};
use crate::log::{Level, LogEvent};
use crate::provider::{Ctx, Provider, Resolve};
use crate::time::Instant;
use crate::view::{CacheView, ViewPublisher};
use crate::{ConnId, Counter, Counters, EndpointId, EngineConfig};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

/// An ibacm daemon's brain: see the crate docs for the run loop.
pub struct Engine {
    pub(crate) core: Core,
    pub(crate) providers: Vec<Box<dyn Provider>>,
    /// The instant the timers were last looked at (see [`Engine::handle`]).
    timers_checked: Option<Instant>,
    /// The cache view published to the daemon's workers, once asked for
    /// ([`Engine::publish_view`]).
    view: Option<Box<ViewPublisher>>,
}

impl Engine {
    /// An engine with the built-in `ibacmp` provider.
    ///
    /// `seed` fixes every choice the engine makes that is not dictated by its inputs
    /// (today: where the TID counter starts; seed 0 starts at 1 as the reference).
    #[must_use]
    pub fn new(config: EngineConfig, seed: u64, now: Instant) -> Self {
        let acmp = Acmp::new(&config);
        Self::with_providers(config, seed, now, vec![Box::new(acmp)])
    }

    /// An engine with these providers; ports go to them by the options file's
    /// `provider` lines (the default name is `ibacmp`).
    #[must_use]
    pub fn with_providers(
        config: EngineConfig,
        seed: u64,
        now: Instant,
        providers: Vec<Box<dyn Provider>>,
    ) -> Self {
        let names: Vec<String> = providers.iter().map(|p| String::from(p.name())).collect();
        let mut engine = Self {
            core: Core::new(config, seed, now, names),
            providers,
            timers_checked: None,
            view: None,
        };
        let diagnostics = core::mem::take(&mut engine.core.config.diagnostics);
        for message in crate::config::summarize(&diagnostics).lines {
            let ev = LogEvent {
                level: Level::Basic,
                origin: "config",
                message,
            };
            engine.core.push_log(ev);
        }
        engine.core.set_kernel_timeout();
        engine.call_all(|| ProviderCall::Start);
        engine
    }

    /// Takes one input at `now`, after firing every timer due at `now`.
    ///
    /// Within one instant the timers are looked at once: an input at the same instant
    /// as the input before it does not look again, unless it is [`Input::Tick`]. Every
    /// timer due then has fired already, except one armed since with no delay; that
    /// one fires at the next `Tick`, which [`Engine::poll_timeout`] asks for at once. A
    /// driver that reads its clock once per wake-up hands all the requests of that
    /// wake-up over at one instant, and so checks the timers once for all of them.
    ///
    /// Afterwards, drain [`Engine::poll_output`] before waiting for anything (crate
    /// docs, "The run loop").
    pub fn handle(&mut self, now: Instant, input: Input<'_>) {
        // An instant before the last one is taken as the last one (crate docs): a
        // driver's clock may step back, the engine's never does.
        if now > self.core.now {
            self.core.now = now;
        }
        let checked = self.timers_checked == Some(self.core.now);
        if !checked || matches!(input, Input::Tick) {
            self.fire_timers();
            self.timers_checked = Some(self.core.now);
        }
        match input {
            Input::Tick => {}
            Input::DeviceAdded(desc) => self.carry_out(|core| core.device_added(desc)),
            Input::DeviceRemoved(id) => self.carry_out(|core| core.device_removed(id)),
            Input::Port { port, event } => self.carry_out(|core| core.port_event(port, event)),
            Input::LocalIpAdded(ip) => self.carry_out(|core| core.local_ip_added(ip)),
            Input::LocalIpRemoved(ip) => self.carry_out(|core| core.local_ip_removed(ip)),
            Input::ClientRequest { conn, bytes } => {
                let call = self.core.client_request(conn, bytes, &self.providers);
                self.call(call);
            }
            Input::ClientClosed(conn) => {
                // Replies still owed to it are dropped when they come (`Core::deliver`);
                // the providers may stop what only this client waited for.
                if self.core.client_closed(conn) {
                    self.call_all(|| ProviderCall::ClientClosed(conn));
                }
            }
            Input::SourceAnswer { id, result } => {
                self.call_from(|core| core.source_answer(id, result))
            }
            Input::NeighAnswer { id, result } => {
                // An answer nobody asked for (or asked twice) is dropped.
                if let Some(i) = self.core.neighs.remove(&id) {
                    self.call(Some((i, ProviderCall::NeighAnswer { id, result })));
                }
            }
            Input::QpOpened { ep, result } => {
                self.call_endpoint_provider(ep, ProviderCall::QpOpened { ep, result });
            }
            Input::UdReceive { ep, wc, grh, mad } => {
                let call = ProviderCall::UdReceive { ep, wc, grh, mad };
                self.call_endpoint_provider(ep, call);
            }
            Input::UdSendDone { ep, token, ok } => {
                let call = ProviderCall::UdSendDone { ep, token, ok };
                self.call_endpoint_provider(ep, call);
            }
            Input::SaResponse { port, mad } => self.call_from(|core| core.sa_response(port, mad)),
            Input::SaSendFailed { port, tid, status } => {
                self.call_from(|core| core.sa_failed(port, tid, status))
            }
            Input::Netlink(bytes) => self.call_from(|core| core.netlink_request(bytes)),
            Input::KernelTimeoutSent { wait_ms } => self.core.kernel_timeout_sent(wait_ms),
            Input::ProviderWake => self.call_all(|| ProviderCall::Wake),
            Input::Reconfigure(config) => self.carry_out(|core| core.reconfigure(config)),
            Input::CacheHits { ep, hits } => self.count_view_hits(ep, hits),
        }
        self.core.check_dropped_replies();
    }

    /// The next thing to do, in causal order. Drain to `None` before waiting.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.core.out.pop_front()
    }

    /// The output [`Engine::poll_output`] would return next, lent where it lies: an
    /// output is 320 bytes, and a caller that only reads it (a reply written to a
    /// socket) need not move it out (see [`crate::driver::lend_outputs`]).
    #[must_use]
    pub fn peek_output(&self) -> Option<&Output> {
        self.core.out.front()
    }

    /// When the engine next needs [`Input::Tick`] (or any input), if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let providers = self.providers.iter().filter_map(|p| p.poll_timeout()).min();
        [
            providers,
            self.core.sa_next_due(),
            self.core.kernel_waits.next_deadline(),
            self.core.sm_next_retry(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The global counters (docs/daemon.md §12).
    #[must_use]
    pub fn counters(&self) -> Counters {
        self.core.counters
    }

    /// What the lookup bounds did since start: requests refused over
    /// `max_pending_per_client`, lookups cancelled when their last client closed, NODELAY
    /// warm-ups not started over `max_background_resolves`.
    #[must_use]
    pub fn lookup_counters(&self) -> crate::LookupCounters {
        self.core.lookup_counters
    }

    /// An endpoint's counters, from its provider.
    #[must_use]
    pub fn endpoint_counters(&self, ep: EndpointId) -> Option<Counters> {
        self.core.endpoint_counters(ep, &self.providers)
    }

    /// Every endpoint of an active port, in enumeration order (docs/daemon.md §13).
    #[must_use]
    pub fn endpoint_stats(&self) -> Vec<crate::EndpointStats> {
        self.core.endpoint_stats(&self.providers)
    }

    /// The current time as the engine knows it (the latest instant handed in).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// A snapshot of what cache hits depend on, for threads that answer hits
    /// themselves ([`CacheView`], whose module documentation says how and why).
    /// Publishing starts with the first call; afterwards it returns a new view when
    /// anything a hit depends on changed since the last call (a destination's state,
    /// path or expiry, an eviction, a flush, an endpoint's state or addresses, a port,
    /// the log level, `pending_per_conn`), and `None` when nothing did. Its cost
    /// follows what changed, not the size of the caches.
    ///
    /// Call it after every input, and carry out the outputs of the input only once
    /// the view it returns is where the readers take theirs from: an invalidation is
    /// then in the view before the engine reports it done.
    pub fn publish_view(&mut self) -> Option<Arc<CacheView>> {
        let first = self.view.is_none();
        let publisher = self
            .view
            .get_or_insert_with(|| Box::new(ViewPublisher::new()));
        publisher.publish(&self.core, &mut self.providers, first)
    }

    /// Requests of `conn` the engine holds unanswered (in a provider's hands or
    /// waiting for a source lookup); 0 for a connection it does not know. A reader of
    /// the [`CacheView`] answers a connection only while this is 0, so that its
    /// replies keep the order of its requests.
    #[must_use]
    pub fn client_pending(&self, conn: ConnId) -> u32 {
        self.core.conns.get(&conn).map_or(0, |s| s.pending)
    }

    /// Counts cache hits answered from a published view, as the engine's own hit
    /// path counts one: the global and the endpoint's Resolve and Route Cache.
    fn count_view_hits(&mut self, ep: EndpointId, hits: u64) {
        self.core.counters.add(Counter::Resolve, hits);
        self.core.counters.add(Counter::RouteCache, hits);
        let idx = self.core.endpoint(ep).map(|e| e.provider);
        if let Some(acmp) = idx
            .and_then(|i| self.providers.get_mut(i))
            .and_then(|p| Acmp::of(p.as_mut()))
        {
            acmp.count_view_hits(ep, hits);
        }
    }

    fn fire_timers(&mut self) {
        self.core.expire_kernel_waits();
        self.core.sm_fire_retries();
        let now = self.core.now;
        self.core.sa_release_due();
        for i in 0..self.providers.len() {
            if self.providers[i].poll_timeout().is_some_and(|t| t <= now) {
                self.call(Some((i, ProviderCall::Timeout)));
            }
        }
    }

    /// Makes the call the core returned, if any: calls the provider hook it names, with
    /// the core as the provider's context. The one place the engine calls into a
    /// provider. (The call is taken apart here, where it is matched, so that a
    /// request's parts move once, into the hook's arguments.)
    #[inline(always)]
    fn call(&mut self, call: Option<Call<'_>>) {
        let Some(&(idx, _)) = call.as_ref() else {
            return;
        };
        let Some(p) = self.providers.get_mut(idx) else {
            return;
        };
        let p = p.as_mut();
        let cx = &mut Ctx {
            core: &mut self.core,
            provider: idx,
        };
        match call {
            None => {}
            Some((_, ProviderCall::Start)) => p.start(cx),
            Some((
                _,
                ProviderCall::ResolveDest {
                    ep,
                    src,
                    dest,
                    flags,
                    reply,
                },
            )) => p.resolve(cx, ep, Resolve::Dest { src, dest, flags }, reply),
            Some((
                _,
                ProviderCall::ResolvePath {
                    ep,
                    path,
                    flags,
                    reply,
                },
            )) => p.resolve(cx, ep, Resolve::Path { path, flags }, reply),
            Some((_, ProviderCall::Query { ep, path, reply })) => p.query(cx, ep, &path, reply),
            Some((_, ProviderCall::OpenDevice(desc))) => p.open_device(cx, &desc),
            Some((_, ProviderCall::CloseDevice(id))) => p.close_device(cx, id),
            Some((_, ProviderCall::OpenPort { port, attrs })) => p.open_port(cx, port, &attrs),
            Some((_, ProviderCall::ClosePort(port))) => p.close_port(cx, port),
            Some((_, ProviderCall::OpenEndpoint { ep, port, pkey })) => {
                p.open_endpoint(cx, ep, port, pkey)
            }
            Some((_, ProviderCall::CloseEndpoint(ep))) => p.close_endpoint(cx, ep),
            Some((_, ProviderCall::AddAddress { ep, addr })) => p.add_address(cx, ep, &addr),
            Some((_, ProviderCall::RemoveAddress { ep, addr })) => p.remove_address(cx, ep, &addr),
            Some((_, ProviderCall::ClientReregister(port))) => p.client_reregister(cx, port),
            Some((_, ProviderCall::SmEvent { port, event })) => p.sm_event(cx, port, &event),
            Some((_, ProviderCall::ClientClosed(conn))) => p.client_closed(cx, conn),
            Some((_, ProviderCall::QpOpened { ep, result })) => p.qp_opened(cx, ep, result),
            Some((_, ProviderCall::UdReceive { ep, wc, grh, mad })) => {
                p.ud_receive(cx, ep, &wc, grh, mad)
            }
            Some((_, ProviderCall::UdSendDone { ep, token, ok })) => {
                p.ud_send_done(cx, ep, token, ok)
            }
            Some((_, ProviderCall::SaResponse { port, tid, result })) => {
                p.sa_response(cx, port, tid, result)
            }
            Some((_, ProviderCall::NeighAnswer { id, result })) => p.neigh_answer(cx, id, result),
            Some((_, ProviderCall::Timeout)) => p.handle_timeout(cx),
            Some((_, ProviderCall::Wake)) => p.wake(cx),
            Some((_, ProviderCall::Reconfigure(options))) => p.reconfigure(cx, &options),
        }
    }

    /// Makes the call on the provider that serves endpoint `ep`, if it is open.
    fn call_endpoint_provider(&mut self, ep: EndpointId, call: ProviderCall<'_>) {
        let idx = self.core.endpoint(ep).map(|e| e.provider);
        self.call(idx.map(|idx| (idx, call)));
    }

    /// Makes the same call on every provider, in their order.
    fn call_all(&mut self, call: impl Fn() -> ProviderCall<'static>) {
        for i in 0..self.providers.len() {
            self.call(Some((i, call())));
        }
    }

    /// Makes the call the core returns for an input, if any.
    fn call_from<'a>(&mut self, decide: impl FnOnce(&mut Core) -> Option<Call<'a>>) {
        let call = decide(&mut self.core);
        self.call(call);
    }

    /// Carries out what the core plans for an input: each call in turn, and each of the
    /// core's steps between them when the calls before it are made (what a step plans
    /// comes next).
    fn carry_out(&mut self, decide: impl FnOnce(&mut Core) -> Plan) {
        let mut plan = decide(&mut self.core);
        while let Some(step) = plan.next_step() {
            match step {
                Step::Call(idx, call) => self.call(Some((idx, call))),
                Step::Then(step) => plan.prepend(step(&mut self.core)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Options;

    #[test]
    fn config_diagnostics_and_provider_options_are_logged_at_start() {
        let (options, diagnostics) =
            Options::parse("ibacm_opts.cfg", "log_level 1\nbogus_option 1\n");
        let config = EngineConfig {
            options,
            diagnostics,
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(config, 0, Instant::ZERO);
        let mut lines = alloc::vec::Vec::new();
        while let Some(out) = engine.poll_output() {
            if let Output::Host(crate::io::HostOutput::Log(ev)) = out {
                lines.push(alloc::format!("{ev}"));
            }
        }
        assert!(
            lines[0].starts_with("config: ibacm_opts.cfg:2: "),
            "{lines:?}"
        );
        assert!(lines[0].contains("bogus_option"), "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l == "acmp_log_options: route resolution 1"),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l == "acmp_log_options: timeout 2000 ms"),
            "{lines:?}"
        );
    }
}
