//! The workspace's programs as the tests run them.
//!
//! Cargo tells a package's tests where that package's own binaries are
//! (`CARGO_BIN_EXE_<name>`), not where another package's are. The programs are one
//! package each, so a test of one runs the others from the directory cargo builds every
//! binary into: the parent of the `deps/` directory this test's own executable is in.
//! `cargo test --workspace` builds every program before it runs any test; a test run of a
//! single package does not, and then the missing program is named with the command that
//! builds it.

use std::path::{Path, PathBuf};

/// The path of the workspace program `name` (`ibacm`, `ib_acme`, `acm-load`, `acmdump`),
/// or a failure that says how to build it.
pub(crate) fn program(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own executable");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lies in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first \
         (`cargo test --workspace` builds it)",
        path.display()
    );
    path
}
