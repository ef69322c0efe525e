//! A minimal driver for the benches and `examples/dest_memory.rs`: an engine on the
//! reference fabric (testdata/reference-fabric, as `tests/support/reference.rs` sets it
//! up), whose driver answers everything at once and without allocating: `OpenQp` with
//! `QpOpened`, `SaSend` with the fabric SA's answer, `UdSend` with `UdSendDone`. Client
//! replies are counted and their status kept; log lines are dropped.
#![allow(dead_code)]

#[path = "../../tests/support/reference_fabric.rs"]
mod reference_fabric;
pub(crate) use reference_fabric::*;

use acm_engine::HostOutput;
use acm_engine::driver::{self, Fabric};
use acm_engine::{ClientOutput, ConnId, EndpointId, Engine, EngineConfig, FabricEvent, Input};
use acm_engine::{Instant, MadBytes};
use acm_engine::{McastGroup, NeighQuery, OpenQp, SaSend, SourceQuery, UdSend};
use acm_proto::Gid;
use std::collections::VecDeque;

/// A RESOLVE from `src` to `dst` (IPv4), as ib_acme builds it: 160 bytes.
pub(crate) fn resolve_ip(src: [u8; 4], dst: [u8; 4]) -> [u8; 160] {
    let mut m = [0u8; 160];
    m[0] = 1; // version
    m[1] = 1; // RESOLVE
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16] = 1; // SOURCE
    m[20] = 2; // IP
    m[24..28].copy_from_slice(&src);
    m[88] = 2; // DEST
    m[92] = 2; // IP
    m[96..100].copy_from_slice(&dst);
    m
}

/// A path RESOLVE (`ib_acme -f l`): one PATH entry, SLID 1, reversible, 88 bytes.
fn resolve_path(dlid: u16, dgid: Gid) -> [u8; 88] {
    let mut m = [0u8; 88];
    m[0] = 1;
    m[1] = 1;
    m[6..8].copy_from_slice(&88u16.to_ne_bytes());
    m[20..22].copy_from_slice(&0x10u16.to_ne_bytes()); // PATH
    let p = &mut m[24..88];
    p[8..24].copy_from_slice(&dgid.0);
    p[40..42].copy_from_slice(&dlid.to_be_bytes());
    p[42..44].copy_from_slice(&1u16.to_be_bytes());
    p[49] = 0x81;
    m
}

/// A path resolve by destination LID (the cache key is the LID).
pub(crate) fn resolve_lid(dlid: u16) -> [u8; 88] {
    resolve_path(dlid, Gid::from_parts(0, 0))
}

/// A path resolve by destination GID, LID 0 (the cache key is the GID).
pub(crate) fn resolve_gid(dgid: Gid) -> [u8; 88] {
    resolve_path(0, dgid)
}

pub(crate) struct Driver {
    pub(crate) engine: Engine,
    pub(crate) now: Instant,
    /// What the fabric owes the engine, held until [`Self::settle`] (so that a bench
    /// can send a burst before anything is answered). SA answers are inline
    /// ([`MadBytes::from_array`]), so that the driver allocates nothing per resolution.
    follow: VecDeque<FabricEvent>,
    next_qpn: u32,
    /// Client replies seen.
    pub(crate) replies: u64,
    /// Client replies whose status was not 0.
    pub(crate) failures: u64,
    /// The status byte and length of the latest reply.
    pub(crate) last: (u8, usize),
    /// SA MADs the engine sent.
    pub(crate) sa_sent: u64,
    /// SA MADs the fabric SA did not answer (none expected).
    pub(crate) sa_unanswered: u64,
}

impl Driver {
    /// An engine on the reference fabric, started: device up, QP made, group joined.
    pub(crate) fn new(config: EngineConfig) -> Self {
        let mut d = Self {
            engine: Engine::new(config, 0, Instant::ZERO),
            now: Instant::ZERO,
            follow: VecDeque::with_capacity(16),
            next_qpn: 0x48,
            replies: 0,
            failures: 0,
            last: (0, 0),
            sa_sent: 0,
            sa_unanswered: 0,
        };
        d.input(Input::DeviceAdded(device()));
        d.settle();
        d
    }

    /// Feeds one input and carries out every output; follow-ups wait for [`Self::settle`].
    #[inline]
    pub(crate) fn input(&mut self, input: Input<'_>) {
        self.engine.handle(self.now, input);
        self.drain();
    }

    /// Feeds one client message (outputs drained, follow-ups held).
    #[inline]
    pub(crate) fn send(&mut self, conn: ConnId, bytes: &[u8]) {
        self.input(Input::ClientRequest { conn, bytes });
    }

    /// Feeds one client message and everything it leads to.
    #[inline]
    pub(crate) fn request(&mut self, conn: ConnId, bytes: &[u8]) {
        self.send(conn, bytes);
        self.settle();
    }

    fn drain(&mut self) {
        while let Some(out) = driver::poll_output(self) {
            if let HostOutput::Client(ClientOutput::Reply { reply, .. }) = out {
                let b = reply.as_bytes();
                self.replies += 1;
                self.last = (b[2], b.len());
                if b[2] != 0 {
                    self.failures += 1;
                }
            }
        }
    }

    /// Delivers every follow-up (and theirs) until none is left.
    pub(crate) fn settle(&mut self) {
        // Lent to the engine where it lies, then dropped: moved out, each event (room
        // for a MAD) would be copied once more per resolution.
        while let Some(event) = self.follow.front() {
            self.engine.handle(self.now, event.as_input());
            self.follow.pop_front();
            self.drain();
        }
    }
}

/// Answers everything at once (held as follow-ups), without allocating.
impl Fabric for Driver {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn open_qp(&mut self, qp: OpenQp) {
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        self.follow.push_back(FabricEvent::QpOpened {
            ep: qp.ep,
            result: Ok(qpn),
        });
    }

    fn close_qp(&mut self, _ep: EndpointId) {}

    fn ud_send(&mut self, send: &UdSend) {
        self.follow.push_back(FabricEvent::UdSendDone {
            ep: send.ep,
            token: send.token,
            ok: true,
        });
    }

    fn mcast_attach(&mut self, _group: McastGroup) {}

    fn mcast_detach(&mut self, _group: McastGroup) {}

    fn sa_send(&mut self, send: &SaSend) {
        self.sa_sent += 1;
        match sa_answer(&send.mad.0) {
            Some(resp) => self.follow.push_back(FabricEvent::SaResponse {
                port: send.port,
                mad: MadBytes::from_array(resp, resp.len()),
            }),
            None => self.sa_unanswered += 1,
        }
    }

    /// The reference fabric's requests all name their source.
    fn source_query(&mut self, _query: SourceQuery) {}

    /// The benches run with `addr_prot acm`: nothing asks the neighbour table.
    fn neigh_query(&mut self, _query: NeighQuery) {}
}
