//! `fabric-bench`: every host of a generated N-host fabric resolves a set of IPv4
//! destinations (all the others, or K random ones), measured twice in one run: with
//! our queue depths and SA behaviour under load, and with the reference's limits
//! (`resolve_depth 1`, `sa_depth 1`, BUSY a failure, fixed SA and ACM timeouts, fixed
//! depth).
//!
//! ```text
//! cargo run --release -p fabric-bench -- --hosts 1024 --pattern all-to-all
//! cargo run --release -p fabric-bench -- --hosts 1024 --pattern random-16 --route-prot sa
//! cargo run --release -p fabric-bench -- --hosts 4096 --route-prot sa --sa-rate 20000
//! ```
//!
//! `--sa-rate` gives the simulated SA a finite service rate and a queue of a second's
//! worth of requests (`SaSpec::scalable_sa`; `--sa-queue`, `--sa-overflow` change
//! them), and `--recv-ns`/`--send-ns` a cost per MAD received by a host and sent by a
//! port: the job-start storm against an SA as fast as a real one.
//!
//! Each configuration runs in a child process of this binary (`--only ours|reference`),
//! so the peak memory (`VmHWM`) reported is that configuration's alone. A run builds
//! the fabric with [`FabricSpec::generate`], runs the simulation to idle after start-up
//! (the multicast joins), submits every RESOLVE at one instant (source = the host's
//! IPv4 address; `--waves W` submits them in W slices instead, each run to idle), and
//! runs to idle again. It then checks the simulator's invariants
//! and the SA budget: no SA PathRecord query at all with `route_prot acm`, and at most
//! one per (source, destination) with `route_prot sa`. Any failure exits non-zero.

use acm_engine::{Counter, Instant};
use acm_io_sim::rng::SimRng;
use acm_io_sim::sim::{Outcome, requests};
use acm_io_sim::spec::{FabricSpec, GenOptions, NicSpec, SaOverflow, SaSpec};
use acm_io_sim::{HostId, Sim};
use acm_proto::client::{HeaderPacket, Status};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::process::{Command, ExitCode, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant as WallInstant};

/// Our `resolve_depth`. Every outstanding ACM resolve is a multicast that every host of
/// the partition receives, so when all hosts start resolving at once, depth D costs
/// D × N² deliveries fabric-wide while the answer time does not improve (the first
/// round of requests teaches every host every requester's address). Depth pays only
/// for a host resolving many cold destinations while the others are quiet (K
/// destinations take ⌈K / D⌉ round trips instead of K). 4 takes that gain for a
/// bounded (4×) cost in a storm; 64 costs 64× (measured: 2 GB and 33,000 ACM MADs at
/// 256 hosts all-to-all against 0.2 GB and 516 with depth 1, same answer time).
const OURS_RESOLVE_DEPTH: u32 = 4;
/// Our `sa_depth`: PathRecord queries in flight per port. With `route_prot sa` a host
/// needs one query per destination, and with depth 1 they queue behind each other
/// (N − 1 SA round trips for all-to-all); 16 cuts that 16-fold while keeping what a
/// whole fabric asks the SA at once (16 × N) within what a real SA answers quickly.
/// Without `--sa-rate` the simulated SA answers every query after `sm.response_us`
/// whatever the load, so larger depths look better there than on a real subnet; with
/// it, the depth is only the ceiling of each port's adaptive window
/// (`sa_adaptive_depth`), which BUSY answers and timeouts shrink.
const OURS_SA_DEPTH: u32 = 16;

/// The options that turn our behaviour under load off, for the reference's
/// configuration: BUSY fails the query, the SA timeout stays `timeout`, the depth
/// stays `sa_depth` (docs/protocol/sa.md §8), and the ACM retry wait stays `timeout`
/// (docs/ibacmp.md §10).
const REFERENCE_SA_OPTIONS: &str =
    "sa_busy_retries 0\nsa_timeout_max 0\nsa_adaptive_depth no\nacm_timeout_max 0\n";

#[derive(Parser, Debug, Clone)]
#[command(
    name = "fabric-bench",
    about = "All hosts of a simulated fabric resolve each other; ours vs the reference's limits"
)]
struct Args {
    /// Number of hosts in the generated fabric (32 per leaf switch).
    #[arg(long, default_value_t = 64)]
    hosts: usize,
    /// `all-to-all` (every host resolves every other host) or `random-K` (every host
    /// resolves K distinct other hosts drawn from the seed).
    #[arg(long, default_value = "all-to-all")]
    pattern: Pattern,
    /// How routes are found once the address is known.
    #[arg(long, value_enum, default_value_t = RouteProt::Acm)]
    route_prot: RouteProt,
    /// Seed of the simulation and of the random destinations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the results as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
    /// `resolve_depth` of the "ours" configuration.
    #[arg(long, default_value_t = OURS_RESOLVE_DEPTH)]
    ours_resolve_depth: u32,
    /// `sa_depth` of the "ours" configuration.
    #[arg(long, default_value_t = OURS_SA_DEPTH)]
    ours_sa_depth: u32,
    /// Submit the resolves in this many waves, running to idle after each: wave w holds
    /// the w-th slice of every host's destinations. 1 (the default) submits everything
    /// at one instant; more waves bound what is in flight at once (memory), but later
    /// waves then find addresses the earlier ones taught.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    waves: u32,
    /// Count SA PathRecord queries per (source, destination) exactly: runs the engines
    /// at `log_level 2` and keeps their logs (the engine names the destination of each
    /// query there), which costs time and memory; without it the SA budget is checked
    /// per source.
    #[arg(long)]
    check_pairs: bool,
    /// The SA's service rate, queries per second of every kind (`[sa]` of the fabric
    /// file, `SaSpec::scalable_sa`); 0 (the default) is an SA without limits.
    #[arg(long, default_value_t = 0)]
    sa_rate: u64,
    /// Requests the SA holds at once with `--sa-rate`; by default one second of them
    /// (the rate).
    #[arg(long)]
    sa_queue: Option<u32>,
    /// What the SA does past its queue: answer BUSY or drop.
    #[arg(long, value_enum, default_value_t = Overflow::Busy)]
    sa_overflow: Overflow,
    /// Nanoseconds each host takes to receive one UD MAD (`[nic] recv_ns`).
    #[arg(long, default_value_t = 0)]
    recv_ns: u64,
    /// Nanoseconds each port takes to send one MAD (`[nic] send_ns`).
    #[arg(long, default_value_t = 0)]
    send_ns: u64,
    /// Internal: run one configuration in this process and print its result as JSON.
    #[arg(long, value_enum, hide = true)]
    only: Option<Config>,
}

/// Which destinations each host resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    AllToAll,
    Random(usize),
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all-to-all" {
            return Ok(Self::AllToAll);
        }
        let k = s
            .strip_prefix("random-")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&k| k > 0);
        k.map(Self::Random)
            .ok_or_else(|| format!("{s:?}: expected all-to-all or random-K with K ≥ 1"))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AllToAll => f.write_str("all-to-all"),
            Self::Random(k) => write!(f, "random-{k}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RouteProt {
    Acm,
    Sa,
}

impl RouteProt {
    fn as_str(self) -> &'static str {
        match self {
            Self::Acm => "acm",
            Self::Sa => "sa",
        }
    }
}

/// `--sa-overflow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Overflow {
    Busy,
    Drop,
}

impl Overflow {
    fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Drop => "drop",
        }
    }
}

/// The two configurations measured in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Config {
    /// Our depths (`--ours-resolve-depth`, `--ours-sa-depth`; by default
    /// [`OURS_RESOLVE_DEPTH`], [`OURS_SA_DEPTH`]).
    Ours,
    /// The reference's limits: `resolve_depth 1`, `sa_depth 1`, and our SA behaviour
    /// under load turned off ([`REFERENCE_SA_OPTIONS`]).
    Reference,
}

impl Config {
    fn depths(self, args: &Args) -> (u32, u32) {
        match self {
            Self::Ours => (args.ours_resolve_depth, args.ours_sa_depth),
            Self::Reference => (1, 1),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Ours => "ours",
            Self::Reference => "reference",
        }
    }
}

/// What one configuration measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Report {
    config: Config,
    options: String,
    hosts: usize,
    pattern: String,
    route_prot: RouteProt,
    seed: u64,
    waves: u32,
    /// Distinct (source, destination) pairs resolved: the requests submitted.
    requests: u64,
    /// Wall time of building the fabric and running start-up to idle.
    setup_wall_s: f64,
    /// Wall time from the first submit to idle (after the last wave).
    wall_s: f64,
    /// Simulated time of start-up (boot to idle).
    startup_sim_ms: f64,
    /// Simulated time from the submit instant to the last reply (with waves, the sum of
    /// each wave's).
    sim_ms: f64,
    /// Median, 99th percentile and maximum of the per-request simulated latency (reply
    /// instant minus its wave's submit instant).
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    latency_max_ms: f64,
    /// `--sa-rate` (0: unlimited) and the SA's queue bound.
    sa_rate: u64,
    sa_queue: u32,
    /// The SA's own limit: the PathRecord queries it served ÷ its rate (0 without a
    /// rate). No schedule can answer them sooner.
    sa_bound_ms: f64,
    /// PathRecord queries the providers asked for (the engines' Route Query counters):
    /// one per (source, destination) route needed. `sa_path_queries` also counts each
    /// time one was sent again after a BUSY answer or a timeout.
    route_queries: u64,
    /// What the SA did in the resolve phase: PathRecord queries served, MCMemberRecord
    /// requests served, other requests served, answered BUSY (queue full), dropped
    /// (queue full), and the most it held at once over the whole run.
    sa_served_path: u64,
    sa_served_mcmember: u64,
    sa_served_other: u64,
    sa_busy: u64,
    sa_dropped: u64,
    sa_peak_queue: u64,
    /// Other SA MADs the engines sent in the resolve phase.
    sa_other: u64,
    /// umad retries and sends that timed out after their last try, resolve phase.
    umad_retries: u64,
    umad_timeouts: u64,
    /// The most UD MADs one host received over the whole run.
    max_mads_received: u64,
    /// Events and engine timer firings the scheduler processed (the `Sim::step` calls
    /// that would have done something; `Sim::step_batch` counts each event of a
    /// batch), resolve phase.
    steps: u64,
    /// Counts over the resolve phase only (start-up subtracted). `events` is
    /// `Stats::events`, the records added to the trace (about two per event, plus one
    /// per client reply).
    events: u64,
    acm_mads: u64,
    sa_path_queries: u64,
    sa_joins: u64,
    /// Counts of start-up (boot to idle).
    startup_steps: u64,
    startup_events: u64,
    startup_acm_mads: u64,
    startup_sa_joins: u64,
    replies: u64,
    successes: u64,
    failures: u64,
    /// Requests that ended without a reply (closed, reset or never answered).
    unanswered: u64,
    /// The most SA PathRecord queries one host sent (its engine's Route Query counter).
    max_route_queries_per_source: u64,
    /// With `--check-pairs`: the most SA PathRecord queries for one (source,
    /// destination) pair.
    max_route_queries_per_pair: Option<u64>,
    /// `VmHWM` of the process running this configuration, read when the run went idle.
    peak_rss_mib: f64,
    invariants_ok: bool,
    /// The first invariant violations (at most 10) and their total.
    violations: Vec<String>,
    violation_count: usize,
    /// SA budget failures (route_prot acm: any query; route_prot sa: more than one per
    /// (source, destination)).
    sa_budget_failures: Vec<String>,
}

impl Report {
    fn ok(&self) -> bool {
        self.invariants_ok && self.sa_budget_failures.is_empty()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let min = match args.pattern {
        Pattern::AllToAll => 2,
        Pattern::Random(k) => k + 1,
    };
    if args.hosts < min {
        eprintln!(
            "fabric-bench: --pattern {} needs at least {min} hosts",
            args.pattern
        );
        return ExitCode::from(2);
    }
    if args.hosts > acm_io_sim::spec::MAX_GENERATED_HOSTS {
        eprintln!(
            "fabric-bench: at most {} hosts",
            acm_io_sim::spec::MAX_GENERATED_HOSTS
        );
        return ExitCode::from(2);
    }
    if let Some(config) = args.only {
        let report = run(&args, config);
        println!(
            "{}",
            serde_json::to_string(&report).expect("a report serializes")
        );
        return if report.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let mut reports = Vec::new();
    let mut failed = false;
    for config in [Config::Ours, Config::Reference] {
        match run_child(&args, config) {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("fabric-bench: {} configuration: {e}", config.name());
                failed = true;
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialize")
        );
    } else {
        print_table(&args, &reports);
    }
    if !failed && reports.iter().all(Report::ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one configuration in a child process of this binary and reads its report.
fn run_child(args: &Args, config: Config) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--hosts")
        .arg(args.hosts.to_string())
        .arg("--pattern")
        .arg(args.pattern.to_string())
        .arg("--route-prot")
        .arg(args.route_prot.as_str())
        .arg("--seed")
        .arg(args.seed.to_string())
        .arg("--ours-resolve-depth")
        .arg(args.ours_resolve_depth.to_string())
        .arg("--ours-sa-depth")
        .arg(args.ours_sa_depth.to_string())
        .arg("--waves")
        .arg(args.waves.to_string())
        .arg("--sa-rate")
        .arg(args.sa_rate.to_string())
        .arg("--sa-overflow")
        .arg(args.sa_overflow.as_str())
        .arg("--recv-ns")
        .arg(args.recv_ns.to_string())
        .arg("--send-ns")
        .arg(args.send_ns.to_string())
        .arg("--only")
        .arg(config.name());
    if let Some(q) = args.sa_queue {
        cmd.arg("--sa-queue").arg(q.to_string());
    }
    if args.no_progress {
        cmd.arg("--no-progress");
    }
    if args.check_pairs {
        cmd.arg("--check-pairs");
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("spawn: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    match line {
        Some(l) => serde_json::from_str(l).map_err(|e| format!("bad report: {e}")),
        None => Err(format!("child failed ({}) without a report", out.status)),
    }
}

/// The destinations (host indices) every host resolves, in submission order.
struct Destinations {
    hosts: usize,
    /// `random-K`: each host's K destinations, drawn once; `None` for all-to-all,
    /// whose destinations are computed (host `h`'s i-th is `i`, or `i + 1` from `h` on).
    random: Option<Vec<Vec<u32>>>,
}

impl Destinations {
    fn new(pattern: Pattern, hosts: usize, seed: u64) -> Self {
        let random = match pattern {
            Pattern::AllToAll => None,
            Pattern::Random(k) => Some((0..hosts).map(|h| draw(k, hosts, seed, h)).collect()),
        };
        Self { hosts, random }
    }

    /// How many destinations each host resolves.
    fn per_host(&self) -> usize {
        match &self.random {
            None => self.hosts - 1,
            Some(r) => r.first().map_or(0, Vec::len),
        }
    }

    /// Host `h`'s `i`-th destination.
    fn get(&self, h: usize, i: usize) -> usize {
        let other = match &self.random {
            None => i,
            Some(r) => r[h][i] as usize,
        };
        if other >= h { other + 1 } else { other }
    }
}

/// K distinct indices among host `h`'s N − 1 others (0..N − 1, before skipping `h`),
/// drawn from a generator derived from the seed and the host.
fn draw(k: usize, hosts: usize, seed: u64, h: usize) -> Vec<u32> {
    let mut rng = SimRng::derive(seed, 0xFAB0_0000 + h as u64);
    let others = hosts - 1;
    if 2 * k <= others {
        let mut seen = HashSet::with_capacity(k);
        let mut picked = Vec::with_capacity(k);
        while picked.len() < k {
            let i = rng.below(others as u64) as u32;
            if seen.insert(i) {
                picked.push(i);
            }
        }
        picked
    } else {
        // Partial Fisher–Yates.
        let mut all: Vec<u32> = (0..others as u32).collect();
        for i in 0..k {
            let j = i + rng.below((others - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }
}

/// VmHWM (peak resident set) of this process, in KiB.
fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// Runs the whole workload for one configuration.
fn run(args: &Args, config: Config) -> Report {
    let (resolve_depth, sa_depth) = config.depths(args);
    let mut options = format!(
        "route_prot {}\nresolve_depth {resolve_depth}\nsa_depth {sa_depth}\n",
        args.route_prot.as_str()
    );
    if config == Config::Reference {
        options.push_str(REFERENCE_SA_OPTIONS);
    }
    if args.check_pairs {
        options.push_str("log_level 2\n");
    }
    let setup_start = WallInstant::now();
    let mut spec = FabricSpec::generate(
        args.hosts,
        &GenOptions {
            options: options.clone(),
            ..GenOptions::default()
        },
    );
    if args.sa_rate > 0 {
        spec.sa = SaSpec::scalable_sa(args.sa_rate);
        if let Some(q) = args.sa_queue {
            spec.sa.queue = q;
        }
        spec.sa.overflow = match args.sa_overflow {
            Overflow::Busy => SaOverflow::Busy,
            Overflow::Drop => SaOverflow::Drop,
        };
    }
    spec.nic = NicSpec {
        send_ns: args.send_ns,
        recv_ns: args.recv_ns,
    };
    let sa_spec = spec.sa;
    let ips: Vec<IpAddr> = spec.hosts.iter().map(|h| h.ips[0].addr).collect();
    let mut sim = Sim::new(spec, args.seed);
    sim.keep_logs(args.check_pairs);
    let boot = sim.now();
    let startup_steps = drive(&mut sim, None, 0);
    let startup = sim.stats();
    let sa_startup = sim.sa().stats().clone();
    let startup_sim = sim.now().saturating_duration_since(boot);
    let setup_wall = setup_start.elapsed();

    // Every (source, destination) pair, submitted at one instant (drawn host by host,
    // so the pairs are never all held at once).
    let dests = Destinations::new(args.pattern, args.hosts, args.seed);
    let per_host = dests.per_host() as u64;
    let total = per_host * args.hosts as u64;
    let bar = progress_bar(args, config, total);
    let start = WallInstant::now();
    // (first request id, submit instant) of each wave.
    let mut wave_starts: Vec<(usize, Instant)> = Vec::new();
    let waves = u64::from(args.waves);
    let mut steps = 0;
    let mut submitted = sim.request_ids().count();
    for w in 0..waves {
        wave_starts.push((submitted, sim.now()));
        let (from, to) = (
            (per_host * w / waves) as usize,
            (per_host * (w + 1) / waves) as usize,
        );
        for h in 0..args.hosts {
            for i in from..to {
                let d = dests.get(h, i);
                sim.submit(HostId(h), requests::resolve_ip(Some(ips[h]), ips[d], false));
                submitted += 1;
            }
        }
        steps += drive(&mut sim, Some(&bar), startup.replies);
    }
    let wall = start.elapsed();
    let peak_kib = vm_hwm_kib().unwrap_or(0);
    bar.finish_and_clear();
    let end = sim.stats();
    let sa_end = sim.sa().stats().clone();

    let mut latencies: Vec<u64> = Vec::with_capacity(total as usize);
    let (mut successes, mut failures, mut unanswered) = (0u64, 0u64, 0u64);
    // Simulated time to full resolution: each wave's submit instant to its last reply,
    // summed (one wave: first submit to last reply).
    let mut wave_span = vec![0u64; wave_starts.len()];
    let mut wave = 0;
    for id in sim.request_ids() {
        while wave + 1 < wave_starts.len() && id.0 >= wave_starts[wave + 1].0 {
            wave += 1;
        }
        match sim.outcome(id) {
            Outcome::Reply { bytes, at } => {
                let l = at.saturating_duration_since(wave_starts[wave].1).as_nanos() as u64;
                wave_span[wave] = wave_span[wave].max(l);
                latencies.push(l);
                let status = HeaderPacket::new_checked(bytes.as_slice()).map(|h| h.status());
                if status == Ok(Status::SUCCESS) {
                    successes += 1;
                } else {
                    failures += 1;
                }
            }
            _ => unanswered += 1,
        }
    }
    latencies.sort_unstable();
    let pct = |p: f64| -> u64 {
        if latencies.is_empty() {
            0
        } else {
            latencies[((latencies.len() - 1) as f64 * p).round() as usize]
        }
    };

    // The SA budget. route_prot acm: no PathRecord query at all. route_prot sa: at
    // most one per (source, destination). A host also asks the SA for the route back
    // to a peer whose ACM request it answers, so a source's possible destinations are
    // all the other hosts, not only those its clients asked for. Without
    // --check-pairs the bound checked is N − 1 queries per source (the engine's Route
    // Query counter) and N (N − 1) in all; with it, every query is counted by pair.
    let mut sa_budget_failures = Vec::new();
    let sa_path_queries = end.sa_path_queries - startup.sa_path_queries;
    let others = args.hosts as u64 - 1;
    let mut max_per_source = 0;
    let mut route_queries = 0;
    for h in 0..args.hosts {
        let q = sim.engine(HostId(h)).counters().get(Counter::RouteQuery);
        max_per_source = max_per_source.max(q);
        route_queries += q;
        if args.route_prot == RouteProt::Sa && q > others && sa_budget_failures.len() < 10 {
            sa_budget_failures.push(format!(
                "host {h}: {q} SA PathRecord queries, more than the {others} other hosts"
            ));
        }
    }
    let max_per_pair = if args.check_pairs {
        let (max, failures) = check_pairs(&sim, route_queries);
        sa_budget_failures.extend(failures);
        Some(max)
    } else {
        None
    };
    match args.route_prot {
        RouteProt::Acm if end.sa_path_queries > 0 => sa_budget_failures.push(format!(
            "route_prot acm sent {} SA PathRecord queries ({} during start-up)",
            end.sa_path_queries, startup.sa_path_queries
        )),
        RouteProt::Sa if route_queries > others * args.hosts as u64 => {
            sa_budget_failures.push(format!(
                "route_prot sa asked {route_queries} SA PathRecord queries, more than the {} \
                 (source, destination) pairs",
                others * args.hosts as u64
            ));
        }
        _ => {}
    }

    let (invariants_ok, violations, violation_count) = match sim.check_invariants() {
        Ok(()) => (true, Vec::new(), 0),
        Err(v) => (
            false,
            v.iter().take(10).map(ToString::to_string).collect(),
            v.len(),
        ),
    };

    Report {
        config,
        options,
        hosts: args.hosts,
        pattern: args.pattern.to_string(),
        route_prot: args.route_prot,
        seed: args.seed,
        waves: args.waves,
        requests: total,
        setup_wall_s: secs(setup_wall),
        wall_s: secs(wall),
        startup_sim_ms: ms(startup_sim.as_nanos() as u64),
        sim_ms: ms(wave_span.iter().sum()),
        latency_p50_ms: ms(pct(0.5)),
        latency_p99_ms: ms(pct(0.99)),
        latency_max_ms: ms(latencies.last().copied().unwrap_or(0)),
        sa_rate: args.sa_rate,
        sa_queue: sa_spec.queue,
        sa_bound_ms: if args.sa_rate == 0 {
            0.0
        } else {
            (sa_end.path_queries - sa_startup.path_queries) as f64 * 1000.0 / args.sa_rate as f64
        },
        route_queries,
        sa_served_path: sa_end.path_queries - sa_startup.path_queries,
        sa_served_mcmember: (sa_end.joins + sa_end.leaves + sa_end.refused)
            - (sa_startup.joins + sa_startup.leaves + sa_startup.refused),
        sa_served_other: sa_end.unsupported - sa_startup.unsupported,
        sa_busy: (sa_end.overflow_busy + sa_end.busy)
            - (sa_startup.overflow_busy + sa_startup.busy),
        sa_dropped: sa_end.overflow_dropped - sa_startup.overflow_dropped,
        sa_peak_queue: sim.sa_peak_queue() as u64,
        sa_other: end.sa_other - startup.sa_other,
        umad_retries: end.umad_retries - startup.umad_retries,
        umad_timeouts: end.umad_timeouts - startup.umad_timeouts,
        max_mads_received: sim.max_mads_received(),
        steps,
        startup_steps,
        events: end.events - startup.events,
        acm_mads: end.acm_mads - startup.acm_mads,
        sa_path_queries,
        sa_joins: end.sa_joins - startup.sa_joins,
        startup_events: startup.events,
        startup_acm_mads: startup.acm_mads,
        startup_sa_joins: startup.sa_joins,
        replies: end.replies - startup.replies,
        successes,
        failures,
        unanswered,
        max_route_queries_per_source: max_per_source,
        max_route_queries_per_pair: max_per_pair,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        invariants_ok,
        violations,
        violation_count,
        sa_budget_failures,
    }
}

/// Counts the SA PathRecord queries per (source host, destination) from the engines'
/// logs (`host{h}: acmp_resolve_path_sa: {destination}`, one line per query at
/// `log_level 2`). Returns the largest count and the failures: pairs queried more than
/// once, and a log that does not account for every query the engines counted (their
/// Route Query counters: a query sent again after a BUSY answer is the same query).
fn check_pairs(sim: &Sim, queries: u64) -> (u64, Vec<String>) {
    const ORIGIN: &str = ": acmp_resolve_path_sa: ";
    let mut counts: HashMap<(usize, &str), u64> = HashMap::new();
    for line in sim.logs() {
        let Some((head, dest)) = line.split_once(ORIGIN) else {
            continue;
        };
        let host = head
            .rsplit_once(" host")
            .and_then(|(_, h)| h.parse::<usize>().ok());
        if let Some(h) = host {
            *counts.entry((h, dest)).or_default() += 1;
        }
    }
    let logged: u64 = counts.values().sum();
    let max = counts.values().copied().max().unwrap_or(0);
    let mut failures: Vec<String> = counts
        .iter()
        .filter(|&(_, &n)| n > 1)
        .take(10)
        .map(|(&(h, d), n)| format!("host {h}: {n} SA PathRecord queries for {d}"))
        .collect();
    if logged != queries {
        failures.push(format!(
            "the engines' logs show {logged} SA PathRecord queries, their counters {queries}"
        ));
    }
    (max, failures)
}

fn progress_bar(args: &Args, config: Config, total: u64) -> ProgressBar {
    let bar = if args.no_progress {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden())
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>9} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} replies (eta {eta})",
        )
        .expect("a valid template"),
    );
    bar.set_prefix(config.name());
    bar
}

/// Steps the simulation until nothing is left, updating `bar` with the replies
/// received since `base`; returns the steps taken (events and timer firings).
/// [`Sim::step_batch`] processes a storm's multicast copies in batches and counts
/// each one as the step it would have been.
fn drive(sim: &mut Sim, bar: Option<&ProgressBar>, base: u64) -> u64 {
    let never = Instant::from_nanos(u64::MAX);
    let mut n: u64 = 0;
    let mut shown: u64 = 0;
    loop {
        let k = sim.step_batch(never);
        if k == 0 {
            break;
        }
        n += k;
        if n - shown >= 16_384
            && let Some(b) = bar
        {
            shown = n;
            b.set_position(sim.stats().replies - base);
        }
    }
    if let Some(b) = bar {
        b.set_position(sim.stats().replies - base);
    }
    n
}

fn print_table(args: &Args, reports: &[Report]) {
    println!(
        "fabric-bench: {} hosts, {}, route_prot {}, seed {}, {} wave(s), SA rate {}",
        args.hosts,
        args.pattern,
        args.route_prot.as_str(),
        args.seed,
        args.waves,
        if args.sa_rate == 0 {
            "unlimited".to_string()
        } else {
            format!("{}/s", args.sa_rate)
        }
    );
    let col = |f: &dyn Fn(&Report) -> String| -> Vec<String> { reports.iter().map(f).collect() };
    let rows: Vec<(&str, Vec<String>)> = vec![
        (
            "options",
            col(&|r| r.options.trim_end().replace('\n', ", ")),
        ),
        ("requests", col(&|r| r.requests.to_string())),
        (
            "set-up wall (build + start-up)",
            col(&|r| format!("{:.2} s", r.setup_wall_s)),
        ),
        (
            "start-up: sim time / steps / ACM MADs / joins",
            col(&|r| {
                format!(
                    "{:.3} ms / {} / {} / {}",
                    r.startup_sim_ms, r.startup_steps, r.startup_acm_mads, r.startup_sa_joins
                )
            }),
        ),
        (
            "wall time (resolves)",
            col(&|r| format!("{:.2} s", r.wall_s)),
        ),
        (
            "sim time to full resolution",
            col(&|r| format!("{:.3} ms", r.sim_ms)),
        ),
        (
            "latency p50 / p99 / max",
            col(&|r| {
                format!(
                    "{:.3} / {:.3} / {:.3} ms",
                    r.latency_p50_ms, r.latency_p99_ms, r.latency_max_ms
                )
            }),
        ),
        (
            "SA limit (PathRecord served ÷ rate)",
            col(&|r| format!("{:.3} ms", r.sa_bound_ms)),
        ),
        (
            "SA served: PathRecord / MCMember / other",
            col(&|r| {
                format!(
                    "{} / {} / {}",
                    r.sa_served_path, r.sa_served_mcmember, r.sa_served_other
                )
            }),
        ),
        (
            "SA BUSY / dropped / peak queue",
            col(&|r| format!("{} / {} / {}", r.sa_busy, r.sa_dropped, r.sa_peak_queue)),
        ),
        (
            "umad retries / timeouts",
            col(&|r| format!("{} / {}", r.umad_retries, r.umad_timeouts)),
        ),
        (
            "max MADs one host received",
            col(&|r| r.max_mads_received.to_string()),
        ),
        (
            "steps (events + timer firings)",
            col(&|r| r.steps.to_string()),
        ),
        (
            "Stats::events (trace records)",
            col(&|r| r.events.to_string()),
        ),
        ("ACM MADs", col(&|r| r.acm_mads.to_string())),
        (
            "SA PathRecord queries asked / sent",
            col(&|r| format!("{} / {}", r.route_queries, r.sa_path_queries)),
        ),
        (
            "max PathRecord queries by one host",
            col(&|r| r.max_route_queries_per_source.to_string()),
        ),
        (
            "max PathRecord queries for one pair",
            col(&|r| {
                r.max_route_queries_per_pair
                    .map_or_else(|| "(--check-pairs)".to_string(), |n| n.to_string())
            }),
        ),
        ("SA joins", col(&|r| r.sa_joins.to_string())),
        (
            "successes / failures / unanswered",
            col(&|r| format!("{} / {} / {}", r.successes, r.failures, r.unanswered)),
        ),
        (
            "peak memory (VmHWM)",
            col(&|r| format!("{:.1} MiB", r.peak_rss_mib)),
        ),
        (
            "invariants",
            col(&|r| {
                if r.invariants_ok {
                    "ok".to_string()
                } else {
                    format!("{} violations", r.violation_count)
                }
            }),
        ),
        (
            "SA budget",
            col(&|r| {
                if r.sa_budget_failures.is_empty() {
                    "ok".to_string()
                } else {
                    "FAILED".to_string()
                }
            }),
        ),
    ];
    let w0 = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..reports.len())
        .map(|i| {
            rows.iter()
                .map(|(_, v)| v[i].chars().count())
                .chain(std::iter::once(reports[i].config.name().len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    print!("{:w0$}", "");
    for (r, w) in reports.iter().zip(&widths) {
        print!("  {:>w$}", r.config.name());
    }
    println!();
    for (k, vals) in &rows {
        print!("{k:w0$}");
        for (v, w) in vals.iter().zip(&widths) {
            print!("  {v:>w$}");
        }
        println!();
    }
    for r in reports {
        for v in &r.violations {
            println!("{}: invariant violation: {v}", r.config.name());
        }
        if r.violation_count > r.violations.len() {
            println!(
                "{}: … and {} more violations",
                r.config.name(),
                r.violation_count - r.violations.len()
            );
        }
        for f in &r.sa_budget_failures {
            println!("{}: SA budget: {f}", r.config.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(d: &Destinations, h: usize) -> Vec<usize> {
        (0..d.per_host()).map(|i| d.get(h, i)).collect()
    }

    #[test]
    fn all_to_all_is_every_other_host_in_order() {
        let d = Destinations::new(Pattern::AllToAll, 5, 1);
        assert_eq!(d.per_host(), 4);
        assert_eq!(all(&d, 0), [1, 2, 3, 4]);
        assert_eq!(all(&d, 2), [0, 1, 3, 4]);
        assert_eq!(all(&d, 4), [0, 1, 2, 3]);
    }

    #[test]
    fn random_k_is_distinct_never_self_and_seeded() {
        for (hosts, k) in [(100, 7), (10, 9), (10, 6), (2, 1)] {
            let d = Destinations::new(Pattern::Random(k), hosts, 42);
            assert_eq!(d.per_host(), k);
            for h in 0..hosts {
                let mut v = all(&d, h);
                assert!(v.iter().all(|&x| x != h && x < hosts), "{v:?}");
                v.sort_unstable();
                v.dedup();
                assert_eq!(v.len(), k);
            }
            let again = Destinations::new(Pattern::Random(k), hosts, 42);
            assert_eq!(all(&d, 1), all(&again, 1));
        }
        let a = Destinations::new(Pattern::Random(8), 1000, 1);
        let b = Destinations::new(Pattern::Random(8), 1000, 2);
        assert_ne!(all(&a, 0), all(&b, 0));
    }

    #[test]
    fn patterns_parse_and_print() {
        assert_eq!("all-to-all".parse(), Ok(Pattern::AllToAll));
        assert_eq!("random-16".parse(), Ok(Pattern::Random(16)));
        assert!("random-0".parse::<Pattern>().is_err());
        assert!("random".parse::<Pattern>().is_err());
        assert_eq!(Pattern::Random(3).to_string(), "random-3");
    }
}
