//! The hardware suite (feature `hw-tests`, off in CI): the simulator's two-host
//! scenarios (acm-io-sim `tests/scenarios.rs`: two hosts resolve each other, the reverse
//! comes from the cache, loopback sends nothing) run against real InfiniBand ports.
//!
//! # Running it
//! On a host with an active InfiniBand port and IPoIB configured, with a second host on
//! the same fabric running an ACM daemon (ours or rdma-core's):
//!
//! ```text
//! sudo ACM_HW_LOCAL_IP=192.168.10.1 ACM_HW_PEER_IP=192.168.10.2 \
//!      ACM_HW_PEER_NAME=peerhost \
//!      cargo test -p ibacm --features hw-tests --test hw_two_host -- --test-threads 1
//! ```
//!
//! Root (or access to `/dev/infiniband/umad*` and `uverbs*`) is needed. Each test starts
//! our `ibacm -P` on the real hardware in a temporary run directory, with its own
//! options file and a generated address file (naming this host by its host name), so
//! it does not disturb an `ibacm` service on `/run`. `ACM_HW_PEER_NAME` (the peer's
//! name in its address file) is optional: without it the by-name scenario is skipped
//! with a message.
#![cfg(feature = "hw-tests")]

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod programs;
}

use acm_io_sim::sim::requests;
use acm_proto::path_record::PathRecordRepr;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};
use support::daemon::{Client, DEADLINE, IBACM, KillOnDrop, TempDir};

fn env_ip(name: &str) -> IpAddr {
    let v = std::env::var(name)
        .unwrap_or_else(|_| panic!("set {name} (see the doc comment of tests/hw_two_host.rs)"));
    v.parse()
        .unwrap_or_else(|e| panic!("{name}={v} is not an IP address: {e}"))
}

/// Our daemon on the real hardware; killed on drop.
struct HwDaemon {
    _child: KillOnDrop,
    dir: TempDir,
}

impl HwDaemon {
    fn start(route_prot: &str) -> Self {
        let dir = TempDir::new("hwd");
        std::fs::write(
            dir.join("ibacm_opts.cfg"),
            format!(
                "log_file {}\nlog_level 2\nroute_prot {route_prot}\naddr_prot acm\n",
                dir.join("ibacm.log").display()
            ),
        )
        .expect("options file");
        let child = Command::new(&*IBACM)
            .arg("-P")
            .arg("--run-dir")
            .arg(dir.path())
            .arg("-O")
            .arg(dir.join("ibacm_opts.cfg"))
            .arg("-A")
            .arg(dir.join("ibacm_addr.cfg"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ibacm");
        let d = Self {
            _child: KillOnDrop(child),
            dir,
        };
        let sock = d.dir.join("ibacm-unix.sock");
        let until = Instant::now() + DEADLINE;
        while !sock.exists() {
            assert!(
                Instant::now() < until,
                "ibacm did not start on the hardware; log:\n{}",
                d.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ibacm.log")).unwrap_or_default()
    }

    fn client(&self) -> Client {
        Client::unix(&self.dir.join("ibacm-unix.sock"))
    }
}

/// Status and path of a RESOLVE reply.
fn resolve(c: &mut Client, req: &[u8]) -> (u8, Option<PathRecordRepr>) {
    let r = c.request(req);
    let status = r[2];
    let path = (status == 0 && r.len() >= 88)
        .then(|| PathRecordRepr::parse(&r[24..88]).expect("a path record"));
    (status, path)
}

fn two_hosts(route_prot: &str, by_name: bool) {
    let local = env_ip("ACM_HW_LOCAL_IP");
    let peer = env_ip("ACM_HW_PEER_IP");
    let d = HwDaemon::start(route_prot);
    let mut c = d.client();
    let req = if by_name {
        let Ok(peer_name) = std::env::var("ACM_HW_PEER_NAME") else {
            eprintln!("skipped: ACM_HW_PEER_NAME is not set");
            return;
        };
        // The address file the daemon generates names this host by its host name.
        let me = dns_lookup::get_hostname().expect("host name");
        requests::resolve_name(&me, &peer_name, false)
    } else {
        requests::resolve_ip(Some(local), peer, false)
    };
    let (status, path) = resolve(&mut c, &req);
    assert_eq!(status, 0, "resolve failed; log:\n{}", d.log());
    let p = path.expect("a path");
    assert_ne!(p.sgid, p.dgid, "a path to the peer, not to ourselves");
    assert_ne!(p.dlid, 0, "the peer's LID");
    // The same request again, cache only: answered from the cache at once.
    let nodelay = if by_name {
        req.clone()
    } else {
        requests::resolve_ip(Some(local), peer, true)
    };
    let (status, again) = resolve(&mut c, &nodelay);
    assert_eq!(status, 0, "the second resolve comes from the cache");
    assert_eq!(again, Some(p));
}

#[test]
fn two_hosts_by_ipv4_route_acm() {
    two_hosts("acm", false);
}

#[test]
fn two_hosts_by_ipv4_route_sa() {
    two_hosts("sa", false);
}

#[test]
fn two_hosts_by_name_route_acm() {
    two_hosts("acm", true);
}

/// Resolving our own address is answered from the loopback entry: source and
/// destination are our port.
#[test]
fn loopback_resolves_to_ourselves() {
    let local = env_ip("ACM_HW_LOCAL_IP");
    let d = HwDaemon::start("acm");
    let mut c = d.client();
    let (status, path) = resolve(&mut c, &requests::resolve_ip(Some(local), local, false));
    assert_eq!(status, 0, "log:\n{}", d.log());
    let p = path.expect("a path");
    assert_eq!((p.sgid, p.slid), (p.dgid, p.dlid));
    assert!(Path::new(&d.dir.join("ibacm.log")).exists());
}
