//! The progress bar (indicatif, on stderr): shown only when stderr is a terminal and
//! `--quiet` is not given. A thread redraws it ten times a second from the clients'
//! shared counter of answered requests, so the clients themselves never touch it.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the bar fills up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// A number of requests (`--count`).
    Count(u64),
    /// A length of time (`--duration`).
    Duration(Duration),
}

/// A running progress bar; [`finish`](Self::finish) clears it.
#[derive(Debug)]
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Whether a bar would be shown: stderr is a terminal and it is not `quiet`.
    #[must_use]
    pub(crate) fn wanted(quiet: bool) -> bool {
        !quiet && std::io::stderr().is_terminal()
    }

    /// Starts the bar when `enabled`; `done` tells how many requests are finished.
    #[must_use]
    pub(crate) fn start(
        enabled: bool,
        goal: Goal,
        done: impl Fn() -> u64 + Send + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = enabled.then(|| {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("acm-load-progress".into())
                .spawn(move || draw(goal, &done, &stop))
                .ok()
        });
        Self {
            stop,
            thread: thread.flatten(),
        }
    }

    /// Stops and clears the bar.
    pub(crate) fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(goal: Goal, done: &dyn Fn() -> u64, stop: &AtomicBool) {
    let start = Instant::now();
    let (len, template) = match goal {
        Goal::Count(n) => (
            n,
            "[{elapsed_precise}] {wide_bar} {human_pos}/{human_len} requests {msg}",
        ),
        Goal::Duration(d) => (
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            "[{elapsed_precise}] {wide_bar} {msg}",
        ),
    };
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let n = done();
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let rate = format!("{:.0} requests/s", n as f64 / secs);
        match goal {
            Goal::Count(_) => {
                bar.set_position(n);
                bar.set_message(rate);
            }
            Goal::Duration(_) => {
                let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                bar.set_position(ms.min(len));
                bar.set_message(format!("{n} requests, {rate}"));
            }
        }
    }
    bar.finish_and_clear();
}
