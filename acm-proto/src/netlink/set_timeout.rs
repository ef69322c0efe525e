//! SET_TIMEOUT: the daemon tells the kernel how long to wait for its answers. See
//! docs/protocol/netlink-ls.md §8.
//!
//! The kernel waits a while (2000 ms unless told otherwise) for a local-service answer
//! to each PathRecord request before it asks the SA itself. A SET_TIMEOUT from a
//! CAP_NET_ADMIN process sets that wait for every later request and moves the deadlines
//! of those in flight; the kernel clamps the value to
//! [`KERNEL_LS_TIMEOUT_MIN_MS`]..=[`KERNEL_LS_TIMEOUT_MAX_MS`] and sends no answer. The
//! value stays in the kernel after the sender exits, until the next SET_TIMEOUT.

use super::attr::{NLA_HDRLEN, put_attr};
use super::codes::{LsAttrType, LsOp};
use super::header::{NLMSG_HDRLEN, NlMsgHeaderRepr};
use super::message::{WantedAttr, read_message};
use crate::error::Result;
use alloc::vec;
use alloc::vec::Vec;

/// The kernel's wait for a local-service answer when nobody has set it, in ms.
pub const KERNEL_LS_TIMEOUT_DEFAULT_MS: u32 = 2000;
/// The shortest wait the kernel accepts (smaller values are raised to it), in ms.
pub const KERNEL_LS_TIMEOUT_MIN_MS: u32 = 100;
/// The longest wait the kernel accepts (larger values are lowered to it), in ms.
pub const KERNEL_LS_TIMEOUT_MAX_MS: u32 = 200_000;

/// Length of a SET_TIMEOUT: nlmsghdr + one 8-byte TIMEOUT attribute = 24.
pub const SET_TIMEOUT_LEN: usize = NLMSG_HDRLEN + NLA_HDRLEN + 4;

const FORMAT: &str = "RDMA_NL_LS SET_TIMEOUT";

/// The TIMEOUT attribute.
const TIMEOUT: WantedAttr = WantedAttr {
    format: FORMAT,
    kind: LsAttrType::TIMEOUT,
    missing: "no TIMEOUT attribute",
};

/// A SET_TIMEOUT message: type 0x1001, flags NLM_F_REQUEST (the kernel refuses it
/// without), then one TIMEOUT attribute (type 2, **without** the mandatory bit) holding
/// the wait in ms as a u32 in host order, straight after the nlmsghdr.
///
/// Why no mandatory bit: the kernel reads these attributes with its lenient parser,
/// which masks only the nested and byte-order flag bits off a type; 0x2002 then reads as
/// a type above the largest it knows and is skipped, so the kernel finds no TIMEOUT and
/// drops the message without a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SetTimeoutRepr {
    /// The nlmsghdr.
    pub header: NlMsgHeaderRepr,
    /// The wait, in ms.
    pub timeout_ms: u32,
}

impl SetTimeoutRepr {
    /// The message the daemon with process id `pid` sends.
    #[must_use]
    pub const fn new(seq: u32, pid: u32, timeout_ms: u32) -> Self {
        Self {
            header: NlMsgHeaderRepr::ls_request(LsOp::SET_TIMEOUT, seq, pid),
            timeout_ms,
        }
    }

    /// The wait the kernel keeps for `timeout_ms`: the value clamped to its bounds. The
    /// kernel reads it as a signed int, so a value past `i32::MAX` is negative to it and
    /// raised to the minimum.
    #[must_use]
    pub const fn kernel_clamp(timeout_ms: u32) -> u32 {
        if timeout_ms < KERNEL_LS_TIMEOUT_MIN_MS || timeout_ms > i32::MAX as u32 {
            KERNEL_LS_TIMEOUT_MIN_MS
        } else if timeout_ms > KERNEL_LS_TIMEOUT_MAX_MS {
            KERNEL_LS_TIMEOUT_MAX_MS
        } else {
            timeout_ms
        }
    }

    /// Parses the message at the start of `buf`: the first TIMEOUT attribute (flag bits
    /// masked) of exactly 4 bytes; other attributes are skipped.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (header, msg) = read_message(buf)?;
        let (timeout, _) = TIMEOUT.first::<4>(msg, 0)?;
        Ok(Self {
            header,
            timeout_ms: u32::from_ne_bytes(*timeout),
        })
    }

    /// Bytes `emit` writes: 24.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        SET_TIMEOUT_LEN
    }

    /// Writes the message and returns its length, 24.
    ///
    /// # Panics
    /// If `buf` is shorter than 24 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        self.header.emit(buf, SET_TIMEOUT_LEN - NLMSG_HDRLEN);
        put_attr(
            &mut buf[NLMSG_HDRLEN..SET_TIMEOUT_LEN],
            LsAttrType::TIMEOUT.0,
            &self.timeout_ms.to_ne_bytes(),
        );
        SET_TIMEOUT_LEN
    }

    /// The message as a freshly allocated byte vector.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; SET_TIMEOUT_LEN];
        self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Garbage;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for SetTimeoutRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self {
                header: NlMsgHeaderRepr::arbitrary(g),
                timeout_ms: u32::arbitrary(g),
            }
        }
    }

    quickcheck! {
        fn round_trips(r: SetTimeoutRepr) -> bool {
            SetTimeoutRepr::parse(&r.to_vec()) == Ok(r)
        }

        fn garbage_never_panics(g: Garbage<24, 48>) -> bool {
            let _ = SetTimeoutRepr::parse(&g.0);
            true
        }
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_bytes_the_kernel_accepts() {
        let b = SetTimeoutRepr::new(3, 0x10e1, 5000).to_vec();
        assert_eq!(
            b,
            [
                24, 0, 0, 0, 0x01, 0x10, 0x01, 0x00, 3, 0, 0, 0, 0xe1, 0x10, 0, 0, // nlmsghdr
                8, 0, 2, 0, 0x88, 0x13, 0, 0, // TIMEOUT = 5000, no mandatory bit
            ]
        );
        let mut no_attr = b[..16].to_vec();
        no_attr[0] = 16;
        assert!(SetTimeoutRepr::parse(&no_attr).is_err());
    }

    #[test]
    fn the_kernel_clamps() {
        assert_eq!(SetTimeoutRepr::kernel_clamp(5), KERNEL_LS_TIMEOUT_MIN_MS);
        assert_eq!(SetTimeoutRepr::kernel_clamp(4000), 4000);
        assert_eq!(
            SetTimeoutRepr::kernel_clamp(300_000),
            KERNEL_LS_TIMEOUT_MAX_MS
        );
        assert_eq!(
            SetTimeoutRepr::kernel_clamp(i32::MAX as u32),
            KERNEL_LS_TIMEOUT_MAX_MS
        );
        // Negative to the kernel.
        assert_eq!(
            SetTimeoutRepr::kernel_clamp(u32::MAX),
            KERNEL_LS_TIMEOUT_MIN_MS
        );
    }
}
