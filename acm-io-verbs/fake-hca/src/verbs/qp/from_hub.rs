//! What the hub does to the application's QPs: the QP numbers it hands out, the MADs it
//! delivers into posted receives, the completions of sends, and a QP that breaks. The
//! hub thread calls these (through `crate::deliver`); they touch only the emulation's
//! state, never the hub connection, so that the thread never calls back into itself.

use super::transition::apply;
use crate::ffi::lock;
use crate::verbs::async_event::{EVENT_QP_FATAL, post_async_event_locked};
use crate::verbs::cq;
use crate::verbs::state::{QpState, STATE, Wc};
use acm_engine::RecvInfo;
use rdma_sys::{ibv_wc_opcode, ibv_wc_status};

/// The hub's answer to CREATE_QP or OPEN_QP, for the call waiting on it.
pub fn qp_opened(ep: u32, result: Result<u32, ()>) {
    if let Some(tx) = lock(&STATE).qp_waiters.remove(&ep) {
        let _ = tx.send(result);
    }
}

/// A MAD for endpoint `ep`: into its oldest posted receive (GRH first), completed on
/// its receive CQ; dropped when the QP is not ready to receive or has no receive
/// posted, as an HCA drops UD traffic.
pub fn receive(ep: u32, wc: RecvInfo, grh: Option<[u8; 40]>, mad: &[u8]) {
    let mut s = lock(&STATE);
    let Some(&qp) = s.by_ep.get(&ep) else { return };
    let Some(q) = s.qps.get_mut(&qp) else { return };
    if !matches!(q.state, QpState::Rtr | QpState::Rts) {
        return;
    }
    let Some(r) = q.recvs.pop_front() else { return };
    let (qpn, recv_cq) = (q.qpn, q.recv_cq);
    let mut bytes = Vec::with_capacity(40 + mad.len());
    bytes.extend_from_slice(&grh.unwrap_or([0; 40]));
    bytes.extend_from_slice(mad);
    let room: u64 = r.sges.iter().map(|g| u64::from(g.len)).sum();
    let status = if room < bytes.len() as u64 {
        ibv_wc_status::IBV_WC_LOC_LEN_ERR
    } else {
        let mut at = 0;
        for g in &r.sges {
            let n = (g.len as usize).min(bytes.len() - at);
            // SAFETY: the posted entry gave the HCA `len` writable bytes at `addr`,
            // which stay the emulation's until this completion is polled.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes[at..].as_ptr(), g.addr as usize as *mut u8, n);
            }
            at += n;
        }
        ibv_wc_status::IBV_WC_SUCCESS
    };
    cq::push(
        &mut s,
        recv_cq,
        Wc {
            wr_id: r.wr_id,
            status,
            opcode: ibv_wc_opcode::IBV_WC_RECV,
            byte_len: bytes.len() as u32,
            qp_num: qpn,
            recv: wc,
            grh: grh.is_some(),
        },
    );
}

/// A send left the hub: its completion, if it was signalled.
pub fn send_done(token: u64, ok: bool) {
    let mut s = lock(&STATE);
    let Some(o) = s.sends.remove(&token) else {
        return;
    };
    let Some(q) = s.qps.get_mut(&o.qp) else {
        return;
    };
    q.sends_out = q.sends_out.saturating_sub(1);
    let (qpn, send_cq) = (q.qpn, q.send_cq);
    if o.signaled {
        cq::push(
            &mut s,
            send_cq,
            Wc {
                wr_id: o.wr_id,
                status: if ok {
                    ibv_wc_status::IBV_WC_SUCCESS
                } else {
                    ibv_wc_status::IBV_WC_GENERAL_ERR
                },
                opcode: ibv_wc_opcode::IBV_WC_SEND,
                byte_len: 0,
                qp_num: qpn,
                recv: RecvInfo::default(),
                grh: false,
            },
        );
    }
}

/// The QP of endpoint `ep` breaks (the hub said so): it goes to the error state,
/// flushing its receives, and its context gets QP_FATAL naming it.
pub fn break_qp(ep: u32) {
    let mut s = lock(&STATE);
    let Some(&qp) = s.by_ep.get(&ep) else {
        return;
    };
    let Some(q) = s.qps.get(&qp) else {
        return;
    };
    let (port, pkey_index, cq) = (q.port, q.pkey_index, q.recv_cq);
    apply(&mut s, qp, QpState::Err, port, pkey_index, 0, 0);
    if let Some(ctx) = s.cqs.get(&cq).map(|c| c.context) {
        post_async_event_locked(&s, ctx, EVENT_QP_FATAL, qp as u64);
    }
}
