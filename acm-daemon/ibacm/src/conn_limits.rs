//! How many client connections the daemon takes, and from whom, so that no local user
//! can take every descriptor the daemon has and lock everyone else out, the
//! administrator's `ib_acme` included.
//!
//! Every client connection holds a descriptor, and the daemon has a bounded number of
//! them: `RLIMIT_NOFILE`, whose soft limit it raises to the hard one at start (under
//! systemd, the unit's `LimitNOFILE=`, by default 524288). Without a limit, one user
//! holding idle connections fills them all; `accept` then fails, and every other
//! client, root's included, waits in the listen queue until that user lets go.
//!
//! `accept` takes a descriptor before the client's credentials are known
//! (`SO_PEERCRED` is read on the accepted socket), so no limit can keep a connection
//! from taking one; a connection over a limit is closed at once instead, which gives
//! its descriptor back before the next is accepted. Three numbers decide, computed
//! when the daemon starts serving and again at each reload ([`ConnLimits::recount`]):
//!
//! - **the daemon's own descriptors**: those open when counted that are not client
//!   connections (the listener, the poller, the log, the fabric's devices and
//!   sockets, the providers': everything `/proc/self/fd` lists), plus a margin
//!   ([`MARGIN`]) for those it opens later: the metrics file, the files a reload
//!   reads, a device that appears;
//! - **the reserve** ([`RESERVE`]): descriptors only root and the daemon's own user
//!   get. Their connections are never refused here (both can change the daemon's
//!   limits anyway); every other connection is refused once the open client
//!   connections reach the limit less the daemon's own descriptors and the reserve
//!   ([`ConnLimits::shared`]). What is left for root is the reserve at least, so the
//!   administrator is always answered;
//! - **the per-user limit** (`max_connections_per_user`): the connections one user
//!   other than root and the daemon's may hold. By default half of the shared ones:
//!   one user can then never take more than half of what all users share, and the
//!   default stays far above ordinary use, where each librdmacm process holds one
//!   connection (under systemd's limit, some 262,000 per user).
//!
//! Clients without credentials (TCP ones, in the reference's `server_mode open` and
//! `loop`, or a unix client whose credentials cannot be read) count against the
//! shared connections but belong to no user: root cannot be told apart among them, so
//! none of them gets the reserve, and no per-user limit applies to them.

use std::collections::HashMap;

/// Descriptors only root and the daemon's own user get: enough for an administrator's
/// tools and a few root services to connect while other users hold everything else,
/// and little beside any real limit (a sixteenth of the limit when that is under
/// 1,024: [`scaled`]).
pub(crate) const RESERVE: usize = 64;

/// Descriptors kept for what the daemon opens after they were counted: the metrics
/// file and its temporary twin, the options and address files a reload reads, a
/// client's `/proc/PID/status`, the log file, and those of a device that appears.
/// Scaled like [`RESERVE`].
pub(crate) const MARGIN: usize = 64;

/// The daemon's own descriptors assumed when `/proc/self/fd` cannot be read: more than
/// a daemon with a few devices opens.
const OWN_UNKNOWN: usize = 64;

/// The smallest `max_connections_per_user`.
pub const MIN_PER_USER: u32 = 1;

/// The largest `max_connections_per_user`: 2^30, above the most descriptors Linux
/// lets a process have (`fs.nr_open`, at most a little under 2^30).
pub const MAX_PER_USER: u32 = 1 << 30;

/// The daemon's descriptors, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptors {
    /// The soft `RLIMIT_NOFILE`.
    pub limit: usize,
    /// Open descriptors that are not client connections.
    pub own: usize,
}

impl Descriptors {
    /// Counted now, while `clients` client connections are open.
    #[must_use]
    pub(crate) fn count(clients: usize) -> Self {
        use nix::sys::resource::{Resource, getrlimit};
        // Linux caps the limit at fs.nr_open, so an "unlimited" never comes; were it
        // to, the count saturates and only the per-user limit stays meaningful.
        let limit = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| {
            usize::try_from(soft).unwrap_or(usize::MAX)
        });
        let own = open_descriptors().map_or(OWN_UNKNOWN, |n| n.saturating_sub(clients));
        Self { limit, own }
    }
}

/// How many descriptors this process has open, from `/proc/self/fd` (less the one
/// reading it).
fn open_descriptors() -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(dir.filter(Result::is_ok).count().saturating_sub(1))
}

/// `n` descriptors, or a sixteenth of `limit` when that is less, so that a small limit
/// (a test's `ulimit -n 40`) still leaves room for clients.
#[must_use]
pub(crate) const fn scaled(limit: usize, n: usize) -> usize {
    if limit / 16 < n { limit / 16 } else { n }
}

/// What the limits say about a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Take it.
    Admitted,
    /// Its user already holds `held` connections, the per-user `limit`.
    OverUserLimit {
        /// The user's open connections.
        held: usize,
        /// `max_connections_per_user` as it applies.
        limit: usize,
    },
    /// The open client connections reached the `shared` ones; the rest is the reserve.
    OverShared {
        /// The open client connections.
        open: usize,
        /// [`ConnLimits::shared`].
        shared: usize,
    },
}

/// The open client connections, by user, and the limits they are held to.
#[derive(Debug, Clone)]
pub(crate) struct ConnLimits {
    /// The daemon's effective uid, which shares root's reserve.
    own_uid: u32,
    descriptors: Descriptors,
    /// `max_connections_per_user` as configured (`None`: derived).
    configured: Option<u32>,
    /// Client connections open now.
    open: usize,
    /// Open connections of each user that has one.
    by_user: HashMap<u32, usize>,
}

impl ConnLimits {
    /// Limits for a daemon running as `own_uid`, with `descriptors` (see
    /// [`Descriptors::count`]) and the derived per-user limit.
    #[must_use]
    pub(crate) fn new(own_uid: u32, descriptors: Descriptors) -> Self {
        Self {
            own_uid,
            descriptors,
            configured: None,
            open: 0,
            by_user: HashMap::new(),
        }
    }

    /// Sets `max_connections_per_user` (`None`: half of [`ConnLimits::shared`]). It
    /// applies to connections that come next; a user over a lowered limit keeps the
    /// connections it has.
    pub(crate) fn set_per_user(&mut self, limit: Option<u32>) {
        self.configured = limit;
    }

    /// Counts the daemon's descriptors again (the limit, its own), with the client
    /// connections it holds now.
    pub(crate) fn recount(&mut self) {
        self.descriptors = Descriptors::count(self.open);
    }

    /// Descriptors only root and the daemon's user get.
    #[must_use]
    pub(crate) const fn reserve(&self) -> usize {
        scaled(self.descriptors.limit, RESERVE)
    }

    /// The daemon's own descriptors, with the margin for those it opens later.
    #[must_use]
    pub(crate) const fn own(&self) -> usize {
        self.descriptors.own + scaled(self.descriptors.limit, MARGIN)
    }

    /// The client connections open to everyone together: the descriptor limit less the
    /// daemon's own and the reserve.
    #[must_use]
    pub(crate) const fn shared(&self) -> usize {
        self.descriptors
            .limit
            .saturating_sub(self.own())
            .saturating_sub(self.reserve())
    }

    /// The connections one user other than root and the daemon's may hold: as
    /// configured, else half of [`ConnLimits::shared`] (at least one).
    #[must_use]
    pub(crate) fn per_user(&self) -> usize {
        match self.configured {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => (self.shared() / 2).max(1),
        }
    }

    /// Whether the per-user limit is derived rather than configured.
    #[must_use]
    pub(crate) const fn per_user_derived(&self) -> bool {
        self.configured.is_none()
    }

    /// Whether connections of `uid` get the reserve: root's and the daemon's own user's.
    #[must_use]
    pub(crate) const fn privileged(&self, uid: Option<u32>) -> bool {
        matches!(uid, Some(u) if u == 0 || u == self.own_uid)
    }

    /// Client connections open now.
    #[cfg(test)]
    #[must_use]
    pub(crate) const fn open(&self) -> usize {
        self.open
    }

    /// Connections `uid` holds now.
    #[must_use]
    pub(crate) fn held(&self, uid: u32) -> usize {
        self.by_user.get(&uid).copied().unwrap_or(0)
    }

    /// Whether a new connection of `uid` (`None`: no credentials) may be taken.
    #[must_use]
    pub(crate) fn admit(&self, uid: Option<u32>) -> Admission {
        if self.privileged(uid) {
            return Admission::Admitted;
        }
        if let Some(u) = uid {
            let (held, limit) = (self.held(u), self.per_user());
            if held >= limit {
                return Admission::OverUserLimit { held, limit };
            }
        }
        let shared = self.shared();
        if self.open >= shared {
            return Admission::OverShared {
                open: self.open,
                shared,
            };
        }
        Admission::Admitted
    }

    /// A connection of `uid` was taken.
    pub(crate) fn opened(&mut self, uid: Option<u32>) {
        self.open += 1;
        if let Some(u) = uid {
            *self.by_user.entry(u).or_insert(0) += 1;
        }
    }

    /// A connection of `uid` that [`ConnLimits::opened`] counted was closed.
    pub(crate) fn closed(&mut self, uid: Option<u32>) {
        self.open = self.open.saturating_sub(1);
        if let Some(u) = uid
            && let Some(n) = self.by_user.get_mut(&u)
        {
            *n -= 1;
            if *n == 0 {
                self.by_user.remove(&u);
            }
        }
    }

    /// The limits in words, for the log.
    #[must_use]
    pub(crate) fn describe(&self) -> String {
        let d = self.descriptors;
        let how = if self.per_user_derived() {
            "half of those"
        } else {
            "max_connections_per_user"
        };
        let privileged = if self.own_uid == 0 {
            "root".to_owned()
        } else {
            format!("root and uid {}", self.own_uid)
        };
        format!(
            "client connections: {} for all users together and {} per user ({how}), of a descriptor limit of {}, less {} for the daemon's own files and devices and {} for {privileged} only",
            self.shared(),
            self.per_user(),
            d.limit,
            self.own(),
            self.reserve(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN_UID: u32 = 0;
    const USER: Option<u32> = Some(1000);
    const OTHER: Option<u32> = Some(1001);

    fn limits(limit: usize, own: usize) -> ConnLimits {
        ConnLimits::new(OWN_UID, Descriptors { limit, own })
    }

    #[test]
    fn the_shared_connections_leave_the_daemon_its_own_and_root_its_reserve() {
        let l = limits(524_288, 20);
        assert_eq!(l.own(), 20 + MARGIN);
        assert_eq!(l.reserve(), RESERVE);
        assert_eq!(l.shared(), 524_288 - 20 - MARGIN - RESERVE);
        assert_eq!(l.per_user(), l.shared() / 2);
        // Small limits scale the margin and the reserve down.
        let small = limits(40, 10);
        assert_eq!((small.reserve(), small.own(), small.shared()), (2, 12, 26));
        assert_eq!(limits(16, 30).shared(), 0);
        assert_eq!(limits(16, 30).per_user(), 1);
    }

    #[test]
    fn a_user_at_its_limit_is_refused_and_others_are_not() {
        let mut l = limits(1024, 16);
        l.set_per_user(Some(3));
        for _ in 0..3 {
            assert_eq!(l.admit(USER), Admission::Admitted);
            l.opened(USER);
        }
        assert_eq!(
            l.admit(USER),
            Admission::OverUserLimit { held: 3, limit: 3 }
        );
        assert_eq!(l.admit(OTHER), Admission::Admitted);
        assert_eq!(l.admit(None), Admission::Admitted, "no user, no user limit");
        l.closed(USER);
        assert_eq!(l.admit(USER), Admission::Admitted);
        assert_eq!((l.held(1000), l.open()), (2, 2));
        // A lowered limit refuses new connections only.
        l.set_per_user(Some(1));
        assert_eq!(
            l.admit(USER),
            Admission::OverUserLimit { held: 2, limit: 1 }
        );
        assert_eq!(l.held(1000), 2);
    }

    #[test]
    fn root_and_the_daemon_user_get_the_reserve_when_the_shared_ones_are_taken() {
        let mut l = ConnLimits::new(
            990,
            Descriptors {
                limit: 1024,
                own: 16,
            },
        );
        let shared = l.shared();
        assert_eq!(shared, 1024 - 16 - 64 - 64);
        assert_eq!(l.per_user(), shared / 2);
        // Two users take half each (shared is even here), and no one else gets in.
        for _ in 0..shared / 2 {
            l.opened(USER);
            l.opened(OTHER);
        }
        assert_eq!(
            l.admit(USER),
            Admission::OverUserLimit {
                held: shared / 2,
                limit: shared / 2
            }
        );
        let full = Admission::OverShared {
            open: shared,
            shared,
        };
        assert_eq!(l.admit(Some(1002)), full);
        assert_eq!(l.admit(None), full, "TCP clients get no reserve");
        // Root and the daemon's user do, and beyond it.
        assert_eq!(l.admit(Some(0)), Admission::Admitted);
        assert_eq!(l.admit(Some(990)), Admission::Admitted);
        for _ in 0..100 {
            l.opened(Some(0));
        }
        assert_eq!(l.admit(Some(0)), Admission::Admitted);
        // Closing brings the others back in, once under the shared count.
        for _ in 0..100 {
            l.closed(Some(0));
        }
        l.closed(OTHER);
        assert_eq!(l.admit(Some(1002)), Admission::Admitted);
        assert_eq!(
            l.describe(),
            "client connections: 880 for all users together and 440 per user (half of those), of a descriptor limit of 1024, less 80 for the daemon's own files and devices and 64 for root and uid 990 only"
        );
    }

    #[test]
    fn this_process_counts_its_descriptors() {
        // Other tests open and close files meanwhile: only what holds regardless.
        let d = Descriptors::count(0);
        assert!(
            d.own >= 3 && d.own < d.limit,
            "standard streams at least: {d:?}"
        );
        assert_eq!(
            Descriptors::count(usize::MAX).own,
            0,
            "clients are not its own"
        );
    }
}
