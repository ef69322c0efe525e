//! [`crate::Input::Reconfigure`]: a reload of the configuration files while the engine
//! runs (the table of what changes live is in [`crate::config::reload`]).
//!
//! Addresses are diffed, not rebuilt: an endpoint whose addresses stay the same is not
//! touched at all (its destination cache, its lookups in flight, its QP), so a reload
//! that adds one name to one endpoint costs the others nothing.

use super::provider_call::{Plan, ProviderCall};
use super::{Core, level_of};
use crate::addr::Address;
use crate::config::AddrFile;
use crate::config::reload::{self, OptionChange, Reconfig, Takes};
use crate::io::EndpointId;
use crate::log::{Level, log};
use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// An endpoint's address, with what EP_QUERY shows for it.
type LocalName = (EndpointId, Address, String);

impl Core {
    /// Takes the reloaded files: the providers get the new options, then the
    /// endpoints' addresses follow the address file, then the reload is summed up.
    pub(crate) fn reconfigure(&mut self, r: &Reconfig) -> Plan {
        let running = &self.config.options;
        let changes = reload::option_changes(running, &r.options);
        let options = reload::apply_live(running, &r.options);
        let addresses_may_move = r.addr_file.is_some()
            || options.support_ips_in_addr_cfg != running.support_ips_in_addr_cfg;
        for c in changes.iter().filter(|c| c.takes == Takes::Restart) {
            log!(
                self,
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
        self.config.options = options;
        self.log_level = level_of(self.config.options.log_level);
        let mut plan = Plan::new();
        for i in 0..self.provider_names.len() {
            let options = Box::new(self.config.options.clone());
            plan.call(i, ProviderCall::Reconfigure(options));
        }
        let addr_file = r.addr_file.clone();
        plan.then(move |core| core.reload_addresses(addr_file, addresses_may_move, changes));
        plan
    }

    /// The second half of a reload, once the providers have the new options: the new
    /// address file checked, and the endpoints' addresses brought in line with it.
    fn reload_addresses(
        &mut self,
        addr_file: Option<AddrFile>,
        addresses_may_move: bool,
        changes: Vec<OptionChange>,
    ) -> Plan {
        if let Some(file) = &addr_file {
            self.check_addr_file(file);
        }
        if !addresses_may_move {
            self.log_reload(&changes, (0, 0));
            return Plan::new();
        }
        let before = self.local_names();
        if addr_file.is_some() {
            self.config.addr_file = addr_file;
        }
        let mut plan = self.refresh_addresses();
        plan.then_do(move |core| {
            let after = core.local_names();
            let moves = core.log_address_moves(&before, &after);
            core.log_reload(&changes, moves);
        });
        plan
    }

    /// The reload's summary line: addresses added and removed, options changed.
    fn log_reload(&mut self, changes: &[OptionChange], (added, removed): (usize, usize)) {
        let mut summary = format!("reloaded: {added} addresses added, {removed} removed");
        for c in changes.iter().filter(|c| c.takes == Takes::Live) {
            summary.push_str(&format!(", {} {} -> {}", c.name, c.old, c.new));
        }
        let restart = changes.iter().filter(|c| c.takes == Takes::Restart).count();
        if restart > 0 {
            summary.push_str(&format!(", {restart} changed options need a restart"));
        }
        log!(self, Level::Basic, "config", "{summary}");
    }

    /// Logs the new address file's lines that can never give an endpoint an address
    /// (a device, port or pkey the host does not have), as the start does.
    fn check_addr_file(&mut self, file: &AddrFile) {
        let names: Vec<&str> = self.devices.iter().map(|d| d.name.as_str()).collect();
        let mut diags = file.unknown_devices(&names);
        for d in &self.devices {
            let pkeys: Vec<&[u16]> = d.ports.iter().map(|p| p.attrs.pkeys.as_slice()).collect();
            diags.extend(file.check_device(&d.name, &pkeys));
        }
        for line in crate::config::summarize(&diags).lines {
            log!(self, Level::Basic, "config", "{line}");
        }
    }

    /// Every open endpoint's addresses, with what EP_QUERY shows for each.
    fn local_names(&self) -> Vec<LocalName> {
        self.endpoints
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((EndpointId(i as u32), e.as_ref()?)))
            .flat_map(|(id, e)| e.addrs.iter().map(move |a| (id, a.addr, a.display.clone())))
            .collect()
    }

    /// Logs each address a reload added or removed; returns how many of each.
    fn log_address_moves(&mut self, before: &[LocalName], after: &[LocalName]) -> (usize, usize) {
        // Sets, so that a reload of many names costs their number, not its square.
        let keys = |l: &[LocalName]| -> BTreeSet<(EndpointId, Address)> {
            l.iter().map(|(e, a, _)| (*e, *a)).collect()
        };
        let (had, has) = (keys(before), keys(after));
        let mut added = 0;
        for a in after.iter().filter(|a| !had.contains(&(a.0, a.1))) {
            added += 1;
            log!(
                self,
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
                self,
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
