//! The one driver loop every backend shares: handle an input, drain the engine, carry
//! out its fabric operations through a [`Fabric`], feed back what the fabric reports at
//! once, and hand everything else (client replies, closes, netlink replies, log lines)
//! to the caller.
//!
//! A backend implements [`Fabric`] once (the hardware through verbs and umad, the fabric
//! hub over a socket, the simulator's hosts, the test harness and the benches), and
//! none of them matches on the engine's fabric outputs itself: adding an operation is a
//! new trait method that every backend must answer, checked by the compiler.
//!
//! ```
//! use acm_engine::driver::{self, Fabric};
//! use acm_engine::HostOutput;
//! use acm_engine::{McastGroup, NeighQuery, OpenQp, SaSend, SourceQuery, UdSend};
//! use acm_engine::{EndpointId, Engine, EngineConfig, Input, Instant};
//!
//! /// A fabric that has no ports: nothing is ever asked of it.
//! struct Nowhere(Engine);
//!
//! impl Fabric for Nowhere {
//!     fn engine(&mut self) -> &mut Engine {
//!         &mut self.0
//!     }
//!     fn open_qp(&mut self, _: OpenQp) {}
//!     fn close_qp(&mut self, _: EndpointId) {}
//!     fn ud_send(&mut self, _: &UdSend) {}
//!     fn mcast_attach(&mut self, _: McastGroup) {}
//!     fn mcast_detach(&mut self, _: McastGroup) {}
//!     fn sa_send(&mut self, _: &SaSend) {}
//!     fn source_query(&mut self, _: SourceQuery) {}
//!     fn neigh_query(&mut self, _: NeighQuery) {}
//! }
//!
//! let mut host = Nowhere(Engine::new(EngineConfig::default(), 1, Instant::ZERO));
//! driver::handle(&mut host, Instant::from_millis(1), Input::Tick);
//! while let Some(out) = driver::poll_output(&mut host) {
//!     if let HostOutput::Log(line) = out {
//!         println!("{line}");
//!     }
//! }
//! ```

use crate::Engine;
use crate::io::{
    EndpointId, FabricEvent, FabricOp, HostOutput, Input, McastGroup, NeighQuery, OpenQp, Output,
    SaSend, SourceQuery, UdSend,
};
use crate::time::Instant;
use core::ops::ControlFlow;

/// What carries out an engine's fabric operations: UD QPs, multicast, SA MADs, and the
/// host's routing for source lookups (in every backend the party that owns the fabric
/// also plays the host). Each method only starts the operation; its result comes back as
/// an input: at once through [`Fabric::poll_event`], or later, when the backend feeds
/// it (a completion, a datagram, a scheduled event).
pub trait Fabric {
    /// The engine whose operations these are. A backend that owns its engine returns
    /// it; the simulator reaches it in its host table.
    fn engine(&mut self) -> &mut Engine;

    /// Create the endpoint's UD QP; answer with [`Input::QpOpened`].
    fn open_qp(&mut self, qp: OpenQp);

    /// Destroy the endpoint's QP.
    fn close_qp(&mut self, ep: EndpointId);

    /// Post a UD send; acknowledge with [`Input::UdSendDone`]. Lent, not given: the
    /// MAD is 256 bytes, and no backend keeps it.
    fn ud_send(&mut self, send: &UdSend);

    /// Attach the endpoint's QP to a multicast group.
    fn mcast_attach(&mut self, group: McastGroup);

    /// Detach the endpoint's QP from a multicast group.
    fn mcast_detach(&mut self, group: McastGroup);

    /// Send an SA MAD through umad; answer with [`Input::SaResponse`] or
    /// [`Input::SaSendFailed`].
    fn sa_send(&mut self, send: &SaSend);

    /// Pick a source address for a destination; answer with [`Input::SourceAnswer`].
    fn source_query(&mut self, query: SourceQuery);

    /// Look an address up in the host's IPoIB neighbour table, starting resolution when
    /// the entry is missing; answer with [`Input::NeighAnswer`].
    fn neigh_query(&mut self, query: NeighQuery);

    /// An answer the fabric already has (a QP made on the spot, a send refused at once),
    /// fed to the engine before [`poll_output`] returns `None`. Fabrics whose answers
    /// all come later keep the default.
    fn poll_event(&mut self) -> Option<FabricEvent> {
        None
    }
}

/// Feeds one input to the fabric's engine at `now`. Afterwards, drain [`poll_output`].
pub fn handle<F: Fabric + ?Sized>(fabric: &mut F, now: Instant, input: Input<'_>) {
    fabric.engine().handle(now, input);
}

/// Carries out the engine's fabric operations, and feeds back what the fabric answers
/// at once, until the engine has something for the caller (returned) or is quiet
/// (`None`). Call it until it returns `None` before waiting for the next input.
#[inline]
pub fn poll_output<F: Fabric + ?Sized>(fabric: &mut F) -> Option<HostOutput> {
    // Every output for the caller is asked for, so each comes out by value.
    lend_outputs(fabric, |_| ControlFlow::Break(()))
}

/// Like [`poll_output`], but each output for the caller is lent to `f` where it lies in
/// the engine's queue instead of being moved out, and dropped there once `f` has read
/// it. Returns when the engine is quiet (`None`), or when `f` answers
/// [`ControlFlow::Break`]: then that output is moved out and returned, for a caller
/// that must own it or that must do something else before the next one; call again
/// to go on.
///
/// An output is 320 bytes. Moved out of the queue, out of [`poll_output`] and through
/// a backend, a cache hit's reply was copied five times on the way to the client's
/// socket; lent, it is copied once, into the socket (`BENCHMARKS.md`, "Cache hits
/// against the C ibacm": 275 instructions of `memcpy` per request before, 89 after).
pub fn lend_outputs<F: Fabric + ?Sized>(
    fabric: &mut F,
    mut f: impl FnMut(&HostOutput) -> ControlFlow<()>,
) -> Option<HostOutput> {
    loop {
        while let Some(front) = fabric.engine().peek_output() {
            match front {
                Output::Host(out) => {
                    let wanted = f(out).is_break();
                    match fabric.engine().poll_output() {
                        Some(Output::Host(out)) if wanted => return Some(out),
                        _ => {}
                    }
                }
                Output::Fabric(_) => {
                    if let Some(Output::Fabric(ref op)) = fabric.engine().poll_output() {
                        carry(fabric, op);
                    }
                }
            }
        }
        let ev = fabric.poll_event()?;
        let engine = fabric.engine();
        let now = engine.now();
        engine.handle(now, ev.as_input());
    }
}

/// Hands one operation to the fabric method that carries it out. By reference: the
/// sends are lent straight from the popped output, so a MAD is copied only once, out
/// of the engine's queue (moving the op here cost the cold path 5% in time).
#[inline]
fn carry<F: Fabric + ?Sized>(fabric: &mut F, op: &FabricOp) {
    match *op {
        FabricOp::OpenQp(qp) => fabric.open_qp(qp),
        FabricOp::CloseQp(ep) => fabric.close_qp(ep),
        FabricOp::UdSend(ref send) => fabric.ud_send(send),
        FabricOp::McastAttach(group) => fabric.mcast_attach(group),
        FabricOp::McastDetach(group) => fabric.mcast_detach(group),
        FabricOp::SaSend(ref send) => fabric.sa_send(send),
        FabricOp::SourceQuery(query) => fabric.source_query(query),
        FabricOp::NeighQuery(query) => fabric.neigh_query(query),
    }
}
