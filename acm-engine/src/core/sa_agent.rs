//! The per-port umad agent for SA MADs (docs/protocol/sa.md §1–§2): at most `sa_depth`
//! outstanding, later sends waiting in FIFO order, responses matched by the low 32 TID
//! bits (the kernel rewrites the upper half with its agent id).

use super::sa_control::SaControl;
use crate::Instant;
use crate::device::PortAttrs;
use crate::io::{Mad, SaDest};
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

/// One port's SA send state.
#[derive(Debug, Clone, Default)]
pub(crate) struct SaAgent {
    outstanding: u32,
    queue: VecDeque<Waiting>,
    /// Each MAD in the kernel's hands, by the low TID bits.
    in_flight: BTreeMap<u32, InFlight>,
    /// MADs the SA answered BUSY, waiting out their back-off (due instant, MAD).
    held: Vec<(Instant, Waiting)>,
    /// The timeout and depth this port uses ([`SaControl`]).
    pub(crate) control: SaControl,
}

/// A MAD waiting for a credit.
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    pub(crate) provider: usize,
    pub(crate) mad: Mad,
    /// BUSY answers it has had so far.
    pub(crate) busy: u32,
}

/// A MAD in the kernel's hands.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// The provider that sent it.
    pub(crate) provider: usize,
    /// When it was handed to the kernel (for the round trip).
    pub(crate) sent: Instant,
    /// BUSY answers it had before this send.
    pub(crate) busy: u32,
    /// The request itself, to send again after a BUSY.
    pub(crate) mad: Mad,
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
    pub(crate) fn submit(
        &mut self,
        provider: usize,
        mad: Mad,
        depth: u32,
        limit: usize,
        now: Instant,
    ) -> Submit {
        if self.outstanding < depth {
            let tid = self.launch(provider, mad.clone(), 0, now);
            Submit::Send(tid, mad)
        } else if self.queue.len() >= limit {
            Submit::Full
        } else {
            self.queue.push_back(Waiting {
                provider,
                mad,
                busy: 0,
            });
            Submit::Queued
        }
    }

    /// Takes a credit for a MAD going to the kernel now; its TID.
    fn launch(&mut self, provider: usize, mad: Mad, busy: u32, now: Instant) -> u64 {
        self.outstanding += 1;
        let tid = tid_of(&mad);
        self.in_flight.insert(
            tid as u32,
            InFlight {
                provider,
                sent: now,
                busy,
                mad,
            },
        );
        tid
    }

    /// A response (or umad failure) for `tid` came back: what was sent, if it was ours.
    /// Frees the credit.
    pub(crate) fn finish(&mut self, tid: u64) -> Option<InFlight> {
        let f = self.in_flight.remove(&(tid as u32))?;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(f)
    }

    /// The next queued MAD, if a credit is free.
    pub(crate) fn next_ready(&mut self, depth: u32, now: Instant) -> Option<(u64, Mad)> {
        if self.outstanding >= depth {
            return None;
        }
        let w = self.queue.pop_front()?;
        let tid = self.launch(w.provider, w.mad.clone(), w.busy, now);
        Some((tid, w.mad))
    }

    /// Keeps a MAD the SA answered BUSY until `due`.
    pub(crate) fn hold(&mut self, due: Instant, w: Waiting) {
        self.held.push((due, w));
    }

    /// When the first held MAD is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.held.iter().map(|(t, _)| *t).min()
    }

    /// Puts the held MADs due by `now` at the head of the queue (they were asked
    /// first), earliest due first. Whether any was.
    pub(crate) fn release_due(&mut self, now: Instant) -> bool {
        if !self.held.iter().any(|(t, _)| *t <= now) {
            return false;
        }
        let mut due: Vec<(Instant, Waiting)> = Vec::new();
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].0 <= now {
                due.push(self.held.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|(t, w)| (*t, tid_of(&w.mad)));
        for (_, w) in due.into_iter().rev() {
            self.queue.push_front(w);
        }
        true
    }

    /// The port went down: forgets the MADs still waiting for a credit or a back-off
    /// (never sent, or not again) and returns their providers and TIDs. MADs already in
    /// the kernel's hands keep their credits: the umad agent stays registered across a
    /// port flap (the reference's port shutdown leaves it alone) and nothing cancels a
    /// umad send, so the kernel still retries and times them out, and each credit comes
    /// back with its response or failure ([`SaAgent::finish`]) — otherwise a port that
    /// comes back could have more than `sa_depth` MADs outstanding.
    pub(crate) fn drain(&mut self) -> Vec<(usize, u64)> {
        let held = self.held.drain(..).map(|(_, w)| w);
        self.queue
            .drain(..)
            .chain(held)
            .map(|w| (w.provider, tid_of(&w.mad)))
            .collect()
    }

    /// MADs outstanding (for invariants and tests).
    #[cfg(test)]
    pub(crate) fn outstanding(&self) -> u32 {
        self.outstanding
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::mad::MAD_LEN;

    fn mad(tid: u32) -> Mad {
        let mut m = [0u8; MAD_LEN];
        m[12..16].copy_from_slice(&tid.to_be_bytes());
        Mad(m)
    }

    const T0: Instant = Instant::ZERO;

    #[test]
    fn credits_queue_and_match_on_low_bits() {
        let mut a = SaAgent::default();
        assert!(matches!(a.submit(0, mad(1), 1, 2, T0), Submit::Send(1, _)));
        assert!(matches!(a.submit(0, mad(2), 1, 2, T0), Submit::Queued));
        assert!(matches!(a.submit(1, mad(3), 1, 2, T0), Submit::Queued));
        assert!(matches!(a.submit(1, mad(4), 1, 2, T0), Submit::Full));
        assert!(a.next_ready(1, T0).is_none());
        // The kernel put its agent id in the upper half.
        let f = a.finish(0x0000_0007_0000_0001).expect("ours");
        assert_eq!((f.provider, f.busy, tid_of(&f.mad)), (0, 0, 1));
        assert_eq!(a.outstanding(), 0);
        let (tid, _) = a.next_ready(1, T0).expect("queued MAD goes out");
        assert_eq!(tid, 2);
        assert!(a.finish(99).is_none());
        // A port flap drops what waits; the MAD in the kernel keeps its credit.
        assert_eq!(a.drain(), alloc::vec![(1, 3)]);
        assert_eq!(a.outstanding(), 1);
        assert_eq!(a.finish(2).map(|f| f.provider), Some(0));
        assert_eq!(a.outstanding(), 0);
    }

    #[test]
    fn held_mads_go_back_to_the_head_of_the_queue_when_due() {
        let mut a = SaAgent::default();
        let t = |ms| Instant::from_millis(ms);
        assert!(matches!(a.submit(0, mad(1), 1, 8, T0), Submit::Send(1, _)));
        assert!(matches!(a.submit(0, mad(2), 1, 8, T0), Submit::Queued));
        let f = a.finish(1).expect("ours");
        a.hold(
            t(30),
            Waiting {
                provider: f.provider,
                mad: f.mad,
                busy: f.busy + 1,
            },
        );
        a.hold(
            t(20),
            Waiting {
                provider: 0,
                mad: mad(7),
                busy: 1,
            },
        );
        assert_eq!(a.next_due(), Some(t(20)));
        assert!(!a.release_due(t(10)));
        // MAD 2 takes the freed credit meanwhile.
        assert_eq!(a.next_ready(1, t(10)).map(|(tid, _)| tid), Some(2));
        assert!(a.release_due(t(30)));
        assert_eq!(a.next_due(), None);
        assert!(a.finish(2).is_some());
        // Earliest due first, before anything queued later.
        assert!(matches!(a.submit(0, mad(9), 0, 8, t(30)), Submit::Queued));
        assert_eq!(a.next_ready(1, t(31)).map(|(tid, _)| tid), Some(7));
        let f = a.finish(7).expect("ours");
        assert_eq!((f.busy, f.sent), (1, t(31)));
        assert_eq!(a.next_ready(1, t(32)).map(|(tid, _)| tid), Some(1));
        assert_eq!(a.drain(), alloc::vec![(0, 9)]);
    }
}
