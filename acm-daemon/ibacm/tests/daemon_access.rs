//! Access control of `ibacm` as a process: the allow-lists checked with each client's
//! credentials at accept (a refused client closed unread and logged once, the others
//! served as before), and the unix socket's group and mode, from the options file and
//! from the command line.
//!
//! The clients that must be refused run under other uids (Debian's `ib_acme` started
//! with `Command::uid`, or through util-linux's `setpriv` for supplementary groups),
//! which needs root. CI runs as root; as another user those parts print that they are
//! skipped.

mod support {
    #[allow(dead_code)]
    pub(crate) mod daemon;
    pub(crate) mod programs;
}

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::daemon::{Client, DEADLINE, Daemon, TempDir, ib_acme, ibacm_command, run_bounded};

/// The unprivileged user of Debian (`nobody`).
const NOBODY: u32 = 65534;
/// uids and gids with no passwd or group entry: numbers need none.
const LISTED_UID: u32 = 4242;
const OTHER_UID: u32 = 4343;
const LISTED_GID: u32 = 4444;
const OTHER_GID: u32 = 4445;

const SETPRIV: &str = "/usr/bin/setpriv";

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A global PERF_QUERY.
fn perf_query() -> Vec<u8> {
    support::daemon::header(1, 2, 16u16.to_be_bytes(), 7)
}

/// Debian's `ib_acme -P` on `sock` as `uid`/`gid` with no supplementary group; returns
/// its output and pid.
fn ib_acme_as(uid: u32, gid: u32, sock: &Path) -> (Output, u32) {
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(sock).arg("-P").uid(uid).gid(gid);
    spawn_bounded(cmd)
}

/// The same through `setpriv`, with supplementary groups `groups`.
fn ib_acme_with_groups(uid: u32, gid: u32, groups: &[u32], sock: &Path) -> (Output, u32) {
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    let mut cmd = Command::new(SETPRIV);
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(format!("--groups={}", groups.join(",")))
        .arg(ib_acme())
        .arg("-S")
        .arg(sock)
        .arg("-P");
    spawn_bounded(cmd)
}

/// Runs `cmd` to completion within [`DEADLINE`]; its output and pid (setpriv execs, so
/// the pid that connects is the child's).
fn spawn_bounded(mut cmd: Command) -> (Output, u32) {
    use std::process::Stdio;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the client");
    let pid = child.id();
    let start = Instant::now();
    let out = std::thread::spawn(move || child.wait_with_output().expect("wait"));
    while !out.is_finished() {
        assert!(start.elapsed() < DEADLINE, "the client did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    (out.join().expect("client thread"), pid)
}

/// Whether `ib_acme -P` printed the counters.
fn served(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stdout).contains("Error Count")
}

/// The log's lines that refuse a client.
fn refusals(dir: &TempDir) -> Vec<String> {
    std::fs::read_to_string(dir.join("ibacm.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("refused"))
        .map(str::to_owned)
        .collect()
}

/// Waits until the log has `n` refusal lines (a line is written when the daemon
/// accepts, which may follow the client's exit).
fn wait_refusals(dir: &TempDir, n: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let r = refusals(dir);
        if r.len() >= n || start.elapsed() > DEADLINE {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn allow_lists_refuse_other_users_at_accept_and_serve_the_rest() {
    let dir = TempDir::new("allow");
    let options = format!("allow_users {LISTED_UID}\nallow_groups {LISTED_GID}\n");
    let mut d = Daemon::start(dir.path(), "sim", &options);
    let sock = d.socket();
    let log = std::fs::read_to_string(dir.join("ibacm.log")).unwrap();
    assert!(
        log.contains(&format!("acm_log_options: allow_users {LISTED_UID}\n")),
        "{log}"
    );

    // Root (or, without root, the daemon's own user) is always let in, by a raw
    // client, which stays connected, and by ib_acme.
    let mut early = Client::unix(&sock);
    assert_eq!(early.request(&perf_query())[..3], [1, 0x82, 0]);
    let mut cmd = Command::new(ib_acme());
    cmd.arg("-S").arg(&sock).arg("-P");
    let (out, _) = spawn_bounded(cmd);
    assert!(served(&out), "{out:?}");
    if !is_root() {
        println!("skipped: refusing a second uid needs root (CI runs as root)");
        return;
    }

    // A uid in no list: closed before any request is read, one log line with its
    // pid, uid and gid.
    let (out, pid) = ib_acme_as(NOBODY, NOBODY, &sock);
    assert!(!served(&out), "{out:?}");
    let lines = wait_refusals(&dir, 1);
    assert_eq!(lines.len(), 1, "{lines:?}\n{}", d.diagnostics());
    let l = &lines[0];
    let want = format!(
        "refused: pid {pid} uid {NOBODY} gid {NOBODY} (supplementary groups: none) is not in allow_users or allow_groups"
    );
    assert!(
        l.contains("acm_svr_accept: client ") && l.ends_with(&want),
        "{l}"
    );
    d.assert_running();

    // A listed uid, a listed primary group, a listed supplementary group: served.
    let (out, _) = ib_acme_as(LISTED_UID, OTHER_GID, &sock);
    assert!(served(&out), "listed uid: {out:?}");
    let (out, _) = ib_acme_as(OTHER_UID, LISTED_GID, &sock);
    assert!(served(&out), "listed primary group: {out:?}");
    assert!(
        Path::new(SETPRIV).exists(),
        "{SETPRIV} is missing (util-linux, essential in Debian)"
    );
    let (out, _) = ib_acme_with_groups(OTHER_UID, OTHER_GID, &[5, LISTED_GID], &sock);
    assert!(served(&out), "listed supplementary group: {out:?}");
    // Other supplementary groups only: refused, and the log says which were checked.
    let (out, pid) = ib_acme_with_groups(OTHER_UID, OTHER_GID, &[5, 6], &sock);
    assert!(!served(&out), "{out:?}");
    let lines = wait_refusals(&dir, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].contains(&format!(
            "pid {pid} uid {OTHER_UID} gid {OTHER_GID} (supplementary groups: 5,6)"
        )),
        "{}",
        lines[1]
    );

    // The connection made before the refusals is served as before.
    assert_eq!(early.request(&perf_query())[..3], [1, 0x82, 0]);
    d.assert_running();
}

#[test]
fn without_lists_every_user_is_served_as_by_the_reference() {
    let dir = TempDir::new("open");
    let d = Daemon::start(dir.path(), "sim", "");
    let mode = std::fs::metadata(d.socket()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o777);
    if !is_root() {
        println!("skipped: connecting as a second uid needs root (CI runs as root)");
        return;
    }
    let (out, _) = ib_acme_as(NOBODY, NOBODY, &d.socket());
    assert!(served(&out), "{out:?}");
    assert!(refusals(&dir).is_empty());
}

/// A refused user connecting in a loop does not fill the log: five lines whole per
/// 10 s, then one count of the rest when the interval ends.
#[test]
fn refused_clients_are_logged_at_a_bounded_rate() {
    if !is_root() {
        println!("skipped: connecting as a second uid needs root (CI runs as root)");
        return;
    }
    let dir = TempDir::new("deny-loop");
    let mut d = Daemon::start(dir.path(), "sim", &format!("allow_users {LISTED_UID}\n"));
    let sock = d.socket();
    for _ in 0..8 {
        let (out, _) = ib_acme_as(NOBODY, NOBODY, &sock);
        assert!(!served(&out), "{out:?}");
    }
    // The count is written when the interval that began with the first refusal ends.
    let start = Instant::now();
    let lines = loop {
        let r = refusals(&dir);
        if r.len() >= 6 || start.elapsed() > DEADLINE + Duration::from_secs(10) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 6, "{lines:?}\n{}", d.diagnostics());
    assert!(
        lines[..5]
            .iter()
            .all(|l| l.contains(&format!("uid {NOBODY} gid {NOBODY}"))),
        "{lines:?}"
    );
    assert!(
        lines[5].contains("acm_svr_accept: 3 more clients refused in the last 10 s"),
        "{lines:?}"
    );
    d.assert_running();
}

#[test]
fn socket_group_and_mode_from_the_options_file_and_the_command_line() {
    // As root any gid will do; otherwise only our own group can be given.
    let gid = if is_root() {
        LISTED_GID
    } else {
        nix::unistd::getegid().as_raw()
    };
    let dir = TempDir::new("sockperm");
    let options = format!("server_socket_mode 0660\nserver_socket_group {gid}\n");
    let d = Daemon::start(dir.path(), "sim", &options);
    let m = std::fs::metadata(d.socket()).unwrap();
    assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o660, gid));
    if is_root() {
        // The kernel refuses connect() to a user without write permission.
        let (out, _) = ib_acme_as(NOBODY, NOBODY, &d.socket());
        assert!(!served(&out), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Permission denied"), "{text}");
        // A member of the socket's group gets in.
        let (out, _) = ib_acme_as(NOBODY, gid, &d.socket());
        assert!(served(&out), "{out:?}");
    } else {
        println!("skipped: connecting as a second uid needs root (CI runs as root)");
    }
    drop(d);

    // The command line overrides the file.
    let dir = TempDir::new("sockperm-cli");
    let root_gid = nix::unistd::getegid().as_raw().to_string();
    let d = Daemon::start_with(
        dir.path(),
        "sim",
        &options,
        &["--socket-mode", "0600", "--socket-group", &root_gid],
    );
    let m = std::fs::metadata(d.socket()).unwrap();
    assert_eq!(
        (m.permissions().mode() & 0o777, m.gid().to_string()),
        (0o600, root_gid)
    );
}

#[test]
fn bad_settings_stop_the_start_naming_the_file_and_line() {
    let dir = TempDir::new("badset");
    let log = dir.join("ibacm.log");
    for (options, extra, want) in [
        (
            "log_level 0\nserver_socket_mode 0778\n",
            &[][..],
            ":2: server_socket_mode: expected octal permission bits such as 0770 (at most 0777)",
        ),
        (
            "allow_users root, no-such-user-acm\n",
            &[],
            ":1: allow_users: no user named 'no-such-user-acm'",
        ),
        (
            "server_mode loop\nallow_groups 0\n",
            &[],
            ":2: allow_groups: needs server_mode unix: TCP clients carry no credentials to check",
        ),
        (
            "",
            &["--socket-group", "no-such-group-acm"],
            "ibacm: --socket-group: no group named 'no-such-group-acm'",
        ),
    ] {
        let mut cmd = ibacm_command(dir.path(), "sim", options, &log);
        cmd.args(extra);
        let out = run_bounded(cmd, DEADLINE);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{options:?}: {err}");
        assert!(err.starts_with("ibacm: ") && err.contains(want), "{err}");
        if !extra.is_empty() {
            continue;
        }
        let file = dir.join("ibacm_opts.cfg");
        assert!(
            err.contains(&format!("ibacm: {}:", file.display())),
            "{err}"
        );
        assert!(!dir.join("ibacm-unix.sock").exists(), "nothing served");
    }
    // An unknown option is still only a notice in the log, as before. The engine logs
    // it on its first turn, which may come after the socket accepts: wait for it.
    let mut d = Daemon::start(dir.path(), "sim", "allow_everyone 1\n");
    d.wait_until("the unknown option's notice in the log", || {
        std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("unknown option 'allow_everyone' ignored"))
    });
    d.assert_running();
}
