//! What ibacm's two answers to the kernel (the PathRecord reply and the IP_RESOLVE reply)
//! share on the wire: the nlmsghdr's RDMA_NL_LS_F_ERR flag says which kind an answer is,
//! and a success carries one attribute after the header.

use super::attr::{NLA_HDRLEN, nla_align, put_attr};
use super::codes::LsAttrType;
use super::header::{NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderRepr};

/// Writes an answer and returns its length: for `Some((kind, payload))` the header with
/// RDMA_NL_LS_F_ERR forced off and one attribute (no mandatory bit); for `None` the bare
/// header with the flag forced on, so the flag always matches the kind whatever `header`
/// holds.
///
/// # Panics
/// If `buf` is shorter than the answer.
pub(super) fn emit_answer(
    header: &NlMsgHeaderRepr,
    attr: Option<(LsAttrType, &[u8])>,
    buf: &mut [u8],
) -> usize {
    match attr {
        Some((kind, payload)) => {
            let attr_len = nla_align(NLA_HDRLEN + payload.len());
            let header = NlMsgHeaderRepr {
                flags: header.flags.without(NlMsgFlags::LS_ERR),
                ..*header
            };
            header.emit(buf, attr_len);
            put_attr(&mut buf[NLMSG_HDRLEN..], kind.0, payload);
            NLMSG_HDRLEN + attr_len
        }
        None => {
            let header = NlMsgHeaderRepr {
                flags: header.flags.with(NlMsgFlags::LS_ERR),
                ..*header
            };
            header.emit(buf, 0);
            NLMSG_HDRLEN
        }
    }
}
