//! `acmdump`: decode raw ACM messages field by field, and check that re-encoding them
//! reproduces the input byte for byte.
//!
//! Everything here is a thin layer over `acm-proto`: splitting an input into messages,
//! choosing the parser for each, and rendering the `serde` form of the result.

mod client_messages;
mod hex;
mod mad;
mod netlink;
mod render;

pub use hex::{HexError, decode_hex};
pub use render::{Decoded, to_json, to_text};

use acm_proto::ParseError;
use acm_proto::client::Direction;
use thiserror::Error;

/// What the input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Client protocol messages (acm_msg), concatenated.
    Client,
    /// 256-byte MADs (ACM class 0x2C, SA class 0x03, or any other), concatenated.
    Mad,
    /// 296-byte receive buffers: a 40-byte GRH then a 256-byte MAD.
    GrhMad,
    /// RDMA netlink local-service messages (requests and replies), concatenated.
    Netlink,
}

/// Why decoding stopped.
#[derive(Debug, Error)]
pub enum DumpError {
    /// A message could not be parsed; the offset in the error is absolute in the input.
    #[error("message {index} at offset {offset}: {source}")]
    Parse {
        /// Index of the message.
        index: usize,
        /// Offset of the message in the input.
        offset: usize,
        /// The parser's error (its offset is absolute in the input).
        source: ParseError,
    },
    /// Re-encoding a message did not reproduce its bytes.
    #[error(
        "message {index} at offset {offset}: re-encoding differs first at offset {first_diff} (input {input}, re-encoded {reencoded})"
    )]
    Roundtrip {
        /// Index of the message.
        index: usize,
        /// Offset of the message in the input.
        offset: usize,
        /// Absolute offset of the first differing byte.
        first_diff: usize,
        /// The input byte there (hex), or `end` when the input is shorter.
        input: String,
        /// The re-encoded byte there (hex), or `end`.
        reencoded: String,
    },
}

/// One message: where it is, what it decoded to, and its re-encoding.
pub(crate) struct Item {
    pub(crate) decoded: Decoded,
    pub(crate) bytes_in: std::ops::Range<usize>,
    pub(crate) reencoded: Vec<u8>,
}

/// Options of one dump.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// What the input holds.
    pub kind: Kind,
    /// For client messages: which way they travel (decides the length byte order).
    pub direction: Direction,
}

/// Decodes every message of `input`. With `roundtrip`, also checks each re-encoding.
/// Returns what was decoded before the first error, and that error.
pub fn dump(input: &[u8], opts: Options, roundtrip: bool) -> (Vec<Decoded>, Option<DumpError>) {
    let mut out = Vec::new();
    let items: Box<dyn Iterator<Item = Result<Item, DumpError>>> = match opts.kind {
        Kind::Client => Box::new(client_messages::decode(input, opts.direction)),
        Kind::Mad => Box::new(mad::decode(input, 0)),
        Kind::GrhMad => Box::new(mad::decode(input, acm_proto::grh::GRH_LEN)),
        Kind::Netlink => Box::new(netlink::decode(input)),
    };
    for item in items {
        let item = match item {
            Ok(i) => i,
            Err(e) => return (out, Some(e)),
        };
        if roundtrip {
            let original = &input[item.bytes_in.clone()];
            if let Some(e) = first_difference(original, &item.reencoded, &item) {
                out.push(item.decoded);
                return (out, Some(e));
            }
        }
        out.push(item.decoded);
    }
    (out, None)
}

fn first_difference(original: &[u8], reencoded: &[u8], item: &Item) -> Option<DumpError> {
    let at = original
        .iter()
        .zip(reencoded)
        .position(|(a, b)| a != b)
        .or_else(|| {
            (original.len() != reencoded.len()).then(|| original.len().min(reencoded.len()))
        })?;
    let show = |b: Option<&u8>| b.map_or_else(|| "end".to_owned(), |b| format!("{b:#04x}"));
    Some(DumpError::Roundtrip {
        index: item.decoded.index,
        offset: item.decoded.offset,
        first_diff: item.decoded.offset + at,
        input: show(original.get(at)),
        reencoded: show(reencoded.get(at)),
    })
}

/// Turns a parser's error on message `index` at `offset` into a dump error whose offset
/// is absolute in the input.
pub(crate) fn parse_error(index: usize, offset: usize, e: ParseError) -> DumpError {
    DumpError::Parse {
        index,
        offset,
        source: e.at_base(offset),
    }
}

/// The `serde_json` value of a Repr (`Null` if it cannot be represented, which the
/// acm-proto Reprs never are).
pub(crate) fn fields<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
