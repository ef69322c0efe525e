//! The Rust declarations of [`super::abi`] against the C compiler's view of
//! `acm_prov.h`: every size and offset the probe (`layout_probe.c`, built by build.rs)
//! reports must equal ours.

use super::abi::*;
use std::mem::{align_of, offset_of, size_of};

/// Ours, under the probe's names.
fn rust_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("sizeof acm_device", size_of::<AcmDevice>()),
        ("acm_device.verbs", offset_of!(AcmDevice, verbs)),
        ("acm_device.dev_guid", offset_of!(AcmDevice, dev_guid)),
        ("sizeof acm_port", size_of::<AcmPort>()),
        ("acm_port.dev", offset_of!(AcmPort, dev)),
        ("acm_port.port_num", offset_of!(AcmPort, port_num)),
        ("sizeof acm_endpoint", size_of::<AcmEndpoint>()),
        ("acm_endpoint.port", offset_of!(AcmEndpoint, port)),
        ("acm_endpoint.pkey", offset_of!(AcmEndpoint, pkey)),
        ("sizeof acm_address", size_of::<AcmAddress>()),
        ("acm_address.endpoint", offset_of!(AcmAddress, endpoint)),
        ("acm_address.info", offset_of!(AcmAddress, info)),
        ("acm_address.id_string", offset_of!(AcmAddress, id_string)),
        ("acm_address.type", offset_of!(AcmAddress, addr_type)),
        ("sizeof acm_provider", size_of::<AcmProvider>()),
        ("acm_provider.size", offset_of!(AcmProvider, size)),
        ("acm_provider.version", offset_of!(AcmProvider, version)),
        ("acm_provider.name", offset_of!(AcmProvider, name)),
        (
            "acm_provider.open_device",
            offset_of!(AcmProvider, open_device),
        ),
        (
            "acm_provider.close_device",
            offset_of!(AcmProvider, close_device),
        ),
        ("acm_provider.open_port", offset_of!(AcmProvider, open_port)),
        (
            "acm_provider.close_port",
            offset_of!(AcmProvider, close_port),
        ),
        (
            "acm_provider.open_endpoint",
            offset_of!(AcmProvider, open_endpoint),
        ),
        (
            "acm_provider.close_endpoint",
            offset_of!(AcmProvider, close_endpoint),
        ),
        (
            "acm_provider.add_address",
            offset_of!(AcmProvider, add_address),
        ),
        (
            "acm_provider.remove_address",
            offset_of!(AcmProvider, remove_address),
        ),
        ("acm_provider.resolve", offset_of!(AcmProvider, resolve)),
        ("acm_provider.query", offset_of!(AcmProvider, query)),
        (
            "acm_provider.handle_event",
            offset_of!(AcmProvider, handle_event),
        ),
        (
            "acm_provider.query_perf",
            offset_of!(AcmProvider, query_perf),
        ),
        ("sizeof acm_msg", size_of::<AcmMsg>()),
        ("acm_msg.hdr", 0),
        ("acm_msg.data", 16),
        ("sizeof ib_mad_addr", size_of::<IbMadAddr>()),
        ("ib_mad_addr.qpn", offset_of!(IbMadAddr, qpn)),
        ("ib_mad_addr.qkey", offset_of!(IbMadAddr, qkey)),
        ("ib_mad_addr.lid", offset_of!(IbMadAddr, lid)),
        ("ib_mad_addr.sl", offset_of!(IbMadAddr, sl)),
        ("ib_mad_addr.path_bits", offset_of!(IbMadAddr, path_bits)),
        (
            "ib_mad_addr.grh_present",
            offset_of!(IbMadAddr, grh_present),
        ),
        ("ib_mad_addr.gid_index", offset_of!(IbMadAddr, gid_index)),
        ("ib_mad_addr.hop_limit", offset_of!(IbMadAddr, hop_limit)),
        (
            "ib_mad_addr.traffic_class",
            offset_of!(IbMadAddr, traffic_class),
        ),
        ("ib_mad_addr.gid", offset_of!(IbMadAddr, gid)),
        ("ib_mad_addr.flow_label", offset_of!(IbMadAddr, flow_label)),
        ("ib_mad_addr.pkey_index", offset_of!(IbMadAddr, pkey_index)),
        ("ib_mad_addr.reserved", offset_of!(IbMadAddr, reserved)),
        ("sizeof ib_user_mad", size_of::<IbUserMad>()),
        ("ib_user_mad.agent_id", offset_of!(IbUserMad, agent_id)),
        ("ib_user_mad.status", offset_of!(IbUserMad, status)),
        ("ib_user_mad.timeout_ms", offset_of!(IbUserMad, timeout_ms)),
        ("ib_user_mad.retries", offset_of!(IbUserMad, retries)),
        ("ib_user_mad.length", offset_of!(IbUserMad, length)),
        ("ib_user_mad.addr", offset_of!(IbUserMad, addr)),
        ("sizeof umad_sa_packet", size_of::<UmadSaPacket>()),
        ("sizeof acm_sa_mad", size_of::<AcmSaMad>()),
        ("acm_sa_mad.context", offset_of!(AcmSaMad, context)),
        ("acm_sa_mad.umad", offset_of!(AcmSaMad, umad)),
        ("acm_sa_mad.sa_mad", offset_of!(AcmSaMad, sa_mad)),
        ("alignof acm_msg", align_of::<AcmMsg>()),
        ("alignof acm_sa_mad", align_of::<AcmSaMad>()),
        ("alignof acm_address", align_of::<AcmAddress>()),
        (
            "IBV_EVENT_CLIENT_REREGISTER",
            IBV_EVENT_CLIENT_REREGISTER as usize,
        ),
        ("version ACM_PROV_VERSION", ACM_PROV_VERSION as usize),
    ]
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
