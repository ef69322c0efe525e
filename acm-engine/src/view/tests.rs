//! The view's parts on their own: what a publication copies, the dirty list's bound,
//! and the used marks the eviction clock reads.

use super::CopyCount;
use super::map::DestMap;
use super::publish::refresh;
use super::track::{DestTrack, mark_used};
use crate::acmp::{Dest, DestCache, DestState};
use crate::addr::Address;
use acm_proto::path_record::PathRecordPacket;
use alloc::vec::Vec;

/// A READY entry for LID `lid`.
fn ready(lid: u16) -> Dest {
    let mut d = Dest::new(Address::lid(lid));
    d.state = DestState::Ready;
    PathRecordPacket::new_unchecked(&mut d.path[..]).set_dlid(lid);
    d.addr_expiry = 100;
    d.route_expiry = 50;
    d
}

/// A cache of `n` READY entries, and its map as a first publication reads it.
fn published(n: u16) -> (DestCache, DestMap) {
    let mut cache = DestCache::default();
    for lid in 1..=n {
        cache.insert(ready(lid));
    }
    let mut map = DestMap::new();
    refresh(&mut map, &mut cache, true, &mut CopyCount::default());
    (cache, map)
}

#[test]
fn a_first_publication_reads_every_ready_entry() {
    let (cache, map) = published(300);
    assert_eq!(map.len(), 300);
    let e = map.get(&Address::lid(7)).expect("published");
    assert_eq!(PathRecordPacket::new_unchecked(&e.path[..]).dlid(), 7);
    assert_eq!(e.expiry, 50, "the earlier of the two expiries");
    assert!(!cache.view_dirty(), "the changes were taken");
    // Entries that are not READY are not in the view.
    let mut cache2 = DestCache::default();
    cache2.insert(Dest::new(Address::lid(1)));
    let mut map2 = DestMap::new();
    refresh(&mut map2, &mut cache2, true, &mut CopyCount::default());
    assert_eq!(map2.len(), 0);
}

#[test]
fn a_change_copies_one_leaf_whatever_the_cache_size() {
    for n in [200u16, 30_000] {
        let (mut cache, mut map) = published(n);
        // A reader still holds the view this map is in.
        let held = map.clone();
        let (idx, _) = cache.peek(&Address::lid(9)).expect("cached");
        cache.get_mut(idx).expect("entry").path[10] = 0xEE;
        assert!(cache.view_dirty());
        let mut copies = CopyCount::default();
        refresh(&mut map, &mut cache, false, &mut copies);
        assert_eq!(
            copies.parts, 3,
            "{n} entries: the root, a directory, a leaf"
        );
        assert!(
            copies.entries < 40,
            "{n} entries: {} copied with the leaf",
            copies.entries
        );
        assert_eq!(map.get(&Address::lid(9)).expect("there").path[10], 0xEE);
        assert_eq!(
            held.get(&Address::lid(9)).expect("there").path[10],
            0,
            "the held view did not change"
        );
        // Nothing changed since: nothing is copied.
        let mut copies = CopyCount::default();
        refresh(&mut map, &mut cache, false, &mut copies);
        assert_eq!(copies, CopyCount::default());
    }
}

#[test]
fn removals_and_state_changes_leave_the_view() {
    let (mut cache, mut map) = published(50);
    let (i3, _) = cache.peek(&Address::lid(3)).expect("cached");
    let (i4, _) = cache.peek(&Address::lid(4)).expect("cached");
    cache.remove(i3);
    cache.get_mut(i4).expect("entry").state = DestState::AddrResolved;
    // Every entry at once (a flush walks the cache).
    for d in cache.iter_mut() {
        if d.addr == Address::lid(5) {
            d.state = DestState::Init;
        }
    }
    refresh(&mut map, &mut cache, false, &mut CopyCount::default());
    assert!(map.get(&Address::lid(3)).is_none());
    assert!(map.get(&Address::lid(4)).is_none());
    assert!(map.get(&Address::lid(5)).is_none());
    assert_eq!(map.len(), 47);
}

#[test]
fn a_long_dirty_list_gives_way_to_reading_the_whole_cache() {
    let mut t = DestTrack::default();
    for lid in 0..64u16 {
        t.note(&Address::lid(lid), 0);
    }
    assert!(t.is_dirty());
    t.note(&Address::lid(999), 0);
    assert_eq!(t.take(), None, "the whole cache is read");
    assert!(!t.is_dirty());
    t.note(&Address::lid(1), 0);
    assert_eq!(t.take(), Some(alloc::vec![Address::lid(1)]));
}

#[test]
fn a_hit_answered_from_the_view_is_a_second_chance_against_eviction() {
    let mut cache = DestCache::default();
    let names: Vec<Address> = ["a", "b", "c"].iter().map(|n| Address::name(n)).collect();
    let mut slots = Vec::new();
    for a in &names {
        let mut d = Dest::new(*a);
        d.state = DestState::Ready;
        slots.push(cache.insert(d));
    }
    let chunks = cache.chunks();
    let marks: Vec<_> = cache.track().marks(chunks).to_vec();
    // Only the view answered `a` (the engine's own lookups never found it).
    mark_used(&marks, slots[0]);
    let mut gone = Vec::new();
    for n in ["d", "e", "f"] {
        cache
            .acquire(&Address::name(n), 3, |_, a| gone.push(*a))
            .expect("room made");
    }
    assert_eq!(
        gone,
        [names[1], names[2], names[0]],
        "b and c first; a, answered by the view, last"
    );
}
