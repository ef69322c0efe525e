//! `worker_threads`: how many threads serve the clients beside the engine's.
//!
//! - `0` (the default): one worker per two CPUs the daemon may run on, at most
//!   [`MAX_DERIVED_WORKERS`], and no worker threads under [`MIN_CPUS_FOR_WORKERS`]
//!   CPUs. The daemon's clients run on the same host, and a cache hit costs the
//!   client's side of the socket about as much CPU as the daemon's, so half the CPUs
//!   for the workers leaves the other half to the clients that keep them busy; on two
//!   CPUs, two workers and the engine thread beside the clients served fewer cache hits
//!   than one thread (BENCHMARKS.md). The CPUs are those
//!   `std::thread::available_parallelism` counts, which honours the affinity mask
//!   (`taskset`, systemd's `CPUAffinity=`) and cgroup quotas (`CPUQuota=`, a
//!   container's limit): a daemon confined to eight CPUs of a large machine starts four
//!   workers, not one per two CPUs of the machine.
//! - `1`: no worker threads; one thread serves the clients and runs the engine: the
//!   fewest threads to wake and the least memory, right for a lightly loaded host.
//! - `N` ≥ 2: `N` worker threads, each owning a share of the client connections and
//!   answering RESOLVE cache hits from the view of the destination cache the engine
//!   publishes, and the engine thread for everything else.
//!
//! When neither the options file nor the command line sets it, the environment
//! variable [`WORKER_THREADS_ENV`] gives the default, so that a whole test suite can run
//! under one setting (`ACM_WORKER_THREADS=1 cargo test -p ibacm`). A bad value there
//! stops the start, like a bad value of the daemon's other options: a run meant to
//! exercise one setting must not quietly exercise another.

use std::ffi::OsStr;

/// The environment variable that gives `worker_threads` when neither the options file
/// nor the command line does.
pub(crate) const WORKER_THREADS_ENV: &str = "ACM_WORKER_THREADS";

/// The most workers `worker_threads 0` derives from the CPUs. Every request a worker
/// cannot answer from the cache view still goes through the one engine thread, so past
/// a few dozen workers more of them add stacks, wake-ups and handoffs, not answers; a
/// machine with more CPUs that wants more says so with a number.
pub(crate) const MAX_DERIVED_WORKERS: usize = 64;

/// The fewest CPUs on which `worker_threads 0` starts worker threads: below, one thread
/// serves the clients and runs the engine.
pub(crate) const MIN_CPUS_FOR_WORKERS: usize = 4;

/// The number of threads serving clients that `configured` (`worker_threads` as set)
/// asks for on this machine: 1 for a single-threaded daemon (no worker threads),
/// otherwise the number of worker threads to start beside the engine's.
#[must_use]
pub(crate) fn worker_count(configured: u32) -> usize {
    count_for(configured, available_cpus())
}

/// [`worker_count`] with the CPU count given: `None` when it could not be learnt, in
/// which case `worker_threads 0` runs single-threaded, the one setting right on any
/// machine.
#[must_use]
pub(crate) fn count_for(configured: u32, cpus: Option<usize>) -> usize {
    match configured {
        0 => match cpus {
            Some(n) if n >= MIN_CPUS_FOR_WORKERS => (n / 2).min(MAX_DERIVED_WORKERS),
            _ => 1,
        },
        // Lossless: usize has at least 32 bits on every target Linux runs on.
        n => n as usize,
    }
}

/// The line the daemon logs at start (level 1) to say what `configured` became, for
/// example `worker_threads 0: 8 worker threads (16 CPUs)`.
#[must_use]
pub(crate) fn worker_threads_line(configured: u32) -> String {
    line_for(configured, available_cpus())
}

/// [`worker_threads_line`] with the CPU count given (`None`: unknown).
#[must_use]
pub(crate) fn line_for(configured: u32, cpus: Option<usize>) -> String {
    let count = count_for(configured, cpus);
    let what = if count == 1 {
        "no worker threads: one thread serves the clients and runs the engine".to_owned()
    } else {
        format!("{count} worker threads")
    };
    let cpus = match cpus {
        Some(1) => "1 CPU".to_owned(),
        Some(n) if configured == 0 && n / 2 > MAX_DERIVED_WORKERS => {
            format!("{n} CPUs, at most {MAX_DERIVED_WORKERS} derived from them")
        }
        Some(n) => format!("{n} CPUs"),
        None => "the CPUs this process may use are unknown".to_owned(),
    };
    format!("worker_threads {configured}: {what} ({cpus})")
}

/// The CPUs this process may run on, as far as the system says.
fn available_cpus() -> Option<usize> {
    std::thread::available_parallelism()
        .ok()
        .map(std::num::NonZeroUsize::get)
}

/// `worker_threads` as [`WORKER_THREADS_ENV`]'s value `value` gives it: `Ok(None)` when
/// the variable is not set.
///
/// # Errors
/// A value that is not text or not a number of threads `worker_threads` accepts.
pub(crate) fn from_environment(value: Option<&OsStr>) -> Result<Option<u32>, String> {
    let Some(v) = value else {
        return Ok(None);
    };
    let v = v.to_str().ok_or_else(|| {
        format!(
            "expected a whole number of threads, not '{}'",
            v.to_string_lossy()
        )
    })?;
    super::option_values::parse_worker_threads(v.trim()).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn zero_is_one_worker_per_two_cpus_from_four_up_to_the_derived_bound() {
        assert_eq!(count_for(0, Some(16)), 8);
        assert_eq!(count_for(0, Some(5)), 2);
        assert_eq!(count_for(0, Some(4)), 2);
        assert_eq!(count_for(0, Some(128)), 64);
        assert_eq!(count_for(0, Some(192)), MAX_DERIVED_WORKERS);
        // Under four CPUs, or none known: single-threaded.
        assert_eq!(count_for(0, Some(3)), 1);
        assert_eq!(count_for(0, Some(2)), 1);
        assert_eq!(count_for(0, Some(1)), 1);
        assert_eq!(count_for(0, None), 1);
    }

    #[test]
    fn a_number_is_taken_as_given_whatever_the_cpus() {
        assert_eq!(count_for(1, Some(8)), 1, "single-threaded");
        assert_eq!(count_for(1, None), 1);
        assert_eq!(count_for(2, Some(1)), 2, "more workers than CPUs, as asked");
        assert_eq!(
            count_for(100, Some(8)),
            100,
            "above the derived bound, as asked"
        );
        assert_eq!(count_for(256, None), 256);
    }

    #[test]
    fn the_start_line_says_what_the_setting_became_and_why() {
        assert_eq!(
            line_for(0, Some(16)),
            "worker_threads 0: 8 worker threads (16 CPUs)"
        );
        assert_eq!(
            line_for(0, Some(192)),
            "worker_threads 0: 64 worker threads (192 CPUs, at most 64 derived from them)"
        );
        assert_eq!(
            line_for(0, Some(2)),
            "worker_threads 0: no worker threads: one thread serves the clients and runs the engine (2 CPUs)"
        );
        assert_eq!(
            line_for(0, Some(1)),
            "worker_threads 0: no worker threads: one thread serves the clients and runs the engine (1 CPU)"
        );
        assert_eq!(
            line_for(0, None),
            "worker_threads 0: no worker threads: one thread serves the clients and runs the engine (the CPUs this process may use are unknown)"
        );
        assert_eq!(
            line_for(1, Some(8)),
            "worker_threads 1: no worker threads: one thread serves the clients and runs the engine (8 CPUs)"
        );
        assert_eq!(
            line_for(96, Some(8)),
            "worker_threads 96: 96 worker threads (8 CPUs)"
        );
        // This machine's own line names its own count.
        let here = worker_threads_line(0);
        let n = worker_count(0);
        assert!(
            here.starts_with(&format!("worker_threads 0: {n} worker threads"))
                || (n == 1 && here.starts_with("worker_threads 0: no worker threads")),
            "{here}"
        );
    }

    #[test]
    fn the_environment_gives_a_value_or_an_error() {
        assert_eq!(from_environment(None), Ok(None));
        assert_eq!(from_environment(Some(OsStr::new("1"))), Ok(Some(1)));
        assert_eq!(from_environment(Some(OsStr::new(" 4\n"))), Ok(Some(4)));
        assert_eq!(from_environment(Some(OsStr::new("0"))), Ok(Some(0)));
        for bad in ["", "257", "-1", "four", "2.5"] {
            assert_eq!(
                from_environment(Some(OsStr::new(bad))),
                Err(format!(
                    "expected a whole number of threads from 0 (chosen from the CPUs) to 256, not '{bad}'"
                )),
                "{bad:?}"
            );
        }
        assert_eq!(
            from_environment(Some(OsStr::from_bytes(b"\xff"))),
            Err("expected a whole number of threads, not '\u{fffd}'".to_owned())
        );
    }
}
