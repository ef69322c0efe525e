//! What the hub sends, handed to the emulated verbs objects and umad descriptors.

use crate::ffi::lock;
use crate::umad;
use crate::verbs::device::{EVENT_DEVICE_FATAL, post_async_event};
use crate::verbs::{STATE, qp};
use acm_engine::FabricEvent;

/// One event from the hub.
pub fn event(ev: FabricEvent) {
    match ev {
        FabricEvent::QpOpened { ep, result } => qp::qp_opened(ep.0, result),
        FabricEvent::UdReceive { ep, wc, grh, mad } => {
            qp::receive(ep.0, wc, grh, mad.as_bytes());
        }
        FabricEvent::UdSendDone { token, ok, .. } => qp::send_done(token.0, ok),
        FabricEvent::SaResponse { port, mad } => umad::sa_response(port, mad.as_bytes()),
        FabricEvent::SaSendFailed { port, tid, status } => {
            umad::sa_send_failed(port, tid, status);
        }
        // Source lookups are answered by the host's own routing, never by the hub.
        FabricEvent::SourceAnswer { .. } => {}
    }
}

/// The hub ended the attachment: every open context gets a fatal device error and
/// every umad descriptor fails from now on, as when an HCA dies.
pub fn hub_gone() {
    let contexts: Vec<usize> = lock(&STATE).contexts.keys().copied().collect();
    for ctx in contexts {
        post_async_event(ctx, EVENT_DEVICE_FATAL, 0);
    }
    umad::all_dead();
}
