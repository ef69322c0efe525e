//! RDMA netlink LS input: messages split by `nlmsg_len` (4-byte aligned); those with
//! NLM_F_REQUEST are kernel requests, the others ibacm's replies.

use super::{DumpError, Item, fields, parse_error};
use crate::Decoded;
use acm_proto::netlink::{LsReplyRepr, LsRequestRepr, NLM_F_REQUEST, NlMsgHeaderPacket};

pub(crate) fn decode(input: &[u8]) -> impl Iterator<Item = Result<Item, DumpError>> + '_ {
    let mut offset = 0;
    let mut index = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || offset >= input.len() {
            return None;
        }
        let result = decode_one(&input[offset..], index, offset);
        match &result {
            Ok((_, step)) => {
                offset += step;
                index += 1;
            }
            Err(_) => failed = true,
        }
        Some(result.map(|(item, _)| item))
    })
}

/// Decodes the message at the start of `rest`; returns it and the distance to the next.
fn decode_one(rest: &[u8], index: usize, offset: usize) -> Result<(Item, usize), DumpError> {
    let header = NlMsgHeaderPacket::new_checked(rest).map_err(|e| parse_error(index, offset, e))?;
    let len = header
        .check_msg_len()
        .map_err(|e| parse_error(index, offset, e))?;
    let bytes = &rest[..len];
    let (kind, value, reencoded) = if header.flags().0 & NLM_F_REQUEST != 0 {
        let r = LsRequestRepr::parse(bytes).map_err(|e| parse_error(index, offset, e))?;
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out);
        (format!("netlink LS request {:?}", r.op()), fields(&r), out)
    } else {
        let r = LsReplyRepr::parse(bytes).map_err(|e| parse_error(index, offset, e))?;
        let kind = match r {
            LsReplyRepr::Success { .. } => "netlink LS reply (path)",
            LsReplyRepr::Error { .. } => "netlink LS reply (error)",
        };
        (kind.to_owned(), fields(&r), r.to_vec())
    };
    let item = Item {
        decoded: Decoded {
            index,
            offset,
            len,
            kind,
            fields: value,
        },
        bytes_in: offset..offset + len,
        reencoded,
    };
    Ok((item, len.next_multiple_of(4).min(rest.len())))
}
