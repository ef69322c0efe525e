//! Whether this process may answer the kernel's RDMA_NL_LS requests, decided before the
//! daemon listens for them (docs/protocol/netlink-ls.md §1).
//!
//! The kernel lets any process join the LS group, but takes an answer only from a
//! sender with CAP_NET_ADMIN in the initial user namespace (the send itself fails with
//! EPERM otherwise). A listener that cannot answer is worse than none: the kernel sees
//! it, sends it every path query and waits its whole timeout (2 s by default) for each
//! before asking the SA. So a daemon without the capability does not listen at all.
//!
//! The answer comes from `/proc/self/status` (the effective set) and
//! `/proc/self/uid_map` (whether this is the initial user namespace, the only one whose
//! capabilities count for RDMA netlink). When those cannot be read the daemon listens,
//! and the first refused answer makes it leave the group
//! ([`super::channel::KernelChannel`]).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;

/// CAP_NET_ADMIN's bit in the capability sets.
const CAP_NET_ADMIN: u32 = 12;

/// The most bytes read from a `/proc` file: both are far smaller.
const PROC_FILE_MAX: u64 = 64 * 1024;

/// Whether answers to the kernel can be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerPermission {
    /// CAP_NET_ADMIN is effective in the initial user namespace.
    Granted,
    /// The kernel would refuse every answer; the text says why.
    Denied(&'static str),
    /// The process's capabilities could not be read (the text says why): listen, and
    /// stop at the first refused answer.
    Unknown(String),
}

/// This process's permission, from `/proc/self`.
#[must_use]
pub(crate) fn answer_permission() -> AnswerPermission {
    let status = match read_proc("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return AnswerPermission::Unknown(format!("/proc/self/status: {e}")),
    };
    let uid_map = read_proc("/proc/self/uid_map").ok();
    decide(&status, uid_map.as_deref())
}

/// The permission that `status` (a `/proc/PID/status` text) and `uid_map` (a
/// `/proc/PID/uid_map` text, `None` when unreadable) give.
#[must_use]
pub(crate) fn decide(status: &str, uid_map: Option<&str>) -> AnswerPermission {
    let Some(effective) = effective_caps(status) else {
        return AnswerPermission::Unknown("no CapEff line in /proc/self/status".into());
    };
    if effective & (1 << CAP_NET_ADMIN) == 0 {
        return AnswerPermission::Denied("no CAP_NET_ADMIN");
    }
    if uid_map.is_some_and(|m| !is_initial_user_namespace(m)) {
        return AnswerPermission::Denied(
            "CAP_NET_ADMIN only inside a user namespace, where the kernel does not count it",
        );
    }
    AnswerPermission::Granted
}

/// The effective capability set of a `/proc/PID/status` text (`CapEff:`, hexadecimal).
fn effective_caps(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Whether a `uid_map` text is the initial user namespace's: one line mapping every id
/// (0 to 0, 4294967295 of them).
fn is_initial_user_namespace(uid_map: &str) -> bool {
    let lines: Vec<Vec<&str>> = uid_map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| !f.is_empty())
        .collect();
    matches!(lines.as_slice(), [only] if only.as_slice() == ["0", "0", "4294967295"])
}

/// A small `/proc` file, read without blocking and without following a link at its
/// last component, up to [`PROC_FILE_MAX`] bytes.
fn read_proc(path: &str) -> io::Result<String> {
    let f = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a file"));
    }
    let mut text = String::new();
    f.take(PROC_FILE_MAX).read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INITIAL: &str = "         0          0 4294967295\n";

    fn status(cap_eff: &str) -> String {
        format!(
            "Name:\tibacm\nUmask:\t0022\nState:\tR (running)\nCapInh:\t0000000000000000\n\
             CapPrm:\t{cap_eff}\nCapEff:\t{cap_eff}\nCapBnd:\t000001ffffffffff\n"
        )
    }

    #[test]
    fn cap_net_admin_in_the_initial_namespace_grants() {
        // Root's full set, and the shipped unit's three capabilities (NET_ADMIN,
        // NET_RAW, IPC_LOCK: bits 12, 13, 14).
        for set in ["000001ffffffffff", "0000000000007000"] {
            assert_eq!(
                decide(&status(set), Some(INITIAL)),
                AnswerPermission::Granted,
                "{set}"
            );
        }
        // An unreadable uid_map does not deny what the set grants.
        assert_eq!(
            decide(&status("0000000000001000"), None),
            AnswerPermission::Granted
        );
    }

    #[test]
    fn without_cap_net_admin_the_kernel_would_refuse() {
        // What `setpriv --inh-caps=-net_admin --bounding-set=-net_admin` leaves root.
        let set = format!("{:016x}", 0x1ff_ffff_ffffu64 & !(1 << 12));
        assert_eq!(
            decide(&status(&set), Some(INITIAL)),
            AnswerPermission::Denied("no CAP_NET_ADMIN")
        );
        // An ordinary user.
        assert_eq!(
            decide(&status("0000000000000000"), Some(INITIAL)),
            AnswerPermission::Denied("no CAP_NET_ADMIN")
        );
    }

    #[test]
    fn a_user_namespace_capability_does_not_count() {
        let container = "         0     100000      65536\n";
        assert!(matches!(
            decide(&status("000001ffffffffff"), Some(container)),
            AnswerPermission::Denied(why) if why.contains("user namespace")
        ));
    }

    #[test]
    fn an_unreadable_status_leaves_it_to_the_kernel() {
        assert!(matches!(
            decide("Name:\tibacm\n", Some(INITIAL)),
            AnswerPermission::Unknown(_)
        ));
        assert!(matches!(
            decide("CapEff:\tnot hex\n", Some(INITIAL)),
            AnswerPermission::Unknown(_)
        ));
    }

    #[test]
    fn this_process_has_a_readable_answer() {
        // Whatever this test runs with, /proc says something definite.
        let p = answer_permission();
        assert!(!matches!(p, AnswerPermission::Unknown(_)), "{p:?}");
        let status = read_proc("/proc/self/status").expect("readable");
        let cap_eff = effective_caps(&status).expect("a CapEff line");
        println!("CapEff {cap_eff:#x}: {p:?}");
        if cap_eff & (1 << CAP_NET_ADMIN) == 0 {
            assert!(matches!(p, AnswerPermission::Denied(_)));
        }
    }
}
