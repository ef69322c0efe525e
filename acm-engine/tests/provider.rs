//! Another resolution strategy plugs in through the `Provider` trait, and the options
//! file's `provider` lines decide which ports it serves (docs/daemon.md §4).

mod support;

use acm_engine::HostOutput;
use acm_engine::config::Options;
use acm_engine::provider::{Ctx, Outcome, PendingReply, Provider, Resolve};
use acm_engine::{
    Address, ClientOutput, ConnId, Counters, DeviceDesc, DeviceId, EndpointId, Engine, Input,
    Instant, Output, PortAttrs, PortId,
};
use acm_proto::client::Status;
use std::collections::BTreeMap;
use support::reference;

/// A provider that answers every resolve at once with one fixed path and keeps
/// nothing else: enough to show the lifecycle calls arrive and replies flow.
#[derive(Default)]
struct FixedPath {
    calls: Vec<String>,
    counters: BTreeMap<EndpointId, Counters>,
}

impl Provider for FixedPath {
    fn name(&self) -> &str {
        "fixed"
    }
    fn start(&mut self, _: &mut Ctx<'_>) {
        self.calls.push("start".into());
    }
    fn open_device(&mut self, _: &mut Ctx<'_>, dev: &DeviceDesc) {
        self.calls.push(format!("open_device {}", dev.name));
    }
    fn close_device(&mut self, _: &mut Ctx<'_>, dev: DeviceId) {
        self.calls.push(format!("close_device {}", dev.0));
    }
    fn open_port(&mut self, _: &mut Ctx<'_>, port: PortId, _: &PortAttrs) {
        self.calls.push(format!("open_port {}", port.port));
    }
    fn close_port(&mut self, _: &mut Ctx<'_>, port: PortId) {
        self.calls.push(format!("close_port {}", port.port));
    }
    fn open_endpoint(&mut self, _: &mut Ctx<'_>, ep: EndpointId, _: PortId, pkey: u16) {
        self.calls
            .push(format!("open_endpoint {} {pkey:#06x}", ep.0));
        self.counters.insert(ep, Counters::default());
    }
    fn close_endpoint(&mut self, _: &mut Ctx<'_>, ep: EndpointId) {
        self.calls.push(format!("close_endpoint {}", ep.0));
    }
    fn add_address(&mut self, _: &mut Ctx<'_>, _: EndpointId, addr: &Address) {
        self.calls.push(format!("add_address {addr}"));
    }
    fn remove_address(&mut self, _: &mut Ctx<'_>, _: EndpointId, addr: &Address) {
        self.calls.push(format!("remove_address {addr}"));
    }
    fn resolve(&mut self, cx: &mut Ctx<'_>, ep: EndpointId, _: Resolve, reply: PendingReply) {
        if let Some(c) = self.counters.get_mut(&ep) {
            c.bump(acm_engine::Counter::Resolve);
        }
        let mut path = [0u8; 64];
        path[40..42].copy_from_slice(&42u16.to_be_bytes()); // dlid
        cx.complete(reply, Outcome::Path(&path));
    }
    fn query(&mut self, cx: &mut Ctx<'_>, _: EndpointId, path: &[u8; 64], reply: PendingReply) {
        cx.complete(
            reply,
            Outcome::Query {
                status: Status::SUCCESS,
                path,
            },
        );
    }
    // Everything else (QPs, UD and SA traffic, timers) keeps the trait's defaults.
    fn perf(&self, ep: EndpointId) -> Option<Counters> {
        self.counters.get(&ep).copied()
    }
}

fn engine_with(opts_extra: &str) -> Engine {
    let mut config = reference::config();
    let (options, _) = Options::parse(
        "ibacm_opts.cfg",
        &format!("{}{opts_extra}", reference::OPTS),
    );
    config.options = options;
    let providers: Vec<Box<dyn Provider>> = vec![
        Box::new(acm_engine::acmp::Acmp::new(&config)),
        Box::new(FixedPath::default()),
    ];
    let mut e = Engine::with_providers(config, 0, Instant::ZERO, providers);
    e.handle(Instant::ZERO, Input::DeviceAdded(reference::device()));
    e
}

fn ep_query_provider(e: &mut Engine) -> String {
    let mut q = [0u8; 16];
    q[..8].copy_from_slice(&[1, 3, 0, 1, 1, 0, 0, 16]);
    e.handle(
        Instant::ZERO,
        Input::ClientRequest {
            conn: ConnId(9),
            bytes: &q,
        },
    );
    let mut name = String::new();
    while let Some(out) = e.poll_output() {
        if let Output::Host(HostOutput::Client(ClientOutput::Reply {
            conn: ConnId(9),
            reply,
        })) = out
        {
            let b = reply.as_bytes();
            assert_eq!(b[2], 0, "EP_QUERY succeeded");
            name = String::from_utf8_lossy(&b[32..96])
                .trim_end_matches('\0')
                .to_string();
        }
    }
    name
}

#[test]
fn ports_go_to_the_provider_their_prefix_names() {
    let mut e = engine_with("provider fixed 0xfe80000000000000\n");
    assert_eq!(ep_query_provider(&mut e), "fixed");
    // A resolve is answered by the plugged-in provider.
    let mut req = vec![0u8; 160];
    req[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 160, 0]);
    req[16] = 1;
    req[20] = 2;
    req[24..28].copy_from_slice(&[10, 0, 0, 1]);
    req[88] = 2;
    req[92] = 2;
    req[96..100].copy_from_slice(&[10, 0, 0, 77]);
    e.handle(
        Instant::ZERO,
        Input::ClientRequest {
            conn: ConnId(1),
            bytes: &req,
        },
    );
    let mut reply = None;
    while let Some(out) = e.poll_output() {
        if let Output::Host(HostOutput::Client(ClientOutput::Reply {
            conn: ConnId(1),
            reply: r,
        })) = out
        {
            reply = Some(r.as_bytes().to_vec());
        }
    }
    let reply = reply.expect("one reply");
    assert_eq!(reply.len(), 88);
    assert_eq!(&reply[16..20], &0x2Bu32.to_ne_bytes());
    assert_eq!(&reply[24 + 40..24 + 42], &42u16.to_be_bytes());
    assert_eq!(
        e.endpoint_counters(EndpointId(0))
            .map(|c| c.get(acm_engine::Counter::Resolve)),
        Some(1)
    );
}

#[test]
fn default_and_unloaded_provider_lines() {
    // No provider lines: the built-in ibacmp.
    assert_eq!(ep_query_provider(&mut engine_with("")), "ibacmp");
    // `default` picks a loaded provider, case-insensitively.
    assert_eq!(
        ep_query_provider(&mut engine_with("provider FIXED default\n")),
        "fixed"
    );
    // A line naming a provider that is not loaded is ignored, as the reference does.
    assert_eq!(
        ep_query_provider(&mut engine_with("provider nosuch default\n")),
        "ibacmp"
    );
}

#[test]
fn a_port_with_no_provider_is_unused() {
    // No provider is loaded at all: the port has none and stays unused.
    let mut e = Engine::with_providers(reference::config(), 0, Instant::ZERO, vec![]);
    e.handle(Instant::ZERO, Input::DeviceAdded(reference::device()));
    let mut q = [0u8; 16];
    q[..8].copy_from_slice(&[1, 3, 0, 1, 1, 0, 0, 16]);
    e.handle(
        Instant::ZERO,
        Input::ClientRequest {
            conn: ConnId(1),
            bytes: &q,
        },
    );
    let mut status = None;
    let mut logs = Vec::new();
    while let Some(out) = e.poll_output() {
        match out {
            Output::Host(HostOutput::Client(ClientOutput::Reply { reply, .. })) => {
                status = Some(reply.as_bytes()[2])
            }
            Output::Host(HostOutput::Log(l)) => logs.push(l.to_string()),
            _ => {}
        }
    }
    assert_eq!(status, Some(2), "no endpoint: EINVAL");
    assert!(
        logs.iter().any(|l| l.contains("no provider for port 1")),
        "{logs:?}"
    );
}

/// A provider that loses every request: the bug a move-only `PendingReply` makes
/// visible. Debug builds log a warning for each reply dropped unanswered.
struct Forgetful;

impl Provider for Forgetful {
    fn name(&self) -> &str {
        "forgetful"
    }
    fn resolve(&mut self, _: &mut Ctx<'_>, _: EndpointId, _: Resolve, reply: PendingReply) {
        drop(reply);
    }
    fn query(&mut self, _: &mut Ctx<'_>, _: EndpointId, _: &[u8; 64], reply: PendingReply) {
        drop(reply);
    }
}

#[cfg(debug_assertions)]
#[test]
fn a_reply_dropped_unanswered_is_logged_in_debug_builds() {
    let mut config = reference::config();
    let (options, _) = Options::parse(
        "ibacm_opts.cfg",
        &format!("{}provider forgetful default\n", reference::OPTS),
    );
    config.options = options;
    let mut e = Engine::with_providers(config, 0, Instant::ZERO, vec![Box::new(Forgetful)]);
    e.handle(Instant::ZERO, Input::DeviceAdded(reference::device()));
    let req = support::requests::resolve_ip("10.0.0.1", "10.0.0.77");
    e.handle(
        Instant::ZERO,
        Input::ClientRequest {
            conn: ConnId(1),
            bytes: &req,
        },
    );
    let mut logs = Vec::new();
    while let Some(out) = e.poll_output() {
        if let Output::Host(HostOutput::Log(l)) = out {
            logs.push(l.to_string());
        }
    }
    assert!(
        logs.iter()
            .any(|l| l.contains("1 request(s) dropped by a provider without an answer")),
        "{logs:?}"
    );
}

/// A provider whose answers are produced elsewhere (as a C plugin's threads do): it holds
/// each request and answers on the next [`Input::ProviderWake`].
#[derive(Default)]
struct Deferred {
    held: Vec<PendingReply>,
}

impl Provider for Deferred {
    fn name(&self) -> &str {
        "deferred"
    }
    fn resolve(&mut self, _: &mut Ctx<'_>, _: EndpointId, _: Resolve, reply: PendingReply) {
        self.held.push(reply);
    }
    fn query(&mut self, _: &mut Ctx<'_>, _: EndpointId, _: &[u8; 64], reply: PendingReply) {
        self.held.push(reply);
    }
    fn wake(&mut self, cx: &mut Ctx<'_>) {
        for reply in self.held.drain(..) {
            cx.complete(reply, Outcome::Failed(Status::ENODATA));
        }
    }
}

fn replies_to(e: &mut Engine, conn: ConnId) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while let Some(out) = e.poll_output() {
        if let Output::Host(HostOutput::Client(ClientOutput::Reply { conn: c, reply })) = out
            && c == conn
        {
            v.push(reply.as_bytes().to_vec());
        }
    }
    v
}

#[test]
fn a_provider_answers_on_wake() {
    let mut config = reference::config();
    let (options, _) = Options::parse(
        "ibacm_opts.cfg",
        &format!("{}provider deferred default\n", reference::OPTS),
    );
    config.options = options;
    let providers: Vec<Box<dyn Provider>> = vec![Box::new(Deferred::default())];
    let mut e = Engine::with_providers(config, 0, Instant::ZERO, providers);
    e.handle(Instant::ZERO, Input::DeviceAdded(reference::device()));
    let _ = replies_to(&mut e, ConnId(1));
    let mut req = vec![0u8; 160];
    req[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 160, 0]);
    req[16] = 1;
    req[20] = 2;
    req[24..28].copy_from_slice(&[10, 0, 0, 1]);
    req[88] = 2;
    req[92] = 2;
    req[96..100].copy_from_slice(&[10, 0, 0, 77]);
    let conn = ConnId(1);
    e.handle(Instant::ZERO, Input::ClientRequest { conn, bytes: &req });
    assert!(replies_to(&mut e, conn).is_empty(), "held until the wake");
    e.handle(Instant::from_millis(1), Input::ProviderWake);
    let replies = replies_to(&mut e, conn);
    assert_eq!(replies.len(), 1, "answered once");
    assert_eq!(replies[0][2], Status::ENODATA.0);
    e.handle(Instant::from_millis(2), Input::ProviderWake);
    assert!(replies_to(&mut e, conn).is_empty(), "and only once");
}

/// A provider with one timer, which records when it fires. A resolve answers at
/// once and arms the timer `delay` after the request's instant.
struct Timed {
    due: Option<Instant>,
    delay: std::time::Duration,
    fired: Fired,
}

/// The instants a [`Timed`] provider's timer fired at, shared with the test.
type Fired = std::rc::Rc<std::cell::RefCell<Vec<Instant>>>;

impl Provider for Timed {
    fn name(&self) -> &str {
        "timed"
    }
    fn resolve(&mut self, cx: &mut Ctx<'_>, _: EndpointId, _: Resolve, reply: PendingReply) {
        self.due = Some(cx.now() + self.delay);
        cx.complete(reply, Outcome::Failed(Status::ENODATA));
    }
    fn query(&mut self, cx: &mut Ctx<'_>, _: EndpointId, _: &[u8; 64], reply: PendingReply) {
        cx.complete(reply, Outcome::Failed(Status::ENODATA));
    }
    fn handle_timeout(&mut self, cx: &mut Ctx<'_>) {
        self.due = None;
        self.fired.borrow_mut().push(cx.now());
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.due
    }
}

/// An engine whose one port is served by a [`Timed`] provider with `delay`, and the
/// instants its timer fired at.
fn timed_engine(delay: std::time::Duration) -> (Engine, Fired) {
    let fired = Fired::default();
    let mut config = reference::config();
    let (options, _) = Options::parse(
        "ibacm_opts.cfg",
        &format!("{}provider timed default\n", reference::OPTS),
    );
    config.options = options;
    let timed = Timed {
        due: None,
        delay,
        fired: fired.clone(),
    };
    let mut e = Engine::with_providers(config, 0, Instant::ZERO, vec![Box::new(timed)]);
    e.handle(Instant::ZERO, Input::DeviceAdded(reference::device()));
    (e, fired)
}

/// One client RESOLVE at `at`, its outputs drained.
fn resolve_at(e: &mut Engine, at: Instant) {
    let req = support::requests::resolve_ip("10.0.0.1", "10.0.0.77");
    e.handle(
        at,
        Input::ClientRequest {
            conn: ConnId(1),
            bytes: &req,
        },
    );
    while e.poll_output().is_some() {}
}

#[test]
fn client_requests_at_one_instant_look_at_the_timers_once() {
    let (mut e, fired) = timed_engine(std::time::Duration::from_millis(5));
    let ms = |n: u64| Instant::ZERO + std::time::Duration::from_millis(n);
    // The request at 0 arms the timer for 5 ms.
    resolve_at(&mut e, ms(0));
    assert_eq!(e.poll_timeout(), Some(ms(5)));
    // The first input at 5 ms fires it, before the request, which arms it again.
    resolve_at(&mut e, ms(5));
    assert_eq!(*fired.borrow(), vec![ms(5)]);
    assert_eq!(e.poll_timeout(), Some(ms(10)));
    // Later at 10 ms: the first request fires the timer and arms it for 15 ms.
    resolve_at(&mut e, ms(10));
    assert_eq!(*fired.borrow(), vec![ms(5), ms(10)]);
    assert_eq!(e.poll_timeout(), Some(ms(15)));
}

#[test]
fn a_timer_armed_with_no_delay_fires_at_the_next_tick_of_that_instant() {
    let (mut e, fired) = timed_engine(std::time::Duration::ZERO);
    let at = Instant::ZERO + std::time::Duration::from_millis(1);
    for _ in 0..3 {
        resolve_at(&mut e, at);
    }
    // The first request fired nothing (no timer yet) and armed one due at once; the
    // two after it, at the same instant, did not look at the timers again.
    assert!(fired.borrow().is_empty());
    // The engine asks for a tick at once, and the tick fires it.
    assert_eq!(e.poll_timeout(), Some(at));
    e.handle(at, Input::Tick);
    assert_eq!(*fired.borrow(), vec![at]);
    assert_eq!(e.poll_timeout(), None);
}
