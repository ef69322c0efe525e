//! Where a UD send goes: the crate's own address vector, built by the daemon from the
//! engine's send outputs and turned into an `ibv_ah_attr` (feature `verbs`) when the
//! send is posted. Kept free of verbs types so its construction is tested everywhere.

use acm_proto::Gid;

/// The GRH of a send. Every ACM send carries one (docs/protocol/acm-mad.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GrhSpec {
    /// Destination GID (an MGID for multicast).
    pub dgid: Gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// An address handle's attributes plus the remote QP of a UD send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdAddress {
    /// The local port to send from.
    pub port_num: u8,
    /// Destination LID (an MLID for multicast).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate enum (0: the port's rate).
    pub static_rate: u8,
    /// The GRH, if the send carries one.
    pub grh: Option<GrhSpec>,
    /// Remote QPN (0xFFFFFF for multicast).
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

impl UdAddress {
    /// Whether this goes to a multicast group (LIDs 0xC000–0xFFFE).
    #[must_use]
    pub fn is_multicast(&self) -> bool {
        (0xC000..0xFFFF).contains(&self.dlid)
    }
}

#[cfg(feature = "verbs")]
impl UdAddress {
    /// The verbs attributes of the address handle.
    #[must_use]
    pub fn ah_attr(&self) -> rdma_sys::ibv_ah_attr {
        let g = self.grh.unwrap_or_default();
        rdma_sys::ibv_ah_attr {
            grh: rdma_sys::ibv_global_route {
                dgid: rdma_sys::ibv_gid { raw: g.dgid.0 },
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
            },
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: u8::from(self.grh.is_some()),
            port_num: self.port_num,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> UdAddress {
        UdAddress {
            port_num: 1,
            dlid: 0x0017,
            sl: 2,
            src_path_bits: 1,
            static_rate: 0,
            grh: Some(GrhSpec {
                dgid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0, 0x17]),
                flow_label: 0,
                sgid_index: 0,
                hop_limit: 0,
                traffic_class: 0,
            }),
            remote_qpn: 0x48,
            remote_qkey: 0x8001_0000,
        }
    }

    #[test]
    fn multicast_lids_are_recognised() {
        let mut a = response();
        assert!(!a.is_multicast());
        a.dlid = 0xC001;
        assert!(a.is_multicast());
        a.dlid = 0xFFFF; // the permissive LID is not a group
        assert!(!a.is_multicast());
    }

    #[cfg(feature = "verbs")]
    #[test]
    fn ah_attr_carries_every_field() {
        let a = response();
        let attr = a.ah_attr();
        assert_eq!(attr.dlid, 0x17);
        assert_eq!((attr.sl, attr.src_path_bits, attr.static_rate), (2, 1, 0));
        assert_eq!((attr.is_global, attr.port_num), (1, 1));
        // SAFETY: `raw` is the union member the attribute was built with.
        let dgid = unsafe { attr.grh.dgid.raw };
        assert_eq!(dgid, a.grh.unwrap().dgid.0);
        let mut no_grh = a;
        no_grh.grh = None;
        assert_eq!(no_grh.ah_attr().is_global, 0);
    }
}
