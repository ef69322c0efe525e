//! The hub's datagram format: one message per datagram, an 8-byte header and a body
//! of fixed little-endian fields (see the table in the [module docs](super)).
//!
//! [`HostMsg`] is what a host sends, [`HubMsg`] what the hub sends; both encode with
//! `encode` and decode with `decode`, which checks the header, the body length and
//! every field, and rejects trailing bytes.

use crate::spec::HostId;
use acm_engine::{DeviceDesc, DeviceId, PortAttrs, PortId, PortState};
use acm_engine::{EndpointId, LocalIp};
use acm_engine::{FabricEvent, FabricOp};
use acm_proto::{Gid, Mtu, Rate};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod change;
mod fabric;
pub use change::{Control, PortChange, PortName, TopologyEvent};

/// The protocol version every header carries.
pub const VERSION: u8 = 2;

/// Length of the header: type, version, two reserved bytes, body length.
pub const HEADER_LEN: usize = 8;

/// The largest datagram either side sends or accepts (header included).
pub const MAX_DATAGRAM: usize = 64 * 1024;

/// Message type codes (byte 0 of every datagram), every direction's in one table so
/// that no two share a code.
pub mod msg_type {
    /// Host → hub: attach as a host of the spec.
    pub const ATTACH: u8 = 0x01;
    /// Host → hub: detach.
    pub const DETACH: u8 = 0x02;
    /// Host → hub: `FabricOp::OpenQp`.
    pub const OPEN_QP: u8 = 0x10;
    /// Host → hub: `FabricOp::CloseQp`.
    pub const CLOSE_QP: u8 = 0x11;
    /// Host → hub: `FabricOp::UdSend`.
    pub const UD_SEND: u8 = 0x12;
    /// Host → hub: `FabricOp::McastAttach`.
    pub const MCAST_ATTACH: u8 = 0x13;
    /// Host → hub: `FabricOp::McastDetach`.
    pub const MCAST_DETACH: u8 = 0x14;
    /// Host → hub: `FabricOp::SaSend`.
    pub const SA_SEND: u8 = 0x15;
    /// Host → hub: reserve a QPN for an endpoint before its port is known.
    pub const CREATE_QP: u8 = 0x16;
    /// Host → hub: `FabricOp::NeighQuery`.
    pub const NEIGH_QUERY: u8 = 0x17;
    /// Host → hub: `FabricOp::SourceQuery`.
    pub const SOURCE_QUERY: u8 = 0x18;
    /// Control (any socket → hub, answered by DONE or ERROR): take a port down.
    pub const PORT_DOWN: u8 = 0x20;
    /// Control: bring a port back up.
    pub const PORT_UP: u8 = 0x21;
    /// Control: give a port another LID (and LMC).
    pub const SET_LID: u8 = 0x22;
    /// Control: replace a port's pkey table.
    pub const SET_PKEYS: u8 = 0x23;
    /// Control: replace a port's GID 0 (subnet prefix and interface id).
    pub const SET_GID: u8 = 0x24;
    /// Control: move the SM to another LID (a failover: the new SM knows no group
    /// members).
    pub const SM_MOVE: u8 = 0x25;
    /// Control: ask a port's clients to register again.
    pub const CLIENT_REREGISTER: u8 = 0x26;
    /// Control: remove a device from its host (hot unplug), or kill it (a fatal error).
    pub const DEVICE_REMOVE: u8 = 0x27;
    /// Control: bring a removed or dead device back (hot plug, driver reload, reset
    /// done).
    pub const DEVICE_ADD: u8 = 0x28;
    /// Control: break every QP of a host on a port (a fatal QP error).
    pub const QP_ERROR: u8 = 0x29;
    /// Hub → host: the attachment is made; the host's setup.
    pub const ATTACHED: u8 = 0x81;
    /// Hub → host or control sender: a request was refused.
    pub const ERROR: u8 = 0x82;
    /// Hub → host: the attachment is over (hub shutdown, or replaced).
    pub const BYE: u8 = 0x83;
    /// Hub → the control's sender: the change is made.
    pub const DONE: u8 = 0x84;
    /// Hub → host: `Input::QpOpened`.
    pub const QP_OPENED: u8 = 0x90;
    /// Hub → host: `Input::UdReceive`.
    pub const UD_RECEIVE: u8 = 0x91;
    /// Hub → host: `Input::UdSendDone`.
    pub const UD_SEND_DONE: u8 = 0x92;
    /// Hub → host: `Input::SaResponse`.
    pub const SA_RESPONSE: u8 = 0x93;
    /// Hub → host: `Input::SaSendFailed`.
    pub const SA_SEND_FAILED: u8 = 0x94;
    /// Hub → host: a port changed ([`super::TopologyEvent::Port`]).
    pub const PORT_CHANGED: u8 = 0x95;
    /// Hub → host: a device was removed or died.
    pub const DEVICE_GONE: u8 = 0x96;
    /// Hub → host: a device is back.
    pub const DEVICE_BACK: u8 = 0x97;
    /// Hub → host: one of its QPs broke.
    pub const QP_FATAL: u8 = 0x98;
    /// Hub → host: `Input::NeighAnswer`.
    pub const NEIGH_ANSWER: u8 = 0x99;
    /// Hub → host: `Input::SourceAnswer`.
    pub const SOURCE_ANSWER: u8 = 0x9A;
}

/// Codes of [`HubMsg::Error`].
pub mod error_code {
    /// The spec has no host of that name.
    pub const UNKNOWN_HOST: u16 = 1;
    /// A message other than ATTACH from a socket that is not attached.
    pub const NOT_ATTACHED: u16 = 2;
    /// The datagram did not decode.
    pub const MALFORMED: u16 = 3;
    /// The host's setup does not fit in one datagram.
    pub const TOO_LARGE: u16 = 4;
    /// A control message the fabric cannot carry out (an unknown host, HCA or port).
    pub const BAD_CHANGE: u16 = 5;
}

/// Why a datagram did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the header or a field needs.
    #[error("truncated: {need} bytes needed at offset {at}, {have} available")]
    Truncated {
        /// Where the read started.
        at: usize,
        /// Bytes the field needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// A version this side does not speak.
    #[error("protocol version {0} (this side speaks {VERSION})")]
    Version(u8),
    /// A type code this direction does not carry.
    #[error("unknown message type {0:#04x}")]
    UnknownType(u8),
    /// The header's body length is not the datagram's.
    #[error("body length {declared} in the header, {actual} in the datagram")]
    Length {
        /// What the header says.
        declared: u32,
        /// What arrived.
        actual: usize,
    },
    /// Bytes left over after the last field.
    #[error("{0} trailing bytes")]
    Trailing(usize),
    /// A field with a value it cannot have.
    #[error("bad {0}")]
    BadField(&'static str),
}

/// Little-endian field writer.
struct W(Vec<u8>);

impl W {
    fn new(ty: u8) -> Self {
        let mut v = Vec::with_capacity(320);
        v.extend_from_slice(&[ty, VERSION, 0, 0, 0, 0, 0, 0]);
        Self(v)
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn gid(&mut self, g: &Gid) {
        self.0.extend_from_slice(&g.0);
    }
    /// A string: u16 length, then UTF-8 (cut at 65535 bytes).
    fn str(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(usize::from(u16::MAX))];
        self.u16(b.len() as u16);
        self.bytes(b);
    }
    fn port(&mut self, p: PortId) {
        self.u32(p.device.0);
        self.u8(p.port);
    }
    fn finish(mut self) -> Vec<u8> {
        let body = (self.0.len() - HEADER_LEN) as u32;
        self.0[4..8].copy_from_slice(&body.to_le_bytes());
        self.0
    }
}

/// Little-endian field reader over a body.
struct R<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let have = self.b.len() - self.at;
        if have < n {
            return Err(WireError::Truncated {
                at: HEADER_LEN + self.at,
                need: n,
                have,
            });
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.arr()?))
    }
    fn gid(&mut self) -> Result<Gid, WireError> {
        Ok(Gid(self.arr()?))
    }
    fn bool(&mut self, what: &'static str) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::BadField(what)),
        }
    }
    fn str(&mut self, what: &'static str) -> Result<String, WireError> {
        let n = usize::from(self.u16()?);
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::BadField(what))
    }
    fn port(&mut self) -> Result<PortId, WireError> {
        Ok(PortId {
            device: DeviceId(self.u32()?),
            port: self.u8()?,
        })
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.at..];
        self.at = self.b.len();
        s
    }
    fn end(&self) -> Result<(), WireError> {
        match self.b.len() - self.at {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }
}

/// Splits a datagram into its type and body, checking the version and length.
fn open(datagram: &[u8]) -> Result<(u8, R<'_>), WireError> {
    if datagram.len() < HEADER_LEN {
        return Err(WireError::Truncated {
            at: 0,
            need: HEADER_LEN,
            have: datagram.len(),
        });
    }
    if datagram[1] != VERSION {
        return Err(WireError::Version(datagram[1]));
    }
    let declared = u32::from_le_bytes([datagram[4], datagram[5], datagram[6], datagram[7]]);
    let body = &datagram[HEADER_LEN..];
    if declared as usize != body.len() {
        return Err(WireError::Length {
            declared,
            actual: body.len(),
        });
    }
    Ok((datagram[0], R { b: body, at: 0 }))
}

/// A message from a host to the hub.
// Fabric operations are nearly all of the traffic; a box would be one allocation per
// datagram to shrink the rare attach and control messages.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMsg {
    /// Attach the sending socket as the spec's host `name`.
    Attach {
        /// The host name, as in the spec.
        name: String,
    },
    /// Detach: forget the host's QPs, groups and SA sends.
    Detach,
    /// Reserve a QP number for an endpoint whose port is not known yet (a verbs QP
    /// is numbered at `ibv_create_qp` and given its port at the INIT transition); a
    /// later OPEN_QP of the endpoint keeps that number.
    CreateQp {
        /// The endpoint.
        ep: EndpointId,
    },
    /// One of the engine's fabric operations, as the engine gave it.
    Op(FabricOp),
    /// A change of the fabric (the control codes of [`msg_type`]), from any socket, attached or not.
    Control(Control),
}

impl HostMsg {
    /// The datagram.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        use msg_type as t;
        match self {
            Self::Attach { name } => {
                let mut w = W::new(t::ATTACH);
                w.str(name);
                w.finish()
            }
            Self::Detach => W::new(t::DETACH).finish(),
            Self::Control(c) => c.encode(),
            Self::CreateQp { ep } => {
                let mut w = W::new(t::CREATE_QP);
                w.u32(ep.0);
                w.finish()
            }
            Self::Op(op) => fabric::put_op(op),
        }
    }

    /// The datagram of [`HostMsg::Op`], from a borrowed operation (a host sends the
    /// engine's operations as it lends them, without taking a copy).
    #[must_use]
    pub fn encode_op(op: &FabricOp) -> Vec<u8> {
        fabric::put_op(op)
    }

    /// Reads a datagram a host sent.
    ///
    /// # Errors
    /// A [`WireError`] for a bad header, an unknown type, a bad field or a wrong length.
    pub fn decode(datagram: &[u8]) -> Result<Self, WireError> {
        use msg_type as t;
        let (ty, mut r) = open(datagram)?;
        let msg = match ty {
            t::ATTACH => Self::Attach {
                name: r.str("host name")?,
            },
            t::DETACH => Self::Detach,
            t::CREATE_QP => Self::CreateQp {
                ep: EndpointId(r.u32()?),
            },
            other => match fabric::get_op(other, &mut r)? {
                Some(op) => Self::Op(op),
                None => match Control::decode(other, &mut r)? {
                    Some(c) => Self::Control(c),
                    None => return Err(WireError::UnknownType(other)),
                },
            },
        };
        r.end()?;
        Ok(msg)
    }
}

/// What a host learns when it attaches: everything its I/O layer would discover on a real
/// machine (verbs devices, netlink addresses) and the SM's LID and SL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSetup {
    /// Which host of the fabric spec it is (a u32 on the wire).
    pub host: HostId,
    /// Its name.
    pub name: String,
    /// The SM's LID.
    pub sm_lid: u16,
    /// The SL to reach the SM.
    pub sm_sl: u8,
    /// Its HCAs, each to be fed as `Input::DeviceAdded` (`DeviceId(i)` is HCA `i`).
    pub devices: Vec<DeviceDesc>,
    /// Its IP addresses, each to be fed as `Input::LocalIpAdded`.
    pub ips: Vec<LocalIp>,
    /// The source its routing picks for a destination outside every IPoIB subnet (the
    /// spec's `default_route`), for source lookups.
    pub default_route: Option<IpAddr>,
}

/// A message from the hub to a host.
// Fabric events are nearly all of the traffic; a box would be one allocation per
// datagram to shrink the rare setup and topology messages.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubMsg {
    /// The attachment is made.
    Attached(HostSetup),
    /// A request was refused (see [`error_code`]).
    Error {
        /// Why, as a code.
        code: u16,
        /// Why, for people.
        message: String,
    },
    /// The attachment is over.
    Bye {
        /// Why.
        reason: String,
    },
    /// One of the engine's fabric events, for the host's engine.
    Event(FabricEvent),
    /// A control message was carried out.
    Done,
    /// A port or device of this host changed.
    Topology(TopologyEvent),
}

fn put_port_attrs(w: &mut W, a: &PortAttrs) {
    w.u8(u8::from(a.state == PortState::Active));
    w.u8(u8::from(a.link_layer_ib));
    w.u16(a.lid);
    w.u8(a.lmc);
    w.u16(a.sm_lid);
    w.u8(a.sm_sl);
    w.u8(a.rate.0);
    w.u8(a.mtu.0);
    w.u8(a.subnet_timeout);
    let gids = &a.gids[..a.gids.len().min(255)];
    w.u8(gids.len() as u8);
    for g in gids {
        w.gid(g);
    }
    let pkeys = &a.pkeys[..a.pkeys.len().min(usize::from(u16::MAX))];
    w.u16(pkeys.len() as u16);
    for &k in pkeys {
        w.u16(k);
    }
}

fn get_port_attrs(r: &mut R<'_>) -> Result<PortAttrs, WireError> {
    let state = if r.bool("port state")? {
        PortState::Active
    } else {
        PortState::Down
    };
    let link_layer_ib = r.bool("link layer")?;
    let lid = r.u16()?;
    let lmc = r.u8()?;
    let sm_lid = r.u16()?;
    let sm_sl = r.u8()?;
    let rate = Rate(r.u8()?);
    let mtu = Mtu(r.u8()?);
    let subnet_timeout = r.u8()?;
    let n = r.u8()?;
    let gids = (0..n).map(|_| r.gid()).collect::<Result<_, _>>()?;
    let n = r.u16()?;
    let pkeys = (0..n).map(|_| r.u16()).collect::<Result<_, _>>()?;
    Ok(PortAttrs {
        state,
        link_layer_ib,
        lid,
        lmc,
        sm_lid,
        sm_sl,
        gids,
        pkeys,
        rate,
        mtu,
        subnet_timeout,
    })
}

/// Family (4 or 6; 0 for none) and 16 address bytes, IPv4 in the first 4.
fn put_addr(w: &mut W, addr: Option<IpAddr>) {
    let mut a = [0u8; 16];
    match addr {
        None => w.u8(0),
        Some(IpAddr::V4(v4)) => {
            w.u8(4);
            a[..4].copy_from_slice(&v4.octets());
        }
        Some(IpAddr::V6(v6)) => {
            w.u8(6);
            a = v6.octets();
        }
    }
    w.bytes(&a);
}

fn get_addr(r: &mut R<'_>) -> Result<Option<IpAddr>, WireError> {
    let family = r.u8()?;
    let a: [u8; 16] = r.arr()?;
    Ok(match family {
        0 => None,
        4 => Some(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(a))),
        _ => return Err(WireError::BadField("address family")),
    })
}

fn put_ip(w: &mut W, ip: &LocalIp) {
    put_addr(w, Some(ip.addr));
    w.u8(ip.prefix_len.unwrap_or(0xFF));
    w.gid(&ip.gid);
    w.u16(ip.pkey);
}

fn get_ip(r: &mut R<'_>) -> Result<LocalIp, WireError> {
    let addr = get_addr(r)?.ok_or(WireError::BadField("address family"))?;
    let prefix = r.u8()?;
    Ok(LocalIp {
        addr,
        prefix_len: (prefix != 0xFF).then_some(prefix),
        gid: r.gid()?,
        pkey: r.u16()?,
    })
}

impl HubMsg {
    /// The datagram.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        use msg_type as t;
        match self {
            Self::Attached(s) => {
                let mut w = W::new(t::ATTACHED);
                // No spec has 2^32 hosts (it would not fit in memory); saturate as the
                // counts below do rather than wrap to another host.
                w.u32(u32::try_from(s.host.index()).unwrap_or(u32::MAX));
                w.u16(s.sm_lid);
                w.u8(s.sm_sl);
                w.str(&s.name);
                w.u16(s.devices.len().min(usize::from(u16::MAX)) as u16);
                for d in s.devices.iter().take(usize::from(u16::MAX)) {
                    change::put_device(&mut w, d);
                }
                w.u16(s.ips.len().min(usize::from(u16::MAX)) as u16);
                for ip in s.ips.iter().take(usize::from(u16::MAX)) {
                    put_ip(&mut w, ip);
                }
                put_addr(&mut w, s.default_route);
                w.finish()
            }
            Self::Error { code, message } => {
                let mut w = W::new(t::ERROR);
                w.u16(*code);
                w.str(message);
                w.finish()
            }
            Self::Bye { reason } => {
                let mut w = W::new(t::BYE);
                w.str(reason);
                w.finish()
            }
            Self::Event(ev) => fabric::put_event(ev),
            Self::Done => W::new(msg_type::DONE).finish(),
            Self::Topology(ev) => ev.encode(),
        }
    }

    /// Reads a datagram the hub sent.
    ///
    /// # Errors
    /// A [`WireError`] for a bad header, an unknown type, a bad field or a wrong length.
    pub fn decode(datagram: &[u8]) -> Result<Self, WireError> {
        use msg_type as t;
        let (ty, mut r) = open(datagram)?;
        let msg = match ty {
            t::ATTACHED => {
                let host = HostId(r.u32()? as usize);
                let sm_lid = r.u16()?;
                let sm_sl = r.u8()?;
                let name = r.str("host name")?;
                let n = r.u16()?;
                let mut devices = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    devices.push(change::get_device(&mut r)?);
                }
                let n = r.u16()?;
                let ips = (0..n).map(|_| get_ip(&mut r)).collect::<Result<_, _>>()?;
                let default_route = get_addr(&mut r)?;
                Self::Attached(HostSetup {
                    host,
                    name,
                    sm_lid,
                    sm_sl,
                    devices,
                    ips,
                    default_route,
                })
            }
            t::ERROR => Self::Error {
                code: r.u16()?,
                message: r.str("message")?,
            },
            t::BYE => Self::Bye {
                reason: r.str("reason")?,
            },
            msg_type::DONE => Self::Done,
            other => match fabric::get_event(other, &mut r)? {
                Some(ev) => Self::Event(ev),
                None => match TopologyEvent::decode(other, &mut r)? {
                    Some(ev) => Self::Topology(ev),
                    None => return Err(WireError::UnknownType(other)),
                },
            },
        };
        r.end()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::{AddressVector, GlobalRoute, LookupId, Mad, MadBytes, McastGroup, NeighId};
    use acm_engine::{NeighQuery, NeighResult, OpenQp, RecvInfo, SaDest, SaSend, SendToken};
    use acm_engine::{SourceQuery, UdSend};
    use acm_proto::acm_mad::{ACM_QKEY, MULTICAST_QPN};
    use acm_proto::grh::GRH_LEN;
    use acm_proto::mad::{MAD_LEN, UmadStatus};

    fn mad(seed: u8) -> Mad {
        let mut m = [0u8; MAD_LEN];
        for (i, b) in m.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(seed);
        }
        Mad(m)
    }

    fn port() -> PortId {
        PortId {
            device: DeviceId(1),
            port: 2,
        }
    }

    fn host_msgs() -> Vec<HostMsg> {
        let gid = Gid::from_parts(0xff12_401b_ffff_0000, 0x0102_0304);
        vec![
            HostMsg::Attach {
                name: "node1".into(),
            },
            HostMsg::Detach,
            HostMsg::Op(FabricOp::OpenQp(OpenQp {
                ep: EndpointId(3),
                port: port(),
                pkey: 0xFFFF,
                pkey_index: 1,
                recv_depth: 1024,
                send_depth: 2,
            })),
            HostMsg::Op(FabricOp::CloseQp(EndpointId(3))),
            HostMsg::Op(FabricOp::NeighQuery(NeighQuery {
                id: NeighId(4),
                port: port(),
                gid: Gid::from_parts(0xfe80 << 48, 0x77),
                pkey: 0x8001,
                dest: "10.0.0.9".parse().unwrap(),
            })),
            HostMsg::Op(FabricOp::NeighQuery(NeighQuery {
                id: NeighId(5),
                port: port(),
                gid: Gid::ZERO,
                pkey: 0xffff,
                dest: "fd00::9".parse().unwrap(),
            })),
            HostMsg::CreateQp { ep: EndpointId(4) },
            HostMsg::Op(FabricOp::UdSend(UdSend {
                ep: EndpointId(3),
                token: SendToken(0x1122_3344_5566_7788),
                av: AddressVector {
                    dlid: 0xC001,
                    sl: 3,
                    src_path_bits: 1,
                    static_rate: 7,
                    grh: GlobalRoute {
                        dgid: gid,
                        flow_label: 0xABCDE,
                        hop_limit: 64,
                        tclass: 5,
                        sgid_index: 2,
                    },
                    remote_qpn: MULTICAST_QPN,
                    remote_qkey: ACM_QKEY,
                },
                mad: mad(3),
            })),
            HostMsg::Op(FabricOp::McastAttach(McastGroup {
                ep: EndpointId(3),
                mgid: gid,
                mlid: 0xC002,
            })),
            HostMsg::Op(FabricOp::McastDetach(McastGroup {
                ep: EndpointId(4),
                mgid: gid,
                mlid: 0xC003,
            })),
            HostMsg::Op(FabricOp::SaSend(SaSend {
                port: port(),
                tid: 0x0102_0304_0506_0708,
                dest: SaDest {
                    dlid: 1,
                    sl: 2,
                    pkey_index: 3,
                    remote_qpn: 1,
                    remote_qkey: ACM_QKEY,
                },
                timeout_ms: 2000,
                retries: 2,
                mad: mad(5),
            })),
            HostMsg::Op(FabricOp::SourceQuery(SourceQuery {
                id: LookupId(6),
                dest: "10.0.0.9".parse().unwrap(),
            })),
        ]
    }

    fn hub_msgs() -> Vec<HubMsg> {
        let attrs = PortAttrs {
            state: PortState::Active,
            link_layer_ib: true,
            lid: 7,
            lmc: 1,
            sm_lid: 1,
            sm_sl: 2,
            gids: vec![Gid::from_parts(0xfe80 << 48, 0x77)],
            pkeys: vec![0xFFFF, 0x8001],
            rate: Rate::RATE_40,
            mtu: Mtu::MTU_4096,
            subnet_timeout: 18,
        };
        vec![
            HubMsg::Attached(HostSetup {
                host: HostId(2),
                name: "node3".into(),
                sm_lid: 1,
                sm_sl: 2,
                devices: vec![DeviceDesc {
                    id: DeviceId(0),
                    name: "mlx5_0".into(),
                    guid: 0x0002_c903_00a0_b002,
                    ports: vec![
                        attrs.clone(),
                        PortAttrs {
                            state: PortState::Down,
                            link_layer_ib: false,
                            gids: Vec::new(),
                            ..attrs
                        },
                    ],
                }],
                ips: vec![
                    LocalIp {
                        addr: "10.0.0.3".parse().unwrap(),
                        prefix_len: Some(24),
                        gid: Gid::from_parts(0xfe80 << 48, 0x77),
                        pkey: 0xFFFF,
                    },
                    LocalIp {
                        addr: "fd00::3".parse().unwrap(),
                        prefix_len: None,
                        gid: Gid::ZERO,
                        pkey: 0x8001,
                    },
                ],
                default_route: Some("192.168.122.17".parse().unwrap()),
            }),
            HubMsg::Error {
                code: error_code::UNKNOWN_HOST,
                message: "no host \"x\"".into(),
            },
            HubMsg::Bye {
                reason: "shutdown".into(),
            },
            HubMsg::Event(FabricEvent::NeighAnswer {
                id: NeighId(9),
                result: NeighResult::Found {
                    qpn: 0x48,
                    gid: Gid::from_parts(0xfe80 << 48, 0x77),
                },
            }),
            HubMsg::Event(FabricEvent::NeighAnswer {
                id: NeighId(10),
                result: NeighResult::Incomplete,
            }),
            HubMsg::Event(FabricEvent::NeighAnswer {
                id: NeighId(11),
                result: NeighResult::Unreachable,
            }),
            HubMsg::Event(FabricEvent::QpOpened {
                ep: EndpointId(1),
                result: Ok(0x48),
            }),
            HubMsg::Event(FabricEvent::QpOpened {
                ep: EndpointId(2),
                result: Err(()),
            }),
            HubMsg::Event(FabricEvent::UdReceive {
                ep: EndpointId(1),
                wc: RecvInfo {
                    slid: 2,
                    src_qp: 0x49,
                    dlid_path_bits: 1,
                    pkey_index: 3,
                },
                grh: Some([9; GRH_LEN]),
                mad: MadBytes::new(&mad(7).0),
            }),
            HubMsg::Event(FabricEvent::UdReceive {
                ep: EndpointId(1),
                wc: RecvInfo::default(),
                grh: None,
                mad: MadBytes::new(&mad(8).0[..100]),
            }),
            HubMsg::Event(FabricEvent::UdSendDone {
                ep: EndpointId(1),
                token: SendToken(99),
                ok: true,
            }),
            HubMsg::Event(FabricEvent::SaResponse {
                port: port(),
                mad: MadBytes::new(&mad(11).0),
            }),
            HubMsg::Event(FabricEvent::SaResponse {
                port: port(),
                mad: MadBytes::from_vec([mad(12).0, mad(13).0].concat()),
            }),
            HubMsg::Event(FabricEvent::SaSendFailed {
                port: port(),
                tid: 0x0100_0001_0000_0005,
                status: UmadStatus::TIMED_OUT,
            }),
            HubMsg::Event(FabricEvent::SourceAnswer {
                id: LookupId(12),
                result: Ok("fd00::3".parse().unwrap()),
            }),
            HubMsg::Event(FabricEvent::SourceAnswer {
                id: LookupId(13),
                result: Err(101),
            }),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in host_msgs() {
            let d = m.encode();
            assert_eq!(d[1], VERSION);
            assert_eq!(HostMsg::decode(&d), Ok(m.clone()), "{m:?}");
            assert_eq!(
                HubMsg::decode(&d),
                Err(WireError::UnknownType(d[0])),
                "directions do not mix"
            );
        }
        for m in hub_msgs() {
            let d = m.encode();
            assert_eq!(HubMsg::decode(&d), Ok(m.clone()), "{m:?}");
        }
    }

    #[test]
    fn topology_changes_round_trip() {
        let p = || PortName {
            host: "node2".into(),
            hca: 1,
            port: 2,
        };
        let controls = vec![
            Control::PortDown(p()),
            Control::PortUp(p()),
            Control::SetLid {
                port: p(),
                lid: 0x77,
                lmc: 2,
            },
            Control::SetPkeys {
                port: p(),
                pkeys: vec![0xFFFF, 0x8001],
            },
            Control::SetGid {
                port: p(),
                gid: Gid::from_parts(0xfe80 << 48, 9),
            },
            Control::SmMove { lid: 3 },
            Control::ClientReregister(p()),
            Control::DeviceRemove {
                host: "node1".into(),
                hca: 0,
                fatal: true,
            },
            Control::DeviceAdd {
                host: "node1".into(),
                hca: 0,
            },
            Control::QpError(p()),
        ];
        for c in controls {
            let m = HostMsg::Control(c);
            assert_eq!(HostMsg::decode(&m.encode()), Ok(m.clone()), "{m:?}");
        }
        let Some(HubMsg::Attached(setup)) = hub_msgs().into_iter().next() else {
            unreachable!("the first message is ATTACHED")
        };
        let dev = setup.devices[0].clone();
        let notices = vec![
            HubMsg::Done,
            HubMsg::Topology(TopologyEvent::Port {
                port: port(),
                change: PortChange::GidChange,
                attrs: dev.ports[0].clone(),
            }),
            HubMsg::Topology(TopologyEvent::DeviceGone {
                device: DeviceId(1),
                fatal: false,
            }),
            HubMsg::Topology(TopologyEvent::DeviceBack(dev)),
            HubMsg::Topology(TopologyEvent::QpFatal { ep: EndpointId(7) }),
        ];
        for m in notices {
            assert_eq!(HubMsg::decode(&m.encode()), Ok(m.clone()), "{m:?}");
        }
        let mut bad = HubMsg::Topology(TopologyEvent::DeviceGone {
            device: DeviceId(0),
            fatal: true,
        })
        .encode();
        bad[12] = 7;
        assert_eq!(HubMsg::decode(&bad), Err(WireError::BadField("fatal")));
    }

    #[test]
    fn fixed_layouts() {
        let sizes: Vec<usize> = host_msgs().iter().map(|m| m.encode().len()).collect();
        // ATTACH "node1", DETACH, OPEN_QP, CLOSE_QP, NEIGH_QUERY x2 (id, port, GID,
        // pkey, a 17-byte address), CREATE_QP, UD_SEND, MCAST x2, SA_SEND, SOURCE_QUERY
        // (id, a 17-byte address).
        assert_eq!(sizes, vec![15, 8, 29, 12, 56, 56, 12, 312, 30, 30, 298, 33]);
        let answer = HubMsg::Event(FabricEvent::NeighAnswer {
            id: NeighId(1),
            result: NeighResult::Incomplete,
        });
        // id u64, result u8, qpn u32, GID.
        assert_eq!(answer.encode().len(), HEADER_LEN + 29);
        let source = HubMsg::Event(FabricEvent::SourceAnswer {
            id: LookupId(1),
            result: Err(101),
        });
        // id u64, a 17-byte address, errno u8.
        assert_eq!(source.encode().len(), HEADER_LEN + 26);
        let d = HubMsg::Event(FabricEvent::UdReceive {
            ep: EndpointId(0x0403_0201),
            wc: RecvInfo::default(),
            grh: Some([0; GRH_LEN]),
            mad: MadBytes::new(&[0; MAD_LEN]),
        })
        .encode();
        // ep, work completion (9 bytes), GRH flag and GRH, MAD.
        assert_eq!(d.len(), HEADER_LEN + 310);
        assert_eq!(&d[..12], &[0x91, VERSION, 0, 0, 0x36, 1, 0, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn damage_is_reported() {
        let good = HostMsg::Op(FabricOp::CloseQp(EndpointId(1))).encode();
        assert!(matches!(
            HostMsg::decode(&good[..5]),
            Err(WireError::Truncated { .. })
        ));
        let mut v = good.clone();
        v[1] = 9;
        assert_eq!(HostMsg::decode(&v), Err(WireError::Version(9)));
        let mut v = good.clone();
        v.push(0);
        assert!(matches!(HostMsg::decode(&v), Err(WireError::Length { .. })));
        v[4] += 1;
        assert_eq!(HostMsg::decode(&v), Err(WireError::Trailing(1)));
        let mut v = good;
        v[0] = 0x7F;
        assert_eq!(HostMsg::decode(&v), Err(WireError::UnknownType(0x7F)));
        let mut q = HubMsg::Event(FabricEvent::QpOpened {
            ep: EndpointId(1),
            result: Err(()),
        })
        .encode();
        q[12] = 2;
        assert_eq!(HubMsg::decode(&q), Err(WireError::BadField("QP_OPENED ok")));
        // Every cut of a long message, with its header patched to match, is an error.
        let whole = hub_msgs()[0].encode();
        for n in HEADER_LEN..whole.len() {
            let mut cut = whole[..n].to_vec();
            cut[4..8].copy_from_slice(&((n - HEADER_LEN) as u32).to_le_bytes());
            assert!(
                matches!(HubMsg::decode(&cut), Err(WireError::Truncated { .. })),
                "cut at {n}"
            );
        }
    }
}
