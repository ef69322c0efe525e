//! The values of the daemon's own options (those the engine does not read), parsed
//! the same way from the command line (`args`) and from the options file (`settings`):
//! their bounds and their parsers, in one place so that both sources accept exactly the
//! same values and say the same thing about a bad one.

/// The longest interval accepted, in seconds (a day).
pub const MAX_METRICS_INTERVAL: u32 = 86_400;

/// The smallest bound accepted: one connection's backlog, below which a single client
/// with a full backlog would be closed for what the per-connection limit allows.
pub const MIN_MAX_QUEUED_REPLY_BYTES: u64 = super::conn::BACKLOG_LIMIT as u64;

/// The largest bound accepted, 1 TiB (a bound above the machine's memory bounds
/// nothing, but a typing slip should not pass for one).
pub const MAX_MAX_QUEUED_REPLY_BYTES: u64 = 1 << 40;

/// `metrics_interval`'s value: whole seconds, 1 to a day.
///
/// # Errors
/// Anything else.
pub(crate) fn parse_interval(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|s| (1..=MAX_METRICS_INTERVAL).contains(s))
        .ok_or_else(|| {
            format!("expected whole seconds from 1 to {MAX_METRICS_INTERVAL}, not '{v}'")
        })
}

/// A switch: `1`, `yes` or `true` for on, `0`, `no` or `false` for off.
///
/// # Errors
/// Anything else.
pub(crate) fn parse_switch(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" => Ok(true),
        "0" | "no" | "false" => Ok(false),
        _ => Err(format!("expected 1 or 0 (yes or no), not '{v}'")),
    }
}

/// `max_queued_reply_bytes`' value: whole bytes, from one connection's backlog to
/// 1 TiB.
///
/// # Errors
/// Anything else.
pub(crate) fn parse_queued_bytes(v: &str) -> Result<u64, String> {
    const RANGE: std::ops::RangeInclusive<u64> =
        MIN_MAX_QUEUED_REPLY_BYTES..=MAX_MAX_QUEUED_REPLY_BYTES;
    v.parse::<u64>()
        .ok()
        .filter(|n| RANGE.contains(n))
        .ok_or_else(|| {
            format!(
                "expected whole bytes from {} to {}, not '{v}'",
                RANGE.start(),
                RANGE.end()
            )
        })
}

/// `max_connections_per_user`'s value: whole connections, 1 to 2^30.
///
/// # Errors
/// Anything else.
pub(crate) fn parse_per_user(v: &str) -> Result<u32, String> {
    use super::conn_limits::{MAX_PER_USER, MIN_PER_USER};
    v.parse::<u32>()
        .ok()
        .filter(|n| (MIN_PER_USER..=MAX_PER_USER).contains(n))
        .ok_or_else(|| {
            format!("expected whole connections from {MIN_PER_USER} to {MAX_PER_USER}, not '{v}'")
        })
}

/// The most worker threads accepted: four times the most that `worker_threads 0`
/// derives from the CPUs, room for a machine that wants more than one per CPU, while
/// a typing slip (`2560`) is refused rather than started as thousands of threads.
pub(crate) const MAX_WORKER_THREADS: u32 = 256;

/// `worker_threads`' value: a whole number of threads, 0 (chosen from the CPUs) to
/// [`MAX_WORKER_THREADS`].
///
/// # Errors
/// Anything else.
pub(crate) fn parse_worker_threads(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_WORKER_THREADS)
        .ok_or_else(|| {
            format!(
                "expected a whole number of threads from 0 (chosen from the CPUs) to {MAX_WORKER_THREADS}, not '{v}'"
            )
        })
}
