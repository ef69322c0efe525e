//! A UD QP's state machine: which transitions exist and the attributes each requires
//! (checked by `ibv_modify_qp`), and what a transition does to the QP. It is a module
//! of its own because both the application's calls and the hub (a QP that breaks)
//! move a QP, and neither side should reach into the other for it.

use crate::verbs::cq;
use crate::verbs::state::{QpState, Recv, State, Wc};
use acm_engine::RecvInfo;
use rdma_sys::{ibv_qp, ibv_wc_opcode, ibv_wc_status};

/// `ibv_qp_attr_mask` bits.
pub(crate) mod mask {
    pub(crate) const STATE: u32 = 1 << 0;
    pub(crate) const CUR_STATE: u32 = 1 << 1;
    pub(crate) const PKEY_INDEX: u32 = 1 << 4;
    pub(crate) const PORT: u32 = 1 << 5;
    pub(crate) const QKEY: u32 = 1 << 6;
    pub(crate) const SQ_PSN: u32 = 1 << 16;
}

/// The QP state a raw `ibv_qp_state` names, if it is one a UD QP has.
pub(crate) fn state_of(raw: u32) -> Option<QpState> {
    Some(match raw {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        6 => QpState::Err,
        _ => return None,
    })
}

/// The raw `ibv_qp_state` of a state, as the QP structure the application sees holds it.
pub(crate) fn raw_state(s: QpState) -> u32 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Err => 6,
    }
}

/// The attributes a UD QP's transition requires and those it may also carry (IB
/// spec, the QP state table for UD); `None` for a transition that does not exist.
pub(crate) fn ud_transition(from: QpState, to: QpState) -> Option<(u32, u32)> {
    use QpState::{Err, Init, Reset, Rtr, Rts};
    use mask::{CUR_STATE, PKEY_INDEX, PORT, QKEY, SQ_PSN, STATE};
    Some(match (from, to) {
        (_, Reset) | (_, Err) => (STATE, 0),
        (Reset, Init) => (STATE | PKEY_INDEX | PORT | QKEY, 0),
        (Init, Init) => (STATE, PKEY_INDEX | PORT | QKEY),
        (Init, Rtr) => (STATE, PKEY_INDEX | QKEY),
        (Rtr, Rts) => (STATE | SQ_PSN, CUR_STATE | QKEY),
        (Rts, Rts) => (STATE, CUR_STATE | QKEY),
        _ => return None,
    })
}

/// Records a transition; ERR flushes the posted receives, RESET drops them.
pub(crate) fn apply(
    s: &mut State,
    qp: usize,
    to: QpState,
    port: u8,
    pkey_index: u16,
    m: u32,
    qkey: u32,
) {
    let Some(q) = s.qps.get_mut(&qp) else { return };
    q.state = to;
    q.port = port;
    q.pkey_index = pkey_index;
    if m & mask::QKEY != 0 {
        q.qkey = qkey;
    }
    // SAFETY: the QP is alive (it is in the table); its state field mirrors ours.
    unsafe { (*(qp as *mut ibv_qp)).state = raw_state(to) };
    let (qpn, recv_cq) = (q.qpn, q.recv_cq);
    let flushed: Vec<Recv> = match to {
        QpState::Err | QpState::Reset => q.recvs.drain(..).collect(),
        _ => Vec::new(),
    };
    if to == QpState::Err {
        for r in flushed {
            cq::push(
                s,
                recv_cq,
                Wc {
                    wr_id: r.wr_id,
                    status: ibv_wc_status::IBV_WC_WR_FLUSH_ERR,
                    opcode: ibv_wc_opcode::IBV_WC_RECV,
                    byte_len: 0,
                    qp_num: qpn,
                    recv: RecvInfo::default(),
                    grh: false,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ud_transitions_require_what_the_spec_requires() {
        use QpState::*;
        use mask::*;
        assert_eq!(
            ud_transition(Reset, Init),
            Some((STATE | PKEY_INDEX | PORT | QKEY, 0))
        );
        assert_eq!(ud_transition(Init, Rtr), Some((STATE, PKEY_INDEX | QKEY)));
        assert_eq!(
            ud_transition(Rtr, Rts),
            Some((STATE | SQ_PSN, CUR_STATE | QKEY))
        );
        assert_eq!(ud_transition(Reset, Rtr), None, "no skipping INIT");
        assert_eq!(ud_transition(Rts, Init), None);
        assert_eq!(ud_transition(Rts, Err), Some((STATE, 0)));
    }
}
