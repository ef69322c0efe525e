//! Parse and emit cost of every wire format acm-proto speaks, one message per iteration
//! (criterion; `cargo bench -p acm-proto`, or `cargo bench -p acm-proto -- --test` to run
//! each bench once as a check).
//!
//! Each group is one message kind with two benches: `parse` (bytes to `Repr`, the whole
//! validation included) and `emit` (`Repr` into a reused buffer). The client messages are
//! real bytes: what Debian's `ib_acme` wrote and the real `ibacm` 44.0 answered
//! (`testdata/captures/real-ibacm/`, compiled in). The MADs, the GRH and the netlink
//! messages have no capture; they are built with acm-proto from the same capture
//! environment (the reference fabric: GIDs fe80::2:c903:a0:b001 and …b002, LIDs 1 and 2,
//! pkey 0xffff, 2048-byte MTU, 10 Gb/s), the PathRecord being the one the real daemon
//! returned.

use acm_proto::acm_mad::AcmMadRepr;
use acm_proto::client::{
    AddrType, Direction, EpQueryReplyRepr, EpQueryRepr, PerfQueryRepr, PerfReplyRepr, ResolveRepr,
};
use acm_proto::grh::GrhRepr;
use acm_proto::mad::{MAD_LEN, Method};
use acm_proto::mcmember::{McCompMask, McMemberRecordRepr};
use acm_proto::mgid::AcmMgid;
use acm_proto::netlink::{LsReplyRepr, LsRequestRepr, PathUse, ResolveHeaderRepr};
use acm_proto::path_record::{PathDataRepr, PathFlags, PathRecordRepr};
use acm_proto::sa::{SA_HEADER_LEN, SaHeaderRepr};
use acm_proto::{Bytes64, Gid, Mtu, Rate};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

macro_rules! capture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/captures/real-ibacm/",
            $name
        ))
    };
}

/// `ib_acme -s 10.0.0.1 -d 10.0.0.2`: SOURCE and DEST IPv4 entries (160 bytes).
const RESOLVE_REQUEST: &[u8] = capture!("resolve_preloaded_ip.req000.bin");
/// Its answer: one PATH entry (88 bytes).
const RESOLVE_REPLY: &[u8] = capture!("resolve_preloaded_ip.resp000.bin");
/// `ib_acme -P s -s 10.0.0.1`: PERF_QUERY with a source entry (88 bytes).
const PERF_REQUEST: &[u8] = capture!("perf_src_ip.req000.bin");
/// Seven counters (72 bytes).
const PERF_REPLY: &[u8] = capture!("perf_col.resp000.bin");
/// `ib_acme -e 1` (16 bytes).
const EP_REQUEST: &[u8] = capture!("ep_one.req000.bin");
/// Endpoint 1 with three addresses (288 bytes).
const EP_REPLY: &[u8] = capture!("ep_one.resp000.bin");

fn gid(text: &str) -> Gid {
    text.parse::<std::net::Ipv6Addr>()
        .expect("a GID literal")
        .into()
}

/// The PathRecord the real daemon returned (the PATH entry's last 64 bytes).
fn captured_path() -> &'static [u8] {
    &RESOLVE_REPLY[16 + 8..16 + 72]
}

/// One group `name` with a `parse` and an `emit` bench.
fn pair<R>(
    c: &mut Criterion,
    name: &str,
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> R,
    emit: impl Fn(&R, &mut [u8]),
) {
    let repr = parse(bytes);
    let mut buf = vec![0u8; bytes.len().max(MAD_LEN)];
    emit(&repr, &mut buf);
    assert_eq!(
        &buf[..bytes.len()],
        bytes,
        "{name}: emit reproduces the bytes"
    );
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse", |b| b.iter(|| parse(black_box(bytes))));
    g.bench_function("emit", |b| {
        b.iter(|| emit(black_box(&repr), black_box(&mut buf)));
    });
    g.finish();
}

/// One [`pair`] per row `name: Repr = bytes[, direction];` for a Repr whose
/// `parse(bytes[, direction])` returns a `Result` and whose `emit(buf[, direction])` writes
/// it back (the client messages take the direction, the other formats do not).
macro_rules! pairs {
    ($c:expr; $($name:literal: $repr:ty = $bytes:expr $(, $dir:expr)?;)*) => {
        $(
            pair(
                $c,
                $name,
                $bytes,
                |b| <$repr>::parse(b $(, $dir)?).expect(concat!($name, " parses")),
                |r, buf| {
                    r.emit(buf $(, $dir)?);
                },
            );
        )*
    };
}

fn client(c: &mut Criterion) {
    use Direction::{Request, Response};
    pairs! { c;
        "client_resolve_request": ResolveRepr = RESOLVE_REQUEST, Request;
        "client_resolve_reply": ResolveRepr = RESOLVE_REPLY, Response;
        "client_perf_query_request": PerfQueryRepr = PERF_REQUEST, Request;
        "client_perf_query_reply": PerfReplyRepr = PERF_REPLY, Response;
        "client_ep_query_request": EpQueryRepr = EP_REQUEST, Request;
        "client_ep_query_reply": EpQueryReplyRepr = EP_REPLY, Response;
    }
}

/// A 256-byte SA MAD: `header`, then `data` at offset 56.
fn sa_mad(header: &SaHeaderRepr, data: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; MAD_LEN];
    header.emit(&mut m);
    m[SA_HEADER_LEN..SA_HEADER_LEN + data.len()].copy_from_slice(data);
    m
}

/// A [`pair`] for an SA MAD: the SA header and the record at offset 56, the record parsed
/// and emitted with `parse` and `emit`.
fn sa_pair<R>(
    c: &mut Criterion,
    name: &str,
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> acm_proto::Result<R>,
    emit: impl Fn(&R, &mut [u8]),
) {
    pair(
        c,
        name,
        bytes,
        |b| {
            (
                SaHeaderRepr::parse(b).expect("SA header parses"),
                parse(&b[SA_HEADER_LEN..]).expect("SA record parses"),
            )
        },
        |(h, r), buf| {
            h.emit(buf);
            emit(r, &mut buf[SA_HEADER_LEN..]);
        },
    );
}

fn mads(c: &mut Criterion) {
    // The SA's PathRecord answer to the daemon's query for 10.0.0.2's path.
    let path = PathRecordRepr::parse(captured_path()).expect("captured path parses");
    let mut header = SaHeaderRepr::path_record_get(0x0000_0001_0000_002a, path.sa_comp_mask());
    header.mad.method = Method::GET_RESP;
    header.attr_offset = 8;
    let bytes = sa_mad(&header, captured_path());
    sa_pair(
        c,
        "sa_path_record_response",
        &bytes,
        PathRecordRepr::parse,
        PathRecordRepr::emit,
    );

    // The daemon's MCMemberRecord join of its default group (SA Set).
    let mgid = AcmMgid::new(0xffff, Rate::RATE_10, Mtu::MTU_2048).to_gid();
    let rec = McMemberRecordRepr::ibacm_join(
        mgid,
        gid("fe80::2:c903:a0:b001"),
        0xffff,
        Rate::RATE_10,
        Mtu::MTU_2048,
    );
    let bytes = sa_mad(
        &SaHeaderRepr::mcmember_join(0x0000_0001_0000_0001, McCompMask::IBACM_JOIN),
        &rec.to_bytes(),
    );
    sa_pair(
        c,
        "sa_mcmember_join",
        &bytes,
        McMemberRecordRepr::parse,
        McMemberRecordRepr::emit,
    );

    // ACM resolve: 10.0.0.1 asks its group for 10.0.0.2, and 10.0.0.2's answer.
    let request = AcmMadRepr::resolve_request(
        0x0000_0002_0000_0001,
        AddrType::IP,
        Bytes64::zero_padded(&[10, 0, 0, 2]),
        AddrType::IP,
        Bytes64::zero_padded(&[10, 0, 0, 1]),
        &[mgid],
    );
    let response = AcmMadRepr::resolve_response(0x0000_0002_0000_0001, mgid);
    pairs! { c;
        "acm_mad_resolve_request": AcmMadRepr = &request.to_bytes();
        "acm_mad_resolve_response": AcmMadRepr = &response.to_bytes();
    }

    // The GRH in front of a received multicast resolve.
    let grh = GrhRepr {
        pay_len: MAD_LEN as u16,
        hop_limit: 0xff,
        ..GrhRepr::iba(gid("fe80::2:c903:a0:b001"), mgid)
    };
    pairs! { c;
        "grh": GrhRepr = &grh.to_bytes();
    }
}

fn netlink(c: &mut Criterion) {
    // The kernel's PathRecord request for 10.0.0.2's GID (docs/test-vectors.md §19's
    // shape), and the daemon's answer with the captured path.
    let mut request = LsRequestRepr::resolve(77, ResolveHeaderRepr::new("mlx5_0", 1, PathUse::GMP));
    request.dgid = Some(gid("fe80::2:c903:a0:b002"));
    request.sgid = Some(gid("fe80::2:c903:a0:b001"));
    request.pkey = Some(0xffff);
    let data = PathDataRepr {
        flags: PathFlags::IBACMP_REPLY,
        reserved: 0,
        path: PathRecordRepr::parse(captured_path()).expect("captured path parses"),
    };
    let reply = LsReplyRepr::success(&request.header, 4242, data);
    pairs! { c;
        "netlink_ls_request": LsRequestRepr = &request.to_vec();
        "netlink_ls_response": LsReplyRepr = &reply.to_vec();
    }
}

criterion_group!(benches, client, mads, netlink);
criterion_main!(benches);
