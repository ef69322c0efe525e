//! The emulated host's IP routing, for source selection: a program that asks the
//! kernel which source it would use for a destination (a UDP socket `connect`ed to
//! it, then `getsockname`, as ibacm does for a RESOLVE without a source) gets the
//! answer of the emulated host, not of the machine the test runs on. The rule is the
//! simulator's ([`acm_io_sim::fabric::route_with_default`]: the host's own address,
//! its address on the destination's subnet, or its default route), over the
//! addresses and default route the hub gave the host.
//!
//! Loopback and unspecified destinations stay the machine's; an IPv6 link-local
//! destination without a scope fails with EINVAL, as the kernel's connect does.

#[cfg(not(test))]
pub mod intercept;

use crate::fdset::FdSet;
use crate::ffi::lock;
use acm_io_sim::fabric;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// What a datagram `connect` to a destination does under the emulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Left to the machine (loopback, unspecified).
    Machine,
    /// "Connected", with this source.
    Source(IpAddr),
    /// Fails with this errno.
    Fail(i32),
}

/// The route to `dest` (with IPv6 scope `scope_id`) for a host with addresses `ips`
/// (address, prefix length) and default route `default_route`.
pub fn route(
    ips: &[(IpAddr, u8)],
    default_route: Option<IpAddr>,
    dest: IpAddr,
    scope_id: u32,
) -> Route {
    if dest.is_loopback() || dest.is_unspecified() {
        return Route::Machine;
    }
    if let IpAddr::V6(v6) = dest
        && v6.segments()[0] & 0xFFC0 == 0xFE80
        && scope_id == 0
    {
        return Route::Fail(libc::EINVAL);
    }
    match fabric::route_with_default(ips.iter().copied(), default_route, dest) {
        Ok(src) => Route::Source(src),
        Err(errno) => Route::Fail(i32::from(errno)),
    }
}

/// Sockets "connected" by the emulation, with their source.
static SOURCES: Mutex<BTreeMap<i32, IpAddr>> = Mutex::new(BTreeMap::new());
static FDS: FdSet = FdSet::new();

/// Records `fd`'s source; false when the descriptor is too high to be tracked.
pub fn connected(fd: i32, src: IpAddr) -> bool {
    if !FDS.set(fd, true) {
        return false;
    }
    lock(&SOURCES).insert(fd, src);
    true
}

/// `fd`'s emulated source, if it has one (one atomic load when it has not).
pub fn source(fd: i32) -> Option<IpAddr> {
    if !FDS.contains(fd) {
        return None;
    }
    lock(&SOURCES).get(&fd).copied()
}

/// Forgets a socket being closed.
pub fn closed(fd: i32) {
    if FDS.contains(fd) {
        FDS.set(fd, false);
        lock(&SOURCES).remove(&fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sources_follow_the_emulated_host() {
        let ips = [(ip("10.0.0.1"), 24), (ip("fd00::1"), 64)];
        let def = Some(ip("192.168.122.17"));
        let cases = [
            (def, "10.0.0.2", 0, Route::Source(ip("10.0.0.1"))),
            (def, "fd00::9", 0, Route::Source(ip("fd00::1"))),
            (def, "10.9.9.9", 0, Route::Source(ip("192.168.122.17"))),
            (None, "10.9.9.9", 0, Route::Fail(libc::ENETUNREACH)),
            (def, "fd01::1", 0, Route::Fail(libc::ENETUNREACH)),
            (def, "fe80::1", 0, Route::Fail(libc::EINVAL)),
            (def, "fe80::1", 2, Route::Fail(libc::ENETUNREACH)),
            (def, "127.0.0.1", 0, Route::Machine),
            (def, "::", 0, Route::Machine),
        ];
        for (default, dest, scope, want) in cases {
            assert_eq!(
                route(&ips, default, ip(dest), scope),
                want,
                "{dest} (scope {scope}, default {default:?})"
            );
        }
    }

    #[test]
    fn sockets_are_tracked_until_closed() {
        assert!(connected(900, ip("10.0.0.1")));
        assert_eq!(source(900), Some(ip("10.0.0.1")));
        closed(900);
        assert_eq!(source(900), None);
        assert!(!connected(100_000, ip("10.0.0.1")));
    }
}
