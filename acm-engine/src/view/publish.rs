//! The engine's side of the view: each publication compares the endpoint table with
//! the last view's and takes each destination cache's changes into a new view that
//! shares everything unchanged with the last one.

use super::map::{DestMap, ViewDest};
use super::{CacheView, CopyCount, ViewEndpoint};
use crate::acmp::{Acmp, Dest, DestCache, DestState};
use crate::addr::Address;
use crate::core::{Core, Endpoint, LocalAddr};
use crate::io::EndpointId;
use crate::log::Level;
use crate::provider::Provider;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// What the engine keeps to publish views: the last one published.
#[derive(Debug)]
pub(crate) struct ViewPublisher {
    last: Arc<CacheView>,
    /// The map endpoints of other providers than `ibacmp` show (empty, shared).
    empty: DestMap,
    /// What publications copied, since the first.
    pub(crate) copies: CopyCount,
}

impl ViewPublisher {
    pub(crate) fn new() -> Self {
        Self {
            last: Arc::new(CacheView::empty()),
            empty: DestMap::new(),
            copies: CopyCount::default(),
        }
    }

    /// A new view when anything a hit depends on changed since the last one (or
    /// `first`, the first publication); `None` otherwise.
    pub(crate) fn publish(
        &mut self,
        core: &Core,
        providers: &mut [Box<dyn Provider>],
        first: bool,
    ) -> Option<Arc<CacheView>> {
        let answering = !core.log_enabled(Level::Verbose) && core.limits().pending_per_conn > 0;
        if !first && answering == self.last.answering && !self.changed(core, providers) {
            return None;
        }
        let mut endpoints = Vec::with_capacity(self.last.endpoints.len());
        for (id, e) in walk(core) {
            let prev = self.last.endpoints.iter().find(|p| p.id == id);
            let addrs = match prev {
                Some(p) if same_addrs(&p.addrs, &e.addrs) => Arc::clone(&p.addrs),
                _ => e.addrs.iter().map(|a| a.addr).collect(),
            };
            let view = match acmp_endpoint(providers, e.provider, id) {
                None => ViewEndpoint {
                    id,
                    addrs,
                    answers: false,
                    dests: self.empty.clone(),
                    marks: Arc::new([]),
                },
                Some((ready, cache)) => {
                    // An endpoint new to the view is read whole.
                    let mut dests = prev.map_or_else(DestMap::new, |p| p.dests.clone());
                    refresh(&mut dests, cache, prev.is_none(), &mut self.copies);
                    let chunks = cache.chunks();
                    let marks = cache.track().marks(chunks);
                    let marks = match prev {
                        Some(p) if p.marks.len() == marks.len() => Arc::clone(&p.marks),
                        _ => marks.iter().cloned().collect(),
                    };
                    ViewEndpoint {
                        id,
                        addrs,
                        answers: ready,
                        dests,
                        marks,
                    }
                }
            };
            endpoints.push(view);
        }
        let view = Arc::new(CacheView {
            answering,
            endpoints,
        });
        self.last = Arc::clone(&view);
        Some(view)
    }

    /// Whether the endpoint table or a destination cache changed since the last view
    /// (a walk of the few endpoints; nothing is allocated).
    fn changed(&self, core: &Core, providers: &mut [Box<dyn Provider>]) -> bool {
        let mut prev = self.last.endpoints.iter();
        for (id, e) in walk(core) {
            let Some(p) = prev.next() else {
                return true;
            };
            if p.id != id || !same_addrs(&p.addrs, &e.addrs) {
                return true;
            }
            let (answers, dirty) = match acmp_endpoint(providers, e.provider, id) {
                Some((ready, cache)) => (ready, cache.view_dirty()),
                None => (false, false),
            };
            if answers != p.answers || dirty {
                return true;
            }
        }
        prev.next().is_some()
    }
}

/// The endpoints of the active ports, in the order the core looks a source address up
/// (`Core::find_ep_by_addr`).
fn walk(core: &Core) -> impl Iterator<Item = (EndpointId, &Endpoint)> {
    core.active_ports().flat_map(move |(_, port)| {
        port.endpoints
            .iter()
            .filter_map(move |&id| Some((id, core.endpoint(id)?)))
    })
}

/// Whether the view's addresses of an endpoint are the core's.
fn same_addrs(view: &[Address], core: &[LocalAddr]) -> bool {
    view.len() == core.len() && view.iter().zip(core).all(|(v, c)| *v == c.addr)
}

/// Endpoint `id`'s readiness and cache, when provider `provider` is the built-in
/// `ibacmp` and has it open.
fn acmp_endpoint(
    providers: &mut [Box<dyn Provider>],
    provider: usize,
    id: EndpointId,
) -> Option<(bool, &mut DestCache)> {
    Acmp::of(providers.get_mut(provider)?.as_mut())?.view_endpoint(id)
}

/// Takes a cache's changes into its map: the changed keys looked up again, or the whole
/// cache read into a new map (`whole`, or when the cache lost count of its changes).
pub(super) fn refresh(
    dests: &mut DestMap,
    cache: &mut DestCache,
    whole: bool,
    copies: &mut CopyCount,
) {
    match cache.track().take() {
        Some(keys) if !whole => {
            for key in &keys {
                let entry = cache.peek(key).and_then(|(slot, d)| view_dest(slot, d));
                dests.set(key, entry, copies);
            }
            cache.track().recycle(keys);
        }
        keys => {
            *dests = DestMap::new();
            for (slot, d) in cache.iter_indexed() {
                if let Some(entry) = view_dest(slot, d) {
                    let key = entry.addr;
                    dests.set(&key, Some(entry), copies);
                }
            }
            if let Some(keys) = keys {
                cache.track().recycle(keys);
            }
        }
    }
}

/// What the view holds of a cache entry: READY ones only.
fn view_dest(slot: u32, d: &Dest) -> Option<ViewDest> {
    (d.state == DestState::Ready).then(|| ViewDest {
        addr: d.addr,
        path: d.path,
        expiry: d.addr_expiry.min(d.route_expiry),
        slot,
    })
}
