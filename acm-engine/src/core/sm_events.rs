//! SM events (docs/protocol/sa.md §9), ours: each active port subscribes with the SA to
//! traps 64–67, and a Report from the SA invalidates what the provider cached about the
//! GID it names, at once, instead of serving a stale path until it expires.
//!
//! The subscriptions are the core's, not a provider's: they belong to the port, must be
//! renewed when the SM changes (a new SM knows none of them) or asks clients to
//! reregister, and a Report must be acknowledged whatever the provider makes of it.
//! They go through the port's umad agent but outside its `sa_depth` credits, one at a
//! time, with TIDs whose bit 31 is set, so that they neither delay nor meet the
//! provider's SA traffic.

use super::Core;
use super::provider_call::{Call, ProviderCall};
use super::sa_agent::sa_dest;
use crate::PortId;
use crate::io::{FabricOp, Mad, SaSend};
use crate::log::{Level, log};
use crate::time::Instant;
use acm_proto::mad::{AttrId, MAD_LEN, UmadStatus};
use acm_proto::notice::{InformInfoRepr, NoticeRepr, SmTrap, TrapNumber};
use acm_proto::sa::{SaHeaderRepr, SaPacket};
use core::time::Duration;

/// Bit 31 of the low TID half marks a subscription's Set: the provider's counter starts
/// below 2^24 and would need two billion MADs to get there.
pub(crate) const SUB_TID_BIT: u32 = 0x8000_0000;

/// The first wait before a refused or unanswered subscription is tried again; it
/// doubles at each failure up to [`RETRY_MAX`]. A second is long enough not to hammer
/// an SA that is busy or not yet up, short enough that a port that comes up with the SM
/// catches the events that follow.
const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two tries: an SA that refuses for minutes is still asked
/// every minute, so the subscriptions are in place soon after it recovers.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// One port's subscriptions.
#[derive(Debug, Clone, Default)]
pub(crate) struct SmSubs {
    /// Index in [`TrapNumber::SM_EVENTS`] of the next subscription to make; all are in
    /// place when it reaches the end.
    next: usize,
    /// The low TID bits of the Set in the kernel's hands.
    in_flight: Option<u32>,
    /// When to try again after a failure.
    retry_at: Option<Instant>,
    /// The wait before the next retry.
    backoff: Duration,
}

/// Whether a TID (low half) is one of a subscription's.
pub(crate) fn is_sub_tid(tid: u64) -> bool {
    (tid as u32) & SUB_TID_BIT != 0
}

impl Core {
    /// The next subscription TID: bit 31 set, counting up, never 0 in the low bits.
    fn next_sub_tid(&mut self) -> u64 {
        let t = self.sub_tid;
        self.sub_tid = SUB_TID_BIT | (self.sub_tid.wrapping_add(1) & !SUB_TID_BIT).max(1);
        u64::from(t)
    }

    /// (Re)subscribes `port` to every trap from the first: the port came up, its SM
    /// changed, or the SM asked for a reregister. A Set still in flight is forgotten
    /// (its answer is ignored when it comes).
    pub(crate) fn sm_subscribe(&mut self, port: PortId, why: &str) {
        if !self.config.options.sm_events {
            return;
        }
        let Some(p) = self.port_mut(port) else { return };
        if !p.active {
            return;
        }
        p.sm = SmSubs::default();
        log!(
            self,
            Level::Config,
            "acm_sm_events",
            "port {}: subscribing to SM traps 64-67 ({why})",
            port.port
        );
        self.sm_send_next(port);
    }

    /// The port went down: nothing more to subscribe until it comes back.
    pub(crate) fn sm_forget(&mut self, port: PortId) {
        if let Some(p) = self.port_mut(port) {
            p.sm = SmSubs::default();
        }
    }

    /// Sends the Set of the next trap not subscribed yet, if any.
    fn sm_send_next(&mut self, port: PortId) {
        let timeout_ms = self.config.options.timeout_ms;
        let tid = self.next_sub_tid();
        let Some(p) = self.port_mut(port) else { return };
        let Some(&trap) = TrapNumber::SM_EVENTS.get(p.sm.next) else {
            log!(
                self,
                Level::Config,
                "acm_sm_events",
                "port {}: subscribed to SM traps 64-67",
                port.port
            );
            return;
        };
        p.sm.in_flight = Some(tid as u32);
        let dest = sa_dest(&p.attrs);
        let mut mad = Mad([0; MAD_LEN]);
        SaHeaderRepr::inform_info_set(tid).emit(&mut mad.0);
        InformInfoRepr::subscribe(trap).emit(SaPacket::new_unchecked(&mut mad.0[..]).data_mut());
        self.post_sa(port, tid, dest, timeout_ms, mad);
    }

    /// The answer to a subscription's Set: the GetResp, or umad's error.
    pub(crate) fn sm_sub_answer(
        &mut self,
        port: PortId,
        tid: u64,
        answer: Result<&[u8], UmadStatus>,
    ) {
        let now = self.now;
        let Some(p) = self.port_mut(port) else { return };
        if p.sm.in_flight != Some(tid as u32) {
            // An answer to a Set made before a renewal or a port flap.
            return;
        }
        p.sm.in_flight = None;
        let trap = TrapNumber::SM_EVENTS
            .get(p.sm.next)
            .copied()
            .unwrap_or_default();
        let failure = match answer {
            Ok(mad) => match SaHeaderRepr::parse(mad) {
                // GetResp, as IBTA says a Set is answered; any response with status 0
                // is taken, as the join's answer is (docs/protocol/sa.md §5).
                Ok(h) if h.mad.method.is_response() && h.mad.status.is_ok() => None,
                Ok(h) => Some(alloc::format!("SA status {:#06x}", h.mad.status.0)),
                Err(e) => Some(alloc::format!("{e}")),
            },
            Err(status) => Some(alloc::format!("umad status {status}")),
        };
        let Some(why) = failure else {
            p.sm.next += 1;
            p.sm.backoff = Duration::ZERO;
            self.sm_send_next(port);
            return;
        };
        let wait = if p.sm.backoff.is_zero() {
            RETRY_FIRST
        } else {
            (p.sm.backoff * 2).min(RETRY_MAX)
        };
        p.sm.backoff = wait;
        p.sm.retry_at = Some(now + wait);
        log!(
            self,
            Level::Basic,
            "acm_sm_events",
            "port {}: subscription to SM trap {} failed ({why}); trying again in {} s",
            port.port,
            trap.0,
            wait.as_secs()
        );
    }

    /// The earliest subscription retry due.
    pub(crate) fn sm_next_retry(&self) -> Option<Instant> {
        self.devices
            .iter()
            .flat_map(|d| d.ports.iter())
            .filter_map(|p| p.sm.retry_at)
            .min()
    }

    /// Sends every subscription retry due at `now`.
    pub(crate) fn sm_fire_retries(&mut self) {
        let now = self.now;
        let due = self.ports_due(|p| {
            if p.sm.retry_at.is_none_or(|t| t > now) {
                return false;
            }
            p.sm.retry_at = None;
            p.active
        });
        for port in due {
            self.sm_send_next(port);
        }
    }

    /// Acknowledges a Report: a ReportResp with its TID and the Notice echoed, to the
    /// SA (QP1 at the SM LID), with no kernel retry (a response is never answered).
    fn sm_report_resp(&mut self, port: PortId, tid: u64, notice: &NoticeRepr) {
        let Some(p) = self.port(port) else { return };
        let dest = sa_dest(&p.attrs);
        let mut mad = Mad([0; MAD_LEN]);
        SaHeaderRepr::report_resp(tid).emit(&mut mad.0);
        notice.emit(SaPacket::new_unchecked(&mut mad.0[..]).data_mut());
        self.push_fabric(FabricOp::SaSend(SaSend {
            port,
            tid,
            dest,
            timeout_ms: 0,
            retries: 0,
            mad,
        }));
    }

    /// An unsolicited SA MAD (a Report) arrived on `port`: acknowledge it and hand the
    /// event to the port's provider. With `sm_events no` it is dropped, as the
    /// reference (which never asks for Reports) would never see one.
    pub(crate) fn sm_report(&mut self, port: PortId, mad: &[u8]) -> Option<Call<'static>> {
        if !self.config.options.sm_events {
            log!(
                self,
                Level::Verbose,
                "acm_sm_events",
                "port {}: SA Report dropped (sm_events no)",
                port.port
            );
            return None;
        }
        let parsed = SaPacket::new_checked(mad).and_then(|p| {
            let h = SaHeaderRepr::from_packet(&p);
            NoticeRepr::parse(p.data()).map(|n| (h, n))
        });
        let (hdr, notice) = match parsed {
            Ok((h, n)) if h.mad.attr_id == AttrId::NOTICE => (h, n),
            Ok((h, _)) => {
                log!(
                    self,
                    Level::Basic,
                    "acm_sm_events",
                    "port {}: SA Report of attribute {:#06x} dropped",
                    port.port,
                    h.mad.attr_id.0
                );
                return None;
            }
            Err(e) => {
                log!(
                    self,
                    Level::Basic,
                    "acm_sm_events",
                    "port {}: malformed SA Report dropped: {e}",
                    port.port
                );
                return None;
            }
        };
        self.sm_report_resp(port, hdr.mad.tid, &notice);
        let Some(event) = notice.sm_event() else {
            log!(
                self,
                Level::Verbose,
                "acm_sm_events",
                "port {}: SA Report of trap {} acknowledged, not acted on",
                port.port,
                notice.trap_number.0
            );
            return None;
        };
        log!(
            self,
            Level::Basic,
            "acm_sm_events",
            "port {}: SM trap {} ({}) for {}",
            port.port,
            event.number().0,
            trap_text(&event),
            event.gid()
        );
        let idx = self.port(port)?.provider?;
        Some((idx, ProviderCall::SmEvent { port, event }))
    }
}

fn trap_text(t: &SmTrap) -> &'static str {
    match t {
        SmTrap::GidInService(_) => "GID in service",
        SmTrap::GidOutOfService(_) => "GID out of service",
        SmTrap::McastGroupCreated(_) => "multicast group created",
        SmTrap::McastGroupDeleted(_) => "multicast group deleted",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_tids_keep_bit_31_and_wrap() {
        assert!(is_sub_tid(0x0000_0007_8000_0001));
        assert!(
            !is_sub_tid(0x8000_0000_0000_0001),
            "the kernel's half is not ours"
        );
        let mut core = super::super::Core::new(
            crate::EngineConfig::default(),
            0,
            Instant::ZERO,
            alloc::vec::Vec::new(),
        );
        assert_eq!(core.next_sub_tid(), 0x8000_0001);
        assert_eq!(core.next_sub_tid(), 0x8000_0002);
        core.sub_tid = 0xFFFF_FFFF;
        assert_eq!(core.next_sub_tid(), 0xFFFF_FFFF);
        assert_eq!(core.next_sub_tid(), 0x8000_0001, "wraps past 0");
    }
}
