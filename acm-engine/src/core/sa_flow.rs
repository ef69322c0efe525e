//! SA MADs between the providers and the kernel: sending through the port's agent
//! with the port's current timeout and depth, answers matched back to their provider,
//! and BUSY answers waited out and sent again instead of failing the query
//! (docs/protocol/sa.md §8).
//!
//! The reference hands a BUSY answer to its handler as if it were a record
//! (docs/reference-quirks.md §6); `sa_busy_retries 0` hands it to the provider, which
//! fails the query as a timeout. Otherwise a BUSY MAD frees its credit, waits
//! `sa_backoff_ms × 2^k` (k its BUSY answers so far, at most 6) times a factor drawn
//! from the engine's seed between ½ and 1½ (so hosts told BUSY together do not come
//! back together), and goes back to the head of the port's queue; only after
//! `sa_busy_retries` BUSY answers does the provider see one. A MAD that umad gives back
//! unanswered while the SA answered others since it left (an SA that drops what it
//! cannot queue) is retried the same way, from the same budget; one that timed out
//! while the SA said nothing at all fails, as the reference's does.

use super::provider_call::{Call, ProviderCall};
use super::sa_agent::{self, Submit, Waiting};
use super::{Core, port_in};
use crate::Instant;
use crate::device::PortId;
use crate::io::{FabricOp, Mad, SaDest, SaSend};
use crate::log::{Level, log};
use acm_proto::client::Status;
use acm_proto::mad::{MadHeaderPacket, Method, UmadStatus};
use core::time::Duration;

/// The most doublings of the back-off.
const MAX_BACKOFF_SHIFT: u32 = 6;

impl Core {
    /// Sends a provider's SA MAD through the port's agent.
    pub(crate) fn send_sa(
        &mut self,
        provider: usize,
        port: PortId,
        mad: Mad,
    ) -> Result<(), Status> {
        let limit = self.config.limits.sa_queue;
        let now = self.now;
        let opts = &self.config.options;
        let Some(p) = port_in(&mut self.devices, port) else {
            return Err(Status::ETIMEDOUT);
        };
        if !p.active {
            return Err(Status::ETIMEDOUT);
        }
        let depth = p.sa.control.credits(opts, now);
        let timeout_ms = p.sa.control.timeout_ms(opts);
        let dest = sa_agent::sa_dest(&p.attrs);
        match p.sa.submit(provider, mad, depth, limit, now) {
            Submit::Send(tid, mad) => {
                self.post_sa(port, tid, dest, timeout_ms, mad);
                Ok(())
            }
            Submit::Queued => Ok(()),
            Submit::Full => {
                log!(
                    self,
                    Level::Basic,
                    "acm_send_sa_mad",
                    "SA queue full on port {}",
                    port.port
                );
                Err(Status::ENOMEM)
            }
        }
    }

    /// Posts the port's waiting MADs while it has credits.
    pub(crate) fn pump_sa(&mut self, port: PortId) {
        let now = self.now;
        loop {
            let opts = &self.config.options;
            let Some(p) = port_in(&mut self.devices, port) else {
                return;
            };
            let depth = p.sa.control.credits(opts, now);
            let timeout_ms = p.sa.control.timeout_ms(opts);
            let dest = sa_agent::sa_dest(&p.attrs);
            let Some((tid, mad)) = p.sa.next_ready(depth, now) else {
                return;
            };
            self.post_sa(port, tid, dest, timeout_ms, mad);
        }
    }

    /// Puts an SA MAD on the fabric with umad's configured retries (the port's agent
    /// let it go, or it is one of the engine's own subscriptions).
    pub(crate) fn post_sa(
        &mut self,
        port: PortId,
        tid: u64,
        dest: SaDest,
        timeout_ms: u32,
        mad: Mad,
    ) {
        let retries = self.config.options.retries;
        self.push_fabric(FabricOp::SaSend(SaSend {
            port,
            tid,
            dest,
            timeout_ms,
            retries,
            mad,
        }));
    }

    /// When the first MAD waiting out a BUSY back-off is due, on any port.
    pub(crate) fn sa_next_due(&self) -> Option<Instant> {
        self.devices
            .iter()
            .flat_map(|d| d.ports.iter())
            .filter_map(|p| p.sa.next_due())
            .min()
    }

    /// Sends again the MADs whose back-off is over.
    pub(crate) fn sa_release_due(&mut self) {
        let now = self.now;
        for port in self.ports_due(|p| p.sa.release_due(now)) {
            self.pump_sa(port);
        }
    }

    /// Holds a MAD the SA refused (BUSY) or lost while answering others for its
    /// back-off, then lets the next waiting MAD go.
    /// `busy`: the SA said BUSY (else the MAD timed out while the SA answered others).
    fn retry_later(&mut self, port: PortId, tid: u64, f: sa_agent::InFlight, busy: bool) {
        let why = if busy { "busy" } else { "timed out" };
        let wait = self.backoff(f.busy + 1);
        log!(
            self,
            Level::Verbose,
            "acm_sa_handler",
            "SA query tid {tid:#x} {why}, sent again in {} ms",
            wait.as_millis()
        );
        let due = self.now + wait;
        let opts = &self.config.options;
        if let Some(p) = port_in(&mut self.devices, port) {
            if busy {
                p.sa.control.pause(opts, due);
            }
            p.sa.hold(
                due,
                Waiting {
                    provider: f.provider,
                    mad: f.mad,
                    busy: f.busy + 1,
                },
            );
        }
        self.pump_sa(port);
    }

    /// The back-off before a MAD's `busy`-th refusal is retried (`busy` ≥ 1).
    fn backoff(&mut self, busy: u32) -> Duration {
        let base = u64::from(self.config.options.sa_backoff_ms) * 1000;
        let us = base << (busy - 1).min(MAX_BACKOFF_SHIFT);
        // ½ to 1½ of it, from the seed.
        let jitter = self.next_random() % (us + 1);
        Duration::from_micros(us / 2 + jitter)
    }

    /// An SA response arrived on `port`: free its credit; if the SA said BUSY and the
    /// MAD has retries left, hold it for its back-off; else hand the response to the
    /// provider that sent the request. Either way the next waiting MAD goes out.
    pub(crate) fn sa_response<'m>(&mut self, port: PortId, mad: &'m [u8]) -> Option<Call<'m>> {
        // The SA's Reports come unasked on the same agent (docs/protocol/sa.md §9).
        let header = MadHeaderPacket::new_unchecked(mad);
        if header.try_method() == Some(Method::REPORT) {
            return self.sm_report(port, mad);
        }
        let Some(tid) = header.try_tid() else {
            log!(
                self,
                Level::Basic,
                "acm_sa_handler",
                "short SA MAD ({} bytes) dropped",
                mad.len()
            );
            return None;
        };
        // Our own subscriptions are not in the SA window (docs/protocol/sa.md §9).
        if super::is_sub_tid(tid) {
            self.sm_sub_answer(port, tid, Ok(mad));
            return None;
        }
        let now = self.now;
        let status = header.status();
        let opts = &self.config.options;
        let busy_retries = opts.sa_busy_retries;
        let Some(p) = port_in(&mut self.devices, port) else {
            return self.unmatched(tid);
        };
        let Some(f) = p.sa.finish(tid) else {
            return self.unmatched(tid);
        };
        let busy = status.busy();
        p.sa.control.heard(now);
        if busy {
            p.sa.control.congested(opts, now);
        } else {
            p.sa.control
                .answered(opts, now.saturating_duration_since(f.sent));
        }
        if busy && f.busy < busy_retries {
            self.retry_later(port, tid, f, true);
            return None;
        }
        self.pump_sa(port);
        let result = Ok(mad);
        Some((f.provider, ProviderCall::SaResponse { port, tid, result }))
    }

    /// An SA response that matches no MAD in flight (answered already, or given up).
    fn unmatched<T>(&mut self, tid: u64) -> Option<T> {
        log!(
            self,
            Level::Verbose,
            "acm_sa_handler",
            "unmatched SA response tid {tid:#x} dropped"
        );
        None
    }

    /// umad gave an SA MAD back unanswered: a sign of overload as much as of loss, so
    /// the port's window shrinks. If the SA answered other MADs since this one left, it
    /// is overloaded (dropping), not gone, and the MAD is retried after a back-off;
    /// otherwise the provider fails the query, as the reference's does.
    pub(crate) fn sa_failed(
        &mut self,
        port: PortId,
        tid: u64,
        status: UmadStatus,
    ) -> Option<Call<'static>> {
        if super::is_sub_tid(tid) {
            self.sm_sub_answer(port, tid, Err(status));
            return None;
        }
        let now = self.now;
        let p = port_in(&mut self.devices, port)?;
        let f = p.sa.finish(tid)?;
        let opts = &self.config.options;
        p.sa.control.congested(opts, now);
        if f.busy < opts.sa_busy_retries && p.sa.control.heard_since(f.sent) {
            self.retry_later(port, tid, f, false);
            return None;
        }
        self.pump_sa(port);
        let result = Err(status);
        Some((f.provider, ProviderCall::SaResponse { port, tid, result }))
    }
}
