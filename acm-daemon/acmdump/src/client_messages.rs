//! Client-protocol input: split by each header's length, parse, re-emit.

use super::{DumpError, Item, fields, parse_error};
use crate::Decoded;
use acm_proto::client::{ClientMessage, Direction, split_stream};

pub(crate) fn decode(
    input: &[u8],
    direction: Direction,
) -> impl Iterator<Item = Result<Item, DumpError>> + '_ {
    // Where the next message starts, for errors the splitter reports inside it.
    let mut next = 0;
    split_stream(input, direction)
        .enumerate()
        .map(move |(index, part)| {
            let (offset, bytes) = part.map_err(|source| DumpError::Parse {
                index,
                offset: next,
                source,
            })?;
            next = offset + bytes.len();
            let msg = ClientMessage::parse(bytes, direction)
                .map_err(|e| parse_error(index, offset, e))?;
            let h = msg.header();
            let kind = format!(
                "client {} {}",
                h.opcode,
                match direction {
                    Direction::Request => "request",
                    Direction::Response => "response",
                }
            );
            Ok(Item {
                decoded: Decoded {
                    index,
                    offset,
                    len: bytes.len(),
                    kind,
                    fields: match &msg {
                        ClientMessage::Resolve(m) => fields(m),
                        ClientMessage::PerfQuery(m) => fields(m),
                        ClientMessage::PerfReply(m) => fields(m),
                        ClientMessage::EpQuery(m) => fields(m),
                        ClientMessage::EpReply(m) => fields(m),
                    },
                },
                bytes_in: offset..offset + bytes.len(),
                reencoded: msg.to_vec(direction),
            })
        })
}
