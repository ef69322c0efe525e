//! ibacm's answer to a kernel LS request: one PATH_RECORD attribute, or an empty error.
//! See docs/protocol/netlink-ls.md §5, docs/test-vectors.md §19.

use super::answer::emit_answer;
use super::attr::{NLA_HDRLEN, rebase};
use super::codes::LsAttrType;
use super::header::{NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderRepr};
use super::message::{WantedAttr, read_ls_message};
use crate::error::Result;
use crate::path_record::{PATH_DATA_LEN, PathDataRepr};

/// Length of a success reply: nlmsghdr + one 76-byte PATH_RECORD attribute = 92.
pub const LS_SUCCESS_REPLY_LEN: usize = NLMSG_HDRLEN + NLA_HDRLEN + PATH_DATA_LEN;

/// Length of an error reply: the bare nlmsghdr.
pub const LS_ERROR_REPLY_LEN: usize = NLMSG_HDRLEN;

const FORMAT: &str = "RDMA_NL_LS reply";

/// A success's PATH_RECORD attribute.
const PATH_RECORD: WantedAttr = WantedAttr {
    format: FORMAT,
    kind: LsAttrType::PATH_RECORD,
    missing: "neither RDMA_NL_LS_F_ERR nor a PATH_RECORD attribute",
};

/// An LS reply, sent by ibacm to `{nl_pid 0, nl_groups 0x4}`.
///
/// Both kinds echo the request's type and seq and carry the daemon's pid.
///
/// * `Success`: flags 0, `nlmsg_len` 92, then one attribute with `nla_len` 76 and
///   `nla_type` 1 (PATH_RECORD, **without** the mandatory bit) holding the 72-byte
///   `ib_path_rec_data`.
/// * `Error`: flags [`RDMA_NL_LS_F_ERR`](super::RDMA_NL_LS_F_ERR), `nlmsg_len` 16, no
///   attributes. The kernel then asks the SA itself.
///
/// `emit` writes `header.flags` with the ERR bit forced on for `Error` and off for
/// `Success`, so the bytes always match the variant; `parse(emit(x)) == x` holds when the
/// header's flags already agree with the variant (as the constructors make them) and its
/// client is 4.
///
/// `parse` decodes a reply (for `acmdump`): the ERR flag makes it an `Error` whatever
/// follows; otherwise the first PATH_RECORD attribute, its type's flag bits masked, is
/// the answer, it must be exactly 72 bytes, and other attributes are skipped. It is
/// more lenient than the kernel, and no judge of what the kernel takes: the kernel
/// compares the type exactly (a 0x2001 is skipped and the query fails with EIO), refuses
/// NLM_F_REQUEST, keeps only records whose flags contain what the path use needs
/// ([`PathUse::required_flags`](super::PathUse::required_flags)), and takes up to three
/// for ALL (docs/protocol/netlink-ls.md §6; acm-engine's tests hold those rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum LsReplyRepr {
    /// A resolved path.
    Success {
        /// The nlmsghdr (without `nlmsg_len`).
        header: NlMsgHeaderRepr,
        /// The kernel's `ib_path_rec_data`: flags (host order), reserved, PathRecord.
        data: PathDataRepr,
    },
    /// No answer; the kernel falls back to the SA.
    Error {
        /// The nlmsghdr (without `nlmsg_len`); its flags include RDMA_NL_LS_F_ERR.
        header: NlMsgHeaderRepr,
    },
}

impl LsReplyRepr {
    /// The success reply to `request`: its type and seq, flags 0, the daemon's `pid`, and
    /// `data`. Which path flags to put in `data` (0x2B or 0x0A) is the caller's choice.
    #[must_use]
    pub const fn success(request: &NlMsgHeaderRepr, pid: u32, data: PathDataRepr) -> Self {
        Self::Success {
            header: NlMsgHeaderRepr::answer_to(request, NlMsgFlags::EMPTY, pid),
            data,
        }
    }

    /// The error reply to `request`: its type and seq, flags RDMA_NL_LS_F_ERR, the
    /// daemon's `pid`.
    #[must_use]
    pub const fn error(request: &NlMsgHeaderRepr, pid: u32) -> Self {
        Self::Error {
            header: NlMsgHeaderRepr::answer_to(request, NlMsgFlags::LS_ERR, pid),
        }
    }

    /// The nlmsghdr of either kind.
    #[must_use]
    pub const fn header(&self) -> &NlMsgHeaderRepr {
        match self {
            Self::Success { header, .. } | Self::Error { header } => header,
        }
    }

    /// Whether this is an error reply.
    #[must_use]
    pub const fn is_error(&self) -> bool {
        matches!(self, Self::Error { .. })
    }

    /// Parses the reply at the start of `buf`. Errors: a short or inconsistent nlmsghdr
    /// (as for requests), a client other than 4 (`BadValue` on `nlmsg_type`), badly
    /// framed attributes (format `nlattr`), a PATH_RECORD that is not 72 bytes (`BadValue`
    /// on `PATH_RECORD`), or a non-error reply without a PATH_RECORD (`BadValue` on
    /// `PATH_RECORD` at offset 16, the value being `nlmsg_flags`).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (header, msg) = read_ls_message(buf, FORMAT)?;
        if header.flags.contains(NlMsgFlags::LS_ERR) {
            return Ok(Self::Error { header });
        }
        let (payload, at) = PATH_RECORD.first::<PATH_DATA_LEN>(msg, header.flags.0.into())?;
        let data = PathDataRepr::parse(payload).map_err(|e| rebase(e, at + NLA_HDRLEN))?;
        Ok(Self::Success { header, data })
    }

    /// Bytes `emit` writes: 92 for a success, 16 for an error.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Success { .. } => LS_SUCCESS_REPLY_LEN,
            Self::Error { .. } => LS_ERROR_REPLY_LEN,
        }
    }

    /// Writes the reply and returns its length, `buffer_len()`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        match self {
            Self::Success { header, data } => {
                let mut payload = [0u8; PATH_DATA_LEN];
                data.emit(&mut payload);
                emit_answer(header, Some((LsAttrType::PATH_RECORD, &payload)), buf)
            }
            Self::Error { header } => emit_answer(header, None, buf),
        }
    }

    emit_to_vec!("reply");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Gid;
    use crate::error::Reason;
    use crate::netlink::put_attr;
    use crate::netlink::{LsOp, NlMsgHeaderPacket};
    use crate::path_record::{PathFlags, PathRecordRepr};
    use crate::testutil::{Garbage, bytes, ls_header};
    use alloc::vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for LsReplyRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            let request = ls_header(g);
            let pid = u32::arbitrary(g);
            let extra = NlMsgFlags(u16::arbitrary(g));
            if bool::arbitrary(g) {
                let data = PathDataRepr::parse(&bytes::<72>(g)).unwrap();
                let mut r = Self::success(&request, pid, data);
                if let Self::Success { header, .. } = &mut r {
                    header.flags = extra.without(NlMsgFlags::LS_ERR);
                }
                r
            } else {
                let mut r = Self::error(&request, pid);
                if let Self::Error { header } = &mut r {
                    header.flags = extra.with(NlMsgFlags::LS_ERR);
                }
                r
            }
        }
    }

    fn request_header(msg_type: u16) -> NlMsgHeaderRepr {
        NlMsgHeaderRepr {
            msg_type,
            flags: NlMsgFlags::REQUEST,
            seq: 0x0000_BEEF,
            pid: 0,
        }
    }

    fn path() -> PathRecordRepr {
        PathRecordRepr {
            dgid: "fe80::2:c903:a0:b002".parse::<Gid>().unwrap(),
            sgid: "fe80::2:c903:a0:b001".parse::<Gid>().unwrap(),
            dlid: 2,
            slid: 1,
            reversible: true,
            numpath: 1,
            pkey: 0xFFFF,
            ..Default::default()
        }
    }

    fn data(flags: PathFlags) -> PathDataRepr {
        PathDataRepr {
            flags,
            reserved: 0,
            path: path(),
        }
    }

    #[test]
    fn spec_vector_19_success_reply_bytes() {
        for (flags, first) in [
            (PathFlags::IBACMP_REPLY, 0x2Bu32),
            (PathFlags::UNIDIRECTIONAL_REPLY, 0x0A),
        ] {
            let r = LsReplyRepr::success(&request_header(0x1000), 4242, data(flags));
            let b = r.to_vec();
            assert_eq!(b.len(), 92);
            let h = NlMsgHeaderPacket::new_checked(&b[..]).unwrap();
            assert_eq!(h.nlmsg_len(), 92);
            assert_eq!(h.nlmsg_type(), 0x1000);
            assert_eq!(h.flags(), NlMsgFlags::EMPTY);
            assert_eq!(h.seq(), 0xBEEF);
            assert_eq!(h.pid(), 4242);
            assert_eq!(&b[16..18], &76u16.to_ne_bytes());
            assert_eq!(&b[18..20], &1u16.to_ne_bytes());
            assert_eq!(&b[20..24], &first.to_ne_bytes());
            assert_eq!(&b[24..28], &[0; 4]);
            assert_eq!(&b[28..92], &path().to_bytes()[..]);
            assert_eq!(&b[28 + 8..28 + 24], &path().dgid.0);
            assert_eq!(LsReplyRepr::parse(&b), Ok(r));
        }
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn spec_vector_19_literal_bytes_on_little_endian() {
        let b = LsReplyRepr::success(&request_header(0x1000), 1, data(PathFlags::IBACMP_REPLY))
            .to_vec();
        assert_eq!(&b[0..8], &[92, 0, 0, 0, 0x00, 0x10, 0, 0]);
        assert_eq!(&b[16..28], &[0x4C, 0, 1, 0, 0x2B, 0, 0, 0, 0, 0, 0, 0]);
        let e = LsReplyRepr::error(&request_header(0x1002), 1).to_vec();
        assert_eq!(&e[0..8], &[16, 0, 0, 0, 0x02, 0x10, 0x00, 0x01]);
    }

    #[test]
    fn spec_vector_19_error_reply() {
        for t in [LsOp::IP_RESOLVE.msg_type(), 0x1000] {
            let r = LsReplyRepr::error(&request_header(t), 99);
            assert!(r.is_error());
            let b = r.to_vec();
            assert_eq!(b.len(), 16);
            let h = NlMsgHeaderPacket::new_checked(&b[..]).unwrap();
            assert_eq!(h.nlmsg_len(), 16);
            assert_eq!(h.nlmsg_type(), t);
            assert_eq!(h.flags().0, 0x0100);
            assert_eq!((h.seq(), h.pid()), (0xBEEF, 99));
            assert_eq!(LsReplyRepr::parse(&b), Ok(r));
            assert_eq!(r.header().seq, 0xBEEF);
        }
    }

    #[test]
    fn emit_makes_flags_match_the_variant() {
        let mut r = LsReplyRepr::success(&request_header(0x1000), 1, data(PathFlags::IBACMP_REPLY));
        if let LsReplyRepr::Success { header, .. } = &mut r {
            header.flags = NlMsgFlags(0x0101);
        }
        let b = r.to_vec();
        assert_eq!(&b[6..8], &1u16.to_ne_bytes());
        let mut e = LsReplyRepr::error(&request_header(0x1000), 1);
        if let LsReplyRepr::Error { header } = &mut e {
            header.flags = NlMsgFlags::EMPTY;
        }
        assert_eq!(&e.to_vec()[6..8], &0x0100u16.to_ne_bytes());
    }

    #[test]
    fn parse_rules() {
        let ok = LsReplyRepr::success(&request_header(0x1000), 1, data(PathFlags::IBACMP_REPLY));
        let b = ok.to_vec();

        // An error flag wins over any payload.
        let mut e = b.clone();
        e[6..8].copy_from_slice(&0x0100u16.to_ne_bytes());
        assert!(LsReplyRepr::parse(&e).unwrap().is_error());

        // No PATH_RECORD.
        let mut bare = b[..16].to_vec();
        bare[0..4].copy_from_slice(&16u32.to_ne_bytes());
        let err = LsReplyRepr::parse(&bare).unwrap_err();
        assert_eq!((err.field, err.offset), ("PATH_RECORD", 16));

        // PATH_RECORD with the mandatory bit is still a PATH_RECORD; other attributes are
        // skipped.
        let mut two = vec![0u8; 16 + 8 + 76];
        two[..16].copy_from_slice(&b[..16]);
        two[0..4].copy_from_slice(&100u32.to_ne_bytes());
        put_attr(&mut two[16..], 0x2002, &[0; 4]);
        put_attr(&mut two[24..], 0x2001, &b[20..92]);
        assert_eq!(LsReplyRepr::parse(&two), Ok(ok));

        // A PATH_RECORD of the wrong size.
        let mut short = b[..88].to_vec();
        short[0..4].copy_from_slice(&88u32.to_ne_bytes());
        short[16..18].copy_from_slice(&72u16.to_ne_bytes());
        let err = LsReplyRepr::parse(&short).unwrap_err();
        assert_eq!((err.field, err.offset), ("PATH_RECORD", 16));
        assert!(matches!(err.reason, Reason::BadValue { value: 72, .. }));

        // Truncated reply.
        let err = LsReplyRepr::parse(&b[..91]).unwrap_err();
        assert_eq!(
            err.reason,
            Reason::LengthMismatch {
                declared: 92,
                actual: 91
            }
        );

        // Wrong client.
        let mut c = b.clone();
        c[4..6].copy_from_slice(&0x0800u16.to_ne_bytes());
        assert_eq!(LsReplyRepr::parse(&c).unwrap_err().field, "nlmsg_type");
    }

    quickcheck! {
        fn prop_repr_roundtrip(r: LsReplyRepr) -> bool {
            let b = r.to_vec();
            b.len() == r.buffer_len() && LsReplyRepr::parse(&b) == Ok(r)
        }

        fn prop_valid_header_garbage_attrs_never_panics(attrs: Garbage<76, 160>, flags: u16) -> bool {
            let mut b = vec![0u8; 16];
            b.extend_from_slice(&attrs.0);
            let request = request_header(0x1000);
            let header = NlMsgHeaderRepr { flags: NlMsgFlags(flags), ..request };
            header.emit(&mut b, attrs.0.len());
            match LsReplyRepr::parse(&b) {
                Ok(r) => r.is_error() == NlMsgFlags(flags).contains(NlMsgFlags::LS_ERR),
                Err(e) => e.offset >= 16 && e.offset <= b.len(),
            }
        }

        fn prop_garbage_never_panics(b: Garbage<92, 140>) -> bool {
            match LsReplyRepr::parse(&b.0) {
                Ok(r) => r.header().is_ls(),
                Err(e) => e.offset <= b.0.len(),
            }
        }
    }
}
