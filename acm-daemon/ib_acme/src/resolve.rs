//! Resolve mode (`-d`, docs/ib-acme.md §4): one request per destination (and source) and
//! repetition, the optional SA verification (`-v`), and the reporting order `ib_acme`
//! uses, so that the output matches line for line.
//!
//! How each `-f` format goes on the wire:
//!
//! * `i`: IP or IP6 entries: SOURCE (with `-s`), then DEST (DEST|NODELAY with `-c`).
//! * `n`: NAME entries in the same layout; names of 64 bytes or more are refused.
//! * `l`: one PATH entry (flags NODELAY with `-c`, else 0) with `dlid = atoi(dest)`,
//!   `slid = atoi(src)` with `-s`, and reversible with one path (byte 0x81).
//! * `g`: one PATH entry with the GIDs and 0x81.
//! * `-v`: a second request carrying the path the daemon returned, flags QUERY_SA.

use super::cli::Options;
use super::format::Report;
use crate::outcome::ResolveFailure;
use acm_client::addr::{self, AddrFormat};
use acm_client::brackets;
use acm_client::cnum::atoi;
use acm_client::{self, ClientError, Connection, ResolveReply};
use acm_proto::Gid;
use acm_proto::client::{EpAddrRepr, EpFlags, HeaderRepr, Opcode, ResolveRepr};
use acm_proto::path_record::PathRecordRepr;

/// Resolves every destination of `-d` (times every source of `-s`) on one service and
/// returns the status of the last one, which becomes `ib_acme`'s return status.
pub(crate) fn run(
    conn: &mut Connection,
    svc: &str,
    opts: &Options,
    report: &mut dyn Report,
) -> i32 {
    report.resolve_section(svc);
    let Some(dest_arg) = opts.dest.as_deref() else {
        return 0;
    };
    // Lists were checked when the command line was read; an empty expansion is harmless.
    let dests = brackets::expand(dest_arg).unwrap_or_default();
    let sources: Vec<Option<String>> = match opts.src.as_deref() {
        Some(s) => brackets::expand(s)
            .unwrap_or_default()
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None],
    };
    let mut status = 0;
    for dest in dests {
        let (format, dest) = match opts.format {
            AddrFormat::Unspecified => addr::detect(&dest),
            f => (f, dest),
        };
        for src in &sources {
            status = resolve_pair(conn, format, &dest, src.as_deref(), opts, report);
        }
    }
    status
}

/// One destination/source pair: `-C` attempts, then the path and its verification.
fn resolve_pair(
    conn: &mut Connection,
    format: AddrFormat,
    dest: &str,
    src: Option<&str>,
    opts: &Options,
    report: &mut dyn Report,
) -> i32 {
    report.destination(dest, src, format);
    let repetitions = if opts.repetitions == 0 {
        1
    } else {
        opts.repetitions
    };
    // With no attempt at all (a negative -C) the pair counts as failed, as in Debian.
    let mut status = -1;
    let mut last = None;
    for _ in 0..repetitions.max(0) {
        match resolve_once(conn, format, dest, src, opts.nodelay) {
            Ok(reply) => {
                // libacm prints the daemon's choice of source only for single lookups.
                if repetitions == 1
                    && let Some(s) = &reply.source
                {
                    report.daemon_source(s);
                }
                report.attempt_succeeded();
                status = 0;
                last = Some(reply);
            }
            Err(f) => {
                report.attempt_failed(&f);
                status = -1;
                last = None;
            }
        }
    }
    if let Some(reply) = last
        && let Some(path) = reply.paths.first()
    {
        report.path(path);
        if opts.verify {
            let result = verify(conn, path);
            status = if result.is_ok() { 0 } else { -1 };
            report.verification(&result);
        }
    }
    report.destination_done();
    status
}

/// Builds and sends one RESOLVE request for the pair.
///
/// # Errors
/// [`ResolveFailure`], carrying the text `ib_acme` prints.
pub(crate) fn resolve_once(
    conn: &mut Connection,
    format: AddrFormat,
    dest: &str,
    src: Option<&str>,
    nodelay: bool,
) -> Result<ResolveReply, ResolveFailure> {
    let dest_flags = if nodelay {
        EpFlags::DEST | EpFlags::NODELAY
    } else {
        EpFlags::DEST
    };
    let path_flags = if nodelay {
        EpFlags::NODELAY
    } else {
        EpFlags::EMPTY
    };
    let mut request = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    let call = match format {
        // `Unspecified` never reaches here (it is detected first); treat it as `i`.
        AddrFormat::Ip | AddrFormat::Unspecified => {
            let src_ip = match src {
                Some(s) => Some(addr::parse_ip(s).ok_or_else(|| ResolveFailure::BadAddress {
                    role: "source",
                    text: s.to_owned(),
                })?),
                None => None,
            };
            let dest_ip = addr::parse_ip(dest).ok_or_else(|| ResolveFailure::BadAddress {
                role: "destination",
                text: dest.to_owned(),
            })?;
            if let Some(s) = src_ip {
                if s.is_ipv4() != dest_ip.is_ipv4() {
                    return Err(ResolveFailure::FamilyMismatch);
                }
                push(&mut request, acm_client::ip_entry(EpFlags::SOURCE, s));
            }
            push(&mut request, acm_client::ip_entry(dest_flags, dest_ip));
            "ib_acm_resolve_ip"
        }
        AddrFormat::Name => {
            const CALL: &str = "ib_acm_resolve_name";
            let named = |flags, name: &str| {
                acm_client::name_entry(flags, name)
                    .map_err(|error| ResolveFailure::Request { call: CALL, error })
            };
            if let Some(s) = src {
                push(&mut request, named(EpFlags::SOURCE, s)?);
            }
            push(&mut request, named(dest_flags, dest)?);
            CALL
        }
        AddrFormat::Lid => {
            // LIDs are 16 bits; atoi's int is truncated as the C assignment does.
            let (slid, dlid) = (src.map_or(0, |s| atoi(s) as u16), atoi(dest) as u16);
            push(
                &mut request,
                acm_client::lid_path_entry(path_flags, slid, dlid),
            );
            "ib_acm_resolve_path"
        }
        AddrFormat::Gid => {
            let sgid = match src {
                Some(s) => addr::parse_ipv6(s).ok_or_else(|| ResolveFailure::BadAddress {
                    role: "source",
                    text: s.to_owned(),
                })?,
                None => std::net::Ipv6Addr::UNSPECIFIED,
            };
            let dgid = addr::parse_ipv6(dest).ok_or_else(|| ResolveFailure::BadAddress {
                role: "dest",
                text: dest.to_owned(),
            })?;
            let entry = acm_client::gid_path_entry(path_flags, Gid::from(sgid), Gid::from(dgid));
            push(&mut request, entry);
            "ib_acm_resolve_path"
        }
    };
    conn.resolve(request)
        .map_err(|error| ResolveFailure::Request { call, error })
}

/// Appends an entry; requests here hold at most two, far below the eight that fit.
fn push(request: &mut ResolveRepr, entry: EpAddrRepr) {
    let _ = request.push(entry);
}

/// `-v`: sends `path` back with QUERY_SA so the daemon asks the SA for it; success is a
/// zero status (the SA's answer is not compared, as in Debian).
///
/// # Errors
/// The daemon's status or the exchange's failure.
pub(crate) fn verify(conn: &mut Connection, path: &PathRecordRepr) -> Result<(), ClientError> {
    let mut request = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    push(&mut request, EpAddrRepr::path(EpFlags::QUERY_SA, path));
    conn.resolve(request).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_lines_are_debians() {
        let f = ResolveFailure::BadAddress {
            role: "source",
            text: "junk".into(),
        };
        assert_eq!(
            f.to_string(),
            "inet_pton error on source address (junk): 0x0"
        );
        assert_eq!(f.errno(), None);
        assert_eq!(
            ResolveFailure::FamilyMismatch.to_string(),
            "source and destination address families don't match"
        );
        let f = ResolveFailure::Request {
            call: "ib_acm_resolve_ip",
            error: ClientError::Status(3),
        };
        assert_eq!(f.to_string(), "ib_acm_resolve_ip failed: No data available");
        assert_eq!(f.errno(), Some(61));
        let f = ResolveFailure::Request {
            call: "ib_acm_resolve_name",
            error: ClientError::NameTooLong,
        };
        assert_eq!(
            f.to_string(),
            "ib_acm_resolve_name failed: No such file or directory"
        );
    }
}
