//! Async events: how the emulation raises them on a context (a port change, a device
//! that dies, a CQ that overflows, a QP that breaks) and how `ibv_get_async_event`
//! reads them back. Each travels through the context's pipe as a 16-byte record: the
//! event type, then the element (a port number, or a CQ or QP address); both ends of
//! that record are here. Raising an event needs only the emulation's state, so the
//! devices, CQs, QPs and the hub's deliveries all depend on this module and it on none
//! of them.

use crate::ffi::{guard, lock, read_record};
use crate::verbs::state::{STATE, State};
use rdma_sys::{ibv_async_event, ibv_context};
use std::ffi::c_int;

/// Raises an async event on the context at address `ctx` (nothing when it is closed).
pub fn post_async_event(ctx: usize, event_type: i32, element: u64) {
    post_async_event_locked(&lock(&STATE), ctx, event_type, element);
}

/// [`post_async_event`] for a caller that holds the state's lock.
pub fn post_async_event_locked(s: &State, ctx: usize, event_type: i32, element: u64) {
    let mut rec = [0u8; 16];
    rec[..4].copy_from_slice(&event_type.to_ne_bytes());
    rec[8..].copy_from_slice(&element.to_ne_bytes());
    if let Some(c) = s.contexts.get(&ctx) {
        c.events.post(&rec);
    }
}

/// `IBV_EVENT_DEVICE_FATAL`.
pub const EVENT_DEVICE_FATAL: i32 = 8;
/// `IBV_EVENT_CQ_ERR`.
pub const EVENT_CQ_ERR: i32 = 0;
/// `IBV_EVENT_QP_FATAL`.
pub const EVENT_QP_FATAL: i32 = 1;
/// The event types whose element is a port number: PORT_ACTIVE, PORT_ERR,
/// LID_CHANGE, PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE.
const PORT_EVENTS: [i32; 7] = [9, 10, 11, 12, 13, 17, 18];

/// The next async event; blocks on a blocking descriptor as libibverbs does.
///
/// # Safety
/// `ctx` is open and `event` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    guard("ibv_get_async_event", -1, || {
        // SAFETY: the caller passes an open context.
        let fd = unsafe { (*ctx).async_fd };
        let Some(rec) = read_record::<16>(fd) else {
            return -1;
        };
        let ty = i32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let mut el = [0u8; 8];
        el.copy_from_slice(&rec[8..]);
        let element = u64::from_ne_bytes(el);
        // SAFETY: `event` is writable; the element is written as the union member the
        // event type uses (a port number as an int, otherwise an object pointer) and
        // the type as the C int the enum is.
        unsafe {
            std::ptr::write_bytes(event, 0, 1);
            let p = std::ptr::addr_of_mut!((*event).element);
            if ty == EVENT_DEVICE_FATAL || PORT_EVENTS.contains(&ty) {
                p.cast::<c_int>().write(element as c_int);
            } else {
                p.cast::<u64>().write(element);
            }
            std::ptr::addr_of_mut!((*event).event_type)
                .cast::<c_int>()
                .write(ty);
        }
        0
    })
}

/// Nothing to release: events carry no references.
///
/// # Safety
/// Any pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}
