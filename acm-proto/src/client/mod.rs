//! The client protocol (`struct acm_msg`): what librdmacm, `ib_acme` and the daemon
//! exchange over the ibacm unix or TCP socket. See
//! docs/protocol/client-messages.md §3–§10.
//!
//! Every message is a 16-byte [`header`] followed by a body whose shape depends on the
//! operation and direction:
//!
//! | operation | request | response |
//! |---|---|---|
//! | RESOLVE | N × 72-byte [`ep_addr`] entries ([`ResolveRepr`]) | the same shape ([`ResolveRepr`]) |
//! | PERF_QUERY | nothing, or one entry ([`PerfQueryRepr`]) | BE u64 counters ([`PerfReplyRepr`]) |
//! | EP_QUERY | nothing ([`EpQueryRepr`]) | endpoint config + address strings ([`EpQueryReplyRepr`]) |
//!
//! [`ClientMessage`] parses any of them given the [`Direction`]; [`split_stream`] cuts a
//! concatenated byte stream into messages by each header's length field; [`frame`] is
//! how a daemon frames requests out of a socket and which headers end a connection.

pub mod ep_addr;
pub mod ep_query;
pub mod frame;
pub mod header;
pub mod message;
pub mod packet;
pub mod perf;
pub mod resolve;
pub mod stream;

pub use ep_addr::{AddrType, ENTRY_LEN, EpAddrPacket, EpAddrRepr, EpAddress, EpFlags};
pub use ep_query::{EP_CONFIG_LEN, EpConfigRepr, EpQueryReplyRepr, EpQueryRepr};
pub use frame::{FrameError, check_request, reply_len, request_len};
pub use header::{
    ACM_VERSION, Direction, HEADER_LEN, HeaderPacket, HeaderRepr, LengthOrder, MAX_BODY_LEN,
    MAX_ENTRIES, MAX_REQUEST_LEN, Opcode, Operation, Status,
};
pub use message::ClientMessage;
pub use packet::MessagePacket;
pub use perf::{MAX_COUNTERS, PerfQueryRepr, PerfReplyRepr};
pub use resolve::ResolveRepr;
pub use stream::{StreamIter, split_stream};

use crate::error::{ParseError, Reason, Result};

/// Checks a whole message buffer against its header: the length field must equal the
/// buffer length, be at least 16 and, when `max` is given, at most `max`.
pub(crate) fn check_message_len(
    format: &'static str,
    header: &HeaderRepr,
    buf_len: usize,
    max: Option<usize>,
) -> Result<()> {
    let declared = usize::from(header.length);
    let err = |reason| Err(ParseError::new(format, "length", 6, reason));
    if declared < HEADER_LEN {
        return err(Reason::TooShort {
            declared,
            minimum: HEADER_LEN,
        });
    }
    if let Some(maximum) = max
        && declared > maximum
    {
        return err(Reason::TooLong { declared, maximum });
    }
    if declared != buf_len {
        return err(Reason::LengthMismatch {
            declared,
            actual: buf_len,
        });
    }
    Ok(())
}
