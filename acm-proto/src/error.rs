//! The one error type every parser in this crate returns.
//!
//! A parse error says which format was being read, which field failed, at which byte
//! offset (from the start of the buffer handed to the parser) and why, so a tool such as
//! `acmdump` can point at the exact byte and a daemon can log something actionable.

/// A buffer that could not be parsed as the format it was given to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{format}: field `{field}` at offset {offset}: {reason}")]
pub struct ParseError {
    /// The format being parsed, e.g. `"acm_msg"` or `"MCMemberRecord"`.
    pub format: &'static str,
    /// The field whose bytes were wrong or missing.
    pub field: &'static str,
    /// Byte offset of that field in the buffer given to the parser.
    pub offset: usize,
    /// What was wrong.
    pub reason: Reason,
}

/// Why a field could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// The buffer ends before the field does.
    #[error("truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the format needs from the start of the buffer.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// A length field disagrees with the bytes actually present.
    #[error("length field says {declared} bytes but {actual} are present")]
    LengthMismatch {
        /// What the length field announces.
        declared: usize,
        /// What the buffer holds.
        actual: usize,
    },
    /// A length field announces less than the fixed part of the format.
    #[error("length {declared} is shorter than the minimum of {minimum}")]
    TooShort {
        /// What the length field announces.
        declared: usize,
        /// The smallest length the format allows.
        minimum: usize,
    },
    /// A length field announces more than the format may hold.
    #[error("length {declared} exceeds the maximum of {maximum}")]
    TooLong {
        /// What the length field announces.
        declared: usize,
        /// The largest length the format allows.
        maximum: usize,
    },
    /// A value the format does not allow at all (as opposed to an unknown code point,
    /// which parses into an open enum).
    #[error("value {value:#x} not allowed: {why}")]
    BadValue {
        /// The offending value.
        value: u64,
        /// The rule it breaks.
        why: &'static str,
    },
}

impl ParseError {
    /// Shorthand used by the parsers.
    pub(crate) const fn new(
        format: &'static str,
        field: &'static str,
        offset: usize,
        reason: Reason,
    ) -> Self {
        Self {
            format,
            field,
            offset,
            reason,
        }
    }

    /// A `Truncated` error for a buffer of `available` bytes that needed `needed`.
    pub(crate) const fn truncated(
        format: &'static str,
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    ) -> Self {
        Self::new(
            format,
            field,
            offset,
            Reason::Truncated { needed, available },
        )
    }

    /// Moves the error's offset by `base`, for a parser that ran on a sub-slice.
    #[must_use]
    pub const fn at_base(mut self, base: usize) -> Self {
        self.offset += base;
        self
    }
}

/// Result of every parser in this crate.
pub type Result<T> = core::result::Result<T, ParseError>;

/// A format's fixed layout: each field's name and byte range, in wire order.
pub(crate) type Layout = [(&'static str, core::ops::Range<usize>)];

/// The layout of a format that begins with another: `head`'s rows, then `tail`'s. `N`,
/// the number of rows, is checked when the constant is built.
pub(crate) const fn extend_layout<const N: usize>(
    head: &Layout,
    tail: &Layout,
) -> [(&'static str, core::ops::Range<usize>); N] {
    assert!(head.len() + tail.len() == N, "N must count every row");
    const EMPTY: (&str, core::ops::Range<usize>) = ("", 0..0);
    let mut rows = [EMPTY; N];
    let mut i = 0;
    while i < N {
        let (name, range) = if i < head.len() {
            &head[i]
        } else {
            &tail[i - head.len()]
        };
        rows[i] = (*name, range.start..range.end);
        i += 1;
    }
    rows
}

/// Checks that a buffer of `len` bytes holds every field of `layout`; the error names the
/// first field that is cut short and the length the whole layout needs.
pub(crate) fn check_layout(format: &'static str, layout: &Layout, len: usize) -> Result<()> {
    let needed = layout.iter().map(|(_, r)| r.end).max().unwrap_or(0);
    match layout.iter().find(|(_, r)| r.end > len) {
        Some((name, r)) => Err(ParseError::truncated(format, name, r.start, needed, len)),
        None => Ok(()),
    }
}
