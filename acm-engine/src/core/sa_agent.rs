//! The per-port umad agent for SA MADs (docs/protocol/sa.md §1–§2): at most `sa_depth`
//! outstanding, later sends waiting in FIFO order, responses matched by the low 32 TID
//! bits (the kernel rewrites the upper half with its agent id).

use crate::device::PortAttrs;
use crate::io::{Mad, SaDest};
use alloc::collections::{BTreeMap, VecDeque};

/// One port's SA send state.
#[derive(Debug, Clone, Default)]
pub(crate) struct SaAgent {
    outstanding: u32,
    queue: VecDeque<(usize, Mad)>,
    /// Low TID bits of each MAD in the kernel's hands, with the provider that sent it.
    in_flight: BTreeMap<u32, usize>,
}

/// What [`SaAgent::submit`] decided.
// The MAD moves through by value; boxing it would allocate per send.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Submit {
    /// Send it now.
    Send(u64, Mad),
    /// It waits for a credit.
    Queued,
    /// The wait queue is at its limit.
    Full,
}

/// Where SA MADs go on a port: the SM's LID and SL, QP1 (docs/protocol/sa.md §2).
pub(crate) fn sa_dest(attrs: &PortAttrs) -> SaDest {
    SaDest {
        dlid: attrs.sm_lid,
        sl: attrs.sm_sl,
        pkey_index: attrs.sa_pkey_index(),
        remote_qpn: 1,
        remote_qkey: acm_proto::acm_mad::ACM_QKEY,
    }
}

#[inline]
fn tid_of(mad: &Mad) -> u64 {
    acm_proto::mad::MadHeaderPacket::new_unchecked(&mad.0[..]).tid()
}

impl SaAgent {
    /// Takes a MAD from `provider`.
    #[inline]
    pub(crate) fn submit(&mut self, provider: usize, mad: Mad, depth: u32, limit: usize) -> Submit {
        if self.outstanding < depth {
            self.outstanding += 1;
            let tid = tid_of(&mad);
            self.in_flight.insert(tid as u32, provider);
            Submit::Send(tid, mad)
        } else if self.queue.len() >= limit {
            Submit::Full
        } else {
            self.queue.push_back((provider, mad));
            Submit::Queued
        }
    }

    /// A response (or umad failure) for `tid` came back: the provider it belongs to, if
    /// it was ours. Frees the credit.
    pub(crate) fn finish(&mut self, tid: u64) -> Option<usize> {
        let provider = self.in_flight.remove(&(tid as u32))?;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(provider)
    }

    /// The next queued MAD, if a credit is free.
    pub(crate) fn next_ready(&mut self, depth: u32) -> Option<(u64, Mad)> {
        if self.outstanding >= depth {
            return None;
        }
        let (provider, mad) = self.queue.pop_front()?;
        self.outstanding += 1;
        let tid = tid_of(&mad);
        self.in_flight.insert(tid as u32, provider);
        Some((tid, mad))
    }

    /// The port went down: forgets the MADs still waiting for a credit (never sent) and
    /// returns their providers and TIDs. MADs already in the kernel's hands keep their
    /// credits: the umad agent stays registered across a port flap (the reference's port
    /// shutdown leaves it alone) and nothing cancels a umad send, so the kernel still
    /// retries and times them out, and each credit comes back with its response or
    /// failure ([`SaAgent::finish`]) — otherwise a port that comes back could have more
    /// than `sa_depth` MADs outstanding.
    pub(crate) fn drain(&mut self) -> alloc::vec::Vec<(usize, u64)> {
        let v = self.queue.iter().map(|(p, m)| (*p, tid_of(m))).collect();
        self.queue.clear();
        v
    }

    /// MADs outstanding (for invariants and tests).
    #[cfg(test)]
    pub(crate) fn outstanding(&self) -> u32 {
        self.outstanding
    }
}

impl crate::Engine {
    /// An SA response arrived on `port`: free its credit, send the next queued MAD, and
    /// hand the response to the provider that sent the request.
    pub(crate) fn sa_response(&mut self, port: crate::PortId, mad: &[u8]) {
        // The SA's Reports come unasked on the same agent (docs/protocol/sa.md §8).
        if mad.len() > 3
            && acm_proto::mad::MadHeaderPacket::new_unchecked(&mad[..4]).method()
                == acm_proto::mad::Method::REPORT
        {
            return self.sm_report(port, mad);
        }
        let Some(tid) = mad.get(8..16).map(|b| {
            let mut t = [0u8; 8];
            t.copy_from_slice(b);
            u64::from_be_bytes(t)
        }) else {
            crate::log::log!(
                self.core,
                crate::log::Level::Basic,
                "acm_sa_handler",
                "short SA MAD ({} bytes) dropped",
                mad.len()
            );
            return;
        };
        if super::is_sub_tid(tid) {
            return self.core.sm_sub_answer(port, tid, Ok(mad));
        }
        let Some(provider) = self.finish_sa(port, tid) else {
            crate::log::log!(
                self.core,
                crate::log::Level::Verbose,
                "acm_sa_handler",
                "unmatched SA response tid {tid:#x} dropped"
            );
            return;
        };
        self.with_provider(provider, |p, cx| p.sa_response(cx, port, tid, Ok(mad)));
    }

    /// umad gave an SA MAD back unanswered.
    pub(crate) fn sa_failed(&mut self, port: crate::PortId, tid: u64, status: i32) {
        if super::is_sub_tid(tid) {
            return self.core.sm_sub_answer(port, tid, Err(status));
        }
        let Some(provider) = self.finish_sa(port, tid) else {
            return;
        };
        self.with_provider(provider, |p, cx| p.sa_response(cx, port, tid, Err(status)));
    }

    /// Frees the credit of `tid` and posts the next waiting MAD.
    fn finish_sa(&mut self, port: crate::PortId, tid: u64) -> Option<usize> {
        let depth = self.core.config.options.sa_depth.max(1);
        let timeout_ms = self.core.config.options.timeout_ms;
        let retries = self.core.config.options.retries;
        let p = self.core.port_mut(port)?;
        let provider = p.sa.finish(tid)?;
        let dest = sa_dest(&p.attrs);
        if let Some((tid, mad)) = p.sa.next_ready(depth) {
            self.core
                .push_fabric(crate::io::FabricOp::SaSend(crate::io::SaSend {
                    port,
                    tid,
                    dest,
                    timeout_ms,
                    retries,
                    mad,
                }));
        }
        Some(provider)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mad(tid: u32) -> Mad {
        let mut m = [0u8; 256];
        m[12..16].copy_from_slice(&tid.to_be_bytes());
        Mad(m)
    }

    #[test]
    fn credits_queue_and_match_on_low_bits() {
        let mut a = SaAgent::default();
        assert!(matches!(a.submit(0, mad(1), 1, 2), Submit::Send(1, _)));
        assert!(matches!(a.submit(0, mad(2), 1, 2), Submit::Queued));
        assert!(matches!(a.submit(1, mad(3), 1, 2), Submit::Queued));
        assert!(matches!(a.submit(1, mad(4), 1, 2), Submit::Full));
        assert!(a.next_ready(1).is_none());
        // The kernel put its agent id in the upper half.
        assert_eq!(a.finish(0x0000_0007_0000_0001), Some(0));
        assert_eq!(a.outstanding(), 0);
        let (tid, _) = a.next_ready(1).expect("queued MAD goes out");
        assert_eq!(tid, 2);
        assert_eq!(a.finish(99), None);
        // A port flap drops what waits; the MAD in the kernel keeps its credit.
        assert_eq!(a.drain(), alloc::vec![(1, 3)]);
        assert_eq!(a.outstanding(), 1);
        assert_eq!(a.finish(2), Some(0));
        assert_eq!(a.outstanding(), 0);
    }
}
