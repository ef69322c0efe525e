//! Completion queues: creation, the `poll_cq` and `req_notify_cq` ops, and CQ events
//! on the completion channel.

use crate::ffi::{guard, lock, read_record, set_errno};
use crate::verbs::async_event::{EVENT_CQ_ERR, post_async_event_locked};
use crate::verbs::state::{Cq, STATE, State, Wc, context_device};
use rdma_sys::{ibv_comp_channel, ibv_context, ibv_cq, ibv_wc, ibv_wc_flags};
use std::ffi::{c_int, c_void};

/// A CQ with room for at least `cqe` completions.
///
/// # Safety
/// `ctx` is open; `channel` is NULL or a channel of it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    guard("ibv_create_cq", std::ptr::null_mut(), || {
        if context_device(ctx).is_none() || cqe < 1 {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let mut s = lock(&STATE);
        if !channel.is_null() && !s.channels.contains_key(&(channel as usize)) {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: an all-zero ibv_cq is valid (zeroed pthread objects are glibc's
        // static initializers).
        let mut cq: Box<ibv_cq> = Box::new(unsafe { std::mem::zeroed() });
        cq.context = ctx;
        cq.channel = channel;
        cq.cq_context = cq_context;
        cq.cqe = cqe;
        let cq = Box::into_raw(cq);
        if !channel.is_null() {
            // SAFETY: the channel is alive (it is in the table).
            unsafe { (*channel).refcnt += 1 };
        }
        s.cqs.insert(
            cq as usize,
            Cq {
                cqe: cqe as usize,
                channel: (!channel.is_null()).then_some(channel as usize),
                context: ctx as usize,
                ..Cq::default()
            },
        );
        cq
    })
}

/// Destroys a CQ; EBUSY while a QP uses it.
///
/// # Safety
/// `cq` came from [`ibv_create_cq`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard("ibv_destroy_cq", libc::EIO, || {
        let mut s = lock(&STATE);
        let key = cq as usize;
        if s.qps.values().any(|q| q.send_cq == key || q.recv_cq == key) {
            return libc::EBUSY;
        }
        let Some(c) = s.cqs.remove(&key) else {
            return libc::EINVAL;
        };
        if let Some(ch) = c.channel {
            // SAFETY: a channel with CQs cannot be destroyed, so it is alive.
            unsafe { (*(ch as *mut ibv_comp_channel)).refcnt -= 1 };
        }
        // SAFETY: allocated by ibv_create_cq with Box, freed once.
        drop(unsafe { Box::from_raw(cq) });
        0
    })
}

/// Adds a completion to `cq`: raises the CQ event if it is armed (disarming it), or
/// the CQ error event if it overflows (the completion is lost, as on an HCA).
pub fn push(s: &mut State, cq: usize, wc: Wc) {
    let Some(c) = s.cqs.get_mut(&cq) else {
        return;
    };
    if c.wcs.len() >= c.cqe {
        // The caller holds the state's lock: post without taking it again.
        let ctx = c.context;
        post_async_event_locked(s, ctx, EVENT_CQ_ERR, cq as u64);
        return;
    }
    c.wcs.push_back(wc);
    if c.armed {
        c.armed = false;
        if let Some(pipe) = c.channel.and_then(|ch| s.channels.get(&ch)) {
            pipe.post(&(cq as u64).to_ne_bytes());
        }
    }
}

/// The `poll_cq` op: up to `n` completions, oldest first.
///
/// # Safety
/// `cq` is alive and `wc` has room for `n` completions.
pub unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    guard("poll_cq", -libc::EIO, || {
        let mut s = lock(&STATE);
        let Some(c) = s.cqs.get_mut(&(cq as usize)) else {
            return -libc::EINVAL;
        };
        let mut taken = 0;
        while taken < n.max(0) {
            let Some(w) = c.wcs.pop_front() else { break };
            // SAFETY: the caller's array has room for `n` entries; entry `taken` is
            // inside it. Each field is written through the raw pointer, the union
            // (immediate data) zeroed with the rest.
            unsafe {
                let out = wc.add(taken as usize);
                std::ptr::write_bytes(out, 0, 1);
                (*out).wr_id = w.wr_id;
                (*out).status = w.status;
                (*out).opcode = w.opcode;
                (*out).byte_len = w.byte_len;
                (*out).qp_num = w.qp_num;
                (*out).src_qp = w.recv.src_qp;
                (*out).wc_flags = if w.grh { ibv_wc_flags::IBV_WC_GRH.0 } else { 0 };
                (*out).pkey_index = w.recv.pkey_index;
                (*out).slid = w.recv.slid;
                (*out).dlid_path_bits = w.recv.dlid_path_bits;
            }
            taken += 1;
        }
        taken
    })
}

/// The `req_notify_cq` op: the next completion raises an event on the channel.
///
/// # Safety
/// Any pointer (an unknown CQ gets EINVAL).
pub unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    guard("req_notify_cq", libc::EIO, || {
        match lock(&STATE).cqs.get_mut(&(cq as usize)) {
            Some(c) => {
                c.armed = true;
                0
            }
            None => libc::EINVAL,
        }
    })
}

/// The next CQ event of a channel; blocks on a blocking descriptor, as libibverbs
/// does (a C provider's thread may wait here).
///
/// # Safety
/// `channel` is alive; `cq` and `cq_context` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard("ibv_get_cq_event", -1, || {
        // SAFETY: the caller passes a live channel.
        let fd = unsafe { (*channel).fd };
        let Some(rec) = read_record::<8>(fd) else {
            return -1;
        };
        let p = u64::from_ne_bytes(rec) as usize as *mut ibv_cq;
        // SAFETY: the record names a CQ of this channel, which cannot be destroyed
        // while its events are unacknowledged (the caller's contract); both out
        // pointers are writable.
        unsafe {
            *cq = p;
            *cq_context = (*p).cq_context;
        }
        0
    })
}

/// Acknowledges CQ events.
///
/// # Safety
/// `cq` is alive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, n: u32) {
    guard("ibv_ack_cq_events", (), || {
        let _s = lock(&STATE);
        // SAFETY: the caller passes a live CQ; the count is updated under the lock.
        unsafe { (*cq).comp_events_completed += n };
    });
}
