//! The invariants every scenario checks: every client request gets exactly one reply;
//! every successful reply's path is the fabric's truth; no address is served from a
//! cache after its lifetime; SA sends stay within `sa_depth`; no TID is reused while
//! in flight.

use super::Sim;
use super::fasthash::FastMap;
use super::kept::KeptByRun;
use crate::spec::HostId;
use acm_engine::{Address, Instant};
use acm_proto::Bytes64;
use acm_proto::acm_mad::{AcmMadPacket, RESOLVE_REC_OFFSET};
use acm_proto::client::{
    AddrType, ENTRY_LEN, EpAddrPacket, EpFlags, HEADER_LEN, HeaderPacket, Opcode, Status,
};
use acm_proto::mad::Method;
use acm_proto::path_record::{PathRecordPacket, PathRecordRepr};
use std::fmt;
use std::time::Duration;

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// When it was seen.
    pub at: Instant,
    /// What went wrong.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// How long a TID stays "in flight" for the reuse check: longer than any retry cycle.
const TID_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default)]
pub(crate) struct Invariants {
    violations: Vec<Violation>,
    /// While a batch runs ([`super::batch`]), the violations found, by run.
    kept: KeptByRun<Violation>,
    /// ACM requests by (requester, TID): content hash, destination, first sent.
    /// (Hash maps: never iterated in an order that matters, only looked up.)
    requests: FastMap<(HostId, u32), (u64, Address, Instant)>,
    /// Every address some host learned or some request asked for, numbered in order
    /// of first sight (hosts deal in the same few addresses): a number indexes
    /// `addrs` and `learned` directly.
    ids: FastMap<Address, u32>,
    addrs: Vec<Address>,
    /// When each host last learned each address over the network: per host, by address
    /// number, nanoseconds plus one (0: never). A storm on N hosts teaches N² pairs,
    /// each recorded per ACM MAD received and checked per reply; a host takes a storm's
    /// copies from many senders in turn ([`super::batch`]), and the numbers of their
    /// addresses follow one another.
    learned: Vec<Vec<u64>>,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An ACM MAD's view, if it is long enough to hold a resolve record's addresses (the
/// GIDs are not read here).
fn acm_view(mad: &[u8]) -> Option<AcmMadPacket<&[u8]>> {
    (mad.len() >= ACM_ADDRS_END).then(|| AcmMadPacket::new_unchecked(mad))
}

/// Where the resolve record's source address ends: what the checks below read.
const ACM_ADDRS_END: usize = RESOLVE_REC_OFFSET + 8 + 2 * 64;

fn dest_addr(p: &AcmMadPacket<&[u8]>) -> Address {
    Address {
        ty: p.dest_type(),
        bytes: p.dest(),
    }
}

fn src_addr(p: &AcmMadPacket<&[u8]>) -> Address {
    Address {
        ty: p.src_type(),
        bytes: p.src(),
    }
}

/// The TID's low half: the part the requester's counter fills.
fn low_tid(p: &AcmMadPacket<&[u8]>) -> u32 {
    p.tid() as u32
}

impl Invariants {
    pub(crate) fn violate(&mut self, at: Instant, what: String) {
        if let Some(v) = self.kept.keep(Violation { at, what }) {
            self.violations.push(v);
        }
    }

    /// Keeps the violations found from now on in run `run`.
    pub(crate) fn capture(&mut self, run: usize) {
        self.kept.capture(run);
    }

    /// Stops keeping violations, and records those kept run after run.
    pub(crate) fn release(&mut self) {
        self.kept.release(|v| self.violations.push(v));
    }

    /// Host `h` sends an ACM MAD.
    pub(crate) fn on_acm_send(&mut self, now: Instant, h: HostId, mad: &[u8]) {
        let Some(p) = acm_view(mad).filter(|p| p.method() == Method::GET) else {
            return;
        };
        let tid = low_tid(&p);
        let content = fnv(&mad[RESOLVE_REC_OFFSET..]);
        let dest = dest_addr(&p);
        if let Some(&(prev, _, at)) = self.requests.get(&(h, tid))
            && prev != content
            && now.saturating_duration_since(at) < TID_WINDOW
        {
            self.violate(
                now,
                format!("host {h}: ACM TID {tid:#x} reused for another request while in flight"),
            );
        }
        let first = self
            .requests
            .get(&(h, tid))
            .filter(|(c, ..)| *c == content)
            .map_or(now, |&(_, _, at)| at);
        self.requests.insert((h, tid), (content, dest, first));
    }

    /// An ACM MAD reaches host `h` (of `hosts`): a request teaches it the requester's
    /// address; a response teaches it the address it asked for.
    pub(crate) fn on_acm_arrival(&mut self, now: Instant, h: HostId, hosts: usize, mad: &[u8]) {
        let Some(p) = acm_view(mad) else {
            return;
        };
        match p.method() {
            Method::GET => self.learn(h, hosts, src_addr(&p), now),
            Method::GET_RESP => {
                if let Some(&(_, dest, _)) = self.requests.get(&(h, low_tid(&p))) {
                    self.learn(h, hosts, dest, now);
                }
            }
            _ => {}
        }
    }

    /// Host `h`'s neighbour table answered a question for `dest`: an answer that found
    /// the address teaches the host it, as an ACM response would
    /// (docs/protocol/ipoib-neigh.md §3).
    pub(crate) fn on_neigh_answer(
        &mut self,
        now: Instant,
        h: HostId,
        hosts: usize,
        dest: std::net::IpAddr,
        found: bool,
    ) {
        if found {
            self.learn(h, hosts, Address::ip(dest), now);
        }
    }

    /// The number of address `a`.
    fn number(&mut self, a: Address) -> u32 {
        let next = self.addrs.len() as u32;
        let id = *self.ids.entry(a).or_insert(next);
        if id == next {
            self.addrs.push(a);
        }
        id
    }

    /// Address number `id`.
    pub(crate) fn address(&self, id: u32) -> &Address {
        &self.addrs[id as usize]
    }

    /// The number of the requester's address in ACM MAD `mad`, if it is a request:
    /// what every host it reaches learns ([`Invariants::on_acm_arrival`]). Found once
    /// per send, not once per receiver.
    pub(crate) fn requester(&mut self, mad: &[u8]) -> Option<u32> {
        let p = acm_view(mad).filter(|p| p.method() == Method::GET)?;
        Some(self.number(src_addr(&p)))
    }

    /// Host `h` (of `hosts`) learned address `a` at `now`.
    fn learn(&mut self, h: HostId, hosts: usize, a: Address, now: Instant) {
        let id = self.number(a);
        self.learn_number(h, hosts, id, now);
    }

    /// Host `h` (of `hosts`) learned address number `id` at `now`.
    pub(crate) fn learn_number(&mut self, h: HostId, hosts: usize, id: u32, now: Instant) {
        let h = h.index();
        if self.learned.len() <= h {
            self.learned.resize_with(hosts.max(h + 1), Vec::new);
        }
        let id = id as usize;
        let times = &mut self.learned[h];
        if times.len() <= id {
            times.resize(self.addrs.len().max(id + 1), 0);
        }
        times[id] = now.as_nanos().saturating_add(1);
    }

    /// Host `h` restarted: it knows nothing, and its TIDs start over.
    pub(crate) fn host_restarted(&mut self, h: HostId) {
        self.requests.retain(|&(x, _), _| x != h);
        if let Some(times) = self.learned.get_mut(h.index()) {
            times.clear();
        }
    }

    /// When host `h` last learned address number `id`.
    pub(crate) fn learned_by_number(&self, h: HostId, id: u32) -> Option<Instant> {
        match self.learned.get(h.index())?.get(id as usize)? {
            0 => None,
            &t => Some(Instant::from_nanos(t - 1)),
        }
    }

    pub(crate) fn violations(&self) -> &[Violation] {
        &self.violations
    }
}

/// What the check of a successful answer needs from its request, found when the
/// request is submitted (so the request's bytes need not be kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CheckKey {
    /// Not a RESOLVE (or too short to be one): nothing to check.
    None,
    /// A RESOLVE without a destination this check knows how to find the owner of.
    NoDest,
    /// A RESOLVE of a name or IP address (type 1..=3): the address, by number.
    Addr(u32),
    /// A path RESOLVE: the destination GID, if the record has a valid one.
    Gid(Option<acm_proto::Gid>),
}

impl Invariants {
    /// The check key of request `req`, numbering its destination address.
    pub(crate) fn check_key(&mut self, req: &[u8]) -> CheckKey {
        let is_resolve = HeaderPacket::new_checked(req)
            .is_ok_and(|h| h.opcode() == Opcode::RESOLVE && req.len() >= HEADER_LEN + ENTRY_LEN);
        if !is_resolve {
            return CheckKey::None;
        }
        // The destination entry: the first flagged DEST, or a path. Whole entries only,
        // whatever the header's length says (the daemon checks that, not this).
        let dest = req[HEADER_LEN..]
            .chunks_exact(ENTRY_LEN)
            .map(EpAddrPacket::new_unchecked)
            .find(|e| e.flags().intersects(EpFlags::DEST) || e.addr_type() == AddrType::PATH);
        let Some(dest) = dest else {
            return CheckKey::NoDest;
        };
        match dest.addr_type() {
            ty @ (AddrType::NAME | AddrType::IP | AddrType::IP6) => {
                let a = Address {
                    ty,
                    bytes: Bytes64::read(dest.info()).unwrap_or_default(),
                };
                CheckKey::Addr(self.number(a))
            }
            AddrType::PATH => {
                CheckKey::Gid(Some(PathRecordPacket::new_unchecked(dest.info()).dgid()))
            }
            _ => CheckKey::NoDest,
        }
    }
}

/// Checks a successful RESOLVE reply on host `h` against the fabric (`key` from its
/// request): what is wrong with it (nothing, almost always: the empty vector does not
/// allocate).
pub(crate) fn check_resolve(sim: &Sim, h: HostId, key: CheckKey, reply: &[u8]) -> Vec<String> {
    let mut wrong = Vec::new();
    if key == CheckKey::None || reply.len() < HEADER_LEN + ENTRY_LEN {
        return wrong;
    }
    if HeaderPacket::new_unchecked(reply).status() != Status::SUCCESS {
        return wrong;
    }
    // The first entry holds the path.
    let entry = EpAddrPacket::new_unchecked(&reply[HEADER_LEN..]);
    let Ok(path) = PathRecordRepr::parse(entry.info()) else {
        wrong.push(format!("host {h}: unparsable path in a successful reply"));
        return wrong;
    };
    let now = sim.now;
    let (truth, learned_addr) = match key {
        CheckKey::Addr(id) => {
            let a = sim.inv.address(id);
            (sim.owner_of(a), Some((id, a)))
        }
        CheckKey::Gid(d) => (d.and_then(|g| sim.topo.by_gid(&g)), None),
        CheckKey::None | CheckKey::NoDest => (None, None),
    };
    let Some(truth) = truth else { return wrong };
    let Some(tp) = sim.topo.port(truth) else {
        return wrong;
    };
    if path.dgid != tp.gid || (path.dlid != 0 && (path.dlid & !((1u16 << tp.lmc) - 1)) != tp.lid) {
        wrong.push(format!(
            "host {h}: path to {} has dgid {} dlid {}, truth {} {}",
            truth.host, path.dgid, path.dlid, tp.gid, tp.lid
        ));
    }
    let own = sim.topo.by_gid(&path.sgid).is_some_and(|p| p.host == h);
    if !own {
        wrong.push(format!(
            "host {h}: path sgid {} is not one of its ports",
            path.sgid
        ));
    }
    // Address freshness, for addresses learned over the network.
    if let Some((id, a)) = learned_addr
        && truth.host != h
    {
        if sim.hosts[h.index()].preloaded.contains(a) {
            return wrong;
        }
        let limit = sim.hosts[h.index()].addr_timeout;
        match sim.inv.learned_by_number(h, id) {
            None => wrong.push(format!("host {h}: served {a} without ever learning it")),
            Some(at) => {
                if let Some(minutes) = limit {
                    // Lookups compare whole minutes, so allow one minute of granularity.
                    let max = Duration::from_secs(60 * (u64::from(minutes) + 1));
                    if now.saturating_duration_since(at) > max {
                        wrong.push(format!(
                            "host {h}: served {a} learned at {at}, past addr_timeout"
                        ));
                    }
                }
            }
        }
    }
    wrong
}

impl Sim {
    /// Every violation so far, plus every request still unanswered. Call it when the
    /// simulation is idle.
    ///
    /// # Errors
    /// The violations, if there are any.
    pub fn check_invariants(&self) -> Result<(), Vec<Violation>> {
        let mut v = self.inv.violations().to_vec();
        for (i, r) in self.requests.iter().enumerate() {
            if r.outcome == super::Outcome::Pending {
                v.push(Violation {
                    at: self.now,
                    what: format!("host {}: request {i} never answered", r.host),
                });
            }
        }
        if v.is_empty() { Ok(()) } else { Err(v) }
    }

    /// The port that owns a name or IP address in the fabric description.
    pub(crate) fn owner_of(&self, a: &Address) -> Option<crate::topology::PortRef> {
        match a.as_ip() {
            Some(ip) => self.owners.ips.get(&ip).copied(),
            None => self
                .owners
                .names
                .get(&a.bytes.until_nul().to_ascii_lowercase())
                .copied(),
        }
    }
}

/// Who owns each IP address and name of the fabric description, built once: looking
/// it up per reply by scanning every host made large runs cubic.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owners {
    ips: FastMap<std::net::IpAddr, crate::topology::PortRef>,
    /// Names lower-cased (names match case-insensitively); the first owner wins.
    names: FastMap<Vec<u8>, crate::topology::PortRef>,
}

impl Owners {
    pub(crate) fn new(spec: &crate::spec::FabricSpec) -> Self {
        use crate::topology::PortRef;
        let mut o = Self::default();
        for (h, hs) in spec.host_ids().zip(&spec.hosts) {
            for i in &hs.ips {
                o.ips.entry(i.addr).or_insert(PortRef {
                    host: h,
                    hca: i.hca,
                    port: i.port,
                });
            }
            for line in spec.addr_file_text(h).lines() {
                let mut t = line.split_whitespace();
                let (Some(n), Some(dev), Some(port)) = (t.next(), t.next(), t.next()) else {
                    continue;
                };
                if n.starts_with('#') {
                    continue;
                }
                let Some(hca) = hs
                    .hcas
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(dev))
                else {
                    continue;
                };
                let Ok(port) = port.parse() else { continue };
                o.names
                    .entry(n.as_bytes().to_ascii_lowercase())
                    .or_insert(PortRef { host: h, hca, port });
            }
        }
        o
    }
}
