//! Devices and contexts: the device list, opening and closing, and the device, port,
//! GID and pkey queries. Async events are [`super::async_event`].
//!
//! Contexts are extended (`struct verbs_context`, `abi_compat` set to the extended
//! marker as libibverbs sets it), so `ibv_query_port` works both through the compat
//! symbol and through verbs.h's inline path that calls the context's `query_port` op.

use crate::ffi::{EventPipe, guard, lock, set_errno};
use crate::layout;
use crate::link::link;
use crate::live::port_attrs;
use crate::verbs::state::{Context, STATE, context_device};
use crate::verbs::{cq, qp};
use acm_engine::{DeviceDesc, PortAttrs, PortState};
use rdma_sys::{
    ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_node_type, ibv_port_attr,
    ibv_transport_type, verbs_context,
};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, OnceLock};

/// The device structures handed out, one per device of the hub's setup. Built once and
/// never freed (applications keep device pointers past `ibv_free_device_list`, as
/// libibverbs allows); a device that leaves and comes back keeps its structure.
struct DeviceList {
    devices: Vec<*mut ibv_device>,
}

// SAFETY: the structures are written once, before the list is published, and only
// read afterwards.
unsafe impl Send for DeviceList {}
// SAFETY: as above.
unsafe impl Sync for DeviceList {}

static DEVICES: OnceLock<DeviceList> = OnceLock::new();

/// The hub's description of this host's devices, if the emulation is on.
pub fn descs() -> &'static [DeviceDesc] {
    link().map_or(&[], |l| &l.setup.devices[..])
}

fn device_list() -> &'static DeviceList {
    DEVICES.get_or_init(|| {
        let devices: Vec<*mut ibv_device> = descs()
            .iter()
            .map(|d| {
                // SAFETY: an all-zero ibv_device is valid (no ops, empty strings).
                let mut dev: ibv_device = unsafe { std::mem::zeroed() };
                dev.node_type = ibv_node_type::IBV_NODE_CA;
                dev.transport_type = ibv_transport_type::IBV_TRANSPORT_IB;
                copy_str(&mut dev.name, &d.name);
                copy_str(&mut dev.dev_name, &format!("uverbs{}", d.id.0));
                copy_str(
                    &mut dev.dev_path,
                    &format!("/sys/class/infiniband_verbs/uverbs{}", d.id.0),
                );
                copy_str(
                    &mut dev.ibdev_path,
                    &format!("/sys/class/infiniband/{}", d.name),
                );
                Box::into_raw(Box::new(dev))
            })
            .collect();
        DeviceList { devices }
    })
}

fn copy_str(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

/// The index of a device structure in the list.
fn device_index(dev: *mut ibv_device) -> Option<usize> {
    device_list().devices.iter().position(|&d| d == dev)
}

/// The NULL-terminated arrays handed out by [`ibv_get_device_list`] and not freed
/// yet, by address: the list follows devices that come and go, so each call gets its
/// own (the structures it points to live forever).
static LISTS: Mutex<BTreeMap<usize, Vec<usize>>> = Mutex::new(BTreeMap::new());

/// The listed devices.
///
/// # Safety
/// `num` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard("ibv_get_device_list", std::ptr::null_mut(), || {
        let all = &device_list().devices;
        let mut list: Vec<usize> = crate::live::listed()
            .into_iter()
            .filter_map(|i| all.get(i).map(|&d| d as usize))
            .collect();
        if !num.is_null() {
            // SAFETY: the caller passed a writable int.
            unsafe { *num = list.len() as c_int };
        }
        list.push(0);
        // A pointer and a usize have one size and alignment on every target libibverbs
        // runs on, and address 0 is NULL: the vector is the C array of pointers.
        let ptr = list.as_ptr().cast_mut().cast::<*mut ibv_device>();
        lock(&LISTS).insert(ptr as usize, list);
        ptr
    })
}

/// Frees a list [`ibv_get_device_list`] handed out (not the devices it names).
///
/// # Safety
/// `list` came from [`ibv_get_device_list`] and is freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    guard("ibv_free_device_list", (), || {
        lock(&LISTS).remove(&(list as usize));
    });
}

/// The device's name.
///
/// # Safety
/// `dev` comes from the device list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if dev.is_null() {
        return std::ptr::null();
    }
    // SAFETY: the caller passes a device of the list, alive forever.
    unsafe { (*dev).name.as_ptr() }
}

/// The node GUID, big-endian.
///
/// # Safety
/// `dev` comes from the device list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard("ibv_get_device_guid", 0, || {
        device_index(dev)
            .and_then(|i| descs().get(i))
            .map_or(0, |d| d.guid.to_be())
    })
}

/// The device's kernel index (its place in the hub's setup), or -1 for a structure
/// that is not one of ours. libibverbs reads it from a part of its own device
/// structure that ours lack, so it must be answered here (librdmacm asks for every
/// device it lists).
///
/// # Safety
/// `dev` comes from the device list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard("ibv_get_device_index", -1, || {
        device_index(dev).map_or(-1, |i| c_int::try_from(i).unwrap_or(-1))
    })
}

/// Opens a context: an extended context whose ops carry the data path.
///
/// # Safety
/// `dev` comes from the device list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard("ibv_open_device", std::ptr::null_mut(), || {
        // A removed or dead HCA cannot be opened until it is back.
        let Some(index) = device_index(dev).filter(|&i| crate::live::healthy(i)) else {
            set_errno(libc::ENODEV);
            return std::ptr::null_mut();
        };
        let Some(events) = EventPipe::new_or_errno() else {
            return std::ptr::null_mut();
        };
        // SAFETY: an all-zero verbs_context is valid: no ops, NULL pointers, and an
        // all-zero pthread mutex is glibc's static initializer.
        let mut v: Box<verbs_context> = Box::new(unsafe { std::mem::zeroed() });
        v.sz = size_of::<verbs_context>();
        v.query_port = Some(query_port_ex);
        let c = &mut v.context;
        c.device = dev;
        c.cmd_fd = -1;
        c.async_fd = events.read.as_raw_fd();
        c.num_comp_vectors = 1;
        // libibverbs marks an extended context with an all-ones `abi_compat`.
        c.abi_compat = usize::MAX as *mut c_void;
        c.ops.poll_cq = Some(cq::poll_cq);
        c.ops.req_notify_cq = Some(cq::req_notify_cq);
        c.ops.post_send = Some(qp::post_send);
        c.ops.post_recv = Some(qp::post_recv);
        let v = Box::into_raw(v);
        // SAFETY: `v` was just allocated; the context is a field of it.
        let ctx = unsafe { std::ptr::addr_of_mut!((*v).context) };
        lock(&STATE).contexts.insert(
            ctx as usize,
            Context {
                device: index,
                events,
            },
        );
        ctx
    })
}

/// Closes a context (its async descriptor goes with it).
///
/// # Safety
/// `ctx` was opened by [`ibv_open_device`] and nothing made from it is left.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    guard("ibv_close_device", -1, || {
        if lock(&STATE).contexts.remove(&(ctx as usize)).is_none() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the context is the `context` field of a verbs_context this library
        // allocated with Box; it is freed once, here.
        unsafe {
            let v = ctx.cast::<u8>().sub(offset_of!(verbs_context, context));
            drop(Box::from_raw(v.cast::<verbs_context>()));
        }
        0
    })
}

/// The device's attributes.
///
/// # Safety
/// `ctx` is open and `attr` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    guard("ibv_query_device", libc::EIO, || {
        let Some(d) = context_device(ctx).and_then(|i| descs().get(i)) else {
            return libc::EINVAL;
        };
        // SAFETY: an all-zero attribute structure is valid.
        let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
        copy_str(&mut a.fw_ver, "acm-fake-hca");
        a.node_guid = d.guid.to_be();
        a.sys_image_guid = d.guid.to_be();
        a.max_mr_size = u64::MAX;
        a.page_size_cap = 0x1000;
        a.vendor_id = 0x02c9;
        a.max_qp = 1 << 16;
        a.max_qp_wr = 1 << 15;
        a.max_sge = 30;
        a.max_cq = 1 << 16;
        a.max_cqe = 1 << 22;
        a.max_mr = 1 << 16;
        a.max_pd = 1 << 16;
        a.max_ah = 1 << 20;
        a.max_mcast_grp = 1 << 21;
        a.max_mcast_qp_attach = 240;
        a.max_total_mcast_qp_attach = 1 << 24;
        a.max_pkeys = 128;
        a.phys_port_cnt = d.ports.len() as u8;
        // SAFETY: the caller passed a writable attribute structure.
        unsafe { attr.write(a) };
        0
    })
}

/// Number of GID table entries each emulated port reports (the unused ones read as
/// the subnet prefix with a zero interface id, as sysfs shows them).
const GID_TABLE_LEN: usize = 8;

/// A port's attributes in the current `ibv_port_attr` layout.
fn port_attr(p: &PortAttrs) -> ibv_port_attr {
    let (width, speed) = layout::width_speed(p.rate);
    // SAFETY: an all-zero attribute structure is valid.
    let mut a: ibv_port_attr = unsafe { std::mem::zeroed() };
    let active = p.state == PortState::Active;
    a.state = if active { 4 } else { 1 };
    a.max_mtu = 5;
    a.active_mtu = u32::from(p.mtu.0);
    a.gid_tbl_len = GID_TABLE_LEN.max(p.gids.len()) as c_int;
    a.port_cap_flags = 0x0251_0868;
    a.max_msg_sz = 0x4000_0000;
    a.pkey_tbl_len = p.pkeys.len() as u16;
    a.lid = p.lid;
    a.sm_lid = link().and_then(|l| l.config.sm_lid).unwrap_or(p.sm_lid);
    a.lmc = p.lmc;
    a.max_vl_num = 4;
    a.sm_sl = p.sm_sl;
    a.subnet_timeout = p.subnet_timeout;
    a.active_width = width;
    // Codes above 0xFF exist only in `active_speed_ex` ([`PortAttrEx`]).
    a.active_speed = u8::try_from(speed).unwrap_or(0);
    a.phys_state = if active { 5 } else { 3 };
    a.link_layer = if p.link_layer_ib { 1 } else { 2 };
    a
}

/// Bytes of the compat `ibv_query_port@IBVERBS_1.1` structure: the current layout up
/// to and including `flags` (`port_cap_flags2` came later).
const COMPAT_PORT_ATTR_LEN: usize = offset_of!(ibv_port_attr, port_cap_flags2);

fn query_port_into(ctx: *mut ibv_context, port: u8, out: *mut u8, len: usize) -> c_int {
    let Some(d) = context_device(ctx) else {
        return libc::EINVAL;
    };
    // A dead device's context answers nothing, as a real one after a fatal error.
    if !crate::live::healthy(d) {
        return libc::EIO;
    }
    let Some(p) = port_attrs(d, port) else {
        return libc::EINVAL;
    };
    let a = port_attr(&p);
    let full = PortAttrEx {
        base: a,
        active_speed_ex: u32::from(layout::width_speed(p.rate).1),
    };
    let n = len.min(size_of::<PortAttrEx>());
    // SAFETY: the caller's structure has `len` writable bytes; `full` has at least `n`.
    unsafe {
        std::ptr::write_bytes(out, 0, len);
        std::ptr::copy_nonoverlapping(std::ptr::addr_of!(full).cast::<u8>(), out, n);
    }
    0
}

/// `ibv_port_attr` as rdma-core 47 and later lay it out (the build's headers may stop
/// before `active_speed_ex`): a caller whose structure has room gets the extended
/// speed, which is how XDR and later speeds are reported.
#[repr(C)]
struct PortAttrEx {
    base: ibv_port_attr,
    active_speed_ex: u32,
}

/// The context's extended `query_port` op: fills as much of the caller's structure as
/// its size says.
unsafe extern "C" fn query_port_ex(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    guard("query_port", libc::EIO, || {
        query_port_into(ctx, port, attr.cast(), len)
    })
}

/// The compat symbol, for callers built without verbs.h's inline path: fills the old,
/// shorter structure.
///
/// # Safety
/// `ctx` is open and `attr` has room for the compat structure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    guard("ibv_query_port", libc::EIO, || {
        query_port_into(ctx, port, attr.cast(), COMPAT_PORT_ATTR_LEN)
    })
}

/// GID `index` of a port.
///
/// # Safety
/// `ctx` is open and `gid` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    guard("ibv_query_gid", -1, || {
        let Some(p) = context_device(ctx).and_then(|d| port_attrs(d, port)) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let Ok(i) = usize::try_from(index) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if i >= GID_TABLE_LEN.max(p.gids.len()) {
            set_errno(libc::EINVAL);
            return -1;
        }
        let raw = p.gids.get(i).map_or_else(
            || acm_proto::Gid::from_parts(p.gid0().subnet_prefix(), 0).0,
            |g| g.0,
        );
        // SAFETY: the caller passed a writable GID.
        unsafe { gid.write(ibv_gid { raw }) };
        0
    })
}

/// Pkey `index` of a port, big-endian.
///
/// # Safety
/// `ctx` is open and `pkey` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard("ibv_query_pkey", -1, || {
        let found = context_device(ctx)
            .and_then(|d| port_attrs(d, port))
            .and_then(|p| p.pkeys.get(usize::try_from(index).ok()?).copied());
        let Some(k) = found else {
            set_errno(libc::EINVAL);
            return -1;
        };
        // SAFETY: the caller passed a writable u16.
        unsafe { pkey.write(k.to_be()) };
        0
    })
}
