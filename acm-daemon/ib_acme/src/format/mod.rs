//! Presenting results: the [`Report`] trait the operations talk to, the text report
//! that reproduces Debian's `ib_acme` output line for line ([`output`]), the
//! `--json` report ([`json`]) and the `--format prometheus` report ([`prometheus`]).
//!
//! Keeping the operations ignorant of the output format lets both formats show exactly
//! the same results, and keeps the order of the text lines in one place.

pub(crate) mod json;
pub(crate) mod output;
pub(crate) mod prometheus;

use crate::outcome::PerfFailure;
use crate::outcome::PerfMode;
use crate::outcome::ResolveFailure;
use crate::outcome::{FileKind, GenerateError};
use acm_client::addr::AddrFormat;
use acm_client::errno;
use acm_client::{ClientError, ConnectError};
use acm_proto::client::EpConfigRepr;
use acm_proto::path_record::PathRecordRepr;

pub(crate) use json::JsonReport;
pub(crate) use output::TextReport;
pub(crate) use prometheus::PrometheusReport;

/// Receives every result and message of a run, in the order they happen.
pub(crate) trait Report {
    /// A free-standing message ("Failed to read server port").
    fn notice(&mut self, text: &str);
    /// Work on service `svc` begins (before connecting).
    fn begin_service(&mut self, svc: &str);
    /// The service cannot be reached.
    fn unreachable(&mut self, svc: &str, error: &ConnectError);
    /// Resolve mode starts on `svc`.
    fn resolve_section(&mut self, svc: &str);
    /// A destination (with the `-s` source, if any) is about to be resolved.
    fn destination(&mut self, dest: &str, src: Option<&str>, format: AddrFormat);
    /// The daemon chose this source address.
    fn daemon_source(&mut self, source: &str);
    /// One attempt succeeded.
    fn attempt_succeeded(&mut self);
    /// One attempt failed.
    fn attempt_failed(&mut self, failure: &ResolveFailure);
    /// The resolved path (after the last attempt succeeded).
    fn path(&mut self, path: &PathRecordRepr);
    /// The result of `-v`.
    fn verification(&mut self, result: &Result<(), ClientError>);
    /// The destination is done.
    fn destination_done(&mut self);
    /// Counters from a perf query (`endpoint` is `None` for the global set or a query by
    /// address).
    fn perf_counters(&mut self, svc: &str, mode: PerfMode, endpoint: Option<i32>, counters: &[u64]);
    /// A perf query failed.
    fn perf_failed(&mut self, svc: &str, failure: &PerfFailure);
    /// Endpoint `index` found on one port.
    fn endpoint(&mut self, svc: &str, index: i32, ep: &EpConfigRepr);
    /// `-e N` found endpoint N on no port.
    fn endpoint_missing(&mut self, index: i32);
    /// Enumeration stopped because the exchange failed.
    fn endpoints_failed(&mut self, svc: &str, error: &ClientError);
    /// A file is about to be generated; `shown` is `<dir>/<file>` as Debian prints it.
    fn generating(&mut self, kind: FileKind, shown: &str);
    /// One effective line written to the address file.
    fn generated_line(&mut self, line: &str);
    /// The file was written.
    fn generated(&mut self, kind: FileKind);
    /// The file was not written.
    fn generate_failed(&mut self, kind: FileKind, error: &GenerateError);
    /// The run is over: `status` is `ib_acme`'s return status; `print_status` says whether
    /// the text output shows it.
    fn finish(&mut self, status: i32, print_status: bool);
}

/// The "Path information" block, as `ib_acme` prints it. MTU, rate and packet lifetime
/// are masked with 0x1F, not 0x3F (docs/reference-quirks.md §35).
#[must_use]
pub(crate) fn path_lines(p: &PathRecordRepr) -> Vec<String> {
    vec![
        "Path information".to_owned(),
        format!("  dgid: {}", acm_client::addr::ntop6(&p.dgid.0)),
        format!("  sgid: {}", acm_client::addr::ntop6(&p.sgid.0)),
        format!("  dlid: {}", p.dlid),
        format!("  slid: {}", p.slid),
        format!("  flow label: 0x{:x}", p.flow_label),
        format!("  hop limit: {}", p.hop_limit),
        format!("  tclass: {}", p.tclass),
        format!("  reversible: {}", u8::from(p.reversible)),
        format!("  pkey: 0x{:x}", p.pkey),
        format!("  sl: {}", p.sl),
        format!("  mtu: {}", p.mtu.value.0 & 0x1F),
        format!("  rate: {}", p.rate.value.0 & 0x1F),
        format!("  packet lifetime: {}", p.packet_lifetime.value & 0x1F),
    ]
}

/// The line that says service `svc` cannot be reached.
#[must_use]
pub(crate) fn unreachable_line(svc: &str, error: &ConnectError) -> String {
    format!("{svc},unable to contact service: {error}")
}

/// The line of a failed `-v` (SA verification).
#[must_use]
pub(crate) fn verification_failed_line(error: &ClientError) -> String {
    format!("SA verification: failed {}", errno::strerror(error.errno()))
}

/// The line that says `-e N` found endpoint N on no port.
#[must_use]
pub(crate) fn endpoint_missing_line(index: i32) -> String {
    format!(" Endpoint {index} is not available")
}

/// The line that says enumerating the endpoints of `svc` stopped because the exchange
/// failed.
#[must_use]
pub(crate) fn endpoints_failed_line(svc: &str, error: &ClientError) -> String {
    format!(
        "{svc}: Failed to query endpoint data: {}",
        errno::strerror(error.errno())
    )
}

/// Header line of endpoint listings (once per run).
pub(crate) const ENDPOINT_HEADER: &str = "svc,guid,port,pkey,ep_index,prov,addr_0,addresses";

/// The display strings of an endpoint: as many as `addr_cnt` says, and no more than the
/// reply holds (Debian's tool reads past the reply when the count is too high).
#[must_use]
pub(crate) fn endpoint_addresses(ep: &EpConfigRepr) -> Vec<String> {
    ep.addrs
        .iter()
        .take(usize::from(ep.addr_cnt))
        .map(|a| String::from_utf8_lossy(a.until_nul()).into_owned())
        .collect()
}

/// One endpoint line: `svc,0x<guid>,<port>,0x<pkey>,<index>,<provider>,<addr>,...`.
#[must_use]
pub(crate) fn endpoint_line(svc: &str, index: i32, ep: &EpConfigRepr) -> String {
    let mut line = format!(
        "{svc},0x{:016x},{},0x{:04x},{index},{}",
        ep.dev_guid,
        ep.port_num,
        ep.pkey,
        String::from_utf8_lossy(ep.prov_name.until_nul())
    );
    for a in endpoint_addresses(ep) {
        line.push(',');
        line.push_str(&a);
    }
    line
}

/// The perf header line for `count` counters: `svc,Error Count,...`.
#[must_use]
pub(crate) fn perf_header(count: usize) -> String {
    let mut line = String::from("svc");
    for i in 0..count {
        line.push(',');
        line.push_str(crate::outcome::counter_name(i));
    }
    line
}

/// A perf row: `svc,c0,c1,...`.
#[must_use]
pub(crate) fn perf_row(svc: &str, counters: &[u64]) -> String {
    let mut line = svc.to_owned();
    for c in counters {
        line.push_str(&format!(",{c}"));
    }
    line
}

/// The column layout (`-P col`): the service, then `<name> : <value>` lines.
#[must_use]
pub(crate) fn perf_column(svc: &str, counters: &[u64]) -> Vec<String> {
    let mut lines = vec![svc.to_owned()];
    for (i, c) in counters.iter().enumerate() {
        lines.push(format!("{} : {c}", crate::outcome::counter_name(i)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Bytes64;

    #[test]
    fn path_block_masks_like_debian() {
        let bytes = hex(
            "0000000000000000fe800000000000000002c90300a0b002fe800000000000000002c90300a0b00100020001012345400081ffff000384839200000000000000",
        );
        let p = PathRecordRepr::parse(&bytes).unwrap();
        assert_eq!(
            path_lines(&p),
            [
                "Path information",
                "  dgid: fe80::2:c903:a0:b002",
                "  sgid: fe80::2:c903:a0:b001",
                "  dlid: 2",
                "  slid: 1",
                "  flow label: 0x12345",
                "  hop limit: 64",
                "  tclass: 0",
                "  reversible: 1",
                "  pkey: 0xffff",
                "  sl: 3",
                "  mtu: 4",
                "  rate: 3",
                "  packet lifetime: 18",
            ]
        );
        // A 6-bit value of 0x3F shows as 0x1F.
        let mut q = p;
        q.packet_lifetime.value = 0x3F;
        assert_eq!(path_lines(&q)[13], "  packet lifetime: 31");
    }

    #[test]
    fn endpoint_and_perf_lines() {
        let ep = EpConfigRepr {
            dev_guid: 0x0002_c903_00a0_b000,
            port_num: 1,
            phys_port_cnt: 1,
            reserved: 0,
            pkey: 0xffff,
            addr_cnt: 3,
            prov_name: Bytes64::c_string("ibacmp"),
            addrs: vec![
                Bytes64::c_string("fakehost"),
                Bytes64::c_string("10.0.0.1"),
                Bytes64::c_string("fd00::1"),
            ],
        };
        assert_eq!(
            endpoint_line("/tmp/acmproxy.sock", 1, &ep),
            "/tmp/acmproxy.sock,0x0002c90300a0b000,1,0xffff,1,ibacmp,fakehost,10.0.0.1,fd00::1"
        );
        let mut few = ep.clone();
        few.addr_cnt = 9;
        few.pkey = 0x7f;
        assert!(endpoint_line("s", 2, &few).starts_with("s,0x0002c90300a0b000,1,0x007f,2,"));
        assert_eq!(endpoint_addresses(&few).len(), 3);
        few.addr_cnt = 0;
        assert_eq!(
            endpoint_line("s", 2, &few),
            "s,0x0002c90300a0b000,1,0x007f,2,ibacmp"
        );

        assert_eq!(
            perf_header(7),
            "svc,Error Count,Resolve Count,No Data,Addr Query Count,Addr Cache Count,Route Query Count,Route Cache Count"
        );
        assert_eq!(perf_header(0), "svc");
        assert_eq!(perf_row("s", &[1, 18, 2]), "s,1,18,2");
        assert_eq!(
            perf_column("s", &[6, 24]),
            ["s", "Error Count : 6", "Resolve Count : 24"]
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
