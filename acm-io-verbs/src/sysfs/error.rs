//! The one error type of discovery. Every message names the file or directory it is
//! about, because the person reading it is an administrator looking at a host, not at
//! this code.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::port::LinkLayer;

/// Why discovery failed, or why what it found cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// `<root>/class/infiniband` does not exist: no RDMA core in the kernel.
    #[error(
        "no InfiniBand devices: {} does not exist (is the ib_core module loaded?)",
        path.display()
    )]
    NoInfinibandClass {
        /// The missing directory.
        path: PathBuf,
    },
    /// The class directory holds no device with an InfiniBand port.
    #[error("no InfiniBand devices under {}{}", path.display(), SkippedNote(skipped))]
    NoInfinibandDevices {
        /// The class directory.
        path: PathBuf,
        /// The ports that were found but are not InfiniBand (RoCE and the like), in
        /// discovery order; empty when the directory holds no device at all.
        skipped: Vec<SkippedPort>,
    },
    /// `<root>/class/infiniband_mad` does not exist: no user MAD access.
    #[error(
        "no user MAD devices: {} does not exist (is the ib_umad module loaded?)",
        path.display()
    )]
    NoUmadClass {
        /// The missing directory.
        path: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A file held text that is not what the kernel writes there.
    #[error("{}: {text:?} is not {expected}", path.display())]
    Malformed {
        /// The file (or, for a bad entry name, the entry).
        path: PathBuf,
        /// The offending text, trailing newline removed, shortened when very long.
        text: String,
        /// What the kernel writes there, for the message.
        expected: &'static str,
    },
}

/// A port that discovery found but ibacm does not serve, named in
/// [`DiscoveryError::NoInfinibandDevices`] so that an administrator with only RoCE
/// adapters sees why none was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPort {
    /// The device name (`mlx5_1`).
    pub device: String,
    /// The port number.
    pub port: u8,
    /// Its link layer.
    pub link_layer: LinkLayer,
}

/// The tail of the "no InfiniBand devices" message: nothing when the directory was
/// empty, otherwise which ports were seen and why they do not count.
struct SkippedNote<'a>(&'a [SkippedPort]);

impl fmt::Display for SkippedNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ports = self.0;
        if ports.is_empty() {
            return Ok(());
        }
        let all_ethernet = ports.iter().all(|p| p.link_layer == LinkLayer::Ethernet);
        if all_ethernet {
            f.write_str(": only Ethernet (RoCE) ports were found (")?;
        } else {
            f.write_str(": only non-InfiniBand ports were found (")?;
        }
        for (i, p) in ports.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} port {}", p.device, p.port)?;
            if !all_ethernet {
                match &p.link_layer {
                    LinkLayer::InfiniBand => f.write_str(": InfiniBand")?,
                    LinkLayer::Ethernet => f.write_str(": Ethernet")?,
                    LinkLayer::Other(name) => write!(f, ": {name}")?,
                }
            }
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(device: &str, port: u8, link_layer: LinkLayer) -> SkippedPort {
        SkippedPort {
            device: device.into(),
            port,
            link_layer,
        }
    }

    #[test]
    fn no_devices_message_names_what_was_skipped() {
        let path = PathBuf::from("/sys/class/infiniband");
        let empty = DiscoveryError::NoInfinibandDevices {
            path: path.clone(),
            skipped: vec![],
        };
        assert_eq!(
            empty.to_string(),
            "no InfiniBand devices under /sys/class/infiniband"
        );
        let roce = DiscoveryError::NoInfinibandDevices {
            path: path.clone(),
            skipped: vec![
                skipped("mlx5_1", 1, LinkLayer::Ethernet),
                skipped("mlx5_2", 1, LinkLayer::Ethernet),
            ],
        };
        assert_eq!(
            roce.to_string(),
            "no InfiniBand devices under /sys/class/infiniband: only Ethernet (RoCE) ports \
             were found (mlx5_1 port 1, mlx5_2 port 1)"
        );
        let mixed = DiscoveryError::NoInfinibandDevices {
            path,
            skipped: vec![
                skipped("mlx5_1", 1, LinkLayer::Ethernet),
                skipped("siw0", 1, LinkLayer::Other("Unknown".into())),
            ],
        };
        assert_eq!(
            mixed.to_string(),
            "no InfiniBand devices under /sys/class/infiniband: only non-InfiniBand ports \
             were found (mlx5_1 port 1: Ethernet, siw0 port 1: Unknown)"
        );
    }

    #[test]
    fn io_and_malformed_messages_name_the_file() {
        let io = DiscoveryError::Io {
            path: "/sys/class/infiniband/mlx5_0/node_guid".into(),
            source: io::Error::from_raw_os_error(13),
        };
        assert!(
            io.to_string()
                .starts_with("cannot read /sys/class/infiniband/mlx5_0/node_guid: "),
            "{io}"
        );
        let bad = DiscoveryError::Malformed {
            path: "/sys/class/infiniband/mlx5_0/ports/1/lid".into(),
            text: "zzz".into(),
            expected: "a LID in hexadecimal (such as \"0x1f\")",
        };
        assert_eq!(
            bad.to_string(),
            "/sys/class/infiniband/mlx5_0/ports/1/lid: \"zzz\" is not a LID in hexadecimal \
             (such as \"0x1f\")"
        );
    }
}
