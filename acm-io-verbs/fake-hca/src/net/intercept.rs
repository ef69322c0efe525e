//! `connect`, `getsockname` and (through the umad wrapper's `close`) the end of the
//! datagram sockets the emulated routing answers for.

use super::{Route, closed, connected, route, source};
use crate::ffi::{guard, set_errno};
use crate::link::link;
use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

type ConnectFn = unsafe extern "C" fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int;
type SockNameFn = unsafe extern "C" fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> c_int;

/// The next definition of `name` (libc's), or `None`.
fn next(name: &'static [u8], slot: &AtomicUsize) -> Option<usize> {
    let mut p = slot.load(Ordering::Relaxed);
    if p == 0 {
        // SAFETY: `name` is a NUL-terminated literal; RTLD_NEXT looks past this library.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
        slot.store(p, Ordering::Relaxed);
    }
    (p != 0).then_some(p)
}

/// The destination and IPv6 scope of an IPv4 or IPv6 address structure.
///
/// # Safety
/// `addr` points to `len` readable bytes.
unsafe fn destination(addr: *const libc::sockaddr, len: libc::socklen_t) -> Option<(IpAddr, u32)> {
    if addr.is_null() {
        return None;
    }
    let len = len as usize;
    // SAFETY: the caller's structure; each branch checks the length before reading.
    unsafe {
        match c_int::from((*addr).sa_family) {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                let a = &*addr.cast::<libc::sockaddr_in>();
                Some((
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))),
                    0,
                ))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                let a = &*addr.cast::<libc::sockaddr_in6>();
                Some((
                    IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)),
                    a.sin6_scope_id,
                ))
            }
            _ => None,
        }
    }
}

fn is_datagram(fd: c_int) -> bool {
    let mut ty: c_int = 0;
    let mut len = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `ty` and `len` are valid out-parameters of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut ty).cast(),
            &mut len,
        )
    };
    r == 0 && ty == libc::SOCK_DGRAM
}

/// `connect(2)`: a datagram socket of an emulated host is routed by the emulation.
///
/// # Safety
/// As `connect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // SAFETY: the caller's address structure of `len` bytes.
    let dest = unsafe { destination(addr, len) };
    if let Some((dest, scope)) = dest
        && crate::config::current().is_some()
        && is_datagram(fd)
    {
        let r = guard("connect", None, || {
            let l = link()?;
            let ips: Vec<(IpAddr, u8)> = l
                .setup
                .ips
                .iter()
                .map(|ip| {
                    (
                        ip.addr,
                        ip.prefix_len
                            .unwrap_or(if ip.addr.is_ipv4() { 32 } else { 128 }),
                    )
                })
                .collect();
            Some(route(&ips, l.setup.default_route, dest, scope))
        });
        match r {
            Some(Route::Source(src)) if connected(fd, src) => return 0,
            Some(Route::Fail(e)) => {
                set_errno(e);
                return -1;
            }
            _ => {}
        }
    }
    let Some(p) = next(b"connect\0", &NEXT) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: libc's connect, whose C type this is; arguments forwarded as received.
    unsafe { std::mem::transmute::<usize, ConnectFn>(p)(fd, addr, len) }
}

/// `getsockname(2)`: the emulated source of a socket the emulation routed.
///
/// # Safety
/// As `getsockname(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getsockname(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let Some(p) = next(b"getsockname\0", &NEXT) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: libc's getsockname, whose C type this is; arguments forwarded.
    let r = unsafe { std::mem::transmute::<usize, SockNameFn>(p)(fd, addr, len) };
    if r != 0 || addr.is_null() || len.is_null() {
        return r;
    }
    if let Some(src) = source(fd) {
        // SAFETY: the kernel filled `*len` bytes of the caller's structure with the
        // socket's own address, of the socket's family (that of `src`); only the
        // address field, inside what it filled, is replaced.
        unsafe {
            match src {
                IpAddr::V4(v4) if *len as usize >= size_of::<libc::sockaddr_in>() => {
                    (*addr.cast::<libc::sockaddr_in>()).sin_addr.s_addr = u32::from(v4).to_be();
                }
                IpAddr::V6(v6) if *len as usize >= size_of::<libc::sockaddr_in6>() => {
                    (*addr.cast::<libc::sockaddr_in6>()).sin6_addr.s6_addr = v6.octets();
                }
                _ => {}
            }
        }
    }
    r
}

/// Called by the `close` wrapper for every descriptor.
pub fn on_close(fd: c_int) {
    closed(fd);
}
