//! What the hub sends, handed to the emulated verbs objects, the host's devices and the
//! umad descriptors. The link's thread calls in here; nothing here reaches back to the
//! link, so the emulated objects never depend on the connection that feeds them.

use crate::ffi::lock;
use crate::live;
use crate::umad;
use crate::verbs::async_event::{EVENT_DEVICE_FATAL, post_async_event};
use crate::verbs::qp::from_hub;
use crate::verbs::state::STATE;
use acm_engine::FabricEvent;
use acm_io_sim::hub::HostSetup;
use acm_io_sim::hub::wire::TopologyEvent;

/// What the hub said this host is, when the link attached.
pub fn attached(setup: &HostSetup) {
    live::attach(&setup.devices);
}

/// One event from the hub.
pub fn event(ev: FabricEvent) {
    match ev {
        FabricEvent::QpOpened { ep, result } => from_hub::qp_opened(ep.0, result),
        FabricEvent::UdReceive { ep, wc, grh, mad } => {
            from_hub::receive(ep.0, wc, grh, mad.as_bytes());
        }
        FabricEvent::UdSendDone { token, ok, .. } => from_hub::send_done(token.0, ok),
        FabricEvent::SaResponse { port, mad } => umad::sa_response(port, mad.as_bytes()),
        FabricEvent::SaSendFailed { port, tid, status } => {
            umad::sa_send_failed(port, tid, status);
        }
        // Source lookups are answered by the host's own routing, and neighbour lookups
        // by its kernel's neighbour table, never by the hub: the emulated HCA asks for
        // neither.
        FabricEvent::SourceAnswer { .. } | FabricEvent::NeighAnswer { .. } => {}
    }
}

/// A change of the host's ports or devices.
pub fn topology(ev: TopologyEvent) {
    live::apply(ev);
}

/// The hub ended the attachment: every open context gets a fatal device error and
/// every umad descriptor fails from now on, as when an HCA dies.
pub fn hub_gone() {
    live::all_dead();
    let contexts: Vec<usize> = lock(&STATE).contexts.keys().copied().collect();
    for ctx in contexts {
        post_async_event(ctx, EVENT_DEVICE_FATAL, 0);
    }
    umad::all_dead();
}
