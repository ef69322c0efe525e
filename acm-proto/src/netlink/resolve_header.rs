//! `struct rdma_ls_resolve_header`: the fixed part of an LS RESOLVE request, after the
//! nlmsghdr. Device name (64 bytes, NUL padded), port number, path use, then two pad
//! bytes up to 68, where the attributes start. See docs/protocol/netlink-ls.md §2.

use super::codes::PathUse;
use crate::Bytes64;
use crate::error::{Layout, Result};
use byteorder::NativeEndian;

/// Length of the resolve header including its padding: attributes start this many bytes
/// after the nlmsghdr.
pub const RESOLVE_HEADER_LEN: usize = 68;

mod field {
    use core::ops::Range;
    pub(super) const DEVICE_NAME: Range<usize> = 0..64;
    pub(super) const PORT_NUM: usize = 64;
    pub(super) const PATH_USE: usize = 65;
    pub(super) const PAD: Range<usize> = 66..68;
}

const LAYOUT: &Layout = &[
    ("device_name", field::DEVICE_NAME),
    ("port_num", 64..65),
    ("path_use", 65..66),
    ("pad", field::PAD),
];

/// A zero-copy view of a resolve header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolveHeaderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ResolveHeaderPacket<T> {
    view_constructors!("rdma_ls_resolve_header", LAYOUT);

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The RDMA device name (e.g. `mlx5_0`), NUL padded.
    pub fn device_name(&self) -> Bytes64 {
        Bytes64::read(&self.b()[field::DEVICE_NAME]).unwrap_or_default()
    }
    /// The two pad bytes. The kernel never writes them: they hold whatever its buffer
    /// held.
    pub fn pad(&self) -> [u8; 2] {
        [self.b()[field::PAD.start], self.b()[field::PAD.start + 1]]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ResolveHeaderPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the device name.
    pub fn set_device_name(&mut self, v: &Bytes64) {
        self.bm()[field::DEVICE_NAME].copy_from_slice(&v.0);
    }
    /// Sets the pad bytes.
    pub fn set_pad(&mut self, v: [u8; 2]) {
        self.bm()[field::PAD].copy_from_slice(&v);
    }
}

view_fields! {
    impl ResolveHeaderPacket, NativeEndian {
        /// The port number on that device.
        port_num, set_port_num: u8 = field::PORT_NUM;
        /// What the path is for.
        path_use, set_path_use: PathUse = field::PATH_USE;
    }
}

/// A resolve header as typed values; all 68 bytes are kept, so parse then emit reproduces
/// the input exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResolveHeaderRepr {
    /// The RDMA device name, NUL padded. ibacm does not use it to pick the endpoint
    /// (docs/reference-quirks.md §28).
    pub device_name: Bytes64,
    /// The port number. ibacm does not use it either (docs/reference-quirks.md §28).
    pub port_num: u8,
    /// What the path is for.
    pub path_use: PathUse,
    /// The two pad bytes after `path_use`.
    pub pad: [u8; 2],
}

impl ResolveHeaderRepr {
    /// A header for `device` (at most 63 bytes kept, NUL padded), `port` and `path_use`,
    /// with zero padding.
    #[must_use]
    pub fn new(device: &str, port_num: u8, path_use: PathUse) -> Self {
        Self {
            device_name: Bytes64::c_string(device),
            port_num,
            path_use,
            pad: [0; 2],
        }
    }

    /// Parses the first 68 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let p = ResolveHeaderPacket::new_checked(buf)?;
        Ok(Self::from_packet(&p))
    }

    /// Reads the header from a view whose length was already checked.
    pub fn from_packet<T: AsRef<[u8]>>(p: &ResolveHeaderPacket<T>) -> Self {
        Self {
            device_name: p.device_name(),
            port_num: p.port_num(),
            path_use: p.path_use(),
            pad: p.pad(),
        }
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        RESOLVE_HEADER_LEN
    }

    /// Writes the 68 bytes.
    ///
    /// # Panics
    /// If `buf` is shorter than 68 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = ResolveHeaderPacket::new_unchecked(&mut buf[..RESOLVE_HEADER_LEN]);
        p.set_device_name(&self.device_name);
        p.set_port_num(self.port_num);
        p.set_path_use(self.path_use);
        p.set_pad(self.pad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;
    use crate::testutil::{Garbage, bytes};
    use alloc::vec::Vec;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    impl Arbitrary for ResolveHeaderRepr {
        fn arbitrary(g: &mut Gen) -> Self {
            Self::parse(&bytes::<68>(g)).unwrap()
        }
    }

    #[test]
    fn layout_of_mlx5_0_port_1() {
        let h = ResolveHeaderRepr::new("mlx5_0", 1, PathUse::GMP);
        let mut b = [0xEEu8; 70];
        h.emit(&mut b);
        assert_eq!(&b[..6], b"mlx5_0");
        assert!(b[6..64].iter().all(|&x| x == 0));
        assert_eq!(&b[64..68], &[1, 2, 0, 0]);
        assert_eq!(&b[68..], &[0xEE, 0xEE]);
        let p = ResolveHeaderPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.device_name().as_str(), Some("mlx5_0"));
        assert_eq!((p.port_num(), p.path_use()), (1, PathUse::GMP));
        assert_eq!(ResolveHeaderRepr::parse(&b), Ok(h));
    }

    #[test]
    fn truncated_names_field() {
        let e = ResolveHeaderRepr::parse(&[0; 65]).unwrap_err();
        assert_eq!(e.format, "rdma_ls_resolve_header");
        assert_eq!((e.field, e.offset), ("path_use", 65));
        assert_eq!(
            e.reason,
            Reason::Truncated {
                needed: 68,
                available: 65
            }
        );
        let e = ResolveHeaderRepr::parse(&[0; 67]).unwrap_err();
        assert_eq!((e.field, e.offset), ("pad", 66));
    }

    quickcheck! {
        fn prop_repr_roundtrip(h: ResolveHeaderRepr) -> bool {
            let mut b = [0u8; 68];
            h.emit(&mut b);
            ResolveHeaderRepr::parse(&b) == Ok(h)
        }

        fn prop_bytes_roundtrip_exactly(b: Vec<u8>) -> bool {
            match ResolveHeaderRepr::parse(&b) {
                Ok(h) => {
                    let mut out = [0u8; 68];
                    h.emit(&mut out);
                    out[..] == b[..68]
                }
                Err(_) => b.len() < 68,
            }
        }

        fn prop_garbage_never_panics(b: Garbage<68, 80>) -> bool {
            ResolveHeaderRepr::parse(&b.0).is_ok() == (b.0.len() >= 68)
        }
    }
}
