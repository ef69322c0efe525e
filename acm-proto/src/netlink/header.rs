//! The 16-byte netlink message header (`struct nlmsghdr`), all fields in host order.

use super::codes::{LsOp, RDMA_NL_LS, rdma_nl_client, rdma_nl_op};
use crate::ParseError;
use crate::error::{Layout, Reason, Result};
use byteorder::NativeEndian;

/// Length of `struct nlmsghdr` (NLMSG_HDRLEN).
pub const NLMSG_HDRLEN: usize = 16;

/// NLM_F_REQUEST: the message is a request. The kernel sets it on LS requests and refuses
/// replies that carry it.
pub const NLM_F_REQUEST: u16 = 0x0001;
/// NLM_F_MULTI: part of a multipart message.
pub const NLM_F_MULTI: u16 = 0x0002;
/// NLM_F_ACK: the sender wants an acknowledgement.
pub const NLM_F_ACK: u16 = 0x0004;
/// NLM_F_ECHO: echo this request.
pub const NLM_F_ECHO: u16 = 0x0008;
/// NLM_F_DUMP_INTR: a dump was interrupted.
pub const NLM_F_DUMP_INTR: u16 = 0x0010;
/// NLM_F_DUMP_FILTERED: a dump was filtered.
pub const NLM_F_DUMP_FILTERED: u16 = 0x0020;
/// RDMA_NL_LS_F_ERR: an LS reply that carries no answer; the kernel then falls back to a
/// real SA query. (The same bit is NLM_F_ROOT in generic GET requests.)
pub const RDMA_NL_LS_F_ERR: u16 = 0x0100;

flag_set! {
    /// `nlmsg_flags`: the generic netlink bits plus the LS error bit.
    pub struct NlMsgFlags(u16) {
        /// [`NLM_F_REQUEST`].
        REQUEST = NLM_F_REQUEST,
        /// [`NLM_F_MULTI`].
        MULTI = NLM_F_MULTI,
        /// [`NLM_F_ACK`].
        ACK = NLM_F_ACK,
        /// [`NLM_F_ECHO`].
        ECHO = NLM_F_ECHO,
        /// [`NLM_F_DUMP_INTR`].
        DUMP_INTR = NLM_F_DUMP_INTR,
        /// [`NLM_F_DUMP_FILTERED`].
        DUMP_FILTERED = NLM_F_DUMP_FILTERED,
        /// [`RDMA_NL_LS_F_ERR`].
        LS_ERR = RDMA_NL_LS_F_ERR,
    }
}

const FORMAT: &str = "nlmsghdr";

mod field {
    use core::ops::Range;
    pub(super) const LEN: Range<usize> = 0..4;
    pub(super) const TYPE: Range<usize> = 4..6;
    pub(super) const FLAGS: Range<usize> = 6..8;
    pub(super) const SEQ: Range<usize> = 8..12;
    pub(super) const PID: Range<usize> = 12..16;
}

const LAYOUT: &Layout = &[
    ("nlmsg_len", field::LEN),
    ("nlmsg_type", field::TYPE),
    ("nlmsg_flags", field::FLAGS),
    ("nlmsg_seq", field::SEQ),
    ("nlmsg_pid", field::PID),
];

/// A zero-copy view of a netlink message header (and, through
/// [`check_msg_len`](Self::check_msg_len), of the message it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NlMsgHeaderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NlMsgHeaderPacket<T> {
    view_constructors!(FORMAT, LAYOUT);

    /// The `NLMSG_OK` test: `nlmsg_len` covers at least the header and at most the buffer.
    /// Returns `nlmsg_len`, the number of bytes that belong to this message; bytes past it
    /// are not part of the message.
    ///
    /// Errors: `TooShort` when `nlmsg_len` < 16, `LengthMismatch` when it exceeds the
    /// buffer (both on field `nlmsg_len`, offset 0).
    pub fn check_msg_len(&self) -> Result<usize> {
        self.check_len()?;
        let declared = self.nlmsg_len() as usize;
        let actual = self.buffer.as_ref().len();
        if declared < NLMSG_HDRLEN {
            return Err(ParseError::new(
                FORMAT,
                "nlmsg_len",
                field::LEN.start,
                Reason::TooShort {
                    declared,
                    minimum: NLMSG_HDRLEN,
                },
            ));
        }
        if declared > actual {
            return Err(ParseError::new(
                FORMAT,
                "nlmsg_len",
                field::LEN.start,
                Reason::LengthMismatch { declared, actual },
            ));
        }
        Ok(declared)
    }

    /// The RDMA netlink client of the type (bits 15:10).
    pub fn client(&self) -> u16 {
        rdma_nl_client(self.nlmsg_type())
    }
    /// The op of the type (bits 9:0), as an LS op.
    pub fn op(&self) -> LsOp {
        LsOp(rdma_nl_op(self.nlmsg_type()))
    }
}

view_fields! {
    impl NlMsgHeaderPacket, NativeEndian {
        /// `nlmsg_len`: the whole message, header included.
        nlmsg_len, set_nlmsg_len: u32 = field::LEN;
        /// `nlmsg_type`: for RDMA netlink, client in bits 15:10 and op in bits 9:0.
        nlmsg_type, set_nlmsg_type: u16 = field::TYPE;
        /// `nlmsg_flags`.
        flags, set_flags: NlMsgFlags = field::FLAGS;
        /// `nlmsg_seq`: the kernel's request number, echoed by the reply.
        seq, set_seq: u32 = field::SEQ;
        /// `nlmsg_pid`: the sender's port id (0 for the kernel).
        pid, set_pid: u32 = field::PID;
    }
}

/// A netlink header as typed values, without `nlmsg_len`: the length belongs to the message
/// and is computed by whoever emits it (see [`emit`](Self::emit)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NlMsgHeaderRepr {
    /// `nlmsg_type` (client << 10 | op).
    pub msg_type: u16,
    /// `nlmsg_flags`.
    pub flags: NlMsgFlags,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// `nlmsg_pid`.
    pub pid: u32,
}

impl NlMsgHeaderRepr {
    /// Reads the header from the first 16 bytes of `buf`. `nlmsg_len` is not checked here;
    /// use [`NlMsgHeaderPacket::check_msg_len`] for that. This is what a daemon needs to
    /// answer even a malformed request with an error reply (type and seq echoed).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = NlMsgHeaderPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads the header from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &NlMsgHeaderPacket<T>) -> Self {
        Self {
            msg_type: p.nlmsg_type(),
            flags: p.flags(),
            seq: p.seq(),
            pid: p.pid(),
        }
    }

    /// The RDMA netlink client of the type (bits 15:10).
    #[must_use]
    pub const fn client(&self) -> u16 {
        rdma_nl_client(self.msg_type)
    }

    /// The op of the type (bits 9:0), as an LS op.
    #[must_use]
    pub const fn op(&self) -> LsOp {
        LsOp(rdma_nl_op(self.msg_type))
    }

    /// A request of `op` as the kernel or the daemon sends it: flags NLM_F_REQUEST.
    pub(super) const fn ls_request(op: LsOp, seq: u32, pid: u32) -> Self {
        Self {
            msg_type: op.msg_type(),
            flags: NlMsgFlags::REQUEST,
            seq,
            pid,
        }
    }

    /// The header of an answer to `request` from the process `pid`: the request's type and
    /// seq, so the kernel can match it, with `flags`.
    pub(super) const fn answer_to(request: &Self, flags: NlMsgFlags, pid: u32) -> Self {
        Self {
            msg_type: request.msg_type,
            flags,
            seq: request.seq,
            pid,
        }
    }

    /// Whether the type's client is RDMA_NL_LS (4).
    #[must_use]
    pub const fn is_ls(&self) -> bool {
        self.client() == RDMA_NL_LS
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        NLMSG_HDRLEN
    }

    /// Writes the header into the first 16 bytes of `buf`, with
    /// `nlmsg_len = 16 + payload_len` (saturating at `u32::MAX`).
    ///
    /// # Panics
    /// If `buf` is shorter than 16 bytes.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        let total = u32::try_from(NLMSG_HDRLEN.saturating_add(payload_len)).unwrap_or(u32::MAX);
        let mut p = NlMsgHeaderPacket::new_unchecked(&mut buf[..NLMSG_HDRLEN]);
        p.set_nlmsg_len(total);
        p.set_nlmsg_type(self.msg_type);
        p.set_flags(self.flags);
        p.set_seq(self.seq);
        p.set_pid(self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for NlMsgHeaderRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self {
                msg_type: u16::arbitrary(g),
                flags: NlMsgFlags(u16::arbitrary(g)),
                seq: u32::arbitrary(g),
                pid: u32::arbitrary(g),
            }
        }
    }

    fn ne32(v: u32) -> [u8; 4] {
        v.to_ne_bytes()
    }

    #[test]
    fn emit_writes_host_order_fields() {
        let h = NlMsgHeaderRepr {
            msg_type: 0x1000,
            flags: NlMsgFlags::REQUEST,
            seq: 0x0102_0304,
            pid: 7,
        };
        let mut b = [0xEEu8; 20];
        h.emit(&mut b, 76);
        assert_eq!(&b[0..4], &ne32(92));
        assert_eq!(&b[4..6], &0x1000u16.to_ne_bytes());
        assert_eq!(&b[6..8], &1u16.to_ne_bytes());
        assert_eq!(&b[8..12], &ne32(0x0102_0304));
        assert_eq!(&b[12..16], &ne32(7));
        assert_eq!(&b[16..], &[0xEE; 4], "emit wrote past the header");
        let p = NlMsgHeaderPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.nlmsg_len(), 92);
        assert_eq!(p.client(), 4);
        assert_eq!(p.op(), LsOp::RESOLVE);
        assert_eq!(NlMsgHeaderRepr::parse(&b).unwrap(), h);
    }

    #[test]
    fn setters_and_getters_agree() {
        let mut b = [0u8; 16];
        let mut p = NlMsgHeaderPacket::new_unchecked(&mut b[..]);
        p.set_nlmsg_len(16);
        p.set_nlmsg_type(0x1002);
        p.set_flags(NlMsgFlags::LS_ERR);
        p.set_seq(9);
        p.set_pid(1234);
        assert_eq!(p.nlmsg_len(), 16);
        assert_eq!(p.op(), LsOp::IP_RESOLVE);
        assert_eq!(p.flags().0, 0x0100);
        assert_eq!((p.seq(), p.pid()), (9, 1234));
        assert_eq!(p.check_msg_len(), Ok(16));
    }

    #[test]
    fn truncated_header_names_field() {
        let e = NlMsgHeaderRepr::parse(&[0; 9]).unwrap_err();
        assert_eq!(e.format, "nlmsghdr");
        assert_eq!(e.field, "nlmsg_seq");
        assert_eq!(e.offset, 8);
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 16,
                available: 9
            }
        );
        let e = NlMsgHeaderRepr::parse(&[]).unwrap_err();
        assert_eq!((e.field, e.offset), ("nlmsg_len", 0));
    }

    #[test]
    fn msg_len_checks() {
        let mut b = [0u8; 32];
        NlMsgHeaderRepr::default().emit(&mut b, 8);
        let p = NlMsgHeaderPacket::new_unchecked(&b[..]);
        assert_eq!(p.check_msg_len(), Ok(24), "a longer buffer is fine");
        NlMsgHeaderRepr::default().emit(&mut b, 17);
        let e = NlMsgHeaderPacket::new_unchecked(&b[..])
            .check_msg_len()
            .unwrap_err();
        assert_eq!((e.field, e.offset), ("nlmsg_len", 0));
        assert_eq!(
            e.reason,
            Reason::LengthMismatch {
                declared: 33,
                actual: 32
            }
        );
        b[0..4].copy_from_slice(&ne32(15));
        let e = NlMsgHeaderPacket::new_unchecked(&b[..])
            .check_msg_len()
            .unwrap_err();
        assert_eq!(
            e.reason,
            Reason::TooShort {
                declared: 15,
                minimum: 16
            }
        );
    }

    #[test]
    fn flags_display() {
        assert_eq!(alloc::format!("{}", NlMsgFlags(0x0101)), "REQUEST|LS_ERR");
        assert_eq!(alloc::format!("{}", NlMsgFlags(0x8000)), "0x8000");
    }

    quickcheck! {
        fn prop_header_roundtrip(h: NlMsgHeaderRepr, payload_len: u16) -> bool {
            let mut b = [0u8; 16];
            h.emit(&mut b, usize::from(payload_len));
            let p = NlMsgHeaderPacket::new_unchecked(&b[..]);
            NlMsgHeaderRepr::parse(&b) == Ok(h)
                && p.nlmsg_len() == 16 + u32::from(payload_len)
        }

        fn prop_garbage_never_panics(b: Garbage<16, 40>) -> bool {
            let parsed = NlMsgHeaderRepr::parse(&b.0);
            let framed = NlMsgHeaderPacket::new_unchecked(&b.0[..]).check_msg_len();
            let expect_framed = b.0.len() >= 16 && {
                let n = u32::from_ne_bytes([b.0[0], b.0[1], b.0[2], b.0[3]]) as usize;
                (16..=b.0.len()).contains(&n)
            };
            parsed.is_ok() == (b.0.len() >= 16) && framed.is_ok() == expect_framed
        }

        fn prop_bytes_roundtrip(b: Vec<u8>) -> bool {
            match NlMsgHeaderRepr::parse(&b) {
                Ok(h) => {
                    let mut out = [0u8; 16];
                    let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                    h.emit(&mut out, len.saturating_sub(16) as usize);
                    // nlmsg_len below 16 cannot be re-emitted; everything else is exact.
                    len < 16 || out[..] == b[..16]
                }
                Err(_) => b.len() < 16,
            }
        }
    }
}
