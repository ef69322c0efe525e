//! [`crate::Input::Reconfigure`]: a reload of the configuration files while the engine
//! runs (the table of what changes live is in [`crate::config::reload`]).
//!
//! Addresses are diffed, not rebuilt: an endpoint whose addresses stay the same is not
//! touched at all (its destination cache, its lookups in flight, its QP), so a reload
//! that adds one name to one endpoint costs the others nothing.

use super::level_of;
use crate::Engine;
use crate::addr::Address;
use crate::config::AddrFile;
use crate::config::reload::{self, Reconfig, Takes};
use crate::io::EndpointId;
use crate::log::{Level, log};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

impl Engine {
    pub(crate) fn reconfigure(&mut self, r: &Reconfig) {
        let running = &self.core.config.options;
        let changes = reload::option_changes(running, &r.options);
        let options = reload::apply_live(running, &r.options);
        let addresses_may_move = r.addr_file.is_some()
            || options.support_ips_in_addr_cfg != running.support_ips_in_addr_cfg;
        for c in changes.iter().filter(|c| c.takes == Takes::Restart) {
            log!(
                self.core,
                Level::Basic,
                "config",
                "{}: {} changed from {} to {}: needs a restart; {} stays until then",
                r.option_lines.place(c.name),
                c.name,
                c.old,
                c.new,
                c.old
            );
        }
        self.core.config.options = options;
        self.core.log_level = level_of(self.core.config.options.log_level);
        let options = self.core.config.options.clone();
        for i in 0..self.providers.len() {
            self.with_provider(i, |p, cx| p.reconfigure(cx, &options));
        }
        if let Some(file) = &r.addr_file {
            self.check_addr_file(file);
        }
        let (added, removed) = if addresses_may_move {
            let before = self.local_names();
            if let Some(file) = &r.addr_file {
                self.core.config.addr_file = Some(file.clone());
            }
            self.refresh_addresses();
            let after = self.local_names();
            self.log_address_moves(&before, &after)
        } else {
            (0, 0)
        };
        let mut summary = format!("reloaded: {added} addresses added, {removed} removed");
        for c in changes.iter().filter(|c| c.takes == Takes::Live) {
            summary.push_str(&format!(", {} {} -> {}", c.name, c.old, c.new));
        }
        let restart = changes.iter().filter(|c| c.takes == Takes::Restart).count();
        if restart > 0 {
            summary.push_str(&format!(", {restart} changed options need a restart"));
        }
        log!(self.core, Level::Basic, "config", "{summary}");
    }

    /// Logs the new address file's lines that can never give an endpoint an address
    /// (a device, port or pkey the host does not have), as the start does.
    fn check_addr_file(&mut self, file: &AddrFile) {
        let names: Vec<&str> = self.core.devices.iter().map(|d| d.name.as_str()).collect();
        let mut diags = file.unknown_devices(&names);
        for d in &self.core.devices {
            let pkeys: Vec<&[u16]> = d.ports.iter().map(|p| p.attrs.pkeys.as_slice()).collect();
            diags.extend(file.check_device(&d.name, &pkeys));
        }
        for line in crate::config::summarize(&diags).lines {
            log!(self.core, Level::Basic, "config", "{line}");
        }
    }

    /// Every open endpoint's addresses, with what EP_QUERY shows for each.
    fn local_names(&self) -> Vec<(EndpointId, Address, String)> {
        self.core
            .endpoints
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((EndpointId(i as u32), e.as_ref()?)))
            .flat_map(|(id, e)| e.addrs.iter().map(move |a| (id, a.addr, a.display.clone())))
            .collect()
    }

    /// Logs each address a reload added or removed; returns how many of each.
    fn log_address_moves(
        &mut self,
        before: &[(EndpointId, Address, String)],
        after: &[(EndpointId, Address, String)],
    ) -> (usize, usize) {
        // Sets, so that a reload of many names costs their number, not its square.
        let keys = |l: &[(EndpointId, Address, String)]| -> BTreeSet<(EndpointId, Address)> {
            l.iter().map(|(e, a, _)| (*e, *a)).collect()
        };
        let (had, has) = (keys(before), keys(after));
        let mut added = 0;
        for a in after.iter().filter(|a| !had.contains(&(a.0, a.1))) {
            added += 1;
            log!(
                self.core,
                Level::Config,
                "config",
                "reload: endpoint {} now answers to {}",
                a.0.0,
                a.2
            );
        }
        let mut removed = 0;
        for b in before.iter().filter(|b| !has.contains(&(b.0, b.1))) {
            removed += 1;
            log!(
                self.core,
                Level::Config,
                "config",
                "reload: endpoint {} no longer answers to {}",
                b.0.0,
                b.2
            );
        }
        (added, removed)
    }
}
