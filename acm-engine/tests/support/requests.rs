//! Client messages laid out by hand, byte by byte, as ib_acme and librdmacm write them
//! (header, entries, path records, PERF_QUERY, EP_QUERY:
//! docs/protocol/client-messages.md §3, §4, §5, §9, §10), and the few reply fields tests
//! read back. Kept independent of `acm_proto` so that the tests check the wire layout
//! rather than the crate that also parses it.

use acm_proto::Gid;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

pub const HDR: usize = 16;
pub const ENTRY: usize = 72;

/// Entry flags (docs/protocol/client-messages.md §4), host order on the wire.
pub const SOURCE: u32 = 0x0000_0001;
pub const DEST: u32 = 0x0000_0002;
pub const NODELAY: u32 = 0x4000_0000;
pub const QUERY_SA: u32 = 0x8000_0000;

/// Entry types (docs/protocol/client-messages.md §4), host order on the wire.
pub const T_NAME: u16 = 0x01;
pub const T_IP: u16 = 0x02;
pub const T_IP6: u16 = 0x03;
pub const T_PATH: u16 = 0x10;

/// ACM status codes (docs/protocol/client-messages.md §3).
pub const ENOMEM: u8 = 1;
pub const EINVAL: u8 = 2;
pub const ENODATA: u8 = 3;
pub const ENOTCONN: u8 = 5;
pub const ETIMEDOUT: u8 = 6;
pub const ESRCADDR: u8 = 7;
pub const ESRCTYPE: u8 = 8;
pub const EDESTADDR: u8 = 9;
pub const EDESTTYPE: u8 = 10;

/// One 72-byte endpoint-address entry.
pub fn entry(flags: u32, ty: u16, info: &[u8]) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[0..4].copy_from_slice(&flags.to_ne_bytes());
    e[4..6].copy_from_slice(&ty.to_ne_bytes());
    e[8..8 + info.len()].copy_from_slice(info);
    e
}

/// An IPv4 or IPv6 entry (the type follows the literal's family).
pub fn ip(flags: u32, addr: &str) -> [u8; ENTRY] {
    match addr.parse::<IpAddr>().expect("an IP literal") {
        IpAddr::V4(v4) => entry(flags, T_IP, &v4.octets()),
        IpAddr::V6(v6) => entry(flags, T_IP6, &v6.octets()),
    }
}

/// A NAME entry, zero-padded.
pub fn name(flags: u32, name: &str) -> [u8; ENTRY] {
    entry(flags, T_NAME, name.as_bytes())
}

/// A PATH entry carrying `path`.
pub fn path_entry(flags: u32, path: &[u8; 64]) -> [u8; ENTRY] {
    entry(flags, T_PATH, path)
}

/// A RESOLVE: header (length in host order, docs/protocol/client-messages.md §3) then the
/// entries.
pub fn resolve(entries: &[[u8; ENTRY]]) -> Vec<u8> {
    let len = HDR + ENTRY * entries.len();
    let mut m = vec![0u8; len];
    m[0] = 1;
    m[1] = 0x01;
    m[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
    for (i, e) in entries.iter().enumerate() {
        m[HDR + i * ENTRY..HDR + (i + 1) * ENTRY].copy_from_slice(e);
    }
    m
}

/// `ib_acme -s src -d dst` for IP literals: SOURCE entry first, DEST second.
pub fn resolve_ip(src: &str, dst: &str) -> Vec<u8> {
    resolve(&[ip(SOURCE, src), ip(DEST, dst)])
}

/// The same with NODELAY on the destination (`ib_acme -c`).
pub fn resolve_ip_nodelay(src: &str, dst: &str) -> Vec<u8> {
    resolve(&[ip(SOURCE, src), ip(DEST | NODELAY, dst)])
}

/// A PERF_QUERY by index (0: global); 16 bytes, length big-endian.
pub fn perf_index(index: u8) -> Vec<u8> {
    let mut m = vec![0u8; HDR];
    m[0] = 1;
    m[1] = 0x02;
    m[4] = index;
    m[6..8].copy_from_slice(&16u16.to_be_bytes());
    m
}

/// A PERF_QUERY by address (`ib_acme -P s -s ADDR`): 88 bytes, length big-endian, the
/// entry's flags and type in host order (docs/reference-quirks.md §36).
pub fn perf_by(e: [u8; ENTRY]) -> Vec<u8> {
    let mut m = vec![0u8; HDR + ENTRY];
    m[0] = 1;
    m[1] = 0x02;
    m[6..8].copy_from_slice(&88u16.to_be_bytes());
    m[HDR..].copy_from_slice(&e);
    m
}

/// An EP_QUERY for endpoint `index` (1-based) on port `port`; 16 bytes, length BE.
pub fn ep_query(index: u8, port: u8) -> Vec<u8> {
    let mut m = vec![0u8; HDR];
    m[0] = 1;
    m[1] = 0x03;
    m[3] = index;
    m[4] = port;
    m[6..8].copy_from_slice(&16u16.to_be_bytes());
    m
}

/// An `ibv_path_record` (docs/protocol/client-messages.md §5), built field by field;
/// unset fields stay zero.
#[derive(Debug, Clone, Copy, Default)]
pub struct Path {
    pub dgid: Option<Gid>,
    pub sgid: Option<Gid>,
    pub dlid: u16,
    pub slid: u16,
    /// Byte 49: reversible (bit 7) and numpath.
    pub reversible_numpath: u8,
    pub pkey: u16,
    pub mtu: u8,
    pub rate: u8,
    pub packet_lifetime: u8,
}

impl Path {
    pub fn bytes(&self) -> [u8; 64] {
        let mut p = [0u8; 64];
        if let Some(g) = self.dgid {
            p[8..24].copy_from_slice(&g.0);
        }
        if let Some(g) = self.sgid {
            p[24..40].copy_from_slice(&g.0);
        }
        p[40..42].copy_from_slice(&self.dlid.to_be_bytes());
        p[42..44].copy_from_slice(&self.slid.to_be_bytes());
        p[49] = self.reversible_numpath;
        p[50..52].copy_from_slice(&self.pkey.to_be_bytes());
        p[54] = self.mtu;
        p[55] = self.rate;
        p[56] = self.packet_lifetime;
        p
    }
}

/// A path resolve by LID (`ib_acme -f l -d LID`, docs/test-vectors.md §8): entry 0 is
/// PATH with flags 0, dlid set and reversible numpath 1.
pub fn resolve_lid(dlid: u16) -> Vec<u8> {
    let p = Path {
        dlid,
        reversible_numpath: 0x81,
        ..Path::default()
    };
    resolve(&[path_entry(0, &p.bytes())])
}

// --- Reading replies ------------------------------------------------------------------

pub fn opcode(r: &[u8]) -> u8 {
    r[1]
}

pub fn status(r: &[u8]) -> u8 {
    r[2]
}

/// The length field of a RESOLVE reply (host order).
pub fn resolve_len(r: &[u8]) -> u16 {
    u16::from_ne_bytes([r[6], r[7]])
}

/// The length field of a PERF_QUERY or EP_QUERY reply (big-endian).
pub fn be_len(r: &[u8]) -> u16 {
    u16::from_be_bytes([r[6], r[7]])
}

/// Entry `i`'s flags.
pub fn entry_flags(r: &[u8], i: usize) -> u32 {
    let o = HDR + i * ENTRY;
    u32::from_ne_bytes(r[o..o + 4].try_into().expect("4 bytes"))
}

/// Entry `i`'s type.
pub fn entry_type(r: &[u8], i: usize) -> u16 {
    let o = HDR + i * ENTRY;
    u16::from_ne_bytes([r[o + 4], r[o + 5]])
}

/// Entry `i`'s 64-byte info (the path record of a PATH entry).
pub fn entry_info(r: &[u8], i: usize) -> [u8; 64] {
    let o = HDR + i * ENTRY + 8;
    r[o..o + 64].try_into().expect("64 bytes")
}

/// The counters of a PERF_QUERY reply, decoded as big-endian u64s.
pub fn perf_counters(r: &[u8]) -> Vec<u64> {
    r[HDR..]
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The NUL-terminated string in a 64-byte field.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

pub fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().expect("IPv4 literal"))
}

pub fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().expect("IPv6 literal"))
}

pub fn gid(s: &str) -> Gid {
    s.parse().expect("GID literal")
}

/// A file of the project's shared captures (`testdata/captures/<dir>/<file>`).
pub fn capture(dir: &str, file: &str) -> Vec<u8> {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "testdata",
        "captures",
        dir,
        file,
    ]
    .iter()
    .collect();
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
