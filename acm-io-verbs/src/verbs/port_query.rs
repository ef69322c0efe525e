//! `ibv_query_port` done the way verbs.h means it, with the port's extended speed.
//!
//! verbs.h's inline `ibv_query_port` calls the context's `query_port` op when the
//! context is an extended one (its `abi_compat` is the all-ones pointer) whose op
//! table reaches that far, passing the size of the caller's structure; otherwise the
//! exported compat symbol, which fills only the old, shorter structure. rdma-sys
//! 0.3.0's translation of that test compares `abi_compat` with `u32::MAX`, which no
//! 64-bit pointer equals, so through it every context looks old, the compat symbol is
//! always taken, and `active_speed_ex` (where XDR and later speeds are reported, the
//! 8-bit `active_speed` having no room for their codes) is never read.
//!
//! Here the test is made on the pointer's full width, and the structure passed is
//! the headers' `ibv_port_attr` with `active_speed_ex` after it: libibverbs clears
//! every byte of the size it is given before the provider fills what it knows, so a
//! library older than the field leaves it zero, and the 8-bit code is used then.

use rdma_sys::{ibv_context, ibv_port_attr, verbs_context};
use std::mem::{MaybeUninit, offset_of, size_of};

/// `ibv_port_attr` as rdma-core 47 and later lay it out: the older structure (which
/// the build's headers may stop at), then the 32-bit extended speed.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct PortAttrEx {
    /// Everything up to `port_cap_flags2`.
    pub(super) base: ibv_port_attr,
    /// The active speed, also for codes above 0xFF (0 from a library without it).
    pub(super) active_speed_ex: u32,
}

// `active_speed_ex` must sit where newer headers put it: right after the older
// structure, whose size is a multiple of 4 (it ends with a u16 after an even offset).
const _: () = assert!(offset_of!(PortAttrEx, active_speed_ex) == size_of::<ibv_port_attr>());

impl PortAttrEx {
    /// The active speed code: the extended one when the library reported it.
    pub(super) fn speed(&self) -> u16 {
        match u16::try_from(self.active_speed_ex) {
            Ok(0) | Err(_) => u16::from(self.base.active_speed),
            Ok(s) => s,
        }
    }
}

/// The context's `query_port` op, when `ctx` is an extended context whose op table
/// has it.
///
/// # Safety
/// `ctx` is an open context.
unsafe fn query_port_op(ctx: *mut ibv_context) -> Option<QueryPortOp> {
    // SAFETY: the caller's context is open; `abi_compat` is a plain field of it.
    let marker = unsafe { (*ctx).abi_compat } as usize;
    if marker != usize::MAX {
        return None;
    }
    // SAFETY: an extended context is the last field of a `verbs_context`, which
    // libibverbs allocated around it; stepping back by the field's offset reaches the
    // start of that structure as the build's headers describe it.
    let vctx = unsafe {
        ctx.cast::<u8>()
            .sub(offset_of!(verbs_context, context))
            .cast::<verbs_context>()
    };
    // SAFETY: `sz` sits just before `context`, present in every extended context.
    let sz = unsafe { (*vctx).sz };
    // The structure grows at its front: `sz` says how many of its last bytes the
    // library filled, and the op exists only when they reach back to it.
    if sz < size_of::<verbs_context>() - offset_of!(verbs_context, query_port) {
        return None;
    }
    // SAFETY: within the `sz` bytes the library filled, as just checked.
    unsafe { (*vctx).query_port }
}

type QueryPortOp = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> i32;

/// Queries port `port` of `ctx`: through the extended op, with the extended speed,
/// when the context has it; through the compat symbol otherwise. The error is the
/// call's return value (an errno, or -1 with errno set).
///
/// # Safety
/// `ctx` is an open context.
pub(super) unsafe fn query_port(ctx: *mut ibv_context, port: u8) -> Result<PortAttrEx, i32> {
    let mut attr = MaybeUninit::<PortAttrEx>::zeroed();
    // SAFETY: the caller's context is open.
    let r = match unsafe { query_port_op(ctx) } {
        // SAFETY: the op fills at most the size it is given, which is the whole
        // zeroed structure.
        Some(op) => unsafe { op(ctx, port, attr.as_mut_ptr().cast(), size_of::<PortAttrEx>()) },
        // SAFETY: the compat symbol fills at most the old structure, which the zeroed
        // `base` holds (its larger size included).
        None => unsafe { rdma_sys::ibv_query_port(ctx, port, attr.as_mut_ptr().cast()) },
    };
    if r != 0 {
        return Err(r);
    }
    // SAFETY: plain data, zero-initialised and filled by the successful query.
    Ok(unsafe { attr.assume_init() })
}
