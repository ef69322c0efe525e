//! Identities derived from a spec: hosts (by index and by name), port GUIDs and GIDs.

use super::FabricSpec;
use acm_proto::Gid;
use core::fmt;

/// A host of a fabric: its index in the spec's [`FabricSpec::hosts`] list (host 0 is
/// the first `[[hosts]]` table). Every part of the simulator that means "a host" —
/// ports ([`crate::topology::PortRef`]), events, clients, the hub's attachments — takes
/// this rather than a bare integer, so a host cannot be confused with an HCA index, an
/// endpoint, a count or a loop counter.
///
/// It wraps a `usize` because it is exactly that: an index into the spec's `hosts` and
/// into every per-host table built from it, so [`HostId::index`] is free and cannot
/// fail, and no spec (whatever its size) has a host it cannot name. Narrower encodings
/// belong to the places that need them: the hub's wire format carries a `u32` and
/// converts at its boundary, and the trace hash keeps the low byte(s) it always had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub usize);

impl HostId {
    /// The index in the spec's `hosts` (and in every per-host table), for slice indexing.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0
    }
}

/// The index, as logs and messages have always printed a host.
impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FabricSpec {
    /// The host called `name`, so tests can speak of hosts by name.
    #[must_use]
    pub fn host_index(&self, name: &str) -> Option<HostId> {
        self.hosts.iter().position(|h| h.name == name).map(HostId)
    }

    /// Every host of the spec, in order. The iterator does not borrow the spec, so a
    /// loop over it may change whatever owns the spec (the simulator booting its hosts).
    pub fn host_ids(&self) -> impl Iterator<Item = HostId> + use<> {
        (0..self.hosts.len()).map(HostId)
    }

    /// The port GUID of port `port` (from 1) of HCA `hca` of host `host`: the node GUID
    /// plus the port number, a common vendor scheme that keeps port GUIDs distinct.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_guid(&self, host: HostId, hca: usize, port: u8) -> u64 {
        self.hosts[host.index()].hcas[hca]
            .guid
            .wrapping_add(u64::from(port))
    }

    /// The port's GID (index 0): the subnet prefix and the port GUID.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_gid(&self, host: HostId, hca: usize, port: u8) -> Gid {
        Gid::from_parts(self.subnet_prefix, self.port_guid(host, hca, port))
    }
}
