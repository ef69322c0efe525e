//! A whole load run: start the clients, release them together, wait for them, merge
//! what they counted.

use super::args::LoadConfig;
use super::progress::{Goal, Progress};
use super::stats::Stats;
use super::worker::{self, Plan, Shared, Stop};
use std::io;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What a run measured.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Every client's figures, merged.
    pub stats: Stats,
    /// From the moment every client was connected (and warmed up) to the end of the
    /// last one.
    pub elapsed: Duration,
}

/// Runs `config`, with a progress bar when `progress`.
///
/// # Errors
/// A client thread cannot be started.
pub(crate) fn run(config: &LoadConfig, progress: bool) -> io::Result<Outcome> {
    let shared = Arc::new(Shared::default());
    let barrier = Arc::new(Barrier::new(config.clients as usize + 1));
    let mut handles = Vec::with_capacity(config.clients as usize);
    for id in 0..config.clients {
        let plan = Plan {
            id,
            clients: config.clients,
            target: config.target.clone(),
            templates: Arc::clone(&config.templates),
            mix: config.mix,
            pipeline: config.pipeline,
            stop: config.stop,
            timeout: config.timeout,
            warmup: config.warmup,
        };
        let (shared, barrier) = (Arc::clone(&shared), Arc::clone(&barrier));
        let spawned = std::thread::Builder::new()
            .name(format!("acm-load-{id}"))
            .spawn(move || worker::run(&plan, &shared, &barrier));
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The clients already started wait at the barrier for the others:
                // they cannot be released without running, so give up on the process.
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot start client thread {id}: {e}"),
                ));
            }
        }
    }
    barrier.wait();
    let start = *shared.start.get_or_init(Instant::now);
    let goal = match config.stop {
        Stop::Count(n) => Goal::Count(n),
        Stop::Duration(d) => Goal::Duration(d),
    };
    let counted = Arc::clone(&shared);
    let bar = Progress::start(progress, goal, move || {
        counted.done.load(std::sync::atomic::Ordering::Relaxed)
    });
    let mut stats = Stats::new(&config.mix);
    for h in handles {
        match h.join() {
            Ok(s) => stats.merge(&s),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    let elapsed = start.elapsed();
    bar.finish();
    Ok(Outcome { stats, elapsed })
}
