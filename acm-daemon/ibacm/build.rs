//! Exports the core's provider API (acm_prov.h) from the `ibacm` executable, so that a
//! provider library it `dlopen`s binds to those functions: an executable exports nothing
//! dynamically unless told to. The list is acm-io-verbs' `EXPORTED_NAMES`; the test
//! `daemon_providers` checks the binary's dynamic symbols against it.

/// The list, from the file acm-io-verbs' `EXPORTED_NAMES` is read from.
const EXPORTED: [&str; 17] = include!("../../acm-io-verbs/src/provider/exported_names.in");

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../../acm-io-verbs/src/provider/exported_names.in");
    for name in EXPORTED {
        println!("cargo::rustc-link-arg-bin=ibacm=-Wl,--export-dynamic-symbol={name}");
    }
}
