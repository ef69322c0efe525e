//! Arbitrary bytes from clients, peers, the SA and the kernel never panic the engine,
//! and every client message gets exactly one answer: a reply or a close.

mod support;

use acm_engine::RecvInfo;
use acm_engine::{ConnId, EndpointId, Input};
use quickcheck::{QuickCheck, TestResult};
use support::reference;

/// Bytes that look like a client message often enough to reach deep paths: a valid
/// version, an opcode among the real ones, and a length field that matches.
fn shaped(mut body: Vec<u8>, opcode: u8, big_endian: bool) -> Vec<u8> {
    body.truncate(592);
    if body.len() < 16 {
        body.resize(16, 0);
    }
    body[0] = 1;
    body[1] = opcode;
    let len = body.len() as u16;
    let field = if big_endian {
        len.to_be_bytes()
    } else {
        len.to_ne_bytes()
    };
    body[6..8].copy_from_slice(&field);
    body
}

fn answers(node: &support::Node, conn: ConnId) -> usize {
    node.replies.iter().filter(|(c, _)| *c == conn).count()
        + node.closes.iter().filter(|(c, _)| *c == conn).count()
}

#[test]
fn client_bytes_get_exactly_one_answer() {
    fn prop(raw: Vec<u8>, op: u8) -> TestResult {
        let mut node = reference::node();
        let opcode = [0x01, 0x02, 0x03, 0x81, op][usize::from(op % 5)];
        let shaped = shaped(raw.clone(), opcode, opcode != 0x01);
        for (i, msg) in [raw, shaped].iter().enumerate() {
            let conn = ConnId(i as u64 + 1);
            node.input(Input::ClientRequest { conn, bytes: msg });
            node.settle();
            if answers(&node, conn) != 1 {
                return TestResult::error(format!(
                    "{} answers to {}",
                    answers(&node, conn),
                    support::hex(msg)
                ));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<u8>, u8) -> TestResult);
}

#[test]
fn peer_sa_and_kernel_bytes_never_panic() {
    fn prop(mad: Vec<u8>, grh: Vec<u8>, class: u8) -> bool {
        let mut node = reference::node();
        let mut m = mad.clone();
        m.resize(256, 0);
        m[0] = 1;
        m[1] = [0x2c, 0x03, class][usize::from(class % 3)];
        m[2] = 1;
        m[6..8].copy_from_slice(&1u16.to_be_bytes());
        for bytes in [&mad, &m] {
            let wc = RecvInfo {
                slid: 7,
                src_qp: 9,
                dlid_path_bits: 0,
                pkey_index: 0,
            };
            node.input(Input::UdReceive {
                ep: EndpointId(0),
                wc,
                grh: Some(&grh),
                mad: bytes,
            });
            node.input(Input::SaResponse {
                port: reference::PORT,
                mad: bytes,
            });
            node.input(Input::Netlink(bytes));
            node.settle();
        }
        true
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<u8>, Vec<u8>, u8) -> bool);
}

/// A RESOLVE from 10.0.0.1 to `dst` (IPv4).
fn resolve(dst: [u8; 4]) -> Vec<u8> {
    let mut m = vec![0u8; 160];
    m[..8].copy_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]);
    m[6..8].copy_from_slice(&160u16.to_ne_bytes());
    m[16] = 1;
    m[20] = 2;
    m[24..28].copy_from_slice(&[10, 0, 0, 1]);
    m[88] = 2;
    m[92] = 2;
    m[96..100].copy_from_slice(&dst);
    m
}

#[test]
fn a_reused_connection_id_gets_only_its_own_replies() {
    let mut node = reference::node();
    let conn = ConnId(5);
    // A lookup that waits (nobody answers the ACM request), then the client goes.
    node.input(Input::ClientRequest {
        conn,
        bytes: &resolve([10, 0, 0, 77]),
    });
    node.input(Input::ClientClosed(conn));
    // The driver reuses the id for a new connection: its loopback resolve is answered.
    let r = node
        .request(conn, &resolve([10, 0, 0, 1]))
        .expect("the new connection is served");
    assert_eq!(r[2], 0);
    // The old request's lookup, which nobody else waited for, was cancelled when its
    // client closed; nothing of it may reach the new connection.
    node.settle();
    let replies: Vec<_> = node.replies.iter().filter(|(c, _)| *c == conn).collect();
    assert_eq!(replies.len(), 1, "only the new connection's reply");
    assert_eq!(node.engine.lookup_counters().cancelled, 1);
}

#[test]
fn address_file_lines_for_a_missing_port_or_pkey_are_logged_with_their_line() {
    let text = "fakehost fakeib0 1 default\nghost fakeib0 9 default\nother fakeib0 1 0x1234\n";
    let (addr_file, diags) = acm_engine::config::AddrFile::parse("ibacm_addr.cfg", text);
    assert!(diags.is_empty());
    let config = acm_engine::EngineConfig {
        addr_file: Some(addr_file),
        ..reference::config()
    };
    let mut node = support::Node::new(config, reference::sa(), reference::route());
    node.input(Input::DeviceAdded(reference::device()));
    let said: Vec<&String> = node
        .logs
        .iter()
        .filter(|l| l.contains("config: "))
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].ends_with("ibacm_addr.cfg:2: device fakeib0 has no port 9; 'ghost' is not used")
    );
    assert!(said[1].contains("ibacm_addr.cfg:3: port 1 of device fakeib0 has no pkey 0x1234"));
}
