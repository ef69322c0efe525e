//! The text report: Debian's `ib_acme` output, line for line. Everything goes to one
//! writer (stdout), as Debian's tool prints everything, errors included, to stdout.

use super::{
    ENDPOINT_HEADER, Report, endpoint_line, endpoint_missing_line, endpoints_failed_line,
    path_lines, perf_column, perf_header, perf_row, unreachable_line, verification_failed_line,
};
use crate::outcome::PerfFailure;
use crate::outcome::PerfMode;
use crate::outcome::ResolveFailure;
use crate::outcome::{FileKind, GenerateError};
use acm_client::addr::AddrFormat;
use acm_client::{ClientError, ConnectError};
use acm_proto::client::EpConfigRepr;
use acm_proto::path_record::PathRecordRepr;
use std::io::Write;

/// Writes the text output to `out`.
#[derive(Debug)]
pub(crate) struct TextReport<W: Write> {
    out: W,
    verbose: bool,
    perf_header_done: bool,
    endpoint_header_done: bool,
    write_failed: bool,
}

impl<W: Write> TextReport<W> {
    /// A report writing to `out`; `verbose` is `-V` (it adds the "Generating" lines and
    /// the echo of generated address lines).
    pub(crate) const fn new(out: W, verbose: bool) -> Self {
        Self {
            out,
            verbose,
            perf_header_done: false,
            endpoint_header_done: false,
            write_failed: false,
        }
    }

    /// The writer back (tests read what was written).
    #[cfg(test)]
    pub(crate) fn into_inner(self) -> W {
        self.out
    }

    fn line(&mut self, text: &str) {
        // Like printf, a failed write (a closed pipe) does not stop the work; it is
        // tried no more.
        if !self.write_failed && writeln!(self.out, "{text}").is_err() {
            self.write_failed = true;
        }
    }

    fn lines<I: IntoIterator<Item = String>>(&mut self, lines: I) {
        for l in lines {
            self.line(&l);
        }
    }
}

impl<W: Write> Report for TextReport<W> {
    fn notice(&mut self, text: &str) {
        self.line(text);
    }

    fn begin_service(&mut self, _svc: &str) {}

    fn unreachable(&mut self, svc: &str, error: &ConnectError) {
        self.line(&unreachable_line(svc, error));
    }

    fn resolve_section(&mut self, svc: &str) {
        self.line(&format!("Service: {svc}"));
    }

    fn destination(&mut self, dest: &str, src: Option<&str>, _format: AddrFormat) {
        self.line(&format!("Destination: {dest}"));
        if let Some(s) = src {
            self.line(&format!("Source: {s}"));
        }
    }

    fn daemon_source(&mut self, source: &str) {
        self.line(&format!("Source: {source}"));
    }

    fn attempt_succeeded(&mut self) {}

    fn attempt_failed(&mut self, failure: &ResolveFailure) {
        self.line(&failure.to_string());
    }

    fn path(&mut self, path: &PathRecordRepr) {
        self.lines(path_lines(path));
    }

    fn verification(&mut self, result: &Result<(), ClientError>) {
        match result {
            Ok(()) => self.line("SA verification: success"),
            Err(e) => self.line(&verification_failed_line(e)),
        }
    }

    fn destination_done(&mut self) {
        self.line("");
    }

    fn perf_counters(
        &mut self,
        svc: &str,
        mode: PerfMode,
        _endpoint: Option<i32>,
        counters: &[u64],
    ) {
        if mode == PerfMode::Column {
            self.lines(perf_column(svc, counters));
            return;
        }
        if !self.perf_header_done {
            self.perf_header_done = true;
            self.line(&perf_header(counters.len()));
        }
        self.line(&perf_row(svc, counters));
    }

    fn perf_failed(&mut self, svc: &str, failure: &PerfFailure) {
        self.lines(failure.text(svc));
    }

    fn endpoint(&mut self, svc: &str, index: i32, ep: &EpConfigRepr) {
        if !self.endpoint_header_done {
            self.endpoint_header_done = true;
            self.line(ENDPOINT_HEADER);
        }
        self.line(&endpoint_line(svc, index, ep));
    }

    fn endpoint_missing(&mut self, index: i32) {
        self.line(&endpoint_missing_line(index));
    }

    fn endpoints_failed(&mut self, svc: &str, error: &ClientError) {
        // Debian's tool dies of SIGPIPE here; we say what happened instead.
        self.line(&endpoints_failed_line(svc, error));
    }

    fn generating(&mut self, _kind: FileKind, shown: &str) {
        if self.verbose {
            self.line(&format!("Generating {shown}"));
        }
    }

    fn generated_line(&mut self, line: &str) {
        if self.verbose {
            self.line(line);
        }
    }

    fn generated(&mut self, _kind: FileKind) {}

    fn generate_failed(&mut self, kind: FileKind, error: &GenerateError) {
        self.lines(error.text(kind));
    }

    fn finish(&mut self, status: i32, print_status: bool) {
        if print_status {
            // The status is printed as C's "%x" of an int: two's complement.
            self.line(&format!("return status 0x{:x}", status as u32));
        }
        if !self.write_failed {
            let _ = self.out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut TextReport<Vec<u8>>)) -> String {
        let mut r = TextReport::new(Vec::new(), false);
        f(&mut r);
        String::from_utf8(r.into_inner()).unwrap()
    }

    #[test]
    fn headers_once_and_status_in_hex() {
        let out = text(|r| {
            r.perf_counters("a", PerfMode::Row, None, &[1, 2]);
            r.perf_counters("b", PerfMode::All, Some(1), &[3, 4]);
            r.endpoint_missing(5);
            r.finish(-1, true);
        });
        assert_eq!(
            out,
            "svc,Error Count,Resolve Count\na,1,2\nb,3,4\n Endpoint 5 is not available\nreturn status 0xffffffff\n"
        );
        assert_eq!(text(|r| r.finish(2, true)), "return status 0x2\n");
        assert_eq!(text(|r| r.finish(0, false)), "");
    }

    #[test]
    fn resolve_lines() {
        let out = text(|r| {
            r.resolve_section("/s");
            r.destination("10.0.0.2", Some("10.0.0.1"), AddrFormat::Ip);
            r.attempt_failed(&ResolveFailure::Request {
                call: "ib_acm_resolve_ip",
                error: ClientError::Status(7),
            });
            r.destination_done();
            r.destination("10.0.0.3", None, AddrFormat::Ip);
            r.daemon_source("10.0.0.1");
            r.verification(&Err(ClientError::Status(3)));
        });
        assert_eq!(
            out,
            "Service: /s\nDestination: 10.0.0.2\nSource: 10.0.0.1\n\
             ib_acm_resolve_ip failed: Cannot assign requested address\n\n\
             Destination: 10.0.0.3\nSource: 10.0.0.1\n\
             SA verification: failed No data available\n"
        );
    }

    #[test]
    fn generation_lines_only_when_verbose() {
        let quiet = text(|r| {
            r.generating(FileKind::Options, "/etc/rdma/ibacm_opts.cfg");
            r.generated_line("h mlx5_0 1 default");
        });
        assert_eq!(quiet, "");
        let mut r = TextReport::new(Vec::new(), true);
        r.generating(FileKind::Options, "/etc/rdma/ibacm_opts.cfg");
        r.generated_line("h mlx5_0 1 default");
        assert_eq!(
            String::from_utf8(r.into_inner()).unwrap(),
            "Generating /etc/rdma/ibacm_opts.cfg\nh mlx5_0 1 default\n"
        );
    }
}
