//! The client-protocol test vectors of docs/test-vectors.md §1–§14, byte for byte.
//! Vectors 15–19 (MADs, MGIDs, netlink) live next to their formats' unit tests.

use acm_proto::client::{
    AddrType, ClientMessage, Direction, EpAddrRepr, EpAddress, EpFlags, HeaderRepr, Opcode,
    ResolveRepr, Status,
};
use acm_proto::path_record::{PathFlags, PathRecordRepr};
use acm_proto::{Mtu, Rate, Selected};
use std::net::Ipv4Addr;

fn resolve(entries: &[EpAddrRepr]) -> Vec<u8> {
    let mut m = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    for e in entries {
        m.push(*e).unwrap();
    }
    ClientMessage::Resolve(m).to_vec(Direction::Request)
}

fn reply(bytes: &[u8]) -> ResolveRepr {
    match ClientMessage::parse(bytes, Direction::Response).unwrap() {
        ClientMessage::Resolve(m) => m,
        other => panic!("not a resolve: {other:?}"),
    }
}

fn sample_path() -> PathRecordRepr {
    PathRecordRepr {
        dgid: "fe80::2:c903:a0:b002".parse().unwrap(),
        sgid: "fe80::2:c903:a0:b001".parse().unwrap(),
        dlid: 2,
        slid: 1,
        reversible: true,
        numpath: 1,
        pkey: 0xffff,
        mtu: Selected::exactly(Mtu::MTU_2048),
        rate: Selected::exactly(Rate::RATE_10),
        packet_lifetime: Selected::exactly(18),
        ..Default::default()
    }
}

#[test]
fn v1_ipv4_resolve_and_success_reply() {
    let src = EpAddrRepr::ipv4(EpFlags::SOURCE, Ipv4Addr::new(10, 0, 0, 1));
    let dst = EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::new(10, 0, 0, 2));
    let b = resolve(&[src, dst]);
    let mut expect = vec![1, 1, 0, 0, 0, 0, 0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    expect.extend([1, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 1]);
    expect.extend([0; 60]);
    expect.extend([2, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 2]);
    expect.extend([0; 60]);
    assert_eq!(b, expect);

    // The success reply: opcode still 0x01, one PATH entry with flags 0x2B.
    let mut r = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    r.push(EpAddrRepr::path(
        EpFlags(PathFlags::IBACMP_REPLY.0),
        &sample_path(),
    ))
    .unwrap();
    let rb = ClientMessage::Resolve(r).to_vec(Direction::Response);
    assert_eq!(&rb[..8], &[1, 1, 0, 0, 0, 0, 0x58, 0]);
    assert_eq!(&rb[16..24], &[0x2B, 0, 0, 0, 0x10, 0, 0, 0]);
    let back = reply(&rb);
    assert_eq!(back.entries[0].address(), EpAddress::Path(sample_path()));
}

#[test]
fn v2_nodelay_flag_bytes_and_miss() {
    let dst = EpAddrRepr::ipv4(EpFlags::DEST | EpFlags::NODELAY, Ipv4Addr::new(10, 0, 0, 2));
    let b = resolve(&[dst]);
    assert_eq!(&b[16..20], &[2, 0, 0, 0x40]);
    let miss = reply(&[1, 1, 3, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(miss.header.status, Status::ENODATA);
}

#[test]
fn v3_no_source_request_and_160_byte_reply() {
    let b = resolve(&[EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::new(10, 0, 0, 2))]);
    assert_eq!(&b[..8], &[1, 1, 0, 0, 0, 0, 0x58, 0]);
    let mut r = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    r.push(EpAddrRepr::path(EpFlags(0x2B), &sample_path()))
        .unwrap();
    r.push(EpAddrRepr::ipv4(
        EpFlags::SOURCE,
        Ipv4Addr::new(10, 0, 0, 1),
    ))
    .unwrap();
    let rb = ClientMessage::Resolve(r).to_vec(Direction::Response);
    assert_eq!(&rb[..8], &[1, 1, 0, 0, 0, 0, 0xA0, 0]);
    assert_eq!(&rb[88..100], &[1, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 1]);
}

#[test]
fn v4_v5_name_resolve() {
    let b = resolve(&[
        EpAddrRepr::name(EpFlags::SOURCE, "node1"),
        EpAddrRepr::name(EpFlags::DEST, "node2"),
    ]);
    assert_eq!(&b[16..22], &[1, 0, 0, 0, 1, 0]);
    assert_eq!(&b[24..30], b"node1\0");
    assert!(b[30..88].iter().all(|&x| x == 0));
    let r = reply(&[1, 0x81, 0x0A, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(r.header.opcode, Opcode::RESOLVE_ACK);
    assert_eq!(r.header.status, Status::EDESTTYPE);
    assert_eq!(r.header.status.libacm_errno(), 22);
}

#[test]
fn v6_v7_core_error_statuses() {
    for (status, byte) in [
        (Status::EDESTADDR, 9),
        (Status::ESRCTYPE, 8),
        (Status::EDESTTYPE, 10),
        (Status::ESRCADDR, 7),
    ] {
        let r = reply(&[1, 0x81, byte, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.header.status, status);
        assert_eq!(r.header.length, 16);
    }
    // Two DEST entries and a type-6 DEST encode as given (the engine judges them).
    let d = EpAddrRepr::new(EpFlags::DEST, AddrType(6), Default::default());
    let b = resolve(&[d, d]);
    assert_eq!(&b[16..22], &[2, 0, 0, 0, 6, 0]);
}

#[test]
fn v8_lid_resolve_path_bytes() {
    let path = PathRecordRepr {
        dlid: 5,
        reversible: true,
        numpath: 1,
        ..Default::default()
    };
    let b = resolve(&[EpAddrRepr::path(EpFlags::EMPTY, &path)]);
    assert_eq!(&b[..8], &[1, 1, 0, 0, 0, 0, 0x58, 0]);
    assert_eq!(&b[16..24], &[0, 0, 0, 0, 0x10, 0, 0, 0]);
    // Entry offset 48 = path offset 40 (dlid); entry offset 57 = path offset 49.
    assert_eq!(&b[16 + 48..16 + 50], &[0, 5]);
    assert_eq!(b[16 + 57], 0x81);
    // What the client sent, before the daemon adds slid/sgid/pkey: DLID|REVERSIBLE.
    assert_eq!(path.sa_comp_mask().0, 0x0810);
}

#[test]
fn v9_query_sa_flags() {
    let b = resolve(&[EpAddrRepr::path(EpFlags::QUERY_SA, &sample_path())]);
    assert_eq!(&b[16..22], &[0, 0, 0, 0x80, 0x10, 0]);
    let mut r = reply(&b);
    r.header.opcode = Opcode::RESOLVE_ACK;
    let rb = ClientMessage::Resolve(r).to_vec(Direction::Response);
    assert_eq!(&rb[..8], &[1, 0x81, 0, 0, 0, 0, 0x58, 0]);
    assert_eq!(&rb[16..20], &[0, 0, 0, 0x80]);
}

#[test]
fn v10_to_v13_perf_and_ep_messages() {
    let global = [1, 2, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        ClientMessage::parse(&global, Direction::Request),
        Ok(ClientMessage::PerfQuery(q)) if q.index() == 0 && q.entry.is_none()
    ));
    let by_index = [1, 2, 0, 0, 2, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        ClientMessage::parse(&by_index, Direction::Request),
        Ok(ClientMessage::PerfQuery(q)) if q.index() == 2
    ));
    let unknown_src = [1, 0x82, 7, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        ClientMessage::parse(&unknown_src, Direction::Response),
        Ok(ClientMessage::PerfReply(r)) if r.header.status == Status::ESRCADDR
    ));
    let ep_missing = [1, 0x83, 2, 1, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        ClientMessage::parse(&ep_missing, Direction::Response),
        Ok(ClientMessage::EpReply(r)) if r.config.is_none() && r.header.data[0] == 1
    ));
}

#[test]
fn v14_framing_errors_are_parse_errors() {
    // Version 2 parses (the daemon, not the parser, closes on it), so check it is visible.
    let v2 = [2, 2, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        ClientMessage::parse(&v2, Direction::Request)
            .unwrap()
            .header()
            .version,
        2
    );
    let bad_op = [1, 5, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        ClientMessage::parse(&bad_op, Direction::Request)
            .unwrap_err()
            .field,
        "opcode"
    );
    let mut short = resolve(&[EpAddrRepr::ipv4(EpFlags::DEST, Ipv4Addr::LOCALHOST)]);
    short[6] = 0xA0; // declares 160, carries 88
    assert_eq!(
        ClientMessage::parse(&short, Direction::Request)
            .unwrap_err()
            .field,
        "length"
    );
    let mut big = vec![0u8; 600];
    big[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 0x58, 0x02]);
    assert!(ClientMessage::parse(&big, Direction::Request).is_err());
}
