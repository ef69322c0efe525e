//! Exports the core's provider API (acm_prov.h) from the `ibacm` executable, so that a
//! provider library it `dlopen`s binds to those functions: an executable exports nothing
//! dynamically unless told to. The list is acm-io-verbs' `EXPORTED_NAMES`; the test
//! `daemon_providers` checks the binary's dynamic symbols against it.

const EXPORTED: [&str; 17] = [
    "acm_write",
    "acm_format_name",
    "ib_any_gid",
    "acm_gid_index",
    "acm_get_gid",
    "acm_path_comp_mask",
    "acm_resolve_response",
    "acm_query_response",
    "acm_get_rate",
    "acm_convert_mtu",
    "acm_convert_rate",
    "acm_alloc_sa_mad",
    "acm_free_sa_mad",
    "acm_send_sa_mad",
    "acm_get_opts_file",
    "acm_increment_counter",
    "acm_if_get_sgid",
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for name in EXPORTED {
        println!("cargo::rustc-link-arg-bin=ibacm=-Wl,--export-dynamic-symbol={name}");
    }
}
