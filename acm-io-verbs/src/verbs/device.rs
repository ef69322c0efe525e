//! A verbs device: its context, protection domain and completion channel, its port
//! queries and its async events.
//!
//! The three handles live in a reference-counted [`DeviceInner`] that every endpoint
//! of the device also holds, so the context cannot be closed while a queue pair, CQ,
//! memory region or address handle made from it still exists.

use super::error::{VerbsError, call_error, check_call};
use crate::event::{AsyncEvent, AsyncEventKind};
use crate::port::{LinkLayer, PortInfo, PortState};
use acm_proto::Gid;
use rdma_sys::{
    ibv_ack_async_event, ibv_ack_cq_events, ibv_alloc_pd, ibv_async_event, ibv_close_device,
    ibv_comp_channel, ibv_context, ibv_cq, ibv_create_comp_channel, ibv_dealloc_pd,
    ibv_destroy_comp_channel, ibv_device_attr, ibv_free_device_list, ibv_get_async_event,
    ibv_get_cq_event, ibv_get_device_guid, ibv_get_device_list, ibv_get_device_name, ibv_gid,
    ibv_open_device, ibv_pd, ibv_qp, ibv_query_device, ibv_query_gid, ibv_query_pkey,
};
use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, RawFd};
use std::ptr::NonNull;
use std::rc::Rc;

/// A device libibverbs lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Its name (`mlx5_0`).
    pub name: String,
    /// Its node GUID.
    pub guid: u64,
}

/// The devices libibverbs lists, in its order.
///
/// # Errors
/// libibverbs cannot list devices (no kernel support).
pub fn list_devices() -> Result<Vec<DeviceEntry>, VerbsError> {
    with_device_list(|devs| {
        devs.iter()
            .map(|&d| DeviceEntry {
                name: device_name(d),
                // SAFETY: `d` is an entry of the live device list.
                guid: u64::from_be(unsafe { ibv_get_device_guid(d) }),
            })
            .collect()
    })
}

/// Runs `f` over the device list and frees it afterwards.
fn with_device_list<T>(f: impl FnOnce(&[*mut rdma_sys::ibv_device]) -> T) -> Result<T, VerbsError> {
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer; the returned array is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(VerbsError::List(io::Error::last_os_error()));
    }
    let len = usize::try_from(n).unwrap_or(0);
    // SAFETY: libibverbs returned an array of `n` device pointers (plus a NULL), alive
    // until `ibv_free_device_list`.
    let devs = unsafe { std::slice::from_raw_parts(list, len) };
    let out = f(devs);
    // SAFETY: `list` came from `ibv_get_device_list` and is freed once; opened
    // contexts stay valid after the list is freed.
    unsafe { ibv_free_device_list(list) };
    Ok(out)
}

fn device_name(d: *mut rdma_sys::ibv_device) -> String {
    // SAFETY: `d` is an entry of a live device list; the name is a NUL-terminated
    // string owned by it.
    let p = unsafe { ibv_get_device_name(d) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated, alive while the list is.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The handles shared by a device and its endpoints.
#[derive(Debug)]
pub(crate) struct DeviceInner {
    pub(crate) name: String,
    pub(crate) ctx: NonNull<ibv_context>,
    pub(crate) pd: NonNull<ibv_pd>,
    pub(crate) channel: NonNull<ibv_comp_channel>,
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // SAFETY: every endpoint holds this value through an `Rc`, so none of the
        // objects made from these handles is left; each handle is released once, in
        // reverse order of creation.
        unsafe {
            ibv_destroy_comp_channel(self.channel.as_ptr());
            ibv_dealloc_pd(self.pd.as_ptr());
            ibv_close_device(self.ctx.as_ptr());
        }
    }
}

/// An open device.
#[derive(Debug)]
pub struct VerbsDevice {
    pub(crate) inner: Rc<DeviceInner>,
    guid: u64,
    port_count: u8,
}

impl VerbsDevice {
    /// Opens the device named `name`, with a protection domain and a completion
    /// channel; the async-event and completion descriptors are made non-blocking.
    ///
    /// # Errors
    /// No such device, or a verbs call failed.
    pub fn open(name: &str) -> Result<Self, VerbsError> {
        let found = with_device_list(|devs| {
            devs.iter().find(|&&d| device_name(d) == name).map(|&d| {
                // SAFETY: `d` is an entry of the live device list.
                let guid = u64::from_be(unsafe { ibv_get_device_guid(d) });
                // SAFETY: as above; the context outlives the list.
                (unsafe { ibv_open_device(d) }, guid)
            })
        })?;
        let Some((ctx, guid)) = found else {
            return Err(VerbsError::NoSuchDevice(name.to_owned()));
        };
        let ctx = NonNull::new(ctx).ok_or_else(|| call_error(name, "ibv_open_device", -1))?;
        let close = |ctx: NonNull<ibv_context>| {
            // SAFETY: `ctx` was opened above and nothing else uses it.
            unsafe { ibv_close_device(ctx.as_ptr()) };
        };
        // SAFETY: `ctx` is an open context.
        let Some(pd) = NonNull::new(unsafe { ibv_alloc_pd(ctx.as_ptr()) }) else {
            let e = call_error(name, "ibv_alloc_pd", -1);
            close(ctx);
            return Err(e);
        };
        // SAFETY: `ctx` is an open context.
        let Some(channel) = NonNull::new(unsafe { ibv_create_comp_channel(ctx.as_ptr()) }) else {
            let e = call_error(name, "ibv_create_comp_channel", -1);
            // SAFETY: `pd` was allocated above and is unused.
            unsafe { ibv_dealloc_pd(pd.as_ptr()) };
            close(ctx);
            return Err(e);
        };
        let inner = Rc::new(DeviceInner {
            name: name.to_owned(),
            ctx,
            pd,
            channel,
        });
        let mut attr = MaybeUninit::<ibv_device_attr>::zeroed();
        // SAFETY: `ctx` is open and `attr` is a writable attribute structure.
        let r = unsafe { ibv_query_device(ctx.as_ptr(), attr.as_mut_ptr()) };
        check_call(name, "ibv_query_device", r)?;
        // SAFETY: zero-initialised plain data, filled by the successful query.
        let port_count = unsafe { attr.assume_init() }.phys_port_cnt;
        let dev = Self {
            inner,
            guid,
            port_count,
        };
        set_nonblocking(dev.async_raw_fd()).map_err(|source| VerbsError::Call {
            device: name.to_owned(),
            call: "fcntl(async_fd)",
            source,
        })?;
        set_nonblocking(dev.channel_raw_fd()).map_err(|source| VerbsError::Call {
            device: name.to_owned(),
            call: "fcntl(comp_channel)",
            source,
        })?;
        Ok(dev)
    }

    /// The device name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node GUID.
    #[must_use]
    pub fn guid(&self) -> u64 {
        self.guid
    }

    /// The number of physical ports.
    #[must_use]
    pub fn port_count(&self) -> u8 {
        self.port_count
    }

    /// Queries port `port`: attributes, GID table (up to the first entry with a zero
    /// interface id) and pkey table.
    ///
    /// # Errors
    /// The port query failed.
    pub fn query_port(&self, port: u8) -> Result<PortInfo, VerbsError> {
        let ctx = self.inner.ctx.as_ptr();
        // SAFETY: `ctx` is open.
        let ex = unsafe { super::port_query::query_port(ctx, port) }
            .map_err(|r| call_error(self.name(), "ibv_query_port", r))?;
        let a = ex.base;
        let mut gids = Vec::new();
        for i in 0..a.gid_tbl_len.max(0) {
            let mut g = ibv_gid { raw: [0; 16] };
            // SAFETY: `ctx` is open and `g` is a writable GID.
            if unsafe { ibv_query_gid(ctx, port, i, &mut g) } != 0 {
                break;
            }
            // SAFETY: every bit pattern is a valid `raw` array.
            let gid = Gid(unsafe { g.raw });
            if gid.interface_id() == 0 {
                break;
            }
            gids.push(gid);
        }
        let mut pkeys = Vec::new();
        for i in 0..i32::from(a.pkey_tbl_len) {
            let mut p: u16 = 0;
            // SAFETY: `ctx` is open and `p` is a writable 16-bit value.
            if unsafe { ibv_query_pkey(ctx, port, i, &mut p) } != 0 {
                break;
            }
            pkeys.push(u16::from_be(p));
        }
        Ok(PortInfo {
            number: port,
            state: PortState(a.state as u8),
            link_layer: match a.link_layer {
                // IBV_LINK_LAYER_UNSPECIFIED (old providers) and _INFINIBAND.
                0 | 1 => LinkLayer::InfiniBand,
                2 => LinkLayer::Ethernet,
                n => LinkLayer::Other(format!("link layer {n}")),
            },
            lid: a.lid,
            lmc: a.lmc,
            sm_lid: a.sm_lid,
            sm_sl: a.sm_sl,
            active_width: a.active_width,
            active_speed: ex.speed(),
            active_mtu: Some(a.active_mtu as u8),
            subnet_timeout: Some(a.subnet_timeout),
            gids,
            pkeys,
        })
    }

    fn async_raw_fd(&self) -> RawFd {
        // SAFETY: `ctx` is an open context; `async_fd` is set when it is opened.
        unsafe { (*self.inner.ctx.as_ptr()).async_fd }
    }

    fn channel_raw_fd(&self) -> RawFd {
        // SAFETY: the channel is alive; its fd is set when it is created.
        unsafe { (*self.inner.channel.as_ptr()).fd }
    }

    /// The async-event descriptor, for a poller.
    #[must_use]
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor belongs to the context, which lives as long as `self`.
        unsafe { BorrowedFd::borrow_raw(self.async_raw_fd()) }
    }

    /// The completion-channel descriptor, for a poller.
    #[must_use]
    pub fn completion_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor belongs to the channel, which lives as long as `self`.
        unsafe { BorrowedFd::borrow_raw(self.channel_raw_fd()) }
    }

    /// The next async event, acknowledged, or `None` when none is queued.
    ///
    /// # Errors
    /// Reading the event failed.
    pub fn next_async_event(&self) -> io::Result<Option<AsyncEvent>> {
        let mut ev = MaybeUninit::<ibv_async_event>::zeroed();
        // SAFETY: the context is open and `ev` is a writable event structure.
        if unsafe { ibv_get_async_event(self.inner.ctx.as_ptr(), ev.as_mut_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(None),
                _ => Err(e),
            };
        }
        let p = ev.as_mut_ptr();
        // SAFETY: the call filled the event. Its type is read as the C int it is, not
        // as the Rust enum, so that a number this build does not know stays a plain
        // number; the port number is the union's int member, read as such.
        let (raw, port) = unsafe {
            (
                std::ptr::addr_of!((*p).event_type).cast::<i32>().read(),
                std::ptr::addr_of!((*p).element).cast::<i32>().read(),
            )
        };
        let kind = AsyncEventKind::from_raw(raw);
        // SAFETY: a QP or CQ event's element is the union's pointer to the QP or CQ,
        // which stays alive at least until the event is acknowledged below; its
        // context field is the key the endpoint was opened with.
        let key = unsafe {
            let element = std::ptr::addr_of!((*p).element);
            match kind {
                AsyncEventKind::QpError => {
                    let qp = element.cast::<*mut ibv_qp>().read();
                    (!qp.is_null()).then(|| (*qp).qp_context as u64)
                }
                AsyncEventKind::CqError => {
                    let cq = element.cast::<*mut ibv_cq>().read();
                    (!cq.is_null()).then(|| (*cq).cq_context as u64)
                }
                _ => None,
            }
        };
        // SAFETY: each event returned by `ibv_get_async_event` is acknowledged once.
        unsafe { ibv_ack_async_event(p) };
        Ok(Some(AsyncEvent {
            kind,
            port: if kind.is_port_event() {
                u8::try_from(port).unwrap_or(0)
            } else {
                0
            },
            key,
        }))
    }

    /// The key of the next CQ with a completion event (the `key` its endpoint was
    /// opened with), the event acknowledged, or `None` when none is queued. The
    /// endpoint must then be polled ([`super::UdEndpoint::poll`]), which re-arms it.
    ///
    /// # Errors
    /// Reading the event failed.
    pub fn next_completion_event(&self) -> io::Result<Option<u64>> {
        let mut cq: *mut ibv_cq = std::ptr::null_mut();
        let mut cq_ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: the channel is alive; both out-pointers are valid.
        if unsafe { ibv_get_cq_event(self.inner.channel.as_ptr(), &mut cq, &mut cq_ctx) } != 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: `cq` is the live CQ the event was for; acknowledging at once means no
        // CQ is ever destroyed with events outstanding.
        unsafe { ibv_ack_cq_events(cq, 1) };
        Ok(Some(cq_ctx as u64))
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: `fd` is a descriptor owned by an open verbs object; F_GETFL reads flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL only changes the descriptor's status flags.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without InfiniBand (CI, laptops) the listing either fails with a clear reason
    /// or is empty, and opening a device names it; on a host with an HCA the listing
    /// has entries and a made-up name is still refused.
    #[test]
    fn listing_and_opening_without_the_device_fail_cleanly() {
        match list_devices() {
            Ok(devs) => assert!(devs.iter().all(|d| !d.name.is_empty())),
            Err(e) => assert!(
                e.to_string().starts_with("cannot list RDMA devices: "),
                "{e}"
            ),
        }
        let e = VerbsDevice::open("acm_no_such_hca").unwrap_err();
        let text = e.to_string();
        assert!(
            text == "no RDMA device named acm_no_such_hca (libibverbs does not list it)"
                || text.starts_with("cannot list RDMA devices: "),
            "{text}"
        );
    }
}
