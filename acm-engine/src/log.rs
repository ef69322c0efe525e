//! Structured log events. The daemon writes them in the reference's line format
//! (`<time>: <origin>: <message>`); tests and the simulator may collect them.

use alloc::string::String;
use core::fmt;

/// How verbose a message is, as the reference's `log_level` option counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// 0: configuration and errors: always written.
    Basic = 0,
    /// 1: verbose configuration.
    Config = 1,
    /// 2: verbose operation (every request).
    Verbose = 2,
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvent {
    /// Its level; written when `level <= log_level`.
    pub level: Level,
    /// Where it comes from (the reference prints its function name here).
    pub origin: &'static str,
    /// The text.
    pub message: String,
}

impl fmt::Display for LogEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// Formats and queues a log event only when its level is enabled, so that the hot path
/// pays for a comparison, not for formatting.
///
/// `log!(sink, Level::Verbose, "origin", "format {}", args)` where `sink` has
/// `fn log_enabled(&self, Level) -> bool` and `fn push_log(&mut self, LogEvent)`.
macro_rules! log {
    ($sink:expr, $level:expr, $origin:expr, $($fmt:tt)+) => {{
        let level = $level;
        if $sink.log_enabled(level) {
            let message = alloc::format!($($fmt)+);
            $sink.push_log($crate::log::LogEvent { level, origin: $origin, message });
        }
    }};
}
pub(crate) use log;
