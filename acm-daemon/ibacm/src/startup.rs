//! Detaching, and telling whoever started the daemon how start-up went.
//!
//! The reference detaches with `daemon(3)` before it reads anything, so a daemon that
//! cannot start (its lock held, its fabric file missing) dies in the background and the
//! command that started it has already exited 0. Ours detaches the same way from the
//! caller's point of view (the command returns, the daemon runs on in its own session,
//! in `/`, with its standard streams on `/dev/null`), but the command returns only once
//! the daemon is listening, or with the daemon's own error message and exit status.
//!
//! How: the command starts the daemon as a new process of its own executable with the
//! same arguments ([`spawn_and_wait`]), rather than forking, which is `unsafe` in Rust
//! and forbidden in this workspace. The child's standard input is one end of a unix
//! socket pair, the report channel; [`Report`] writes `ok` on it once listening, or
//! `exit N` and the message on failure, and closes it. The child knows its role by
//! [`CHILD_ENV`], which holds the parent's pid, so a stray copy of the variable in an
//! environment is ignored.

use nix::sys::stat::{SFlag, fstat};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitCode, Stdio};

/// Set for the detached daemon to the pid of the command that started it.
pub(crate) const CHILD_ENV: &str = "ACM_IBACM_DETACHED_BY";

/// What a start-up failure reports: the exit status and the message (without the
/// `ibacm: ` prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The exit status.
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

impl Failure {
    /// A failure with status 1.
    #[must_use]
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }
}

/// Where the result of start-up goes.
#[derive(Debug)]
pub(crate) enum Report {
    /// In the foreground: errors to stderr; success needs no word (`-P` prints its
    /// "listening on" line itself).
    Foreground,
    /// The detached daemon: the channel to the waiting command, until used.
    Detached(Option<UnixStream>),
}

/// What this process is, for detaching.
#[derive(Debug)]
pub(crate) enum Role {
    /// The command that detaches a daemon and waits for its report.
    Parent,
    /// A daemon: in the foreground, or detached with its report channel.
    Daemon(Report),
}

impl Role {
    /// The role of this process, given whether the command line keeps it in the
    /// foreground. A detached daemon takes its report channel from standard input
    /// (which then reads `/dev/null`), starts a new session and moves to `/`.
    ///
    /// # Errors
    /// The detached daemon cannot set itself up; it is then reported as a failure.
    pub(crate) fn of_this_process(foreground: bool) -> Result<Self, Failure> {
        if foreground {
            return Ok(Self::Daemon(Report::Foreground));
        }
        let parent = std::os::unix::process::parent_id().to_string();
        let is_child = std::env::var_os(CHILD_ENV).is_some_and(|v| v == parent.as_str())
            && fstat(io::stdin().as_fd()).is_ok_and(|st| {
                SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFSOCK
            });
        if !is_child {
            return Ok(Self::Parent);
        }
        let setup = || -> io::Result<UnixStream> {
            let channel = UnixStream::from(io::stdin().as_fd().try_clone_to_owned()?);
            nix::unistd::dup2_stdin(std::fs::File::open("/dev/null")?)?;
            // Not a process group leader (the parent started us in its own group), so
            // this cannot fail with EPERM.
            nix::unistd::setsid()?;
            std::env::set_current_dir("/")?;
            Ok(channel)
        };
        match setup() {
            Ok(channel) => Ok(Self::Daemon(Report::Detached(Some(channel)))),
            Err(e) => Err(Failure::new(format!("cannot detach: {e}"))),
        }
    }
}

impl Report {
    /// Start-up is done: the daemon listens. The waiting command exits 0.
    pub(crate) fn ready(&mut self) {
        if let Self::Detached(channel) = self
            && let Some(mut c) = channel.take()
        {
            // If the command is gone, nobody is waiting: nothing to do.
            let _ = c.write_all(b"ok\n");
        }
    }

    /// Start-up failed: the message goes to stderr, or to the waiting command, which
    /// prints it and exits with `f.code`. After [`Report::ready`], to stderr.
    pub(crate) fn failed(&mut self, f: &Failure) {
        if let Self::Detached(channel) = self
            && let Some(mut c) = channel.take()
        {
            let _ = write!(c, "exit {}\n{}\n", f.code, f.message);
            return;
        }
        eprintln!("ibacm: {}", f.message);
    }
}

/// Starts this executable again with the same arguments as the detached daemon, waits
/// for its report, prints its error if any, and returns the exit status to leave with.
#[must_use]
pub(crate) fn spawn_and_wait() -> ExitCode {
    match detach() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ibacm: cannot detach: {e}");
            ExitCode::FAILURE
        }
    }
}

fn detach() -> io::Result<ExitCode> {
    let exe = std::env::current_exe()?;
    let (ours, theirs) = UnixStream::pair()?;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(CHILD_ENV, std::process::id().to_string())
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut reader = BufReader::new(ours);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    if first == "ok\n" {
        return Ok(ExitCode::SUCCESS);
    }
    // Failed: wait until the daemon has exited, so that the files it removes on its way
    // out are gone when we return.
    let status = child.wait()?;
    if let Some(code) = first
        .trim_end()
        .strip_prefix("exit ")
        .and_then(|c| c.parse::<u8>().ok())
    {
        // As the daemon prints it in the foreground (the message may span lines).
        let mut message = String::new();
        reader.read_to_string(&mut message)?;
        eprintln!("ibacm: {}", message.strip_suffix('\n').unwrap_or(&message));
        return Ok(ExitCode::from(code));
    }
    eprintln!("ibacm: the daemon exited during start-up without a word ({status})");
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .filter(|&c| c != 0)
            .unwrap_or(1),
    ))
}
