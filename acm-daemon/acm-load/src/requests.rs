//! The bytes of every request a run sends, built once before it starts with acm-proto's
//! client message types and the entry builders it shares with `ib_acme`
//! ([`acm_client::ip_entry`], [`acm_client::name_entry`]); a client only copies one and writes
//! its tid.
//!
//! Addresses (`-s`, `-d`, `--miss-dst`) are read as `ib_acme -f` reads them, except that
//! without `-f` anything that is not an IP literal is a name (`ib_acme` would look it up
//! in DNS and fall back to a LID). Lists are comma-separated items, each an address, a
//! bracket list as `ib_acme` expands it (`node[1-3]`, `10.0.0.[2-3]`), or an inclusive
//! range of IP addresses of one family (`10.1.0.1-10.1.3.255`).
//!
//! [`acm_client::ip_entry`]: acm_client::ip_entry
//! [`acm_client::name_entry`]: acm_client::name_entry

use super::mix::{Kind, Mix};
use acm_client::addr::{self, AddrFormat};
use acm_client::brackets::{self, BracketError, MAX_ITEMS};
use acm_client::{gid_path_entry, ip_entry, lid_path_entry, name_entry};
use acm_proto::Gid;
use acm_proto::client::{
    ClientMessage, Direction, EpAddrRepr, EpFlags, EpQueryRepr, HeaderRepr, Opcode, PerfQueryRepr,
    ResolveRepr,
};
use std::net::IpAddr;
use thiserror::Error;

/// Misses when `--miss-dst` is not given and the source is not IPv6: the IPv4
/// benchmarking range of RFC 2544, which no fabric host has.
pub(crate) const DEFAULT_MISS_V4: &str = "198.18.0.1-198.18.255.254";
/// The same for an IPv6 source: the benchmarking range of RFC 5180.
pub(crate) const DEFAULT_MISS_V6: &str = "2001:2::1-2001:2::ffff";

/// Why the requests could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequestError {
    /// An address that does not parse for its format.
    #[error("bad {role} address '{text}' for format {format}")]
    BadAddress {
        /// `source`, `destination` or `miss destination`.
        role: &'static str,
        /// The text as given.
        text: String,
        /// The `-f` format it was read in.
        format: &'static str,
    },
    /// An IPv4 source with an IPv6 destination or the reverse.
    #[error("source {src} and destination {dst} are of different address families")]
    FamilyMismatch {
        /// The source.
        src: String,
        /// The destination.
        dst: String,
    },
    /// A name of 64 bytes or more.
    #[error("name '{0}' is longer than 63 bytes")]
    NameTooLong(String),
    /// A bracket list that does not expand.
    #[error("list '{0}': {1}")]
    List(String, BracketError),
    /// An IP range that is not one.
    #[error("range '{0}': {1}")]
    Range(String, &'static str),
    /// More than [`MAX_ITEMS`] addresses in one list.
    #[error("the list '{0}' names more than {MAX_ITEMS} addresses")]
    TooMany(String),
    /// A kind of request that needs addresses nobody gave.
    #[error("{0}")]
    Missing(&'static str),
}

/// The addresses of a run, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    /// `-f`: how addresses are read.
    pub format: AddrFormat,
    /// `-s`: the source, if any (the daemon picks one otherwise).
    pub src: Option<String>,
    /// `-d`: destinations that resolve (hits and NODELAY requests cycle through them).
    pub dst: Option<String>,
    /// `--miss-dst`: destinations the daemon does not know.
    pub miss: Option<String>,
}

/// Every request a run can send, ready to be copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templates {
    variants: [Vec<Vec<u8>>; Kind::ALL.len()],
}

impl Templates {
    /// Builds the requests of every kind `mix` sends.
    ///
    /// # Errors
    /// [`RequestError`] for addresses that do not parse or do not go together, and for
    /// kinds whose addresses are missing.
    pub fn build(addrs: &Addresses, mix: &Mix) -> Result<Self, RequestError> {
        let mut variants: [Vec<Vec<u8>>; Kind::ALL.len()] = Default::default();
        let src = addrs.src.as_deref();
        let resolve = |dst: &str, nodelay: bool, role: &'static str| {
            resolve_request(addrs.format, src, dst, nodelay, role)
        };
        if mix.uses(Kind::Hit) || mix.uses(Kind::NoDelay) {
            let Some(dst) = addrs.dst.as_deref() else {
                return Err(RequestError::Missing(
                    "hit and nodelay requests need destinations that resolve (-d/--dst)",
                ));
            };
            for d in expand_list(dst)? {
                // Built for NODELAY-only runs too: the warm-up sends them.
                variants[Kind::Hit.index()].push(resolve(&d, false, "destination")?);
                if mix.uses(Kind::NoDelay) {
                    variants[Kind::NoDelay.index()].push(resolve(&d, true, "destination")?);
                }
            }
        }
        if mix.uses(Kind::Miss) {
            let list = match (addrs.miss.as_deref(), addrs.format) {
                (Some(m), _) => m,
                (None, AddrFormat::Ip | AddrFormat::Unspecified) => {
                    let v6 = src.and_then(addr::parse_ip).is_some_and(|a| a.is_ipv6());
                    if v6 { DEFAULT_MISS_V6 } else { DEFAULT_MISS_V4 }
                }
                (None, _) => {
                    return Err(RequestError::Missing(
                        "miss requests with -f n, l or g need --miss-dst",
                    ));
                }
            };
            for d in expand_list(list)? {
                variants[Kind::Miss.index()].push(resolve(&d, false, "miss destination")?);
            }
        }
        if mix.uses(Kind::Perf) {
            variants[Kind::Perf.index()].push(perf_request());
        }
        if mix.uses(Kind::Ep) {
            variants[Kind::Ep.index()].push(ep_request());
        }
        Ok(Self { variants })
    }

    /// How many different requests of `kind` there are (0 when it is not sent; hits
    /// are built for NODELAY-only runs too, for the warm-up).
    #[must_use]
    pub fn count(&self, kind: Kind) -> usize {
        self.variants[kind.index()].len()
    }

    /// Request `i` (modulo [`count`](Self::count)) of `kind`.
    ///
    /// # Panics
    /// If there is no request of `kind`.
    #[must_use]
    pub fn get(&self, kind: Kind, i: usize) -> &[u8] {
        let v = &self.variants[kind.index()];
        &v[i % v.len()]
    }
}

/// A RESOLVE of 10.0.0.2 from 10.0.0.1, for the tests of what answers requests.
#[cfg(test)]
pub(crate) fn ip_resolve_request() -> Vec<u8> {
    resolve_request(
        AddrFormat::Ip,
        Some("10.0.0.1"),
        "10.0.0.2",
        false,
        "destination",
    )
    .unwrap()
}

/// The global PERF_QUERY (`ib_acme -P`).
#[must_use]
pub(crate) fn perf_request() -> Vec<u8> {
    ClientMessage::PerfQuery(PerfQueryRepr::new(0, None)).to_vec(Direction::Request)
}

/// EP_QUERY of endpoint 1 as `ib_acme -e 1` asks for it (index 1, port 1).
#[must_use]
pub(crate) fn ep_request() -> Vec<u8> {
    ClientMessage::EpQuery(EpQueryRepr::new(1, 1)).to_vec(Direction::Request)
}

/// The format an address is read in: `-f`, or without it IP for an IP literal and a
/// name otherwise.
fn format_of(format: AddrFormat, text: &str) -> AddrFormat {
    match format {
        AddrFormat::Unspecified if addr::parse_ip(text).is_some() => AddrFormat::Ip,
        AddrFormat::Unspecified => AddrFormat::Name,
        f => f,
    }
}

/// One RESOLVE request as `ib_acme` builds it (see `acme::resolve`): a SOURCE entry when
/// there is a source, then the DEST entry (DEST|NODELAY with `nodelay`); LIDs and GIDs go
/// as one PATH entry (flags NODELAY or 0), reversible with one path.
///
/// # Errors
/// [`RequestError`].
pub(crate) fn resolve_request(
    format: AddrFormat,
    src: Option<&str>,
    dst: &str,
    nodelay: bool,
    role: &'static str,
) -> Result<Vec<u8>, RequestError> {
    let bad = |role: &'static str, text: &str, f: AddrFormat| RequestError::BadAddress {
        role,
        text: text.to_owned(),
        format: f.name(),
    };
    let dest_flags = if nodelay {
        EpFlags::DEST | EpFlags::NODELAY
    } else {
        EpFlags::DEST
    };
    let mut req = ResolveRepr::new(HeaderRepr::new(Opcode::RESOLVE));
    let mut entries = Vec::with_capacity(2);
    let dst_format = format_of(format, dst);
    match dst_format {
        AddrFormat::Ip | AddrFormat::Name | AddrFormat::Unspecified => {
            if let Some(s) = src {
                entries.push(
                    address_entry(EpFlags::SOURCE, format_of(format, s), s)
                        .ok_or_else(|| bad("source", s, format_of(format, s)))??,
                );
            }
            entries.push(
                address_entry(dest_flags, dst_format, dst)
                    .ok_or_else(|| bad(role, dst, dst_format))??,
            );
            if let (Some(s), Some(d)) = (src.and_then(addr::parse_ip), addr::parse_ip(dst))
                && s.is_ipv4() != d.is_ipv4()
            {
                return Err(RequestError::FamilyMismatch {
                    src: src.unwrap_or_default().to_owned(),
                    dst: dst.to_owned(),
                });
            }
        }
        AddrFormat::Lid => {
            let lid = |t: &str, role| t.parse::<u16>().map_err(|_| bad(role, t, format));
            let dlid = lid(dst, role)?;
            let slid = src.map(|s| lid(s, "source")).transpose()?.unwrap_or(0);
            entries.push(lid_path_entry(path_flags(nodelay), slid, dlid));
        }
        AddrFormat::Gid => {
            let gid = |t: &str, role| {
                addr::parse_ipv6(t)
                    .map(Gid::from)
                    .ok_or_else(|| bad(role, t, format))
            };
            let dgid = gid(dst, role)?;
            let sgid = src
                .map(|s| gid(s, "source"))
                .transpose()?
                .unwrap_or_else(|| Gid::from(std::net::Ipv6Addr::UNSPECIFIED));
            entries.push(gid_path_entry(path_flags(nodelay), sgid, dgid));
        }
    }
    for e in entries {
        // At most two entries, far below the eight that fit.
        let _ = req.push(e);
    }
    Ok(ClientMessage::Resolve(req).to_vec(Direction::Request))
}

fn path_flags(nodelay: bool) -> EpFlags {
    if nodelay {
        EpFlags::NODELAY
    } else {
        EpFlags::EMPTY
    }
}

/// An IP or NAME entry; `None` when `text` is not an address of `format`.
fn address_entry(
    flags: EpFlags,
    format: AddrFormat,
    text: &str,
) -> Option<Result<EpAddrRepr, RequestError>> {
    match format {
        AddrFormat::Name => {
            Some(name_entry(flags, text).map_err(|_| RequestError::NameTooLong(text.to_owned())))
        }
        _ => addr::parse_ip(text).map(|ip| Ok(ip_entry(flags, ip))),
    }
}

/// Expands a list argument: comma-separated items (commas inside brackets belong to the
/// bracket list), each an address, a bracket list, or an IP range `A-B`.
///
/// # Errors
/// [`RequestError::List`], [`RequestError::Range`], [`RequestError::TooMany`].
pub(crate) fn expand_list(arg: &str) -> Result<Vec<String>, RequestError> {
    let mut out = Vec::new();
    for item in split_items(arg) {
        let names = if let Some(range) = ip_range(item) {
            range.map_err(|why| RequestError::Range(item.to_owned(), why))?
        } else {
            brackets::expand(item).map_err(|e| RequestError::List(item.to_owned(), e))?
        };
        if out.len() + names.len() > MAX_ITEMS {
            return Err(RequestError::TooMany(arg.to_owned()));
        }
        out.extend(names);
    }
    if out.is_empty() {
        return Err(RequestError::List(arg.to_owned(), BracketError::Empty));
    }
    Ok(out)
}

/// Splits at commas outside `[...]`; empty items are dropped.
fn split_items(arg: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in arg.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&arg[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&arg[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect()
}

/// `A-B` with both ends IP addresses: `Some` with the addresses from A to B inclusive, or
/// why not; `None` when the item is not a range at all (a name may contain `-`).
fn ip_range(item: &str) -> Option<Result<Vec<String>, &'static str>> {
    if item.contains('[') {
        return None;
    }
    let (a, b) = item.split_once('-')?;
    let (a, b) = (addr::parse_ip(a.trim())?, addr::parse_ip(b.trim())?);
    let (lo, hi, v4) = match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            (u128::from(u32::from(a)), u128::from(u32::from(b)), true)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), false),
        _ => return Some(Err("the two ends are of different address families")),
    };
    if hi < lo {
        return Some(Err("the range ends before it starts"));
    }
    if hi - lo >= MAX_ITEMS as u128 {
        return Some(Err("the range holds more than 65536 addresses"));
    }
    Some(Ok((lo..=hi)
        .map(|n| {
            if v4 {
                // The range lies within u32 since both ends do.
                std::net::Ipv4Addr::from(n as u32).to_string()
            } else {
                addr::ip_to_string(IpAddr::V6(std::net::Ipv6Addr::from(n)))
            }
        })
        .collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::client::{AddrType, EpAddress};

    fn parse(b: &[u8]) -> ResolveRepr {
        ResolveRepr::parse(b, Direction::Request).unwrap()
    }

    #[test]
    fn lists_ranges_and_brackets() {
        assert_eq!(
            expand_list("10.0.0.2, node[1-2],10.0.0.[5,7]").unwrap(),
            ["10.0.0.2", "node1", "node2", "10.0.0.5", "10.0.0.7"]
        );
        assert_eq!(
            expand_list("10.0.0.254-10.0.1.1").unwrap(),
            ["10.0.0.254", "10.0.0.255", "10.0.1.0", "10.0.1.1"]
        );
        assert_eq!(
            expand_list("fd00::fffe-fd00::1:0").unwrap(),
            ["fd00::fffe", "fd00::ffff", "fd00::1:0"]
        );
        assert_eq!(expand_list("node-2").unwrap(), ["node-2"]);
        assert_eq!(expand_list(DEFAULT_MISS_V4).unwrap().len(), 65534);
        assert!(matches!(
            expand_list("10.0.0.9-10.0.0.1"),
            Err(RequestError::Range(..))
        ));
        assert!(matches!(
            expand_list("10.0.0.1-fd00::1"),
            Err(RequestError::Range(..))
        ));
        assert!(matches!(
            expand_list("10.0.0.0-10.2.0.0"),
            Err(RequestError::Range(..))
        ));
        assert!(matches!(expand_list("n[3-1]"), Err(RequestError::List(..))));
        assert!(matches!(expand_list(" , "), Err(RequestError::List(..))));
    }

    #[test]
    fn resolve_requests_are_ib_acmes() {
        // The bytes ib_acme -s 10.0.0.1 -d 10.0.0.2 writes (docs/test-vectors.md §1).
        let b = resolve_request(
            AddrFormat::Unspecified,
            Some("10.0.0.1"),
            "10.0.0.2",
            false,
            "destination",
        )
        .unwrap();
        assert_eq!(b.len(), 160);
        assert_eq!(&b[..8], &[1, 1, 0, 0, 0, 0, 0xA0, 0]);
        let r = parse(&b);
        assert_eq!(r.entries[0].flags, EpFlags::SOURCE);
        assert_eq!(r.entries[1].flags, EpFlags::DEST);

        let b = resolve_request(AddrFormat::Unspecified, None, "node2", true, "d").unwrap();
        let r = parse(&b);
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].addr_type, AddrType::NAME);
        assert_eq!(r.entries[0].flags, EpFlags::DEST | EpFlags::NODELAY);

        let b = resolve_request(AddrFormat::Lid, Some("1"), "2", false, "d").unwrap();
        let r = parse(&b);
        let EpAddress::Path(p) = r.entries[0].address() else {
            panic!("not a path: {r:?}");
        };
        assert_eq!((p.slid, p.dlid, p.reversible, p.numpath), (1, 2, true, 1));

        let b = resolve_request(AddrFormat::Gid, None, "fe80::2", true, "d").unwrap();
        assert_eq!(parse(&b).entries[0].flags, EpFlags::NODELAY);

        assert!(matches!(
            resolve_request(
                AddrFormat::Unspecified,
                Some("10.0.0.1"),
                "fd00::2",
                false,
                "d"
            ),
            Err(RequestError::FamilyMismatch { .. })
        ));
        assert!(matches!(
            resolve_request(AddrFormat::Ip, None, "node2", false, "d"),
            Err(RequestError::BadAddress { .. })
        ));
        assert!(matches!(
            resolve_request(AddrFormat::Lid, None, "x", false, "d"),
            Err(RequestError::BadAddress { .. })
        ));
        assert!(matches!(
            resolve_request(AddrFormat::Name, None, &"n".repeat(64), false, "d"),
            Err(RequestError::NameTooLong(_))
        ));
    }

    #[test]
    fn templates_per_kind() {
        let addrs = Addresses {
            format: AddrFormat::Unspecified,
            src: Some("10.0.0.1".into()),
            dst: Some("10.0.0.[2-3]".into()),
            miss: Some("10.9.0.1-10.9.0.4".into()),
        };
        let mix: Mix = "hit=90,miss=5,nodelay=3,perf=1,ep=1".parse().unwrap();
        let t = Templates::build(&addrs, &mix).unwrap();
        assert_eq!(
            Kind::ALL.map(|k| t.count(k)),
            [2, 4, 2, 1, 1],
            "hit, miss, nodelay, perf, ep"
        );
        assert_eq!(t.get(Kind::Hit, 3), t.get(Kind::Hit, 1));
        assert_eq!(
            t.get(Kind::Perf, 0),
            [1, 2, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&t.get(Kind::Ep, 0)[..8], [1, 3, 0, 1, 1, 0, 0, 16]);

        // Misses default to the benchmarking range; hits need -d.
        let only_miss = Addresses {
            miss: None,
            dst: None,
            ..addrs.clone()
        };
        let t = Templates::build(&only_miss, &Mix::only(Kind::Miss)).unwrap();
        assert_eq!(t.count(Kind::Miss), 65534);
        assert!(matches!(
            Templates::build(&only_miss, &Mix::only(Kind::Hit)),
            Err(RequestError::Missing(_))
        ));
    }
}
