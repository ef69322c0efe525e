//! The order in which the shared real-ibacm captures were taken, and the requests the
//! capture run made whose captures are not shipped. Shared by the engine's replay test
//! and the daemon's interop test (`#[path]`), so both replay the same sequence.

/// The cases in the order the capture run made them (testdata/captures/README.md).
pub const ORDER: &[&str] = &[
    "resolve_loopback_ip",
    "resolve_loopback_ip6",
    "resolve_loopback_name",
    "resolve_preloaded_ip",
    "resolve_preloaded_ip6",
    "resolve_preloaded_ip_repeat2",
    "resolve_preloaded_ip_verify",
    "resolve_preloaded_name",
    "resolve_nosrc_ip",
    "resolve_unknown_dest_nodelay",
    "resolve_unknown_name_nodelay",
    "resolve_unknown_src",
    UNSHIPPED,
    "resolve_lid",
    "resolve_lid_nosrc",
    "resolve_lid_verify",
    "resolve_gid",
    "resolve_gid_nosrc",
    "perf_all",
    "perf_col",
    "perf_index1",
    "perf_index2_missing",
    "perf_row",
    "perf_src_ip",
    "perf_src_ip6",
    "perf_src_name",
    "perf_src_unknown",
    "ep_all",
    "ep_missing",
    "ep_one",
    "combined_resolve_perf_ep",
];

/// The case replayed on a fresh daemon rather than in [`ORDER`].
pub const FRESH: &str = "perf_row_fresh";

/// Requests the capture run made whose captures are not shipped. The counters in the
/// perf captures need exactly four more RESOLVEs than the shipped resolve cases hold:
/// one that reached the provider and timed out (it adds to both Resolve Counts, both
/// Addr Query Counts and both Error Counts: the endpoint shows 17 resolves, 3 address
/// queries and 1 error where the shipped cases give 16, 2 and 0), and three the core
/// rejected (global Resolve 24 and Error 6 where the rest give 21 and 3). The README
/// says unknown destinations "time out", which no shipped case does. Any core
/// rejection counts the same; unknown sources stand in for them here.
pub const UNSHIPPED: &str = "(unshipped)";

/// The unshipped requests, each with the status its reply must carry: the provider's
/// timeout (an unknown destination nobody answers: ETIMEDOUT), then three core
/// rejections (an unknown source: ESRCADDR).
#[must_use]
pub fn unshipped_requests() -> Vec<(Vec<u8>, u8)> {
    let mut v = vec![(resolve_ip([10, 0, 0, 1], [10, 0, 0, 8]), 6)];
    for _ in 0..3 {
        v.push((resolve_ip([10, 9, 9, 9], [10, 0, 0, 2]), 7));
    }
    v
}

/// A RESOLVE from `src` to `dst` (IPv4), as ib_acme builds it.
#[must_use]
pub fn resolve_ip(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut m = vec![0u8; 160];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16] = 1; // SOURCE
    m[20] = 2; // IP
    m[24..28].copy_from_slice(&src);
    m[88] = 2; // DEST
    m[92] = 2;
    m[96..100].copy_from_slice(&dst);
    m
}
