//! How far apart two hosts are: switches crossed and one-way delivery time, from the
//! leaf each host hangs off and the `[link]` latencies.

use super::{FabricSpec, HostId};
use core::time::Duration;

impl FabricSpec {
    /// Switches between two hosts: 0 for the same host (loopback), 1 on the same leaf,
    /// 3 otherwise (leaf, spine, leaf).
    ///
    /// # Panics
    /// If either host does not exist.
    #[must_use]
    pub fn hops(&self, a: HostId, b: HostId) -> u8 {
        if a == b {
            0
        } else if self.hosts[a.index()].leaf == self.hosts[b.index()].leaf {
            1
        } else {
            3
        }
    }

    /// One-way delivery time between two hosts: `(hops + 1)` cables of `latency_us`
    /// plus `hops` switches of `switch_us` (loopback counts one cable).
    ///
    /// # Panics
    /// If either host does not exist.
    #[must_use]
    pub fn latency(&self, a: HostId, b: HostId) -> Duration {
        let hops = u64::from(self.hops(a, b));
        let us = (hops + 1)
            .saturating_mul(self.link.latency_us)
            .saturating_add(hops.saturating_mul(self.link.switch_us));
        Duration::from_micros(us)
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use core::time::Duration;

    #[test]
    fn hops_and_latency() {
        let mut g = FabricSpec::generate(
            5,
            &GenOptions {
                hosts_per_leaf: 2,
                ..GenOptions::default()
            },
        );
        g.link = LinkSpec {
            latency_us: 2,
            switch_us: 5,
        };
        assert_eq!(g.hops(HostId(0), HostId(0)), 0);
        assert_eq!(g.hops(HostId(0), HostId(1)), 1);
        assert_eq!(g.hops(HostId(1), HostId(2)), 3);
        assert_eq!(g.hops(HostId(4), HostId(0)), 3);
        assert_eq!(g.latency(HostId(0), HostId(0)), Duration::from_micros(2));
        assert_eq!(
            g.latency(HostId(0), HostId(1)),
            Duration::from_micros(2 * 2 + 5)
        );
        assert_eq!(
            g.latency(HostId(3), HostId(0)),
            Duration::from_micros(4 * 2 + 3 * 5)
        );
        assert_eq!(
            g.latency(HostId(3), HostId(0)),
            g.latency(HostId(0), HostId(3))
        );
    }
}
