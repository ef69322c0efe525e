//! Who may ask the daemon: the unix socket's group and mode, and allow-lists of users
//! and groups checked with each client's credentials when it connects.
//!
//! The reference lets every local user in (its socket is mode 0777, bound with umask
//! 0), and so does this daemon by default: librdmacm resolves through the socket from
//! every user's RDMA program. An administrator can narrow that in two ways, both
//! optional:
//!
//! - the socket file's group and mode (`server_socket_group`, `server_socket_mode`):
//!   the kernel then refuses `connect` to users without write permission on it;
//! - allow-lists (`allow_users`, `allow_groups`): every client of the unix socket is
//!   identified by its `SO_PEERCRED` credentials at accept, and one that is not
//!   listed is closed before any of its requests is read, with one log line giving
//!   its pid, uid and gid.
//!
//! The kernel's RDMA_NL_LS requests do not come through the socket and are not
//! subject to any of this: they are the kernel's.
//!
//! # Supplementary groups
//!
//! `allow_groups` matches the client's primary group (from `SO_PEERCRED`) and its
//! supplementary groups, read from the `Groups:` line of `/proc/PID/status` of the
//! pid `SO_PEERCRED` names. That file is the process's own credentials, the ones the
//! kernel checks the socket file's group against, so the two mechanisms agree. The
//! alternative, `getgrouplist(3)` of the uid's name, would be the user database's idea
//! of the groups instead: wrong for a process that dropped or changed groups
//! (`setgroups`, `newgrp`, systemd's `SupplementaryGroups=`), absent for a uid without a
//! passwd entry (containers), and an NSS lookup (LDAP, sssd) that may block the
//! single-threaded event loop at every connection. `SO_PEERGROUPS` would be exact and
//! race-free, but reading it needs an `unsafe` `getsockopt` this crate does not do.
//!
//! The file is only used when its `Uid:` and `Gid:` lines show the effective ids
//! `SO_PEERCRED` gave; otherwise (the process has exited and the pid is reused, or it
//! lives in a pid namespace the daemon cannot see, where the pid is 0) only the
//! primary group counts, so an unknown never lets anyone in.
//!
//! # Always allowed
//!
//! With an allow-list, root and the daemon's own user are always let in: both can read
//! and change the daemon's memory and configuration anyway, so refusing them would
//! protect nothing and only break the administrator's `ib_acme`.

use std::fmt;

/// A user or group as the administrator wrote it, with its numeric id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id {
    /// The name or number as written.
    pub written: String,
    /// The uid or gid.
    pub id: u32,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.written == self.id.to_string() {
            write!(f, "{}", self.id)
        } else {
            write!(f, "{} ({})", self.written, self.id)
        }
    }
}

/// The socket file's permissions; `None` leaves the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketAccess {
    /// The permission bits (default 0777, as the reference).
    pub mode: Option<u32>,
    /// The group owning the socket file (default: the daemon's).
    pub group: Option<Id>,
}

/// The socket's permissions and the allow-lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessConfig {
    /// The unix socket file's group and mode.
    pub socket: SocketAccess,
    /// Who may connect.
    pub allow: AllowList,
}

/// Users and groups allowed to connect; both empty lets everyone in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    /// `allow_users`.
    pub users: Vec<Id>,
    /// `allow_groups`.
    pub groups: Vec<Id>,
}

/// A connected client's credentials, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The pid that connected.
    pub pid: i32,
    /// Its effective uid.
    pub uid: u32,
    /// Its effective gid.
    pub gid: u32,
}

/// What the allow-lists say about a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let in.
    Allowed,
    /// Refused; the supplementary groups that were checked (`None`: they could not be
    /// read, or no group list needed them), for the log line.
    Refused {
        /// The supplementary groups checked.
        groups: Option<Vec<u32>>,
    },
}

impl AllowList {
    /// Whether everyone may connect (no list given: the reference's behaviour).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// Decides for `peer`. `own_uid` is the daemon's effective uid; `supplementary`
    /// reads the peer's supplementary groups, and is only called when the primary ids
    /// decide nothing and a group list exists.
    pub fn check(
        &self,
        peer: Peer,
        own_uid: u32,
        supplementary: impl FnOnce(Peer) -> Option<Vec<u32>>,
    ) -> Verdict {
        if self.is_open()
            || peer.uid == 0
            || peer.uid == own_uid
            || self.users.iter().any(|u| u.id == peer.uid)
            || self.groups.iter().any(|g| g.id == peer.gid)
        {
            return Verdict::Allowed;
        }
        if self.groups.is_empty() {
            return Verdict::Refused { groups: None };
        }
        let groups = supplementary(peer);
        let listed = groups
            .as_ref()
            .is_some_and(|gs| gs.iter().any(|g| self.groups.iter().any(|a| a.id == *g)));
        if listed {
            Verdict::Allowed
        } else {
            Verdict::Refused { groups }
        }
    }
}

/// The supplementary groups of `peer`'s process, from `/proc/PID/status` (see the
/// module documentation for why this source, and when it is not trusted).
#[must_use]
pub(crate) fn proc_groups(peer: Peer) -> Option<Vec<u32>> {
    if peer.pid <= 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{}/status", peer.pid)).ok()?;
    status_groups(&text, peer)
}

/// The `Groups:` of a `/proc/PID/status` text, if its effective uid and gid are
/// `peer`'s.
#[must_use]
pub(crate) fn status_groups(text: &str, peer: Peer) -> Option<Vec<u32>> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| rest.split_ascii_whitespace().collect::<Vec<_>>())
    };
    let effective = |key: &str| field(key)?.get(1)?.parse::<u32>().ok();
    if effective("Uid:")? != peer.uid || effective("Gid:")? != peer.gid {
        return None;
    }
    field("Groups:")?
        .iter()
        .map(|g| g.parse::<u32>().ok())
        .collect()
}

/// The names in a list value: separated by commas, spaces or both
/// (`alice, bob,1001`).
///
/// # Errors
/// An empty list, or an empty name between two commas.
pub(crate) fn split_list(value: &str) -> Result<Vec<String>, &'static str> {
    let mut names = Vec::new();
    for part in value.split(',') {
        let words: Vec<&str> = part.split_ascii_whitespace().collect();
        if words.is_empty() {
            return Err("expected names or numbers separated by commas, with none empty");
        }
        names.extend(words.into_iter().map(str::to_owned));
    }
    Ok(names)
}

/// `value` as permission bits: octal, at most 0777 (`0770`, `770`).
///
/// # Errors
/// Anything else.
pub(crate) fn parse_mode(value: &str) -> Result<u32, &'static str> {
    u32::from_str_radix(value, 8)
        .ok()
        .filter(|m| *m <= 0o777 && !value.starts_with('+'))
        .ok_or("expected octal permission bits such as 0770 (at most 0777)")
}

/// What to look a name up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The passwd database.
    User,
    /// The group database.
    Group,
}

/// A user or group by name or number. A word of digits is a number, used as it is
/// (an id needs no database entry); anything else is looked up once, at start.
///
/// # Errors
/// No such name, or the lookup failed.
pub(crate) fn lookup(kind: Kind, written: &str) -> Result<Id, String> {
    if !written.is_empty() && written.bytes().all(|b| b.is_ascii_digit()) {
        let id = written
            .parse::<u32>()
            .map_err(|_| format!("{written} is not a valid id"))?;
        return Ok(Id {
            written: written.to_owned(),
            id,
        });
    }
    let found = match kind {
        Kind::User => nix::unistd::User::from_name(written).map(|u| u.map(|u| u.uid.as_raw())),
        Kind::Group => nix::unistd::Group::from_name(written).map(|g| g.map(|g| g.gid.as_raw())),
    };
    let what = match kind {
        Kind::User => "user",
        Kind::Group => "group",
    };
    match found {
        Ok(Some(id)) => Ok(Id {
            written: written.to_owned(),
            id,
        }),
        Ok(None) => Err(format!("no {what} named '{written}'")),
        Err(e) => Err(format!("cannot look up {what} '{written}': {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(id: u32) -> Id {
        Id {
            written: id.to_string(),
            id,
        }
    }

    const PEER: Peer = Peer {
        pid: 42,
        uid: 1000,
        gid: 1000,
    };

    #[test]
    fn lists_and_modes_parse() {
        assert_eq!(
            split_list("alice, bob,1001  carol").unwrap(),
            ["alice", "bob", "1001", "carol"]
        );
        assert!(split_list("").is_err());
        assert!(split_list("alice,,bob").is_err());
        assert!(split_list("alice,").is_err());
        assert_eq!(parse_mode("0770"), Ok(0o770));
        assert_eq!(parse_mode("660"), Ok(0o660));
        assert_eq!(parse_mode("0"), Ok(0));
        for bad in ["0778", "1777", "rw-rw----", "", "+770", "-1"] {
            assert!(parse_mode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_need_no_database_and_names_are_looked_up() {
        assert_eq!(lookup(Kind::User, "4242").unwrap().id, 4242);
        assert_eq!(lookup(Kind::User, "root").unwrap().id, 0);
        assert_eq!(lookup(Kind::Group, "root").unwrap().id, 0);
        assert_eq!(
            lookup(Kind::User, "no-such-user-acm").unwrap_err(),
            "no user named 'no-such-user-acm'"
        );
        assert_eq!(
            lookup(Kind::Group, "no-such-group-acm").unwrap_err(),
            "no group named 'no-such-group-acm'"
        );
        assert!(lookup(Kind::User, "99999999999").is_err());
        assert_eq!(lookup(Kind::User, "root").unwrap().to_string(), "root (0)");
        assert_eq!(id(7).to_string(), "7");
    }

    #[test]
    fn allow_lists_decide_by_uid_primary_and_supplementary_groups() {
        let never = |_| -> Option<Vec<u32>> { panic!("groups not needed") };
        let open = AllowList::default();
        assert_eq!(open.check(PEER, 0, never), Verdict::Allowed);

        let users = AllowList {
            users: vec![id(1000)],
            groups: vec![],
        };
        assert_eq!(users.check(PEER, 0, never), Verdict::Allowed);
        let other = Peer { uid: 1001, ..PEER };
        assert_eq!(
            users.check(other, 0, never),
            Verdict::Refused { groups: None }
        );
        // Root and the daemon's own user are always let in.
        assert_eq!(
            users.check(Peer { uid: 0, ..other }, 0, never),
            Verdict::Allowed
        );
        assert_eq!(users.check(other, 1001, never), Verdict::Allowed);

        let groups = AllowList {
            users: vec![],
            groups: vec![id(27)],
        };
        assert_eq!(
            groups.check(Peer { gid: 27, ..PEER }, 0, never),
            Verdict::Allowed
        );
        assert_eq!(
            groups.check(PEER, 0, |_| Some(vec![4, 27])),
            Verdict::Allowed
        );
        assert_eq!(
            groups.check(PEER, 0, |_| Some(vec![4])),
            Verdict::Refused {
                groups: Some(vec![4])
            }
        );
        assert_eq!(
            groups.check(PEER, 0, |_| None),
            Verdict::Refused { groups: None },
            "unknown groups let nobody in"
        );
    }

    #[test]
    fn proc_status_groups_are_used_only_for_the_same_credentials() {
        let status = "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t1000\t1000\t1000\nGroups:\t4 24 27 \n";
        assert_eq!(status_groups(status, PEER), Some(vec![4, 24, 27]));
        assert_eq!(status_groups(status, Peer { uid: 1001, ..PEER }), None);
        assert_eq!(status_groups(status, Peer { gid: 100, ..PEER }), None);
        let none = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t\n";
        assert_eq!(status_groups(none, PEER), Some(vec![]));
        assert_eq!(status_groups("Uid:\t1000\t1000\n", PEER), None);
        // This very process.
        let me = Peer {
            pid: std::process::id() as i32,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        };
        assert!(proc_groups(me).is_some());
        assert_eq!(proc_groups(Peer { pid: 0, ..me }), None);
    }
}
