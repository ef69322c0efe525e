//! The simple objects: protection domains, memory regions, address handles and
//! completion channels.

use crate::ffi::{EventPipe, guard, lock, set_errno};
use crate::live::port_attrs;
use crate::verbs::state::{Ah, STATE, context_device};
use acm_engine::{AddressVector, GlobalRoute};
use acm_proto::Gid;
use rdma_sys::{ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_mr, ibv_pd};
use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;

/// A protection domain.
///
/// # Safety
/// `ctx` is open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    guard("ibv_alloc_pd", std::ptr::null_mut(), || {
        if context_device(ctx).is_none() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        Box::into_raw(Box::new(ibv_pd {
            context: ctx,
            handle: 0,
        }))
    })
}

/// Frees a protection domain.
///
/// # Safety
/// `pd` came from [`ibv_alloc_pd`] and nothing uses it any more.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard("ibv_dealloc_pd", libc::EIO, || {
        if pd.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: allocated by ibv_alloc_pd with Box, freed once.
        drop(unsafe { Box::from_raw(pd) });
        0
    })
}

/// Registers memory: the emulation remembers the range under a fresh key.
///
/// # Safety
/// `pd` is alive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _access: c_int,
) -> *mut ibv_mr {
    guard("ibv_reg_mr", std::ptr::null_mut(), || {
        if pd.is_null() || (addr.is_null() && length > 0) {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let mut s = lock(&STATE);
        let key = s.next_key;
        s.next_key = s.next_key.wrapping_add(1);
        s.mrs.insert(key, (addr as u64, length as u64));
        Box::into_raw(Box::new(ibv_mr {
            // SAFETY: `pd` is alive.
            context: unsafe { (*pd).context },
            pd,
            addr,
            length,
            handle: key,
            lkey: key,
            rkey: key,
        }))
    })
}

/// `ibv_reg_mr` with an I/O virtual address (what verbs.h's `ibv_reg_mr` macro calls
/// in newer rdma-core); the address is not used by UD sends and receives.
///
/// # Safety
/// As [`ibv_reg_mr`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: same contract.
    unsafe { ibv_reg_mr(pd, addr, length, access as c_int) }
}

/// Deregisters memory.
///
/// # Safety
/// `mr` came from [`ibv_reg_mr`] and no posted work uses it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard("ibv_dereg_mr", libc::EIO, || {
        if mr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: allocated by ibv_reg_mr with Box, freed once.
        let mr = unsafe { Box::from_raw(mr) };
        lock(&STATE).mrs.remove(&mr.lkey);
        0
    })
}

/// An address handle: the attributes are checked against the port (its number, the
/// source GID index) and kept for the sends that use it.
///
/// # Safety
/// `pd` is alive and `attr` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    guard("ibv_create_ah", std::ptr::null_mut(), || {
        if pd.is_null() || attr.is_null() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        // SAFETY: both are the caller's live structures.
        let (ctx, a) = unsafe { ((*pd).context, &*attr) };
        let Some(port) = context_device(ctx).and_then(|d| port_attrs(d, a.port_num)) else {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        };
        if a.is_global != 0 && usize::from(a.grh.sgid_index) >= port.gids.len().max(1) {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let grh = if a.is_global != 0 {
            GlobalRoute {
                // SAFETY: every bit pattern is a valid `raw` array.
                dgid: Gid(unsafe { a.grh.dgid.raw }),
                flow_label: a.grh.flow_label,
                hop_limit: a.grh.hop_limit,
                tclass: a.grh.traffic_class,
                sgid_index: a.grh.sgid_index,
            }
        } else {
            GlobalRoute::default()
        };
        let ah = Box::into_raw(Box::new(ibv_ah {
            context: ctx,
            pd,
            handle: 0,
        }));
        lock(&STATE).ahs.insert(
            ah as usize,
            Ah {
                port: a.port_num,
                av: AddressVector {
                    dlid: a.dlid,
                    sl: a.sl,
                    src_path_bits: a.src_path_bits,
                    static_rate: a.static_rate,
                    grh,
                    remote_qpn: 0,
                    remote_qkey: 0,
                },
            },
        );
        ah
    })
}

/// Destroys an address handle.
///
/// # Safety
/// `ah` came from [`ibv_create_ah`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard("ibv_destroy_ah", libc::EIO, || {
        if lock(&STATE).ahs.remove(&(ah as usize)).is_none() {
            return libc::EINVAL;
        }
        // SAFETY: allocated by ibv_create_ah with Box, freed once.
        drop(unsafe { Box::from_raw(ah) });
        0
    })
}

/// A completion channel: its descriptor is the read end of a pipe that carries one
/// record per CQ event.
///
/// # Safety
/// `ctx` is open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    guard("ibv_create_comp_channel", std::ptr::null_mut(), || {
        if context_device(ctx).is_none() {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
        let Some(pipe) = EventPipe::new_or_errno() else {
            return std::ptr::null_mut();
        };
        let ch = Box::into_raw(Box::new(ibv_comp_channel {
            context: ctx,
            fd: pipe.read.as_raw_fd(),
            refcnt: 0,
        }));
        lock(&STATE).channels.insert(ch as usize, pipe);
        ch
    })
}

/// Destroys a completion channel; EBUSY while a CQ still uses it, as libibverbs does.
///
/// # Safety
/// `ch` came from [`ibv_create_comp_channel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    guard("ibv_destroy_comp_channel", libc::EIO, || {
        let mut s = lock(&STATE);
        if s.cqs.values().any(|c| c.channel == Some(ch as usize)) {
            return libc::EBUSY;
        }
        if s.channels.remove(&(ch as usize)).is_none() {
            return libc::EINVAL;
        }
        // SAFETY: allocated by ibv_create_comp_channel with Box, freed once.
        drop(unsafe { Box::from_raw(ch) });
        0
    })
}
