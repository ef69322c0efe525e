//! The libc entry points the emulated umad device needs, interposed: `open` (and its
//! variants) of `<dev root>/umad<N>`, and `read`, `write`, `ioctl` and `close` of the
//! descriptors that gives. Everything else goes to the next definition (libc's), found
//! with `dlsym(RTLD_NEXT)`; telling the two apart costs one atomic load.
//!
//! Not in the crate's unit tests: a test binary would interpose its own I/O.

use super::{UMAD, is_umad};
use crate::config;
use crate::ffi::{guard, lock, set_errno};
use crate::layout;
use crate::link::link;
use std::ffi::{CStr, OsStr, c_char, c_int, c_uint, c_ulong, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of libc function `$name` with C type `$ty`, or `None` if there
/// is none (then the caller fails with ENOSYS).
macro_rules! next {
    ($name:literal, $ty:ty) => {{
        static SLOT: AtomicUsize = AtomicUsize::new(0);
        let mut p = SLOT.load(Ordering::Relaxed);
        if p == 0 {
            // SAFETY: the name is a NUL-terminated literal; RTLD_NEXT looks past this
            // library.
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) }
                as usize;
            SLOT.store(p, Ordering::Relaxed);
        }
        // SAFETY: a non-null address dlsym returned for this libc function, whose C
        // type is `$ty`.
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(p) })
    }};
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type IoctlFn = unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int;

fn enosys<T: From<i8>>() -> T {
    set_errno(libc::ENOSYS);
    T::from(-1)
}

/// The umad index `path` names under the emulated device root, if it does.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
unsafe fn umad_index(path: *const c_char) -> Option<u32> {
    if path.is_null() {
        return None;
    }
    let cfg = config::current()?;
    // SAFETY: the caller's NUL-terminated path.
    let p = Path::new(OsStr::from_bytes(
        unsafe { CStr::from_ptr(path) }.to_bytes(),
    ));
    if p.parent()? != cfg.dev_root {
        return None;
    }
    let n = p.file_name()?.to_str()?.strip_prefix("umad")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Opens emulated umad node `index`: the application's end of a fresh socket pair.
fn open_umad(index: u32, flags: c_int) -> c_int {
    let Some(l) = link() else {
        set_errno(libc::ENODEV);
        return -1;
    };
    let Some(port) = layout::umad_port(&l.setup.devices, index) else {
        set_errno(libc::ENOENT);
        return -1;
    };
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return -1;
    }
    // SAFETY: both were just created; the kernel end is owned from here on.
    let kernel = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    let user = fds[0];
    if user as usize >= crate::fdset::MAX_FD {
        // SAFETY: `user` was just created and is not handed out.
        unsafe { libc::close(user) };
        set_errno(libc::EMFILE);
        return -1;
    }
    // SAFETY: F_SETFD and F_SETFL only change flags of the new descriptor.
    unsafe {
        if flags & libc::O_CLOEXEC == 0 {
            libc::fcntl(user, libc::F_SETFD, 0);
        }
        if flags & libc::O_NONBLOCK != 0 {
            libc::fcntl(user, libc::F_SETFL, libc::O_NONBLOCK);
        }
    }
    lock(&UMAD).add(user, kernel, port);
    user
}

/// `open(2)`.
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: the caller's path.
    if let Some(i) = unsafe { umad_index(path) } {
        return guard("open", -1, || open_umad(i, flags));
    }
    // SAFETY: forwarded as received.
    next!("open", OpenFn).map_or_else(enosys, |f| unsafe { f(path, flags, mode) })
}

/// `open64(2)` (what Rust's std calls).
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: the caller's path.
    if let Some(i) = unsafe { umad_index(path) } {
        return guard("open64", -1, || open_umad(i, flags));
    }
    // SAFETY: forwarded as received.
    next!("open64", OpenFn).map_or_else(enosys, |f| unsafe { f(path, flags, mode) })
}

/// `__open_2`, the fortified `open` without a mode.
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's path.
    if let Some(i) = unsafe { umad_index(path) } {
        return guard("__open_2", -1, || open_umad(i, flags));
    }
    // SAFETY: forwarded as received.
    next!("__open_2", Open2Fn).map_or_else(enosys, |f| unsafe { f(path, flags) })
}

/// `__open64_2`.
///
/// # Safety
/// As `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's path.
    if let Some(i) = unsafe { umad_index(path) } {
        return guard("__open64_2", -1, || open_umad(i, flags));
    }
    // SAFETY: forwarded as received.
    next!("__open64_2", Open2Fn).map_or_else(enosys, |f| unsafe { f(path, flags) })
}

/// Whether an `openat` path is absolute or relative to the working directory, so
/// that [`umad_index`] applies.
fn plain(dirfd: c_int, path: *const c_char) -> bool {
    // SAFETY: the caller's NUL-terminated path; only its first byte is read.
    dirfd == libc::AT_FDCWD || (!path.is_null() && unsafe { *path } == b'/' as c_char)
}

/// `openat(2)`.
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    if plain(dirfd, path) {
        // SAFETY: the caller's path.
        if let Some(i) = unsafe { umad_index(path) } {
            return guard("openat", -1, || open_umad(i, flags));
        }
    }
    // SAFETY: forwarded as received.
    next!("openat", OpenAtFn).map_or_else(enosys, |f| unsafe { f(dirfd, path, flags, mode) })
}

/// `openat64(2)`.
///
/// # Safety
/// As `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    if plain(dirfd, path) {
        // SAFETY: the caller's path.
        if let Some(i) = unsafe { umad_index(path) } {
            return guard("openat64", -1, || open_umad(i, flags));
        }
    }
    // SAFETY: forwarded as received.
    next!("openat64", OpenAtFn).map_or_else(enosys, |f| unsafe { f(dirfd, path, flags, mode) })
}

/// One packet, as `ib_umad_read` gives it: EINVAL for a buffer shorter than the
/// header or than the packet (which stays queued), EIO once the device is gone.
fn umad_read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    let (hl, dead) = match lock(&UMAD).files.get(&fd) {
        Some(o) => (o.file.header_len(), o.file.dead),
        None => (0, false),
    };
    if dead {
        set_errno(libc::EIO);
        return -1;
    }
    if count < hl {
        set_errno(libc::EINVAL);
        return -1;
    }
    let mut probe = [0u8; 1];
    // SAFETY: `probe` is a writable byte; the peek leaves the packet queued and
    // reports its whole length (MSG_TRUNC). It blocks as the descriptor says.
    let n = unsafe {
        libc::recv(
            fd,
            probe.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        return -1;
    }
    if n == 0 {
        // The kernel end was shut down: the device went away.
        set_errno(libc::EIO);
        return -1;
    }
    if count < n as usize {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller's buffer has `count` writable bytes.
    unsafe { libc::recv(fd, buf, count, 0) }
}

/// `read(2)`.
///
/// # Safety
/// As `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    if is_umad(fd) {
        return guard("read", -1, || umad_read(fd, buf, count));
    }
    // SAFETY: forwarded as received.
    next!("read", ReadFn).map_or_else(enosys, |f| unsafe { f(fd, buf, count) })
}

/// A MAD written to the device: checked, then handed to the hub.
fn umad_write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    if buf.is_null() {
        set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: the caller's buffer has `count` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
    let r = lock(&UMAD).write(fd, bytes);
    match r {
        Ok(Some(send)) => {
            let Some(l) = link() else {
                set_errno(libc::EIO);
                return -1;
            };
            l.submit(Box::new(move |c| c.sa_send(&send)));
            count as isize
        }
        Ok(None) => count as isize,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// `write(2)`.
///
/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    if is_umad(fd) {
        return guard("write", -1, || umad_write(fd, buf, count));
    }
    // SAFETY: forwarded as received.
    next!("write", WriteFn).map_or_else(enosys, |f| unsafe { f(fd, buf, count) })
}

/// `close(2)`: an emulated descriptor's agents and pending sends go with it, and a
/// socket the emulated routing answered for is forgotten.
///
/// # Safety
/// As `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if is_umad(fd) {
        guard("close", (), || lock(&UMAD).remove(fd));
    }
    crate::net::intercept::on_close(fd);
    // SAFETY: forwarded as received.
    next!("close", CloseFn).map_or_else(enosys, |f| unsafe { f(fd) })
}

/// An ioctl of an emulated descriptor: the request structure (of the size the
/// request number encodes) is copied in, handled, and copied back.
fn umad_ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    let req = request as u32;
    let size = ((req >> 16) & 0x3FFF) as usize;
    if size > 0 && arg.is_null() {
        set_errno(libc::EFAULT);
        return -1;
    }
    let mut buf = vec![0u8; size];
    if size > 0 {
        // SAFETY: the request number says the argument has `size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(arg.cast::<u8>(), buf.as_mut_ptr(), size) };
    }
    let no_agent2 = config::current().is_some_and(|c| c.no_agent2);
    let r = {
        let mut u = lock(&UMAD);
        match u.files.get_mut(&fd) {
            Some(o) if o.file.dead => Err(libc::EPIPE),
            Some(o) => o.file.ioctl(req, &mut buf, no_agent2),
            None => Err(libc::EBADF),
        }
    };
    // Only read-write requests copy back (the kernel writes the agent id, or the
    // supported flags on a refusal).
    if size > 0 && req >> 30 == 3 {
        // SAFETY: as above; the argument is writable for a read-write request.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), arg.cast::<u8>(), size) };
    }
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// `ioctl(2)` (its third argument read as the pointer every umad request passes).
///
/// # Safety
/// As `ioctl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if is_umad(fd) {
        return guard("ioctl", -1, || umad_ioctl(fd, request, arg));
    }
    // SAFETY: forwarded as received.
    next!("ioctl", IoctlFn).map_or_else(enosys, |f| unsafe { f(fd, request, arg) })
}
