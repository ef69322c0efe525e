//! `ibacm`: the daemon. Start-up follows the reference (docs/daemon.md §1): detach unless
//! `-P` or `--systemd`; read the options; take the lock file (exit 255, silently, when
//! another instance holds it); open the log and write the banner and the core options;
//! bring the fabric up; listen; tell systemd; serve.
//!
//! Differences from the reference, each a fix: relative `-A`/`-O`/`--run-dir` paths are
//! made absolute before detaching (the reference resolves them against `/`); a
//! missing address file is generated at the configured path (the reference always
//! writes `/etc/rdma/ibacm_addr.cfg`); there is no 1023-client limit; the lock file is
//! truncated before the pid is written.

pub mod access;
pub mod args;
pub mod backend;
pub mod config;
pub mod conn;
pub mod error;
pub mod kernel;
pub mod listen;
pub mod lock;
pub mod log;
pub mod metrics;
pub mod paths;
pub mod server;
pub mod settings;

use acm_engine::log::Level;
use args::{Args, FabricArg};
use backend::Backend;
use backend::hub::HubBackend;
use backend::sim::{DEMO_FABRIC, SimBackend};
use config::LoadedOptions;
use error::StartError;
use log::Logger;
use paths::RunPaths;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status when the lock file is held (the reference's `exit(-1)`).
pub const EXIT_LOCKED: u8 = 255;

/// Runs the daemon with parsed arguments; returns the process's exit status.
#[must_use]
pub fn run(mut args: Args) -> ExitCode {
    if let Err(e) = absolutize(&mut args) {
        eprintln!("ibacm: {e}");
        return ExitCode::FAILURE;
    }
    if args.fabric == FabricArg::Hardware
        && let Err(e) = check_hardware()
    {
        // Before detaching, so that the one line reaches whoever started us; never
        // fall back to a simulation.
        eprintln!("ibacm: {e}");
        return ExitCode::FAILURE;
    }
    if !args.foreground
        && let Err(e) = nix::unistd::daemon(false, false)
    {
        eprintln!("ibacm: cannot detach: {e}");
        return ExitCode::FAILURE;
    }
    raise_fd_limit();
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(paths::DEFAULT_RUN_DIR));
    if args.run_dir.is_some()
        && let Err(e) = std::fs::create_dir_all(&run_dir)
    {
        eprintln!("ibacm: cannot create {}: {e}", run_dir.display());
        return ExitCode::FAILURE;
    }
    let paths = RunPaths::new(&run_dir);
    let opts_path = args
        .opts_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_OPTS_FILE));
    let opts = match config::load_options(&opts_path, &args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ibacm: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Ok(_lock) = lock::PidLock::acquire(&paths.lock_file(&opts.options.lock_file)) else {
        return ExitCode::from(EXIT_LOCKED);
    };
    match start(&args, &paths, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ibacm: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Everything after the lock: log, fabric, listener, loop.
fn start(args: &Args, paths: &RunPaths, opts: &LoadedOptions) -> Result<(), StartError> {
    let o = &opts.options;
    let (mut log, log_err) = Logger::open(&o.log_file, log::max_level(o.log_level));
    log.use_journal_prefixes(args.systemd);
    log.log(
        Level::Basic,
        "main",
        "Assistant to the InfiniBand Communication Manager",
    );
    if let Some(e) = log_err {
        log.log(
            Level::Basic,
            "main",
            &format!(
                "cannot open log file {}: {e}; logging to stdout",
                o.log_file
            ),
        );
    }
    let addr_display = args.addr_file.as_ref().map_or_else(
        || config::DEFAULT_ADDR_FILE.to_owned(),
        |p| p.display().to_string(),
    );
    let mut shown = o.clone();
    shown.lock_file = paths.lock_file(&o.lock_file).display().to_string();
    for line in config::core_option_lines(&shown, &opts.path, &addr_display) {
        log.log(Level::Basic, "acm_log_options", &line);
    }
    let epoch = std::time::Instant::now();
    match &args.fabric {
        FabricArg::Sim { file, host } => {
            let backend = sim_backend(args, opts, file.as_deref(), host.as_deref(), &mut log)?;
            serve(args, paths, opts, backend, log, epoch)
        }
        FabricArg::Hub { socket, host } => {
            let backend = hub_backend(args, paths, opts, socket, host, &mut log)?;
            serve(args, paths, opts, backend, log, epoch)
        }
        FabricArg::Hardware => hardware(args, paths, opts, log, epoch),
    }
}

/// Whether this build and this host can run on hardware, in one line if not.
fn check_hardware() -> Result<(), StartError> {
    if cfg!(feature = "verbs") {
        backend::hw::probe(&acm_io_verbs::sysfs::root_from_env())
            .map(|_| ())
            .map_err(StartError::Hardware)
    } else {
        Err(StartError::Hardware(backend::hw::NO_VERBS_BUILD.to_owned()))
    }
}

#[cfg(not(feature = "verbs"))]
fn hardware(
    _args: &Args,
    _paths: &RunPaths,
    _opts: &LoadedOptions,
    _log: Logger,
    _epoch: std::time::Instant,
) -> Result<(), StartError> {
    Err(StartError::Hardware(backend::hw::NO_VERBS_BUILD.to_owned()))
}

/// This host's engine on its InfiniBand hardware.
#[cfg(feature = "verbs")]
fn hardware(
    args: &Args,
    paths: &RunPaths,
    opts: &LoadedOptions,
    mut log: Logger,
    epoch: std::time::Instant,
) -> Result<(), StartError> {
    let dev_root = std::env::var_os("ACM_DEV_ROOT").map_or_else(
        || PathBuf::from(acm_io_verbs::sysfs::DEFAULT_DEV_ROOT),
        PathBuf::from,
    );
    let hw = backend::hw::open(&acm_io_verbs::sysfs::root_from_env(), &dev_root)
        .inspect_err(|e| {
            log.log(Level::Basic, "acm_open_devices", e);
        })
        .map_err(StartError::Hardware)?;
    let addr_path = args
        .addr_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_ADDR_FILE));
    let host = dns_lookup::get_hostname().unwrap_or_else(|_| "localhost".to_owned());
    let devices: Vec<_> = hw.devices.iter().map(|d| d.desc.clone()).collect();
    let mut lines = Vec::new();
    let config = {
        let mut logf = |m: String| lines.push(m);
        let text = config::load_or_generate_addr_file(&addr_path, &host, &devices, &mut logf);
        let name = addr_path.display().to_string();
        config::engine_config(opts, text.as_deref().map(|t| (name.as_str(), t)), &mut logf)
    };
    for l in lines {
        log.log(Level::Basic, "acm_config", &l);
    }
    // The engine's random choices (TIDs, ...) need only differ between runs.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()).rotate_left(32);
    let now = acm_engine::Instant::from_nanos(
        u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX),
    );
    let engine = acm_engine::Engine::new(config, seed, now);
    let backend = backend::hw::HwBackend::new(hw, engine, now);
    serve(args, paths, opts, backend, log, epoch)
}

fn serve<B: Backend>(
    args: &Args,
    paths: &RunPaths,
    opts: &LoadedOptions,
    backend: B,
    mut log: Logger,
    epoch: std::time::Instant,
) -> Result<(), StartError> {
    let o = &opts.options;
    let inherited = if args.systemd {
        listen::inherit_from_systemd()?
    } else {
        listen::Inherited::default()
    };
    for line in opts.settings.log_lines() {
        log.log(Level::Basic, "acm_log_options", &line);
    }
    for w in opts.settings.warnings() {
        log.log_with(Level::Basic, log::Priority::Warning, "acm_log_options", &w);
    }
    let mut warnings = Vec::new();
    let listener = listen::open(
        o.server_mode,
        o.server_port,
        paths,
        &opts.settings.access.socket,
        !o.acme_plus_kernel_only,
        inherited.listener,
        &mut warnings,
    )?;
    for w in warnings {
        log.log(Level::Basic, "acm_listen", &w);
    }
    // Before systemd hears "ready", as in the reference.
    let kernel =
        kernel::channel::KernelChannel::setup(backend.serves_kernel(), inherited.netlink, &mut log);
    let at = listener.describe(paths);
    let what = backend.describe();
    log.log(
        Level::Basic,
        "acm_server",
        &format!("listening on {at} ({what})"),
    );
    if args.foreground && !args.systemd {
        println!("ibacm: listening on {at} ({what})");
    }
    if args.systemd {
        // Not under systemd (no NOTIFY_SOCKET), this does nothing.
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    }
    let mut server = server::Server::new(listener, backend, kernel, log, epoch)
        .map_err(StartError::EventLoop)?;
    server.set_allow_list(opts.settings.access.allow.clone());
    if let Some(m) = &opts.settings.metrics {
        server.set_metrics(metrics::MetricsFile::new(m, std::time::Instant::now()));
    }
    Ok(server.run()?)
}

/// The simulated fabric, this daemon being host `host` (default: the first that runs
/// a daemon).
fn sim_backend(
    args: &Args,
    opts: &LoadedOptions,
    file: Option<&Path>,
    host: Option<&str>,
    log: &mut Logger,
) -> Result<SimBackend, StartError> {
    let (text, label) = match file {
        Some(f) => (
            std::fs::read_to_string(f).map_err(|source| StartError::ReadFabric {
                path: f.to_owned(),
                source,
            })?,
            format!("simulated fabric {}", f.display()),
        ),
        None => (DEMO_FABRIC.to_owned(), "simulated demo fabric".to_owned()),
    };
    let spec = acm_io_sim::FabricSpec::parse(&text).map_err(|source| match file {
        Some(f) => StartError::FabricFile {
            path: f.to_owned(),
            source,
        },
        None => StartError::DemoFabric(source),
    })?;
    let h = match host {
        Some(name) => spec
            .hosts
            .iter()
            .position(|h| h.name == name)
            .map(acm_io_sim::HostId)
            .ok_or_else(|| StartError::NoSuchHost {
                name: name.to_owned(),
                hosts: spec.hosts.iter().map(|h| h.name.clone()).collect(),
            })?,
        None => spec
            .hosts
            .iter()
            .position(|h| h.daemon)
            .map(acm_io_sim::HostId)
            .ok_or(StartError::NoDaemonHost)?,
    };
    // The fabric description configures this host unless the command line names files.
    let mut config = acm_io_sim::fabric::engine_config(&spec, h);
    if args.opts_file.is_some() {
        let mut logf = |m: String| log.log(Level::Basic, "acm_config", &m);
        // The spec's address text stays (an -A file replaces it below); the options
        // and the preload files they name come from disk.
        let addr = spec.addr_file_text(h);
        config = config::engine_config(opts, Some(("ibacm_addr.cfg", addr.as_bytes())), &mut logf);
    } else {
        config::apply_overrides(&mut config.options, args);
        config.netlink_pid = std::process::id();
    }
    if let Some(path) = &args.addr_file {
        let topo = acm_io_sim::topology::Topology::new(&spec);
        let devices = topo.devices(h, spec.sm.lid, spec.sm.sl);
        let name = spec.hosts[h.index()].name.clone();
        let mut logf = |m: String| log.log(Level::Basic, "acm_config", &m);
        let text = config::load_or_generate_addr_file(path, &name, &devices, &mut logf);
        config.addr_file = text.map(|t| {
            let (file, d) = acm_engine::config::AddrFile::parse(&path.display().to_string(), &t);
            config.diagnostics.extend(d);
            file
        });
    }
    Ok(SimBackend::new(
        spec,
        h,
        config,
        acm_io_sim::sim::seed_from_env(),
        label,
    ))
}

/// This host's engine, attached to a fabric hub.
fn hub_backend(
    args: &Args,
    paths: &RunPaths,
    opts: &LoadedOptions,
    socket: &Path,
    host: &str,
    log: &mut Logger,
) -> Result<HubBackend, StartError> {
    let my_socket = paths.dir.join(format!("ibacm-hub-{host}.sock"));
    let addr_path = args.addr_file.clone().unwrap_or_else(|| {
        if args.run_dir.is_some() {
            paths.dir.join("ibacm_addr.cfg")
        } else {
            PathBuf::from(config::DEFAULT_ADDR_FILE)
        }
    });
    let mut lines = Vec::new();
    let backend = HubBackend::attach(
        socket,
        &my_socket,
        host,
        |setup| {
            let mut logf = |m: String| lines.push(m);
            let text = config::load_or_generate_addr_file(
                &addr_path,
                &setup.name,
                &setup.devices,
                &mut logf,
            );
            let name = addr_path.display().to_string();
            config::engine_config(opts, text.as_deref().map(|t| (name.as_str(), t)), &mut logf)
        },
        acm_io_sim::sim::seed_from_env() ^ u64::from(std::process::id()),
        acm_engine::Instant::ZERO,
    )
    .map_err(|source| StartError::Hub {
        socket: socket.to_owned(),
        source,
    })?;
    for l in lines {
        log.log(Level::Basic, "acm_config", &l);
    }
    Ok(backend)
}

/// Makes the command line's paths absolute, since detaching changes directory to `/`.
fn absolutize(args: &mut Args) -> Result<(), StartError> {
    let cwd = std::env::current_dir().map_err(StartError::CurrentDir)?;
    let abs = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = cwd.join(&*p);
        }
    };
    args.addr_file.as_mut().map(abs);
    args.opts_file.as_mut().map(abs);
    args.run_dir.as_mut().map(abs);
    args.metrics_file.as_mut().map(abs);
    match &mut args.fabric {
        FabricArg::Sim { file: Some(f), .. } => abs(f),
        FabricArg::Hub { socket, .. } => abs(socket),
        _ => {}
    }
    Ok(())
}

/// Thousands of clients need thousands of descriptors: raise the soft limit to the
/// hard one.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
