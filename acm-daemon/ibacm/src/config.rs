//! Reading the daemon's files into an engine configuration: the options file, the
//! address file (generated when missing), and the preload files the options name. Every
//! file goes through the engine's parsers, whose diagnostics name the file and line.
//!
//! Files are read as bytes, never as UTF-8 text: the reference reads bytes, and a single
//! Latin-1 byte in a comment or a name must cost neither the file nor its line numbers
//! (read as text, it stopped the start without a line number, turned the address file
//! into "not found", and dropped the whole preload file). Every file is read through
//! [`config_file::read`]: a regular file, of bounded size, opened without blocking.

use super::args::Args;
use super::config_file::{self, ConfigKind, FileError};
use super::settings::{SettingError, Settings};
use acm_engine::config::{
    AddrFile, AddrPreload, Diagnostic, Options, RouteData, RoutePreload, ServerMode, parse_hosts,
};
use acm_engine::{DeviceDesc, EngineConfig, PortState};
use core::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The reference's options file.
pub(crate) const DEFAULT_OPTS_FILE: &str = "/etc/rdma/ibacm_opts.cfg";
/// The reference's address file.
pub(crate) const DEFAULT_ADDR_FILE: &str = "/etc/rdma/ibacm_addr.cfg";

/// The options with the command line's overrides applied, and where they came from.
#[derive(Debug, Clone)]
pub struct LoadedOptions {
    /// The options.
    pub options: Options,
    /// The options file's bytes as read (`None`: it does not exist, defaults apply).
    pub text: Option<Vec<u8>>,
    /// The file.
    pub path: PathBuf,
    /// What its parser said.
    pub diagnostics: Vec<Diagnostic>,
    /// The daemon's own settings (access control, metrics), from the file's lines and
    /// the command line.
    pub settings: Settings,
}

/// Why the options cannot be used; the daemon does not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// The file exists but cannot be read, or is not one to read
    /// ([`config_file::read`]).
    #[error(transparent)]
    File(#[from] FileError),
    /// One of the daemon's own settings is bad.
    #[error(transparent)]
    Setting(#[from] SettingError),
}

/// Reads the options file at `path` (a missing file means every default, as on Debian,
/// which ships none), applies `--log-file`, `--log-level` and `--systemd`, and resolves
/// the daemon's own settings ([`Settings::resolve`]).
///
/// # Errors
/// The file exists but cannot be read (or is no regular file, or is over its bound), or
/// a setting of ours is bad.
pub(crate) fn load_options(path: &Path, args: &Args) -> Result<LoadedOptions, LoadError> {
    let text = config_file::read(path, ConfigKind::Options)?;
    parse_options(path, text, args)
}

/// The options of the file at `path` from its bytes `text` (`None`: there is no such
/// file, every default), as [`load_options`] reads them.
///
/// # Errors
/// A setting of ours is bad.
pub(crate) fn parse_options(
    path: &Path,
    text: Option<Vec<u8>>,
    args: &Args,
) -> Result<LoadedOptions, LoadError> {
    let name = path.display().to_string();
    let (mut options, diagnostics) = Options::parse(&name, text.as_deref().unwrap_or_default());
    apply_overrides(&mut options, args);
    let settings = Settings::resolve(&options.daemon_options, &name, args, options.server_mode)?;
    Ok(LoadedOptions {
        options,
        text,
        path: path.to_path_buf(),
        diagnostics,
        settings,
    })
}

/// `--log-file`, `--log-level`; `--systemd` forces the unix server mode.
pub(crate) fn apply_overrides(options: &mut Options, args: &Args) {
    if let Some(f) = &args.log_file {
        options.log_file.clone_from(f);
    }
    if let Some(l) = args.log_level {
        options.log_level = l;
    }
    if args.systemd {
        options.server_mode = ServerMode::Unix;
    }
}

/// The engine configuration from loaded options, the address file's name and bytes
/// (`None`: missing), and the preload files the options name (read from disk).
pub fn engine_config(
    opts: &LoadedOptions,
    addr: Option<(&str, &[u8])>,
    log: &mut dyn FnMut(String),
) -> EngineConfig {
    let mut diagnostics = opts.diagnostics.clone();
    let addr_file = addr.map(|(name, text)| {
        let (file, d) = AddrFile::parse(name, text);
        diagnostics.extend(d);
        file
    });
    let o = &opts.options;
    let hosts = if o.addr_preload == AddrPreload::AcmHosts {
        match config_file::read(Path::new(&o.addr_data_file), ConfigKind::Hosts) {
            Ok(Some(text)) => {
                let (entries, d) = parse_hosts(&o.addr_data_file, &text);
                diagnostics.extend(d);
                entries
            }
            Ok(None) => {
                log(format!("address data file {} not found", o.addr_data_file));
                Vec::new()
            }
            Err(e) => {
                log(e.to_string());
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let route_data = if o.route_preload == RoutePreload::OpensmFullV1 {
        match config_file::read(Path::new(&o.route_data_file), ConfigKind::RouteData) {
            Ok(Some(text)) => {
                let (data, d) = RouteData::parse(&o.route_data_file, &text);
                diagnostics.extend(d);
                Some(data)
            }
            Ok(None) => {
                log(format!("route data file {} not found", o.route_data_file));
                None
            }
            Err(e) => {
                log(e.to_string());
                None
            }
        }
    } else {
        None
    };
    EngineConfig {
        options: opts.options.clone(),
        addr_file,
        hosts,
        route_data,
        diagnostics,
        netlink_pid: std::process::id(),
        ..EngineConfig::default()
    }
}

/// Adds to `config`'s diagnostics, which the engine logs at start with file and line,
/// the address-file lines that name none of `devices`, the devices discovery found.
/// The engine checks each line's port and pkey when its device comes up, but cannot
/// tell a device that never comes from one that has not come yet; the reference drops
/// such lines without a word.
pub fn warn_unknown_devices(config: &mut EngineConfig, devices: &[DeviceDesc]) {
    let Some(file) = &config.addr_file else {
        return;
    };
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    config.diagnostics.extend(file.unknown_devices(&names));
}

/// The address file for a host named `host` with `devices` (what `ib_acme -A` writes):
/// the host name on the first active InfiniBand port, then `host-N` on every port.
/// Where a missing file is written: [`super::addr_file`].
#[must_use]
pub(crate) fn generated_addr_file(host: &str, devices: &[DeviceDesc]) -> String {
    let host = host.split('.').next().unwrap_or(host);
    let mut out = String::from(
        "# InfiniBand Communication Management Assistant address file,\n\
         # generated by ibacm because none existed. Each line is\n\
         #   address device port pkey\n\
         # where address is a name (IP addresses are found automatically), device a\n\
         # verbs device name, port its port number, and pkey a partition key in hex\n\
         # or `default` for the port's first one.\n",
    );
    let ib_ports = || {
        devices.iter().flat_map(|d| {
            d.ports
                .iter()
                .enumerate()
                .filter(|(_, p)| p.link_layer_ib)
                .map(move |(i, p)| (d.name.as_str(), i + 1, p.state == PortState::Active))
        })
    };
    if let Some((dev, port, _)) = ib_ports().find(|&(_, _, active)| active) {
        let _ = writeln!(out, "{host} {dev} {port} default");
    }
    for (i, (dev, port, _)) in ib_ports().enumerate() {
        let _ = writeln!(out, "{host}-{} {dev} {port} default", i + 1);
    }
    out
}

/// The core options as the reference logs them at start (level 0).
#[must_use]
pub(crate) fn core_option_lines(o: &Options, opts_file: &Path, addr_file: &str) -> Vec<String> {
    let mode = match o.server_mode {
        ServerMode::Unix => "unix",
        ServerMode::Loop => "loop",
        ServerMode::Open => "open",
    };
    vec![
        format!("log file {}", o.log_file),
        format!("log level {}", o.log_level),
        format!("umad debug level {}", o.umad_debug_level),
        format!("lock file {}", o.lock_file),
        format!("server_port {}", o.server_port),
        format!("server_mode {mode}"),
        format!(
            "acme_plus_kernel_only {}",
            if o.acme_plus_kernel_only { "yes" } else { "no" }
        ),
        format!("timeout {} ms", o.timeout_ms),
        format!("retries {}", o.retries),
        format!("sa depth {}", o.sa_depth),
        format!("options file {}", opts_file.display()),
        format!("addr file {addr_file}"),
        format!("provider lib path {}", o.provider_lib_path),
        format!(
            "support IP's in ibacm_addr.cfg {}",
            u8::from(o.support_ips_in_addr_cfg)
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::PortAttrs;

    fn device(name: &str, states: &[(PortState, bool)]) -> DeviceDesc {
        DeviceDesc {
            id: acm_engine::DeviceId(0),
            name: name.into(),
            guid: 1,
            ports: states
                .iter()
                .map(|&(state, ib)| PortAttrs {
                    state,
                    link_layer_ib: ib,
                    ..PortAttrs::default()
                })
                .collect(),
        }
    }

    #[test]
    fn generated_file_names_the_first_active_port_then_every_port() {
        let devs = [
            device(
                "mlx5_0",
                &[(PortState::Down, true), (PortState::Active, true)],
            ),
            device(
                "mlx5_1",
                &[(PortState::Active, false), (PortState::Active, true)],
            ),
        ];
        let text = generated_addr_file("node1.example.com", &devs);
        let lines: Vec<_> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "node1 mlx5_0 2 default",
                "node1-1 mlx5_0 1 default",
                "node1-2 mlx5_0 2 default",
                "node1-3 mlx5_1 2 default",
            ]
        );
        let (file, diags) = AddrFile::parse("gen", &text);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(file.lines.len(), 4);
    }

    #[test]
    fn overrides_and_missing_files() {
        let args =
            crate::args::run_args(&["--systemd", "--log-level", "2", "--log-file", "stderr"]);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dir = dir.path();
        let opts = dir.join("opts.cfg");
        std::fs::write(&opts, "server_mode loop\nlog_level 0\nbogus_option 1\n").unwrap();
        let l = load_options(&opts, &args).unwrap();
        assert_eq!(
            l.options.server_mode,
            ServerMode::Unix,
            "--systemd forces unix"
        );
        assert_eq!(l.options.log_level, 2);
        assert_eq!(l.options.log_file, "stderr");
        let missing = load_options(&dir.join("none.cfg"), &args).unwrap();
        assert!(missing.text.is_none());
        assert_eq!(missing.options.server_port, 6125, "defaults");
        // A bad setting of ours stops the start, naming the file and line.
        std::fs::write(&opts, "log_level 1\nserver_socket_mode 0800\n").unwrap();
        let e = load_options(&opts, &args).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2: server_socket_mode: expected octal permission bits such as 0770 (at most 0777)",
                opts.display()
            )
        );
    }

    #[test]
    fn preload_files_come_from_the_paths_the_options_name() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dir = dir.path();
        let hosts = dir.join("hosts.data");
        std::fs::write(&hosts, "10.0.0.2 fe80::2:c903:a0:b002\n").unwrap();
        let (options, diagnostics) = Options::parse(
            "o",
            &format!(
                "addr_preload acm_hosts\naddr_data_file {}\n",
                hosts.display()
            ),
        );
        let l = LoadedOptions {
            options,
            text: None,
            path: dir.join("o"),
            diagnostics,
            settings: Settings::default(),
        };
        let mut logs = Vec::new();
        let c = engine_config(&l, Some(("addr", b"h mlx5_0 1 default\n")), &mut |m| {
            logs.push(m);
        });
        assert_eq!(c.hosts.len(), 1);
        assert!(c.addr_file.is_some());
        assert!(logs.is_empty(), "{logs:?}");
    }

    #[test]
    fn latin1_address_lines_keep_their_numbers_and_unknown_devices_are_named() {
        let l = LoadedOptions {
            options: Options::default(),
            text: None,
            path: "o".into(),
            diagnostics: Vec::new(),
            settings: Settings::default(),
        };
        let text = b"# h\xf4te de caf\xe9\nh mlx5_0 1 default\nh-1 mlx4_9 1 default\n";
        let mut logs = Vec::new();
        let mut c = engine_config(&l, Some(("addr", text)), &mut |m| logs.push(m));
        assert!(logs.is_empty(), "{logs:?}");
        assert_eq!(c.addr_file.as_ref().unwrap().lines.len(), 2);
        let before = c.diagnostics.len();
        warn_unknown_devices(&mut c, &[device("mlx5_0", &[(PortState::Active, true)])]);
        let added: Vec<String> = c.diagnostics[before..]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(added.len(), 1, "{added:?}");
        assert!(added[0].starts_with("addr:3:"), "{added:?}");
        assert!(added[0].contains("mlx4_9"), "{added:?}");
    }
}
