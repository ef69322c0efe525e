//! A set of descriptor numbers readable without a lock, for the libc wrappers: every
//! `read`, `write` and `close` of the process asks whether its descriptor is one of
//! ours, so the answer must cost one atomic load.

use std::sync::atomic::{AtomicU64, Ordering};

/// Descriptors below this number can be members.
pub const MAX_FD: usize = 4096;

/// A set of descriptors below [`MAX_FD`].
#[derive(Debug)]
pub struct FdSet([AtomicU64; MAX_FD / 64]);

impl FdSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; MAX_FD / 64])
    }

    /// Whether `fd` is in the set.
    pub fn contains(&self, fd: i32) -> bool {
        usize::try_from(fd)
            .ok()
            .filter(|&f| f < MAX_FD)
            .is_some_and(|f| self.0[f / 64].load(Ordering::Acquire) & (1 << (f % 64)) != 0)
    }

    /// Adds (`on`) or removes `fd`; false for a descriptor that cannot be a member.
    pub fn set(&self, fd: i32, on: bool) -> bool {
        let Some(f) = usize::try_from(fd).ok().filter(|&f| f < MAX_FD) else {
            return false;
        };
        let bit = 1u64 << (f % 64);
        if on {
            self.0[f / 64].fetch_or(bit, Ordering::AcqRel);
        } else {
            self.0[f / 64].fetch_and(!bit, Ordering::AcqRel);
        }
        true
    }
}

impl Default for FdSet {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_come_and_go() {
        let s = FdSet::new();
        assert!(!s.contains(70));
        assert!(s.set(70, true));
        assert!(s.contains(70) && !s.contains(71) && !s.contains(6));
        assert!(s.set(70, false));
        assert!(!s.contains(70));
        assert!(!s.set(-1, true) && !s.set(MAX_FD as i32, true));
        assert!(!s.contains(-1));
    }
}
