//! Any client-protocol message, chosen by operation and direction.

use super::{
    Direction, EpQueryReplyRepr, EpQueryRepr, HeaderRepr, Operation, PerfQueryRepr, PerfReplyRepr,
    ResolveRepr,
};
use crate::error::{ParseError, Reason, Result};
use alloc::vec;
use alloc::vec::Vec;

/// A decoded client message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum ClientMessage {
    /// RESOLVE, request or response.
    Resolve(ResolveRepr),
    /// PERF_QUERY request.
    PerfQuery(PerfQueryRepr),
    /// PERF_QUERY reply.
    PerfReply(PerfReplyRepr),
    /// EP_QUERY request.
    EpQuery(EpQueryRepr),
    /// EP_QUERY reply.
    EpReply(EpQueryReplyRepr),
}

impl ClientMessage {
    /// Parses one whole message (the header's length must equal `buf.len()`). The
    /// operation is the opcode's low nibble, as the daemon dispatches; an unknown one is
    /// an error at offset 1.
    pub fn parse(buf: &[u8], direction: Direction) -> Result<Self> {
        let header = HeaderRepr::parse(buf, direction)?;
        Ok(match (header.opcode.operation(), direction) {
            (Operation::RESOLVE, _) => Self::Resolve(ResolveRepr::parse(buf, direction)?),
            (Operation::PERF_QUERY, Direction::Request) => {
                Self::PerfQuery(PerfQueryRepr::parse(buf, direction)?)
            }
            (Operation::PERF_QUERY, Direction::Response) => {
                Self::PerfReply(PerfReplyRepr::parse(buf, direction)?)
            }
            (Operation::EP_QUERY, Direction::Request) => {
                Self::EpQuery(EpQueryRepr::parse(buf, direction)?)
            }
            (Operation::EP_QUERY, Direction::Response) => {
                Self::EpReply(EpQueryReplyRepr::parse(buf, direction)?)
            }
            (op, _) => {
                return Err(ParseError::new(
                    "acm_msg",
                    "opcode",
                    1,
                    Reason::BadValue {
                        value: u64::from(op.0),
                        why: "unknown operation (low nibble must be 1, 2 or 3)",
                    },
                ));
            }
        })
    }

    /// The header.
    #[must_use]
    pub fn header(&self) -> &HeaderRepr {
        match self {
            Self::Resolve(m) => &m.header,
            Self::PerfQuery(m) => &m.header,
            Self::PerfReply(m) => &m.header,
            Self::EpQuery(m) => &m.header,
            Self::EpReply(m) => &m.header,
        }
    }

    /// Bytes `emit` writes.
    #[must_use]
    pub fn buffer_len(&self) -> usize {
        match self {
            Self::Resolve(m) => m.buffer_len(),
            Self::PerfQuery(m) => m.buffer_len(),
            Self::PerfReply(m) => m.buffer_len(),
            Self::EpQuery(m) => m.buffer_len(),
            Self::EpReply(m) => m.buffer_len(),
        }
    }

    /// Writes the message; returns its length.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8], direction: Direction) -> usize {
        match self {
            Self::Resolve(m) => m.emit(buf, direction),
            Self::PerfQuery(m) => m.emit(buf, direction),
            Self::PerfReply(m) => m.emit(buf, direction),
            Self::EpQuery(m) => m.emit(buf, direction),
            Self::EpReply(m) => m.emit(buf, direction),
        }
    }

    /// The message as a freshly allocated byte vector.
    #[must_use]
    pub fn to_vec(&self, direction: Direction) -> Vec<u8> {
        let mut b = vec![0u8; self.buffer_len()];
        self.emit(&mut b, direction);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use quickcheck::quickcheck;

    #[test]
    fn unknown_operation_is_rejected_at_the_opcode() {
        // docs/test-vectors.md §14: opcode 0x05.
        let b = [1, 5, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        let e = ClientMessage::parse(&b, Direction::Request).unwrap_err();
        assert_eq!((e.field, e.offset), ("opcode", 1));
    }

    #[test]
    fn dispatch_by_direction() {
        let b = [1, 2, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            ClientMessage::parse(&b, Direction::Request),
            Ok(ClientMessage::PerfQuery(_))
        ));
        assert!(matches!(
            ClientMessage::parse(&b, Direction::Response),
            Ok(ClientMessage::PerfReply(_))
        ));
        let b = [1, 0x83, 2, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0];
        let m = ClientMessage::parse(&b, Direction::Response).unwrap();
        assert!(matches!(m, ClientMessage::EpReply(_)));
        assert_eq!(m.to_vec(Direction::Response), b);
    }

    quickcheck! {
        fn prop_garbage(b: Garbage<88, 700>, d: crate::client::Direction) -> bool {
            match ClientMessage::parse(&b.0, d) {
                Ok(m) => m.to_vec(d) == b.0 && m.header().length as usize == b.0.len(),
                Err(_) => true,
            }
        }
    }
}
