//! Devices, ports, endpoints and their addresses (docs/daemon.md §2, §3, §5, §6;
//! docs/ibacmp.md §9), with the dynamic changes the reference handles only by restart.

use super::{Device, Endpoint, LocalAddr, Port, SaAgent};
use crate::Engine;
use crate::addr::Address;
use crate::device::{DeviceDesc, PortAttrs, PortId};
use crate::io::{EndpointId, LocalIp, PortEvent};
use crate::log::{Level, log};
use acm_proto::client::AddrType;
use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;

impl Engine {
    pub(crate) fn device_added(&mut self, desc: DeviceDesc) {
        log!(self.core, Level::Basic, "acm_open_dev", "{}", desc.name);
        // Address-file lines for this device that can never apply (a port it lacks, a
        // pkey its port lacks) are said once, here, with their file and line.
        if let Some(file) = &self.core.config.addr_file {
            let pkeys: Vec<&[u16]> = desc.ports.iter().map(|p| p.pkeys.as_slice()).collect();
            for d in file.check_device(&desc.name, &pkeys) {
                log!(self.core, Level::Basic, "config", "{d}");
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
        self.core.devices.push(Device {
            id: desc.id,
            name: desc.name.clone(),
            guid: desc.guid,
            ports,
            opened_by: Vec::new(),
        });
        for (i, attrs) in desc.ports.into_iter().enumerate() {
            if attrs.usable() {
                self.port_up(
                    PortId {
                        device: desc.id,
                        port: (i + 1) as u8,
                    },
                    attrs,
                );
            }
        }
    }

    pub(crate) fn device_removed(&mut self, id: crate::DeviceId) {
        let Some(dev) = self.core.device(id) else {
            return;
        };
        let ports: Vec<u8> = dev
            .ports
            .iter()
            .filter(|p| p.active)
            .map(|p| p.num)
            .collect();
        let opened_by = dev.opened_by.clone();
        let name = dev.name.clone();
        log!(self.core, Level::Basic, "acm_dev_down", "{name} removed");
        for port in ports {
            self.port_down(PortId { device: id, port });
        }
        for idx in opened_by {
            self.with_provider(idx, |p, cx| p.close_device(cx, id));
        }
        self.core.devices.retain(|d| d.id != id);
    }

    pub(crate) fn port_event(&mut self, port: PortId, event: PortEvent) {
        let Some(p) = self.core.port(port) else {
            log!(
                self.core,
                Level::Basic,
                "acm_event_handler",
                "event for unknown port {}",
                port.port
            );
            return;
        };
        let active = p.active;
        let sm_change = matches!(event, PortEvent::SmChange(_));
        match event {
            PortEvent::Active(attrs) => {
                let came_up = !active && attrs.usable();
                if came_up {
                    self.port_up(port, attrs);
                }
                let pending = self
                    .core
                    .port_mut(port)
                    .is_some_and(|p| core::mem::take(&mut p.rereg_pending));
                // The reference delivers a reregister that came while the port was down
                // now. A port that comes up here gets fresh endpoints that join anyway,
                // so it is only delivered to a port that stayed up.
                if pending && !came_up {
                    self.client_reregister(port);
                }
            }
            PortEvent::Down => {
                if active {
                    self.port_down(port);
                }
            }
            PortEvent::ClientReregister => {
                if active {
                    self.client_reregister(port);
                } else if let Some(p) = self.core.port_mut(port) {
                    p.rereg_pending = true;
                }
            }
            PortEvent::LidChange(attrs)
            | PortEvent::SmChange(attrs)
            | PortEvent::GidChange(attrs)
            | PortEvent::PkeyChange(attrs) => {
                if !attrs.usable() {
                    if active {
                        self.port_down(port);
                    }
                } else if active {
                    self.port_changed(port, attrs, sm_change);
                } else {
                    self.port_up(port, attrs);
                }
            }
        }
    }

    fn client_reregister(&mut self, port: PortId) {
        log!(
            self.core,
            Level::Basic,
            "acm_event_handler",
            "client reregister on port {}",
            port.port
        );
        if let Some(idx) = self.core.port(port).and_then(|p| p.provider) {
            self.with_provider(idx, |p, cx| p.client_reregister(cx, port));
        }
        // The SM that asks for a reregister may have lost the subscriptions too.
        self.core.sm_subscribe(port, "client reregister");
    }

    /// Brings a port into service (docs/daemon.md §2, "Port up").
    fn port_up(&mut self, port: PortId, attrs: PortAttrs) {
        log!(
            self.core,
            Level::Basic,
            "acm_port_up",
            "port {} up, lid {}",
            port.port,
            attrs.lid
        );
        let prefix = attrs.gid0().subnet_prefix();
        // The reference ignores `provider` lines naming a provider it has not loaded;
        // a port left with none is unused.
        let loaded: Vec<&str> = self
            .core
            .provider_names
            .iter()
            .map(String::as_str)
            .collect();
        let idx = self
            .core
            .config
            .options
            .provider_for_loaded(prefix, &loaded)
            .and_then(|n| loaded.iter().position(|l| *l == n));
        let Some(idx) = idx else {
            log!(
                self.core,
                Level::Basic,
                "acm_assign_provider",
                "no provider for port {} (prefix {prefix:#x}); the port is unused",
                port.port
            );
            if let Some(p) = self.core.port_mut(port) {
                p.attrs = attrs;
            }
            return;
        };
        let Some(p) = self.core.port_mut(port) else {
            return;
        };
        p.attrs = attrs.clone();
        p.active = true;
        p.provider = Some(idx);
        let first_open = self.core.device_mut(port.device).is_some_and(|d| {
            !d.opened_by.contains(&idx) && {
                d.opened_by.push(idx);
                true
            }
        });
        if first_open && let Some(desc) = self.device_desc(port.device) {
            self.with_provider(idx, |p, cx| p.open_device(cx, &desc));
        }
        self.with_provider(idx, |p, cx| p.open_port(cx, port, &attrs));
        self.add_endpoints(port);
        self.core.sm_subscribe(port, "port up");
    }

    /// A description of a device as it stands, for providers.
    fn device_desc(&self, id: crate::DeviceId) -> Option<DeviceDesc> {
        let d = self.core.device(id)?;
        Some(DeviceDesc {
            id,
            name: d.name.clone(),
            guid: d.guid,
            ports: d.ports.iter().map(|p| p.attrs.clone()).collect(),
        })
    }

    /// Creates an endpoint for every partition in the pkey table that has none yet
    /// and gets at least one address.
    fn add_endpoints(&mut self, port: PortId) {
        let Some(p) = self.core.port(port) else {
            return;
        };
        let pkeys = p.attrs.pkeys.clone();
        for pkey in pkeys {
            if pkey & 0x7FFF == 0 || self.ep_for_partition(port, pkey).is_some() {
                continue;
            }
            self.create_endpoint(port, pkey);
        }
    }

    /// The endpoint on `port` for `pkey`'s partition (membership bit ignored).
    fn ep_for_partition(&self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let p = self.core.port(port)?;
        p.endpoints.iter().copied().find(|&ep| {
            self.core
                .endpoint(ep)
                .is_some_and(|e| (e.pkey | 0x8000) == (pkey | 0x8000))
        })
    }

    /// Creates the endpoint (port, pkey) if it gets an address (docs/daemon.md §5, §2
    /// step 6).
    fn create_endpoint(&mut self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let addrs = self.endpoint_addresses(port, pkey);
        if addrs.is_empty() {
            log!(
                self.core,
                Level::Config,
                "acm_ep_up",
                "no addresses for pkey {pkey:#06x}; no endpoint"
            );
            return None;
        }
        let provider = self.core.port(port)?.provider?;
        let id = EndpointId(self.core.endpoints.len() as u32);
        log!(
            self.core,
            Level::Basic,
            "acm_ep_up",
            "creating endpoint for pkey {pkey:#06x}"
        );
        self.core.endpoints.push(Some(Endpoint {
            port,
            pkey,
            addrs: addrs.clone(),
            provider,
        }));
        self.core.port_mut(port)?.endpoints.insert(0, id);
        self.with_provider(provider, |p, cx| p.open_endpoint(cx, id, port, pkey));
        for a in &addrs {
            self.with_provider(provider, |p, cx| p.add_address(cx, id, &a.addr));
        }
        Some(id)
    }

    /// The addresses a new endpoint gets: the host's IPs on its GIDs and partition, then
    /// the matching address-file lines.
    fn endpoint_addresses(&mut self, port: PortId, pkey: u16) -> Vec<LocalAddr> {
        let Some(p) = self.core.port(port) else {
            return Vec::new();
        };
        let gids = p.attrs.gids.clone();
        let default_pkey = p.attrs.pkeys.first().copied().unwrap_or(0xFFFF);
        let dev_name = self
            .core
            .device(port.device)
            .map(|d| d.name.clone())
            .unwrap_or_default();
        let mut addrs: Vec<LocalAddr> = self
            .core
            .system_ips_for(&gids, pkey)
            .iter()
            .map(|ip| LocalAddr {
                addr: Address::ip(ip.addr),
                display: super::Core::ip_display(ip),
                system: true,
            })
            .collect();
        let support_ips = self.core.config.options.support_ips_in_addr_cfg;
        // What is assigned so far, for the check of each line: a set, so that an
        // address file of many names costs its length, not its square.
        let mut assigned: BTreeSet<Address> = addrs.iter().map(|a| a.addr).collect();
        let Some(file) = self.core.config.addr_file.take() else {
            log!(
                self.core,
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
                    self.core,
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
                    self.core,
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
                self.core,
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
        self.core.config.addr_file = Some(file);
        addrs
    }

    /// Takes a port out of service: the provider fails what is in flight there and
    /// drops its state; the endpoints go away.
    fn port_down(&mut self, port: PortId) {
        log!(
            self.core,
            Level::Basic,
            "acm_port_down",
            "port {} down",
            port.port
        );
        let Some(p) = self.core.port_mut(port) else {
            return;
        };
        p.active = false;
        let provider = p.provider.take();
        let eps = core::mem::take(&mut p.endpoints);
        let _ = p.sa.drain();
        self.core.sm_forget(port);
        if let Some(idx) = provider {
            self.with_provider(idx, |p, cx| p.close_port(cx, port));
        }
        for ep in eps {
            if let Some(slot) = self.core.endpoints.get_mut(ep.0 as usize) {
                *slot = None;
            }
        }
    }

    /// LID, SM, GID or pkey changes on an active port. `sm_change`: the event was
    /// SM_CHANGE.
    fn port_changed(&mut self, port: PortId, attrs: PortAttrs, sm_change: bool) {
        let Some(p) = self.core.port_mut(port) else {
            return;
        };
        // A new SM knows none of the old one's subscriptions (docs/protocol/sa.md §9).
        let renew = sm_change || p.attrs.sm_lid != attrs.sm_lid;
        p.attrs = attrs.clone();
        let Some(idx) = p.provider else { return };
        log!(
            self.core,
            Level::Basic,
            "acm_port_change",
            "port {} changed: lid {} sm lid {}",
            port.port,
            attrs.lid,
            attrs.sm_lid
        );
        self.with_provider(idx, |p, cx| p.open_port(cx, port, &attrs));
        // Endpoints whose pkey left the table go away; new pkeys get endpoints.
        let eps: Vec<EndpointId> = self
            .core
            .port(port)
            .map(|p| p.endpoints.clone())
            .unwrap_or_default();
        for ep in eps {
            let gone = self
                .core
                .endpoint(ep)
                .is_some_and(|e| !attrs.pkeys.contains(&e.pkey));
            if gone {
                self.close_endpoint(ep);
            } else {
                self.reassign_addresses(port, ep);
            }
        }
        self.add_endpoints(port);
        if renew {
            self.core.sm_subscribe(port, "SM change");
        }
    }

    /// Brings every endpoint's addresses in line with the address file and options as
    /// they are now (after a reload): each kept endpoint gains and loses just the
    /// addresses that changed, an endpoint left without any closes, and a partition
    /// that now has an address gets its endpoint.
    pub(super) fn refresh_addresses(&mut self) {
        let ports: Vec<PortId> = self
            .core
            .active_ports()
            .map(|(d, p)| PortId {
                device: d.id,
                port: p.num,
            })
            .collect();
        for port in ports {
            let eps = self
                .core
                .port(port)
                .map(|p| p.endpoints.clone())
                .unwrap_or_default();
            for ep in eps {
                self.reassign_addresses(port, ep);
            }
            self.add_endpoints(port);
        }
    }

    /// Brings a kept endpoint's addresses in line with the port as it is now, as the
    /// reference's shutdown and port up would (docs/ibacmp.md §9): address-file lines for
    /// `default` follow the pkey now at index 0, and IPs follow the GIDs. An endpoint
    /// left without addresses is closed (docs/daemon.md §2, step 6).
    fn reassign_addresses(&mut self, port: PortId, ep: EndpointId) {
        let Some(pkey) = self.core.endpoint(ep).map(|e| e.pkey) else {
            return;
        };
        let want = self.endpoint_addresses(port, pkey);
        if want.is_empty() {
            self.close_endpoint(ep);
            return;
        }
        let Some(Some(e)) = self.core.endpoints.get_mut(ep.0 as usize) else {
            return;
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
        for a in &lost {
            self.with_provider(provider, |p, cx| p.remove_address(cx, ep, a));
        }
        for a in &gained {
            self.with_provider(provider, |p, cx| p.add_address(cx, ep, &a.addr));
        }
    }

    fn close_endpoint(&mut self, ep: EndpointId) {
        let Some(e) = self
            .core
            .endpoints
            .get_mut(ep.0 as usize)
            .and_then(Option::take)
        else {
            return;
        };
        log!(
            self.core,
            Level::Basic,
            "acm_ep_down",
            "endpoint for pkey {:#06x} closed",
            e.pkey
        );
        if let Some(p) = self.core.port_mut(e.port) {
            p.endpoints.retain(|&x| x != ep);
        }
        self.with_provider(e.provider, |p, cx| p.close_endpoint(cx, ep));
    }

    /// A host IP appeared (docs/daemon.md §6): add it to the endpoint of its port and
    /// partition, creating that endpoint if the pkey is in the table.
    pub(crate) fn local_ip_added(&mut self, ip: LocalIp) {
        if self.core.ip_known(&ip.addr) {
            return;
        }
        self.core.local_ips.push(ip.clone());
        let port = self
            .core
            .active_ports()
            .find(|(_, p)| super::Core::port_has_gid(p, &ip.gid))
            .map(|(d, p)| PortId {
                device: d.id,
                port: p.num,
            });
        let Some(port) = port else {
            log!(
                self.core,
                Level::Config,
                "acm_ipnl_handler",
                "{} is on no active port",
                ip.addr
            );
            return;
        };
        if let Some(ep) = self.ep_for_partition(port, ip.pkey) {
            let addr = Address::ip(ip.addr);
            let display = super::Core::ip_display(&ip);
            let Some(Some(e)) = self.core.endpoints.get_mut(ep.0 as usize) else {
                return;
            };
            if e.addrs.iter().any(|a| a.addr == addr) {
                return;
            }
            e.addrs.push(LocalAddr {
                addr,
                display,
                system: true,
            });
            let provider = e.provider;
            log!(
                self.core,
                Level::Config,
                "acm_ipnl_handler",
                "added {}",
                ip.addr
            );
            self.with_provider(provider, |p, cx| p.add_address(cx, ep, &addr));
        } else {
            let in_table = self.core.port(port).and_then(|p| {
                p.attrs
                    .pkeys
                    .iter()
                    .copied()
                    .find(|k| (k | 0x8000) == (ip.pkey | 0x8000))
            });
            match in_table {
                Some(pkey) => {
                    self.create_endpoint(port, pkey);
                }
                None => {
                    log!(
                        self.core,
                        Level::Basic,
                        "acm_ipnl_handler",
                        "no endpoint for {} (pkey {:#06x})",
                        ip.addr,
                        ip.pkey
                    );
                }
            }
        }
    }

    /// A host IP went away: it is no longer answered.
    pub(crate) fn local_ip_removed(&mut self, addr: IpAddr) {
        self.core.local_ips.retain(|i| i.addr != addr);
        let target = Address::ip(addr);
        let mut hits: Vec<(EndpointId, usize)> = Vec::new();
        for (i, slot) in self.core.endpoints.iter_mut().enumerate() {
            if let Some(e) = slot {
                let before = e.addrs.len();
                e.addrs.retain(|a| a.addr != target);
                if e.addrs.len() != before {
                    hits.push((EndpointId(i as u32), e.provider));
                }
            }
        }
        for (ep, provider) in hits {
            log!(
                self.core,
                Level::Config,
                "acm_ipnl_handler",
                "removed {addr}"
            );
            self.with_provider(provider, |p, cx| p.remove_address(cx, ep, &target));
        }
    }
}
