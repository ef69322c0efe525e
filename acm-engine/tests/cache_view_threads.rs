//! Published cache views read on several threads while the engine publishes new ones:
//! a view is `Send` and `Sync`, and a reader only ever sees whole entries (every hit
//! is the engine's reply, byte for byte) whatever the engine does meanwhile.

mod support;

use acm_engine::{CacheView, ConnId, Input, PortAttrs, PortEvent, VIEW_REPLY_MAX, ViewAnswer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use support::requests::resolve_ip;
use support::{Node, hex, reference, reference_fabric};

#[test]
fn readers_on_other_threads_see_whole_entries_while_the_engine_publishes() {
    let mut node = Node::new(
        reference_fabric::config(Some(0)),
        reference::sa(),
        reference::route(),
    );
    node.input(Input::DeviceAdded(reference::device()));
    node.settle();
    let req = resolve_ip("10.0.0.1", "10.0.0.2");
    let expected = node.request(ConnId(1), &req).expect("resolved");
    // The cell the daemon swaps views into; readers copy the `Arc` out and answer
    // without holding it.
    let cell = Mutex::new(node.engine.publish_view().expect("first view"));
    let stop = AtomicBool::new(false);
    let hits = AtomicU64::new(0);
    let forwards = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let mut buf = [0u8; VIEW_REPLY_MAX];
                while !stop.load(Ordering::Relaxed) {
                    let view: Arc<CacheView> = Arc::clone(&cell.lock().expect("cell"));
                    match view.answer(acm_engine::Instant::ZERO, &req, &mut buf) {
                        ViewAnswer::Hit { len, .. } => {
                            assert_eq!(hex(&buf[..len]), hex(&expected));
                            hits.fetch_add(1, Ordering::Relaxed);
                        }
                        ViewAnswer::Forward => {
                            forwards.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        // The engine flushes the route (an SM change) and learns it again, over and
        // over, publishing after each input as the daemon does.
        for round in 0..200u16 {
            let attrs = PortAttrs {
                sm_lid: 1 + round % 2,
                ..reference::port_attrs()
            };
            node.port_event(reference::PORT, PortEvent::SmChange(attrs));
            if let Some(v) = node.engine.publish_view() {
                *cell.lock().expect("cell") = v;
            }
            let again = node.request(ConnId(1), &req).expect("resolved");
            assert_eq!(hex(&again), hex(&expected));
            if let Some(v) = node.engine.publish_view() {
                *cell.lock().expect("cell") = v;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // The last view answers, as the engine's cache would.
    let last = Arc::clone(&cell.lock().expect("cell"));
    let mut buf = [0u8; VIEW_REPLY_MAX];
    let ViewAnswer::Hit { len, .. } = last.answer(node.now, &req, &mut buf) else {
        panic!("the last view answers");
    };
    assert_eq!(hex(&buf[..len]), hex(&expected));
    eprintln!(
        "readers: {} hits, {} forwarded",
        hits.load(Ordering::Relaxed),
        forwards.load(Ordering::Relaxed)
    );
}
