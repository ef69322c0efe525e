//! `acm-rdmacm-probe`: one `rdma_getaddrinfo` call through the machine's librdmacm,
//! which asks the ibacm listening at `/run/ibacm.sock` for routes, and the routes it
//! got, one line each:
//!
//! ```text
//! acm-rdmacm-probe [--numeric] [--src IP] [--hint-dgid GID] --dst IP
//! acm-rdmacm-probe --ib-dst GID
//! route sgid=fe80::2:c903:a0:b001 dgid=fe80::2:c903:a0:b002 slid=1 dlid=2 pkey=0xffff
//! ```
//!
//! `--src` is the hints' source address, `--hint-dgid` a route hint (a path record
//! naming that destination GID), `--ib-dst` an `AF_IB` destination. `--numeric` sets
//! `RAI_NUMERICHOST`, with which librdmacm asks ibacm not to wait for a resolution
//! (`ACM_FLAGS_NODELAY`): only a cached route comes back. librdmacm only
//! asks ibacm after it has found a device, so the probe runs preloaded with the
//! emulated HCA; it exits 0 when the call succeeded, whether or not routes came back
//! (librdmacm treats ibacm as optional), and prints `routes 0` then.

use rdma_sys::{
    ibv_path_data, ibv_path_record, rdma_addrinfo, rdma_freeaddrinfo, rdma_getaddrinfo,
};
use std::ffi::CString;
use std::mem::size_of;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;

/// `RAI_NUMERICHOST` (rdma_cma.h): the node is an address, not a name.
const RAI_NUMERICHOST: i32 = 0x2;
/// `AF_IB` (infiniband/ib.h).
const AF_IB: u16 = 27;

/// `struct sockaddr_ib` (infiniband/ib.h).
#[repr(C)]
struct SockaddrIb {
    family: u16,
    pkey: u16,
    flowinfo: u32,
    addr: [u8; 16],
    sid: u64,
    sid_mask: u64,
    scope_id: u64,
}

/// What to ask.
#[derive(Debug, Default)]
struct Ask {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    ib_dst: Option<Ipv6Addr>,
    hint_dgid: Option<Ipv6Addr>,
    numeric: bool,
}

/// Why the probe did not run.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error(
        "usage: acm-rdmacm-probe [--numeric] [--src IP] [--hint-dgid GID] (--dst IP | --ib-dst GID)"
    )]
    Usage,
    #[error("{0}: not an address")]
    Address(String),
    #[error("rdma_getaddrinfo: {0}")]
    Call(std::io::Error),
}

fn parse(args: &[String]) -> Result<Ask, ProbeError> {
    let mut ask = Ask::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--numeric" {
            ask.numeric = true;
            continue;
        }
        let v = it.next().ok_or(ProbeError::Usage)?;
        let ip = || {
            v.parse::<IpAddr>()
                .map_err(|_| ProbeError::Address(v.clone()))
        };
        let gid = || {
            v.parse::<Ipv6Addr>()
                .map_err(|_| ProbeError::Address(v.clone()))
        };
        match flag.as_str() {
            "--src" => ask.src = Some(ip()?),
            "--dst" => ask.dst = Some(ip()?),
            "--ib-dst" => ask.ib_dst = Some(gid()?),
            "--hint-dgid" => ask.hint_dgid = Some(gid()?),
            _ => return Err(ProbeError::Usage),
        }
    }
    if ask.dst.is_none() == ask.ib_dst.is_none() {
        return Err(ProbeError::Usage);
    }
    Ok(ask)
}

/// A `sockaddr_in`/`sockaddr_in6` as its bytes, for the hints.
fn sockaddr(ip: IpAddr) -> Vec<u8> {
    match SocketAddr::new(ip, 0) {
        SocketAddr::V4(a) => {
            let mut b = vec![0u8; size_of::<libc::sockaddr_in>()];
            b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b[4..8].copy_from_slice(&a.ip().octets());
            b
        }
        SocketAddr::V6(a) => {
            let mut b = vec![0u8; size_of::<libc::sockaddr_in6>()];
            b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            b[8..24].copy_from_slice(&a.ip().octets());
            b
        }
    }
}

fn run(ask: &Ask) -> Result<Vec<String>, ProbeError> {
    // SAFETY: an all-zero rdma_addrinfo is valid (no flags, NULL pointers).
    let mut hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    let src = ask.src.map(sockaddr);
    if let Some(s) = &src {
        hints.ai_src_addr = s.as_ptr().cast_mut().cast();
        hints.ai_src_len = s.len() as u32;
    }
    let ib = ask.ib_dst.map(|g| SockaddrIb {
        family: AF_IB,
        pkey: 0xFFFF,
        flowinfo: 0,
        addr: g.octets(),
        sid: 0,
        sid_mask: 0,
        scope_id: 0,
    });
    if let Some(sib) = &ib {
        hints.ai_family = i32::from(AF_IB);
        hints.ai_dst_addr = std::ptr::from_ref(sib).cast_mut().cast();
        hints.ai_dst_len = size_of::<SockaddrIb>() as u32;
    }
    // SAFETY: an all-zero path record is valid plain data.
    let mut hint_path: ibv_path_record = unsafe { std::mem::zeroed() };
    if let Some(g) = ask.hint_dgid {
        hint_path.dgid.raw = g.octets();
        hint_path.pkey = 0xFFFFu16.to_be();
        hint_path.reversible_numpath = 0x81;
        hints.ai_route = std::ptr::from_mut(&mut hint_path).cast();
        hints.ai_route_len = size_of::<ibv_path_record>();
    }
    if ask.numeric {
        hints.ai_flags = RAI_NUMERICHOST;
    }
    let node = match ask.dst {
        Some(ip) => Some(CString::new(ip.to_string()).map_err(|_| ProbeError::Usage)?),
        None => None,
    };
    let mut res: *mut rdma_addrinfo = std::ptr::null_mut();
    // SAFETY: the node is NULL or a NUL-terminated string; the hints and everything
    // they point to (addresses, path record) live until the call returns; `res` is
    // writable.
    let r = unsafe {
        rdma_getaddrinfo(
            node.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            std::ptr::null(),
            &hints,
            &mut res,
        )
    };
    if r != 0 {
        return Err(ProbeError::Call(std::io::Error::last_os_error()));
    }
    let mut lines = Vec::new();
    // SAFETY: a successful call returned a list librdmacm allocated; its route is
    // `ai_route_len` bytes of path data.
    unsafe {
        let rai = &*res;
        let n = rai.ai_route_len / size_of::<ibv_path_data>();
        let paths = rai.ai_route.cast::<ibv_path_data>();
        for i in 0..n {
            let p = &(*paths.add(i)).path;
            lines.push(format!(
                "route sgid={} dgid={} slid={} dlid={} pkey={:#06x}",
                Ipv6Addr::from(p.sgid.raw),
                Ipv6Addr::from(p.dgid.raw),
                u16::from_be(p.slid),
                u16::from_be(p.dlid),
                u16::from_be(p.pkey)
            ));
        }
        lines.push(format!("routes {n}"));
        rdma_freeaddrinfo(res);
    }
    Ok(lines)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|a| run(&a)) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("acm-rdmacm-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
