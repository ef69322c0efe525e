//! UD queue pairs: creation (numbered by the hub), the state machine with the
//! attribute masks the IB spec requires for each UD transition, the `post_send` and
//! `post_recv` ops, multicast attach and detach, and the hub's receives and send
//! completions turned into work completions.

use super::cq;
use super::device::{context_device, port_attrs};
use super::state::{Qp, QpState, Recv, STATE, SendOut, Sge, State, Wc};
use crate::ffi::{guard, lock, set_errno};
use crate::link::link;
use acm_engine::{
    DeviceId, EndpointId, Mad, McastGroup, OpenQp, PortId, RecvInfo, SendToken, UdSend,
};
use acm_proto::Gid;
use acm_proto::mad::MAD_LEN;
use rdma_sys::{
    ibv_gid, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_qp_type, ibv_recv_wr, ibv_send_flags,
    ibv_send_wr, ibv_wc_opcode, ibv_wc_status, ibv_wr_opcode,
};
use std::ffi::c_int;
use std::sync::mpsc;
use std::time::Duration;

/// How long a QP call waits for the hub's answer.
const HUB_WAIT: Duration = Duration::from_secs(5);

/// `ibv_qp_attr_mask` bits.
mod mask {
    pub(super) const STATE: u32 = 1 << 0;
    pub(super) const CUR_STATE: u32 = 1 << 1;
    pub(super) const PKEY_INDEX: u32 = 1 << 4;
    pub(super) const PORT: u32 = 1 << 5;
    pub(super) const QKEY: u32 = 1 << 6;
    pub(super) const SQ_PSN: u32 = 1 << 16;
}

fn state_of(raw: u32) -> Option<QpState> {
    Some(match raw {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        6 => QpState::Err,
        _ => return None,
    })
}

fn raw_state(s: QpState) -> u32 {
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
pub fn ud_transition(from: QpState, to: QpState) -> Option<(u32, u32)> {
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

/// Asks the hub thread to run `f` and waits for the QP_OPENED of `ep`.
fn hub_qp_call(
    ep: u32,
    f: impl FnOnce(&acm_io_sim::hub::HubClient) -> Result<(), acm_io_sim::hub::HubError>
    + Send
    + 'static,
) -> Result<u32, i32> {
    let Some(l) = link() else {
        return Err(libc::ENODEV);
    };
    let (tx, rx) = mpsc::sync_channel(1);
    lock(&STATE).qp_waiters.insert(ep, tx);
    l.submit(Box::new(f));
    let r = rx.recv_timeout(HUB_WAIT);
    lock(&STATE).qp_waiters.remove(&ep);
    match r {
        Ok(Ok(qpn)) => Ok(qpn),
        Ok(Err(())) => Err(libc::EINVAL),
        Err(_) => Err(libc::ETIMEDOUT),
    }
}

/// A UD QP in RESET, numbered by the hub. Other QP types are not emulated
/// (EOPNOTSUPP).
///
/// # Safety
/// `pd` is alive and `init` readable and writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut rdma_sys::ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard("ibv_create_qp", std::ptr::null_mut(), || {
        if pd.is_null() || init.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's live structures.
        let (ctx, a) = unsafe { ((*pd).context, &mut *init) };
        if a.qp_type != ibv_qp_type::IBV_QPT_UD {
            set_errno(libc::EOPNOTSUPP);
            return std::ptr::null_mut();
        }
        let Some(device) = context_device(ctx) else {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        };
        let (send_cq, recv_cq) = (a.send_cq as usize, a.recv_cq as usize);
        let ep = {
            let mut s = lock(&STATE);
            if !s.cqs.contains_key(&send_cq) || !s.cqs.contains_key(&recv_cq) {
                set_errno(libc::EINVAL);
                return std::ptr::null_mut();
            }
            let ep = s.next_ep;
            s.next_ep += 1;
            ep
        };
        let qpn = match hub_qp_call(ep, move |c| c.create_qp(EndpointId(ep))) {
            Ok(n) => n,
            Err(e) => {
                set_errno(e);
                return std::ptr::null_mut();
            }
        };
        // SAFETY: an all-zero ibv_qp is valid (zeroed pthread objects are glibc's
        // static initializers).
        let mut qp: Box<ibv_qp> = Box::new(unsafe { std::mem::zeroed() });
        qp.context = ctx;
        qp.qp_context = a.qp_context;
        qp.pd = pd;
        qp.send_cq = a.send_cq;
        qp.recv_cq = a.recv_cq;
        qp.srq = a.srq;
        qp.qp_num = qpn;
        qp.state = raw_state(QpState::Reset);
        qp.qp_type = a.qp_type;
        let qp = Box::into_raw(qp);
        // The caps granted are the caps asked for, inline data excepted.
        a.cap.max_inline_data = 0;
        let mut s = lock(&STATE);
        s.by_ep.insert(ep, qp as usize);
        s.qps.insert(
            qp as usize,
            Qp {
                ep,
                qpn,
                state: QpState::Reset,
                port: 0,
                pkey_index: 0,
                qkey: 0,
                device,
                send_cq,
                recv_cq,
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge.max(1),
                max_recv_sge: a.cap.max_recv_sge.max(1),
                sq_sig_all: a.sq_sig_all != 0,
                recvs: Default::default(),
                sends_out: 0,
            },
        );
        qp
    })
}

/// Destroys a QP: it leaves its groups and the hub forgets it.
///
/// # Safety
/// `qp` came from [`ibv_create_qp`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard("ibv_destroy_qp", libc::EIO, || {
        let ep = {
            let mut s = lock(&STATE);
            let Some(q) = s.qps.remove(&(qp as usize)) else {
                return libc::EINVAL;
            };
            s.by_ep.remove(&q.ep);
            s.sends.retain(|_, o| o.qp != qp as usize);
            q.ep
        };
        if let Some(l) = link() {
            l.submit(Box::new(move |c| c.close_qp(EndpointId(ep))));
        }
        // SAFETY: allocated by ibv_create_qp with Box, freed once; no state refers
        // to it any more.
        drop(unsafe { Box::from_raw(qp) });
        0
    })
}

/// Moves a QP through its states, checking each transition's attribute mask (EINVAL
/// for a missing required or a disallowed attribute, an unknown transition, a bad
/// port or pkey index). RESET→INIT opens the QP on its port at the hub.
///
/// # Safety
/// `qp` is alive and `attr` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, m: c_int) -> c_int {
    guard("ibv_modify_qp", libc::EIO, || {
        // SAFETY: the caller's live attribute structure.
        let a = unsafe { &*attr };
        let m = m as u32;
        let (ep, open) = {
            let mut s = lock(&STATE);
            let Some(q) = s.qps.get_mut(&(qp as usize)) else {
                return libc::EINVAL;
            };
            let from = q.state;
            let to = if m & mask::STATE != 0 {
                match state_of(a.qp_state) {
                    Some(t) => t,
                    None => return libc::EINVAL,
                }
            } else {
                from
            };
            let Some((required, optional)) = ud_transition(from, to) else {
                return libc::EINVAL;
            };
            if m & required != required || m & !(required | optional) != 0 {
                return libc::EINVAL;
            }
            if m & mask::CUR_STATE != 0 && state_of(a.cur_qp_state) != Some(from) {
                return libc::EINVAL;
            }
            let port = if m & mask::PORT != 0 {
                a.port_num
            } else {
                q.port
            };
            let pkey_index = if m & mask::PKEY_INDEX != 0 {
                a.pkey_index
            } else {
                q.pkey_index
            };
            let mut open = None;
            if m & (mask::PORT | mask::PKEY_INDEX) != 0 {
                let Some(p) = port_attrs(q.device, port) else {
                    return libc::EINVAL;
                };
                let Some(&pkey) = p.pkeys.get(usize::from(pkey_index)) else {
                    return libc::EINVAL;
                };
                // The hub binds the QP to one port, once; moving an opened QP to
                // another port is not emulated.
                if from != QpState::Reset && port != q.port {
                    return libc::EINVAL;
                }
                if from == QpState::Reset {
                    open = Some(OpenQp {
                        ep: EndpointId(q.ep),
                        port: PortId {
                            device: DeviceId(q.device as u32),
                            port,
                        },
                        pkey,
                        pkey_index,
                        recv_depth: q.max_recv_wr,
                        send_depth: q.max_send_wr,
                    });
                }
            }
            if open.is_none() {
                apply(&mut s, qp as usize, to, port, pkey_index, m, a.qkey);
                return 0;
            }
            (q.ep, open)
        };
        if let Some(o) = open {
            if let Err(e) = hub_qp_call(ep, move |c| c.open_qp(&o)) {
                return e;
            }
            let mut s = lock(&STATE);
            apply(
                &mut s,
                qp as usize,
                QpState::Init,
                o.port.port,
                o.pkey_index,
                m,
                a.qkey,
            );
        }
        0
    })
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
        super::device::post_async_event_locked(&s, ctx, super::device::EVENT_QP_FATAL, qp as u64);
    }
}

/// Records a transition; ERR flushes the posted receives, RESET drops them.
fn apply(s: &mut State, qp: usize, to: QpState, port: u8, pkey_index: u16, m: u32, qkey: u32) {
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

/// The `post_recv` op.
///
/// # Safety
/// `wr` is a chain of valid receive requests whose buffers stay the HCA's until
/// completed; `bad` is writable.
pub unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard("post_recv", libc::EIO, || {
        let mut s = lock(&STATE);
        let Some(q) = s.qps.get_mut(&(qp as usize)) else {
            return libc::EINVAL;
        };
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the caller's chain of live work requests.
            let r = unsafe { &*w };
            let fail = if q.state == QpState::Reset
                || r.num_sge < 0
                || r.num_sge as u32 > q.max_recv_sge
            {
                Some(libc::EINVAL)
            } else if q.recvs.len() >= q.max_recv_wr as usize {
                Some(libc::ENOMEM)
            } else {
                None
            };
            if let Some(e) = fail {
                // SAFETY: `bad` is writable.
                unsafe { *bad = w };
                return e;
            }
            let sges = (0..r.num_sge as usize)
                .map(|i| {
                    // SAFETY: the request lists `num_sge` entries.
                    let g = unsafe { &*r.sg_list.add(i) };
                    Sge {
                        addr: g.addr,
                        len: g.length,
                    }
                })
                .collect();
            q.recvs.push_back(Recv {
                wr_id: r.wr_id,
                sges,
            });
            w = r.next;
        }
        0
    })
}

/// The `post_send` op: UD sends of one MAD each (at most 256 bytes reach the hub).
///
/// # Safety
/// `wr` is a chain of valid send requests whose buffers are readable; `bad` is
/// writable.
pub unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    guard("post_send", libc::EIO, || {
        let Some(l) = link() else { return libc::ENODEV };
        let mut s = lock(&STATE);
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the caller's chain of live work requests.
            let r = unsafe { &*w };
            match one_send(&mut s, qp as usize, r) {
                Ok(send) => l.submit(Box::new(move |c| c.ud_send(&send))),
                Err(e) => {
                    // SAFETY: `bad` is writable.
                    unsafe { *bad = w };
                    return e;
                }
            }
            w = r.next;
        }
        0
    })
}

fn one_send(s: &mut State, qp: usize, r: &ibv_send_wr) -> Result<UdSend, c_int> {
    let token = s.next_token;
    let Some(q) = s.qps.get(&qp) else {
        return Err(libc::EINVAL);
    };
    if q.state != QpState::Rts
        || !matches!(
            r.opcode,
            ibv_wr_opcode::IBV_WR_SEND | ibv_wr_opcode::IBV_WR_SEND_WITH_IMM
        )
        || r.num_sge < 0
        || r.num_sge as u32 > q.max_send_sge
    {
        return Err(libc::EINVAL);
    }
    if q.sends_out >= q.max_send_wr {
        return Err(libc::ENOMEM);
    }
    // SAFETY: a UD send request carries its address in the `ud` member.
    let ud = unsafe { r.wr.ud };
    let Some(ah) = s.ahs.get(&(ud.ah as usize)).copied() else {
        return Err(libc::EINVAL);
    };
    let mut mad = [0u8; MAD_LEN];
    let mut at = 0;
    for i in 0..r.num_sge as usize {
        // SAFETY: the request lists `num_sge` entries.
        let g = unsafe { &*r.sg_list.add(i) };
        let n = (g.length as usize).min(mad.len() - at);
        // SAFETY: the entry describes `length` readable bytes of registered memory.
        let src = unsafe { std::slice::from_raw_parts(g.addr as usize as *const u8, n) };
        mad[at..at + n].copy_from_slice(src);
        at += n;
    }
    let mut av = ah.av;
    av.remote_qpn = ud.remote_qpn;
    // A controlled Q_Key (high bit set) cannot be sent as such: the QP's own goes.
    av.remote_qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
        q.qkey
    } else {
        ud.remote_qkey
    };
    let signaled = q.sq_sig_all || r.send_flags & ibv_send_flags::IBV_SEND_SIGNALED.0 != 0;
    let ep = q.ep;
    s.next_token += 1;
    s.sends.insert(
        token,
        SendOut {
            qp,
            wr_id: r.wr_id,
            signaled,
        },
    );
    if let Some(q) = s.qps.get_mut(&qp) {
        q.sends_out += 1;
    }
    Ok(UdSend {
        ep: EndpointId(ep),
        token: SendToken(token),
        av,
        mad: Mad(mad),
    })
}

fn mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16, attach: bool) -> c_int {
    // SAFETY: the caller's live GID.
    let mgid = Gid(unsafe { (*gid).raw });
    if mgid.0[0] != 0xFF {
        return libc::EINVAL;
    }
    let Some(ep) = lock(&STATE).qps.get(&(qp as usize)).map(|q| q.ep) else {
        return libc::EINVAL;
    };
    let Some(l) = link() else { return libc::ENODEV };
    let g = McastGroup {
        ep: EndpointId(ep),
        mgid,
        mlid: lid,
    };
    if attach {
        l.submit(Box::new(move |c| c.mcast_attach(&g)));
    } else {
        l.submit(Box::new(move |c| c.mcast_detach(&g)));
    }
    0
}

/// Attaches a QP to a multicast group (EINVAL for a GID that is not multicast).
///
/// # Safety
/// `qp` is alive and `gid` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_attach_mcast", libc::EIO, || mcast(qp, gid, lid, true))
}

/// Detaches a QP from a multicast group.
///
/// # Safety
/// `qp` is alive and `gid` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    guard("ibv_detach_mcast", libc::EIO, || mcast(qp, gid, lid, false))
}

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
