//! The `--format prometheus` report: the counters and endpoints of each service as one
//! Prometheus text exposition ([`acm_client::metrics`], shared with the daemon's metrics
//! file), written when the run ends. Failures go to stderr with the text output's
//! wording, so that stdout holds nothing but the exposition; a service that cannot be
//! reached has `acm_up 0`.

use super::{
    Report, endpoint_addresses, endpoint_missing_line, endpoints_failed_line, unreachable_line,
};
use crate::outcome::PerfFailure;
use crate::outcome::PerfMode;
use crate::outcome::ResolveFailure;
use crate::outcome::{FileKind, GenerateError};
use acm_client::addr::AddrFormat;
use acm_client::metrics::{EndpointSample, Snapshot, render};
use acm_client::{ClientError, ConnectError};
use acm_proto::client::EpConfigRepr;
use acm_proto::path_record::PathRecordRepr;
use std::io::Write;

/// Gathers a [`Snapshot`] per service and writes them all at [`Report::finish`].
pub(crate) struct PrometheusReport<'a> {
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    snapshots: Vec<Snapshot>,
}

impl<'a> PrometheusReport<'a> {
    /// A report writing the exposition to `out` and failures to `err`.
    pub(crate) fn new(out: &'a mut dyn Write, err: &'a mut dyn Write) -> Self {
        Self {
            out,
            err,
            snapshots: Vec::new(),
        }
    }

    fn complain(&mut self, line: &str) {
        // Nothing sensible can be done when stderr is gone.
        let _ = writeln!(self.err, "{line}");
    }

    fn current(&mut self) -> Option<&mut Snapshot> {
        self.snapshots.last_mut()
    }

    fn endpoint_sample(&mut self, index: i32) -> Option<&mut EndpointSample> {
        let index = usize::try_from(index).ok()?;
        self.current()?
            .endpoints
            .iter_mut()
            .find(|e| e.index == index)
    }
}

impl Report for PrometheusReport<'_> {
    fn notice(&mut self, text: &str) {
        self.complain(text);
    }

    fn begin_service(&mut self, svc: &str) {
        self.snapshots.push(Snapshot {
            service: Some(svc.to_owned()),
            up: Some(true),
            ..Snapshot::default()
        });
    }

    fn unreachable(&mut self, svc: &str, error: &ConnectError) {
        if let Some(s) = self.current() {
            s.up = Some(false);
        }
        self.complain(&unreachable_line(svc, error));
    }

    // The command line allows no resolve, perf by source or file with this format.
    fn resolve_section(&mut self, _svc: &str) {}
    fn destination(&mut self, _dest: &str, _src: Option<&str>, _format: AddrFormat) {}
    fn daemon_source(&mut self, _source: &str) {}
    fn attempt_succeeded(&mut self) {}
    fn attempt_failed(&mut self, _failure: &ResolveFailure) {}
    fn path(&mut self, _path: &PathRecordRepr) {}
    fn verification(&mut self, _result: &Result<(), ClientError>) {}
    fn destination_done(&mut self) {}
    fn generating(&mut self, _kind: FileKind, _shown: &str) {}
    fn generated_line(&mut self, _line: &str) {}
    fn generated(&mut self, _kind: FileKind) {}
    fn generate_failed(&mut self, _kind: FileKind, _error: &GenerateError) {}

    fn perf_counters(
        &mut self,
        _svc: &str,
        _mode: PerfMode,
        endpoint: Option<i32>,
        counters: &[u64],
    ) {
        match endpoint {
            None => {
                if let Some(s) = self.current() {
                    s.global = Some(counters.to_vec());
                }
            }
            // Counters go to an endpoint already described by EP_QUERY.
            Some(i) => {
                if let Some(e) = self.endpoint_sample(i) {
                    e.counters = Some(counters.to_vec());
                }
            }
        }
    }

    fn perf_failed(&mut self, svc: &str, failure: &PerfFailure) {
        for l in failure.text(svc) {
            self.complain(&l);
        }
    }

    fn endpoint(&mut self, _svc: &str, index: i32, ep: &EpConfigRepr) {
        let Ok(index) = usize::try_from(index) else {
            return;
        };
        let sample = EndpointSample {
            index,
            guid: ep.dev_guid,
            port: ep.port_num,
            pkey: ep.pkey,
            provider: String::from_utf8_lossy(ep.prov_name.until_nul()).into_owned(),
            addresses: endpoint_addresses(ep).len(),
            counters: None,
            cache: None,
        };
        if let Some(s) = self.current() {
            s.endpoints.push(sample);
        }
    }

    fn endpoint_missing(&mut self, index: i32) {
        self.complain(&endpoint_missing_line(index));
    }

    fn endpoints_failed(&mut self, svc: &str, error: &ClientError) {
        self.complain(&endpoints_failed_line(svc, error));
    }

    fn finish(&mut self, _status: i32, _print_status: bool) {
        // One service needs no label to tell its series apart; then its series are
        // the same as the daemon's metrics file.
        if self.snapshots.len() == 1 {
            self.snapshots[0].service = None;
        }
        let text = render(&self.snapshots);
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Bytes64;

    fn ep(pkey: u16) -> EpConfigRepr {
        EpConfigRepr {
            dev_guid: 0x0002_c903_00a0_b000,
            port_num: 1,
            phys_port_cnt: 1,
            reserved: 0,
            pkey,
            addr_cnt: 2,
            prov_name: Bytes64::c_string("ibacmp"),
            addrs: vec![Bytes64::c_string("node1"), Bytes64::c_string("10.0.0.1")],
        }
    }

    #[test]
    fn one_service_without_a_label_several_with_and_failures_on_stderr() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut r = PrometheusReport::new(&mut out, &mut err);
        r.begin_service("/run/ibacm-unix.sock");
        r.perf_counters("s", PerfMode::Row, None, &[0, 1, 2, 3, 4, 5, 6]);
        r.endpoint("s", 1, &ep(0xffff));
        r.perf_counters("s", PerfMode::All, Some(1), &[6, 5, 4, 3, 2, 1, 0]);
        // Counters of an endpoint EP_QUERY did not describe have no labels to go under.
        r.perf_counters("s", PerfMode::All, Some(9), &[9; 7]);
        r.finish(0, true);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("acm_up 1\n"), "{text}");
        assert!(text.contains("acm_resolves_total 1\n"), "{text}");
        assert!(text.contains(
            "acm_endpoint_resolves_total{endpoint=\"1\",guid=\"0x0002c90300a0b000\",port=\"1\",pkey=\"0xffff\"} 5\n"
        ));
        assert!(text.contains("acm_endpoint_addresses{endpoint=\"1\",guid=\"0x0002c90300a0b000\",port=\"1\",pkey=\"0xffff\"} 2\n"));
        assert!(!text.contains("endpoint=\"9\""));
        assert!(err.is_empty());

        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut r = PrometheusReport::new(&mut out, &mut err);
        r.begin_service("a");
        r.perf_counters("a", PerfMode::Row, None, &[1; 7]);
        r.begin_service("b");
        r.unreachable("b", &ConnectError::Tcp { errno: 111 });
        r.finish(0, true);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("acm_up{service=\"a\"} 1\nacm_up{service=\"b\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("acm_errors_total{service=\"a\"} 1\n"));
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "b,unable to contact service: Connection refused\n"
        );
    }
}
