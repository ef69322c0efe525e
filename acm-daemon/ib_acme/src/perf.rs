//! Performance counters (`-P`, docs/protocol/client-messages.md §9, docs/ib-acme.md §5):
//! the global or per-endpoint query, the `all` walk over endpoints, and the query by
//! source address (`-P s`).
//!
//! `-P N` and `-e N` share one endpoint index in Debian's `ib_acme` (the last one given
//! wins, and `-P` alone after `-e 2` asks for endpoint 2); [`Options::ep_index`] keeps
//! that behaviour.

use super::cli::Options;
use super::format::Report;
use crate::outcome::{PerfFailure, PerfMode};
use acm_client::addr::{self, AddrFormat};
use acm_client::{self, ClientError, Connection};
use acm_proto::client::{EpFlags, PerfQueryRepr};

/// Highest endpoint index the one-byte field can name; `-P all` stops there at the latest.
pub(crate) const MAX_INDEX: i32 = 255;

/// Runs `-P` on one service.
pub(crate) fn run(conn: &mut Connection, svc: &str, opts: &Options, report: &mut dyn Report) {
    let Some(mode) = opts.perf else {
        return;
    };
    match mode {
        PerfMode::Row | PerfMode::Column => {
            let endpoint = (opts.ep_index != 0).then_some(opts.ep_index);
            match query_index(conn, opts.ep_index) {
                Ok(c) => report.perf_counters(svc, mode, endpoint, &c),
                Err(e) => report.perf_failed(svc, &PerfFailure::Query(e)),
            }
        }
        PerfMode::All => {
            for index in 1..=MAX_INDEX {
                match query_index(conn, index) {
                    Ok(c) => report.perf_counters(svc, mode, Some(index), &c),
                    // The first endpoint the daemon does not know ends the walk quietly.
                    Err(ClientError::Status(_)) => break,
                    Err(e) => {
                        report.perf_failed(svc, &PerfFailure::Query(e));
                        break;
                    }
                }
            }
        }
        PerfMode::BySource => {
            let src = opts.src.as_deref().unwrap_or_default();
            match query_by_source(conn, src, opts.format) {
                Ok(c) => report.perf_counters(svc, mode, None, &c),
                Err(f) => report.perf_failed(svc, &f),
            }
        }
    }
}

/// `--format prometheus` (with `-P` or `-e`): the global counters, then each endpoint
/// (endpoint N only with `-P N` or `-e N`) as an EP_QUERY for port 0 describes it,
/// followed by its counters. Port 0 numbers the endpoints over every port, as our
/// daemon's PERF_QUERY does (docs/protocol/client-messages.md §10,
/// docs/daemon.md §13), so the counters and the description are of one endpoint. rdma-core's `ibacm`
/// counts PERF_QUERY's endpoint N only over ports numbered N (its bug,
/// docs/reference-quirks.md §1): an endpoint it will not give counters for is described
/// without them.
pub(crate) fn snapshot(conn: &mut Connection, svc: &str, opts: &Options, report: &mut dyn Report) {
    match query_index(conn, 0) {
        Ok(c) => report.perf_counters(svc, PerfMode::Row, None, &c),
        Err(e) => {
            report.perf_failed(svc, &PerfFailure::Query(e));
            return;
        }
    }
    // The index goes out in one byte, as with -P N; 0 there means every endpoint.
    let only = opts.ep_index as u8;
    let indexes = if only == 0 {
        1..=MAX_INDEX as u8
    } else {
        only..=only
    };
    for index in indexes {
        match conn.endpoint(index, 0) {
            Ok(ep) => report.endpoint(svc, i32::from(index), &ep),
            Err(ClientError::Status(_)) => {
                if only != 0 {
                    report.endpoint_missing(i32::from(index));
                }
                return;
            }
            Err(e) => {
                report.endpoints_failed(svc, &e);
                return;
            }
        }
        match query_index(conn, i32::from(index)) {
            Ok(c) => report.perf_counters(svc, PerfMode::All, Some(i32::from(index)), &c),
            Err(ClientError::Status(_)) => {}
            Err(e) => {
                report.perf_failed(svc, &PerfFailure::Query(e));
                return;
            }
        }
    }
}

/// The global counters (`index` 0) or those of endpoint `index`; the index goes out in
/// one byte, truncated as Debian does (`-P 300` asks for endpoint 44).
///
/// # Errors
/// [`ClientError`].
pub(crate) fn query_index(conn: &mut Connection, index: i32) -> Result<Vec<u64>, ClientError> {
    conn.perf(PerfQueryRepr::new(index as u8, None))
}

/// The counters of the endpoint owning address `src` (`-P s`), detected like a
/// destination when `-f` is missing.
///
/// # Errors
/// [`PerfFailure`].
pub(crate) fn query_by_source(
    conn: &mut Connection,
    src: &str,
    format: AddrFormat,
) -> Result<Vec<u64>, PerfFailure> {
    let (format, text) = match format {
        AddrFormat::Unspecified => addr::detect(src),
        f => (f, src.to_owned()),
    };
    let entry = match format {
        AddrFormat::Ip => match addr::parse_ip(&text) {
            Some(ip) => acm_client::ip_entry(EpFlags::SOURCE, ip),
            None => return Err(PerfFailure::BadSrcAddress(text)),
        },
        AddrFormat::Name => {
            acm_client::name_entry(EpFlags::SOURCE, &text).map_err(PerfFailure::ByAddress)?
        }
        other => return Err(PerfFailure::UnsupportedSrcType(other.letter())),
    };
    conn.perf(PerfQueryRepr::new(0, Some(entry)))
        .map_err(PerfFailure::ByAddress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::counter_name;

    #[test]
    fn names_and_failure_lines() {
        assert_eq!(counter_name(0), "Error Count");
        assert_eq!(counter_name(6), "Route Cache Count");
        assert_eq!(counter_name(7), "Unknown");
        let f = PerfFailure::ByAddress(ClientError::Status(7));
        assert_eq!(
            f.text("/tmp/a.sock"),
            [
                "ib_acm_query_perf failed: Cannot assign requested address",
                "/tmp/a.sock: Failed to query perf data: Cannot assign requested address"
            ]
        );
        assert_eq!(
            PerfFailure::Query(ClientError::Status(7)).text("s"),
            ["s: Failed to query perf data: Cannot assign requested address"]
        );
        assert_eq!(
            PerfFailure::UnsupportedSrcType(b'l').text("s"),
            [
                "Unsupported src_type 108",
                "s: Failed to query perf data: No such file or directory"
            ]
        );
        assert_eq!(
            PerfFailure::BadSrcAddress("junk".into()).text("s")[0],
            "inet_pton error on src address (junk): 0x0"
        );
    }
}
