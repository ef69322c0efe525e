//! What a reload (the daemon's SIGHUP) may change in a running engine, decided per
//! option (docs/daemon.md §14).
//!
//! A reload re-reads the options file and the address file. Addresses come and go at
//! run time anyway (an IPoIB address appears, a pkey leaves the table), so address-file
//! lines are always applied. An option is applied at run time only when the engine
//! reads it afresh for each thing it does; an option that shaped something built once
//! (a queue pair's size, the multicast group joined, the socket listened on, the
//! providers loaded) would leave the running daemon half old, half new, so it keeps its
//! running value and the reload says that it needs a restart, naming the file and line.
//!
//! | option | at a reload | why |
//! |---|---|---|
//! | `log_level` | applied | read at every log line |
//! | `timeout`, `retries` | applied | read at every SA query and ACM request sent |
//! | `sa_depth` | applied | read at every SA MAD queued and answered |
//! | `sa_busy_retries`, `sa_backoff_ms` | applied | read at every BUSY answer |
//! | `sa_timeout_max` | applied | read at every SA MAD sent |
//! | `sa_adaptive_depth` | applied | read at every SA MAD queued and answered; turned off, the port's window and any pause stop counting at once |
//! | `acm_timeout_max` | applied | read at every ACM request sent |
//! | `addr_timeout`, `route_timeout` | applied to entries stored from then on | read when an entry is stored; stored entries keep their expiry |
//! | `max_pending_per_client`, `max_background_resolves` | applied | read at every request |
//! | `max_dest_cache_bytes` | applied | read at every destination cached; a lower bound evicts the idle entries over it at once |
//! | `support_ips_in_addr_cfg` | applied | the address file's IP lines are re-assigned with it |
//! | `resolve_depth`, `send_depth`, `recv_depth` | restart | they size each endpoint's queue pair |
//! | `route_prot`, `loopback_prot`, `min_mtu`, `min_rate` | restart | they choose the multicast group joined and the entries made when an endpoint opens |
//! | `addr_prot` | applied to lookups started from then on | read when a destination's address lookup starts; a lookup under way finishes with the list it started with |
//! | `route_preload`, `route_data_file`, `addr_preload`, `addr_data_file` | restart | preloads run once, when an endpoint opens |
//! | `kernel_timeout` | restart | sent to the kernel once, at start |
//! | `log_file`, `lock_file`, `server_mode`, `server_port`, `acme_plus_kernel_only` | restart | the log, lock file and listener are opened once |
//! | `umad_debug_level`, `provider_lib_path`, `builtin_provider`, `provider` lines | restart | the providers and umad are set up once |
//! | `provider_timeout` | restart | read when the provider libraries are wrapped, at start |
//! | `sm_events` | restart | the SA subscriptions are made when a port comes up, and the umad agent registered for Reports once |
//!
//! The daemon's own options ([`super::DAEMON_OPTIONS`]) are the daemon's to judge.
//!
//! [`option_changes`] names every field of [`Options`], so that a new option cannot be
//! added without deciding here what a reload does with it.

use super::lex::{self, Scanner};
use super::{AddrFile, Options};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// What a reload hands the engine ([`crate::Input::Reconfigure`]).
#[derive(Debug, Clone, Default)]
pub struct Reconfig {
    /// The options file as read now (the driver's command-line overrides applied).
    pub options: Options,
    /// Where each option was last set in that file, for the lines the engine logs
    /// about options that need a restart.
    pub option_lines: OptionLines,
    /// The address file as read now; `None` keeps the running one (the file is not
    /// reloadable, or is missing and the running addresses stay).
    pub addr_file: Option<AddrFile>,
}

/// When a changed option takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Takes {
    /// At once: the engine reads it afresh each time.
    Live,
    /// Only after a restart: the running value stays.
    Restart,
}

/// One option whose new value differs from the running one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionChange {
    /// The option's name in the options file.
    pub name: &'static str,
    /// The running value, as text.
    pub old: String,
    /// The file's value, as text.
    pub new: String,
    /// Whether a reload applies it.
    pub takes: Takes,
}

/// The options that differ between `running` and `new`, in the file's documented order
/// (docs/daemon.md §7). [`Options::daemon_options`] are left to the daemon.
#[must_use]
pub fn option_changes(running: &Options, new: &Options) -> Vec<OptionChange> {
    // Destructured so that a new field of `Options` fails to compile here until it is
    // given a row (see the module's table).
    let Options {
        log_file,
        log_level,
        umad_debug_level,
        lock_file,
        server_port,
        server_mode,
        acme_plus_kernel_only,
        provider_lib_path,
        builtin_provider,
        provider_timeout,
        support_ips_in_addr_cfg,
        timeout_ms,
        retries,
        sa_depth,
        sa_busy_retries,
        sa_backoff_ms,
        sa_timeout_max_ms,
        sa_adaptive_depth,
        acm_timeout_max_ms,
        providers,
        addr_prot,
        addr_timeout,
        route_prot,
        route_timeout,
        loopback_prot,
        resolve_depth,
        max_pending_per_client,
        max_background_resolves,
        max_dest_cache_bytes,
        kernel_timeout,
        send_depth,
        recv_depth,
        min_mtu,
        min_rate,
        route_preload,
        route_data_file,
        addr_preload,
        addr_data_file,
        sm_events,
        daemon_options: _,
    } = new;
    let mut out = Vec::new();
    let mut note = |name: &'static str, old: String, new: String, takes: Takes| {
        if old != new {
            out.push(OptionChange {
                name,
                old,
                new,
                takes,
            });
        }
    };
    use Takes::{Live, Restart};
    note("log_file", text(&running.log_file), text(log_file), Restart);
    note("log_level", num(running.log_level), num(log_level), Live);
    note(
        "umad_debug_level",
        num(running.umad_debug_level),
        num(umad_debug_level),
        Restart,
    );
    note(
        "lock_file",
        text(&running.lock_file),
        text(lock_file),
        Restart,
    );
    note(
        "server_port",
        num(running.server_port),
        num(server_port),
        Restart,
    );
    note(
        "server_mode",
        debug(&running.server_mode),
        debug(server_mode),
        Restart,
    );
    note(
        "acme_plus_kernel_only",
        yes_no(running.acme_plus_kernel_only),
        yes_no(*acme_plus_kernel_only),
        Restart,
    );
    note(
        "provider_lib_path",
        text(&running.provider_lib_path),
        text(provider_lib_path),
        Restart,
    );
    note(
        "builtin_provider",
        yes_no(running.builtin_provider),
        yes_no(*builtin_provider),
        Restart,
    );
    note(
        "provider_timeout",
        num(running.provider_timeout),
        num(provider_timeout),
        Restart,
    );
    note(
        "support_ips_in_addr_cfg",
        num(u8::from(running.support_ips_in_addr_cfg)),
        num(u8::from(*support_ips_in_addr_cfg)),
        Live,
    );
    note("timeout", num(running.timeout_ms), num(timeout_ms), Live);
    note("retries", num(running.retries), num(retries), Live);
    note("sa_depth", num(running.sa_depth), num(sa_depth), Live);
    note(
        "sa_busy_retries",
        num(running.sa_busy_retries),
        num(sa_busy_retries),
        Live,
    );
    note(
        "sa_backoff_ms",
        num(running.sa_backoff_ms),
        num(sa_backoff_ms),
        Live,
    );
    note(
        "sa_timeout_max",
        num(running.sa_timeout_max_ms),
        num(sa_timeout_max_ms),
        Live,
    );
    note(
        "sa_adaptive_depth",
        yes_no(running.sa_adaptive_depth),
        yes_no(*sa_adaptive_depth),
        Live,
    );
    note(
        "acm_timeout_max",
        num(running.acm_timeout_max_ms),
        num(acm_timeout_max_ms),
        Live,
    );
    note(
        "provider",
        provider_lines(&running.providers),
        provider_lines(providers),
        Restart,
    );
    note("addr_prot", num(running.addr_prot), num(addr_prot), Live);
    note(
        "addr_timeout",
        num(running.addr_timeout),
        num(addr_timeout),
        Live,
    );
    note(
        "route_prot",
        debug(&running.route_prot),
        debug(route_prot),
        Restart,
    );
    note(
        "route_timeout",
        num(running.route_timeout),
        num(route_timeout),
        Live,
    );
    note(
        "loopback_prot",
        debug(&running.loopback_prot),
        debug(loopback_prot),
        Restart,
    );
    note(
        "resolve_depth",
        num(running.resolve_depth),
        num(resolve_depth),
        Restart,
    );
    note(
        "max_pending_per_client",
        num(running.max_pending_per_client),
        num(max_pending_per_client),
        Live,
    );
    note(
        "max_background_resolves",
        num(running.max_background_resolves),
        num(max_background_resolves),
        Live,
    );
    note(
        "max_dest_cache_bytes",
        num(running.max_dest_cache_bytes),
        num(max_dest_cache_bytes),
        Live,
    );
    note(
        "kernel_timeout",
        num(running.kernel_timeout),
        num(kernel_timeout),
        Restart,
    );
    note(
        "send_depth",
        num(running.send_depth),
        num(send_depth),
        Restart,
    );
    note(
        "recv_depth",
        num(running.recv_depth),
        num(recv_depth),
        Restart,
    );
    note("min_mtu", debug(&running.min_mtu), debug(min_mtu), Restart);
    note(
        "min_rate",
        debug(&running.min_rate),
        debug(min_rate),
        Restart,
    );
    note(
        "route_preload",
        debug(&running.route_preload),
        debug(route_preload),
        Restart,
    );
    note(
        "route_data_file",
        text(&running.route_data_file),
        text(route_data_file),
        Restart,
    );
    note(
        "addr_preload",
        debug(&running.addr_preload),
        debug(addr_preload),
        Restart,
    );
    note(
        "addr_data_file",
        text(&running.addr_data_file),
        text(addr_data_file),
        Restart,
    );
    note(
        "sm_events",
        yes_no(running.sm_events),
        yes_no(*sm_events),
        Restart,
    );
    out
}

/// `running` with every [`Takes::Live`] option taken from `new`: the options a reload
/// leaves the engine running with.
#[must_use]
pub fn apply_live(running: &Options, new: &Options) -> Options {
    let mut o = running.clone();
    o.log_level = new.log_level;
    o.support_ips_in_addr_cfg = new.support_ips_in_addr_cfg;
    o.timeout_ms = new.timeout_ms;
    o.retries = new.retries;
    o.sa_depth = new.sa_depth;
    o.sa_busy_retries = new.sa_busy_retries;
    o.sa_backoff_ms = new.sa_backoff_ms;
    o.sa_timeout_max_ms = new.sa_timeout_max_ms;
    o.sa_adaptive_depth = new.sa_adaptive_depth;
    o.acm_timeout_max_ms = new.acm_timeout_max_ms;
    o.addr_timeout = new.addr_timeout;
    o.addr_prot = new.addr_prot;
    o.route_timeout = new.route_timeout;
    o.max_pending_per_client = new.max_pending_per_client;
    o.max_background_resolves = new.max_background_resolves;
    o.max_dest_cache_bytes = new.max_dest_cache_bytes;
    o.daemon_options.clone_from(&new.daemon_options);
    o
}

fn text(s: &str) -> String {
    String::from(s)
}

fn num(n: impl core::fmt::Display) -> String {
    format!("{n}")
}

fn debug(v: &impl core::fmt::Debug) -> String {
    format!("{v:?}").to_ascii_lowercase()
}

fn yes_no(b: bool) -> String {
    String::from(if b { "yes" } else { "no" })
}

fn provider_lines(rules: &[super::ProviderRule]) -> String {
    let shown: Vec<String> = rules
        .iter()
        .map(|r| match r.target {
            super::ProviderTarget::Default => format!("{} default", r.name),
            super::ProviderTarget::SubnetPrefix(p) => format!("{} {p:#x}", r.name),
        })
        .collect();
    if shown.is_empty() {
        String::from("(none)")
    } else {
        shown.join(", ")
    }
}

/// The line on which each option was last set in an options file, so that a message
/// about an option can name the line to look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionLines {
    /// The file's name, as in its diagnostics.
    pub file: String,
    /// Names in lower case, each with its last line. A map, not a list searched per
    /// line: a file of many distinct names (unknown ones, as a hostile or broken file
    /// has) must scan in time proportional to its size.
    lines: BTreeMap<String, usize>,
}

impl OptionLines {
    /// Scans `text` (named `file`) as the options parser reads it: 120-byte chunks, a
    /// `#` in column 0 is a comment, a name and a value on a line. Every `provider...`
    /// line counts as `provider`.
    #[must_use]
    pub fn scan(file: &str, text: &(impl AsRef<[u8]> + ?Sized)) -> Self {
        let mut lines = BTreeMap::new();
        for (line, chunk) in lex::chunks(text.as_ref(), lex::LINE_120) {
            if chunk.first() == Some(&b'#') {
                continue;
            }
            let mut sc = Scanner::new(chunk);
            let (Some(name), Some(_)) = (sc.string(31), sc.token()) else {
                continue;
            };
            let mut name = String::from_utf8_lossy(name).to_ascii_lowercase();
            if name.starts_with("provider") && name != "provider_lib_path" {
                name = String::from("provider");
            }
            lines.insert(name, line);
        }
        Self {
            file: String::from(file),
            lines,
        }
    }

    /// The last line that sets `name` (compared in lower case), if any.
    #[must_use]
    pub fn line_of(&self, name: &str) -> Option<usize> {
        self.lines.get(&name.to_ascii_lowercase()).copied()
    }

    /// `file:line` for `name`, or just the file when no line sets it (the option went
    /// back to its default by being removed).
    #[must_use]
    pub fn place(&self, name: &str) -> String {
        match self.line_of(name) {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(text: &str) -> Options {
        Options::parse("o", text).0
    }

    #[test]
    fn live_and_restart_options_are_told_apart() {
        let running = opts("log_level 1\ntimeout 500\nserver_mode unix\nresolve_depth 4\n");
        let new = opts("log_level 2\ntimeout 800\nserver_mode open\nresolve_depth 4\n");
        let changes = option_changes(&running, &new);
        let got: Vec<(&str, &str, &str, Takes)> = changes
            .iter()
            .map(|c| (c.name, c.old.as_str(), c.new.as_str(), c.takes))
            .collect();
        assert_eq!(
            got,
            [
                ("log_level", "1", "2", Takes::Live),
                ("server_mode", "unix", "open", Takes::Restart),
                ("timeout", "500", "800", Takes::Live),
            ]
        );
        let applied = apply_live(&running, &new);
        assert_eq!(applied.log_level, 2);
        assert_eq!(applied.timeout_ms, 800);
        assert_eq!(applied.server_mode, running.server_mode, "needs a restart");
        assert!(option_changes(&new, &new).is_empty());
    }

    #[test]
    fn every_live_option_is_applied_and_no_restart_option_is() {
        let running = Options::default();
        let new = opts(
            "log_level 2\nsupport_ips_in_addr_cfg 1\ntimeout 9\nretries 7\nsa_depth 3\n\
             addr_timeout 5\nroute_timeout 6\nmax_pending_per_client 2\nmax_background_resolves 1\n\
             resolve_depth 3\nsend_depth 2\nrecv_depth 9\nroute_prot acm\nmin_mtu 4096\n\
             lock_file /x\nprovider p default\nkernel_timeout 500\nallow_users root\n\
             addr_prot acm,neigh\n\
             sa_busy_retries 0\nsa_backoff_ms 5\nsa_timeout_max 0\nsa_adaptive_depth no\n\
             acm_timeout_max 0\nprovider_timeout 500\nmax_dest_cache_bytes 100000\n",
        );
        let changes = option_changes(&running, &new);
        let applied = apply_live(&running, &new);
        // What apply_live takes is exactly what option_changes calls live.
        for c in &changes {
            let after = option_changes(&applied, &new);
            let still = after.iter().any(|a| a.name == c.name);
            assert_eq!(still, c.takes == Takes::Restart, "{}", c.name);
        }
        assert_eq!(
            changes.len(),
            26 - 1,
            "every line but allow_users: {changes:?}"
        );
        assert_eq!(applied.daemon_options, new.daemon_options);
        let prot = changes.iter().find(|c| c.name == "addr_prot");
        assert_eq!(
            prot.map(|c| (c.old.as_str(), c.new.as_str())),
            Some(("acm", "acm,neigh")),
            "shown as the file spells it"
        );
    }

    #[test]
    fn option_lines_name_the_last_line_that_sets_each_option() {
        let text = "# comment\nLOG_LEVEL 1\nlog_level 2\nserver_mode\nprovider x default\n\
                    providers y default\nprovider_lib_path /p\n";
        let l = OptionLines::scan("/etc/o.cfg", text);
        assert_eq!(l.line_of("log_level"), Some(3));
        assert_eq!(l.line_of("server_mode"), None, "a name without a value");
        assert_eq!(l.line_of("provider"), Some(6));
        assert_eq!(l.line_of("provider_lib_path"), Some(7));
        assert_eq!(l.place("log_level"), "/etc/o.cfg:3");
        assert_eq!(l.place("timeout"), "/etc/o.cfg");
    }
}
