//! `-A` and `-O`: writing the daemon's address file and options file
//! (docs/ib-acme.md §7).
//!
//! The effective (non-comment) lines are what the daemon reads and match Debian's
//! `ib_acme`; the comments are our own wording.
//!
//! Differences from Debian's tool, on purpose: the output directory is created with
//! mode 0755 (Debian asks for 0644, a directory nobody but root can enter), and the
//! process never changes its working directory (Debian `chdir`s into the directory, so a
//! relative `-D` used by both `-A` and `-O` would nest).

use super::format::Report;
use crate::outcome::{FileKind, GenerateError};
use acm_client::errno;
use acm_io_verbs::sysfs::{self, DiscoveryError, IbDevice};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Default `-A` file name.
pub(crate) const DEFAULT_ADDR_FILE: &str = "ibacm_addr.cfg";
/// Default `-O` file name.
pub(crate) const DEFAULT_OPTS_FILE: &str = "ibacm_opts.cfg";
/// Default `-D` directory.
pub(crate) const DEFAULT_DIR: &str = "/etc/rdma";

/// The comment block at the top of a generated address file.
pub const ADDRESS_HEADER: &str = "\
# ibacm address file: the names by which the ibacm endpoints of this host are known.
#
# Written by `ib_acme -A`; run that again to rebuild it for the current ports
# (-D picks the directory, default /etc/rdma).
#
# Each entry is one line of four fields:
#
#   <address> <device> <port> <pkey>
#
# ibacm reads the IP addresses of the IPoIB interfaces on its own, so entries
# normally give host names; keep them to 31 characters.
# <device> is the HCA name as listed in /sys/class/infiniband, <port> the port
# number on it, and <pkey> the partition key in hex (0xffff), or the word
# default for the first key of the port's pkey table.
# Old releases accepted at most 4 addresses per endpoint; there is no such limit now.
#
# Examples:
#   node7      mlx5_0 1 default
#   node7-ib2  mlx5_0 2 0x8001
#   192.0.2.17 mlx5_1 1 0xffff
#
";

/// The whole generated options file: the effective lines are the daemon's defaults, in
/// the order Debian writes them.
pub const OPTIONS_TEMPLATE: &str = "\
# ibacm options file. Written by `ib_acme -O`. Each setting is one line,
# `<name> <value>`; lines starting with # are ignored. The values below are the
# built-in defaults, so deleting a line changes nothing.

# Where the daemon writes its log: a file name, or stdout / stderr.
log_file /var/log/ibacm.log

# How much to log: 0 configuration summary and errors, 1 verbose configuration,
# 2 every operation.
log_level 0

# Debug level of the umad library (0 leaves it quiet).
umad_debug_level 0

# The file holding the daemon's pid, locked to keep a second instance out.
lock_file /run/ibacm.pid

# How addresses are resolved to GIDs: acm, the multicast protocol between daemons.
addr_prot acm

# Minutes a resolved address stays cached; -1 keeps it forever.
addr_timeout 1440

# How paths are obtained: sa asks the subnet administrator, acm builds them from the
# address resolution.
route_prot sa

# Minutes a path stays cached; -1 keeps it forever.
route_timeout -1

# Paths to the host's own addresses: local answers without the network, none
# resolves them like any other.
loopback_prot local

# TCP port of the service when server_mode is loop or open.
server_port 6125

# How clients reach the daemon: unix (a local socket), loop (TCP on 127.0.0.1)
# or open (TCP on every interface).
server_mode unix

# yes leaves out the public socket and port links librdmacm uses, so only ib_acme
# and the kernel talk to the daemon.
acme_plus_kernel_only no

# Milliseconds to wait for an answer to an SA query or an address request.
timeout 2000

# How many times an unanswered request is sent again.
retries 2

# Address requests outstanding at once per endpoint.
resolve_depth 1

# SA queries outstanding at once per port.
sa_depth 1

# Responses to other daemons outstanding at once per endpoint.
send_depth 1

# Receive buffers posted per endpoint.
recv_depth 1024

# Smallest path MTU, in bytes, of the multicast groups used for address resolution.
min_mtu 2048

# Smallest rate, in Gb/s, of those multicast groups.
min_rate 10

# Paths loaded into the cache at start: none, or opensm_full_v1 to read the
# route_data_file written by OpenSM.
route_preload none

# The file read by route_preload:
# route_data_file /etc/rdma/ibacm_route.data

# Addresses loaded into the cache at start: none, or acm_hosts to read
# addr_data_file.
addr_preload none

# The file read by addr_preload:
# addr_data_file /etc/rdma/ibacm_hosts.data

# Set to 1 to allow IP addresses, not only names, in the address file:
# support_ips_in_addr_cfg 0

# The memory, in bytes, each endpoint's destination cache may take; a full cache
# evicts the idle destination used least recently (not in rdma-core's ibacm, whose
# cache has no bound):
# max_dest_cache_bytes 67108864

# Threads serving clients: 0 one per two CPUs the daemon may run on from 4 up (at
# most 64; under 4 CPUs, 1), 1 a
# single thread for everything, 2 to 256 that many worker threads answering cached
# resolves beside the thread that runs the engine (not in rdma-core's ibacm, which
# has one thread); a change needs a restart:
# worker_threads 0

# Directory of the provider libraries:
# provider_lib_path <dir>

# Which provider serves the ports of a subnet: `provider <name> <subnet prefix>`,
# or `provider <name> default` for every port not named otherwise.
# provider ibacmp 0xFE80000000000000
# provider ibacmp default
";

/// The short host name: `gethostname()` up to the first dot.
///
/// # Errors
/// The system call's failure.
pub fn short_hostname() -> io::Result<String> {
    let full = dns_lookup::get_hostname()?;
    Ok(full.split('.').next().unwrap_or_default().to_owned())
}

/// The address lines for `host`: one `<host> <dev> <port> default` for the first ACTIVE
/// InfiniBand port, then `<host>-<n> <dev> <port> default` for every InfiniBand port,
/// numbered from 1. Ports of other link layers (RoCE) are skipped: ibacm does not serve
/// them.
#[must_use]
pub(crate) fn address_lines(host: &str, devices: &[IbDevice]) -> Vec<String> {
    let ib_ports = || {
        devices.iter().flat_map(|d| {
            d.infiniband_ports()
                .map(move |p| (d.name.as_str(), &p.info))
        })
    };
    let mut lines = Vec::new();
    if let Some((dev, port)) = ib_ports().find(|(_, p)| p.state.is_active()) {
        lines.push(format!("{host} {dev} {} default", port.number));
    }
    for (i, (dev, port)) in ib_ports().enumerate() {
        lines.push(format!("{host}-{} {dev} {} default", i + 1, port.number));
    }
    lines
}

/// Where the file goes: an absolute file name ignores the directory.
fn target(dir: &str, file: &str) -> PathBuf {
    Path::new(dir).join(file)
}

/// Creates `dir` if needed and checks that it is a directory.
fn open_dir(dir: &str) -> Result<(), GenerateError> {
    use std::os::unix::fs::DirBuilderExt;
    // An existing directory is fine; any other failure shows in the check below.
    let _ = std::fs::DirBuilder::new().mode(0o755).create(dir);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(GenerateError::Directory {
            dir: dir.to_owned(),
            errno: NOT_A_DIRECTORY,
        }),
        Err(e) => Err(GenerateError::Directory {
            dir: dir.to_owned(),
            errno: errno::of_io(&e),
        }),
    }
}

/// ENOTDIR.
const NOT_A_DIRECTORY: i32 = 20;

fn file_error(e: &io::Error) -> GenerateError {
    GenerateError::File {
        errno: errno::of_io(e),
    }
}

/// A system call's failure is reported with its errno, as any other file error; a tree
/// that does not read as sysfs (a missing or malformed attribute) with discovery's own
/// message, which names the file.
fn discovery_error(e: DiscoveryError) -> GenerateError {
    match &e {
        DiscoveryError::Io { source, .. } if source.raw_os_error().is_some() => file_error(source),
        _ => GenerateError::Sysfs(e),
    }
}

/// `-A`: writes the address file for this host's ports (from sysfs under `sysfs_root`).
/// Returns the status `ib_acme` keeps (0 or -1).
pub(crate) fn address_file(
    dir: &str,
    file: &str,
    sysfs_root: &Path,
    report: &mut dyn Report,
) -> i32 {
    let kind = FileKind::Address;
    report.generating(kind, &format!("{dir}/{file}"));
    let result = write_address_file(dir, file, sysfs_root, report);
    finish(kind, result, report)
}

fn write_address_file(
    dir: &str,
    file: &str,
    sysfs_root: &Path,
    report: &mut dyn Report,
) -> Result<(), GenerateError> {
    open_dir(dir)?;
    // Created before the devices are read, as Debian does: an empty file is left behind
    // when there are none.
    let mut out = std::fs::File::create(target(dir, file)).map_err(|e| file_error(&e))?;
    // Every device counts here, RoCE-only ones included: a host with only those gets
    // an address file without entries, not "no devices".
    let devices = sysfs::discover(sysfs_root)
        .map_err(discovery_error)?
        .devices;
    if devices.is_empty() {
        return Err(GenerateError::NoDevices);
    }
    let host = short_hostname().map_err(|e| GenerateError::HostName {
        errno: errno::of_io(&e),
    })?;
    let lines = address_lines(&host, &devices);
    let mut text = String::from(ADDRESS_HEADER);
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    out.write_all(text.as_bytes()).map_err(|e| file_error(&e))?;
    for line in &lines {
        report.generated_line(line);
    }
    Ok(())
}

/// `-O`: writes the options file. Returns 0 or -1.
pub(crate) fn options_file(dir: &str, file: &str, report: &mut dyn Report) -> i32 {
    let kind = FileKind::Options;
    report.generating(kind, &format!("{dir}/{file}"));
    let result = open_dir(dir).and_then(|()| {
        std::fs::write(target(dir, file), OPTIONS_TEMPLATE).map_err(|e| file_error(&e))
    });
    finish(kind, result, report)
}

fn finish(kind: FileKind, result: Result<(), GenerateError>, report: &mut dyn Report) -> i32 {
    match result {
        Ok(()) => {
            report.generated(kind);
            0
        }
        Err(e) => {
            report.generate_failed(kind, &e);
            -1
        }
    }
}

/// The effective lines of a configuration text: neither blank nor comments.
#[must_use]
pub fn effective_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_io_verbs::port::{LinkLayer, PortInfo, PortState};
    use acm_io_verbs::sysfs::{NodeType, SysfsPort};

    fn port(number: u8, active: bool, ll: &str) -> SysfsPort {
        SysfsPort {
            info: PortInfo {
                number,
                state: if active {
                    PortState::ACTIVE
                } else {
                    PortState::DOWN
                },
                link_layer: match ll {
                    "InfiniBand" => LinkLayer::InfiniBand,
                    "Ethernet" => LinkLayer::Ethernet,
                    other => LinkLayer::Other(other.into()),
                },
                ..PortInfo::default()
            },
            umad: None,
        }
    }

    fn device(name: &str, ports: Vec<SysfsPort>) -> IbDevice {
        IbDevice {
            name: name.into(),
            node_guid: 0,
            node_type: NodeType::CA,
            ports,
        }
    }

    #[test]
    fn options_template_effective_lines_in_order() {
        assert_eq!(
            effective_lines(OPTIONS_TEMPLATE),
            [
                "log_file /var/log/ibacm.log",
                "log_level 0",
                "umad_debug_level 0",
                "lock_file /run/ibacm.pid",
                "addr_prot acm",
                "addr_timeout 1440",
                "route_prot sa",
                "route_timeout -1",
                "loopback_prot local",
                "server_port 6125",
                "server_mode unix",
                "acme_plus_kernel_only no",
                "timeout 2000",
                "retries 2",
                "resolve_depth 1",
                "sa_depth 1",
                "send_depth 1",
                "recv_depth 1024",
                "min_mtu 2048",
                "min_rate 10",
                "route_preload none",
                "addr_preload none",
            ]
        );
        for example in [
            "# route_data_file /etc/rdma/ibacm_route.data",
            "# addr_data_file /etc/rdma/ibacm_hosts.data",
            "# support_ips_in_addr_cfg 0",
            "# max_dest_cache_bytes 67108864",
            "# worker_threads 0",
            "# provider_lib_path <dir>",
            "# provider ibacmp 0xFE80000000000000",
            "# provider ibacmp default",
        ] {
            assert!(OPTIONS_TEMPLATE.contains(example), "{example}");
        }
    }

    #[test]
    fn address_header_is_all_comments() {
        assert!(effective_lines(ADDRESS_HEADER).is_empty());
    }

    #[test]
    fn spec_example_one_active_port() {
        let devices = [device("mlx5_0", vec![port(1, true, "InfiniBand")])];
        assert_eq!(
            address_lines("node1", &devices),
            ["node1 mlx5_0 1 default", "node1-1 mlx5_0 1 default"]
        );
    }

    #[test]
    fn every_ib_port_numbered_and_first_active_named() {
        let devices = [
            device(
                "mlx4_0",
                vec![port(1, false, "InfiniBand"), port(2, false, "Ethernet")],
            ),
            device(
                "mlx5_0",
                vec![port(1, true, "InfiniBand"), port(2, true, "InfiniBand")],
            ),
        ];
        assert_eq!(
            address_lines("h", &devices),
            [
                "h mlx5_0 1 default",
                "h-1 mlx4_0 1 default",
                "h-2 mlx5_0 1 default",
                "h-3 mlx5_0 2 default",
            ]
        );
        // No active port: only the numbered lines.
        let down = [device("d", vec![port(1, false, "InfiniBand")])];
        assert_eq!(address_lines("h", &down), ["h-1 d 1 default"]);
    }

    #[test]
    fn failure_texts() {
        let e = GenerateError::Directory {
            dir: "/x/y".into(),
            errno: errno::ENOENT,
        };
        assert_eq!(
            e.text(FileKind::Options),
            [
                "Failed to open directory /x/y: No such file or directory",
                "Failed to open option configuration file: No such file or directory"
            ]
        );
        assert_eq!(
            GenerateError::File { errno: 13 }.text(FileKind::Address),
            ["Failed to open address configuration file: Permission denied"]
        );
        assert_eq!(
            GenerateError::NoDevices.text(FileKind::Address),
            ["ibv_get_device_list - no devices present?"]
        );
        assert_eq!(
            target("/etc/rdma", "/tmp/x.cfg"),
            PathBuf::from("/tmp/x.cfg")
        );
        assert_eq!(
            target("/etc/rdma", "a.cfg"),
            PathBuf::from("/etc/rdma/a.cfg")
        );
    }

    #[test]
    fn short_hostname_has_no_domain() {
        let h = short_hostname().unwrap();
        assert!(!h.contains('.'));
    }
}
