//! `ibacm`: the daemon. Start-up follows the reference (docs/daemon.md §1): detach unless
//! `-P` or `--systemd`; read the options; take the lock file (exit 255 when another
//! instance holds it); open the log and write the banner and the core options; bring
//! the fabric up; listen; tell systemd; serve.
//!
//! Differences from the reference, each a fix: relative `-A`/`-O`/`--run-dir` paths are
//! made absolute before detaching (the reference resolves them against `/`); a
//! missing address file is generated into the run directory, or at `-A` (the reference
//! always writes `/etc/rdma/ibacm_addr.cfg`, read-only under systemd; see `addr_file`);
//! there is no 1023-client limit; the lock file is truncated before the pid is written.
//!
//! And the administrator's side of its life, which the reference leaves bare:
//! - the command that detaches waits for the daemon's start-up result and exits with
//!   its status and message (`startup`); a held lock names the pid that holds it;
//! - a simulated fabric is read before anything is created, so a bad fabric leaves no
//!   file behind, and its host's options govern the whole daemon, logger included
//!   (`options_source`, which also gives the precedence and the default log file);
//! - the log file is appended to, not truncated (`log`);
//! - SIGTERM and SIGINT stop the daemon cleanly: its files removed, a last log line,
//!   exit 0; a failed start removes what it created too (`lifecycle`).

mod access;
mod addr_file;
pub mod args;
mod backend;
mod busy_poll;
mod client_waits;
mod config;
mod config_file;
mod conn;
mod conn_limits;
mod error;
mod kernel;
mod lifecycle;
mod listen;
mod lock;
mod log;
mod metrics;
mod option_values;
mod options_source;
mod paths;
mod plugins;
mod rate_limit;
mod reload;
mod safe_file;
mod server;
mod settings;
mod startup;
mod worker_threads;
mod workers;

// The parts the integration tests and the fuzz target drive directly: a server on the
// simulated demo fabric in the test's own process (to count its allocations and
// wake-ups), the reading of the options, and the run directory's layout.
pub use backend::sim::{DEMO_FABRIC, SimBackend};
pub use client_waits::PPOLL_MAX;
pub use config::{LoadedOptions, engine_config, warn_unknown_devices};
pub use kernel::channel::KernelChannel;
pub use listen::Listener;
pub use log::{Logger, max_level};
pub use options_source::names_log_file;
pub use paths::{DEFAULT_RUN_DIR, RunPaths};
pub use server::Server;
pub use settings::{Origin, Settings};

/// The ranges the daemon's own options are checked against, at start and at reload.
pub mod option_bounds {
    pub use crate::conn_limits::{
        MAX_PER_USER as MAX_CONNECTIONS_PER_USER, MIN_PER_USER as MIN_CONNECTIONS_PER_USER,
    };
    pub use crate::option_values::{
        MAX_MAX_QUEUED_REPLY_BYTES, MAX_METRICS_INTERVAL, MIN_MAX_QUEUED_REPLY_BYTES,
    };
}

use acm_engine::log::Level;
use args::{Args, FabricArg};
use backend::Backend;
use backend::hub::HubBackend;
use backend::hw::HardwareError;
use error::StartError;
use lifecycle::{RunFiles, StopSignals};
use options_source::{FabricHostOptions, OptionsSource};
use startup::{Failure, Report, Role};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status when the lock file is held (the reference's `exit(-1)`).
pub const EXIT_LOCKED: u8 = 255;

/// What a daemon carries from start-up to its end: where its start-up result goes, the
/// files it must remove, and the signals that stop it (taken by the event loop).
struct Life {
    report: Report,
    files: RunFiles,
    signals: Option<StopSignals>,
}

impl From<StartError> for Failure {
    fn from(e: StartError) -> Self {
        Self::new(e.to_string())
    }
}

/// Runs the daemon with parsed arguments; returns the process's exit status.
#[must_use]
pub fn run(mut args: Args) -> ExitCode {
    if let Err(e) = absolutize(&mut args) {
        eprintln!("ibacm: {e}");
        return ExitCode::FAILURE;
    }
    let report = match Role::of_this_process(args.foreground) {
        Ok(Role::Parent) => return startup::spawn_and_wait(),
        Ok(Role::Daemon(report)) => report,
        Err(f) => {
            // The channel could not be taken: stderr is /dev/null, the waiting command
            // sees the daemon exit without a report and says so.
            eprintln!("ibacm: {}", f.message);
            return ExitCode::from(f.code);
        }
    };
    let mut life = Life {
        report,
        files: RunFiles::default(),
        signals: None,
    };
    let result = start(&args, &mut life);
    // Before reporting, so that whoever waits for the failure finds no file of ours.
    drop(life.files.remove_all());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            life.report.failed(&f);
            ExitCode::from(f.code)
        }
    }
}

/// A simulated fabric as read before anything is created: the spec, the daemon's host,
/// the fabric file (`None`: the demo) and the backend's label.
struct SimFabric {
    spec: acm_io_sim::FabricSpec,
    host: acm_io_sim::HostId,
    file: Option<PathBuf>,
    label: String,
}

/// Everything from the signals to the end of the event loop.
fn start(args: &Args, life: &mut Life) -> Result<(), Failure> {
    // Before any file exists: a stop signal during start-up then waits for the loop.
    life.signals = Some(StopSignals::block().map_err(StartError::Signals)?);
    raise_fd_limit();
    let fabric = match &args.fabric {
        FabricArg::Sim { file, host } => Some(load_fabric(file.as_deref(), host.as_deref())?),
        _ => None,
    };
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(paths::DEFAULT_RUN_DIR));
    let host_opts = fabric.as_ref().map(|f| {
        let h = &f.spec.hosts[f.host.index()];
        FabricHostOptions {
            file: f.file.as_deref(),
            host: &h.name,
            text: &h.options,
        }
    });
    let (opts, source) =
        options_source::load(args, host_opts, &run_dir).map_err(StartError::from)?;
    if let Some(path) = &args.addr_file {
        addr_file::check_named(path).map_err(StartError::from)?;
    }
    if args.fabric == FabricArg::Hardware {
        // Never fall back to a simulation.
        check_hardware(opts.settings.wait_for_device)?;
    }
    if args.run_dir.is_some()
        && let Err(e) = std::fs::create_dir_all(&run_dir)
    {
        return Err(StartError::RunDir {
            path: run_dir,
            source: e,
        }
        .into());
    }
    let paths = RunPaths::new(&run_dir);
    let lock_path = paths.lock_file(&opts.options.lock_file);
    let o = &opts.options;
    // The log opens before the lock is taken, so that a lock that cannot be taken is
    // also said there (a second instance's line goes to the log of the one running).
    let (mut log, log_err) = Logger::open(&o.log_file, log::max_level(o.log_level));
    log.use_journal_prefixes(args.systemd);
    if let Err(e) = life.files.lock(&lock_path) {
        let f = match e {
            lock::LockError::Held { .. } => Failure {
                code: EXIT_LOCKED,
                message: format!("{e}: another ibacm is running there"),
            },
            other => StartError::from(other).into(),
        };
        // Standard error gets the message from the caller; a log there would repeat it.
        if !log.is_stderr() {
            log.log_with(
                Level::Basic,
                log::Priority::Err,
                "main",
                &format!("exiting: {}", f.message),
            );
        }
        return Err(f);
    }
    log.log(
        Level::Basic,
        "main",
        "Assistant to the InfiniBand Communication Manager",
    );
    log.log(Level::Basic, "main", &source.to_string());
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
    shown.lock_file = lock_path.display().to_string();
    for line in config::core_option_lines(&shown, &opts.path, &addr_display) {
        log.log(Level::Basic, "acm_log_options", &line);
    }
    // Only the hardware backend gives providers a verbs context.
    let verbs = !matches!(args.fabric, FabricArg::Sim { .. } | FabricArg::Hub { .. });
    let opts_file = opts.path.display().to_string();
    let plugins = plugins::Plugins::load(o, &opts_file, verbs, &mut |l| {
        log.log(Level::Basic, "acm_open_providers", &l);
    });
    let ctx = Started {
        args,
        paths: &paths,
        opts: &opts,
        source: &source,
        plugins: &plugins,
    };
    let epoch = std::time::Instant::now();
    match (&args.fabric, fabric) {
        (FabricArg::Sim { .. }, Some(f)) => {
            let backend = sim_backend(args, &paths, &opts, f, &plugins, &mut log);
            serve(&ctx, backend, log, epoch, life)
        }
        (FabricArg::Hub { socket, host }, _) => {
            match hub_backend(args, &paths, &opts, socket, host, &plugins, &mut log) {
                Ok(backend) => serve(&ctx, backend, log, epoch, life),
                Err(e) => Err(failed(&mut log, e)),
            }
        }
        _ => hardware(&ctx, log, epoch, life),
    }
}

/// What start-up settled that [`serve`] and the backends need: the command line, the
/// run directory, the options and where they came from, the provider plugins.
struct Started<'a> {
    args: &'a Args,
    paths: &'a RunPaths,
    opts: &'a LoadedOptions,
    source: &'a OptionsSource,
    plugins: &'a plugins::Plugins,
}

/// Logs why the daemon stops, for a detached daemon whose stderr nobody reads.
fn failed(log: &mut Logger, e: StartError) -> Failure {
    log.log(Level::Basic, "main", &format!("exiting: {e}"));
    e.into()
}

/// Whether this build and this host can run on hardware, in one line if not. A
/// daemon told to wait for a device (`wait_for_device`) needs only the build.
fn check_hardware(wait: bool) -> Result<(), StartError> {
    if cfg!(feature = "verbs") {
        if wait {
            return Ok(());
        }
        backend::hw::probe(&acm_io_verbs::sysfs::root_from_env())
            .map(|_| ())
            .map_err(StartError::from)
    } else {
        Err(HardwareError::NoVerbsBuild.into())
    }
}

#[cfg(not(feature = "verbs"))]
fn hardware(
    _ctx: &Started<'_>,
    _log: Logger,
    _epoch: std::time::Instant,
    _life: &mut Life,
) -> Result<(), Failure> {
    Err(StartError::from(HardwareError::NoVerbsBuild).into())
}

/// This host's engine on its InfiniBand hardware.
#[cfg(feature = "verbs")]
fn hardware(
    ctx: &Started<'_>,
    mut log: Logger,
    epoch: std::time::Instant,
    life: &mut Life,
) -> Result<(), Failure> {
    let (opts, paths) = (ctx.opts, ctx.paths);
    let dev_root = std::env::var_os("ACM_DEV_ROOT").map_or_else(
        || PathBuf::from(acm_io_verbs::sysfs::DEFAULT_DEV_ROOT),
        PathBuf::from,
    );
    let wait = opts.settings.wait_for_device;
    let sm_events = opts.options.sm_events;
    let hw = match backend::hw::open(
        &acm_io_verbs::sysfs::root_from_env(),
        &dev_root,
        wait,
        sm_events,
    ) {
        Ok(hw) => hw,
        Err(e) => {
            log.log(Level::Basic, "acm_open_devices", &e.to_string());
            return Err(failed(&mut log, e.into()));
        }
    };
    let addr_spec = addr_file::AddrFileSpec::from_arg(ctx.args.addr_file.as_deref());
    let host = dns_lookup::get_hostname().unwrap_or_else(|_| "localhost".to_owned());
    let devices: Vec<_> = hw.devices.iter().map(|d| d.desc.clone()).collect();
    let mut lines = Vec::new();
    let config = {
        let mut logf = |m: String| lines.push(m);
        let addr = addr_file::load_or_generate(&addr_spec, &paths.dir, &host, &devices, &mut logf);
        let mut config = config::engine_config(
            opts,
            addr.as_ref().map(|a| (a.name.as_str(), a.text.as_slice())),
            &mut logf,
        );
        config::warn_unknown_devices(&mut config, &devices);
        config
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
    // Each open device's verbs context, for `acm_device.verbs`: filled and kept
    // current by the backend as devices come and go.
    let contexts = backend::hw::ProviderContexts::default();
    let engine = if ctx.plugins.builtin_only() {
        acm_engine::Engine::new(config, seed, now)
    } else {
        let shared = std::rc::Rc::clone(&contexts);
        let verbs: plugins::adapter::VerbsLookup =
            std::rc::Rc::new(move |name: &str| shared.borrow().get(name).cloned());
        let providers = ctx.plugins.providers(&config, &verbs);
        acm_engine::Engine::with_providers(config, seed, now, providers)
    };
    let backend = backend::hw::HwBackend::new(hw, engine, now, contexts);
    serve(ctx, backend, log, epoch, life)
}

/// Listens, reports start-up done, serves until a stop signal, then removes the
/// daemon's files and logs the end.
fn serve<B: Backend>(
    ctx: &Started<'_>,
    backend: B,
    mut log: Logger,
    epoch: std::time::Instant,
    life: &mut Life,
) -> Result<(), Failure> {
    let (args, paths, o) = (ctx.args, ctx.paths, &ctx.opts.options);
    let inherited = if args.systemd {
        listen::inherit_from_systemd().map_err(|e| failed(&mut log, e.into()))?
    } else {
        listen::Inherited::default()
    };
    for line in ctx.opts.settings.log_lines() {
        log.log(Level::Basic, "acm_log_options", &line);
    }
    for w in ctx.opts.settings.warnings() {
        log.log_with(Level::Basic, log::Priority::Warning, "acm_log_options", &w);
    }
    let was_inherited = inherited.listener.is_some();
    let public = !o.acme_plus_kernel_only;
    let mut warnings = Vec::new();
    let listener = listen::open(
        o.server_mode,
        o.server_port,
        paths,
        &ctx.opts.settings.access.socket,
        public,
        inherited.listener,
        &mut warnings,
    );
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            if o.server_mode == acm_engine::config::ServerMode::Unix && !was_inherited {
                life.files.own_failed_unix_socket(paths);
            }
            return Err(failed(&mut log, e.into()));
        }
    };
    life.files
        .own_listener_files(o.server_mode, public, was_inherited, paths);
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
    let mut server = match server::Server::new(listener, backend, kernel, log, epoch) {
        Ok(s) => s,
        // The logger went into the failed constructor: say it on stderr only.
        Err(e) => return Err(StartError::EventLoop(e).into()),
    };
    if ctx.plugins.has_libraries() {
        match server.provider_waker() {
            Ok(w) => ctx.plugins.shared().set_waker(w),
            Err(e) => server.log_mut().log(
                Level::Basic,
                "acm_open_providers",
                &format!(
                    "no waker for provider libraries ({e}); their answers wait for the next event"
                ),
            ),
        }
    }
    if let Some(signals) = life.signals.take()
        && let Err(e) = server.stop_on(signals)
    {
        return Err(failed(server.log_mut(), StartError::EventLoop(e)));
    }
    server.reload_with(reload::Reloader::new(
        args,
        paths.dir.clone(),
        reload::options_path(ctx.source),
        reload::addr_path(args, &paths.dir),
        ctx.opts,
    ));
    server.set_allow_list(ctx.opts.settings.access.allow.clone());
    server.set_max_queued_reply_bytes(ctx.opts.settings.max_queued_reply_bytes);
    let configured = ctx.opts.settings.worker_threads;
    if let Err(e) = server.set_worker_threads(worker_threads::worker_count(configured)) {
        return Err(failed(server.log_mut(), StartError::EventLoop(e)));
    }
    server.log_mut().log(
        Level::Config,
        "acm_server",
        &worker_threads::worker_threads_line(configured),
    );
    server.set_max_connections_per_user(ctx.opts.settings.max_connections_per_user);
    if let Some(m) = &ctx.opts.settings.metrics {
        server.set_metrics(metrics::MetricsFile::new(m, std::time::Instant::now()));
    }
    if args.foreground && !args.systemd {
        println!("ibacm: listening on {at} ({what})");
        println!(
            "ibacm: logging to {} at level {}, {}",
            o.log_file, o.log_level, ctx.source
        );
    }
    life.report.ready();
    if args.systemd {
        // Not under systemd (no NOTIFY_SOCKET), this does nothing.
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    }
    match server.run() {
        Ok(signal) => {
            let removed = life.files.count();
            let problems = life.files.remove_all();
            let log = server.log_mut();
            for p in &problems {
                log.log(Level::Basic, "main", p);
            }
            log.log(
                Level::Basic,
                "main",
                &format!(
                    "exiting on {}: removed {} of {removed} files",
                    signal.as_str(),
                    removed - problems.len()
                ),
            );
            Ok(())
        }
        Err(e) => Err(failed(server.log_mut(), e.into())),
    }
}

/// Reads and checks a simulated fabric, and picks the daemon's host (default: the first
/// that runs a daemon), before anything is created.
fn load_fabric(file: Option<&Path>, host: Option<&str>) -> Result<SimFabric, StartError> {
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
    Ok(SimFabric {
        spec,
        host: h,
        file: file.map(Path::to_path_buf),
        label,
    })
}

/// The simulated fabric's backend, this daemon being host `fabric.host`, configured
/// with `opts` (see [`options_source`] for which options those are).
fn sim_backend(
    args: &Args,
    paths: &RunPaths,
    opts: &LoadedOptions,
    fabric: SimFabric,
    plugins: &plugins::Plugins,
    log: &mut Logger,
) -> SimBackend {
    let SimFabric {
        spec,
        host: h,
        label,
        ..
    } = fabric;
    let mut config = acm_io_sim::fabric::engine_config(&spec, h);
    if args.opts_file.is_some() {
        let mut logf = |m: String| log.log(Level::Basic, "acm_config", &m);
        // The spec's address text stays (an -A file replaces it below); the options
        // and the preload files they name come from disk.
        let addr = spec.addr_file_text(h);
        config = config::engine_config(opts, Some(("ibacm_addr.cfg", addr.as_bytes())), &mut logf);
    } else {
        // The host's options as parsed by the fabric, with the command line's
        // overrides and the run directory's log file: the ones the logger runs with.
        config.options = opts.options.clone();
        config.netlink_pid = std::process::id();
    }
    let topo = acm_io_sim::topology::Topology::new(&spec);
    let devices = topo.devices(h, spec.sm.lid, spec.sm.sl);
    if let Some(path) = &args.addr_file {
        let name = spec.hosts[h.index()].name.clone();
        let mut logf = |m: String| log.log(Level::Basic, "acm_config", &m);
        let spec = addr_file::AddrFileSpec::from_arg(Some(path));
        let addr = addr_file::load_or_generate(&spec, &paths.dir, &name, &devices, &mut logf);
        config.addr_file = addr.map(|a| {
            let (file, d) = acm_engine::config::AddrFile::parse(&a.name, &a.text);
            config.diagnostics.extend(d);
            file
        });
    }
    config::warn_unknown_devices(&mut config, &devices);
    let seed = acm_io_sim::sim::seed_from_env();
    match simulated_providers(plugins) {
        Some(factory) => SimBackend::with_providers(spec, h, config, seed, label, factory),
        None => SimBackend::new(spec, h, config, seed, label),
    }
}

/// The provider factory of an engine on a simulated fabric (`--fabric sim` or `hub`):
/// none when the built-in runs alone; C providers get a null `acm_device.verbs` (the
/// simulator has no verbs).
fn simulated_providers(plugins: &plugins::Plugins) -> Option<acm_io_sim::ProviderFactory> {
    if plugins.builtin_only() {
        return None;
    }
    let plugins = plugins.clone();
    let verbs = plugins::no_verbs();
    Some(Box::new(move |c| plugins.providers(c, &verbs)))
}

/// This host's engine, attached to a fabric hub.
fn hub_backend(
    args: &Args,
    paths: &RunPaths,
    opts: &LoadedOptions,
    socket: &Path,
    host: &str,
    plugins: &plugins::Plugins,
    log: &mut Logger,
) -> Result<HubBackend, StartError> {
    let my_socket = paths.dir.join(format!("ibacm-hub-{host}.sock"));
    let addr_spec = addr_file::hub_spec(
        args.addr_file.as_deref(),
        args.run_dir.as_deref(),
        &paths.dir,
    );
    let mut lines = Vec::new();
    let backend = HubBackend::attach(
        socket,
        &my_socket,
        host,
        |setup| {
            let mut logf = |m: String| lines.push(m);
            let addr = addr_file::load_or_generate(
                &addr_spec,
                &paths.dir,
                &setup.name,
                &setup.devices,
                &mut logf,
            );
            let mut config = config::engine_config(
                opts,
                addr.as_ref().map(|a| (a.name.as_str(), a.text.as_slice())),
                &mut logf,
            );
            config::warn_unknown_devices(&mut config, &setup.devices);
            config
        },
        simulated_providers(plugins),
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
