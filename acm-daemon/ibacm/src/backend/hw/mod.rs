//! The real InfiniBand backend (acm-io-verbs): what the daemon runs on without
//! `--fabric`.
//!
//! [`probe`] and [`convert`] are always built, so the discovery checks and the
//! translations are tested everywhere; the backend itself needs the `verbs` feature
//! (rdma-sys). A daemon built without it says so and how to rebuild.

#[cfg(feature = "verbs")]
mod backend;
// Used by the hardware backend alone; its unit tests run in every build.
#[cfg(any(feature = "verbs", test))]
pub(crate) mod convert;
#[cfg(feature = "verbs")]
mod open;

#[cfg(feature = "verbs")]
pub(crate) use backend::{HwBackend, ProviderContexts};
#[cfg(feature = "verbs")]
pub(crate) use open::open;

use acm_io_verbs::sysfs::{self, Discovery, DiscoveryError};
use acm_io_verbs::umad::{self, UmadError};
use std::path::Path;
use thiserror::Error;

/// Why the daemon cannot run on this host's InfiniBand hardware; each says what is
/// missing in one line, as the start-up failure and the log report it.
#[derive(Debug, Error)]
pub(crate) enum HardwareError {
    /// This `ibacm` was built without the `verbs` feature.
    #[error(
        "this ibacm was built without InfiniBand support; rebuild it with \
         `cargo build --release -p ibacm --features verbs` (needs libibverbs-dev, \
         librdmacm-dev, pkg-config and libclang-dev), or run on a simulated fabric with \
         --fabric sim"
    )]
    NoVerbsBuild,
    /// sysfs shows no usable InfiniBand device or umad class.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The umad class is missing, speaks another ABI, or a umad device cannot be opened.
    #[error(transparent)]
    Umad(#[from] UmadError),
    /// A device cannot be opened or queried through verbs.
    #[cfg(feature = "verbs")]
    #[error(transparent)]
    Verbs(#[from] acm_io_verbs::verbs::VerbsError),
}

/// Checks that the host can run the daemon at all, from sysfs under `sysfs_root`:
/// InfiniBand devices exist, the umad class exists and speaks ABI 5.
///
/// # Errors
/// What is missing.
pub(crate) fn probe(sysfs_root: &Path) -> Result<Discovery, HardwareError> {
    let found = sysfs::discover(sysfs_root)?;
    found.require_infiniband()?;
    found.require_umad()?;
    umad::check_abi(found.umad_abi_version)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tree(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/sysfs")
            .join(name)
    }

    #[test]
    fn a_host_with_an_hca_passes_the_probe() {
        let d = probe(&tree("one-hca-two-ports")).expect("usable");
        assert_eq!(d.infiniband_devices().count(), 1);
    }

    #[test]
    fn each_missing_piece_is_named() {
        let e = probe(&tree("no-class")).unwrap_err().to_string();
        assert!(e.contains("class/infiniband does not exist"), "{e}");
        assert!(e.contains("ib_core"), "{e}");
        let e = probe(&tree("roce-only")).unwrap_err().to_string();
        assert!(e.starts_with("no InfiniBand devices under "), "{e}");
        let e = probe(&tree("no-umad")).unwrap_err().to_string();
        assert!(e.contains("ib_umad"), "{e}");
        assert!(!e.contains('\n'));
    }

    /// The whole way from a fixture tree to what the engine is told: the sysfs view of
    /// the ports (the verbs query adds MTU and subnet timeout on real hardware).
    #[test]
    fn fixture_ports_become_an_engine_device() {
        let d = probe(&tree("one-hca-two-ports")).unwrap();
        let dev = &d.devices[0];
        let ports: Vec<_> = dev.ports.iter().map(|p| p.info.clone()).collect();
        let desc = convert::device_desc(acm_engine::DeviceId(0), &dev.name, dev.node_guid, &ports);
        assert_eq!(desc.ports.len(), 2);
        assert!(desc.ports[0].usable());
        assert!(!desc.ports[1].usable());
        assert_eq!(desc.ports[0].lid, 0x1f);
        assert_eq!(desc.ports[0].lid_mask(), 0xfffc);
        assert_eq!(desc.ports[0].sa_pkey_index(), 0);
        assert_eq!(desc.ports[0].pkey_index(0x8001), 1);
    }
}
