//! Giving freed heap memory back to the system.
//!
//! glibc's allocator keeps pages freed in the middle of its heap (under allocations
//! still live) resident until asked: after a few thousand clients that queued replies
//! and went away, the daemon would keep their peak. [`give_back_free_memory`] asks it
//! to return every whole free page. Other C libraries return memory on their own, so
//! there it does nothing.

/// Returns the heap's free pages to the system; `true` if glibc released any.
///
/// It walks the allocator's free lists, which costs about a millisecond per hundred
/// megabytes of heap: call it after freeing a lot, not on every turn.
#[must_use = "says whether anything was returned"]
pub fn give_back_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a plain integer (the padding to keep at the top of
        // the heap), touches only the allocator's own state under its locks, and is
        // safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::give_back_free_memory;

    #[test]
    fn freed_blocks_can_be_given_back() {
        // Many mid-sized blocks, every other one freed: the holes lie under live
        // blocks, which is what the allocator keeps unless trimmed.
        let mut blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 << 10]).collect();
        for b in blocks.iter_mut().step_by(2) {
            *b = Vec::new();
        }
        let returned = give_back_free_memory();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(returned, "glibc kept 8 MiB of free pages");
        } else {
            assert!(!returned);
        }
        assert!(
            blocks
                .iter()
                .skip(1)
                .step_by(2)
                .all(|b| b.len() == 64 << 10)
        );
    }
}
