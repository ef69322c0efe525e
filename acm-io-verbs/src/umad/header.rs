//! The user MAD header (`struct ib_user_mad_hdr`, kernel ABI version 5 with pkey-index
//! support): the 64 bytes in front of every MAD written to or read from a umad
//! descriptor.
//!
//! Layout, as the kernel's `rdma/ib_user_mad.h` defines it (checked against the header
//! with offsetof; see the tests). The integers the kernel itself uses (`id`, `status`,
//! `timeout_ms`, `retries`, `length`, `pkey_index`) are in host byte order; the wire
//! addressing fields (`qpn`, `qkey`, `lid`, `flow_label`) are big-endian.
//!
//! | Off | Size | Field |
//! |---|---|---|
//! | 0 | 4 | id: the agent |
//! | 4 | 4 | status: 0, or the errno of a send the kernel gives back (ETIMEDOUT) |
//! | 8 | 4 | timeout_ms: per try, for a send that expects a response |
//! | 12 | 4 | retries |
//! | 16 | 4 | length: header plus MAD, as the kernel fills it on a read |
//! | 20 | 4 | qpn (BE) |
//! | 24 | 4 | qkey (BE) |
//! | 28 | 2 | lid (BE) |
//! | 30 | 1 | sl |
//! | 31 | 1 | path_bits |
//! | 32 | 1 | grh_present |
//! | 33 | 1 | gid_index |
//! | 34 | 1 | hop_limit |
//! | 35 | 1 | traffic_class |
//! | 36 | 16 | gid |
//! | 52 | 4 | flow_label (BE) |
//! | 56 | 2 | pkey_index |
//! | 58 | 6 | reserved |

use acm_proto::Gid;

/// Size of the header with pkey-index support.
pub const HEADER_LEN: usize = 64;

/// The GRH part of a MAD address (unused for SA MADs, which go without a GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadGrh {
    /// Destination GID.
    pub gid: Gid,
    /// Source GID index.
    pub gid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

/// One user MAD header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserMadHeader {
    /// The agent id the registration returned.
    pub agent_id: u32,
    /// 0 for a received MAD; the errno of a send the kernel hands back.
    pub status: u32,
    /// Per-try timeout in ms (sends).
    pub timeout_ms: u32,
    /// Retries after the first try (sends).
    pub retries: u32,
    /// Header plus MAD length (reads); what a too-small read buffer needed.
    pub length: u32,
    /// Remote QPN (the SA: 1).
    pub qpn: u32,
    /// Remote Q_Key.
    pub qkey: u32,
    /// Remote LID (the SM's).
    pub lid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub path_bits: u8,
    /// The GRH, if any.
    pub grh: Option<MadGrh>,
    /// The pkey index to send with (or the one a MAD arrived on).
    pub pkey_index: u16,
}

impl UserMadHeader {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`HEADER_LEN`].
    pub fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b.fill(0);
        b[0..4].copy_from_slice(&self.agent_id.to_ne_bytes());
        b[4..8].copy_from_slice(&self.status.to_ne_bytes());
        b[8..12].copy_from_slice(&self.timeout_ms.to_ne_bytes());
        b[12..16].copy_from_slice(&self.retries.to_ne_bytes());
        b[16..20].copy_from_slice(&self.length.to_ne_bytes());
        b[20..24].copy_from_slice(&self.qpn.to_be_bytes());
        b[24..28].copy_from_slice(&self.qkey.to_be_bytes());
        b[28..30].copy_from_slice(&self.lid.to_be_bytes());
        b[30] = self.sl;
        b[31] = self.path_bits;
        if let Some(g) = &self.grh {
            b[32] = 1;
            b[33] = g.gid_index;
            b[34] = g.hop_limit;
            b[35] = g.traffic_class;
            b[36..52].copy_from_slice(&g.gid.0);
            b[52..56].copy_from_slice(&g.flow_label.to_be_bytes());
        }
        b[56..58].copy_from_slice(&self.pkey_index.to_ne_bytes());
    }

    /// Reads a header from the front of `buf`; `None` if it is shorter than
    /// [`HEADER_LEN`].
    #[must_use]
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let b = buf.get(..HEADER_LEN)?;
        let ne32 = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let be32 = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let grh = (b[32] != 0).then(|| {
            let mut gid = [0u8; 16];
            gid.copy_from_slice(&b[36..52]);
            MadGrh {
                gid: Gid(gid),
                gid_index: b[33],
                hop_limit: b[34],
                traffic_class: b[35],
                flow_label: be32(52),
            }
        });
        Some(Self {
            agent_id: ne32(0),
            status: ne32(4),
            timeout_ms: ne32(8),
            retries: ne32(12),
            length: ne32(16),
            qpn: be32(20),
            qkey: be32(24),
            lid: u16::from_be_bytes([b[28], b[29]]),
            sl: b[30],
            path_bits: b[31],
            grh,
            pkey_index: u16::from_ne_bytes([b[56], b[57]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::mad::MAD_LEN;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    fn sa_send() -> UserMadHeader {
        UserMadHeader {
            agent_id: 7,
            status: 0,
            timeout_ms: 2000,
            retries: 2,
            length: (HEADER_LEN + MAD_LEN) as u32,
            qpn: 1,
            qkey: 0x8001_0000,
            lid: 0x0102,
            sl: 3,
            path_bits: 0,
            grh: None,
            pkey_index: 2,
        }
    }

    #[test]
    fn sa_send_header_bytes() {
        let mut b = [0xAAu8; HEADER_LEN];
        sa_send().emit(&mut b);
        assert_eq!(&b[0..4], &7u32.to_ne_bytes());
        assert_eq!(&b[8..12], &2000u32.to_ne_bytes());
        assert_eq!(&b[12..16], &2u32.to_ne_bytes());
        assert_eq!(&b[16..20], &320u32.to_ne_bytes());
        // QP1, Q_Key 0x80010000 and the SM LID go big-endian.
        assert_eq!(&b[20..24], &[0, 0, 0, 1]);
        assert_eq!(&b[24..28], &[0x80, 0x01, 0, 0]);
        assert_eq!(&b[28..30], &[0x01, 0x02]);
        assert_eq!(b[30], 3);
        // No GRH: the whole GRH block stays zero.
        assert!(b[32..56].iter().all(|&x| x == 0));
        assert_eq!(&b[56..58], &2u16.to_ne_bytes());
        assert!(b[58..].iter().all(|&x| x == 0));
    }

    #[test]
    fn grh_fields_land_where_the_kernel_reads_them() {
        let mut h = sa_send();
        h.grh = Some(MadGrh {
            gid: Gid([
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa1, 0xb2, 0xc3,
            ]),
            gid_index: 1,
            hop_limit: 64,
            traffic_class: 0x20,
            flow_label: 0x12345,
        });
        let mut b = [0u8; HEADER_LEN];
        h.emit(&mut b);
        assert_eq!(&b[32..36], &[1, 1, 64, 0x20]);
        assert_eq!(&b[36..38], &[0xfe, 0x80]);
        assert_eq!(&b[52..56], &[0, 1, 0x23, 0x45]);
        assert_eq!(UserMadHeader::parse(&b), Some(h));
    }

    #[test]
    fn a_returned_send_carries_its_status() {
        let mut b = [0u8; HEADER_LEN + MAD_LEN];
        let mut h = sa_send();
        h.status = 110; // ETIMEDOUT
        h.emit(&mut b);
        let p = UserMadHeader::parse(&b).expect("64 bytes");
        assert_eq!(p.status, 110);
        assert_eq!(p.length, 320);
    }

    #[test]
    fn short_buffers_do_not_parse() {
        assert_eq!(UserMadHeader::parse(&[0u8; HEADER_LEN - 1]), None);
    }

    impl Arbitrary for UserMadHeader {
        fn arbitrary(g: &mut Gen) -> Self {
            let grh = bool::arbitrary(g).then(|| {
                let mut gid = [0u8; 16];
                for x in &mut gid {
                    *x = u8::arbitrary(g);
                }
                MadGrh {
                    gid: Gid(gid),
                    gid_index: u8::arbitrary(g),
                    hop_limit: u8::arbitrary(g),
                    traffic_class: u8::arbitrary(g),
                    flow_label: u32::arbitrary(g),
                }
            });
            Self {
                agent_id: u32::arbitrary(g),
                status: u32::arbitrary(g),
                timeout_ms: u32::arbitrary(g),
                retries: u32::arbitrary(g),
                length: u32::arbitrary(g),
                qpn: u32::arbitrary(g),
                qkey: u32::arbitrary(g),
                lid: u16::arbitrary(g),
                sl: u8::arbitrary(g),
                path_bits: u8::arbitrary(g),
                grh,
                pkey_index: u16::arbitrary(g),
            }
        }
    }

    quickcheck! {
        fn emit_then_parse_round_trips(h: UserMadHeader) -> bool {
            let mut b = [0u8; HEADER_LEN];
            h.emit(&mut b);
            UserMadHeader::parse(&b) == Some(h)
        }
    }
}
