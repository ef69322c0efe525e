//! Source selection for a RESOLVE that names no source
//! (docs/protocol/client-messages.md §8.2): the kernel's routing decides, as in the
//! reference. A UDP socket of the destination's family is connected to the destination
//! (port 0, IPv6 scope 0) and `getsockname` gives the source the kernel would use.
//! Nothing is sent. The answer goes back to the engine as
//! [`acm_engine::Input::SourceAnswer`].
//!
//! Failures keep the reference's quirk (docs/reference-quirks.md §5): the errno itself
//! becomes the client's status (ENETUNREACH, 101, for no route; EINVAL, 22, for a
//! link-local IPv6 destination, since the scope is 0). The chosen address still has to be
//! one the engine knows; if it is not (an Ethernet address, say), the engine answers
//! ESRCADDR.

use acm_proto::client::Status;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// The status for a routing answer with an unspecified address (Linux does not give
/// one after a successful connect). The reference would look that address up, find no
/// endpoint and answer ESRCADDR; this gives the client the same status directly.
pub(crate) const NO_SOURCE: u8 = Status::ESRCADDR.0;

/// EIO, for a failure that carries no errno (none is expected).
const EIO: u8 = 5;

/// The local address the kernel's routing picks to reach `dest`.
///
/// # Errors
/// The failing system call's errno (as [`acm_engine::Input::SourceAnswer`] wants), or
/// [`NO_SOURCE`].
pub(crate) fn route_source(dest: IpAddr) -> Result<IpAddr, u8> {
    let any = match dest {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let sock = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(errno)?;
    sock.connect(SocketAddr::new(dest, 0)).map_err(errno)?;
    let src = sock.local_addr().map_err(errno)?.ip();
    if src.is_unspecified() {
        return Err(NO_SOURCE);
    }
    Ok(src)
}

fn errno(e: io::Error) -> u8 {
    e.raw_os_error()
        .and_then(|n| u8::try_from(n).ok())
        .unwrap_or(EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EINVAL: u8 = 22;
    const EACCES: u8 = 13;

    #[test]
    fn loopback_v4_routes_from_itself() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(route_source(lo), Ok(lo));
        // Any 127/8 destination leaves from the loopback interface.
        let src = route_source("127.0.0.9".parse().unwrap()).unwrap();
        assert!(src.is_loopback(), "{src}");
    }

    #[test]
    fn broadcast_without_so_broadcast_is_the_errno() {
        // Linux refuses to connect a UDP socket to the limited broadcast address without
        // SO_BROADCAST: EACCES, passed through as the status
        // (docs/reference-quirks.md §5).
        assert_eq!(route_source(IpAddr::V4(Ipv4Addr::BROADCAST)), Err(EACCES));
    }

    #[test]
    fn loopback_v6_when_the_host_has_it() {
        let lo = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let has_v6_loopback = UdpSocket::bind("[::1]:0").is_ok();
        if has_v6_loopback {
            assert_eq!(route_source(lo), Ok(lo));
            // Link-local with scope 0: refused, as in the reference.
            assert_eq!(route_source("fe80::1".parse().unwrap()), Err(EINVAL));
        } else {
            // No IPv6 (disabled, or no ::1): the lookup fails with some errno, and
            // never with the "unspecified source" status.
            let e = route_source(lo).unwrap_err();
            assert_ne!(e, 0);
            assert_ne!(e, NO_SOURCE);
        }
    }

    #[test]
    fn errno_conversion() {
        assert_eq!(errno(io::Error::from_raw_os_error(101)), 101);
        assert_eq!(errno(io::Error::from_raw_os_error(1000)), EIO);
        assert_eq!(errno(io::Error::other("no errno")), EIO);
        assert_eq!(NO_SOURCE, 7);
    }
}
