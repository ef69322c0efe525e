//! What the parsers report about a file's lines.
//!
//! The reference never refuses a configuration file: it logs a bad line and goes on. So
//! the parsers here do not fail either; they return what they could read together with
//! these diagnostics, which the daemon logs, a bounded number of them
//! ([`summarize`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// How many notices (an unknown option, a name without a value) of one file are logged
/// whole; the rest are counted in one line. Ten say what is wrong as well as a hundred
/// thousand would, and a file of a hundred thousand such lines must not write as many
/// to the log.
pub const NOTICES_LOGGED: usize = 10;

/// How many warnings of one file (and as many errors) are logged whole: an
/// administrator fixing a file wants every bad value named, and a file written by hand
/// holds fewer; the bound is for a file that is not one (a log named as the options
/// file, say).
pub const PROBLEMS_LOGGED: usize = 100;

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

impl Severity {
    /// How many diagnostics of this severity, of one file, are logged whole
    /// ([`summarize`]).
    #[must_use]
    pub const fn logged_whole(self) -> usize {
        match self {
            Self::Notice => NOTICES_LOGGED,
            Self::Warning | Self::Error => PROBLEMS_LOGGED,
        }
    }
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

/// What to log for a list of diagnostics: of each file and severity, the first
/// [`Severity::logged_whole`] whole (in the order given), then, after them all, one line
/// per file and severity that had more: `"{file}: and {n} more {severity}s (lines
/// {first} to {last})"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The lines.
    pub lines: Vec<String>,
    /// How many diagnostics were only counted.
    pub left_out: usize,
}

/// The [`Summary`] of `diags`, in time linear in their number (a handful of files and
/// severities are grouped), formatting only the diagnostics logged whole.
#[must_use]
pub fn summarize(diags: &[Diagnostic]) -> Summary {
    /// One file and severity: how many seen, and the lines of those left out.
    struct Group<'a> {
        file: &'a str,
        severity: Severity,
        seen: usize,
        left_out: Option<(usize, usize)>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut out = Summary::default();
    for d in diags {
        let i = match groups
            .iter()
            .position(|g| g.severity == d.severity && g.file == d.file)
        {
            Some(i) => i,
            None => {
                groups.push(Group {
                    file: &d.file,
                    severity: d.severity,
                    seen: 0,
                    left_out: None,
                });
                groups.len() - 1
            }
        };
        let Some(g) = groups.get_mut(i) else { continue };
        g.seen += 1;
        if g.seen <= d.severity.logged_whole() {
            out.lines.push(format!("{d}"));
        } else {
            out.left_out += 1;
            let (first, last) = g.left_out.unwrap_or((d.line, d.line));
            g.left_out = Some((first.min(d.line), last.max(d.line)));
        }
    }
    for g in &groups {
        if let Some((first, last)) = g.left_out {
            out.lines.push(format!(
                "{}: and {} more {}s (lines {first} to {last})",
                g.file,
                g.seen - g.severity.logged_whole(),
                g.severity
            ));
        }
    }
    out
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

    #[test]
    fn each_file_and_severity_is_logged_up_to_its_bound_then_counted() {
        let mut diags = Vec::new();
        for line in 1..=NOTICES_LOGGED + 3 {
            diags.push(Diagnostic::new(
                "o",
                line,
                Severity::Notice,
                "unknown".into(),
            ));
        }
        for line in 100..100 + PROBLEMS_LOGGED + 1 {
            diags.push(Diagnostic::new("o", line, Severity::Warning, "bad".into()));
        }
        diags.push(Diagnostic::new("a", 7, Severity::Notice, "short".into()));
        let s = summarize(&diags);
        assert_eq!(s.left_out, 4);
        assert_eq!(s.lines.len(), NOTICES_LOGGED + PROBLEMS_LOGGED + 1 + 2);
        assert_eq!(s.lines[0], "o:1: unknown");
        assert_eq!(s.lines[NOTICES_LOGGED], "o:100: bad");
        assert_eq!(s.lines[NOTICES_LOGGED + PROBLEMS_LOGGED], "a:7: short");
        let n = NOTICES_LOGGED;
        assert_eq!(
            s.lines[n + PROBLEMS_LOGGED + 1..],
            [
                format!("o: and 3 more notices (lines {} to {})", n + 1, n + 3),
                format!(
                    "o: and 1 more warnings (lines {0} to {0})",
                    100 + PROBLEMS_LOGGED
                ),
            ]
        );
        assert_eq!(summarize(&diags[..3]).lines.len(), 3);
        assert_eq!(summarize(&[]), Summary::default());
    }
}
