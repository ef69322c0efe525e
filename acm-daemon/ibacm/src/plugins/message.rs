//! The client messages a C provider is handed and answers with (`struct acm_msg`,
//! docs/providers.md §2), built and read through acm-proto's views.
//!
//! The engine keeps the client's own bytes and builds every reply itself from an
//! [`Outcome`], so a provider gets the request rebuilt from what the engine parsed
//! (source first, destination second, `src_index` 0 and `dst_index` 1), and its answer
//! is read for the status and the path only.

use acm_engine::Address;
use acm_engine::provider::{Outcome, Resolve};
use acm_io_verbs::provider::abi::{ACM_MSG_LEN, AcmMsg};
use acm_proto::client::{
    AddrType, Direction, ENTRY_LEN, EpFlags, HEADER_LEN, MessagePacket, Opcode, Status,
};

/// A provider's answer, owned (its bytes are gone by the time it is completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A path.
    Path([u8; 64]),
    /// A failure status.
    Failed(Status),
    /// A QUERY_SA result.
    Query {
        /// The SA status, or ETIMEDOUT.
        status: Status,
        /// The record area.
        path: [u8; 64],
    },
}

impl Answer {
    /// The engine's view of it.
    #[must_use]
    pub(crate) fn outcome(&self) -> Outcome<'_> {
        match self {
            Self::Path(p) => Outcome::Path(p),
            Self::Failed(s) => Outcome::Failed(*s),
            Self::Query { status, path } => Outcome::Query {
                status: *status,
                path,
            },
        }
    }
}

/// A message with a header for `entries` entries; `id` goes in the TID.
fn message(entries: usize, data: [u8; 3], id: u64) -> AcmMsg {
    let mut msg = AcmMsg([0; ACM_MSG_LEN]);
    let mut m = MessagePacket::new_unchecked(&mut msg.0[..]);
    let mut h = m.header_mut();
    h.set_version(acm_proto::client::ACM_VERSION);
    h.set_opcode(Opcode::RESOLVE);
    h.set_data(data);
    h.set_length(
        Direction::Request,
        (HEADER_LEN + entries * ENTRY_LEN) as u16,
    );
    h.set_tid(id);
    msg
}

fn set_entry(msg: &mut AcmMsg, i: usize, flags: EpFlags, ty: AddrType, info: &[u8; 64]) {
    let mut m = MessagePacket::new_unchecked(&mut msg.0[..]);
    if let Some(mut e) = m.entry_mut(i) {
        e.set_flags(flags);
        e.set_addr_type(ty);
        e.info_mut().copy_from_slice(info);
    }
}

/// The RESOLVE message a provider's `resolve` gets.
#[must_use]
pub(crate) fn resolve(req: &Resolve, id: u64) -> AcmMsg {
    match req {
        Resolve::Dest { src, dest, flags } => {
            // data: src_out 0, src_index 0, dst_index 1.
            let mut msg = message(2, [0, 0, 1], id);
            set_entry(&mut msg, 0, EpFlags::SOURCE, src.ty, &src.bytes.0);
            set_entry(&mut msg, 1, *flags, dest.ty, &dest.bytes.0);
            msg
        }
        Resolve::Path { path, flags } => {
            let mut msg = message(1, [0; 3], id);
            set_entry(&mut msg, 0, *flags, AddrType::PATH, path);
            msg
        }
    }
}

/// The QUERY_SA message a provider's `query` gets.
#[must_use]
pub(crate) fn query(path: &[u8; 64], id: u64) -> AcmMsg {
    let mut msg = message(1, [0; 3], id);
    set_entry(&mut msg, 0, EpFlags::QUERY_SA, AddrType::PATH, path);
    msg
}

/// A provider's resolve answer: its status, and on success the first PATH entry (none
/// is read as ENODATA).
#[must_use]
pub(crate) fn resolve_answer(bytes: &[u8]) -> Answer {
    let m = MessagePacket::new_unchecked(bytes);
    let status = m.header().status();
    if status != Status::SUCCESS {
        return Answer::Failed(status);
    }
    (0..m.entry_count())
        .filter_map(|i| m.entry(i))
        .find(|e| e.addr_type() == AddrType::PATH)
        .map_or(Answer::Failed(Status::ENODATA), |e| {
            let mut p = [0u8; 64];
            p.copy_from_slice(e.info());
            Answer::Path(p)
        })
}

/// A provider's QUERY_SA answer: its status and entry 0's record (zeros if the message
/// is too short to hold one).
#[must_use]
pub(crate) fn query_answer(bytes: &[u8]) -> Answer {
    let m = MessagePacket::new_unchecked(bytes);
    let mut path = [0u8; 64];
    if let Some(e) = m.entry(0) {
        path.copy_from_slice(e.info());
    }
    Answer::Query {
        status: m.header().status(),
        path,
    }
}

/// An address as `struct acm_address` carries it: its type and 64 bytes.
#[must_use]
pub(crate) fn address_parts(a: &Address) -> (u16, [u8; 64]) {
    (a.ty.0, a.bytes.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_destination_resolve_carries_source_then_destination() {
        let src = Address::ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let dest = Address::ipv4(Ipv4Addr::new(10, 0, 0, 2));
        let req = Resolve::Dest {
            src,
            dest,
            flags: EpFlags::DEST,
        };
        let msg = resolve(&req, 7);
        let m = MessagePacket::new_unchecked(&msg.0[..]);
        let h = m.header();
        assert_eq!(h.opcode(), Opcode::RESOLVE);
        assert_eq!(h.length(Direction::Request), 160);
        assert_eq!(h.data(), [0, 0, 1]);
        assert_eq!(h.tid(), 7);
        let e0 = m.entry(0).unwrap();
        assert_eq!(
            (e0.flags(), e0.addr_type()),
            (EpFlags::SOURCE, AddrType::IP)
        );
        assert_eq!(&e0.info()[..4], &[10, 0, 0, 1]);
        let e1 = m.entry(1).unwrap();
        assert_eq!((e1.flags(), e1.addr_type()), (EpFlags::DEST, AddrType::IP));
    }

    #[test]
    fn answers_read_status_and_path() {
        let mut path = [0u8; 64];
        path[0] = 0xAB;
        let mut msg = query(&path, 1);
        // A success answer with the path in entry 0.
        assert_eq!(resolve_answer(&msg.0[..88]), Answer::Path(path));
        MessagePacket::new_unchecked(&mut msg.0[..])
            .header_mut()
            .set_status(Status::ETIMEDOUT);
        assert_eq!(
            resolve_answer(&msg.0[..16]),
            Answer::Failed(Status::ETIMEDOUT)
        );
        assert_eq!(
            query_answer(&msg.0[..88]),
            Answer::Query {
                status: Status::ETIMEDOUT,
                path
            }
        );
        // Success without a path entry is no data.
        MessagePacket::new_unchecked(&mut msg.0[..])
            .header_mut()
            .set_status(Status::SUCCESS);
        assert_eq!(
            resolve_answer(&msg.0[..16]),
            Answer::Failed(Status::ENODATA)
        );
    }
}
