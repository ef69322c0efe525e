//! The wire form of topology changes: the control messages a test (or an operator)
//! sends the hub to change the fabric while it runs, and the notices the hub sends the
//! hosts whose ports or devices changed.
//!
//! A notice carries what a host's HCA would report: the async event and the port's
//! attributes after the change, so that an emulated HCA answers the queries that
//! follow the event with the new values.

use super::{R, W, WireError, get_port_attrs, put_port_attrs};
use acm_engine::{DeviceDesc, DeviceId, EndpointId, PortAttrs, PortId};
use acm_proto::Gid;

/// One port of the fabric, by host name, HCA index in the host and port number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortName {
    /// The host's name in the spec.
    pub host: String,
    /// The HCA's index among the host's (its engine `DeviceId`).
    pub hca: u32,
    /// The port number, from 1.
    pub port: u8,
}

/// A change of the fabric, asked of the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The port goes down (the SM drops it from every group).
    PortDown(PortName),
    /// The port comes back up.
    PortUp(PortName),
    /// The port's base LID and LMC change.
    SetLid {
        /// The port.
        port: PortName,
        /// The new base LID.
        lid: u16,
        /// The new LMC.
        lmc: u8,
    },
    /// The port's pkey table is replaced.
    SetPkeys {
        /// The port.
        port: PortName,
        /// The new table, in order, membership bit included.
        pkeys: Vec<u16>,
    },
    /// The port's GID 0 is replaced.
    SetGid {
        /// The port.
        port: PortName,
        /// The new GID.
        gid: Gid,
    },
    /// The SM moves to the port with this LID and forgets every group member; every
    /// active port sees SM_CHANGE then CLIENT_REREGISTER.
    SmMove {
        /// The new SM's LID.
        lid: u16,
    },
    /// CLIENT_REREGISTER on one port.
    ClientReregister(PortName),
    /// The device leaves its host: its ports are down, its QPs and SA sends are
    /// forgotten and its contexts get DEVICE_FATAL. Removed, it is no longer listed;
    /// dead (`fatal`), it stays listed but unusable, as an HCA after a fatal error.
    DeviceRemove {
        /// The host's name.
        host: String,
        /// The HCA's index.
        hca: u32,
        /// Dead but still listed, rather than removed.
        fatal: bool,
    },
    /// The device is back, its ports as they were before it left.
    DeviceAdd {
        /// The host's name.
        host: String,
        /// The HCA's index.
        hca: u32,
    },
    /// Every QP the host has on the port breaks: it goes to the error state and its
    /// context gets QP_FATAL (the fabric carries on).
    QpError(PortName),
}

/// Which async event a port change raises, as `ibv_event_type` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChange {
    /// IBV_EVENT_PORT_ACTIVE.
    Active,
    /// IBV_EVENT_PORT_ERR.
    Error,
    /// IBV_EVENT_LID_CHANGE.
    LidChange,
    /// IBV_EVENT_PKEY_CHANGE.
    PkeyChange,
    /// IBV_EVENT_SM_CHANGE.
    SmChange,
    /// IBV_EVENT_CLIENT_REREGISTER.
    ClientReregister,
    /// IBV_EVENT_GID_CHANGE.
    GidChange,
}

impl PortChange {
    /// The `ibv_event_type` number.
    #[must_use]
    pub const fn event_type(self) -> u8 {
        match self {
            Self::Active => 9,
            Self::Error => 10,
            Self::LidChange => 11,
            Self::PkeyChange => 12,
            Self::SmChange => 13,
            Self::ClientReregister => 17,
            Self::GidChange => 18,
        }
    }

    fn from_event_type(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            9 => Self::Active,
            10 => Self::Error,
            11 => Self::LidChange,
            12 => Self::PkeyChange,
            13 => Self::SmChange,
            17 => Self::ClientReregister,
            18 => Self::GidChange,
            _ => return Err(WireError::BadField("port event")),
        })
    }
}

/// What a host hears of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyEvent {
    /// A port changed: the event it raises and its attributes now.
    Port {
        /// The port.
        port: PortId,
        /// The event.
        change: PortChange,
        /// Its attributes after the change.
        attrs: PortAttrs,
    },
    /// A device was removed (no longer listed) or died (`fatal`: still listed).
    DeviceGone {
        /// The device.
        device: DeviceId,
        /// Dead rather than removed.
        fatal: bool,
    },
    /// A device is back, as described.
    DeviceBack(DeviceDesc),
    /// The QP of this endpoint broke.
    QpFatal {
        /// The endpoint (the host's number for the QP at the hub).
        ep: EndpointId,
    },
}

fn put_port_name(w: &mut W, p: &PortName) {
    w.str(&p.host);
    w.u32(p.hca);
    w.u8(p.port);
}

fn get_port_name(r: &mut R<'_>) -> Result<PortName, WireError> {
    Ok(PortName {
        host: r.str("host name")?,
        hca: r.u32()?,
        port: r.u8()?,
    })
}

/// A device as ATTACHED and DEVICE_BACK carry it.
pub(super) fn put_device(w: &mut W, d: &DeviceDesc) {
    w.u32(d.id.0);
    w.u64(d.guid);
    w.str(&d.name);
    let ports = &d.ports[..d.ports.len().min(255)];
    w.u8(ports.len() as u8);
    for p in ports {
        put_port_attrs(w, p);
    }
}

/// See [`put_device`].
pub(super) fn get_device(r: &mut R<'_>) -> Result<DeviceDesc, WireError> {
    let id = DeviceId(r.u32()?);
    let guid = r.u64()?;
    let name = r.str("device name")?;
    let n = r.u8()?;
    let ports = (0..n)
        .map(|_| get_port_attrs(r))
        .collect::<Result<_, _>>()?;
    Ok(DeviceDesc {
        id,
        name,
        guid,
        ports,
    })
}

impl Control {
    pub(super) fn encode(&self) -> Vec<u8> {
        use super::msg_type as t;
        let mut w;
        match self {
            Self::PortDown(p) | Self::PortUp(p) | Self::ClientReregister(p) | Self::QpError(p) => {
                w = W::new(match self {
                    Self::PortDown(_) => t::PORT_DOWN,
                    Self::PortUp(_) => t::PORT_UP,
                    Self::QpError(_) => t::QP_ERROR,
                    _ => t::CLIENT_REREGISTER,
                });
                put_port_name(&mut w, p);
            }
            Self::SetLid { port, lid, lmc } => {
                w = W::new(t::SET_LID);
                put_port_name(&mut w, port);
                w.u16(*lid);
                w.u8(*lmc);
            }
            Self::SetPkeys { port, pkeys } => {
                w = W::new(t::SET_PKEYS);
                put_port_name(&mut w, port);
                let pkeys = &pkeys[..pkeys.len().min(usize::from(u16::MAX))];
                w.u16(pkeys.len() as u16);
                for &k in pkeys {
                    w.u16(k);
                }
            }
            Self::SetGid { port, gid } => {
                w = W::new(t::SET_GID);
                put_port_name(&mut w, port);
                w.gid(gid);
            }
            Self::SmMove { lid } => {
                w = W::new(t::SM_MOVE);
                w.u16(*lid);
            }
            Self::DeviceRemove { host, hca, fatal } => {
                w = W::new(t::DEVICE_REMOVE);
                w.str(host);
                w.u32(*hca);
                w.u8(u8::from(*fatal));
            }
            Self::DeviceAdd { host, hca } => {
                w = W::new(t::DEVICE_ADD);
                w.str(host);
                w.u32(*hca);
            }
        }
        w.finish()
    }

    /// The control of type `ty`, or `None` when `ty` is not a control type.
    pub(super) fn decode(ty: u8, r: &mut R<'_>) -> Result<Option<Self>, WireError> {
        use super::msg_type as t;
        Ok(Some(match ty {
            t::PORT_DOWN => Self::PortDown(get_port_name(r)?),
            t::PORT_UP => Self::PortUp(get_port_name(r)?),
            t::CLIENT_REREGISTER => Self::ClientReregister(get_port_name(r)?),
            t::QP_ERROR => Self::QpError(get_port_name(r)?),
            t::SET_LID => Self::SetLid {
                port: get_port_name(r)?,
                lid: r.u16()?,
                lmc: r.u8()?,
            },
            t::SET_PKEYS => {
                let port = get_port_name(r)?;
                let n = r.u16()?;
                let pkeys = (0..n).map(|_| r.u16()).collect::<Result<_, _>>()?;
                Self::SetPkeys { port, pkeys }
            }
            t::SET_GID => Self::SetGid {
                port: get_port_name(r)?,
                gid: r.gid()?,
            },
            t::SM_MOVE => Self::SmMove { lid: r.u16()? },
            t::DEVICE_REMOVE => Self::DeviceRemove {
                host: r.str("host name")?,
                hca: r.u32()?,
                fatal: r.bool("fatal")?,
            },
            t::DEVICE_ADD => Self::DeviceAdd {
                host: r.str("host name")?,
                hca: r.u32()?,
            },
            _ => return Ok(None),
        }))
    }
}

impl TopologyEvent {
    pub(super) fn encode(&self) -> Vec<u8> {
        use super::msg_type as t;
        match self {
            Self::Port {
                port,
                change,
                attrs,
            } => {
                let mut w = W::new(t::PORT_CHANGED);
                w.port(*port);
                w.u8(change.event_type());
                put_port_attrs(&mut w, attrs);
                w.finish()
            }
            Self::DeviceGone { device, fatal } => {
                let mut w = W::new(t::DEVICE_GONE);
                w.u32(device.0);
                w.u8(u8::from(*fatal));
                w.finish()
            }
            Self::DeviceBack(d) => {
                let mut w = W::new(t::DEVICE_BACK);
                put_device(&mut w, d);
                w.finish()
            }
            Self::QpFatal { ep } => {
                let mut w = W::new(t::QP_FATAL);
                w.u32(ep.0);
                w.finish()
            }
        }
    }

    /// The notice of type `ty`, or `None` when `ty` is not a notice type.
    pub(super) fn decode(ty: u8, r: &mut R<'_>) -> Result<Option<Self>, WireError> {
        use super::msg_type as t;
        Ok(Some(match ty {
            t::PORT_CHANGED => Self::Port {
                port: r.port()?,
                change: PortChange::from_event_type(r.u8()?)?,
                attrs: get_port_attrs(r)?,
            },
            t::DEVICE_GONE => Self::DeviceGone {
                device: DeviceId(r.u32()?),
                fatal: r.bool("fatal")?,
            },
            t::DEVICE_BACK => Self::DeviceBack(get_device(r)?),
            t::QP_FATAL => Self::QpFatal {
                ep: EndpointId(r.u32()?),
            },
            _ => return Ok(None),
        }))
    }
}
