//! `<root>/class/infiniband/<dev>/`: one RDMA device, its node attributes and ports,
//! and the order devices are listed in.

use std::cmp::Ordering;
use std::path::Path;

use super::attr::{list_dir, missing, parse_at, read_required};
use super::error::DiscoveryError;
use super::port::{SysfsPort, read_port_dir};
use super::umad_class::UmadClass;
use super::values::{GUID, NODE_TYPE, PORT_NUMBER};
use crate::port::LinkLayer;

/// A node type, as the kernel numbers it (`enum rdma_node_type`, which sysfs prints as
/// "1: CA").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeType(pub u8);

impl NodeType {
    /// A channel adapter (HCA): what ibacm normally runs on.
    pub const CA: Self = Self(1);
    /// A switch (its management port is port 0).
    pub const SWITCH: Self = Self(2);
    /// A router.
    pub const ROUTER: Self = Self(3);
    /// An iWARP NIC.
    pub const RNIC: Self = Self(4);
    /// Cisco usNIC.
    pub const USNIC: Self = Self(5);
    /// Cisco usNIC over UDP.
    pub const USNIC_UDP: Self = Self(6);
    /// A software device with no fixed type.
    pub const UNSPECIFIED: Self = Self(7);
}

/// One device under `class/infiniband`, with every port it has (whatever the link
/// layer: filtering is the caller's business, see
/// [`super::Discovery::infiniband_devices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbDevice {
    /// The kernel's device name (`mlx5_0`).
    pub name: String,
    /// `node_guid`.
    pub node_guid: u64,
    /// `node_type`.
    pub node_type: NodeType,
    /// Every port, ascending by number.
    pub ports: Vec<SysfsPort>,
}

impl IbDevice {
    /// The ports whose link layer is InfiniBand, whatever their state.
    pub fn infiniband_ports(&self) -> impl Iterator<Item = &SysfsPort> {
        self.ports
            .iter()
            .filter(|p| p.info.link_layer == LinkLayer::InfiniBand)
    }

    /// Whether any port is InfiniBand: the reference daemon opens only such devices.
    #[must_use]
    pub fn has_infiniband_port(&self) -> bool {
        self.infiniband_ports().next().is_some()
    }

    /// The port numbered `number`, if the device has it.
    #[must_use]
    pub fn port(&self, number: u8) -> Option<&SysfsPort> {
        self.ports.iter().find(|p| p.info.number == number)
    }
}

/// The device `name` under the class directory `class_dir`, each port paired with its
/// umad device from `umad` (when the umad class exists).
pub(super) fn read_device(
    class_dir: &Path,
    name: &str,
    umad: Option<&UmadClass>,
) -> Result<IbDevice, DiscoveryError> {
    let dir = class_dir.join(name);
    let node_guid = read_required(&dir.join("node_guid"), &GUID)?;
    let node_type = NodeType(read_required(&dir.join("node_type"), &NODE_TYPE)?);
    let ports_dir = dir.join("ports");
    let Some(entries) = list_dir(&ports_dir)? else {
        return Err(missing(&ports_dir, "directory"));
    };
    let mut numbers = entries
        .iter()
        .map(|entry| parse_at(&ports_dir.join(entry), entry, &PORT_NUMBER))
        .collect::<Result<Vec<u8>, _>>()?;
    numbers.sort_unstable();
    let mut ports = Vec::with_capacity(numbers.len());
    for number in numbers {
        let info = read_port_dir(&ports_dir.join(number.to_string()), number)?;
        let umad = umad.and_then(|class| class.ports.get(&(name.to_owned(), number)).copied());
        ports.push(SysfsPort { info, umad });
    }
    Ok(IbDevice {
        name: name.to_owned(),
        node_guid,
        node_type,
        ports,
    })
}

/// Natural order of device names: digit runs compare as numbers, so `mlx5_2` comes
/// before `mlx5_10`, the order an administrator reads device lists in, and a stable one
/// whatever order the directory returns. Names that differ only in leading zeros fall
/// back to plain string order, so the order is total.
pub(super) fn natural_cmp(a: &str, b: &str) -> Ordering {
    natural_cmp_bytes(a.as_bytes(), b.as_bytes()).then_with(|| a.cmp(b))
}

fn natural_cmp_bytes(mut a: &[u8], mut b: &[u8]) -> Ordering {
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (run_a, rest_a) = split_digits(a);
                let (run_b, rest_b) = split_digits(b);
                // Compare as numbers of any length: without leading zeros, the longer
                // run is larger, and equal lengths compare digit by digit.
                let (na, nb) = (strip_zeros(run_a), strip_zeros(run_b));
                let order = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (rest_a, rest_b);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                (a, b) = (&a[1..], &b[1..]);
            }
        }
    }
}

/// The leading run of ASCII digits and the rest.
fn split_digits(s: &[u8]) -> (&[u8], &[u8]) {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    s.split_at(end)
}

fn strip_zeros(digits: &[u8]) -> &[u8] {
    let start = digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len());
    &digits[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[test]
    fn natural_order_of_device_names() {
        let mut names = vec![
            "mlx5_10", "mlx5_2", "mlx4_0", "hfi1_0", "mlx5_1", "mlx5_02", "qib0", "mlx5_", "rxe0",
            "mlx5_100",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "hfi1_0", "mlx4_0", "mlx5_", "mlx5_1", "mlx5_02", "mlx5_2", "mlx5_10", "mlx5_100",
                "qib0", "rxe0"
            ]
        );
        assert_eq!(
            natural_cmp("a99999999999999999999999", "a100000000000000000000000"),
            Ordering::Less
        );
    }

    quickcheck! {
        // A total order consistent with equality, for any names (no panic either).
        fn natural_order_is_total(a: String, b: String) -> bool {
            let ab = natural_cmp(&a, &b);
            ab == natural_cmp(&b, &a).reverse() && (ab == Ordering::Equal) == (a == b)
        }
    }
}
