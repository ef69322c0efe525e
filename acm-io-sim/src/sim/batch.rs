//! Storms in batches: many multicast fan-outs due at one instant, processed host by
//! host instead of fan-out by fan-out, with exactly the outcome of processing them one
//! by one.
//!
//! When every host multicasts at once, the copies due at one instant are N fan-outs of
//! N copies each, and in schedule order every copy goes to another host than the one
//! before: each touches a different engine's state, which is out of the cache again by
//! the time that engine's next copy comes. Taking up to [`BATCH`] fan-outs and
//! delivering, host after host, that host's copies from each of them lets a host's
//! state stay in the cache for all of them (on 4,096 hosts this halves the run).
//!
//! It changes nothing observable:
//! * every host receives the same copies in the same order (the fan-outs' order, and
//!   within one fan-out the target order), at the same instant, so every engine goes
//!   through the same inputs and gives the same outputs;
//! * what processing a copy does beyond its host is kept with its fan-out and done
//!   afterwards, fan-out after fan-out (a fan-out's copies are processed in their
//!   order, so that is schedule order): the records added to the trace, the events
//!   scheduled (so they get the sequence numbers they would have had) and the
//!   invariant violations found;
//! * the rest of the simulator's state a copy's processing changes is its host's own
//!   (connections, umad sends, QP tables, its requests' outcomes, what it learned), a
//!   counter, or a per-link random stream only that host sends on; ACM MADs never make
//!   an engine open or close a QP or join or leave a group, the only changes that could
//!   alter another host's deliveries;
//! * events a copy schedules at the same instant run after the whole bucket, batched or
//!   not, and timers due at that instant run after its events either way.
//!
//! Batches are not used while host logs are kept or a program outside serves a host (both take
//! output in processing order), nor by [`Sim::step`], which processes exactly one
//! event; `tests/storm.rs` compares batched and step-by-step runs.

use super::{Event, Fanout, Sim};
use acm_engine::Instant;

/// Fan-outs processed at once (what their effects are kept for in the meantime is a
/// few dozen bytes per copy).
const BATCH: usize = 64;

impl Sim {
    /// Processes what is due by `limit`, as [`Sim::step`] does, but when the next
    /// events are multicast fan-outs due at one instant, up to 64 of them at once (see
    /// the module docs). Returns how many events and timer firings were processed: the
    /// number of [`Sim::step`] calls it stands for, 0 when nothing is due by `limit`.
    pub fn step_batch(&mut self, limit: Instant) -> u64 {
        if let Some(n) = self.fanout_batch(limit) {
            return n;
        }
        u64::from(self.step(limit))
    }

    /// Runs a batch of fan-outs, if the next events due make one; how many copies it
    /// delivered.
    fn fanout_batch(&mut self, limit: Instant) -> Option<u64> {
        if self.keep_logs || self.driven.is_some() {
            return None;
        }
        let (&(t, _), bucket) = self.queue.first_key_value()?;
        // A timer due earlier goes first; at the same instant, events do.
        if t > limit || self.timers.first().is_some_and(|&(tt, _)| tt < t) {
            return None;
        }
        let whole = |e: &Event| matches!(e, Event::UdFanout(f) if f.fresh);
        if bucket.len() < 2 || !bucket.iter().take(2).all(whole) {
            return None;
        }
        let mut first = self.queue.first_entry()?;
        let bucket = first.get_mut();
        // Each fan-out, and whether copies are left in it.
        let mut fans: Vec<(Box<Fanout>, bool)> = Vec::with_capacity(BATCH);
        while fans.len() < BATCH && bucket.front().is_some_and(whole) {
            if let Some(Event::UdFanout(fan)) = bucket.pop_front() {
                fans.push((fan, true));
            }
        }
        if bucket.is_empty() {
            first.remove();
        }
        self.now = self.now.max(t);

        let mut copies = 0;
        loop {
            let host = fans
                .iter()
                .filter(|(_, left)| *left)
                .map(|(f, _)| f.next_host())
                .min();
            let Some(host) = host else { break };
            for (f, (fan, left)) in fans.iter_mut().enumerate() {
                while *left && fan.next_host() == host {
                    // What it does beyond its host waits with its fan-out's.
                    self.capture(f);
                    let (ev, more) = fan.take(&self.spec);
                    *left = more;
                    copies += 1;
                    self.process(ev);
                }
            }
        }
        self.release();
        Some(copies)
    }

    /// Keeps what processing a copy of fan-out `f` does to the trace, the schedule
    /// and the violations, instead of doing it. A fan-out's copies are processed in
    /// their order, so what is kept for one is in schedule order.
    fn capture(&mut self, f: usize) {
        self.trace.capture(f);
        self.inv.capture(f);
        self.batched.capture(f);
    }

    /// Does what was kept, fan-out after fan-out: schedule order.
    fn release(&mut self) {
        self.trace.release();
        self.inv.release();
        // Taken out while they are scheduled, so that `schedule` finds no batch running.
        let mut batched = std::mem::take(&mut self.batched);
        batched.release(|(at, ev)| self.schedule(at, ev));
        self.batched = batched;
    }
}
