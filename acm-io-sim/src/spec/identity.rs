//! Identities derived from a spec: hosts by name, port GUIDs and GIDs.

use super::FabricSpec;
use acm_proto::Gid;

impl FabricSpec {
    /// The index of the host called `name`, so tests can speak of hosts by name.
    #[must_use]
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// The port GUID of port `port` (from 1) of HCA `hca` of host `host`: the node GUID
    /// plus the port number, a common vendor scheme that keeps port GUIDs distinct.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_guid(&self, host: usize, hca: usize, port: u8) -> u64 {
        self.hosts[host].hcas[hca]
            .guid
            .wrapping_add(u64::from(port))
    }

    /// The port's GID (index 0): the subnet prefix and the port GUID.
    ///
    /// # Panics
    /// If the host or HCA does not exist.
    #[must_use]
    pub fn port_gid(&self, host: usize, hca: usize, port: u8) -> Gid {
        Gid::from_parts(self.subnet_prefix, self.port_guid(host, hca, port))
    }
}
