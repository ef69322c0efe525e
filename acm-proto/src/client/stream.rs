//! Cutting a concatenated byte stream (as a socket delivers it, or a capture's
//! `*.requests.bin`) into messages by each header's length field.

use super::{Direction, HEADER_LEN, HeaderRepr};
use crate::error::{ParseError, Reason, Result};

/// Splits `bytes` into whole messages going `direction`.
pub fn split_stream(bytes: &[u8], direction: Direction) -> StreamIter<'_> {
    StreamIter {
        bytes,
        offset: 0,
        direction,
        failed: false,
    }
}

/// Iterator returned by [`split_stream`]: yields `(offset, message bytes)`, or one error
/// (with the offset in the whole stream) after which it stops.
#[derive(Debug, Clone)]
pub struct StreamIter<'a> {
    bytes: &'a [u8],
    offset: usize,
    direction: Direction,
    failed: bool,
}

impl<'a> Iterator for StreamIter<'a> {
    type Item = Result<(usize, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.offset..];
        let at = self.offset;
        let result = HeaderRepr::parse(rest, self.direction)
            .map_err(|e| e.at_base(at))
            .and_then(|h| {
                let len = usize::from(h.length);
                if len < HEADER_LEN {
                    Err(ParseError::new(
                        "acm_msg stream",
                        "length",
                        at + 6,
                        Reason::TooShort {
                            declared: len,
                            minimum: HEADER_LEN,
                        },
                    ))
                } else if len > rest.len() {
                    Err(ParseError::truncated(
                        "acm_msg stream",
                        "body",
                        at + HEADER_LEN,
                        at + len,
                        self.bytes.len(),
                    ))
                } else {
                    Ok((at, &rest[..len]))
                }
            });
        match &result {
            Ok((_, m)) => self.offset += m.len(),
            Err(_) => self.failed = true,
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn splits_and_reports_truncation() {
        let perf = [1u8, 2, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut s = Vec::new();
        s.extend_from_slice(&perf);
        s.extend_from_slice(&perf);
        let parts: Vec<_> = split_stream(&s, Direction::Request)
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(parts, [(0, &perf[..]), (16, &perf[..])]);
        s.truncate(24);
        let r: Vec<_> = split_stream(&s, Direction::Request).collect();
        assert_eq!(r.len(), 2);
        let e = r[1].unwrap_err();
        assert_eq!((e.field, e.offset), ("tid", 24));
        assert!(matches!(e.reason, Reason::Truncated { .. }));
    }

    #[test]
    fn zero_length_does_not_loop() {
        let b = [1u8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let r: Vec<_> = split_stream(&b, Direction::Request).collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].unwrap_err().offset, 6);
    }
}
