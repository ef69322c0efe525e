//! Three daemons on their hardware backends (`verbs`, no `--fabric`), each on the
//! emulated HCA as one host of a hub serving `testdata/fabrics/demo.toml`: they
//! resolve one another by IPv4 (with a source, and without one, which the emulated
//! host's routing picks), IPv6, name, LID and GID with Debian's `ib_acme`, over ACM
//! multicast and the SA, with `route_prot sa` and `route_prot acm`. Then the umad
//! paths real kernels differ on: an old kernel without REGISTER_AGENT2, and an SA that
//! never answers (umad gives the query back with ETIMEDOUT); and a device that dies
//! (the hub going away is a fatal device error).

#![cfg(feature = "verbs")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod fake_hca;
    pub(crate) mod programs;
}

use acm_io_verbs::umad::{MadSend, UmadDevice};
use acm_proto::mad::{MAD_LEN, MadHeaderPacket};
use acm_proto::path_record::PathCompMask;
use acm_proto::sa::{SA_HEADER_LEN, SaHeaderRepr};
use nix::errno::Errno;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::process::Command;
use support::daemon::{DEADLINE, TempDir, ib_acme, run_bounded};
use support::fake_hca::{EmulatedHost, HostConfig, JOINED, RunningHub, demo};

/// Host `n` (1..=3) of the demo fabric: its name, addresses, GID and LID.
struct Node {
    name: String,
    ip4: String,
    ip6: String,
    gid: String,
    lid: u16,
}

fn node(n: u16) -> Node {
    Node {
        name: format!("node{n}"),
        ip4: format!("10.0.0.{n}"),
        ip6: format!("fd00::{n}"),
        gid: format!("fe80::2:c903:a0:b00{n}"),
        lid: n,
    }
}

/// The address file: the host's name and both its addresses on its one port.
fn addr_file(n: &Node) -> String {
    format!(
        "{} mlx5_0 1 default\n{} mlx5_0 1 default\n{} mlx5_0 1 default\n",
        n.name, n.ip4, n.ip6
    )
}

/// Node `nd` on `hub`, in a directory of its own under `dir`, routing with
/// `route_prot`: its configuration, to start.
fn demo_host<'a>(
    dir: &TempDir,
    hub: &'a RunningHub,
    nd: &'a Node,
    route_prot: &str,
) -> HostConfig<'a> {
    EmulatedHost::config(
        &dir.subdir(&nd.name),
        hub,
        &nd.name,
        options(route_prot),
        addr_file(nd),
    )
}

fn options(route_prot: &str) -> String {
    format!(
        "log_level 2\nsupport_ips_in_addr_cfg 1\naddr_prot acm\nroute_prot {route_prot}\n\
         timeout 500\nretries 2\n"
    )
}

/// `ib_acme -S socket args…`: its output and exit status.
fn acme(socket: &Path, args: &[&str]) -> (String, i32) {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(socket).args(args);
    let out = run_bounded(cmd, DEADLINE);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (text, out.status.code().unwrap_or(-1))
}

/// The value of `key:` in ib_acme's path information.
fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// Every ordered pair of hosts resolves by every kind of address, and each answer is
/// the destination's port.
fn resolve_all(route_prot: &str) {
    let dir = TempDir::new(&format!("hw3-{route_prot}"));
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let hosts: Vec<(Node, EmulatedHost)> = (1..=3)
        .map(|n| {
            let nd = node(n);
            let h = demo_host(&dir, &hub, &nd, route_prot).start();
            (nd, h)
        })
        .collect();
    for (src, host) in &hosts {
        for (dst, _) in hosts.iter().filter(|(d, _)| d.lid != src.lid) {
            let lid = dst.lid.to_string();
            let cases: [(&str, Vec<&str>); 6] = [
                ("IPv4", vec!["-f", "i", "-s", &src.ip4, "-d", &dst.ip4]),
                // The source is the emulated host's routing's (its 10.0.0.0/24
                // address), not the machine's.
                ("IPv4 without source", vec!["-f", "i", "-d", &dst.ip4]),
                ("IPv6", vec!["-f", "i", "-s", &src.ip6, "-d", &dst.ip6]),
                ("name", vec!["-f", "n", "-s", &src.name, "-d", &dst.name]),
                ("LID", vec!["-f", "l", "-d", &lid]),
                ("GID", vec!["-f", "g", "-d", &dst.gid]),
            ];
            for (kind, args) in cases {
                let (out, status) = acme(&host.socket(), &args);
                let what = format!("{} → {} by {kind} ({route_prot})", src.name, dst.name);
                assert_eq!(status, 0, "{what}:\n{out}\nlog:\n{}", host.log());
                assert_eq!(
                    field(&out, "dgid"),
                    Some(dst.gid.as_str()),
                    "{what}:\n{out}"
                );
                assert_eq!(field(&out, "dlid"), Some(lid.as_str()), "{what}:\n{out}");
                assert_eq!(
                    field(&out, "sgid"),
                    Some(src.gid.as_str()),
                    "{what}:\n{out}"
                );
            }
        }
    }
    drop(hosts);
    drop(hub);
}

#[test]
fn three_hardware_daemons_resolve_one_another_with_route_prot_sa() {
    resolve_all("sa");
}

#[test]
fn three_hardware_daemons_resolve_one_another_with_route_prot_acm() {
    resolve_all("acm");
}

/// On a kernel without REGISTER_AGENT2 (before 3.18) the daemon registers its SA agent
/// with ENABLE_PKEY and REGISTER_AGENT: it joins and its SA queries are answered.
/// SM events through umad (docs/protocol/sa.md §9): each daemon's SA agent is
/// registered for Reports and its port subscribes to traps 64–67; when node 2 stops,
/// its emulated HCA detaches, the hub's SM reports its GID out of service (trap 65),
/// the emulated umad hands the unsolicited Report to node 1's agent, and node 1
/// invalidates what it cached of node 2 and acknowledges.
#[test]
fn a_host_that_leaves_is_reported_through_umad_and_invalidated() {
    let dir = TempDir::new("hw-sm-events");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let start = |nd: &Node| demo_host(&dir, &hub, nd, "sa").start();
    let (n1, n2) = (node(1), node(2));
    let h1 = start(&n1);
    let mut h2 = start(&n2);
    h1.wait_log("subscribed to SM traps 64-67");
    let (out, status) = acme(&h1.socket(), &["-f", "i", "-s", &n1.ip4, "-d", &n2.ip4]);
    assert_eq!(status, 0, "{out}\nlog:\n{}", h1.log());
    assert_eq!(field(&out, "dgid"), Some(n2.gid.as_str()), "{out}");

    h2.stop();
    h1.wait_log(&format!("SM trap 65 (GID out of service) for {}", n2.gid));
    h1.wait_log(&format!("cache entries for {} invalidated", n2.gid));
    let log = h1.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(&format!("cache entries for {} invalidated", n2.gid)))
        .expect("logged");
    assert!(
        !line.contains(": 0 cache entries"),
        "node 2 was cached: {line}"
    );
    drop(h1);
    drop(hub);
}

#[test]
fn without_register_agent2_the_fallback_registration_reaches_the_sa() {
    let dir = TempDir::new("hw-agent1");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let n = node(1);
    let host = demo_host(&dir, &hub, &n, "sa")
        .env(&[("ACM_FAKE_HCA_NO_AGENT2", "1")])
        .start();
    let (out, status) = acme(&host.socket(), &["-f", "l", "-d", "3"]);
    assert_eq!(status, 0, "{out}\nlog:\n{}", host.log());
    assert_eq!(field(&out, "dgid"), Some(node(3).gid.as_str()), "{out}");
}

/// With an SM LID where no SA answers, umad gives the join back with ETIMEDOUT after
/// its timeout and retries: the daemon reports the join failed and serves nothing on
/// the endpoint, as the reference does.
#[test]
fn sa_queries_nobody_answers_come_back_timed_out() {
    let dir = TempDir::new("hw-sa-timeout");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let n = node(2);
    let host = demo_host(&dir, &hub, &n, "sa")
        .env(&[("ACM_FAKE_HCA_SM_LID", "99")])
        .ready("join failed for pkey 0xffff")
        .start();
    let (out, status) = acme(&host.socket(), &["-f", "l", "-d", "3"]);
    assert_ne!(status, 0, "{out}");
    assert!(
        host.log().contains("endpoint pkey 0xffff not ready"),
        "{}",
        host.log()
    );
}

/// Set in the child process of the umad test (the umad node directory).
const PROBE_ENV: &str = "ACM_TEST_UMAD_PROBE_DEV";

/// A SubnAdmGet(PathRecord) with TID `tid` (no components: the SA answers with an
/// error status, which is still an answer).
fn sa_get(tid: u32) -> [u8; MAD_LEN] {
    let mut m = [0u8; MAD_LEN];
    SaHeaderRepr::path_record_get(u64::from(tid), PathCompMask::EMPTY)
        .emit(&mut m[..SA_HEADER_LEN]);
    m
}

/// Waits (up to 5 s) until the descriptor has something to read, as the daemon's
/// event loop does.
fn wait_readable(u: &UmadDevice) {
    let mut p = mio::Poll::new().expect("poll");
    let fd = u.as_fd().as_raw_fd();
    p.registry()
        .register(
            &mut mio::unix::SourceFd(&fd),
            mio::Token(0),
            mio::Interest::READABLE,
        )
        .expect("register");
    let mut events = mio::Events::with_capacity(1);
    p.poll(&mut events, Some(std::time::Duration::from_secs(5)))
        .expect("poll");
    assert!(!events.is_empty(), "nothing to read from umad within 5 s");
}

fn to_sa(lid: u16, timeout_ms: u32, retries: u32, mad: &[u8]) -> MadSend<'_> {
    MadSend {
        lid,
        sl: 0,
        qpn: 1,
        qkey: 0x8001_0000,
        pkey_index: 0,
        timeout_ms,
        retries,
        mad,
    }
}

/// The umad descriptor as the kernel's: one packet per read, EINVAL for a buffer
/// shorter than the header or than the packet (which stays queued), answers with the
/// TID's upper half rewritten, and a send nobody answers given back with ETIMEDOUT
/// and only its MAD header, no sooner than its timeout × (retries + 1). Runs in a child process of this test binary, preloaded
/// with the emulated HCA.
fn umad_probe(dev: &Path) {
    let mut u = UmadDevice::open(&dev.join("umad0")).expect("open and register");
    u.send(&to_sa(1, 1000, 0, &sa_get(0x11)))
        .expect("send to the SA");
    wait_readable(&u);
    let mut small = [0u8; 63];
    assert_eq!(nix::unistd::read(u.as_fd(), &mut small), Err(Errno::EINVAL));
    let mut short = [0u8; 64 + 100];
    assert_eq!(nix::unistd::read(u.as_fd(), &mut short), Err(Errno::EINVAL));
    let m = u.recv().expect("read").expect("the answer stayed queued");
    assert_eq!((m.header.status, m.mad.len()), (0, MAD_LEN));
    let answer = MadHeaderPacket::new_unchecked(m.mad);
    assert!(answer.method().is_response(), "a response");
    let tid = answer.tid();
    assert_eq!(tid as u32, 0x11, "the sender's half of the TID");
    assert_ne!(tid >> 32, 0, "the agent's half, written by the kernel");
    assert!(u.recv().expect("read").is_none(), "one packet per read");

    let sent = std::time::Instant::now();
    u.send(&to_sa(99, 50, 1, &sa_get(0x22)))
        .expect("send to nobody");
    wait_readable(&u);
    let m = u.recv().expect("read").expect("the send given back");
    assert_eq!(m.header.status, 110, "ETIMEDOUT");
    // Two tries of 50 ms each, as the kernel's timeout × (retries + 1).
    assert!(
        sent.elapsed() >= std::time::Duration::from_millis(100),
        "given back after {:?}",
        sent.elapsed()
    );
    assert_eq!(m.mad.len(), 24, "only the MAD header comes back");
    assert_eq!(
        u64::from_be_bytes(m.mad[8..16].try_into().unwrap()) as u32,
        0x22
    );
}

#[test]
fn umad_reads_one_packet_each_and_refuses_short_buffers() {
    if let Some(dev) = std::env::var_os(PROBE_ENV) {
        umad_probe(Path::new(&dev));
        return;
    }
    let dir = TempDir::new("hw-umad");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let dev = dir.subdir("dev");
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--exact",
        "umad_reads_one_packet_each_and_refuses_short_buffers",
        "--test-threads",
        "1",
    ])
    .env(PROBE_ENV, &dev)
    .envs(support::fake_hca::env(
        &hub.path,
        "node2",
        &dir.join("sys"),
        &dev,
    ));
    let out = run_bounded(cmd, DEADLINE);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the probe ran:\n{text}");
}

/// The hub going away is the emulated HCA dying: a fatal device event on the async
/// descriptor, which the daemon takes as the device's removal; nothing resolves after.
#[test]
fn a_hub_that_goes_away_is_a_fatal_device_error() {
    let dir = TempDir::new("hw-fatal");
    let hub = RunningHub::start(&demo(), dir.join("hub.sock"));
    let n = node(1);
    let host = demo_host(&dir, &hub, &n, "sa").start();
    let (out, status) = acme(&host.socket(), &["-f", "l", "-d", "3"]);
    assert_eq!(status, 0, "{out}");
    drop(hub);
    host.wait_log("mlx5_0: fatal device error");
    let (out, status) = acme(&host.socket(), &["-f", "l", "-d", "3"]);
    assert_ne!(status, 0, "resolved on a dead device:\n{out}");
}

/// An XDR port (4x at 200 Gb/s a lane, 800 Gb/s) reports its speed only in
/// `active_speed_ex`, which `ibv_query_port` fills through the extended context's op:
/// the daemon reads it, and its endpoint joins its native group at 800 Gb/s (rate
/// code 23), not at an unknown rate.
#[test]
fn an_xdr_port_is_read_through_the_extended_port_query() {
    let dir = TempDir::new("hw-xdr");
    let text = std::fs::read_to_string(demo()).expect("demo fabric");
    let node2_port = "[[hosts.hcas.ports]]\nlid = 2\n";
    assert!(text.contains(node2_port), "the demo fabric changed");
    let fabric = dir.join("xdr.toml");
    std::fs::write(
        &fabric,
        text.replace(node2_port, &format!("{node2_port}width = 2\nspeed = 256\n")),
    )
    .expect("fabric file");
    let hub = RunningHub::start(&fabric, dir.join("hub.sock"));
    let n = node(2);
    // Routes from groups: the endpoint also joins its port's native group, at the
    // port's rate.
    let host = demo_host(&dir, &hub, &n, "acm").start();
    host.wait_log_count(JOINED, 2);
    let log = host.log();
    assert!(
        log.contains("acmp_join_group: port 1 pkey 0xffff rate 23 "),
        "{log}"
    );
}
