//! What the emulated host is, from the environment of the process it is loaded into.
//!
//! The library is configured by environment variables because it is loaded with
//! `LD_PRELOAD` into programs (the daemon, Debian's tools) that know nothing about it.

use std::ffi::OsString;
use std::path::PathBuf;

/// The hub's socket. Without it the library emulates nothing: no devices are listed
/// and every file is the real one.
pub const HUB_ENV: &str = "ACM_FAKE_HCA_HUB";
/// The fabric description's host this process is.
pub const HOST_ENV: &str = "ACM_FAKE_HCA_HOST";
/// This host's socket path (default: `<hub socket's directory>/<host>.<pid>.hca`).
pub const SOCKET_ENV: &str = "ACM_FAKE_HCA_SOCKET";
/// Where the umad nodes are opened (default: `$ACM_DEV_ROOT`, else `/dev/infiniband`),
/// so that the same setting serves the daemon and the emulation.
pub const DEV_ROOT_ENV: &str = "ACM_FAKE_HCA_DEV_ROOT";
/// The daemon's own device-root setting, the default of [`DEV_ROOT_ENV`].
pub const DAEMON_DEV_ROOT_ENV: &str = "ACM_DEV_ROOT";
/// Set to `1` to answer `IB_USER_MAD_REGISTER_AGENT2` with ENOTTY, as kernels before
/// 3.18 (which lack it) do, so that the fallback to `REGISTER_AGENT` is exercised.
pub const NO_AGENT2_ENV: &str = "ACM_FAKE_HCA_NO_AGENT2";
/// A LID every port reports as its SM's instead of the fabric's: SA MADs sent there
/// reach no SA, so every query comes back from umad with ETIMEDOUT (a stale SM LID,
/// as after an SM moved).
pub const SM_LID_ENV: &str = "ACM_FAKE_HCA_SM_LID";

/// The emulation's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The hub's socket.
    pub hub: PathBuf,
    /// The host's name in the fabric description.
    pub host: String,
    /// This process's socket.
    pub socket: PathBuf,
    /// The directory whose `umad<N>` names are emulated.
    pub dev_root: PathBuf,
    /// Whether REGISTER_AGENT2 is refused.
    pub no_agent2: bool,
    /// The SM LID ports report instead of the fabric's.
    pub sm_lid: Option<u16>,
}

impl Config {
    /// Reads the settings through `var`; `None` when the emulation is not asked for
    /// (no hub or no host).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>, pid: u32) -> Option<Self> {
        let hub = PathBuf::from(var(HUB_ENV)?);
        let host = var(HOST_ENV)?.into_string().ok()?;
        let socket = var(SOCKET_ENV).map_or_else(
            || {
                hub.parent()
                    .unwrap_or_else(|| std::path::Path::new("/tmp"))
                    .join(format!("{host}.{pid}.hca"))
            },
            PathBuf::from,
        );
        let dev_root = var(DEV_ROOT_ENV)
            .or_else(|| var(DAEMON_DEV_ROOT_ENV))
            .map_or_else(|| PathBuf::from("/dev/infiniband"), PathBuf::from);
        let no_agent2 = var(NO_AGENT2_ENV).is_some_and(|v| v == "1");
        let sm_lid = var(SM_LID_ENV).and_then(|v| v.to_str()?.parse().ok());
        Some(Self {
            hub,
            host,
            socket,
            dev_root,
            no_agent2,
            sm_lid,
        })
    }

    /// The settings of this process.
    pub fn from_env() -> Option<Self> {
        Self::from_vars(|k| std::env::var_os(k), std::process::id())
    }
}

/// This process's settings, read once.
pub fn current() -> Option<&'static Config> {
    static CONFIG: std::sync::OnceLock<Option<Config>> = std::sync::OnceLock::new();
    CONFIG.get_or_init(Config::from_env).as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> Option<Config> {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Config::from_vars(|k| m.get(k).cloned(), 42)
    }

    #[test]
    fn nothing_is_emulated_without_hub_and_host() {
        assert_eq!(with(&[]), None);
        assert_eq!(with(&[(HUB_ENV, "/t/hub.sock")]), None);
        assert_eq!(with(&[(HOST_ENV, "node1")]), None);
    }

    #[test]
    fn defaults_follow_the_hub_and_the_daemon() {
        let c = with(&[
            (HUB_ENV, "/t/hub.sock"),
            (HOST_ENV, "node1"),
            (DAEMON_DEV_ROOT_ENV, "/t/dev"),
        ])
        .unwrap();
        assert_eq!(c.socket, PathBuf::from("/t/node1.42.hca"));
        assert_eq!(c.dev_root, PathBuf::from("/t/dev"));
        assert!(!c.no_agent2);
        assert_eq!(c.sm_lid, None);
        let c = with(&[
            (HUB_ENV, "/t/hub.sock"),
            (HOST_ENV, "node1"),
            (SOCKET_ENV, "/s/me.sock"),
            (DEV_ROOT_ENV, "/d"),
            (DAEMON_DEV_ROOT_ENV, "/t/dev"),
            (NO_AGENT2_ENV, "1"),
            (SM_LID_ENV, "77"),
        ])
        .unwrap();
        assert_eq!(
            (c.socket, c.dev_root, c.no_agent2, c.sm_lid),
            (
                PathBuf::from("/s/me.sock"),
                PathBuf::from("/d"),
                true,
                Some(77)
            )
        );
    }
}
