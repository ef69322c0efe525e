//! The Rust declarations of [`super::abi`] against the C compiler's view of
//! `acm_prov.h`: every size and offset the probe (`layout_probe.c`, built by build.rs)
//! reports must equal ours.

use super::abi::*;
use std::mem::{align_of, offset_of, size_of};

/// A structure's rows, as the probe names them: `sizeof <c>`, then `<c>.<field>` with
/// each field's offset (`field = "name"` where the C name differs from ours).
macro_rules! layout {
    ($ty:ty as $c:literal { $($field:ident $(= $c_field:literal)?),* $(,)? }) => {
        [
            (concat!("sizeof ", $c), size_of::<$ty>()),
            $((layout!(@name $c, $field $(, $c_field)?), offset_of!($ty, $field)),)*
        ]
    };
    (@name $c:literal, $field:ident) => {
        concat!($c, ".", stringify!($field))
    };
    (@name $c:literal, $field:ident, $c_field:literal) => {
        concat!($c, ".", $c_field)
    };
}

/// Ours, under the probe's names, in the probe's order.
fn rust_layout() -> Vec<(&'static str, usize)> {
    let mut rows = Vec::new();
    rows.extend(layout!(AcmDevice as "acm_device" { verbs, dev_guid }));
    rows.extend(layout!(AcmPort as "acm_port" { dev, port_num }));
    rows.extend(layout!(AcmEndpoint as "acm_endpoint" { port, pkey }));
    rows.extend(layout!(AcmAddress as "acm_address" {
        endpoint,
        info,
        id_string,
        addr_type = "type",
    }));
    rows.extend(layout!(AcmProvider as "acm_provider" {
        size,
        version,
        name,
        open_device,
        close_device,
        open_port,
        close_port,
        open_endpoint,
        close_endpoint,
        add_address,
        remove_address,
        resolve,
        query,
        handle_event,
        query_perf,
    }));
    // `acm_msg` is one byte array here; the header and data offsets are its layout.
    rows.extend([
        ("sizeof acm_msg", size_of::<AcmMsg>()),
        ("acm_msg.hdr", 0),
        ("acm_msg.data", 16),
    ]);
    rows.extend(layout!(IbMadAddr as "ib_mad_addr" {
        qpn,
        qkey,
        lid,
        sl,
        path_bits,
        grh_present,
        gid_index,
        hop_limit,
        traffic_class,
        gid,
        flow_label,
        pkey_index,
        reserved,
    }));
    rows.extend(layout!(IbUserMad as "ib_user_mad" {
        agent_id,
        status,
        timeout_ms,
        retries,
        length,
        addr,
    }));
    rows.extend(layout!(UmadSaPacket as "umad_sa_packet" {}));
    rows.extend(layout!(AcmSaMad as "acm_sa_mad" { context, umad, sa_mad }));
    rows.extend([
        ("alignof acm_msg", align_of::<AcmMsg>()),
        ("alignof acm_sa_mad", align_of::<AcmSaMad>()),
        ("alignof acm_address", align_of::<AcmAddress>()),
        (
            "IBV_EVENT_CLIENT_REREGISTER",
            IBV_EVENT_CLIENT_REREGISTER as usize,
        ),
        ("version ACM_PROV_VERSION", ACM_PROV_VERSION as usize),
    ]);
    rows
}

#[cfg(acm_prov_header)]
fn c_layout() -> Vec<(String, usize)> {
    #[repr(C)]
    struct Entry {
        name: *const std::ffi::c_char,
        value: usize,
    }
    unsafe extern "C" {
        fn acm_layout_entries(count: *mut usize) -> *const Entry;
    }
    let mut n = 0usize;
    // SAFETY: the probe returns its static table and writes its length.
    let table = unsafe { acm_layout_entries(&raw mut n) };
    // SAFETY: `table` has `n` entries, static.
    let entries = unsafe { std::slice::from_raw_parts(table, n) };
    entries
        .iter()
        .map(|e| {
            // SAFETY: every name is a static string literal of the probe.
            let name = unsafe { std::ffi::CStr::from_ptr(e.name) };
            (name.to_string_lossy().into_owned(), e.value)
        })
        .collect()
}

#[test]
fn structures_match_acm_prov_h() {
    #[cfg(not(acm_prov_header))]
    panic!(
        "infiniband/acm_prov.h (or umad.h) was missing when acm-io-verbs was built: \
         install libibverbs-dev and libibumad-dev"
    );
    #[cfg(acm_prov_header)]
    {
        let c = c_layout();
        let rust = rust_layout();
        assert_eq!(c.len(), rust.len(), "probe and Rust table differ in length");
        let wrong: Vec<String> = c
            .iter()
            .zip(&rust)
            .filter(|((cn, cv), (rn, rv))| cn != rn || cv != rv)
            .map(|((cn, cv), (rn, rv))| format!("C {cn} = {cv}, Rust {rn} = {rv}"))
            .collect();
        assert!(wrong.is_empty(), "layout mismatches:\n{}", wrong.join("\n"));
        assert_eq!(size_of::<AcmProvider>(), 120, "LP64 acm_provider");
    }
}
