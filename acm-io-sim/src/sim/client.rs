//! The test-facing client API: submit a request's bytes on a host as a client would
//! (one connection per request, as `ib_acme` does) and read back exactly the bytes a
//! real client would read; plus builders for the usual requests.

use super::Event;
use super::Sim;
use acm_engine::{ConnId, Instant};
use acm_proto::path_record::PathRecordRepr;

/// A submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub usize);

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No answer yet.
    Pending,
    /// The daemon replied with these bytes.
    Reply {
        /// The reply.
        bytes: Vec<u8>,
        /// When.
        at: Instant,
    },
    /// The daemon closed the connection without replying (a malformed request).
    Closed(String),
    /// The host restarted while the request waited.
    Reset,
}

/// A RESOLVE reply, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveResult {
    /// The status byte (0 on success).
    pub status: u8,
    /// The path, on success.
    pub path: Option<PathRecordRepr>,
}

#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) host: usize,
    pub(crate) bytes: Vec<u8>,
    pub(crate) outcome: Outcome,
}

impl Sim {
    /// Submits `bytes` on host `host` now, on a new client connection.
    pub fn submit(&mut self, host: usize, bytes: Vec<u8>) -> RequestId {
        let now = self.now;
        self.submit_at(now, host, bytes)
    }

    /// Submits `bytes` on host `host` at `at`.
    pub fn submit_at(&mut self, at: Instant, host: usize, bytes: Vec<u8>) -> RequestId {
        let idx = self.requests.len();
        self.requests.push(Request {
            host,
            bytes: bytes.clone(),
            outcome: Outcome::Pending,
        });
        let h = &mut self.hosts[host];
        let conn = ConnId(h.next_conn);
        h.next_conn += 1;
        h.conns.insert(conn, idx);
        self.schedule(at.max(self.now), Event::Client { host, conn, bytes });
        RequestId(idx)
    }

    /// How request `id` ended so far.
    #[must_use]
    pub fn outcome(&self, id: RequestId) -> &Outcome {
        &self.requests[id.0].outcome
    }

    /// The reply bytes of request `id`, if it has one.
    #[must_use]
    pub fn reply(&self, id: RequestId) -> Option<&[u8]> {
        match &self.requests[id.0].outcome {
            Outcome::Reply { bytes, .. } => Some(bytes),
            _ => None,
        }
    }

    /// Request `id`'s reply as a RESOLVE result.
    #[must_use]
    pub fn resolve_result(&self, id: RequestId) -> Option<ResolveResult> {
        let b = self.reply(id)?;
        let status = *b.get(2)?;
        let path = (status == 0 && b.len() >= 88)
            .then(|| PathRecordRepr::parse(&b[24..88]).ok())
            .flatten();
        Some(ResolveResult { status, path })
    }

    /// Submits a request on `host` and runs until it is answered (or nothing is left
    /// to run); returns how it ended.
    pub fn request_now(&mut self, host: usize, bytes: Vec<u8>) -> RequestId {
        let id = self.submit(host, bytes);
        for _ in 0..10_000_000u64 {
            if self.requests[id.0].outcome != Outcome::Pending {
                break;
            }
            if !self.step(Instant::from_nanos(u64::MAX)) {
                break;
            }
        }
        id
    }

    /// Every request submitted so far.
    pub fn request_ids(&self) -> impl Iterator<Item = RequestId> {
        (0..self.requests.len()).map(RequestId)
    }
}

/// Records how request `idx` ended, checking that it ends once, and that a successful
/// resolve's path is the fabric's truth.
pub(crate) fn finish(sim: &mut Sim, idx: usize, outcome: Outcome) {
    let now = sim.now;
    let Some(req) = sim.requests.get_mut(idx) else {
        return;
    };
    if req.outcome != Outcome::Pending {
        let host = req.host;
        sim.inv
            .violate(now, format!("host {host}: request {idx} answered twice"));
        return;
    }
    req.outcome = outcome;
    let (host, bytes) = (req.host, req.bytes.clone());
    if let Outcome::Reply { bytes: reply, .. } = &sim.requests[idx].outcome {
        let reply = reply.clone();
        super::invariants::check_resolve(sim, host, &bytes, &reply);
    }
}

/// Builders for the requests clients send (byte layouts of spec section 1).
pub mod requests {
    use acm_proto::Gid;
    use std::net::IpAddr;

    const SOURCE: u32 = 1;
    const DEST: u32 = 2;
    const NODELAY: u32 = 0x4000_0000;

    fn entry(buf: &mut Vec<u8>, flags: u32, ty: u16, info: &[u8]) {
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&[0, 0]);
        let mut i = [0u8; 64];
        let n = info.len().min(64);
        i[..n].copy_from_slice(&info[..n]);
        buf.extend_from_slice(&i);
    }

    fn finish_resolve(mut buf: Vec<u8>) -> Vec<u8> {
        let len = buf.len() as u16;
        buf[6..8].copy_from_slice(&len.to_ne_bytes());
        buf
    }

    fn header(opcode: u8) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        b[0] = 1;
        b[1] = opcode;
        b
    }

    fn ip_entry(buf: &mut Vec<u8>, flags: u32, ip: IpAddr) {
        match ip {
            IpAddr::V4(v4) => entry(buf, flags, 2, &v4.octets()),
            IpAddr::V6(v6) => entry(buf, flags, 3, &v6.octets()),
        }
    }

    /// A RESOLVE of `dst` from `src` (or from the source the routing picks).
    #[must_use]
    pub fn resolve_ip(src: Option<IpAddr>, dst: IpAddr, nodelay: bool) -> Vec<u8> {
        let mut b = header(1);
        if let Some(s) = src {
            ip_entry(&mut b, SOURCE, s);
        }
        ip_entry(&mut b, DEST | if nodelay { NODELAY } else { 0 }, dst);
        finish_resolve(b)
    }

    /// A RESOLVE of name `dst` from name `src`.
    #[must_use]
    pub fn resolve_name(src: &str, dst: &str, nodelay: bool) -> Vec<u8> {
        let mut b = header(1);
        entry(&mut b, SOURCE, 1, src.as_bytes());
        entry(
            &mut b,
            DEST | if nodelay { NODELAY } else { 0 },
            1,
            dst.as_bytes(),
        );
        finish_resolve(b)
    }

    /// A path RESOLVE to `dgid` (from this host's port GID `sgid`, if given).
    #[must_use]
    pub fn resolve_gid(sgid: Option<Gid>, dgid: Gid) -> Vec<u8> {
        let mut path = [0u8; 64];
        path[8..24].copy_from_slice(&dgid.0);
        if let Some(s) = sgid {
            path[24..40].copy_from_slice(&s.0);
        }
        path[49] = 0x81;
        let mut b = header(1);
        entry(&mut b, 0, 0x10, &path);
        finish_resolve(b)
    }

    /// A global PERF_QUERY.
    #[must_use]
    pub fn perf_global() -> Vec<u8> {
        let mut b = header(2);
        b[6..8].copy_from_slice(&16u16.to_be_bytes());
        b
    }
}
