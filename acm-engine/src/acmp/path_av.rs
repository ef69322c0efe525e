//! The address vector a path record gives a destination (docs/ibacmp.md §4), whether the
//! path came from the SA (`sa`) or from the administrator's preloaded routes
//! (`preload`); both modules use it, so it lives apart from either.

use crate::device::PortAttrs;
use crate::io::{AddressVector, GlobalRoute};
use acm_proto::acm_mad::ACM_QKEY;
use acm_proto::path_record::{PATH_RECORD_LEN, PathRecordPacket};

/// The address vector for a path (docs/ibacmp.md §4).
pub(crate) fn av_from_path(path: &[u8; PATH_RECORD_LEN], attrs: &PortAttrs) -> AddressVector {
    let p = PathRecordPacket::new_unchecked(&path[..]);
    AddressVector {
        dlid: p.dlid(),
        sl: p.sl(),
        src_path_bits: (p.slid() & 0x7F) as u8,
        static_rate: p.rate().to_byte() & 0x3F,
        grh: GlobalRoute {
            dgid: p.dgid(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            tclass: p.tclass(),
            sgid_index: attrs.gid_index(&p.sgid()).unwrap_or(0),
        },
        remote_qpn: 0,
        remote_qkey: ACM_QKEY,
    }
}
