//! `acm-fake-hca-sysfs FABRIC.toml HOST DIR`: writes, under DIR, the sysfs tree an
//! InfiniBand host of the fabric description would have (the parts ibacm reads:
//! `class/infiniband/<dev>/...` and `class/infiniband_mad/...`), so that a daemon
//! pointed at it with `ACM_SYSFS_ROOT=DIR` and preloaded with the emulated HCA
//! discovers the same devices and ports the emulation answers for. `class/net` is
//! written empty: the emulation has no IPoIB interfaces.

#[path = "../layout.rs"]
#[allow(dead_code, unreachable_pub)]
mod layout;
#[path = "../sysfs_tree.rs"]
#[allow(dead_code, unreachable_pub)]
mod sysfs_tree;

use acm_io_sim::FabricSpec;
use acm_io_sim::topology::Topology;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Why the tree could not be written.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("usage: acm-fake-hca-sysfs FABRIC.toml HOST DIR")]
    Usage,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tree(#[from] sysfs_tree::TreeError),
    #[error("{0}")]
    Spec(String),
    #[error("the fabric has no host {0}")]
    NoHost(String),
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acm-fake-hca-sysfs: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), Error> {
    let [fabric, host, dir] = <[String; 3]>::try_from(args).map_err(|_| Error::Usage)?;
    let text = std::fs::read_to_string(&fabric).map_err(|source| Error::Io {
        path: fabric.clone().into(),
        source,
    })?;
    let spec = FabricSpec::parse(&text).map_err(|e| Error::Spec(format!("{fabric}: {e}")))?;
    let h = spec
        .host_index(&host)
        .ok_or_else(|| Error::NoHost(host.clone()))?;
    let devices = Topology::new(&spec).devices(h, spec.sm.lid, spec.sm.sl);
    Ok(sysfs_tree::write_tree(Path::new(&dir), &devices)?)
}
