//! A one-node harness: an engine, a virtual clock, and scripted answers for everything
//! the driver would do (QPs, routing lookups, the SA, UD send completions), with a
//! transcript of every output.
#![allow(dead_code, unreachable_pub)]

pub mod capture_order;
pub mod engine_fuzz;
pub mod fabric;
pub mod kernel_model;
pub mod kernel_requests;
pub mod reference;
pub mod reference_fabric;
pub mod requests;
pub mod seeded;

use acm_engine::HostOutput;
use acm_engine::driver::{self, Fabric};
use acm_engine::{
    AddressVector, FabricEvent, Mad, MadBytes, McastGroup, NeighQuery, NeighResult, OpenQp,
    PortEvent, SaSend, SourceQuery, UdSend,
};
use acm_engine::{ClientOutput, ConnId, EndpointId, Engine, EngineConfig, Input, Instant, PortId};
use acm_proto::client::FrameError;
use acm_proto::mad::MAD_LEN;
use kernel_model::{KernelModel, Verdict};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::time::Duration;

/// How the scripted SA treats a MAD: answer with these bytes, or let the kernel time it
/// out.
pub type SaScript = Box<dyn FnMut(&[u8; MAD_LEN]) -> Option<Vec<u8>>>;
/// How the host's routing picks a source for a destination.
pub type RouteScript = Box<dyn FnMut(IpAddr) -> Result<IpAddr, u8>>;

/// What the host's neighbour table answers for an address (asked at an instant).
pub type NeighScript = Box<dyn FnMut(Instant, IpAddr) -> NeighResult>;

/// A UD send the engine asked for.
#[derive(Debug, Clone)]
pub struct UdSent {
    pub at: Instant,
    pub ep: EndpointId,
    pub av: AddressVector,
    pub mad: Mad,
}

pub struct Node {
    pub engine: Engine,
    pub now: Instant,
    pub sa: SaScript,
    pub route: RouteScript,
    /// The neighbour table (by default it knows no address).
    pub neigh: NeighScript,
    /// Neighbour answers arrive this long after the question.
    pub neigh_delay: Duration,
    /// SA answers arrive this long after the send.
    pub sa_delay: Duration,
    pub events: VecDeque<(Instant, u64, FabricEvent)>,
    seq: u64,
    pub replies: Vec<(ConnId, Vec<u8>)>,
    pub closes: Vec<(ConnId, FrameError)>,
    /// The engine's answers to the kernel, in order; each was judged by `kernel`.
    pub netlink: Vec<Vec<u8>>,
    /// What the kernel model made of each of `netlink` (and of each SET_TIMEOUT).
    pub verdicts: Vec<Verdict>,
    /// The kernel's side: every request fed as `Input::Netlink` is noted there, and
    /// every message the engine sends the kernel is judged by it; one the kernel would
    /// not act on fails the test.
    pub kernel: KernelModel,
    /// The SET_TIMEOUT messages the engine asked to send.
    pub kernel_timeouts: Vec<Vec<u8>>,
    /// Whether a SET_TIMEOUT reaches the kernel (and the engine hears so); off plays a
    /// send that failed.
    pub deliver_kernel_timeout: bool,
    /// Waits whose SET_TIMEOUT reached the kernel, to report to the engine.
    timeouts_sent: Vec<u32>,
    pub ud_sent: Vec<UdSent>,
    pub sa_sent: Vec<(Instant, Mad)>,
    pub transcript: Vec<String>,
    pub logs: Vec<String>,
    next_qpn: u32,
    /// Complete UD sends automatically (off to hold them in flight).
    pub auto_send_done: bool,
    /// Drain with `driver::lend_outputs` instead of `driver::poll_output`: every other
    /// output read where it lies, the others taken out (tests/driver_lend.rs).
    pub lend: bool,
}

impl Node {
    /// Fails, showing every line logged, unless one log line contains `text`.
    #[track_caller]
    pub fn assert_logged(&self, text: &str) {
        assert!(
            self.logs.iter().any(|l| l.contains(text)),
            "no log line contains {text:?}: {:#?}",
            self.logs
        );
    }

    /// A node as the reference runs: `sm_events` is turned off, whatever the
    /// configuration says, so that the transcripts and replays of the real ibacm hold
    /// (the reference never subscribes to SA events). [`Node::with_sm_events`] keeps
    /// the option as configured.
    pub fn new(config: EngineConfig, sa: SaScript, route: RouteScript) -> Self {
        Self::with_seed(config, sa, route, 0)
    }

    /// [`Node::new`] with the engine's seed (its TIDs and its back-off jitter).
    pub fn with_seed(
        mut config: EngineConfig,
        sa: SaScript,
        route: RouteScript,
        seed: u64,
    ) -> Self {
        config.options.sm_events = false;
        Self::with_sm_events_and_seed(config, sa, route, seed)
    }

    /// A node whose `sm_events` option is taken as configured.
    pub fn with_sm_events(config: EngineConfig, sa: SaScript, route: RouteScript) -> Self {
        Self::with_sm_events_and_seed(config, sa, route, 0)
    }

    fn with_sm_events_and_seed(
        config: EngineConfig,
        sa: SaScript,
        route: RouteScript,
        seed: u64,
    ) -> Self {
        Self {
            engine: Engine::new(config, seed, Instant::ZERO),
            now: Instant::ZERO,
            sa,
            route,
            neigh: Box::new(|_, _| NeighResult::Unreachable),
            neigh_delay: Duration::ZERO,
            sa_delay: Duration::from_millis(1),
            events: VecDeque::new(),
            seq: 0,
            replies: Vec::new(),
            closes: Vec::new(),
            netlink: Vec::new(),
            verdicts: Vec::new(),
            kernel: KernelModel::default(),
            kernel_timeouts: Vec::new(),
            deliver_kernel_timeout: true,
            timeouts_sent: Vec::new(),
            ud_sent: Vec::new(),
            sa_sent: Vec::new(),
            transcript: Vec::new(),
            logs: Vec::new(),
            next_qpn: 0x48,
            auto_send_done: true,
            lend: false,
        }
    }

    pub fn schedule(&mut self, at: Instant, ev: FabricEvent) {
        self.seq += 1;
        let pos = self
            .events
            .iter()
            .position(|(t, s, _)| (*t, *s) > (at, self.seq))
            .unwrap_or(self.events.len());
        self.events.insert(pos, (at, self.seq, ev));
    }

    /// Feeds one input at the current time and carries out every output. A kernel
    /// request is noted by the kernel model first.
    pub fn input(&mut self, input: Input<'_>) {
        let now = self.now;
        if let Input::Netlink(bytes) = &input {
            self.kernel.request(now, bytes);
        }
        self.engine.handle(now, input);
        self.drain();
        while let Some(wait_ms) = self.timeouts_sent.pop() {
            self.note(format!("kernel timeout sent: {wait_ms} ms"));
            self.engine
                .handle(now, Input::KernelTimeoutSent { wait_ms });
            self.drain();
        }
    }

    fn note(&mut self, line: String) {
        self.transcript.push(format!("{} {line}", self.now));
    }

    fn drain(&mut self) {
        if self.lend {
            return self.drain_lending();
        }
        while let Some(out) = driver::poll_output(self) {
            self.record(out);
        }
    }

    /// As `drain`, through `driver::lend_outputs`: outputs are read in place and copied
    /// by hand, except every second one, which is asked for (`Break`) and recorded
    /// as returned, so that both ways out are taken in turn.
    fn drain_lending(&mut self) {
        let mut want = false;
        loop {
            let mut lent = Vec::new();
            let taken = driver::lend_outputs(self, |out| {
                want = !want;
                if want {
                    return ControlFlow::Break(());
                }
                lent.push(copy_output(out));
                ControlFlow::Continue(())
            });
            for out in lent {
                self.record(out);
            }
            match taken {
                Some(out) => self.record(out),
                None => return,
            }
        }
    }

    fn record(&mut self, out: HostOutput) {
        match out {
            HostOutput::Client(ClientOutput::Reply { conn, reply }) => {
                let b = reply.as_bytes().to_vec();
                self.note(format!("reply conn {} {}", conn.0, hex(&b)));
                self.replies.push((conn, b));
            }
            HostOutput::Client(ClientOutput::Close { conn, reason }) => {
                self.note(format!("close conn {}: {reason}", conn.0));
                self.closes.push((conn, reason));
            }
            HostOutput::Client(ClientOutput::Netlink(b)) => {
                self.note(format!("netlink reply {}", hex(&b)));
                let verdict = self.kernel.judge(self.now, &b);
                assert!(
                    verdict.is_expected_of_the_engine(),
                    "the kernel would not act on netlink reply {} at {}: {verdict}",
                    hex(&b),
                    self.now
                );
                self.verdicts.push(verdict);
                self.netlink.push(b);
            }
            HostOutput::Client(ClientOutput::KernelTimeout { message, wait_ms }) => {
                self.note(format!("netlink set timeout {}", hex(&message)));
                // A SET_TIMEOUT that does not arrive leaves the kernel as it was; its
                // bytes are judged all the same.
                let verdict = if self.deliver_kernel_timeout {
                    self.kernel.judge(self.now, &message)
                } else {
                    self.kernel.clone().judge(self.now, &message)
                };
                assert_eq!(
                    verdict,
                    Verdict::WaitSet(wait_ms),
                    "SET_TIMEOUT {} at {}",
                    hex(&message),
                    self.now
                );
                if self.deliver_kernel_timeout {
                    self.timeouts_sent.push(wait_ms);
                }
                self.verdicts.push(verdict);
                self.kernel_timeouts.push(message);
            }
            HostOutput::Log(ev) => self.logs.push(format!("{} {ev}", self.now)),
        }
    }

    /// Delivers the next scheduled event or timer, if any is due by `limit`.
    /// Returns false when nothing is left before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        let next_ev = self.events.front().map(|(t, _, _)| *t);
        let next_timer = self.engine.poll_timeout();
        let next = match (next_ev, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return false,
        };
        if next > limit {
            return false;
        }
        self.now = self.now.max(next);
        if next_ev == Some(next) {
            let (_, _, ev) = self.events.pop_front().expect("checked");
            self.deliver(ev);
        } else {
            self.input(Input::Tick);
        }
        true
    }

    fn deliver(&mut self, ev: FabricEvent) {
        self.input(ev.as_input());
    }

    /// Runs until nothing is scheduled and no timer is set (bounded).
    pub fn settle(&mut self) {
        for _ in 0..100_000 {
            if !self.step(Instant::from_nanos(u64::MAX)) {
                return;
            }
        }
        panic!("livelock at {}", self.now);
    }

    /// Runs everything due up to `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.step(t) {}
        self.now = self.now.max(t);
    }

    pub fn advance(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Sends a request and runs until `conn` has one more reply; returns it.
    pub fn request(&mut self, conn: ConnId, bytes: &[u8]) -> Option<Vec<u8>> {
        let before = self.replies.iter().filter(|(c, _)| *c == conn).count();
        self.input(Input::ClientRequest { conn, bytes });
        for _ in 0..100_000 {
            let have: Vec<&Vec<u8>> = self
                .replies
                .iter()
                .filter(|(c, _)| *c == conn)
                .map(|(_, b)| b)
                .collect();
            if have.len() > before {
                return Some(have[before].clone());
            }
            if !self.step(Instant::from_nanos(u64::MAX)) {
                return None;
            }
        }
        panic!("livelock at {}", self.now);
    }

    pub fn port_event(&mut self, port: PortId, event: PortEvent) {
        self.input(Input::Port { port, event });
        self.settle_now();
    }

    /// Delivers only what is due now (QP creation, source answers, send completions).
    pub fn settle_now(&mut self) {
        let now = self.now;
        while self.step(now) {}
    }

    /// The replies `conn` received, in order.
    pub fn replies_to(&self, conn: ConnId) -> Vec<Vec<u8>> {
        self.replies
            .iter()
            .filter(|(c, _)| *c == conn)
            .map(|(_, r)| r.clone())
            .collect()
    }

    pub fn transcript_text(&self) -> String {
        let mut s = String::new();
        for l in &self.transcript {
            let _ = writeln!(s, "{l}");
        }
        s
    }
}

/// The harness plays the fabric: every operation goes into the transcript, and its
/// answer is scheduled (QPs, routing and send completions at once, the SA after
/// `sa_delay` or the kernel's timeout).
impl Fabric for Node {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn open_qp(&mut self, qp: OpenQp) {
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        self.note(format!(
            "open qp ep {} pkey {:#06x} index {} -> qpn {qpn:#x}",
            qp.ep.0, qp.pkey, qp.pkey_index
        ));
        self.schedule(
            self.now,
            FabricEvent::QpOpened {
                ep: qp.ep,
                result: Ok(qpn),
            },
        );
    }

    fn close_qp(&mut self, ep: EndpointId) {
        self.note(format!("close qp ep {}", ep.0));
    }

    fn ud_send(&mut self, send: &UdSend) {
        let UdSend {
            ep,
            token,
            av,
            ref mad,
        } = *send;
        self.note(format!(
            "ud send ep {} dlid {:#x} qpn {:#x} dgid {} {}",
            ep.0,
            av.dlid,
            av.remote_qpn,
            av.grh.dgid,
            describe_acm(&mad.0)
        ));
        let now = self.now;
        self.ud_sent.push(UdSent {
            at: now,
            ep,
            av,
            mad: mad.clone(),
        });
        if self.auto_send_done {
            self.schedule(
                now,
                FabricEvent::UdSendDone {
                    ep,
                    token,
                    ok: true,
                },
            );
        }
    }

    fn mcast_attach(&mut self, g: McastGroup) {
        self.note(format!(
            "attach ep {} {} mlid {:#x}",
            g.ep.0, g.mgid, g.mlid
        ));
    }

    fn mcast_detach(&mut self, g: McastGroup) {
        self.note(format!(
            "detach ep {} {} mlid {:#x}",
            g.ep.0, g.mgid, g.mlid
        ));
    }

    fn sa_send(&mut self, send: &SaSend) {
        let SaSend {
            port,
            tid,
            dest,
            timeout_ms,
            retries,
            ref mad,
        } = *send;
        self.note(format!(
            "sa send port {} dlid {} tid {tid:#x} timeout {timeout_ms} retries {retries} {}",
            port.port,
            dest.dlid,
            describe_sa(&mad.0)
        ));
        let now = self.now;
        self.sa_sent.push((now, mad.clone()));
        // A response (a ReportResp) is sent once and answered by nobody.
        if mad.0[3] & 0x80 != 0 {
            return;
        }
        match (self.sa)(&mad.0) {
            Some(resp) => {
                let at = now + self.sa_delay;
                let mad = MadBytes::from_vec(resp);
                self.schedule(at, FabricEvent::SaResponse { port, mad });
            }
            None => {
                let at =
                    now + Duration::from_millis(u64::from(timeout_ms) * u64::from(retries + 1));
                let status = acm_proto::mad::UmadStatus::TIMED_OUT;
                self.schedule(at, FabricEvent::SaSendFailed { port, tid, status });
            }
        }
    }

    fn source_query(&mut self, q: SourceQuery) {
        let r = (self.route)(q.dest);
        self.note(format!("route lookup {} -> {r:?}", q.dest));
        self.schedule(
            self.now,
            FabricEvent::SourceAnswer {
                id: q.id,
                result: r,
            },
        );
    }

    fn neigh_query(&mut self, q: NeighQuery) {
        let r = (self.neigh)(self.now, q.dest);
        self.note(format!(
            "neigh lookup {} on gid {} pkey {:#06x} -> {r:?}",
            q.dest, q.gid, q.pkey
        ));
        self.schedule(
            self.now + self.neigh_delay,
            FabricEvent::NeighAnswer {
                id: q.id,
                result: r,
            },
        );
    }
}

/// An owned copy of a lent output.
fn copy_output(out: &HostOutput) -> HostOutput {
    match out {
        HostOutput::Client(ClientOutput::Reply { conn, reply }) => {
            HostOutput::Client(ClientOutput::Reply {
                conn: *conn,
                reply: acm_engine::Reply::new(reply.as_bytes()),
            })
        }
        HostOutput::Client(ClientOutput::Close { conn, reason }) => {
            HostOutput::Client(ClientOutput::Close {
                conn: *conn,
                reason: *reason,
            })
        }
        HostOutput::Client(ClientOutput::Netlink(b)) => {
            HostOutput::Client(ClientOutput::Netlink(b.clone()))
        }
        HostOutput::Client(ClientOutput::KernelTimeout { message, wait_ms }) => {
            HostOutput::Client(ClientOutput::KernelTimeout {
                message: message.clone(),
                wait_ms: *wait_ms,
            })
        }
        HostOutput::Log(ev) => HostOutput::Log(ev.clone()),
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A short description of an ACM MAD for transcripts.
pub fn describe_acm(m: &[u8]) -> String {
    let tid = u64::from_be_bytes(m[8..16].try_into().expect("8 bytes"));
    format!(
        "acm method {:#04x} status {:#06x} tid {tid:#x} dest_type {} src_type {} gid_cnt {}",
        m[3],
        u16::from_be_bytes([m[4], m[5]]),
        m[16],
        m[18],
        m[20]
    )
}

/// A short description of an SA MAD for transcripts.
pub fn describe_sa(m: &[u8]) -> String {
    let attr = u16::from_be_bytes([m[16], m[17]]);
    let mask = u64::from_be_bytes(m[48..56].try_into().expect("8 bytes"));
    format!("method {:#04x} attr {attr:#06x} comp_mask {mask:#x}", m[3])
}
