//! Worker threads (`worker_threads` ≥ 2) against a running `ibacm` on the demo fabric:
//! what clients see is what the single-threaded daemon gives them, and what the engine
//! invalidates is never answered from the workers' view once the engine said so.
//!
//! - The same pipelined requests on one connection (cache hits, a miss, queries) get
//!   the same replies in the same order with 1 and with 4 workers, and the same
//!   PERF_QUERY counters after them.
//! - Clients hammering cache hits while a reload removes their source address: every
//!   request sent after the reload is logged fails, the hits before it succeed, and the
//!   global Resolve counter counts every request exactly.

#[allow(dead_code)]
mod support {
    pub(crate) mod daemon;
    pub(crate) mod programs;
}

use acm_client::entries::name_entry;
use acm_proto::client::{
    ClientMessage, Direction, EpFlags, HEADER_LEN, HeaderPacket, HeaderRepr, Opcode, PerfQueryRepr,
    PerfReplyRepr, ResolveRepr, Status,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::daemon::{Client, DEMO, Daemon, TempDir};

/// A RESOLVE from name `src` to name `dst` with transaction id `tid`.
fn resolve(src: &str, dst: &str, tid: u64) -> Vec<u8> {
    let mut header = HeaderRepr::new(Opcode::RESOLVE);
    header.tid = tid;
    let mut r = ResolveRepr::new(header);
    for (flags, name) in [(EpFlags::SOURCE, src), (EpFlags::DEST, dst)] {
        let entry = name_entry(flags, name).expect("a short name");
        r.push(entry).expect("room for two entries");
    }
    ClientMessage::Resolve(r).to_vec(Direction::Request)
}

/// A global PERF_QUERY with transaction id `tid`.
fn perf(tid: u64) -> Vec<u8> {
    let mut q = PerfQueryRepr::new(0, None);
    q.header.tid = tid;
    ClientMessage::PerfQuery(q).to_vec(Direction::Request)
}

/// Reads one whole reply.
fn reply(c: &mut Client) -> Vec<u8> {
    let mut msg = c.read_n(HEADER_LEN);
    let len = HeaderPacket::new_unchecked(&msg[..]).length(Direction::Response);
    msg.extend(c.read_n(usize::from(len) - HEADER_LEN));
    msg
}

fn tid_of(msg: &[u8]) -> u64 {
    HeaderPacket::new_unchecked(msg).tid()
}

fn status_of(msg: &[u8]) -> Status {
    HeaderPacket::new_unchecked(msg).status()
}

/// The replies one connection gets to a pipeline of cache hits around a miss and two
/// PERF_QUERYs, with `workers` worker threads, in the order they came.
fn pipeline_replies(workers: u32) -> Vec<Vec<u8>> {
    let dir = TempDir::new(&format!("workers-order-{workers}"));
    let d = Daemon::start(
        dir.path(),
        &format!("sim:{DEMO}:node1"),
        &format!("log_level 0\nworker_threads {workers}\n"),
    );
    let mut warm = d.connect();
    assert_eq!(
        status_of(&warm.request(&resolve("node1", "node2", 1))),
        Status::SUCCESS
    );
    drop(warm);
    let mut c = d.connect();
    let mut burst = Vec::new();
    burst.extend(resolve("node1", "node2", 10));
    burst.extend(perf(11));
    burst.extend(resolve("node1", "node2", 12));
    // Not cached yet: the engine resolves it over the fabric meanwhile.
    burst.extend(resolve("node1", "node3", 13));
    burst.extend(resolve("node1", "node2", 14));
    burst.extend(resolve("node1", "node2", 15));
    burst.extend(perf(16));
    c.send(&burst);
    let replies: Vec<Vec<u8>> = (0..7).map(|_| reply(&mut c)).collect();
    // After the miss was answered: hits again, and the counters of all of it.
    c.send(&resolve("node1", "node3", 17));
    let mut all = replies;
    all.push(reply(&mut c));
    c.send(&perf(18));
    all.push(reply(&mut c));
    all
}

#[test]
fn one_connection_gets_the_same_replies_in_the_same_order_with_workers() {
    let one = pipeline_replies(1);
    let four = pipeline_replies(4);
    let tids = |r: &[Vec<u8>]| r.iter().map(|m| tid_of(m)).collect::<Vec<_>>();
    assert_eq!(tids(&one), tids(&four));
    assert!(
        one.iter().all(|m| status_of(m) == Status::SUCCESS),
        "every request answered: {:?}",
        one.iter().map(|m| status_of(m)).collect::<Vec<_>>()
    );
    assert_eq!(one, four, "byte for byte, counters included");
}

/// Sends SIGHUP and waits for the reload's line; returns when the log has it.
fn reload_and_wait(d: &mut Daemon, log: &std::path::Path) {
    let before = std::fs::read_to_string(log).unwrap_or_default().len();
    let pid = Pid::from_raw(i32::try_from(d.pid()).expect("a pid"));
    kill(pid, Signal::SIGHUP).expect("send SIGHUP");
    d.wait_until("the reload's line", || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .get(before..)
            .is_some_and(|t| t.contains("config: reloaded: "))
    });
}

#[test]
fn hits_racing_a_reload_that_removes_their_source_never_succeed_after_it_is_reported() {
    const CLIENTS: usize = 4;
    let dir = TempDir::new("workers-race");
    let addr = dir.join("addr.cfg");
    let log = dir.join("ibacm.log");
    std::fs::write(
        &addr,
        "node1 mlx5_0 1 default\nnode1-extra mlx5_0 1 default\n",
    )
    .expect("write the address file");
    let mut d = Daemon::start_with(
        dir.path(),
        &format!("sim:{DEMO}:node1"),
        "log_level 1\nworker_threads 4\n",
        &["-A", addr.to_str().expect("utf-8")],
    );
    let mut warm = d.connect();
    assert_eq!(
        status_of(&warm.request(&resolve("node1-extra", "node2", 1))),
        Status::SUCCESS
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Per request: when it was sent and whether it succeeded.
    let seen: Arc<Mutex<Vec<(Instant, bool)>>> = Arc::default();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut c = d.connect();
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut tid = (i as u64) << 32;
                while !stop.load(Ordering::Relaxed) {
                    tid += 1;
                    let sent = Instant::now();
                    let r = c.request(&resolve("node1-extra", "node2", tid));
                    assert_eq!(tid_of(&r), tid);
                    mine.push((sent, status_of(&r) == Status::SUCCESS));
                }
                seen.lock().expect("not poisoned").extend(mine);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&addr, "node1 mlx5_0 1 default\n").expect("write the address file");
    reload_and_wait(&mut d, &log);
    let reported = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("a client thread");
    }
    let seen = seen.lock().expect("not poisoned");
    let before: Vec<bool> = seen
        .iter()
        .filter(|(t, _)| *t < reported)
        .map(|&(_, ok)| ok)
        .collect();
    let after: Vec<bool> = seen
        .iter()
        .filter(|(t, _)| *t >= reported)
        .map(|&(_, ok)| ok)
        .collect();
    assert!(
        before.iter().filter(|&&ok| ok).count() > 100,
        "cache hits before the reload: {} of {}",
        before.iter().filter(|&&ok| ok).count(),
        before.len()
    );
    assert!(!after.is_empty(), "requests after the reload");
    assert!(
        after.iter().all(|&ok| !ok),
        "{} of {} requests sent after the reload was logged were answered from the removed source",
        after.iter().filter(|&&ok| ok).count(),
        after.len()
    );
    // Every RESOLVE is counted, the ones the workers answered included: the warm-up's
    // and the clients'.
    let answer = warm.request(&perf(2));
    let counters = PerfReplyRepr::parse(&answer, Direction::Response)
        .expect("a PERF_QUERY reply")
        .announced_counters()
        .to_vec();
    let resolves = 1 + seen.len() as u64;
    assert_eq!(
        counters[1], resolves,
        "Resolve Count; counters {counters:?}"
    );
    d.assert_running();
}
