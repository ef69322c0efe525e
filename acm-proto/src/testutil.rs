//! Shared quickcheck support for the per-format unit tests.

use crate::netlink::{NlMsgHeaderRepr, RDMA_NL_LS, rdma_nl_type};
use crate::{Bytes64, Gid};
use alloc::vec::Vec;
use quickcheck::{Arbitrary, Gen};

/// `N` arbitrary bytes.
pub(crate) fn bytes<const N: usize>(g: &mut Gen) -> [u8; N] {
    let mut out = [0u8; N];
    for b in &mut out {
        *b = u8::arbitrary(g);
    }
    out
}

/// An arbitrary byte string whose length is drawn from `0..=max`, biased towards the
/// interesting small lengths by quickcheck's size parameter.
pub(crate) fn byte_vec(g: &mut Gen, max: usize) -> Vec<u8> {
    let len = usize::arbitrary(g) % (max + 1);
    (0..len).map(|_| u8::arbitrary(g)).collect()
}

/// An arbitrary nlmsghdr of an RDMA_NL_LS message (client 4, any op).
pub(crate) fn ls_header(g: &mut Gen) -> NlMsgHeaderRepr {
    let mut header = NlMsgHeaderRepr::arbitrary(g);
    header.msg_type = rdma_nl_type(RDMA_NL_LS, u16::arbitrary(g));
    header
}

impl Arbitrary for Gid {
    fn arbitrary(g: &mut Gen) -> Self {
        Self(bytes(g))
    }
}

impl Arbitrary for Bytes64 {
    fn arbitrary(g: &mut Gen) -> Self {
        Self(bytes(g))
    }
}

/// Garbage input for "never panics" properties: half the time exactly `EXACT` bytes
/// (well-sized garbage reaches the deeper checks), otherwise any length up to `MAX`.
#[derive(Debug, Clone)]
pub(crate) struct Garbage<const EXACT: usize, const MAX: usize>(pub(crate) Vec<u8>);

impl<const EXACT: usize, const MAX: usize> Arbitrary for Garbage<EXACT, MAX> {
    fn arbitrary(g: &mut Gen) -> Self {
        if bool::arbitrary(g) {
            Self((0..EXACT).map(|_| u8::arbitrary(g)).collect())
        } else {
            Self(byte_vec(g, MAX))
        }
    }
}
