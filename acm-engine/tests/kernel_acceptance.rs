//! The kernel model (tests/support/kernel_model.rs), rule by rule: for each rule by which
//! the kernel refuses, ignores or falls back on an answer, a message that breaks it and
//! the verdict the kernel's code gives it (docs/protocol/netlink-ls.md §6). The engine's
//! own answers pass through the same model in every test that drives an engine
//! (`support::Node`, and the engine fuzz body).

mod support;

use acm_engine::Instant;
use acm_proto::Gid;
use acm_proto::netlink::{
    LsReplyRepr, NLMSG_HDRLEN, NlMsgFlags, NlMsgHeaderPacket, NlMsgHeaderRepr, PathUse,
    RDMA_NLA_F_MANDATORY, SetTimeoutRepr, nla_align, put_attr,
};
use acm_proto::path_record::{PathDataRepr, PathFlags, PathRecordRepr};
use std::time::Duration;
use support::kernel_model::{EINVAL, EIO, EPERM, KernelModel, MAX_RECORDS, Rule, Verdict};
use support::kernel_requests::{ip_resolve, ipoib, rdma_cm_ipv4, rdma_cm_tcp_service_id};

const DGID: &str = "fe80::2:c903:a0:b002";
const SGID: &str = "fe80::2:c903:a0:b001";

fn gid(s: &str) -> Gid {
    s.parse().expect("a GID")
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// A message as a user process would send it: type, flags, seq, then attributes
/// `(nla_type, payload)`.
fn message(msg_type: u16, flags: NlMsgFlags, seq: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; NLMSG_HDRLEN];
    for (t, p) in attrs {
        let start = b.len();
        b.resize(start + nla_align(4 + p.len()), 0);
        put_attr(&mut b[start..], *t, p);
    }
    NlMsgHeaderRepr {
        msg_type,
        flags,
        seq,
        pid: 4321,
    }
    .emit(&mut b, 0);
    let len = u32::try_from(b.len()).expect("short");
    NlMsgHeaderPacket::new_unchecked(&mut b[..]).set_nlmsg_len(len);
    b
}

/// The 72 bytes of an `ib_path_rec_data` with `flags`.
fn record(flags: u32) -> Vec<u8> {
    let data = PathDataRepr {
        flags: PathFlags(flags),
        reserved: 0,
        path: PathRecordRepr {
            dgid: gid(DGID),
            sgid: gid(SGID),
            dlid: 2,
            slid: 1,
            pkey: 0xffff,
            ..PathRecordRepr::default()
        },
    };
    let mut b = vec![0u8; 72];
    data.emit(&mut b);
    b
}

const RESOLVE: u16 = 0x1000;
const SET_TIMEOUT: u16 = 0x1001;
const IP_RESOLVE: u16 = 0x1002;
const PATH_RECORD: u16 = 1;
const ANSWER: NlMsgFlags = NlMsgFlags::EMPTY;

/// A kernel that multicast a path query with `path_use` as request `seq` at 0 ms.
fn waiting_for_path(seq: u32, path_use: PathUse) -> KernelModel {
    let mut k = KernelModel::default();
    let mut q = rdma_cm_ipv4(gid(DGID), gid(SGID), 0xffff, rdma_cm_tcp_service_id(1), 0);
    q.path_use = path_use;
    k.request(at(0), &q.message(seq));
    k
}

/// A kernel that multicast an IP_RESOLVE as request `seq` at 0 ms.
fn waiting_for_gid(seq: u32) -> KernelModel {
    let mut k = KernelModel::default();
    k.request(
        at(0),
        &ip_resolve(seq, 3, "10.0.0.2".parse().expect("an address")),
    );
    k
}

fn one_record(seq: u32, flags: u32) -> Vec<u8> {
    message(RESOLVE, ANSWER, seq, &[(PATH_RECORD, &record(flags))])
}

#[test]
fn the_engines_answer_shapes_are_taken_for_the_use_that_selects_them() {
    // 0x2B for GMP and ALL, 0x0A for UNIDIRECTIONAL: what docs/protocol/netlink-ls.md §5
    // says ibacm sends.
    for (path_use, flags) in [
        (PathUse::GMP, 0x2b),
        (PathUse::ALL, 0x2b),
        (PathUse::UNIDIRECTIONAL, 0x0a),
    ] {
        let mut k = waiting_for_path(7, path_use);
        let header = NlMsgHeaderRepr {
            msg_type: RESOLVE,
            seq: 7,
            ..NlMsgHeaderRepr::default()
        };
        let data = PathDataRepr::parse(&record(flags)).expect("a record");
        let reply = LsReplyRepr::success(&header, 1, data).to_vec();
        assert_eq!(
            k.judge(at(5), &reply),
            Verdict::Path(vec![data]),
            "{path_use:?}"
        );
        assert_eq!(k.waiting_paths(), 0, "the answer ends the request");
    }
}

#[test]
fn framing_the_kernel_cannot_read_is_dropped() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let mut short = one_record(1, 0x2b);
    NlMsgHeaderPacket::new_unchecked(&mut short[..]).set_nlmsg_len(12);
    assert_eq!(k.judge(at(1), &short), Verdict::Ignored(Rule::BadLength));
    let mut long = one_record(1, 0x2b);
    NlMsgHeaderPacket::new_unchecked(&mut long[..]).set_nlmsg_len(200);
    assert_eq!(k.judge(at(1), &long), Verdict::Ignored(Rule::BadLength));
    assert_eq!(k.judge(at(1), &[0; 10]), Verdict::Ignored(Rule::BadLength));
    let mut two = one_record(1, 0x2b);
    two.extend(one_record(1, 0x2b));
    assert_eq!(
        k.judge(at(1), &two),
        Verdict::Undefined(Rule::SeveralMessages)
    );
    assert_eq!(k.waiting_paths(), 1, "nothing answered");
}

#[test]
fn control_messages_and_other_clients_are_not_ls_answers() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let control = message(2, ANSWER, 1, &[]);
    assert_eq!(
        k.judge(at(1), &control),
        Verdict::Ignored(Rule::ControlMessage)
    );
    let nldev = message(0x1400, ANSWER, 1, &[(PATH_RECORD, &record(0x2b))]);
    assert_eq!(k.judge(at(1), &nldev), Verdict::Ignored(Rule::NotLs));
}

#[test]
fn an_op_without_a_handler_is_refused_with_einval() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let op3 = message(0x1003, NlMsgFlags::LS_ERR, 1, &[]);
    assert_eq!(
        k.judge(at(1), &op3),
        Verdict::Refused(EINVAL, Rule::UnknownOp)
    );
}

#[test]
fn a_sender_without_cap_net_admin_is_refused_with_eperm() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    k.sender_capable = false;
    assert_eq!(
        k.judge(at(1), &one_record(1, 0x2b)),
        Verdict::Refused(EPERM, Rule::NoCapability)
    );
    let set = SetTimeoutRepr::new(0, 1, 500).to_vec();
    assert_eq!(
        k.judge(at(1), &set),
        Verdict::Refused(EPERM, Rule::NoCapability)
    );
    assert_eq!(k.waiting_paths(), 1, "the kernel still waits: 2 s lost");
}

#[test]
fn an_answer_with_nlm_f_request_is_refused_with_eperm() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let req = message(
        RESOLVE,
        NlMsgFlags::REQUEST,
        1,
        &[(PATH_RECORD, &record(0x2b))],
    );
    assert_eq!(
        k.judge(at(1), &req),
        Verdict::Refused(EPERM, Rule::RequestFlagOnAnswer)
    );
    let mut k = waiting_for_gid(2);
    let req = message(IP_RESOLVE, NlMsgFlags::REQUEST, 2, &[(4, &gid(DGID).0)]);
    assert_eq!(
        k.judge(at(1), &req),
        Verdict::Refused(EPERM, Rule::RequestFlagOnAnswer)
    );
}

#[test]
fn set_timeout_without_nlm_f_request_is_refused_with_eperm() {
    let mut k = KernelModel::default();
    let bare = message(SET_TIMEOUT, ANSWER, 0, &[(2, &500u32.to_ne_bytes())]);
    assert_eq!(
        k.judge(at(0), &bare),
        Verdict::Refused(EPERM, Rule::SetTimeoutWithoutRequest)
    );
    assert_eq!(k.wait_ms, 2000);
}

#[test]
fn an_answer_nobody_waits_for_is_ignored() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    assert_eq!(
        k.judge(at(1), &one_record(2, 0x2b)),
        Verdict::Ignored(Rule::UnknownSeq)
    );
    // The ops keep separate lists: a RESOLVE answer for an IP_RESOLVE's seq, and the
    // other way round, find nothing.
    let mut k = waiting_for_gid(5);
    assert_eq!(
        k.judge(at(1), &one_record(5, 0x2b)),
        Verdict::Ignored(Rule::UnknownSeq)
    );
    let mut k = waiting_for_path(6, PathUse::GMP);
    let gid_answer = message(IP_RESOLVE, ANSWER, 6, &[(4, &gid(DGID).0)]);
    assert_eq!(
        k.judge(at(1), &gid_answer),
        Verdict::Ignored(Rule::UnknownSeq)
    );
}

#[test]
fn a_path_answer_after_the_kernels_wait_is_ignored() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    assert_eq!(
        k.judge(at(2000), &one_record(1, 0x2b)),
        Verdict::Ignored(Rule::AfterKernelWait)
    );
    // 1999 ms is in time.
    let mut k = waiting_for_path(1, PathUse::GMP);
    assert!(matches!(
        k.judge(at(1999), &one_record(1, 0x2b)),
        Verdict::Path(_)
    ));
}

#[test]
fn the_error_flag_sends_the_kernel_to_the_sa() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    // Whatever follows the flag.
    let err = message(
        RESOLVE,
        NlMsgFlags::LS_ERR,
        1,
        &[(PATH_RECORD, &record(0x2b))],
    );
    assert_eq!(k.judge(at(1), &err), Verdict::SaQuery(Rule::ErrorFlag));
    assert_eq!(k.waiting_paths(), 0);
}

#[test]
fn the_policy_refuses_overlong_binaries_and_short_integers() {
    let long_record = [record(0x2b), vec![0; 4]].concat();
    for (what, attrs) in [
        ("a 76-byte PATH_RECORD", vec![(PATH_RECORD, long_record)]),
        ("a 17-byte DGID", vec![(4, vec![0; 17])]),
        ("a 1-byte PKEY", vec![(7, vec![0xff])]),
        ("a 4-byte SERVICE_ID", vec![(3, vec![0; 4])]),
        ("an empty TCLASS", vec![(6, vec![])]),
    ] {
        let mut k = waiting_for_path(1, PathUse::GMP);
        let mut all: Vec<(u16, &[u8])> = attrs.iter().map(|(t, p)| (*t, &p[..])).collect();
        let good = record(0x2b);
        all.push((PATH_RECORD, &good));
        let reply = message(RESOLVE, ANSWER, 1, &all);
        assert_eq!(
            k.judge(at(1), &reply),
            Verdict::SaQuery(Rule::PolicyRefused),
            "{what}"
        );
    }
    // The parser does not know a type with the mandatory bit (0x2007 is above its
    // largest type): such an attribute is not checked, and the path is taken.
    let mut k = waiting_for_path(1, PathUse::GMP);
    let good = record(0x2b);
    let reply = message(
        RESOLVE,
        ANSWER,
        1,
        &[(RDMA_NLA_F_MANDATORY | 7, &[0xff]), (PATH_RECORD, &good)],
    );
    assert!(matches!(k.judge(at(1), &reply), Verdict::Path(_)));
}

#[test]
fn a_path_record_typed_with_flag_bits_is_skipped_and_the_query_fails() {
    // 0x2001 is what a checker that masks the flag bits would pass; the kernel
    // compares the type exactly, finds no record, and fails the query with EIO.
    for t in [RDMA_NLA_F_MANDATORY | PATH_RECORD, 0x4001, 0x8001] {
        let mut k = waiting_for_path(1, PathUse::GMP);
        let reply = message(RESOLVE, ANSWER, 1, &[(t, &record(0x2b))]);
        assert_eq!(
            k.judge(at(1), &reply),
            Verdict::Failed(EIO, Rule::InexactType),
            "type {t:#x}"
        );
    }
}

#[test]
fn a_short_path_record_would_be_read_past() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let reply = message(RESOLVE, ANSWER, 1, &[(PATH_RECORD, &record(0x2b)[..64])]);
    assert_eq!(
        k.judge(at(1), &reply),
        Verdict::Undefined(Rule::ShortRecord)
    );
}

#[test]
fn a_record_must_carry_the_flags_its_use_needs() {
    for (path_use, flags) in [
        // UNIDIRECTIONAL needs PRIMARY|OUTBOUND.
        (PathUse::UNIDIRECTIONAL, 0x03),
        // GMP needs PRIMARY|GMP|BIDIRECTIONAL: 0x0A lacks GMP and INBOUND_REVERSE.
        (PathUse::GMP, 0x0a),
        // ALL needs PRIMARY.
        (PathUse::ALL, 0x29),
    ] {
        let mut k = waiting_for_path(1, path_use);
        assert_eq!(
            k.judge(at(1), &one_record(1, flags)),
            Verdict::Failed(EIO, Rule::FlagsLackUseMask),
            "{path_use:?} with {flags:#x}"
        );
    }
}

#[test]
fn a_good_answer_without_a_record_fails_the_query_with_eio_not_an_sa_query() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    let empty = message(RESOLVE, ANSWER, 1, &[]);
    assert_eq!(
        k.judge(at(1), &empty),
        Verdict::Failed(EIO, Rule::NoUsableRecord)
    );
    assert_eq!(k.waiting_paths(), 0, "the request is over, failed");
}

#[test]
fn all_keeps_up_to_three_records_the_other_uses_the_first() {
    let flags = [0x2b, 0x12, 0x0a, 0x2b];
    let recs: Vec<Vec<u8>> = flags.iter().map(|f| record(*f)).collect();
    let attrs: Vec<(u16, &[u8])> = recs.iter().map(|r| (PATH_RECORD, &r[..])).collect();
    let mut k = waiting_for_path(1, PathUse::ALL);
    let Verdict::Path(kept) = k.judge(at(1), &message(RESOLVE, ANSWER, 1, &attrs)) else {
        panic!("taken");
    };
    let kept: Vec<u32> = kept.iter().map(|r| r.flags.0).collect();
    assert_eq!(kept, flags[..MAX_RECORDS]);
    let mut k = waiting_for_path(1, PathUse::GMP);
    let Verdict::Path(kept) = k.judge(at(1), &message(RESOLVE, ANSWER, 1, &attrs)) else {
        panic!("taken");
    };
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].flags.0, 0x2b);
}

#[test]
fn rdma_cm_needs_a_gmp_record_and_records_of_a_known_kind() {
    // PRIMARY alone meets ALL's mask, but is neither GMP, INBOUND nor OUTBOUND.
    let mut k = waiting_for_path(1, PathUse::ALL);
    assert_eq!(
        k.judge(at(1), &one_record(1, 0x02)),
        Verdict::Failed(EINVAL, Rule::RecordOfNoKind)
    );
    // An inbound record alone leaves rdma_cm without a primary path.
    let mut k = waiting_for_path(1, PathUse::ALL);
    assert_eq!(
        k.judge(at(1), &one_record(1, 0x12)),
        Verdict::Failed(0, Rule::NoGmpRecord)
    );
}

#[test]
fn an_error_reply_to_an_ip_resolve_is_ignored() {
    let mut k = waiting_for_gid(1);
    let err = message(IP_RESOLVE, NlMsgFlags::LS_ERR, 1, &[]);
    assert_eq!(
        k.judge(at(1), &err),
        Verdict::Ignored(Rule::ErrorToIpResolve)
    );
}

#[test]
fn an_ip_resolve_answer_needs_a_dgid_of_exactly_type_4_and_16_bytes() {
    let mut k = waiting_for_gid(1);
    let short = message(IP_RESOLVE, ANSWER, 1, &[(4, &[0; 15])]);
    assert_eq!(
        k.judge(at(1), &short),
        Verdict::Ignored(Rule::IpPolicyRefused)
    );
    let mandatory = message(
        IP_RESOLVE,
        ANSWER,
        1,
        &[(RDMA_NLA_F_MANDATORY | 4, &gid(DGID).0)],
    );
    assert_eq!(k.judge(at(1), &mandatory), Verdict::Undefined(Rule::NoDgid));
    let none = message(IP_RESOLVE, ANSWER, 1, &[]);
    assert_eq!(k.judge(at(1), &none), Verdict::Undefined(Rule::NoDgid));
    let good = message(IP_RESOLVE, ANSWER, 1, &[(4, &gid(DGID).0)]);
    assert_eq!(k.judge(at(1), &good), Verdict::Gid(gid(DGID)));
}

#[test]
fn an_ip_resolve_is_answered_until_its_callers_timeout() {
    let good = message(IP_RESOLVE, ANSWER, 1, &[(4, &gid(DGID).0)]);
    // Past the path wait of 2000 ms, within the caller's 5000.
    let mut k = KernelModel::default();
    k.ip_caller_timeout = Duration::from_millis(5000);
    k.request(
        at(0),
        &ip_resolve(1, 3, "fd00::2".parse().expect("an address")),
    );
    assert_eq!(k.judge(at(2500), &good), Verdict::Gid(gid(DGID)));
    assert_eq!(
        k.judge(at(5000), &good),
        Verdict::Ignored(Rule::AfterCallerTimeout)
    );
    assert!(Verdict::Ignored(Rule::AfterCallerTimeout).is_expected_of_the_engine());
}

#[test]
fn set_timeout_needs_a_timeout_of_exactly_type_2_and_4_bytes() {
    let mut k = KernelModel::default();
    let mandatory = message(
        SET_TIMEOUT,
        NlMsgFlags::REQUEST,
        0,
        &[(RDMA_NLA_F_MANDATORY | 2, &500u32.to_ne_bytes())],
    );
    assert_eq!(
        k.judge(at(0), &mandatory),
        Verdict::Ignored(Rule::NoTimeout)
    );
    let short = message(SET_TIMEOUT, NlMsgFlags::REQUEST, 0, &[(2, &[0xf4, 0x01])]);
    assert_eq!(
        k.judge(at(0), &short),
        Verdict::Ignored(Rule::TimeoutPolicyRefused)
    );
    assert_eq!(k.wait_ms, 2000, "unchanged");
    // Our SET_TIMEOUT.
    let ours = SetTimeoutRepr::new(0, 1, 500).to_vec();
    assert_eq!(k.judge(at(0), &ours), Verdict::WaitSet(500));
}

#[test]
fn the_kernel_clamps_the_timeout_it_is_given() {
    let mut k = KernelModel::default();
    for (asked, kept) in [(50, 100), (300_000, 200_000), (u32::MAX, 100), (4000, 4000)] {
        let set = SetTimeoutRepr::new(0, 1, asked).to_vec();
        assert_eq!(k.judge(at(0), &set), Verdict::WaitSet(kept), "{asked}");
    }
}

#[test]
fn a_new_timeout_moves_the_deadlines_of_waiting_requests() {
    let mut k = waiting_for_path(1, PathUse::GMP);
    k.request(at(0), &ipoib(gid(DGID), gid(SGID), 0xffff, 0).message(2));
    assert_eq!(
        k.judge(at(10), &SetTimeoutRepr::new(0, 1, 5000).to_vec()),
        Verdict::WaitSet(5000)
    );
    // In time under the new wait, too late under the old.
    assert!(matches!(
        k.judge(at(4000), &one_record(1, 0x2b)),
        Verdict::Path(_)
    ));
    assert_eq!(
        k.judge(at(4000), &SetTimeoutRepr::new(0, 1, 1000).to_vec()),
        Verdict::WaitSet(1000)
    );
    assert_eq!(
        k.judge(at(4000), &one_record(2, 0x0a)),
        Verdict::Ignored(Rule::AfterKernelWait)
    );
}
