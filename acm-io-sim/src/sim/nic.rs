//! What a MAD costs a host's adapter and CPU (`[nic]` of the fabric file): a port's
//! sends leave one after another, `send_ns` apart, and a host's received UD MADs reach
//! its engine one after another, `recv_ns` apart. With both at 0 (the default) nothing
//! here delays anything and the simulator behaves as it did before.

use super::Sim;
use crate::spec::HostId;
use crate::topology::PortRef;
use acm_engine::Instant;
use std::time::Duration;

impl Sim {
    /// How long after now a MAD that port `port` of host `h` sends now is off the wire,
    /// its port then busy until that instant. Zero when sends cost nothing.
    pub(crate) fn tx_depart(&mut self, h: HostId, port: PortRef) -> Duration {
        let cost = self.spec.nic.send_ns;
        if cost == 0 {
            return Duration::ZERO;
        }
        let now = self.now;
        let free = self.hosts[h.index()].tx_free.entry(port).or_insert(now);
        let end = (*free).max(now) + Duration::from_nanos(cost);
        *free = end;
        end.saturating_duration_since(now)
    }

    /// A UD MAD reaches host `h` now: `None` when receiving costs nothing, else the
    /// instant its engine has it, once the host has taken in the MADs before it and
    /// this one (`recv_ns` each, one after another).
    pub(crate) fn rx_slot(&mut self, h: HostId) -> Option<Instant> {
        let cost = self.spec.nic.recv_ns;
        if cost == 0 {
            return None;
        }
        let now = self.now;
        let host = &mut self.hosts[h.index()];
        let done = host.rx_free.max(now) + Duration::from_nanos(cost);
        host.rx_free = done;
        Some(done)
    }
}
