//! What the parsers report about a file's lines.
//!
//! The reference never refuses a configuration file: it logs a bad line and goes on. So
//! the parsers here do not fail either; they return what they could read together with
//! these diagnostics, which the daemon logs.

use alloc::string::String;
use core::fmt;

/// How much a diagnostic matters, so the daemon can pick a log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Harmless but maybe not what was meant (an unknown option name, a short line): the
    /// reference ignores these silently.
    Notice,
    /// A value the reference reads differently from what it looks like (junk read as 0,
    /// an unrecognised setting left unchanged, a malformed line skipped).
    Warning,
    /// A line the reference rejects with an error message (a bad pkey, a bad GID).
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
        })
    }
}

/// One remark about one line of a configuration file, so the administrator can find and
/// fix it. Displays as `"{file}:{line}: {message}"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// The file's name, as the caller gave it.
    pub file: String,
    /// The line number, from 1. All the `fgets` chunks of one long line share it.
    pub line: usize,
    /// How much it matters.
    pub severity: Severity,
    /// What is wrong and what was done about it.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic for `line` of `file`; a constructor so parsers stay short.
    #[must_use]
    pub fn new(file: &str, line: usize, severity: Severity, message: String) -> Self {
        Self {
            file: String::from(file),
            line,
            severity,
            message,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn display_is_file_line_message() {
        let d = Diagnostic::new("ibacm_opts.cfg", 7, Severity::Warning, "bad".into());
        assert_eq!(format!("{d}"), "ibacm_opts.cfg:7: bad");
        assert_eq!(format!("{}", d.severity), "warning");
        assert_eq!(format!("{}", Severity::Notice), "notice");
        assert_eq!(format!("{}", Severity::Error), "error");
        assert!(Severity::Notice < Severity::Error);
    }
}
