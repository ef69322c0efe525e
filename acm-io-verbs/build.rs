//! Builds the C side of the provider interface: `acm_write` (printf-style, so C), and,
//! when the rdma-core headers are installed, the layout probe the ABI test compares
//! with the Rust declarations.

use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=src/provider/acm_write.c");
    println!("cargo::rerun-if-changed=src/provider/layout_probe.c");
    println!("cargo::rustc-check-cfg=cfg(acm_prov_header)");
    cc::Build::new()
        .file("src/provider/acm_write.c")
        .warnings(true)
        .compile("acm_write");
    let headers = ["acm_prov.h", "umad.h", "umad_sa.h"];
    let include = Path::new("/usr/include/infiniband");
    if headers.iter().all(|h| include.join(h).exists()) {
        cc::Build::new()
            .file("src/provider/layout_probe.c")
            .compile("acm_layout_probe");
        println!("cargo::rustc-cfg=acm_prov_header");
    } else {
        println!(
            "cargo::warning=infiniband/acm_prov.h or umad.h missing: the ABI layout test \
             will fail (install libibverbs-dev and libibumad-dev)"
        );
    }
}
