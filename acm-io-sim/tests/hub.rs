//! The fabric hub: a hub thread on a temporary socket, and hosts of
//! `testdata/fabrics/demo.toml` attached through `HubHost`, each driven by a small
//! real-time loop.
//!
//! Every wait is bounded: the test hosts give up at a deadline and the test thread takes
//! their results from a channel with a timeout, so a broken hub fails the test instead
//! of hanging it.

mod hub_support;

use acm_engine::HostOutput;
use acm_engine::{ClientOutput, ConnId, Input, Instant};
use acm_io_sim::fabric;
use acm_io_sim::hub::{Hub, HubClient, HubError, HubHost, HubStats};
use acm_io_sim::sim::requests;
use acm_io_sim::{FabricSpec, HostId};
use acm_proto::client::{Direction, EpAddrRepr, EpAddress, ResolveRepr, Status};
use acm_proto::path_record::PathRecordRepr;
use hub_support::{TempDir, next_change, next_event};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant as WallInstant};

/// The longest any part of a test may take.
const DEADLINE: Duration = Duration::from_secs(10);

fn demo() -> FabricSpec {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/fabrics/demo.toml");
    FabricSpec::parse(&std::fs::read_to_string(path).expect("demo.toml")).expect("valid")
}

/// A hub serving in its own thread; `stop` ends it and hands back its counters.
struct RunningHub {
    path: PathBuf,
    flag: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<HubStats, String>>,
}

impl RunningHub {
    fn start(spec: FabricSpec, path: PathBuf) -> Self {
        // Bound before the thread starts, so hosts can attach at once.
        let mut hub = Hub::bind(spec, &path).expect("bind the hub");
        hub.set_logging(true);
        let flag = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let f = Arc::clone(&flag);
        thread::spawn(move || {
            let r = hub.serve_until(&f).map_err(|e| e.to_string());
            let stats = hub.stats();
            drop(hub);
            let _ = tx.send(r.map(|()| stats));
        });
        Self { path, flag, done }
    }

    fn stop(self) -> HubStats {
        self.flag.store(true, Ordering::Relaxed);
        let stats = self
            .done
            .recv_timeout(Duration::from_secs(5))
            .expect("the hub stops within 5 s")
            .expect("the hub served without error");
        assert!(!self.path.exists(), "the hub removes its socket file");
        stats
    }
}

/// A hub on the demo fabric, serving at `hub.sock` in `dir`, and a client attached to it
/// as host `name`.
fn hub_with(dir: &TempDir, name: &str) -> (RunningHub, HubClient) {
    let hub = RunningHub::start(demo(), dir.path("hub.sock"));
    let (client, _) = HubClient::attach(&hub.path, dir.path("a.sock"), name).unwrap();
    (hub, client)
}

/// What the two test hosts share: how many hosts are ready (their first multicast group
/// is attached) and how many have their answer.
#[derive(Default)]
struct Progress {
    ready: AtomicUsize,
    done: AtomicUsize,
}

/// One host: its engine on a real-time clock, attached through a `HubHost`.
struct TestHost {
    name: String,
    host: HubHost,
    epoch: WallInstant,
    replies: HashMap<ConnId, Vec<u8>>,
    logs: Vec<String>,
}

impl TestHost {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Ready once the engine attached its first multicast group.
    fn ready(&self) -> bool {
        self.host.attached_groups() > 0
    }

    fn handle(&mut self, input: Input<'_>) -> Result<(), String> {
        let now = self.now();
        self.host.handle(now, input);
        self.drain()
    }

    /// Takes everything the engine has for the host (its fabric operations went to the
    /// hub): client replies are kept (and their connections closed), logs are kept for
    /// failures.
    fn drain(&mut self) -> Result<(), String> {
        loop {
            let mut closed = Vec::new();
            while let Some(out) = self.host.poll_output() {
                match out {
                    HostOutput::Client(ClientOutput::Reply { conn, reply }) => {
                        self.replies.insert(conn, reply.as_bytes().to_vec());
                        closed.push(conn);
                    }
                    HostOutput::Client(ClientOutput::Close { conn, reason }) => {
                        return Err(format!(
                            "{}: connection {conn:?} closed: {reason}",
                            self.name
                        ));
                    }
                    HostOutput::Client(
                        ClientOutput::Netlink(_) | ClientOutput::KernelTimeout { .. },
                    ) => {}
                    HostOutput::Log(ev) => {
                        self.logs
                            .push(format!("{} {}: {ev}", self.now(), self.name))
                    }
                }
            }
            if let Some(e) = self.host.take_error() {
                return Err(format!("{}: hub: {e}", self.name));
            }
            if closed.is_empty() {
                return Ok(());
            }
            for conn in closed {
                let now = self.now();
                self.host.handle(now, Input::ClientClosed(conn));
            }
        }
    }

    /// Waits for one event (or the engine's next timer, or 10 ms) and handles it.
    fn pump(&mut self) -> Result<(), String> {
        let now = self.now();
        let wait = self
            .host
            .engine_ref()
            .poll_timeout()
            .map_or(Duration::from_millis(10), |t| {
                t.saturating_duration_since(now)
            })
            .min(Duration::from_millis(10));
        match self.host.recv(wait) {
            Ok(Some(ev)) => self.handle(ev.as_input()),
            Ok(None) => self.handle(Input::Tick),
            Err(e) => Err(format!("{}: recv: {e}", self.name)),
        }
    }

    fn fail(&self, why: &str) -> String {
        format!("{}: {why}\n{}", self.name, self.logs.join("\n"))
    }
}

/// Attaches `name` to the hub, brings its engine up, and once both hosts are ready
/// resolves `dst` (from `src`, or from the source the routing picks); keeps serving
/// until both hosts have their answer. Returns the RESOLVE reply.
fn run_host(
    spec: &FabricSpec,
    hub: &Path,
    sock: &Path,
    name: &str,
    src: Option<IpAddr>,
    dst: IpAddr,
    progress: &Progress,
) -> Result<Vec<u8>, String> {
    let deadline = WallInstant::now() + DEADLINE;
    let host = HubHost::attach(
        hub,
        sock,
        name,
        |setup| {
            assert_eq!(setup.name, name);
            fabric::engine_config(spec, setup.host)
        },
        0x5eed + spec.host_index(name).expect("a host of the spec").index() as u64,
        Instant::ZERO,
    )
    .map_err(|e| format!("{name}: attach: {e}"))?;
    let epoch = WallInstant::now();
    let mut d = TestHost {
        name: name.to_owned(),
        host,
        epoch,
        replies: HashMap::new(),
        logs: Vec::new(),
    };
    d.drain()?;
    let conn = ConnId(1);
    let (mut counted_ready, mut sent, mut counted_done) = (false, false, false);
    loop {
        if WallInstant::now() > deadline {
            return Err(d.fail(&format!(
                "timed out (ready {}, sent {sent}, answered {counted_done})",
                d.ready()
            )));
        }
        d.pump().map_err(|e| d.fail(&e))?;
        if d.ready() && !counted_ready {
            counted_ready = true;
            progress.ready.fetch_add(1, Ordering::SeqCst);
        }
        if !sent && progress.ready.load(Ordering::SeqCst) >= 2 {
            sent = true;
            let bytes = requests::resolve_ip(src, dst, false);
            d.handle(Input::ClientRequest {
                conn,
                bytes: &bytes,
            })?;
        }
        if !counted_done && d.replies.contains_key(&conn) {
            counted_done = true;
            progress.done.fetch_add(1, Ordering::SeqCst);
        }
        // Serve the peer until it has its answer too.
        if counted_done && progress.done.load(Ordering::SeqCst) >= 2 {
            break;
        }
    }
    let reply = d.replies.remove(&conn).unwrap_or_default();
    d.host
        .detach()
        .map_err(|e| format!("{name}: detach: {e}"))?;
    assert!(!sock.exists(), "the client removes its socket file");
    Ok(reply)
}

/// The path of a successful RESOLVE reply.
fn resolved_path(reply: &[u8]) -> PathRecordRepr {
    let msg = ResolveRepr::parse(reply, Direction::Response).expect("a RESOLVE reply");
    assert_eq!(msg.header.status, Status::SUCCESS, "RESOLVE status");
    match msg.entries.first().map(EpAddrRepr::address) {
        Some(EpAddress::Path(path)) => path,
        other => panic!("a PATH entry first, not {other:?}"),
    }
}

#[test]
fn two_hosts_attached_through_the_hub_resolve_each_other() {
    let started = WallInstant::now();
    let dir = TempDir::new("resolve");
    let spec = demo();
    let hub = RunningHub::start(spec.clone(), dir.path("hub.sock"));
    let progress = Arc::new(Progress::default());
    let (tx, rx) = mpsc::channel();
    // node1 names its source; node2 lets the routing pick it (a local SourceQuery).
    let jobs = [
        ("node1", Some("10.0.0.1"), "10.0.0.2"),
        ("node2", None, "10.0.0.1"),
    ];
    for (name, src, dst) in jobs {
        let (spec, hub_path, sock) = (
            spec.clone(),
            hub.path.clone(),
            dir.path(&format!("{name}.sock")),
        );
        let (progress, tx) = (Arc::clone(&progress), tx.clone());
        let src = src.map(|s| s.parse().unwrap());
        let dst = dst.parse().unwrap();
        thread::spawn(move || {
            let r = run_host(&spec, &hub_path, &sock, name, src, dst, &progress);
            let _ = tx.send((name, r));
        });
    }
    let mut replies = HashMap::new();
    for _ in 0..2 {
        let (name, r) = rx
            .recv_timeout(DEADLINE + Duration::from_secs(2))
            .expect("both test hosts finish");
        replies.insert(name, r.unwrap_or_else(|e| panic!("{e}")));
    }
    let stats = hub.stop();

    let p1 = resolved_path(&replies["node1"]);
    assert_eq!(p1.dlid, 2, "node1 → node2's LID");
    assert_eq!(
        p1.dgid,
        spec.port_gid(HostId(1), 0, 1),
        "node1 → node2's GID"
    );
    assert_eq!(p1.sgid, spec.port_gid(HostId(0), 0, 1));
    assert_eq!(p1.slid, 1);
    let p2 = resolved_path(&replies["node2"]);
    assert_eq!(p2.dlid, 1, "node2 → node1's LID");
    assert_eq!(
        p2.dgid,
        spec.port_gid(HostId(0), 0, 1),
        "node2 → node1's GID"
    );
    assert_eq!(p2.sgid, spec.port_gid(HostId(1), 0, 1));

    assert_eq!(stats.attaches, 2, "{stats:?}");
    assert!(stats.ud_sends >= 2 && stats.ud_deliveries >= 2, "{stats:?}");
    assert!(stats.sa_sends >= 2 && stats.sa_responses >= 2, "{stats:?}");
    assert_eq!(stats.rejected, 0, "{stats:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn unknown_hosts_are_refused_and_a_second_attachment_replaces_the_first() {
    let dir = TempDir::new("attach");
    let hub = RunningHub::start(demo(), dir.path("hub.sock"));

    match HubClient::attach(&hub.path, dir.path("x.sock"), "nobody") {
        Err(HubError::Refused(m)) => assert!(m.contains("nobody"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path("x.sock").exists(), "a refused client cleans up");

    let (mut first, setup) = HubClient::attach(&hub.path, dir.path("a.sock"), "node3").unwrap();
    assert_eq!((setup.host, setup.sm_lid, setup.sm_sl), (HostId(2), 1, 0));
    assert_eq!(setup.devices.len(), 1);
    assert_eq!(setup.devices[0].name, "mlx5_0");
    assert_eq!(setup.devices[0].ports[0].lid, 3);
    assert_eq!(
        setup.devices[0].ports[0].gids,
        vec![demo().port_gid(HostId(2), 0, 1)]
    );
    assert_eq!(setup.ips.len(), 1);
    assert_eq!(setup.ips[0].addr, "10.0.0.3".parse::<IpAddr>().unwrap());
    assert_eq!(setup.ips[0].prefix_len, Some(24));

    let (second, _) = HubClient::attach(&hub.path, dir.path("b.sock"), "node3").unwrap();
    match first.recv_event(Duration::from_secs(2)) {
        Err(HubError::Closed(reason)) => assert!(reason.contains("replaced"), "{reason}"),
        other => panic!("{other:?}"),
    }
    drop(first);
    second.detach().unwrap();
    let stats = hub.stop();
    assert_eq!(stats.attaches, 2, "{stats:?}");
}

#[test]
fn a_qpn_reserved_before_the_port_is_known_is_kept_when_the_qp_opens() {
    use acm_engine::{DeviceId, EndpointId, FabricEvent, OpenQp, PortId};
    let dir = TempDir::new("create-qp");
    let (hub, mut c) = hub_with(&dir, "node2");
    let open = |ep| OpenQp {
        ep,
        port: PortId {
            device: DeviceId(0),
            port: 1,
        },
        pkey: 0xFFFF,
        pkey_index: 0,
        recv_depth: 4,
        send_depth: 1,
    };
    // Reserved in order of creation: 0x48, then 0x49.
    c.create_qp(EndpointId(7)).unwrap();
    c.create_qp(EndpointId(8)).unwrap();
    let first = next_event(&mut c);
    let second = next_event(&mut c);
    assert_eq!(
        (first, second),
        (
            FabricEvent::QpOpened {
                ep: EndpointId(7),
                result: Ok(0x48)
            },
            FabricEvent::QpOpened {
                ep: EndpointId(8),
                result: Ok(0x49)
            }
        )
    );
    // Opening the second first keeps each endpoint's number; an endpoint that
    // reserved nothing gets the next fresh one.
    c.open_qp(&open(EndpointId(8))).unwrap();
    c.open_qp(&open(EndpointId(7))).unwrap();
    c.open_qp(&open(EndpointId(9))).unwrap();
    let got: Vec<_> = (0..3).map(|_| next_event(&mut c)).collect();
    let qpn = |ep, n| FabricEvent::QpOpened {
        ep: EndpointId(ep),
        result: Ok(n),
    };
    assert_eq!(got, vec![qpn(8, 0x49), qpn(7, 0x48), qpn(9, 0x4A)]);
    c.detach().unwrap();
    hub.stop();
}

/// `addr_prot neigh` through the hub: the hub answers a neighbour question from the
/// spec (docs/protocol/ipoib-neigh.md §4), found for an address some host has in the
/// partition, unreachable for one nobody has and from an interface the asker lacks.
#[test]
fn the_hub_answers_neighbour_questions_from_the_spec() {
    use acm_engine::{FabricEvent, NeighId, NeighQuery, NeighResult, PortId};
    let dir = TempDir::new("neigh");
    let spec = demo();
    let (hub, mut c) = hub_with(&dir, "node1");
    let gid = spec.port_gid(HostId(0), 0, 1);
    let ask = |c: &mut HubClient, id, pkey, dest: &str| {
        c.neigh_query(&NeighQuery {
            id: NeighId(id),
            port: PortId {
                device: acm_engine::DeviceId(0),
                port: 1,
            },
            gid,
            pkey,
            dest: dest.parse().unwrap(),
        })
        .unwrap();
        next_event(c)
    };
    assert_eq!(
        ask(&mut c, 1, 0xffff, "10.0.0.3"),
        FabricEvent::NeighAnswer {
            id: NeighId(1),
            result: NeighResult::Found {
                qpn: fabric::IPOIB_FIRST_QPN,
                gid: spec.port_gid(HostId(2), 0, 1),
            },
        }
    );
    assert_eq!(
        ask(&mut c, 2, 0xffff, "10.0.0.99"),
        FabricEvent::NeighAnswer {
            id: NeighId(2),
            result: NeighResult::Unreachable,
        }
    );
    assert_eq!(
        ask(&mut c, 3, 0x8005, "10.0.0.3"),
        FabricEvent::NeighAnswer {
            id: NeighId(3),
            result: NeighResult::Unreachable,
        },
        "node1 has no interface in partition 5"
    );
    c.detach().unwrap();
    let stats = hub.stop();
    assert_eq!(stats.rejected, 0, "{stats:?}");
}

/// Changes asked by a control socket reach the attached host as its HCA would report
/// them: the event and the port's attributes after it; a removed HCA takes its QPs
/// with it and refuses new ones until it is back; a host that attaches while its HCA
/// is gone hears so at once; a QP error names the port's QPs; a change naming nothing
/// is refused.
#[test]
fn changes_asked_at_run_time_reach_the_host_with_the_new_attributes() {
    use acm_engine::{DeviceId, EndpointId, FabricEvent, OpenQp, PortId, PortState};
    use acm_io_sim::hub::control;
    use acm_io_sim::hub::wire::{Control, PortChange, PortName, TopologyEvent};
    let dir = TempDir::new("changes");
    let (hub, mut c) = hub_with(&dir, "node2");
    let ctl = |change: Control| control::change(&hub.path, &dir.path("ctl.sock"), &change);
    let port = PortName {
        host: "node2".into(),
        hca: 0,
        port: 1,
    };
    let pid = PortId {
        device: DeviceId(0),
        port: 1,
    };
    let port_event = |ev| match ev {
        TopologyEvent::Port {
            port,
            change,
            attrs,
        } => {
            assert_eq!(port, pid);
            (change, attrs)
        }
        other => panic!("not a port change: {other:?}"),
    };

    ctl(Control::PortDown(port.clone())).unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!((change, attrs.state), (PortChange::Error, PortState::Down));
    ctl(Control::PortUp(port.clone())).unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!(
        (change, attrs.state),
        (PortChange::Active, PortState::Active)
    );
    ctl(Control::SetLid {
        port: port.clone(),
        lid: 0x22,
        lmc: 1,
    })
    .unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!(
        (change, attrs.lid, attrs.lmc),
        (PortChange::LidChange, 0x22, 1)
    );
    ctl(Control::SetPkeys {
        port: port.clone(),
        pkeys: vec![0xFFFF, 0x8002],
    })
    .unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!(
        (change, attrs.pkeys),
        (PortChange::PkeyChange, vec![0xFFFF, 0x8002])
    );
    let gid = acm_proto::Gid::from_parts(0xfe80 << 48, 0x99);
    ctl(Control::SetGid {
        port: port.clone(),
        gid,
    })
    .unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!((change, attrs.gids[0]), (PortChange::GidChange, gid));
    // node3's port (LID 3) becomes the SM: SM_CHANGE with the new SM LID, then
    // CLIENT_REREGISTER.
    ctl(Control::SmMove { lid: 3 }).unwrap();
    let (change, attrs) = port_event(next_change(&mut c));
    assert_eq!((change, attrs.sm_lid), (PortChange::SmChange, 3));
    let (change, _) = port_event(next_change(&mut c));
    assert_eq!(change, PortChange::ClientReregister);
    ctl(Control::ClientReregister(port.clone())).unwrap();
    assert_eq!(
        port_event(next_change(&mut c)).0,
        PortChange::ClientReregister
    );

    let open = OpenQp {
        ep: EndpointId(1),
        port: pid,
        pkey: 0xFFFF,
        pkey_index: 0,
        recv_depth: 4,
        send_depth: 1,
    };
    c.open_qp(&open).unwrap();
    assert!(matches!(
        next_event(&mut c),
        FabricEvent::QpOpened { result: Ok(_), .. }
    ));
    let remove = Control::DeviceRemove {
        host: "node2".into(),
        hca: 0,
        fatal: false,
    };
    ctl(remove).unwrap();
    assert_eq!(
        next_change(&mut c),
        TopologyEvent::DeviceGone {
            device: DeviceId(0),
            fatal: false
        }
    );
    c.open_qp(&open).unwrap();
    assert!(matches!(
        next_event(&mut c),
        FabricEvent::QpOpened {
            result: Err(()),
            ..
        }
    ));
    // Attaching again while the HCA is gone: ATTACHED shows its port down, then the
    // notice follows.
    drop(c);
    let (mut c, setup) = HubClient::attach(&hub.path, dir.path("b.sock"), "node2").unwrap();
    assert_eq!(setup.devices[0].ports[0].state, PortState::Down);
    assert!(matches!(
        next_change(&mut c),
        TopologyEvent::DeviceGone { fatal: false, .. }
    ));
    ctl(Control::DeviceAdd {
        host: "node2".into(),
        hca: 0,
    })
    .unwrap();
    match next_change(&mut c) {
        TopologyEvent::DeviceBack(d) => {
            assert_eq!((d.id, d.name.as_str()), (DeviceId(0), "mlx5_0"));
            assert_eq!(d.ports[0].state, PortState::Active, "up as it was");
            assert_eq!(d.ports[0].lid, 0x22, "with its changes");
        }
        other => panic!("not DEVICE_BACK: {other:?}"),
    }
    c.open_qp(&open).unwrap();
    assert!(matches!(
        next_event(&mut c),
        FabricEvent::QpOpened { result: Ok(_), .. }
    ));

    // A QP error names each of the host's QPs on the port.
    ctl(Control::QpError(port.clone())).unwrap();
    assert_eq!(
        next_change(&mut c),
        TopologyEvent::QpFatal { ep: EndpointId(1) }
    );

    let refused = |change| match ctl(change) {
        Err(HubError::Refused(m)) => m,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(
        refused(Control::PortDown(PortName {
            host: "nobody".into(),
            hca: 0,
            port: 1
        })),
        "no host \"nobody\" in the fabric"
    );
    assert_eq!(
        refused(Control::PortDown(PortName { port: 2, ..port })),
        "host node2 has no HCA 0 port 2"
    );
    assert_eq!(refused(Control::SmMove { lid: 999 }), "no port has LID 999");
    assert!(
        !dir.path("ctl.sock").exists(),
        "the control socket is removed"
    );
    drop(c);
    hub.stop();
}
