//! The steps every LS message's parser takes: its nlmsghdr and the bytes `nlmsg_len`
//! covers, the RDMA_NL_LS client check, and the attributes of one type after the header.

use super::attr::{NlAttrIter, rebase};
use super::codes::LsAttrType;
use super::header::{NLMSG_HDRLEN, NlMsgHeaderPacket, NlMsgHeaderRepr};
use crate::ParseError;
use crate::error::{Reason, Result};

/// The header of the message at the start of `buf` and the message itself: the
/// `nlmsg_len` bytes that belong to it (the `NLMSG_OK` test), never what follows.
pub(super) fn read_message(buf: &[u8]) -> Result<(NlMsgHeaderRepr, &[u8])> {
    let hp = NlMsgHeaderPacket::new_checked(buf)?;
    let len = hp.check_msg_len()?;
    Ok((NlMsgHeaderRepr::from_packet(&hp), &buf[..len]))
}

/// [`read_message`] for a message that must be RDMA_NL_LS's: a type of another client is
/// an error of `format` (`BadValue` on `nlmsg_type`).
pub(super) fn read_ls_message<'a>(
    buf: &'a [u8],
    format: &'static str,
) -> Result<(NlMsgHeaderRepr, &'a [u8])> {
    let (header, msg) = read_message(buf)?;
    if !header.is_ls() {
        return Err(ParseError::new(
            format,
            "nlmsg_type",
            4,
            Reason::BadValue {
                value: header.msg_type.into(),
                why: "client (bits 15:10) is not RDMA_NL_LS (4)",
            },
        ));
    }
    Ok((header, msg))
}

/// The attribute a message is read for, and what its parser says when it is wrong: a
/// payload of the wrong size ([`LsAttrType::size_rule`]) or no such attribute
/// (`missing`), each a `BadValue` of `format` on the attribute's name.
pub(super) struct WantedAttr {
    pub(super) format: &'static str,
    pub(super) kind: LsAttrType,
    pub(super) missing: &'static str,
}

impl WantedAttr {
    /// The attributes of this type (flag bits masked) straight after the nlmsghdr of
    /// `msg`, in order, each with its offset in the message; other types are skipped. A
    /// payload that is not `N` bytes is an error (its value `nla_len`); a badly framed
    /// attribute is [`NlAttrIter`]'s error.
    fn all<'a, const N: usize>(
        &self,
        msg: &'a [u8],
    ) -> impl Iterator<Item = Result<(&'a [u8; N], usize)>> + 'a {
        let Self { format, kind, .. } = *self;
        NlAttrIter::new(&msg[NLMSG_HDRLEN..]).filter_map(move |item| {
            let a = match item {
                Ok(a) => a,
                Err(e) => return Some(Err(rebase(e, NLMSG_HDRLEN))),
            };
            if a.ls_type() != kind {
                return None;
            }
            let at = NLMSG_HDRLEN + a.offset;
            Some(
                <&[u8; N]>::try_from(a.payload)
                    .map(|p| (p, at))
                    .map_err(|_| a.wrong_size(format, at)),
            )
        })
    }

    /// The first of [`all`](Self::all), whose payload and offset are returned; the
    /// attributes after it are not read.
    pub(super) fn first<'a, const N: usize>(
        &self,
        msg: &'a [u8],
        missing_value: u64,
    ) -> Result<(&'a [u8; N], usize)> {
        self.all(msg)
            .next()
            .unwrap_or_else(|| Err(self.missing(missing_value)))
    }

    /// The last of [`all`](Self::all), every one of them checked.
    pub(super) fn last<'a, const N: usize>(
        &self,
        msg: &'a [u8],
        missing_value: u64,
    ) -> Result<(&'a [u8; N], usize)> {
        self.all(msg)
            .try_fold(None, |_, attr| attr.map(Some))?
            .ok_or_else(|| self.missing(missing_value))
    }

    /// The error for a message without the attribute: `BadValue` with `value` at the end
    /// of the nlmsghdr.
    fn missing(&self, value: u64) -> ParseError {
        ParseError::new(
            self.format,
            self.kind.name().unwrap_or("nla_type"),
            NLMSG_HDRLEN,
            Reason::BadValue {
                value,
                why: self.missing,
            },
        )
    }
}
