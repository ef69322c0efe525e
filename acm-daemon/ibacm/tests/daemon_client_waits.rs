//! Busy clients are waited on with `ppoll`, quiet ones with epoll
//! (the daemon's `client_waits` module): every client is answered across the moves,
//! and the moves happen. Which clients epoll holds is read from the kernel
//! (`/proc/self/fdinfo` of the server's epoll descriptor: one `tfd:` line per
//! registered descriptor).
//!
//! The event loop (`Server` on the simulated demo fabric) runs in this process.

use ibacm::PPOLL_MAX;
#[path = "support/sim_server.rs"]
mod sim_server;

use acm_io_sim::sim::requests;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Descriptors registered with every epoll instance of this process.
fn epoll_registrations() -> usize {
    let mut n = 0;
    for fd in std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
    {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if target.to_string_lossy() != "anon_inode:[eventpoll]" {
            continue;
        }
        let info = Path::new("/proc/self/fdinfo").join(fd.file_name());
        if let Ok(text) = std::fs::read_to_string(info) {
            n += text.lines().filter(|l| l.starts_with("tfd:")).count();
        }
    }
    n
}

/// Waits (at most 10 s) until epoll holds `want` descriptors.
fn await_registrations(want: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = epoll_registrations();
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: epoll holds {n}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends one cache-hit RESOLVE on `c` and checks its reply.
fn resolve(c: &mut UnixStream) {
    let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    c.write_all(&requests::resolve_ip(Some(src), dst, false))
        .expect("send");
    let mut reply = [0u8; 88];
    c.read_exact(&mut reply).expect("reply");
    assert_eq!(reply[2], 0, "the resolve succeeds");
}

/// How long a busy client may be quiet here: longer than one pass over all the
/// clients takes in a debug build on a loaded machine, so that none goes back to
/// epoll in the middle of one.
const IDLE: Duration = Duration::from_secs(1);

#[test]
fn clients_move_between_ppoll_and_epoll_and_every_one_is_answered() {
    let dir = std::env::temp_dir().join(format!("acm-waits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ibacm-unix.sock");
    let before = epoll_registrations();
    sim_server::spawn(&sock, |server| server.set_client_idle(IDLE));
    // The server's own sources: wait until they are registered and stay so.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut base = epoll_registrations();
    while base == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        base = epoll_registrations();
    }
    std::thread::sleep(Duration::from_millis(50));
    base = epoll_registrations();

    // More clients than the ppoll set takes; connected, they are all on epoll.
    let n = PPOLL_MAX + 40;
    let mut clients: Vec<UnixStream> = (0..n)
        .map(|_| {
            let c = UnixStream::connect(&sock).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c
        })
        .collect();
    await_registrations(base + n, "connected, quiet clients");

    // Each sends: the first PPOLL_MAX move to the ppoll set, the rest stay on epoll.
    for c in &mut clients {
        resolve(c);
    }
    await_registrations(base + n - PPOLL_MAX, "after one request each");

    // Quiet for longer than IDLE: the next turn moves them back, all but the client
    // whose request made that turn.
    std::thread::sleep(IDLE * 2);
    resolve(&mut clients[0]);
    await_registrations(base + n - 1, "after a quiet spell");

    // Every client is answered again, twice, wherever it is waited on.
    for _ in 0..2 {
        for c in &mut clients {
            resolve(c);
        }
    }
    // A client that closes leaves epoll or the set, and the others are still served.
    let quiet = clients.pop().expect("a client");
    drop(quiet);
    resolve(&mut clients[1]);
    std::fs::remove_dir_all(&dir).ok();
}
