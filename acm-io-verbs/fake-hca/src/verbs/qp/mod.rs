//! UD queue pairs as the application drives them: creation (numbered by the hub),
//! `ibv_modify_qp` through the UD state machine ([`transition`]), the `post_send` and
//! `post_recv` ops, multicast attach and detach. What the hub does to a QP (its
//! receives, send completions and breaks) is [`from_hub`].

pub mod from_hub;
pub mod transition;

use crate::ffi::{guard, lock, set_errno};
use crate::link::link;
use crate::live::port_attrs;
use crate::verbs::state::{Qp, QpState, Recv, STATE, SendOut, Sge, State, context_device};
use acm_engine::{DeviceId, EndpointId, Mad, McastGroup, OpenQp, PortId, SendToken, UdSend};
use acm_proto::Gid;
use acm_proto::mad::MAD_LEN;
use rdma_sys::{
    ibv_gid, ibv_qp, ibv_qp_attr, ibv_qp_init_attr, ibv_qp_type, ibv_recv_wr, ibv_send_flags,
    ibv_send_wr, ibv_wr_opcode,
};
use std::ffi::c_int;
use std::sync::mpsc;
use std::time::Duration;
use transition::{apply, mask, raw_state, state_of, ud_transition};

/// How long a QP call waits for the hub's answer.
const HUB_WAIT: Duration = Duration::from_secs(5);

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
