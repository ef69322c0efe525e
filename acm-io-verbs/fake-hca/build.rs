//! The library's dynamic symbols are the C ABI it emulates and nothing else: symbols
//! that dependencies export for other purposes (acm-io-verbs' provider core functions,
//! which the `ibacm` binary itself exports to C providers) are kept local, so that
//! preloading the library never shadows them.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
}
