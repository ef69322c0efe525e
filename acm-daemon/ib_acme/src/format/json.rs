//! The `--json` report: the same results as the text output, as one JSON document
//! written when the run ends. The schema is documented in the crate's root module.

use super::{
    Report, endpoint_addresses, endpoints_failed_line, path_lines, unreachable_line,
    verification_failed_line,
};
use crate::outcome::PerfMode;
use crate::outcome::ResolveFailure;
use crate::outcome::{COUNTER_KEYS, PerfFailure};
use crate::outcome::{FileKind, GenerateError};
use acm_client::addr::{AddrFormat, ntop6};
use acm_client::errno;
use acm_client::{ClientError, ConnectError};
use acm_proto::client::EpConfigRepr;
use acm_proto::path_record::PathRecordRepr;
use serde::Serialize;
use std::io::Write;

/// A failure: its errno when one applies, the errno's text (or a description), and the
/// exact lines the text output prints for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ErrorJson {
    /// The errno, or `null` for failures that have none (an unparsable address).
    pub errno: Option<i32>,
    /// `strerror(errno)`, or the description of an errno-less failure.
    pub message: String,
    /// The lines the text output prints for this failure.
    pub lines: Vec<String>,
}

impl ErrorJson {
    fn with_errno(errno: i32, lines: Vec<String>) -> Self {
        Self {
            errno: Some(errno),
            message: errno::strerror(errno),
            lines,
        }
    }

    fn without_errno(message: String) -> Self {
        Self {
            errno: None,
            lines: vec![message.clone()],
            message,
        }
    }
}

/// One attempt of a resolve (`-C` makes several).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AttemptJson {
    /// Whether it succeeded.
    pub ok: bool,
    /// Why not.
    pub error: Option<ErrorJson>,
}

/// A path record, every field; MTU, rate and packet lifetime are the 6-bit values
/// (the text output masks them with 0x1F, as Debian does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PathJson {
    /// ServiceID, as 0x-prefixed hex.
    pub service_id: String,
    /// Destination GID.
    pub dgid: String,
    /// Source GID.
    pub sgid: String,
    /// Destination LID.
    pub dlid: u16,
    /// Source LID.
    pub slid: u16,
    /// 20-bit flow label.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub tclass: u8,
    /// Reversible.
    pub reversible: bool,
    /// Number of paths.
    pub numpath: u8,
    /// Partition key.
    pub pkey: u16,
    /// QoS class.
    pub qos_class: u16,
    /// Service level.
    pub sl: u8,
    /// MTU code (4 = 2048 bytes).
    pub mtu: u8,
    /// Rate code (3 = 10 Gb/s).
    pub rate: u8,
    /// Packet lifetime code.
    pub packet_lifetime: u8,
    /// Preference.
    pub preference: u8,
    /// The lines of the text output's "Path information" block.
    pub lines: Vec<String>,
}

impl From<&PathRecordRepr> for PathJson {
    fn from(p: &PathRecordRepr) -> Self {
        Self {
            service_id: format!("0x{:016x}", p.service_id),
            dgid: ntop6(&p.dgid.0),
            sgid: ntop6(&p.sgid.0),
            dlid: p.dlid,
            slid: p.slid,
            flow_label: p.flow_label,
            hop_limit: p.hop_limit,
            tclass: p.tclass,
            reversible: p.reversible,
            numpath: p.numpath,
            pkey: p.pkey,
            qos_class: p.qos_class,
            sl: p.sl,
            mtu: p.mtu.value.0,
            rate: p.rate.value.0,
            packet_lifetime: p.packet_lifetime.value,
            preference: p.preference,
            lines: path_lines(p),
        }
    }
}

/// The SA check of `-v`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct VerificationJson {
    /// Whether the SA confirmed the path.
    pub ok: bool,
    /// Why not.
    pub error: Option<ErrorJson>,
}

/// One destination (and source) of `-d`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResolveJson {
    /// The destination, after auto-detection (`5` becomes `0.0.0.5`).
    pub destination: String,
    /// The `-s` source, if given.
    pub source: Option<String>,
    /// The format used: `ip`, `name`, `lid` or `gid`.
    pub format: &'static str,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptJson>,
    /// The source address the daemon chose (reported for single attempts, like the text).
    pub daemon_source: Option<String>,
    /// The path, when the last attempt succeeded.
    pub path: Option<PathJson>,
    /// The `-v` result.
    pub sa_verification: Option<VerificationJson>,
    /// 0 when the destination resolved (and verified), -1 otherwise.
    pub status: i32,
}

/// One set of counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PerfJson {
    /// The endpoint index asked for; `null` for the global counters or `-P s`.
    pub endpoint: Option<i32>,
    /// Counter values by name (`error_count`, `resolve_count`, `no_data`,
    /// `addr_query_count`, `addr_cache_count`, `route_query_count`,
    /// `route_cache_count`; any further ones as `counter_<i>`), in the daemon's order.
    pub counters: serde_json::Map<String, serde_json::Value>,
}

/// One endpoint found by `-e`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct EndpointJson {
    /// The index asked for.
    pub index: i32,
    /// Node GUID as 0x-prefixed hex.
    pub guid: String,
    /// Port number.
    pub port: u8,
    /// Ports on the device.
    pub port_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Provider name.
    pub provider: String,
    /// Address display strings.
    pub addresses: Vec<String>,
}

/// Everything done on one `-S` service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ServiceJson {
    /// The service as named (after bracket expansion).
    pub service: String,
    /// The status the connection attempt set (0, or the connect error's status).
    pub connect_status: i32,
    /// Why it could not be reached.
    pub error: Option<ErrorJson>,
    /// `-d` results.
    pub resolves: Vec<ResolveJson>,
    /// `-P` results.
    pub perf: Vec<PerfJson>,
    /// Why a perf query failed.
    pub perf_error: Option<ErrorJson>,
    /// `-e` results.
    pub endpoints: Vec<EndpointJson>,
    /// `-e N` found nothing: N.
    pub missing_endpoint: Option<i32>,
    /// Why enumeration stopped early.
    pub endpoints_error: Option<ErrorJson>,
}

/// One `-A` / `-O` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GeneratedJson {
    /// `address` or `options`.
    pub kind: &'static str,
    /// `<dir>/<file>` as given.
    pub file: String,
    /// Whether it was written.
    pub ok: bool,
    /// The address lines written (none for the options file).
    pub lines: Vec<String>,
    /// Why not.
    pub error: Option<ErrorJson>,
}

/// The whole document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Document {
    /// Per service, in order.
    pub services: Vec<ServiceJson>,
    /// Generated files, in order.
    pub generated: Vec<GeneratedJson>,
    /// Free-standing messages ("Failed to read server port").
    pub notices: Vec<String>,
    /// `ib_acme`'s return status (the text output's "return status").
    pub status: i32,
    /// The process exit code (`status & 0xff`).
    pub exit_code: u8,
}

/// Collects the run and writes [`Document`] to `out` at [`Report::finish`].
#[derive(Debug)]
pub(crate) struct JsonReport<W: Write> {
    out: W,
    doc: Document,
}

impl<W: Write> JsonReport<W> {
    /// A report that will write to `out`.
    pub(crate) const fn new(out: W) -> Self {
        Self {
            out,
            doc: Document {
                services: Vec::new(),
                generated: Vec::new(),
                notices: Vec::new(),
                status: 0,
                exit_code: 0,
            },
        }
    }

    /// The writer back (tests read what was written).
    #[cfg(test)]
    pub(crate) fn into_inner(self) -> W {
        self.out
    }

    fn service(&mut self) -> Option<&mut ServiceJson> {
        self.doc.services.last_mut()
    }

    fn resolve(&mut self) -> Option<&mut ResolveJson> {
        self.service().and_then(|s| s.resolves.last_mut())
    }

    fn file(&mut self) -> Option<&mut GeneratedJson> {
        self.doc.generated.last_mut()
    }
}

fn client_error(e: &ClientError, lines: Vec<String>) -> ErrorJson {
    ErrorJson::with_errno(e.errno(), lines)
}

impl<W: Write> Report for JsonReport<W> {
    fn notice(&mut self, text: &str) {
        self.doc.notices.push(text.to_owned());
    }

    fn begin_service(&mut self, svc: &str) {
        self.doc.services.push(ServiceJson {
            service: svc.to_owned(),
            connect_status: 0,
            error: None,
            resolves: Vec::new(),
            perf: Vec::new(),
            perf_error: None,
            endpoints: Vec::new(),
            missing_endpoint: None,
            endpoints_error: None,
        });
    }

    fn unreachable(&mut self, svc: &str, error: &ConnectError) {
        let line = unreachable_line(svc, error);
        if let Some(s) = self.service() {
            s.connect_status = error.status();
            s.error = Some(ErrorJson::with_errno(error.errno(), vec![line]));
        }
    }

    fn resolve_section(&mut self, _svc: &str) {}

    fn destination(&mut self, dest: &str, src: Option<&str>, format: AddrFormat) {
        let entry = ResolveJson {
            destination: dest.to_owned(),
            source: src.map(str::to_owned),
            format: format.name(),
            attempts: Vec::new(),
            daemon_source: None,
            path: None,
            sa_verification: None,
            status: -1,
        };
        if let Some(s) = self.service() {
            s.resolves.push(entry);
        }
    }

    fn daemon_source(&mut self, source: &str) {
        if let Some(r) = self.resolve() {
            r.daemon_source = Some(source.to_owned());
        }
    }

    fn attempt_succeeded(&mut self) {
        if let Some(r) = self.resolve() {
            r.attempts.push(AttemptJson {
                ok: true,
                error: None,
            });
            r.status = 0;
        }
    }

    fn attempt_failed(&mut self, failure: &ResolveFailure) {
        let error = match failure.errno() {
            Some(n) => ErrorJson::with_errno(n, vec![failure.to_string()]),
            None => ErrorJson::without_errno(failure.to_string()),
        };
        if let Some(r) = self.resolve() {
            r.attempts.push(AttemptJson {
                ok: false,
                error: Some(error),
            });
            r.status = -1;
        }
    }

    fn path(&mut self, path: &PathRecordRepr) {
        if let Some(r) = self.resolve() {
            r.path = Some(PathJson::from(path));
        }
    }

    fn verification(&mut self, result: &Result<(), ClientError>) {
        let v = match result {
            Ok(()) => VerificationJson {
                ok: true,
                error: None,
            },
            Err(e) => VerificationJson {
                ok: false,
                error: Some(client_error(e, vec![verification_failed_line(e)])),
            },
        };
        if let Some(r) = self.resolve() {
            r.status = if v.ok { 0 } else { -1 };
            r.sa_verification = Some(v);
        }
    }

    fn destination_done(&mut self) {}

    fn perf_counters(
        &mut self,
        _svc: &str,
        _mode: PerfMode,
        endpoint: Option<i32>,
        counters: &[u64],
    ) {
        let counters = counters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let key = COUNTER_KEYS
                    .get(i)
                    .map_or_else(|| format!("counter_{i}"), |k| (*k).to_owned());
                (key, serde_json::Value::from(*c))
            })
            .collect();
        if let Some(s) = self.service() {
            s.perf.push(PerfJson { endpoint, counters });
        }
    }

    fn perf_failed(&mut self, svc: &str, failure: &PerfFailure) {
        let error = ErrorJson::with_errno(failure.errno(), failure.text(svc));
        if let Some(s) = self.service() {
            s.perf_error = Some(error);
        }
    }

    fn endpoint(&mut self, _svc: &str, index: i32, ep: &EpConfigRepr) {
        let e = EndpointJson {
            index,
            guid: format!("0x{:016x}", ep.dev_guid),
            port: ep.port_num,
            port_count: ep.phys_port_cnt,
            pkey: ep.pkey,
            provider: String::from_utf8_lossy(ep.prov_name.until_nul()).into_owned(),
            addresses: endpoint_addresses(ep),
        };
        if let Some(s) = self.service() {
            s.endpoints.push(e);
        }
    }

    fn endpoint_missing(&mut self, index: i32) {
        if let Some(s) = self.service() {
            s.missing_endpoint = Some(index);
        }
    }

    fn endpoints_failed(&mut self, svc: &str, error: &ClientError) {
        let line = endpoints_failed_line(svc, error);
        if let Some(s) = self.service() {
            s.endpoints_error = Some(client_error(error, vec![line]));
        }
    }

    fn generating(&mut self, kind: FileKind, shown: &str) {
        self.doc.generated.push(GeneratedJson {
            kind: match kind {
                FileKind::Address => "address",
                FileKind::Options => "options",
            },
            file: shown.to_owned(),
            ok: false,
            lines: Vec::new(),
            error: None,
        });
    }

    fn generated_line(&mut self, line: &str) {
        if let Some(f) = self.file() {
            f.lines.push(line.to_owned());
        }
    }

    fn generated(&mut self, _kind: FileKind) {
        if let Some(f) = self.file() {
            f.ok = true;
        }
    }

    fn generate_failed(&mut self, kind: FileKind, error: &GenerateError) {
        let lines = error.text(kind);
        let e = match error.errno() {
            Some(n) => ErrorJson::with_errno(n, lines),
            None => ErrorJson {
                errno: None,
                message: error.to_string(),
                lines,
            },
        };
        if let Some(f) = self.file() {
            f.error = Some(e);
        }
    }

    fn finish(&mut self, status: i32, _print_status: bool) {
        self.doc.status = status;
        // The exit code is the low byte of the status, as the C exit() keeps it.
        self.doc.exit_code = (status & 0xff) as u8;
        // Serialising plain data cannot fail; a closed stdout is not worth a panic.
        if serde_json::to_writer_pretty(&mut self.out, &self.doc).is_ok() {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_shape() {
        let mut r = JsonReport::new(Vec::new());
        r.begin_service("/s");
        r.destination("10.0.0.2", None, AddrFormat::Ip);
        r.attempt_failed(&ResolveFailure::Request {
            call: "ib_acm_resolve_ip",
            error: ClientError::Status(3),
        });
        r.attempt_succeeded();
        r.daemon_source("10.0.0.1");
        r.perf_counters("/s", PerfMode::Row, None, &[1, 2, 3, 4, 5, 6, 7, 8]);
        r.endpoint_missing(5);
        r.notice("Failed to read server port");
        r.finish(-1, true);
        let v: serde_json::Value = serde_json::from_slice(&r.into_inner()).unwrap();
        assert_eq!(v["status"], -1);
        assert_eq!(v["exit_code"], 255);
        let s = &v["services"][0];
        assert_eq!(s["service"], "/s");
        let res = &s["resolves"][0];
        assert_eq!(res["format"], "ip");
        assert_eq!(res["attempts"][0]["ok"], false);
        assert_eq!(res["attempts"][0]["error"]["errno"], 61);
        assert_eq!(
            res["attempts"][0]["error"]["lines"][0],
            "ib_acm_resolve_ip failed: No data available"
        );
        assert_eq!(res["attempts"][1]["ok"], true);
        assert_eq!(res["status"], 0);
        assert_eq!(res["daemon_source"], "10.0.0.1");
        let c = &s["perf"][0]["counters"];
        assert_eq!(c["error_count"], 1);
        assert_eq!(c["route_cache_count"], 7);
        assert_eq!(c["counter_7"], 8);
        assert_eq!(s["missing_endpoint"], 5);
        assert_eq!(v["notices"][0], "Failed to read server port");
    }
}
