//! Helpers for the `ib_acme` tests: the captured cases of `testdata/captures/`, a
//! scripted fake ibacm service on a unix socket (a thread that checks each request
//! against the capture and answers with the captured reply), and a bounded way to run a
//! client binary.
//!
//! Every wait is bounded, so a client that hangs fails the test instead of stalling it.

#![allow(dead_code, unreachable_pub)]

use acm_proto::client::{Direction, HEADER_LEN, HeaderRepr, split_stream};
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The longest a client run or a server wait may take.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Our `ib_acme`.
pub const OURS: &str = env!("CARGO_BIN_EXE_ib_acme");

/// Debian's `ib_acme` (package `ibacm`), when installed.
pub const DEBIAN: &str = "/usr/bin/ib_acme";

/// Whether Debian's binary is there; says so on stderr when it is not.
pub fn debian_available(test: &str) -> bool {
    let ok = Path::new(DEBIAN).exists();
    if !ok {
        eprintln!(
            "{test}: {DEBIAN} is absent (install the Debian package `ibacm`); \
             skipping the comparison with Debian's ib_acme"
        );
    }
    ok
}

/// `testdata/captures/<set>`.
pub fn capture_dir(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/captures")
        .join(set)
}

/// One captured `ib_acme` run.
#[derive(Debug, Clone)]
pub struct Case {
    /// The capture's label.
    pub label: String,
    /// The arguments after `ib_acme`.
    pub args: Vec<String>,
    /// stdout and stderr as captured (one stream).
    pub output: String,
    /// Exit status.
    pub exit: i32,
    /// Every request of the connection, in order.
    pub requests: Vec<Vec<u8>>,
    /// Every reply, in order.
    pub responses: Vec<Vec<u8>>,
}

fn split(bytes: &[u8], direction: Direction) -> Vec<Vec<u8>> {
    split_stream(bytes, direction)
        .map(|m| m.expect("capture stream splits").1.to_vec())
        .collect()
}

/// Every case of a capture set, by label.
pub fn load_cases(set: &str) -> Vec<Case> {
    let dir = capture_dir(set);
    let mut labels: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".client-output.txt").map(str::to_owned)
        })
        .collect();
    labels.sort();
    labels
        .into_iter()
        .map(|label| {
            let text =
                std::fs::read_to_string(dir.join(format!("{label}.client-output.txt"))).unwrap();
            let mut lines: Vec<&str> = text.lines().collect();
            let command = lines.remove(0);
            let status = lines.pop().expect("exit status line");
            let args = command
                .strip_prefix("$ ib_acme")
                .expect("command line")
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            let exit = status
                .strip_prefix("[exit status: ")
                .and_then(|s| s.split([',', ']']).next())
                .and_then(|s| s.trim().parse().ok())
                .expect("exit status");
            let output = lines.iter().map(|l| format!("{l}\n")).collect();
            let read = |suffix: &str| {
                std::fs::read(dir.join(format!("{label}.{suffix}"))).unwrap_or_default()
            };
            Case {
                args,
                output,
                exit,
                requests: split(&read("requests.bin"), Direction::Request),
                responses: split(&read("responses.bin"), Direction::Response),
                label,
            }
        })
        .collect()
}

/// A fresh, empty directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ib-acme-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What the fake service saw.
#[derive(Debug, Default, Clone)]
pub struct ServerLog {
    /// Connections accepted.
    pub connections: usize,
    /// Every request received, whole, in order.
    pub requests: Vec<Vec<u8>>,
    /// Problems (a read timeout, a request it had no reply for).
    pub errors: Vec<String>,
}

/// A scripted ibacm service on a unix socket: the n-th request of the run (over any
/// number of connections) is answered with `responses[n]`; when they run out, the
/// connection is closed.
pub struct FakeServer {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<ServerLog>>,
    path: PathBuf,
}

impl FakeServer {
    /// Listens on `path` (any stale file is removed first).
    pub fn start(path: &Path, responses: Vec<Vec<u8>>) -> Self {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || serve(&listener, &responses, &flag));
        Self {
            stop,
            handle: Some(handle),
            path: path.to_owned(),
        }
    }

    /// Stops accepting and returns what was seen.
    pub fn finish(mut self) -> ServerLog {
        self.stop.store(true, Ordering::SeqCst);
        let log = self.handle.take().unwrap().join().unwrap();
        let _ = std::fs::remove_file(&self.path);
        log
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(listener: &UnixListener, responses: &[Vec<u8>], stop: &AtomicBool) -> ServerLog {
    let mut log = ServerLog::default();
    let start = Instant::now();
    while !stop.load(Ordering::SeqCst) && start.elapsed() < DEADLINE {
        let mut stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => {
                log.errors.push(format!("accept: {e}"));
                break;
            }
        };
        log.connections += 1;
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        loop {
            let mut header = [0u8; HEADER_LEN];
            match stream.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => {
                    log.errors.push(format!("reading a request header: {e}"));
                    break;
                }
            }
            let len = HeaderRepr::parse(&header, Direction::Request)
                .map_or(HEADER_LEN, |h| usize::from(h.length).max(HEADER_LEN));
            let mut message = header.to_vec();
            message.resize(len, 0);
            if let Err(e) = stream.read_exact(&mut message[HEADER_LEN..]) {
                log.errors.push(format!("reading a request body: {e}"));
                break;
            }
            let n = log.requests.len();
            log.requests.push(message);
            let Some(reply) = responses.get(n) else {
                log.errors
                    .push(format!("request {n} has no scripted reply"));
                break;
            };
            // One write per reply, as the daemon sends it.
            if let Err(e) = stream.write_all(reply) {
                log.errors.push(format!("writing reply {n}: {e}"));
                break;
            }
        }
    }
    log
}

/// A finished client run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
}

impl Run {
    /// stdout then stderr: the capture's single stream, since `ib_acme` writes only to
    /// stdout once its options are read.
    pub fn combined(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `bin args…` with `envs`, bounded by [`DEADLINE`].
pub fn run_client(bin: &str, args: &[String], envs: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{bin} {args:?} did not finish within {DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// Where two request lists first differ, for a readable failure.
pub fn first_request_difference(expected: &[Vec<u8>], seen: &[Vec<u8>]) -> Option<String> {
    for (i, (e, s)) in expected.iter().zip(seen).enumerate() {
        if e != s {
            let at = e
                .iter()
                .zip(s)
                .position(|(a, b)| a != b)
                .unwrap_or(e.len().min(s.len()));
            return Some(format!(
                "request {i} differs at byte {at} (lengths {} and {}):\n expected {}\n sent     {}",
                e.len(),
                s.len(),
                hex(e),
                hex(s)
            ));
        }
    }
    (expected.len() != seen.len())
        .then(|| format!("{} requests expected, {} sent", expected.len(), seen.len()))
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
