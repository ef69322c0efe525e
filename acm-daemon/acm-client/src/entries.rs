//! Request entries built the way libacm builds them, shared by `ib_acme` (one request
//! per destination) and `acm-load` (every request built once before a run), so that both
//! send the same bytes for the same address.

use super::error::ClientError;
use acm_proto::client::{AddrType, EpAddrRepr, EpFlags};
use acm_proto::path_record::PathRecordRepr;
use acm_proto::{Bytes64, Gid};
use std::net::IpAddr;

/// A NAME entry, refusing names of 64 bytes or more as libacm does (a name must leave
/// room for its NUL in the 64-byte field).
///
/// # Errors
/// [`ClientError::NameTooLong`].
pub fn name_entry(flags: EpFlags, name: &str) -> Result<EpAddrRepr, ClientError> {
    if name.len() >= acm_proto::BYTES64_LEN {
        return Err(ClientError::NameTooLong);
    }
    Ok(EpAddrRepr::new(
        flags,
        AddrType::NAME,
        Bytes64::zero_padded(name.as_bytes()),
    ))
}

/// A PATH entry asking for the path from LID `slid` (0: any) to `dlid`, as libacm's
/// `ib_acm_resolve_path` sends it.
#[must_use]
pub fn lid_path_entry(flags: EpFlags, slid: u16, dlid: u16) -> EpAddrRepr {
    path_entry(
        flags,
        PathRecordRepr {
            slid,
            dlid,
            ..PathRecordRepr::default()
        },
    )
}

/// A PATH entry asking for the path from GID `sgid` (zero: any) to `dgid`.
#[must_use]
pub fn gid_path_entry(flags: EpFlags, sgid: Gid, dgid: Gid) -> EpAddrRepr {
    path_entry(
        flags,
        PathRecordRepr {
            sgid,
            dgid,
            ..PathRecordRepr::default()
        },
    )
}

/// A reversible, one-path request for `path`'s addresses.
fn path_entry(flags: EpFlags, path: PathRecordRepr) -> EpAddrRepr {
    let path = PathRecordRepr {
        reversible: true,
        numpath: 1,
        ..path
    };
    EpAddrRepr::path(flags, &path)
}

/// An IP or IP6 entry for an address.
#[must_use]
pub fn ip_entry(flags: EpFlags, ip: IpAddr) -> EpAddrRepr {
    match ip {
        IpAddr::V4(a) => EpAddrRepr::ipv4(flags, a),
        IpAddr::V6(a) => EpAddrRepr::ipv6(flags, a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno;

    #[test]
    fn names_of_64_bytes_are_refused() {
        assert!(name_entry(EpFlags::DEST, &"a".repeat(63)).is_ok());
        let e = name_entry(EpFlags::DEST, &"a".repeat(64)).unwrap_err();
        assert_eq!(e.errno(), errno::UNSET);
    }
}
