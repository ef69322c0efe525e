//! The core's functions that `acm_prov.h` declares (and `acm_if_get_sgid`, which Debian's
//! libibacmp also imports), exported under their C names so that a `dlopen`ed provider
//! binds to them. `acm_write` itself is C (`acm_write.c`): it formats its variadic
//! arguments and calls [`acm_core_write`].
//!
//! Providers call these from any of their threads: they touch only the registry and the
//! installed services (`registry.rs`), and never trust a pointer to one of the
//! core's objects without finding it registered. The behaviour follows the reference's
//! (docs/providers.md §3).

use super::abi::{
    ACM_MSG_LEN, AcmEndpoint, AcmPort, AcmSaMad, IbUserMad, SaHandlerFn, UmadSaPacket,
};
use super::registry::{
    AlreadyInstalled, CoreServices, MadEntry, SaRequest, SaToken, registry, services, set_services,
};
use acm_proto::Rate;
use acm_proto::client::AddrType;
use acm_proto::mad::MAD_LEN;
use acm_proto::path_record::PathRecordRepr;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Arc;

/// `ACM_MAX_COUNTER`: the counters a provider may increment.
const COUNTERS: c_int = 7;

fn log_level() -> i32 {
    services().map_or(0, |s| s.log_level())
}

fn log(level: i32, text: &str) {
    if let Some(s) = services()
        && level <= s.log_level()
    {
        s.write_log(level, text);
    }
}

/// The level above which `acm_write` does not format (called by `acm_write.c`).
#[unsafe(no_mangle)]
pub extern "C" fn acm_core_log_level() -> c_int {
    log_level()
}

/// A formatted `acm_write` line (called by `acm_write.c`).
///
/// # Safety
/// `text` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_core_write(level: c_int, text: *const c_char) {
    if text.is_null() {
        return;
    }
    // SAFETY: the caller passes a NUL-terminated string (a local buffer of acm_write).
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    log(level, &text);
}

/// Copies `n` bytes the provider points at.
///
/// # Safety
/// `p` is null or readable for `n` bytes.
unsafe fn bytes<'a>(p: *const u8, n: usize) -> Option<&'a [u8]> {
    // SAFETY: per the caller.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) })
}

/// `acm_format_name`: a printable form of an address, into `name` (at most `name_size`
/// bytes, NUL-terminated), only when `level` is logged.
///
/// # Safety
/// `name` is writable for `name_size` bytes; `addr` readable for `addr_size` bytes (64
/// for a path record).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_format_name(
    level: c_int,
    name: *mut c_char,
    name_size: usize,
    addr_type: u8,
    addr: *const u8,
    addr_size: usize,
) {
    if level > log_level() || name.is_null() || name_size == 0 {
        return;
    }
    let ty = AddrType(u16::from(addr_type));
    let need = if ty == AddrType::PATH {
        acm_proto::path_record::PATH_RECORD_LEN
    } else {
        addr_size
    };
    // SAFETY: per the contract, `addr` has `addr_size` bytes (a whole record for PATH).
    let Some(a) = (unsafe { bytes(addr, need) }) else {
        return;
    };
    let text = super::format::address(ty, a);
    let out: &[u8] = if ty == AddrType::NAME {
        a
    } else {
        text.as_bytes()
    };
    let n = out.len().min(name_size - 1);
    // SAFETY: `name` is writable for `name_size` bytes and `n + 1 <= name_size`.
    unsafe {
        std::ptr::copy_nonoverlapping(out.as_ptr(), name.cast::<u8>(), n);
        *name.add(n) = 0;
    }
}

/// `ib_any_gid`: whether a GID is all zeros.
///
/// # Safety
/// `gid` points at 16 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ib_any_gid(gid: *const u8) -> c_int {
    // SAFETY: per the contract.
    unsafe { bytes(gid, 16) }.is_none_or(|g| g.iter().all(|&b| b == 0)) as c_int
}

/// `acm_gid_index`: the index of `gid` in the port's table, or the table's length.
///
/// # Safety
/// `gid` points at 16 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_gid_index(port: *const AcmPort, gid: *const u8) -> u8 {
    // SAFETY: per the contract.
    let Some(gid) = (unsafe { bytes(gid, 16) }) else {
        return 0;
    };
    let reg = registry();
    let Some(table) = reg.ports.get(&(port as usize)) else {
        return 0;
    };
    table
        .iter()
        .position(|g| g[..] == *gid)
        .unwrap_or(table.len()) as u8
}

/// `acm_get_gid`: entry `index` of the port's GID table; -1 when out of range.
///
/// # Safety
/// `gid` is writable for 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_get_gid(port: *const AcmPort, index: c_int, gid: *mut u8) -> c_int {
    let found = usize::try_from(index).ok().and_then(|i| {
        registry()
            .ports
            .get(&(port as usize))
            .and_then(|t| t.get(i).copied())
    });
    match found {
        Some(g) if !gid.is_null() => {
            // SAFETY: per the contract, 16 writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(g.as_ptr(), gid, 16) };
            0
        }
        _ => -1,
    }
}

/// `acm_path_comp_mask`: the SA component mask a path record's set fields make,
/// big-endian.
///
/// # Safety
/// `path` points at a 64-byte path record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_path_comp_mask(path: *const u8) -> u64 {
    // SAFETY: per the contract.
    let Some(p) = (unsafe { bytes(path, 64) }) else {
        return 0;
    };
    PathRecordRepr::parse(p).map_or(0, |r| r.sa_comp_mask().0.to_be())
}

/// Copies the message a provider answers with, as long as its header says (within a
/// whole `struct acm_msg`).
///
/// # Safety
/// `msg` points at a whole `struct acm_msg`.
unsafe fn message<'a>(msg: *const u8) -> Option<&'a [u8]> {
    // SAFETY: per the contract, a whole message is readable.
    let all = unsafe { bytes(msg, ACM_MSG_LEN) }?;
    let hdr = acm_proto::client::HeaderPacket::new_unchecked(&all[..acm_proto::client::HEADER_LEN]);
    let len = usize::from(hdr.length(acm_proto::client::Direction::Response));
    Some(&all[..len.clamp(acm_proto::client::HEADER_LEN, ACM_MSG_LEN)])
}

/// `acm_resolve_response`: a provider's answer to resolve `id`.
///
/// # Safety
/// `msg` points at a whole `struct acm_msg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_resolve_response(id: u64, msg: *const u8) -> c_int {
    // SAFETY: per the contract.
    match (services(), unsafe { message(msg) }) {
        (Some(s), Some(m)) => s.resolve_response(id, m),
        _ => -1,
    }
}

/// `acm_query_response`: a provider's answer to QUERY_SA `id`.
///
/// # Safety
/// `msg` points at a whole `struct acm_msg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_query_response(id: u64, msg: *const u8) -> c_int {
    // SAFETY: per the contract.
    match (services(), unsafe { message(msg) }) {
        (Some(s), Some(m)) => s.query_response(id, m),
        _ => -1,
    }
}

/// The rate of `lanes` at `lane_mbps` per lane, as an `ibv_rate` value.
fn rate(mbps: u32) -> c_int {
    c_int::from(Rate::from_mbps(mbps).map_or(0, |r| r.0))
}

/// `acm_get_rate`: the rate of a link width and speed code, the reference's table
/// (1x/4x/8x/12x, SDR to EDR); `IBV_RATE_MAX` (0) for anything else.
#[unsafe(no_mangle)]
pub extern "C" fn acm_get_rate(width: u8, speed: u8) -> c_int {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        _ => {
            log(
                0,
                &format!("acm_get_rate: ERROR - unknown link width 0x{width:x}\n"),
            );
            return 0;
        }
    };
    let lane = match speed {
        1 => 2_500,
        2 => 5_000,
        4 | 8 => 10_000,
        16 => 14_000,
        32 => 25_000,
        _ => return 0,
    };
    rate(lanes * lane)
}

/// `acm_convert_mtu`: an MTU in bytes as an `ibv_mtu` value; 2048 for anything unknown.
#[unsafe(no_mangle)]
pub extern "C" fn acm_convert_mtu(mtu: c_int) -> c_int {
    match mtu {
        256 => 1,
        512 => 2,
        1024 => 3,
        4096 => 5,
        _ => 4,
    }
}

/// `acm_convert_rate`: a rate in Gb/s (2 meaning 2.5) as an `ibv_rate` value; 10 Gb/s for
/// anything unknown.
#[unsafe(no_mangle)]
pub extern "C" fn acm_convert_rate(gbps: c_int) -> c_int {
    match gbps {
        2 => rate(2_500),
        5 | 10 | 20 | 30 | 40 | 60 | 80 | 120 | 14 | 56 | 112 | 168 | 25 | 100 | 200 | 300 => {
            rate(gbps.unsigned_abs() * 1000)
        }
        _ => rate(10_000),
    }
}

/// `acm_alloc_sa_mad`: a zeroed SA MAD for `endpoint`, whose answer goes to `handler`;
/// null for an endpoint the core did not hand out.
#[unsafe(no_mangle)]
pub extern "C" fn acm_alloc_sa_mad(
    endpoint: *const AcmEndpoint,
    context: *mut c_void,
    handler: Option<SaHandlerFn>,
) -> *mut AcmSaMad {
    let mut reg = registry();
    let Some(&key) = reg.endpoints.get(&(endpoint as usize)) else {
        drop(reg);
        log(0, "acm_alloc_sa_mad: Error: unknown endpoint\n");
        return std::ptr::null_mut();
    };
    let mad = Box::into_raw(Box::new(AcmSaMad {
        context,
        // SAFETY: plain integers and byte arrays: all zeros is a valid value.
        umad: unsafe { std::mem::zeroed::<IbUserMad>() },
        sa_mad: UmadSaPacket([0; MAD_LEN]),
    }));
    reg.mads.insert(
        mad as usize,
        MadEntry {
            endpoint: key,
            handler,
        },
    );
    mad
}

/// `acm_free_sa_mad`: releases a MAD from [`acm_alloc_sa_mad`]; anything else is logged
/// and left alone.
///
/// # Safety
/// Any pointer is looked up before use; the MAD must not be in use by another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_free_sa_mad(mad: *mut AcmSaMad) {
    if registry().mads.remove(&(mad as usize)).is_some() {
        // SAFETY: the address was registered by `acm_alloc_sa_mad`, which made it with
        // `Box::into_raw`, and is now unregistered, so it is released exactly once.
        drop(unsafe { Box::from_raw(mad) });
    } else if !mad.is_null() {
        log(0, "acm_free_sa_mad: Error: not an SA MAD of the core\n");
    }
}

/// `acm_send_sa_mad`: sends the MAD on its endpoint's port through the core's SA agent;
/// the answer comes to the MAD's handler. 0 when taken.
///
/// # Safety
/// Any pointer is looked up before use; the provider must not write the MAD while it is
/// being sent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_send_sa_mad(mad: *mut AcmSaMad) -> c_int {
    let entry = registry().mads.get(&(mad as usize)).copied();
    let (Some(entry), Some(s)) = (entry, services()) else {
        log(0, "acm_send_sa_mad: Error: not an SA MAD of the core\n");
        return -1;
    };
    // SAFETY: registered, so a live MAD of `acm_alloc_sa_mad`; the provider filled it and
    // does not write it while sending.
    let bytes = unsafe { (*mad).sa_mad.0 };
    s.send_sa(SaRequest {
        token: SaToken(mad as usize),
        endpoint: entry.endpoint,
        mad: bytes,
    })
}

/// `acm_get_opts_file`: the options file's path.
#[unsafe(no_mangle)]
pub extern "C" fn acm_get_opts_file() -> *const c_char {
    services().map_or(c"".as_ptr(), |s| s.opts_file().as_ptr())
}

/// `acm_increment_counter`: one more of counter `ty` (0..7; others ignored).
#[unsafe(no_mangle)]
pub extern "C" fn acm_increment_counter(ty: c_int) {
    if (0..COUNTERS).contains(&ty)
        && let Some(s) = services()
    {
        s.increment_counter(ty as usize);
    }
}

/// `acm_if_get_sgid`: the GID of IPoIB interface `ifname`, the last 16 bytes of its
/// 20-byte hardware address in sysfs. 0 on success, -1 otherwise.
///
/// # Safety
/// `ifname` is a NUL-terminated string; `sgid` is writable for 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acm_if_get_sgid(ifname: *const c_char, sgid: *mut u8) -> c_int {
    if ifname.is_null() || sgid.is_null() {
        return -1;
    }
    // SAFETY: per the contract.
    let name = unsafe { CStr::from_ptr(ifname) }.to_string_lossy();
    match super::format::interface_gid(&name) {
        Ok(gid) => {
            // SAFETY: per the contract, 16 writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(gid.as_ptr(), sgid, 16) };
            0
        }
        Err(why) => {
            log(0, &format!("acm_if_get_sgid: {why}\n"));
            -1
        }
    }
}

unsafe extern "C" {
    /// The printf-style logger of `acm_write.c`.
    fn acm_write(level: c_int, format: *const c_char, ...);
}

/// The C names a binary must export dynamically for providers (`-Wl,--export-dynamic-symbol`
/// for each, see the daemon's build script, which reads the same file).
pub const EXPORTED_NAMES: [&str; 17] = include!("exported_names.in");

/// Installs the daemon's services for every provider of this process, and keeps the
/// exported functions linked in. It lives beside those functions, not in `registry.rs`,
/// so that the registry (which the functions read) does not depend back on them.
///
/// # Errors
/// Called twice.
pub fn install_core(services: Arc<dyn CoreServices>) -> Result<(), AlreadyInstalled> {
    keep();
    set_services(services)
}

/// Takes the address of every exported function, so that none is left out of a binary
/// that links this crate: an executable's linker drops what nothing references, and a
/// provider's references come only at `dlopen` time.
fn keep() {
    std::hint::black_box([
        acm_write as *const () as usize,
        acm_format_name as *const () as usize,
        ib_any_gid as *const () as usize,
        acm_gid_index as *const () as usize,
        acm_get_gid as *const () as usize,
        acm_path_comp_mask as *const () as usize,
        acm_resolve_response as *const () as usize,
        acm_query_response as *const () as usize,
        acm_get_rate as *const () as usize,
        acm_convert_mtu as *const () as usize,
        acm_convert_rate as *const () as usize,
        acm_alloc_sa_mad as *const () as usize,
        acm_free_sa_mad as *const () as usize,
        acm_send_sa_mad as *const () as usize,
        acm_get_opts_file as *const () as usize,
        acm_increment_counter as *const () as usize,
        acm_if_get_sgid as *const () as usize,
        acm_core_write as *const () as usize,
        acm_core_log_level as *const () as usize,
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::objects::{Device, Endpoint, Port};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn rates_and_mtus_follow_the_reference_tables() {
        assert_eq!(acm_get_rate(2, 1), 3); // 4x SDR: 10 Gb/s
        assert_eq!(acm_get_rate(2, 8), 7); // 4x FDR10: 40 Gb/s
        assert_eq!(acm_get_rate(8, 32), 18); // 12x EDR: 300 Gb/s
        assert_eq!(acm_get_rate(16, 1), 0); // 2x: unknown to the reference
        assert_eq!(acm_get_rate(1, 64), 0); // HDR: unknown to the reference
        assert_eq!(acm_convert_mtu(4096), 5);
        assert_eq!(acm_convert_mtu(1500), 4);
        assert_eq!(acm_convert_rate(2), 2);
        assert_eq!(acm_convert_rate(56), 12);
        assert_eq!(acm_convert_rate(7), 3);
    }

    #[test]
    fn gids_and_masks() {
        let zero = [0u8; 16];
        let mut one = [0u8; 16];
        one[15] = 1;
        // SAFETY: both point at 16 readable bytes.
        unsafe {
            assert_eq!(ib_any_gid(zero.as_ptr()), 1);
            assert_eq!(ib_any_gid(one.as_ptr()), 0);
        }
        let mut path = [0u8; 64];
        acm_proto::path_record::PathRecordPacket::new_unchecked(&mut path[..]).set_dlid(2);
        // SAFETY: a whole 64-byte record.
        let mask = u64::from_be(unsafe { acm_path_comp_mask(path.as_ptr()) });
        assert_eq!(mask, PathRecordRepr::parse(&path).unwrap().sa_comp_mask().0);
        assert_ne!(mask, 0);
    }

    #[test]
    fn the_port_table_answers_gid_lookups() {
        let dev = Device::new(0x1234, None);
        let mut g1 = [0u8; 16];
        g1[0] = 0xfe;
        g1[15] = 7;
        let port = Port::new(&dev, 1, vec![[9; 16], g1]);
        let p = port.as_ptr();
        let mut out = [0u8; 16];
        // SAFETY: `out` has 16 writable bytes, `g1` 16 readable ones.
        unsafe {
            assert_eq!(acm_get_gid(p, 1, out.as_mut_ptr()), 0);
            assert_eq!(out, g1);
            assert_eq!(acm_get_gid(p, 2, out.as_mut_ptr()), -1);
            assert_eq!(acm_gid_index(p, g1.as_ptr()), 1);
            assert_eq!(acm_gid_index(p, [1u8; 16].as_ptr()), 2, "absent: the count");
        }
        drop(port);
        // SAFETY: as above; the port is no longer registered.
        assert_eq!(unsafe { acm_get_gid(p, 0, out.as_mut_ptr()) }, -1);
    }

    static HANDLED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn handler(mad: *mut AcmSaMad) {
        // SAFETY: the core calls the handler with the live MAD it was given for.
        let m = unsafe { &*mad };
        assert_eq!(m.umad.status, 0);
        assert_eq!(m.sa_mad.0[..4], [1, 3, 2, 0x81]);
        HANDLED.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the MAD came from acm_alloc_sa_mad and is not used after this.
        unsafe { acm_free_sa_mad(mad) };
    }

    #[test]
    fn sa_mads_exist_only_for_registered_endpoints_and_reach_their_handler() {
        assert!(acm_alloc_sa_mad(std::ptr::null(), std::ptr::null_mut(), None).is_null());
        let dev = Device::new(1, None);
        let port = Port::new(&dev, 1, Vec::new());
        let ep = Endpoint::new(&port, 0xffff, 77);
        let mad = acm_alloc_sa_mad(ep.as_ptr(), std::ptr::null_mut(), Some(handler));
        assert!(!mad.is_null());
        let token = SaToken(mad as usize);
        assert_eq!(
            registry().mads.get(&(mad as usize)).map(|e| e.endpoint),
            Some(77)
        );
        assert!(super::super::registry::deliver_sa(
            token,
            Ok(&[1, 3, 2, 0x81])
        ));
        assert_eq!(HANDLED.load(Ordering::Relaxed), 1);
        // The handler freed it: a second answer finds nothing.
        assert!(!super::super::registry::deliver_sa(token, Ok(&[0; 4])));
    }
}
