//! Topology changes at run time: what a [`Control`] does to the hub's fabric, and the
//! notices the hosts get.
//!
//! The rules are the simulator's ([`crate::Sim`]'s scripted changes): a port that goes
//! down leaves every multicast group and raises PORT_ERR; one that comes back raises
//! PORT_ACTIVE; LID, GID and pkey changes raise their events with the new attributes;
//! an SM failover forgets every group member and raises SM_CHANGE then
//! CLIENT_REREGISTER on every active port. Devices add what the simulator does not
//! have: a removed or dead HCA takes its ports down and its QPs and SA sends with it,
//! and comes back with its ports as they were.

use super::Hub;
use crate::fabric;
use crate::hub::wire::{Control, HubMsg, PortChange, PortName, TopologyEvent};
use crate::spec::HostId;
use crate::topology::PortRef;
use acm_engine::{DeviceId, EndpointId};

/// Why a change could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// The spec has no host of that name.
    #[error("no host {0:?} in the fabric")]
    Host(String),
    /// The host has no such HCA or port.
    #[error("host {host} has no HCA {hca} port {port}")]
    Port {
        /// The host.
        host: String,
        /// The HCA index.
        hca: u32,
        /// The port number (0 when the HCA itself is missing).
        port: u8,
    },
    /// No port has the LID the SM is to move to.
    #[error("no port has LID {0}")]
    Lid(u16),
}

/// What the hub remembers of a device that left: its ports' states before, and
/// whether it is dead (still listed) rather than removed.
#[derive(Debug, Clone, Default)]
pub(super) struct Gone {
    ups: Vec<bool>,
    fatal: bool,
}

impl Hub {
    /// Makes a change of the fabric now, and tells the attached hosts concerned.
    ///
    /// # Errors
    /// [`ChangeError`] when the change names a host, HCA, port or LID the fabric lacks;
    /// nothing changes then.
    pub fn apply(&mut self, change: &Control) -> Result<(), ChangeError> {
        match change {
            Control::PortDown(p) => {
                let r = self.port_named(p)?;
                if let Some(lp) = self.topo.port_mut(r) {
                    lp.up = false;
                }
                self.sa.port_down(r);
                self.notify_port(r, PortChange::Error);
            }
            Control::PortUp(p) => {
                let r = self.port_named(p)?;
                if let Some(lp) = self.topo.port_mut(r) {
                    lp.up = true;
                }
                self.notify_port(r, PortChange::Active);
            }
            Control::SetLid { port, lid, lmc } => {
                let r = self.port_named(port)?;
                if let Some(lp) = self.topo.port_mut(r) {
                    lp.lid = *lid;
                    lp.lmc = *lmc;
                }
                self.topo.reindex();
                self.notify_port(r, PortChange::LidChange);
            }
            Control::SetPkeys { port, pkeys } => {
                let r = self.port_named(port)?;
                if let Some(lp) = self.topo.port_mut(r) {
                    lp.pkeys.clone_from(pkeys);
                }
                self.notify_port(r, PortChange::PkeyChange);
            }
            Control::SetGid { port, gid } => {
                let r = self.port_named(port)?;
                if let Some(lp) = self.topo.port_mut(r) {
                    lp.gid = *gid;
                }
                self.topo.reindex();
                self.notify_port(r, PortChange::GidChange);
            }
            Control::SmMove { lid } => {
                if self.topo.by_lid(*lid).is_none() {
                    return Err(ChangeError::Lid(*lid));
                }
                self.sm_lid = *lid;
                self.sa.forget_all_members();
                for p in self.topo.ib_ports_up() {
                    self.notify_port(p, PortChange::SmChange);
                    self.notify_port(p, PortChange::ClientReregister);
                }
            }
            Control::ClientReregister(p) => {
                let r = self.port_named(p)?;
                self.notify_port(r, PortChange::ClientReregister);
            }
            Control::DeviceRemove { host, hca, fatal } => {
                let (h, c, ports) = self.device_named(host, *hca)?;
                self.device_gone(h, c, &ports, *fatal);
            }
            Control::DeviceAdd { host, hca } => {
                let (h, c, ports) = self.device_named(host, *hca)?;
                self.device_back(h, c, &ports);
            }
            Control::QpError(p) => {
                let r = self.port_named(p)?;
                let eps: Vec<EndpointId> = self.hosts[r.host.index()]
                    .qps
                    .iter()
                    .filter(|(_, q)| q.port == r)
                    .map(|(&ep, _)| ep)
                    .collect();
                for ep in eps {
                    self.send(r.host, &HubMsg::Topology(TopologyEvent::QpFatal { ep }));
                }
            }
        }
        self.log(format_args!("changed: {change:?}"));
        Ok(())
    }

    fn host_named(&self, name: &str) -> Result<HostId, ChangeError> {
        self.spec
            .host_index(name)
            .ok_or_else(|| ChangeError::Host(name.to_owned()))
    }

    fn port_named(&self, p: &PortName) -> Result<PortRef, ChangeError> {
        let h = self.host_named(&p.host)?;
        let r = PortRef::new(h, p.hca as usize, p.port);
        if self.topo.port(r).is_none() {
            return Err(ChangeError::Port {
                host: p.host.clone(),
                hca: p.hca,
                port: p.port,
            });
        }
        Ok(r)
    }

    /// The host, the HCA index and its ports.
    fn device_named(
        &self,
        host: &str,
        hca: u32,
    ) -> Result<(HostId, usize, Vec<PortRef>), ChangeError> {
        let h = self.host_named(host)?;
        let c = hca as usize;
        let ports: Vec<PortRef> = self
            .topo
            .ports()
            .map(|(p, _)| p)
            .filter(|p| p.host == h && p.hca == c)
            .collect();
        if ports.is_empty() {
            return Err(ChangeError::Port {
                host: host.to_owned(),
                hca,
                port: 0,
            });
        }
        Ok((h, c, ports))
    }

    /// Sends the port's host the event and the port's attributes now.
    fn notify_port(&mut self, p: PortRef, change: PortChange) {
        if self.gone.contains_key(&(p.host, p.hca)) {
            return;
        }
        if let Some(attrs) = self.topo.attrs(p, self.sm_lid, self.sm_sl) {
            let ev = TopologyEvent::Port {
                port: fabric::engine_port(p),
                change,
                attrs,
            };
            self.send(p.host, &HubMsg::Topology(ev));
        }
    }

    fn device_gone(&mut self, h: HostId, hca: usize, ports: &[PortRef], fatal: bool) {
        if let Some(g) = self.gone.get_mut(&(h, hca)) {
            // Already gone: a removal of a dead device unlists it.
            g.fatal &= fatal;
        } else {
            let mut ups = Vec::with_capacity(ports.len());
            for &p in ports {
                if let Some(lp) = self.topo.port_mut(p) {
                    ups.push(lp.up);
                    lp.up = false;
                }
                self.sa.port_down(p);
            }
            self.gone.insert((h, hca), Gone { ups, fatal });
        }
        // The HCA's QPs and umad agents die with it.
        let host = &mut self.hosts[h.index()];
        let eps: Vec<EndpointId> = host
            .qps
            .iter()
            .filter(|(_, q)| q.port.hca == hca)
            .map(|(&ep, _)| ep)
            .collect();
        for ep in eps {
            fabric::close_qp(&mut self.hosts[h.index()].qps, &mut self.mcast, h, ep);
        }
        self.hosts[h.index()].umad.retain(|_, u| u.port.hca != hca);
        let ev = TopologyEvent::DeviceGone {
            device: DeviceId(hca as u32),
            fatal,
        };
        self.send(h, &HubMsg::Topology(ev));
    }

    fn device_back(&mut self, h: HostId, hca: usize, ports: &[PortRef]) {
        let Some(g) = self.gone.remove(&(h, hca)) else {
            return;
        };
        for (&p, up) in ports.iter().zip(g.ups) {
            if let Some(lp) = self.topo.port_mut(p) {
                lp.up = up;
            }
        }
        if let Some(desc) = self
            .topo
            .devices(h, self.sm_lid, self.sm_sl)
            .into_iter()
            .nth(hca)
        {
            self.send(h, &HubMsg::Topology(TopologyEvent::DeviceBack(desc)));
        }
    }

    /// After ATTACHED: the host's devices that are gone now.
    pub(super) fn tell_gone(&mut self, h: HostId) {
        let gone: Vec<(usize, bool)> = self
            .gone
            .iter()
            .filter(|((host, _), _)| *host == h)
            .map(|(&(_, hca), g)| (hca, g.fatal))
            .collect();
        for (hca, fatal) in gone {
            let ev = TopologyEvent::DeviceGone {
                device: DeviceId(hca as u32),
                fatal,
            };
            self.send(h, &HubMsg::Topology(ev));
        }
    }

    /// Whether host `h`'s HCA `hca` is removed or dead.
    pub(super) fn hca_gone(&self, h: HostId, hca: usize) -> bool {
        self.gone.contains_key(&(h, hca))
    }
}
