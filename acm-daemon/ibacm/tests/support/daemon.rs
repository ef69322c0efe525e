//! Helpers for tests that run the `ibacm` binary as a process: a temporary run directory,
//! a [`Daemon`] guard that starts the daemon there and kills it on drop, a raw client
//! speaking the client protocol (docs/protocol/client-messages.md) over the unix socket
//! or TCP, and a bounded way to run a command to completion.
//!
//! Every wait is bounded, so a broken daemon fails a test instead of hanging it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::{Deref, DerefMut};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest a daemon may take to start, and a reply to come back.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// The daemon under test (found with [`super::programs`], so that the other programs'
/// packages can run it too).
pub(crate) static IBACM: std::sync::LazyLock<PathBuf> =
    std::sync::LazyLock::new(|| super::programs::program("ibacm"));

/// The demo fabric (node1, node2, node3 at 10.0.0.1-3, LIDs 1-3).
pub(crate) const DEMO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/fabrics/demo.toml"
);

/// Debian's `ib_acme` (package `ibacm`).
pub(crate) const IB_ACME: &str = "/usr/bin/ib_acme";

/// Debian's `ib_acme`, or a failure saying how to get it.
pub(crate) fn ib_acme() -> &'static str {
    assert!(
        Path::new(IB_ACME).exists(),
        "{IB_ACME} is missing: install Debian's `ibacm` package (apt-get install ibacm); \
         CI installs it"
    );
    IB_ACME
}

/// A fresh directory under the system's temporary directory, removed on drop, named
/// after the test's `tag`. Names stay short so that unix socket paths in it fit in
/// `sun_path` (108 bytes).
pub(crate) struct TempDir(tempfile::TempDir);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("acmd-{tag}-"))
            .tempdir()
            .expect("create the temporary directory");
        Self(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }

    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// A subdirectory, created.
    pub(crate) fn subdir(&self, name: &str) -> PathBuf {
        let d = self.join(name);
        std::fs::create_dir_all(&d).expect("create a subdirectory");
        d
    }
}

/// The `ibacm` command for run directory `dir`: in the foreground, with `fabric`, the
/// options file `dir/ibacm_opts.cfg` (written with `options`, so that the machine's
/// `/etc/rdma/ibacm_opts.cfg` never matters), logging to `log`, stdout and stderr to
/// `dir/NAME.stdout` and `dir/NAME.stderr`.
pub(crate) fn ibacm_command(dir: &Path, fabric: &str, options: &str, log: &Path) -> Command {
    let opts = dir.join("ibacm_opts.cfg");
    std::fs::write(&opts, options).expect("write the options file");
    let mut cmd = Command::new(&*IBACM);
    cmd.arg("-P")
        .arg("--fabric")
        .arg(fabric)
        .arg("--run-dir")
        .arg(dir)
        .arg("-O")
        .arg(&opts)
        .arg("--log-file")
        .arg(log)
        .stdin(Stdio::null());
    cmd
}

/// A child process killed (and reaped) on drop, so that a failing test leaves no
/// process behind; it is the [`Child`] otherwise.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running daemon, killed (and reaped) on drop.
pub(crate) struct Daemon {
    child: KillOnDrop,
    dir: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Starts `ibacm -P --fabric FABRIC --run-dir DIR` with `options` as its options
    /// file and waits until it is listening (every rendezvous file in place) and its
    /// unix socket accepts connections.
    pub(crate) fn start(dir: &Path, fabric: &str, options: &str) -> Self {
        Self::start_with(dir, fabric, options, &[])
    }

    /// [`Daemon::start`] with more command-line arguments.
    pub(crate) fn start_with(dir: &Path, fabric: &str, options: &str, extra: &[&str]) -> Self {
        let d = Self::spawn(dir, fabric, options, extra);
        let sock = d.socket();
        d.wait_until("its unix socket accepts connections", || {
            d.said_listening() && UnixStream::connect(&sock).is_ok()
        });
        d
    }

    /// Starts the daemon in a TCP server mode (`options` sets `server_mode`) and waits
    /// until it is listening and its port file names a port that accepts connections.
    pub(crate) fn start_tcp(dir: &Path, fabric: &str, options: &str) -> (Self, u16) {
        let d = Self::spawn(dir, fabric, options, &[]);
        let port_file = dir.join("ibacm-tcp.port");
        let mut port = 0;
        d.wait_until(
            "its port file names a port that accepts connections",
            || {
                if !d.said_listening() {
                    return false;
                }
                let Some(p) = std::fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|t| t.trim().parse::<u16>().ok())
                else {
                    return false;
                };
                port = p;
                TcpStream::connect(("127.0.0.1", p)).is_ok()
            },
        );
        (d, port)
    }

    fn spawn(dir: &Path, fabric: &str, options: &str, extra: &[&str]) -> Self {
        let log = dir.join("ibacm.log");
        let mut cmd = ibacm_command(dir, fabric, options, &log);
        cmd.args(extra);
        let out = std::fs::File::create(dir.join("ibacm.stdout")).expect("stdout file");
        let err = std::fs::File::create(dir.join("ibacm.stderr")).expect("stderr file");
        cmd.stdout(out).stderr(err);
        let child = cmd.spawn().expect("spawn ibacm");
        Self {
            child: KillOnDrop(child),
            dir: dir.to_path_buf(),
            log,
        }
    }

    /// Whether `-P` printed "listening on", which it does once the listener and every
    /// rendezvous file (socket, port file, symlinks) are in place.
    fn said_listening(&self) -> bool {
        std::fs::read_to_string(self.dir.join("ibacm.stdout"))
            .is_ok_and(|t| t.contains("listening on"))
    }

    /// Polls `ready` until it holds; fails the test if the daemon exits or
    /// [`DEADLINE`] passes first.
    pub(crate) fn wait_until(&self, what: &str, mut ready: impl FnMut() -> bool) {
        let start = Instant::now();
        loop {
            if ready() {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "ibacm did not get ready ({what}) within {DEADLINE:?}\n{}",
                self.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The listening unix socket.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.join("ibacm-unix.sock")
    }

    /// A new client connection on the unix socket.
    pub(crate) fn connect(&self) -> Client {
        Client::unix(&self.socket())
    }

    /// Fails the test if the daemon has exited.
    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!("ibacm exited with {status}\n{}", self.diagnostics());
        }
    }

    /// Fails the test unless `out`, a run of `ib_acme -v` on this daemon, found the
    /// path from LID `slid` to LID `dlid` and the SA verified it.
    pub(crate) fn assert_verified_path(&self, out: &Output, slid: u16, dlid: u16, context: &str) {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{context}: {out:?}\n{text}\n{}",
            self.diagnostics()
        );
        assert!(
            text.contains("Path information")
                && text.contains(&format!("dlid: {dlid}\n"))
                && text.contains(&format!("slid: {slid}\n"))
                && text.contains("SA verification: success"),
            "{context}:\n{text}\n{}",
            self.diagnostics()
        );
    }

    /// What the daemon printed and logged, for failure messages.
    pub(crate) fn diagnostics(&self) -> String {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let log = read(self.log.clone());
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}--- log (last 40 lines) ---\n{}",
            read(self.dir.join("ibacm.stdout")),
            read(self.dir.join("ibacm.stderr")),
            tail.join("\n")
        )
    }
}

/// Runs `cmd` to completion, killing it and failing the test if it takes longer than
/// `limit`.
pub(crate) fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status: ExitStatus = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// A request's length field, as the daemon reads it
/// (docs/protocol/client-messages.md §3): host order when the operation is RESOLVE,
/// big-endian otherwise.
pub(crate) fn length_field(hdr: &[u8]) -> u16 {
    if hdr[1] & 0x0F == 1 {
        u16::from_ne_bytes([hdr[6], hdr[7]])
    } else {
        u16::from_be_bytes([hdr[6], hdr[7]])
    }
}

/// A header: version 1, `opcode`, `length` in the given byte order, `tid`.
pub(crate) fn header(version: u8, opcode: u8, length: [u8; 2], tid: u64) -> Vec<u8> {
    let mut h = vec![0u8; 16];
    h[0] = version;
    h[1] = opcode;
    h[6..8].copy_from_slice(&length);
    h[8..16].copy_from_slice(&tid.to_ne_bytes());
    h
}

/// The tid of a message.
pub(crate) fn tid(msg: &[u8]) -> u64 {
    u64::from_ne_bytes(msg[8..16].try_into().expect("8 bytes"))
}

/// How a connection ended when the client expected it to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The daemon closed it; these bytes came first.
    Closed(Vec<u8>),
    /// Nothing more came and the connection stayed open for the whole wait.
    Open(Vec<u8>),
}

/// A raw client connection, over the unix socket or TCP.
pub(crate) enum Client {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Client {
    /// Connects to the unix socket at `path`, with [`DEADLINE`] timeouts.
    pub(crate) fn unix(path: &Path) -> Self {
        let s = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        s.set_write_timeout(Some(DEADLINE)).expect("timeout");
        Self::Unix(s)
    }

    /// Connects to 127.0.0.1:`port`, with [`DEADLINE`] timeouts.
    pub(crate) fn tcp(port: u16) -> Self {
        let s = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        s.set_write_timeout(Some(DEADLINE)).expect("timeout");
        Self::Tcp(s)
    }

    /// Another handle on the same connection.
    pub(crate) fn try_clone(&self) -> Self {
        match self {
            Self::Unix(s) => Self::Unix(s.try_clone().expect("clone")),
            Self::Tcp(s) => Self::Tcp(s.try_clone().expect("clone")),
        }
    }

    pub(crate) fn set_read_timeout(&self, t: Duration) {
        match self {
            Self::Unix(s) => s.set_read_timeout(Some(t)),
            Self::Tcp(s) => s.set_read_timeout(Some(t)),
        }
        .expect("set the read timeout");
    }

    pub(crate) fn set_nonblocking(&self, on: bool) {
        match self {
            Self::Unix(s) => s.set_nonblocking(on),
            Self::Tcp(s) => s.set_nonblocking(on),
        }
        .expect("set_nonblocking");
    }

    /// Closes our sending side (the daemon reads end-of-file).
    pub(crate) fn shutdown_write(&self) {
        match self {
            Self::Unix(s) => s.shutdown(Shutdown::Write),
            Self::Tcp(s) => s.shutdown(Shutdown::Write),
        }
        .expect("shutdown");
    }

    /// Writes as much of `bytes` as the socket takes (for nonblocking sockets).
    pub(crate) fn write_some(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(bytes),
            Self::Tcp(s) => s.write(bytes),
        }
    }

    /// Sends `bytes` in one write.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        match self {
            Self::Unix(s) => s.write_all(bytes),
            Self::Tcp(s) => s.write_all(bytes),
        }
        .expect("send the request");
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }

    /// Reads exactly `n` bytes, failing the test on a timeout or end-of-file.
    pub(crate) fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.read(&mut buf[got..]) {
                Ok(0) => panic!("the daemon closed the connection after {got} of {n} bytes"),
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("no reply ({got} of {n} bytes read): {e}"),
            }
        }
        buf
    }

    /// Reads one reply: its header, then the rest its length field announces.
    pub(crate) fn recv(&mut self) -> Vec<u8> {
        let mut msg = self.read_n(16);
        let len = usize::from(length_field(&msg));
        assert!(
            (16..=65535).contains(&len),
            "reply length {len} in header {msg:02x?}"
        );
        msg.extend(self.read_n(len - 16));
        msg
    }

    /// Sends a request and reads its reply.
    pub(crate) fn request(&mut self, req: &[u8]) -> Vec<u8> {
        self.send(req);
        self.recv()
    }

    /// Reads until the daemon closes the connection or `wait` passes without anything
    /// arriving (the read timeout is [`DEADLINE`] again afterwards).
    pub(crate) fn ending(&mut self, wait: Duration) -> Ending {
        self.set_read_timeout(wait);
        let e = self.read_to_end_or_quiet();
        self.set_read_timeout(DEADLINE);
        e
    }

    fn read_to_end_or_quiet(&mut self) -> Ending {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match self.read(&mut buf) {
                Ok(0) => return Ending::Closed(got),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The daemon closed with our unread request bytes in its buffer.
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Ending::Closed(got);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ending::Open(got);
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }
}
