//! The safe face of a loaded provider's callbacks: each takes the Rust-owned objects and
//! contexts of [`super::objects`], calls the C function on the calling thread, and turns a
//! non-zero return into a [`CallError`] that names the provider and the call.
//!
//! A null callback is treated as the reference would crash on; here it is an error for
//! the `open_*`/request calls and a no-op for the `close_*` ones.

use super::abi::{AcmMsg, CloseFn, OpenChildFn};
use super::error::CallError;
use super::library::ProviderLibrary;
use super::objects::{Context, Device, Endpoint, LocalAddress, Port};
use std::ffi::c_void;

/// The most counters `query_perf` can report: its count is a `uint8_t`.
const PERF_MAX: usize = 255;

impl ProviderLibrary {
    fn missing(&self, call: &'static str) -> CallError {
        CallError::Missing {
            provider: self.name().to_owned(),
            call,
        }
    }

    fn check(&self, call: &'static str, ret: i32, ctx: *mut c_void) -> Result<Context, CallError> {
        if ret == 0 {
            Ok(Context(ctx))
        } else {
            Err(CallError::Failed {
                provider: self.name().to_owned(),
                call,
                ret,
            })
        }
    }

    /// `open_device`.
    ///
    /// # Errors
    /// The callback is missing or failed.
    pub fn open_device(&self, dev: &Device) -> Result<Context, CallError> {
        let f = self
            .table()
            .open_device
            .ok_or(self.missing("open_device"))?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `dev` owns a live `struct acm_device` that outlives the call (and every
        // context made from it, which the caller keeps in `Rc` order); `ctx` is a valid
        // out-pointer.
        let ret = unsafe { f(dev.as_ptr(), &raw mut ctx) };
        self.check("open_device", ret, ctx)
    }

    /// `open_port`, under the device's context.
    ///
    /// # Errors
    /// The callback is missing or failed.
    pub fn open_port(&self, port: &Port, dev: &Context) -> Result<Context, CallError> {
        // SAFETY: `port` owns a live `struct acm_port`, borrowed for the call.
        unsafe { self.open_child("open_port", self.table().open_port, port.as_ptr(), dev) }
    }

    /// `open_endpoint`, under the port's context.
    ///
    /// # Errors
    /// The callback is missing or failed.
    pub fn open_endpoint(&self, ep: &Endpoint, port: &Context) -> Result<Context, CallError> {
        let f = self.table().open_endpoint;
        // SAFETY: `ep` owns a live `struct acm_endpoint`, borrowed for the call.
        unsafe { self.open_child("open_endpoint", f, ep.as_ptr(), port) }
    }

    /// `add_address`, under the endpoint's context.
    ///
    /// # Errors
    /// The callback is missing or failed.
    pub fn add_address(&self, addr: &LocalAddress, ep: &Context) -> Result<Context, CallError> {
        let f = self.table().add_address;
        // SAFETY: `addr` owns a live `struct acm_address`, borrowed for the call.
        unsafe { self.open_child("add_address", f, addr.as_ptr(), ep) }
    }

    /// One of the calls that open an object under its parent's context (`open_port`,
    /// `open_endpoint`, `add_address`): callback `f`, named `call`, for object `obj`
    /// under `parent`; the provider's context for the object.
    ///
    /// # Safety
    /// `obj` points to a live structure of the core that outlives the call (and every
    /// context made from it, which the caller keeps in `Rc` order).
    unsafe fn open_child<T>(
        &self,
        call: &'static str,
        f: Option<OpenChildFn<T>>,
        obj: *const T,
        parent: &Context,
    ) -> Result<Context, CallError> {
        let f = f.ok_or(self.missing(call))?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `obj` as the caller promises; `parent.0` is the context the provider
        // made for the parent; `ctx` is a valid out-pointer.
        let ret = unsafe { f(obj, parent.0, &raw mut ctx) };
        self.check(call, ret, ctx)
    }

    fn close(&self, f: Option<CloseFn>, ctx: Context) {
        if let Some(f) = f {
            // SAFETY: `ctx` is the provider's own context for this object, given back
            // once: `Context` is moved in and not `Clone`.
            unsafe { f(ctx.0) };
        }
    }

    /// `close_device`.
    pub fn close_device(&self, ctx: Context) {
        self.close(self.table().close_device, ctx);
    }

    /// `close_port`.
    pub fn close_port(&self, ctx: Context) {
        self.close(self.table().close_port, ctx);
    }

    /// `close_endpoint`.
    pub fn close_endpoint(&self, ctx: Context) {
        self.close(self.table().close_endpoint, ctx);
    }

    /// `remove_address`.
    pub fn remove_address(&self, ctx: Context) {
        self.close(self.table().remove_address, ctx);
    }

    /// `resolve`: the provider answers later through `acm_resolve_response(id, ...)`,
    /// possibly before this returns, possibly from another thread.
    ///
    /// # Errors
    /// The callback is missing or refused the request.
    pub fn resolve(&self, addr: &Context, msg: &mut AcmMsg, id: u64) -> Result<(), CallError> {
        let f = self.table().resolve.ok_or(self.missing("resolve"))?;
        // SAFETY: `msg` is a whole `struct acm_msg` we own for the call; `addr.0` is the
        // provider's address context.
        let ret = unsafe { f(addr.0, msg, id) };
        self.check("resolve", ret, std::ptr::null_mut()).map(drop)
    }

    /// `query` (QUERY_SA): answered through `acm_query_response(id, ...)`.
    ///
    /// # Errors
    /// The callback is missing or refused the request.
    pub fn query(&self, addr: &Context, msg: &mut AcmMsg, id: u64) -> Result<(), CallError> {
        let f = self.table().query.ok_or(self.missing("query"))?;
        // SAFETY: as in `resolve`.
        let ret = unsafe { f(addr.0, msg, id) };
        self.check("query", ret, std::ptr::null_mut()).map(drop)
    }

    /// `handle_event` with an `enum ibv_event_type` value.
    ///
    /// # Errors
    /// The callback is missing or failed.
    pub fn handle_event(&self, port: &Context, event: i32) -> Result<(), CallError> {
        let f = self
            .table()
            .handle_event
            .ok_or(self.missing("handle_event"))?;
        // SAFETY: `port.0` is the provider's port context.
        let ret = unsafe { f(port.0, event) };
        self.check("handle_event", ret, std::ptr::null_mut())
            .map(drop)
    }

    /// `query_perf`: the endpoint's counters, as many as the provider reports, in host
    /// order. Providers write them big-endian (the PERF_QUERY reply's order, which the
    /// reference core copies them into unchanged; libibacmp converts with `htobe64`).
    ///
    /// # Errors
    /// The callback is missing.
    pub fn query_perf(&self, ep: &Context) -> Result<Vec<u64>, CallError> {
        let f = self.table().query_perf.ok_or(self.missing("query_perf"))?;
        // Room for any count a `uint8_t` can say, so a provider with more counters than
        // the reference's seven cannot write past the buffer.
        let mut values = [0u64; PERF_MAX];
        let mut count: u8 = 0;
        // SAFETY: `values` has room for 255 counters, the most `count` can report.
        unsafe { f(ep.0, values.as_mut_ptr(), &raw mut count) };
        Ok(values[..usize::from(count)]
            .iter()
            .map(|&v| u64::from_be(v))
            .collect())
    }
}
