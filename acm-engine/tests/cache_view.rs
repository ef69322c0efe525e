//! The published cache view ([`acm_engine::CacheView`]) against the engine itself:
//! every request the view answers gets the bytes the engine returns for it, and
//! [`Input::CacheHits`] counts a hit as the engine's own did (global and per endpoint);
//! random requests never get a hit the engine would not give; each invalidation (an SM
//! event, a LID, pkey or SM change, a reload, expiry, eviction, an endpoint going, the
//! log level raised) is in the next view; a publication with nothing changed is
//! `None`.

mod support;

use acm_engine::config::{AddrFile, OptionLines, Options, Reconfig};
use acm_engine::{
    CacheView, ConnId, Counters, EngineConfig, Input, Instant, PortAttrs, PortEvent,
    VIEW_REPLY_MAX, ViewAnswer,
};
use acm_proto::mad::MAD_LEN;
use acm_proto::notice::{NoticeRepr, SmTrap};
use quickcheck::{Arbitrary, Gen, QuickCheck};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::requests::{
    DEST, ENTRY, HDR, NODELAY, SOURCE, T_IP, T_IP6, T_NAME, T_PATH, entry, ip, name, perf_index,
    resolve, resolve_ip, resolve_ip_nodelay, resolve_lid,
};
use support::{Node, hex, reference, reference_fabric};

/// The reference fabric's configuration, logging at the level daemons run at (a
/// Verbose engine logs a line per resolve, and the view then answers nothing).
fn config() -> EngineConfig {
    reference_fabric::config(Some(0))
}

fn started(config: EngineConfig) -> Node {
    let mut n = Node::new(config, reference::sa(), reference::route());
    n.input(Input::DeviceAdded(reference::device()));
    n.settle();
    n
}

/// A node and its first view.
struct Viewed {
    node: Node,
    view: Arc<CacheView>,
}

impl Viewed {
    fn new(node: Node) -> Self {
        let mut node = node;
        let view = node
            .engine
            .publish_view()
            .expect("the first call publishes");
        Self { node, view }
    }

    /// Takes the next view if the engine published one; whether it did.
    fn refresh(&mut self) -> bool {
        match self.node.engine.publish_view() {
            Some(v) => {
                self.view = v;
                true
            }
            None => false,
        }
    }

    /// What the current view makes of `req` now.
    fn view_answer(&self, req: &[u8]) -> ViewAnswer {
        let mut buf = [0u8; VIEW_REPLY_MAX];
        self.view.answer(self.node.now, req, &mut buf)
    }

    /// Every counter the engine reports: the global ones, then each endpoint's.
    fn counters(&self) -> Vec<Counters> {
        let e = &self.node.engine;
        let mut all = vec![e.counters()];
        for s in e.endpoint_stats() {
            all.push(e.endpoint_counters(s.id).unwrap_or_default());
        }
        all
    }

    /// Asks the latest view and then the engine for `req` on `conn`. A view hit must
    /// be the engine's reply byte for byte (the view's buffer starts full of junk, so
    /// every byte of the reply is written), the engine's hit must change nothing the
    /// view shows, and `Input::CacheHits` must count as the engine's own hit did.
    fn ask(&mut self, conn: ConnId, req: &[u8]) -> ViewAnswer {
        self.refresh();
        let mut buf = [0xA5u8; VIEW_REPLY_MAX];
        let answer = self.view.answer(self.node.now, req, &mut buf);
        let pending = self.node.engine.client_pending(conn);
        let before = self.counters();
        let reply = self.node.request(conn, req);
        if let ViewAnswer::Hit { len, ep } = answer {
            assert_eq!(pending, 0, "a hit on a connection with nothing pending");
            let reply = reply.expect("the engine answers a hit at once");
            assert_eq!(hex(&buf[..len]), hex(&reply), "request {}", hex(req));
            let after = self.counters();
            assert!(
                self.node.engine.publish_view().is_none(),
                "a hit changes nothing the view shows"
            );
            self.node.input(Input::CacheHits { ep, hits: 1 });
            let again = self.counters();
            assert_eq!(
                delta(&before, &after),
                delta(&after, &again),
                "CacheHits counts as the engine's hit"
            );
        }
        answer
    }
}

fn delta(a: &[Counters], b: &[Counters]) -> Vec<[u64; 7]> {
    a.iter()
        .zip(b)
        .map(|(x, y)| std::array::from_fn(|i| y.0[i].wrapping_sub(x.0[i])))
        .collect()
}

fn is_hit(a: ViewAnswer) -> bool {
    matches!(a, ViewAnswer::Hit { .. })
}

const A: &str = "10.0.0.1";
const B: &str = "10.0.0.2";
const C: ConnId = ConnId(1);

/// A node whose view answers A → B (its route asked once, through the engine).
fn hitting() -> Viewed {
    let mut v = Viewed::new(started(config()));
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward, "cold");
    assert!(is_hit(v.ask(C, &resolve_ip(A, B))));
    v
}

#[test]
fn the_views_hits_are_the_engines_replies() {
    let mut v = Viewed::new(started(config()));
    // Loopback entries are READY from the start.
    assert!(is_hit(v.ask(C, &resolve_ip(A, A))));
    // A preloaded host: its route is asked through the engine once, then cached.
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
    assert!(is_hit(v.ask(C, &resolve_ip(A, B))));
    assert!(is_hit(v.ask(ConnId(2), &resolve_ip(A, B))));
    // NODELAY is read only on a miss.
    assert!(is_hit(v.ask(C, &resolve_ip_nodelay(A, B))));
    // Names, the source matched case-insensitively as the core does.
    let by_name = |src: &str| resolve(&[name(SOURCE, src), name(DEST, "host2")]);
    assert_eq!(v.ask(C, &by_name("fakehost")), ViewAnswer::Forward);
    assert!(is_hit(v.ask(C, &by_name("fakehost"))));
    assert!(is_hit(v.ask(C, &by_name("FakeHost"))));
    // IPv6.
    assert_eq!(
        v.ask(C, &resolve_ip("fd00::1", "fd00::2")),
        ViewAnswer::Forward
    );
    assert!(is_hit(v.ask(C, &resolve_ip("fd00::1", "fd00::2"))));
    // Destination first, and an entry with no flags, which the core skips.
    let odd = resolve(&[ip(DEST, B), ip(0, "1.2.3.4"), ip(SOURCE, A)]);
    assert!(is_hit(v.ask(C, &odd)));
    // A LID destination, cached READY by a path resolve.
    assert!(v.node.request(C, &resolve_lid(7)).is_some());
    let lid = resolve(&[ip(SOURCE, A), entry(DEST, 0x05, &7u16.to_be_bytes())]);
    assert!(is_hit(v.ask(C, &lid)));

    // What the view leaves to the engine.
    let forwarded: Vec<(&str, Vec<u8>)> = vec![
        ("no source", resolve(&[ip(DEST, B)])),
        ("a source no endpoint has", resolve_ip("10.9.9.9", B)),
        (
            "two sources",
            resolve(&[ip(SOURCE, A), ip(SOURCE, A), ip(DEST, B)]),
        ),
        (
            "two destinations",
            resolve(&[ip(SOURCE, A), ip(DEST, B), ip(DEST, B)]),
        ),
        ("no destination", resolve(&[ip(SOURCE, A)])),
        (
            "a path source",
            resolve(&[entry(SOURCE, T_PATH, &[0; 64]), ip(DEST, B)]),
        ),
        ("a path resolve", resolve_lid(7)),
        ("an uncached destination", resolve_ip(A, "10.0.0.77")),
        ("the destination's padding differs", {
            let mut e = ip(DEST, B);
            e[40] = 1;
            resolve(&[ip(SOURCE, A), e])
        }),
        ("a PERF_QUERY", perf_index(0)),
        ("a short frame", resolve_ip(A, B)[..HDR + ENTRY].to_vec()),
    ];
    for (what, req) in &forwarded {
        assert_eq!(v.ask(ConnId(3), req), ViewAnswer::Forward, "{what}");
    }
    let wrong_length = {
        let mut r = resolve_ip(A, B);
        r[6..8].copy_from_slice(&200u16.to_ne_bytes());
        r
    };
    assert_eq!(v.view_answer(&wrong_length), ViewAnswer::Forward);
}

#[test]
fn hits_counted_back_keep_perf_query_exact() {
    let mut v = hitting();
    let before = v.counters();
    let mut buf = [0u8; VIEW_REPLY_MAX];
    let mut hits = 0;
    for _ in 0..5 {
        if let ViewAnswer::Hit { ep, .. } = v.view.answer(v.node.now, &resolve_ip(A, B), &mut buf) {
            v.node.input(Input::CacheHits { ep, hits: 1 });
            hits += 1;
        }
    }
    assert_eq!(hits, 5);
    // The same five through the engine, on a twin node in the same state.
    let mut twin = hitting();
    let twin_before = twin.counters();
    for _ in 0..5 {
        twin.node.request(C, &resolve_ip(A, B)).expect("a hit");
    }
    assert_eq!(
        delta(&before, &v.counters()),
        delta(&twin_before, &twin.counters())
    );
    // And PERF_QUERY replies say so, global (index 0) and for the endpoint (1).
    for index in [0, 1] {
        let ours = v.node.request(C, &perf_index(index)).expect("answered");
        let theirs = twin.node.request(C, &perf_index(index)).expect("answered");
        assert_eq!(hex(&ours), hex(&theirs), "PERF_QUERY index {index}");
    }
}

#[test]
fn nothing_changed_publishes_nothing_and_one_new_route_publishes_a_view() {
    let mut v = Viewed::new(started(config()));
    assert!(v.node.engine.publish_view().is_none());
    v.node.advance(Duration::from_secs(5));
    assert!(v.node.engine.publish_view().is_none(), "time alone");
    assert_eq!(v.view_answer(&resolve_ip(A, B)), ViewAnswer::Forward);
    // The route to B: one destination becomes READY.
    v.node.request(C, &resolve_ip(A, B)).expect("resolved");
    assert!(v.refresh(), "a view with the new route");
    assert!(is_hit(v.view_answer(&resolve_ip(A, B))));
    assert!(!v.refresh());
}

/// Reloads `opts` (and the address file `addrs`, if given).
fn reload(node: &mut Node, opts: &str, addrs: Option<&str>) {
    let (mut options, diags) = Options::parse("ibacm_opts.cfg", opts);
    assert!(diags.is_empty(), "{diags:?}");
    options.sm_events = false;
    let addr_file = addrs.map(|t| AddrFile::parse("ibacm_addr.cfg", t).0);
    let r = Reconfig {
        options,
        option_lines: OptionLines::scan("ibacm_opts.cfg", opts),
        addr_file,
    };
    node.input(Input::Reconfigure(&r));
    node.settle();
}

/// The reference options at log level 0, with `extra` lines.
fn opts(extra: &str) -> String {
    format!("{}\nlog_level 0\n{extra}", reference::OPTS)
}

/// Runs `change` on a node whose view answers A → B; the next view must forward it.
#[track_caller]
fn invalidated_by(change: impl FnOnce(&mut Node)) {
    let mut v = hitting();
    change(&mut v.node);
    assert!(v.refresh(), "the change publishes a view");
    assert_eq!(v.view_answer(&resolve_ip(A, B)), ViewAnswer::Forward);
    // And the engine agrees: no cache hit.
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
}

fn port_change(event: PortEvent) -> impl FnOnce(&mut Node) {
    move |node| node.port_event(reference::PORT, event)
}

#[test]
fn a_lid_change_is_in_the_next_view() {
    invalidated_by(port_change(PortEvent::LidChange(PortAttrs {
        lid: 5,
        gids: vec![reference::gid_of_lid(5)],
        ..reference::port_attrs()
    })));
}

#[test]
fn an_sm_change_is_in_the_next_view() {
    invalidated_by(port_change(PortEvent::SmChange(PortAttrs {
        sm_lid: 2,
        ..reference::port_attrs()
    })));
}

#[test]
fn a_pkey_change_is_in_the_next_view() {
    invalidated_by(port_change(PortEvent::PkeyChange(PortAttrs {
        pkeys: vec![0x8001],
        ..reference::port_attrs()
    })));
}

#[test]
fn a_port_going_down_is_in_the_next_view() {
    invalidated_by(port_change(PortEvent::Down));
}

#[test]
fn a_reload_without_the_source_address_is_in_the_next_view() {
    let addrs = reference::ADDRS.replace("10.0.0.1 ", "10.0.0.9 ");
    invalidated_by(|node| reload(node, &opts(""), Some(&addrs)));
}

#[test]
fn a_reload_raising_the_log_level_to_verbose_is_in_the_next_view() {
    invalidated_by(|node| reload(node, &opts("log_level 2\n"), None));
}

#[test]
fn pending_per_conn_zero_answers_nothing() {
    let mut config = config();
    config.limits.pending_per_conn = 0;
    let mut v = Viewed::new(started(config));
    assert_eq!(v.ask(C, &resolve_ip(A, A)), ViewAnswer::Forward);
}

#[test]
fn an_sm_event_flush_is_in_the_next_view() {
    let mut config = config();
    config.options.sm_events = true;
    let sa = {
        let mut sa = reference::sa();
        // The SA also takes the subscriptions (InformInfo Sets), answered as set.
        Box::new(move |m: &[u8; MAD_LEN]| {
            if u16::from_be_bytes([m[16], m[17]]) != 0x0003 {
                return sa(m);
            }
            let mut r = m.to_vec();
            r[3] = 0x81;
            Some(r)
        })
    };
    let mut node = Node::with_sm_events(config, sa, reference::route());
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let mut v = Viewed::new(node);
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
    assert!(is_hit(v.ask(C, &resolve_ip(A, B))));
    let peer = reference::gid_of_lid(2);
    let mut mad = [0u8; MAD_LEN];
    acm_proto::sa::SaHeaderRepr {
        mad: acm_proto::mad::MadHeaderRepr {
            base_version: 1,
            mgmt_class: acm_proto::mad::MgmtClass::SA,
            class_version: 2,
            method: acm_proto::mad::Method::REPORT,
            tid: 0x42,
            attr_id: acm_proto::mad::AttrId::NOTICE,
            ..acm_proto::mad::MadHeaderRepr::default()
        },
        ..acm_proto::sa::SaHeaderRepr::default()
    }
    .emit(&mut mad);
    NoticeRepr::sm_trap(SmTrap::GidOutOfService(peer), 1, reference::gid_of_lid(1))
        .emit(acm_proto::sa::SaPacket::new_unchecked(&mut mad[..]).data_mut());
    v.node.input(Input::SaResponse {
        port: reference::PORT,
        mad: &mad[..],
    });
    assert!(v.refresh());
    assert_eq!(v.view_answer(&resolve_ip(A, B)), ViewAnswer::Forward);
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
}

#[test]
fn a_stale_route_is_forwarded_as_time_passes() {
    let mut config = config();
    config.options.route_timeout = 2;
    let mut v = Viewed::new(started(config));
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
    assert!(is_hit(v.ask(C, &resolve_ip(A, B))));
    // Three minutes later the same view no longer answers, and nor does the cache.
    let later = v.node.now + Duration::from_secs(180);
    let mut buf = [0u8; VIEW_REPLY_MAX];
    assert_eq!(
        v.view.answer(later, &resolve_ip(A, B), &mut buf),
        ViewAnswer::Forward
    );
    assert!(is_hit(v.view.answer(
        v.node.now,
        &resolve_ip(A, B),
        &mut buf
    )));
    v.node.advance(Duration::from_secs(180));
    assert_eq!(v.ask(C, &resolve_ip(A, B)), ViewAnswer::Forward);
}

#[test]
fn an_eviction_is_in_the_next_view() {
    // Room for the six pinned entries (three own addresses, three preloaded hosts)
    // and four learned ones.
    let mut config = config();
    config.options.max_dest_cache_bytes = 10 * 261;
    let mut v = Viewed::new(started(config));
    let lid = |l: u16| resolve(&[ip(SOURCE, A), entry(DEST, 0x05, &l.to_be_bytes())]);
    assert!(v.node.request(C, &resolve_lid(2)).is_some());
    assert!(is_hit(v.ask(C, &lid(2))));
    for l in 3..20 {
        assert!(v.node.request(C, &resolve_lid(l)).is_some());
    }
    assert!(v.refresh());
    assert_eq!(v.view_answer(&lid(2)), ViewAnswer::Forward, "evicted");
    assert!(is_hit(v.ask(C, &lid(19))), "the newest stays");
    let stats = v.node.engine.endpoint_stats();
    let cache = stats[0].cache.expect("ibacmp's cache");
    assert!(cache.evictions > 0, "{cache:?}");
}

/// One request of a random script: entries from a pool that hits the cache now and
/// then, flags and types among the ones that matter, and headers mangled at times.
#[derive(Debug, Clone)]
struct RandomRequest(Vec<u8>);

impl Arbitrary for RandomRequest {
    fn arbitrary(g: &mut Gen) -> Self {
        const FLAGS: [u32; 7] = [
            SOURCE,
            DEST,
            SOURCE | DEST,
            DEST | NODELAY,
            0,
            0x8000_0000,
            4,
        ];
        const ADDRS: [(u16, &str); 8] = [
            (T_IP, "10.0.0.1"),
            (T_IP, "10.0.0.2"),
            (T_IP, "10.0.0.5"),
            (T_IP6, "fd00::1"),
            (T_IP6, "fd00::2"),
            (T_NAME, "fakehost"),
            (T_NAME, "host2"),
            (T_NAME, "FAKEHOST"),
        ];
        let n = usize::arbitrary(g) % 4;
        let mut entries = Vec::new();
        // Mostly a source and a destination, to reach the cache.
        if bool::arbitrary(g) {
            let (ty, a) = *g.choose(&ADDRS).expect("pool");
            entries.push(addr_entry(SOURCE, ty, a));
            let (ty, a) = *g.choose(&ADDRS).expect("pool");
            entries.push(addr_entry(DEST, ty, a));
        }
        for _ in 0..n {
            let flags = *g.choose(&FLAGS).expect("flags");
            let (mut ty, a) = *g.choose(&ADDRS).expect("pool");
            if u8::arbitrary(g) % 8 == 0 {
                ty = *g.choose(&[T_PATH, 0, 4, 5, 9]).expect("types");
            }
            let mut e = addr_entry(flags, ty, a);
            if u8::arbitrary(g) % 8 == 0 {
                let i = 8 + usize::arbitrary(g) % 64;
                e[i] ^= 1 + u8::arbitrary(g) % 255;
            }
            entries.push(e);
        }
        if bool::arbitrary(g) {
            entries.reverse();
        }
        let mut req = resolve(&entries);
        match u8::arbitrary(g) % 10 {
            0 => req[0] = u8::arbitrary(g),
            1 => req[1] = u8::arbitrary(g),
            2 => req[6..8].copy_from_slice(&u16::arbitrary(g).to_ne_bytes()),
            3 => {
                let i = usize::arbitrary(g) % HDR;
                req[i] = u8::arbitrary(g);
            }
            4 => {
                let keep = usize::arbitrary(g) % (req.len() + 1);
                req.truncate(keep);
            }
            _ => {}
        }
        Self(req)
    }
}

fn addr_entry(flags: u32, ty: u16, a: &str) -> [u8; ENTRY] {
    match ty {
        T_IP | T_IP6 => {
            let mut e = ip(flags, a);
            e[4..6].copy_from_slice(&ty.to_ne_bytes());
            e
        }
        _ => entry(flags, ty, a.as_bytes()),
    }
}

static RANDOM_HITS: AtomicUsize = AtomicUsize::new(0);

fn no_hit_the_engine_would_not_give(script: Vec<RandomRequest>) -> bool {
    let mut v = Viewed::new(started(config()));
    // Warm a few routes so that hits are possible.
    for warm in [resolve_ip(A, B), resolve_ip("fd00::1", "fd00::2")] {
        v.node.request(C, &warm);
    }
    for (i, RandomRequest(req)) in script.iter().enumerate() {
        let conn = ConnId(10 + (i % 3) as u64);
        if is_hit(v.ask(conn, req)) {
            RANDOM_HITS.fetch_add(1, Ordering::Relaxed);
        }
    }
    true
}

#[test]
fn random_requests_never_get_a_hit_the_engine_would_not_give() {
    QuickCheck::new()
        .tests(40)
        .quickcheck(no_hit_the_engine_would_not_give as fn(Vec<RandomRequest>) -> bool);
    assert!(
        RANDOM_HITS.load(Ordering::Relaxed) > 0,
        "the scripts reached the cache"
    );
}

#[test]
fn an_empty_view_forwards_everything() {
    let mut buf = [0u8; VIEW_REPLY_MAX];
    let view = CacheView::empty();
    assert_eq!(
        view.answer(Instant::ZERO, &resolve_ip(A, A), &mut buf),
        ViewAnswer::Forward
    );
}
