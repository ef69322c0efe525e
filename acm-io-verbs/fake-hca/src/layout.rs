//! Facts about the emulated host that the preload library and the sysfs generator must
//! agree on: which umad node serves which port, and the link width and speed codes
//! behind a port's rate.
//!
//! Kept free of FFI so that both the library and the `acm-fake-hca-sysfs` binary
//! include it (`#[path]`), the binary without linking the library.

use acm_engine::{DeviceDesc, PortId, rate_from_width_speed};
use acm_proto::Rate;

/// The port that umad node `umad<index>` serves: the nodes number every port of every
/// device in device order, then port order, from 0, as the kernel numbers them for a
/// host whose devices were probed in that order.
#[must_use]
pub fn umad_port(devices: &[DeviceDesc], index: u32) -> Option<PortId> {
    umad_ports(devices).nth(usize::try_from(index).ok()?)
}

/// Every port with its umad index, in umad order.
pub fn umad_ports(devices: &[DeviceDesc]) -> impl Iterator<Item = PortId> + '_ {
    devices.iter().flat_map(|d| {
        (1..=d.ports.len()).map(move |p| PortId {
            device: d.id,
            port: p as u8,
        })
    })
}

/// Link widths as `ibv_port_attr.active_width` codes, the common 4x first.
const WIDTHS: [u8; 5] = [2, 1, 4, 8, 16];
/// Link speeds as `active_speed` / `active_speed_ex` codes, slowest first.
const SPEEDS: [u16; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// A width and speed that make `rate` (4x when one does), or 4x SDR for a rate no
/// combination makes. The fabric description keeps only the rate, so this is how the
/// emulation answers `ibv_query_port` and writes sysfs `rate`.
#[must_use]
pub fn width_speed(rate: Rate) -> (u8, u16) {
    for w in WIDTHS {
        for s in SPEEDS {
            if rate_from_width_speed(w, s) == rate {
                return (w, s);
            }
        }
    }
    (2, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::{DeviceId, PortAttrs};

    fn dev(id: u32, ports: usize) -> DeviceDesc {
        DeviceDesc {
            id: DeviceId(id),
            name: format!("hca{id}"),
            guid: 0,
            ports: vec![PortAttrs::default(); ports],
        }
    }

    #[test]
    fn umad_nodes_count_ports_across_devices() {
        let devs = [dev(0, 2), dev(1, 1)];
        let at = |i| umad_port(&devs, i).map(|p| (p.device.0, p.port));
        assert_eq!(
            (at(0), at(1), at(2), at(3)),
            (Some((0, 1)), Some((0, 2)), Some((1, 1)), None)
        );
    }

    #[test]
    fn every_rate_comes_back_from_its_width_and_speed() {
        for rate in [Rate::RATE_10, Rate::RATE_40, Rate(16)] {
            let (w, s) = width_speed(rate);
            assert_eq!(rate_from_width_speed(w, s), rate, "{rate:?}");
        }
        assert_eq!(width_speed(Rate::RATE_10), (2, 1), "4x SDR, not 1x QDR");
    }
}
