//! Where the workspace is, for the tests that read its files.

use std::path::{Path, PathBuf};

/// The workspace's root directory, two levels above this package's.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_path_buf()
}
