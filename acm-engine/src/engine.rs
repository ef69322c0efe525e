//! [`Engine`]: the core plus its providers, and the input dispatch.

use crate::acmp::Acmp;
use crate::core::Core;
use crate::io::{Input, Output};
use crate::log::{Level, LogEvent};
use crate::provider::{Ctx, Provider};
use crate::time::Instant;
use crate::{Counters, EndpointId, EngineConfig};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// An ibacm daemon's brain: see the crate docs for the run loop.
pub struct Engine {
    pub(crate) core: Core,
    pub(crate) providers: Vec<Box<dyn Provider>>,
    /// The instant the timers were last looked at (see [`Engine::handle`]).
    timers_checked: Option<Instant>,
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
        engine.set_kernel_timeout();
        for i in 0..engine.providers.len() {
            engine.with_provider(i, |p, cx| p.start(cx));
        }
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
            Input::DeviceAdded(desc) => self.device_added(desc),
            Input::DeviceRemoved(id) => self.device_removed(id),
            Input::Port { port, event } => self.port_event(port, event),
            Input::LocalIpAdded(ip) => self.local_ip_added(ip),
            Input::LocalIpRemoved(ip) => self.local_ip_removed(ip),
            Input::ClientRequest { conn, bytes } => self.client_request(conn, bytes),
            Input::ClientClosed(conn) => self.client_closed(conn),
            Input::SourceAnswer { id, result } => self.source_answer(id, result),
            Input::NeighAnswer { id, result } => {
                // An answer nobody asked for (or asked twice) is dropped.
                if let Some(i) = self.core.neighs.remove(&id) {
                    self.with_provider(i, |p, cx| p.neigh_answer(cx, id, result));
                }
            }
            Input::QpOpened { ep, result } => {
                self.with_endpoint_provider(ep, |p, cx| p.qp_opened(cx, ep, result));
            }
            Input::UdReceive { ep, wc, grh, mad } => {
                self.with_endpoint_provider(ep, |p, cx| p.ud_receive(cx, ep, &wc, grh, mad));
            }
            Input::UdSendDone { ep, token, ok } => {
                self.with_endpoint_provider(ep, |p, cx| p.ud_send_done(cx, ep, token, ok));
            }
            Input::SaResponse { port, mad } => self.sa_response(port, mad),
            Input::SaSendFailed { port, tid, status } => self.sa_failed(port, tid, status),
            Input::Netlink(bytes) => self.netlink_request(bytes),
            Input::KernelTimeoutSent { wait_ms } => self.kernel_timeout_sent(wait_ms),
            Input::ProviderWake => {
                for i in 0..self.providers.len() {
                    self.with_provider(i, |p, cx| p.wake(cx));
                }
            }
            Input::Reconfigure(config) => self.reconfigure(config),
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
        let e = self.core.endpoint(ep)?;
        self.providers.get(e.provider)?.perf(ep)
    }

    /// The current time as the engine knows it (the latest instant handed in).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.core.now
    }

    fn fire_timers(&mut self) {
        self.expire_kernel_waits();
        self.core.sm_fire_retries();
        let now = self.core.now;
        self.core.sa_release_due();
        for i in 0..self.providers.len() {
            if self.providers[i].poll_timeout().is_some_and(|t| t <= now) {
                self.with_provider(i, |p, cx| p.handle_timeout(cx));
            }
        }
    }

    /// Runs `f` on provider `idx` with the core as its context.
    pub(crate) fn with_provider<R>(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut dyn Provider, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let p = self.providers.get_mut(idx)?;
        let mut cx = Ctx {
            core: &mut self.core,
            provider: idx,
        };
        Some(f(p.as_mut(), &mut cx))
    }

    /// Runs `f` on the provider that serves endpoint `ep`, if it is open.
    fn with_endpoint_provider(
        &mut self,
        ep: EndpointId,
        f: impl FnOnce(&mut dyn Provider, &mut Ctx<'_>),
    ) {
        let Some(idx) = self.core.endpoint(ep).map(|e| e.provider) else {
            return;
        };
        self.with_provider(idx, f);
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
