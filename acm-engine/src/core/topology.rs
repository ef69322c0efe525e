//! Devices, ports, endpoints and their addresses (docs/daemon.md §2, §3, §5, §6;
//! docs/ibacmp.md §9), with the dynamic changes the reference handles only by restart.

use super::provider_call::{Plan, ProviderCall};
use super::{Core, Device, Endpoint, LocalAddr, Port, SaAgent};
use crate::addr::Address;
use crate::device::{DeviceDesc, PortAttrs, PortId};
use crate::io::{EndpointId, LocalIp, PortEvent};
use crate::log::{Level, log};
use acm_proto::client::AddrType;
use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;

impl Core {
    /// A device appeared: it is recorded, and each of its usable ports comes up in
    /// turn.
    pub(crate) fn device_added(&mut self, desc: DeviceDesc) -> Plan {
        log!(self, Level::Basic, "acm_open_dev", "{}", desc.name);
        // Address-file lines for this device that can never apply (a port it lacks, a
        // pkey its port lacks) are said once, here, with their file and line.
        if let Some(file) = &self.config.addr_file {
            let pkeys: Vec<&[u16]> = desc.ports.iter().map(|p| p.pkeys.as_slice()).collect();
            for d in file.check_device(&desc.name, &pkeys) {
                log!(self, Level::Basic, "config", "{d}");
            }
        }
        let ports = desc
            .ports
            .iter()
            .enumerate()
            .map(|(i, attrs)| Port {
                num: (i + 1) as u8,
                attrs: attrs.clone(),
                active: false,
                provider: None,
                endpoints: Vec::new(),
                rereg_pending: false,
                sa: SaAgent::default(),
                sm: Default::default(),
            })
            .collect();
        self.devices.push(Device {
            id: desc.id,
            name: desc.name.clone(),
            guid: desc.guid,
            ports,
            opened_by: Vec::new(),
        });
        let mut plan = Plan::new();
        for (i, attrs) in desc.ports.into_iter().enumerate() {
            if attrs.usable() {
                let port = PortId {
                    device: desc.id,
                    port: (i + 1) as u8,
                };
                plan.then(move |core| core.port_up(port, attrs));
            }
        }
        plan
    }

    /// A device went away: its active ports go down, then the providers that opened
    /// it close it, then it is forgotten.
    pub(crate) fn device_removed(&mut self, id: crate::DeviceId) -> Plan {
        let mut plan = Plan::new();
        let Some(dev) = self.device(id) else {
            return plan;
        };
        let ports: Vec<u8> = dev
            .ports
            .iter()
            .filter(|p| p.active)
            .map(|p| p.num)
            .collect();
        let opened_by = dev.opened_by.clone();
        let name = dev.name.clone();
        log!(self, Level::Basic, "acm_dev_down", "{name} removed");
        for port in ports {
            plan.then(move |core| core.port_down(PortId { device: id, port }));
        }
        for idx in opened_by {
            plan.call(idx, ProviderCall::CloseDevice(id));
        }
        plan.then_do(move |core| core.devices.retain(|d| d.id != id));
        plan
    }

    pub(crate) fn port_event(&mut self, port: PortId, event: PortEvent) -> Plan {
        let Some(p) = self.port(port) else {
            log!(
                self,
                Level::Basic,
                "acm_event_handler",
                "event for unknown port {}",
                port.port
            );
            return Plan::new();
        };
        let active = p.active;
        let sm_change = matches!(event, PortEvent::SmChange(_));
        match event {
            PortEvent::Active(attrs) => {
                let came_up = !active && attrs.usable();
                // The reference delivers a reregister that came while the port was down
                // now. A port that comes up here gets fresh endpoints that join anyway,
                // so it is only delivered to a port that stayed up.
                let pending = self
                    .port_mut(port)
                    .is_some_and(|p| core::mem::take(&mut p.rereg_pending));
                if came_up {
                    self.port_up(port, attrs)
                } else if pending {
                    self.client_reregister(port)
                } else {
                    Plan::new()
                }
            }
            PortEvent::Down if active => self.port_down(port),
            PortEvent::ClientReregister if active => self.client_reregister(port),
            PortEvent::ClientReregister => {
                if let Some(p) = self.port_mut(port) {
                    p.rereg_pending = true;
                }
                Plan::new()
            }
            PortEvent::LidChange(attrs)
            | PortEvent::SmChange(attrs)
            | PortEvent::GidChange(attrs)
            | PortEvent::PkeyChange(attrs) => {
                if attrs.usable() && active {
                    self.port_changed(port, attrs, sm_change)
                } else if attrs.usable() {
                    self.port_up(port, attrs)
                } else if active {
                    self.port_down(port)
                } else {
                    Plan::new()
                }
            }
            PortEvent::Down => Plan::new(),
        }
    }

    fn client_reregister(&mut self, port: PortId) -> Plan {
        log!(
            self,
            Level::Basic,
            "acm_event_handler",
            "client reregister on port {}",
            port.port
        );
        let mut plan = Plan::new();
        if let Some(idx) = self.port(port).and_then(|p| p.provider) {
            plan.call(idx, ProviderCall::ClientReregister(port));
        }
        // The SM that asks for a reregister may have lost the subscriptions too.
        plan.then_do(move |core| core.sm_subscribe(port, "client reregister"));
        plan
    }

    /// Brings a port into service (docs/daemon.md §2, "Port up").
    fn port_up(&mut self, port: PortId, attrs: PortAttrs) -> Plan {
        log!(
            self,
            Level::Basic,
            "acm_port_up",
            "port {} up, lid {}",
            port.port,
            attrs.lid
        );
        let prefix = attrs.gid0().subnet_prefix();
        // The reference ignores `provider` lines naming a provider it has not loaded;
        // a port left with none is unused.
        let loaded: Vec<&str> = self.provider_names.iter().map(String::as_str).collect();
        let idx = self
            .config
            .options
            .provider_for_loaded(prefix, &loaded)
            .and_then(|n| loaded.iter().position(|l| *l == n));
        let Some(idx) = idx else {
            log!(
                self,
                Level::Basic,
                "acm_assign_provider",
                "no provider for port {} (prefix {prefix:#x}); the port is unused",
                port.port
            );
            if let Some(p) = self.port_mut(port) {
                p.attrs = attrs;
            }
            return Plan::new();
        };
        let Some(p) = self.port_mut(port) else {
            return Plan::new();
        };
        p.attrs = attrs.clone();
        p.active = true;
        p.provider = Some(idx);
        let first_open = self.device_mut(port.device).is_some_and(|d| {
            !d.opened_by.contains(&idx) && {
                d.opened_by.push(idx);
                true
            }
        });
        let mut plan = Plan::new();
        if first_open && let Some(desc) = self.device_desc(port.device) {
            plan.call(idx, ProviderCall::OpenDevice(desc));
        }
        plan.call(idx, ProviderCall::OpenPort { port, attrs });
        plan.then(move |core| core.add_endpoints(port));
        plan.then_do(move |core| core.sm_subscribe(port, "port up"));
        plan
    }

    /// A description of a device as it stands, for providers.
    fn device_desc(&self, id: crate::DeviceId) -> Option<DeviceDesc> {
        let d = self.device(id)?;
        Some(DeviceDesc {
            id,
            name: d.name.clone(),
            guid: d.guid,
            ports: d.ports.iter().map(|p| p.attrs.clone()).collect(),
        })
    }

    /// Creates an endpoint for every partition in the pkey table that has none yet
    /// and gets at least one address.
    fn add_endpoints(&mut self, port: PortId) -> Plan {
        let mut plan = Plan::new();
        let Some(p) = self.port(port) else {
            return plan;
        };
        // One partition after the other: an endpoint made for a pkey serves the same
        // partition's other membership.
        for &pkey in p.attrs.pkeys.iter().filter(|&&k| k & 0x7FFF != 0) {
            plan.then(move |core| {
                if core.ep_for_partition(port, pkey).is_some() {
                    return Plan::new();
                }
                core.create_endpoint(port, pkey)
            });
        }
        plan
    }

    /// The endpoint on `port` for `pkey`'s partition (membership bit ignored).
    fn ep_for_partition(&self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let p = self.port(port)?;
        p.endpoints.iter().copied().find(|&ep| {
            self.endpoint(ep)
                .is_some_and(|e| (e.pkey | 0x8000) == (pkey | 0x8000))
        })
    }

    /// Creates the endpoint (port, pkey) if it gets an address (docs/daemon.md §5, §2
    /// step 6).
    fn create_endpoint(&mut self, port: PortId, pkey: u16) -> Plan {
        let mut plan = Plan::new();
        let addrs = self.endpoint_addresses(port, pkey);
        if addrs.is_empty() {
            log!(
                self,
                Level::Config,
                "acm_ep_up",
                "no addresses for pkey {pkey:#06x}; no endpoint"
            );
            return plan;
        }
        let Some(provider) = self.port(port).and_then(|p| p.provider) else {
            return plan;
        };
        let id = EndpointId(self.endpoints.len() as u32);
        log!(
            self,
            Level::Basic,
            "acm_ep_up",
            "creating endpoint for pkey {pkey:#06x}"
        );
        plan.call(provider, ProviderCall::OpenEndpoint { ep: id, port, pkey });
        for a in &addrs {
            let addr = a.addr;
            plan.call(provider, ProviderCall::AddAddress { ep: id, addr });
        }
        self.endpoints.push(Some(Endpoint {
            port,
            pkey,
            addrs,
            provider,
        }));
        if let Some(p) = self.port_mut(port) {
            p.endpoints.insert(0, id);
        }
        plan
    }

    /// The addresses a new endpoint gets: the host's IPs on its GIDs and partition, then
    /// the matching address-file lines.
    fn endpoint_addresses(&mut self, port: PortId, pkey: u16) -> Vec<LocalAddr> {
        let Some(p) = self.port(port) else {
            return Vec::new();
        };
        let gids = p.attrs.gids.clone();
        let default_pkey = p.attrs.pkeys.first().copied().unwrap_or(0xFFFF);
        let dev_name = self
            .device(port.device)
            .map(|d| d.name.clone())
            .unwrap_or_default();
        let mut addrs: Vec<LocalAddr> = self
            .system_ips_for(&gids, pkey)
            .iter()
            .map(|ip| LocalAddr {
                addr: Address::ip(ip.addr),
                display: Self::ip_display(ip),
                system: true,
            })
            .collect();
        let support_ips = self.config.options.support_ips_in_addr_cfg;
        // What is assigned so far, for the check of each line: a set, so that an
        // address file of many names costs its length, not its square.
        let mut assigned: BTreeSet<Address> = addrs.iter().map(|a| a.addr).collect();
        let Some(file) = self.config.addr_file.take() else {
            log!(
                self,
                Level::Basic,
                "acm_assign_ep_names",
                "address file not found"
            );
            return addrs;
        };
        for line in &file.lines {
            if !line.matches(&dev_name, port.port, pkey, default_pkey) {
                continue;
            }
            let is_ip = matches!(line.address.ty, AddrType::IP | AddrType::IP6);
            if is_ip && !support_ips {
                log!(
                    self,
                    Level::Basic,
                    "acm_assign_ep_names",
                    "{}:{}: IP address {} rejected (support_ips_in_addr_cfg is 0)",
                    file.file,
                    line.line,
                    line.text
                );
                continue;
            }
            if !assigned.insert(line.address) {
                // The reference stops reading the file here
                // (docs/reference-quirks.md §13); skip just this line.
                log!(
                    self,
                    Level::Basic,
                    "acm_assign_ep_names",
                    "{}:{}: {} is already assigned; line ignored",
                    file.file,
                    line.line,
                    line.text
                );
                continue;
            }
            log!(
                self,
                Level::Config,
                "acm_assign_ep_names",
                "assigning {}",
                line.text
            );
            addrs.push(LocalAddr {
                addr: line.address,
                display: line.text.clone(),
                system: false,
            });
        }
        self.config.addr_file = Some(file);
        addrs
    }

    /// Takes a port out of service: the provider fails what is in flight there and
    /// drops its state; the endpoints go away.
    fn port_down(&mut self, port: PortId) -> Plan {
        log!(
            self,
            Level::Basic,
            "acm_port_down",
            "port {} down",
            port.port
        );
        let mut plan = Plan::new();
        let Some(p) = self.port_mut(port) else {
            return plan;
        };
        p.active = false;
        let provider = p.provider.take();
        let eps = core::mem::take(&mut p.endpoints);
        let _ = p.sa.drain();
        self.sm_forget(port);
        if let Some(idx) = provider {
            plan.call(idx, ProviderCall::ClosePort(port));
        }
        plan.then_do(move |core| {
            for ep in eps {
                if let Some(slot) = core.endpoints.get_mut(ep.0 as usize) {
                    *slot = None;
                }
            }
        });
        plan
    }

    /// LID, SM, GID or pkey changes on an active port. `sm_change`: the event was
    /// SM_CHANGE.
    fn port_changed(&mut self, port: PortId, attrs: PortAttrs, sm_change: bool) -> Plan {
        let mut plan = Plan::new();
        let Some(p) = self.port_mut(port) else {
            return plan;
        };
        // A new SM knows none of the old one's subscriptions (docs/protocol/sa.md §9).
        let renew = sm_change || p.attrs.sm_lid != attrs.sm_lid;
        p.attrs = attrs.clone();
        let Some(idx) = p.provider else { return plan };
        log!(
            self,
            Level::Basic,
            "acm_port_change",
            "port {} changed: lid {} sm lid {}",
            port.port,
            attrs.lid,
            attrs.sm_lid
        );
        // Endpoints whose pkey left the table go away; new pkeys get endpoints.
        let eps: Vec<EndpointId> = self
            .port(port)
            .map(|p| p.endpoints.clone())
            .unwrap_or_default();
        let gone: Vec<bool> = eps
            .iter()
            .map(|&ep| {
                self.endpoint(ep)
                    .is_some_and(|e| !attrs.pkeys.contains(&e.pkey))
            })
            .collect();
        plan.call(idx, ProviderCall::OpenPort { port, attrs });
        for (ep, gone) in eps.into_iter().zip(gone) {
            if gone {
                plan.then(move |core| core.close_endpoint(ep));
            } else {
                plan.then(move |core| core.reassign_addresses(port, ep));
            }
        }
        plan.then(move |core| core.add_endpoints(port));
        if renew {
            plan.then_do(move |core| core.sm_subscribe(port, "SM change"));
        }
        plan
    }

    /// Brings every endpoint's addresses in line with the address file and options as
    /// they are now (after a reload): each kept endpoint gains and loses just the
    /// addresses that changed, an endpoint left without any closes, and a partition
    /// that now has an address gets its endpoint.
    pub(super) fn refresh_addresses(&mut self) -> Plan {
        let mut plan = Plan::new();
        let ports: Vec<PortId> = self
            .active_ports()
            .map(|(d, p)| PortId {
                device: d.id,
                port: p.num,
            })
            .collect();
        for port in ports {
            let eps = self
                .port(port)
                .map(|p| p.endpoints.clone())
                .unwrap_or_default();
            for ep in eps {
                plan.then(move |core| core.reassign_addresses(port, ep));
            }
            plan.then(move |core| core.add_endpoints(port));
        }
        plan
    }

    /// Brings a kept endpoint's addresses in line with the port as it is now, as the
    /// reference's shutdown and port up would (docs/ibacmp.md §9): address-file lines for
    /// `default` follow the pkey now at index 0, and IPs follow the GIDs. An endpoint
    /// left without addresses is closed (docs/daemon.md §2, step 6).
    fn reassign_addresses(&mut self, port: PortId, ep: EndpointId) -> Plan {
        let mut plan = Plan::new();
        let Some(pkey) = self.endpoint(ep).map(|e| e.pkey) else {
            return plan;
        };
        let want = self.endpoint_addresses(port, pkey);
        if want.is_empty() {
            return self.close_endpoint(ep);
        }
        let Some(Some(e)) = self.endpoints.get_mut(ep.0 as usize) else {
            return plan;
        };
        let provider = e.provider;
        // Sets, so that a reload of many names costs their number, not its square.
        let wanted: BTreeSet<Address> = want.iter().map(|w| w.addr).collect();
        let had: BTreeSet<Address> = e.addrs.iter().map(|a| a.addr).collect();
        let lost: Vec<Address> = e
            .addrs
            .iter()
            .filter(|a| !wanted.contains(&a.addr))
            .map(|a| a.addr)
            .collect();
        let gained: Vec<LocalAddr> = want
            .into_iter()
            .filter(|w| !had.contains(&w.addr))
            .collect();
        e.addrs.retain(|a| wanted.contains(&a.addr));
        e.addrs.extend(gained.iter().cloned());
        for addr in lost {
            plan.call(provider, ProviderCall::RemoveAddress { ep, addr });
        }
        for a in &gained {
            let addr = a.addr;
            plan.call(provider, ProviderCall::AddAddress { ep, addr });
        }
        plan
    }

    fn close_endpoint(&mut self, ep: EndpointId) -> Plan {
        let mut plan = Plan::new();
        let Some(e) = self.endpoints.get_mut(ep.0 as usize).and_then(Option::take) else {
            return plan;
        };
        log!(
            self,
            Level::Basic,
            "acm_ep_down",
            "endpoint for pkey {:#06x} closed",
            e.pkey
        );
        if let Some(p) = self.port_mut(e.port) {
            p.endpoints.retain(|&x| x != ep);
        }
        plan.call(e.provider, ProviderCall::CloseEndpoint(ep));
        plan
    }

    /// A host IP appeared (docs/daemon.md §6): add it to the endpoint of its port and
    /// partition, creating that endpoint if the pkey is in the table.
    pub(crate) fn local_ip_added(&mut self, ip: LocalIp) -> Plan {
        let mut plan = Plan::new();
        if self.ip_known(&ip.addr) {
            return plan;
        }
        self.local_ips.push(ip.clone());
        let port = self
            .active_ports()
            .find(|(_, p)| Self::port_has_gid(p, &ip.gid))
            .map(|(d, p)| PortId {
                device: d.id,
                port: p.num,
            });
        let Some(port) = port else {
            log!(
                self,
                Level::Config,
                "acm_ipnl_handler",
                "{} is on no active port",
                ip.addr
            );
            return plan;
        };
        if let Some(ep) = self.ep_for_partition(port, ip.pkey) {
            let addr = Address::ip(ip.addr);
            let display = Self::ip_display(&ip);
            let Some(Some(e)) = self.endpoints.get_mut(ep.0 as usize) else {
                return plan;
            };
            if e.addrs.iter().any(|a| a.addr == addr) {
                return plan;
            }
            e.addrs.push(LocalAddr {
                addr,
                display,
                system: true,
            });
            let provider = e.provider;
            log!(self, Level::Config, "acm_ipnl_handler", "added {}", ip.addr);
            plan.call(provider, ProviderCall::AddAddress { ep, addr });
        } else {
            let in_table = self.port(port).and_then(|p| {
                p.attrs
                    .pkeys
                    .iter()
                    .copied()
                    .find(|k| (k | 0x8000) == (ip.pkey | 0x8000))
            });
            match in_table {
                Some(pkey) => plan = self.create_endpoint(port, pkey),
                None => {
                    log!(
                        self,
                        Level::Basic,
                        "acm_ipnl_handler",
                        "no endpoint for {} (pkey {:#06x})",
                        ip.addr,
                        ip.pkey
                    );
                }
            }
        }
        plan
    }

    /// A host IP went away: it is no longer answered.
    pub(crate) fn local_ip_removed(&mut self, addr: IpAddr) -> Plan {
        self.local_ips.retain(|i| i.addr != addr);
        let target = Address::ip(addr);
        let mut hits: Vec<(EndpointId, usize)> = Vec::new();
        for (i, slot) in self.endpoints.iter_mut().enumerate() {
            if let Some(e) = slot {
                let before = e.addrs.len();
                e.addrs.retain(|a| a.addr != target);
                if e.addrs.len() != before {
                    hits.push((EndpointId(i as u32), e.provider));
                }
            }
        }
        let mut plan = Plan::new();
        for (ep, provider) in hits {
            plan.then(move |core| {
                log!(core, Level::Config, "acm_ipnl_handler", "removed {addr}");
                let mut plan = Plan::new();
                plan.call(provider, ProviderCall::RemoveAddress { ep, addr: target });
                plan
            });
        }
        plan
    }
}
