//! The engine's own fabric operations ([`FabricOp`], host → hub) and fabric events
//! ([`FabricEvent`], hub → host) on the hub's wire: one encoder and one decoder for
//! each direction, so that the hub carries the engine's types as they are, with no
//! message type of its own to map them to.

use super::{R, W, WireError, get_addr, msg_type as t, put_addr};
use acm_engine::{AddressVector, EndpointId, GlobalRoute, Mad, McastGroup, RecvInfo, SaDest};
use acm_engine::{FabricEvent, FabricOp, MadBytes, NeighQuery, OpenQp, SaSend, SourceQuery};
use acm_engine::{LookupId, NeighId, NeighResult, SendToken, UdSend};
use acm_proto::Gid;
use acm_proto::mad::UmadStatus;

/// The datagram of a fabric operation.
pub(super) fn put_op(op: &FabricOp) -> Vec<u8> {
    match op {
        FabricOp::OpenQp(qp) => {
            let mut w = W::new(t::OPEN_QP);
            w.u32(qp.ep.0);
            w.port(qp.port);
            w.u16(qp.pkey);
            w.u16(qp.pkey_index);
            w.u32(qp.recv_depth);
            w.u32(qp.send_depth);
            w.finish()
        }
        FabricOp::CloseQp(ep) => {
            let mut w = W::new(t::CLOSE_QP);
            w.u32(ep.0);
            w.finish()
        }
        FabricOp::UdSend(send) => {
            let mut w = W::new(t::UD_SEND);
            w.u32(send.ep.0);
            w.u64(send.token.0);
            let av = &send.av;
            w.u16(av.dlid);
            w.u8(av.sl);
            w.u8(av.src_path_bits);
            w.u8(av.static_rate);
            w.gid(&av.grh.dgid);
            w.u32(av.grh.flow_label);
            w.u8(av.grh.hop_limit);
            w.u8(av.grh.tclass);
            w.u8(av.grh.sgid_index);
            w.u32(av.remote_qpn);
            w.u32(av.remote_qkey);
            w.bytes(&send.mad.0);
            w.finish()
        }
        FabricOp::McastAttach(g) | FabricOp::McastDetach(g) => {
            let ty = if matches!(op, FabricOp::McastAttach(_)) {
                t::MCAST_ATTACH
            } else {
                t::MCAST_DETACH
            };
            let mut w = W::new(ty);
            w.u32(g.ep.0);
            w.gid(&g.mgid);
            w.u16(g.mlid);
            w.finish()
        }
        FabricOp::SaSend(send) => {
            let mut w = W::new(t::SA_SEND);
            w.port(send.port);
            w.u64(send.tid);
            w.u16(send.dest.dlid);
            w.u8(send.dest.sl);
            w.u16(send.dest.pkey_index);
            w.u32(send.dest.remote_qpn);
            w.u32(send.dest.remote_qkey);
            w.u32(send.timeout_ms);
            w.u32(send.retries);
            w.bytes(&send.mad.0);
            w.finish()
        }
        FabricOp::SourceQuery(q) => {
            let mut w = W::new(t::SOURCE_QUERY);
            w.u64(q.id.0);
            put_addr(&mut w, Some(q.dest));
            w.finish()
        }
        FabricOp::NeighQuery(q) => {
            let mut w = W::new(t::NEIGH_QUERY);
            w.u64(q.id.0);
            w.port(q.port);
            w.gid(&q.gid);
            w.u16(q.pkey);
            put_addr(&mut w, Some(q.dest));
            w.finish()
        }
    }
}

/// The fabric operation of type `ty`, or `None` when `ty` is not one.
pub(super) fn get_op(ty: u8, r: &mut R<'_>) -> Result<Option<FabricOp>, WireError> {
    Ok(Some(match ty {
        t::OPEN_QP => FabricOp::OpenQp(OpenQp {
            ep: EndpointId(r.u32()?),
            port: r.port()?,
            pkey: r.u16()?,
            pkey_index: r.u16()?,
            recv_depth: r.u32()?,
            send_depth: r.u32()?,
        }),
        t::CLOSE_QP => FabricOp::CloseQp(EndpointId(r.u32()?)),
        t::UD_SEND => FabricOp::UdSend(UdSend {
            ep: EndpointId(r.u32()?),
            token: SendToken(r.u64()?),
            av: AddressVector {
                dlid: r.u16()?,
                sl: r.u8()?,
                src_path_bits: r.u8()?,
                static_rate: r.u8()?,
                grh: GlobalRoute {
                    dgid: r.gid()?,
                    flow_label: r.u32()?,
                    hop_limit: r.u8()?,
                    tclass: r.u8()?,
                    sgid_index: r.u8()?,
                },
                remote_qpn: r.u32()?,
                remote_qkey: r.u32()?,
            },
            mad: Mad(r.arr()?),
        }),
        t::MCAST_ATTACH => FabricOp::McastAttach(get_group(r)?),
        t::MCAST_DETACH => FabricOp::McastDetach(get_group(r)?),
        t::SA_SEND => FabricOp::SaSend(SaSend {
            port: r.port()?,
            tid: r.u64()?,
            dest: SaDest {
                dlid: r.u16()?,
                sl: r.u8()?,
                pkey_index: r.u16()?,
                remote_qpn: r.u32()?,
                remote_qkey: r.u32()?,
            },
            timeout_ms: r.u32()?,
            retries: r.u32()?,
            mad: Mad(r.arr()?),
        }),
        t::SOURCE_QUERY => FabricOp::SourceQuery(SourceQuery {
            id: LookupId(r.u64()?),
            dest: get_addr(r)?.ok_or(WireError::BadField("address family"))?,
        }),
        t::NEIGH_QUERY => FabricOp::NeighQuery(NeighQuery {
            id: NeighId(r.u64()?),
            port: r.port()?,
            gid: r.gid()?,
            pkey: r.u16()?,
            dest: get_addr(r)?.ok_or(WireError::BadField("address family"))?,
        }),
        _ => return Ok(None),
    }))
}

fn get_group(r: &mut R<'_>) -> Result<McastGroup, WireError> {
    Ok(McastGroup {
        ep: EndpointId(r.u32()?),
        mgid: r.gid()?,
        mlid: r.u16()?,
    })
}

/// The datagram of a fabric event.
pub(super) fn put_event(ev: &FabricEvent) -> Vec<u8> {
    match ev {
        FabricEvent::QpOpened { ep, result } => {
            let mut w = W::new(t::QP_OPENED);
            w.u32(ep.0);
            w.u8(u8::from(result.is_ok()));
            w.u32(result.unwrap_or(0));
            w.finish()
        }
        FabricEvent::UdReceive { ep, wc, grh, mad } => {
            let mut w = W::new(t::UD_RECEIVE);
            w.u32(ep.0);
            w.u16(wc.slid);
            w.u32(wc.src_qp);
            w.u8(wc.dlid_path_bits);
            w.u16(wc.pkey_index);
            w.u8(u8::from(grh.is_some()));
            w.bytes(&grh.unwrap_or([0; 40]));
            w.bytes(mad.as_bytes());
            w.finish()
        }
        FabricEvent::UdSendDone { ep, token, ok } => {
            let mut w = W::new(t::UD_SEND_DONE);
            w.u32(ep.0);
            w.u64(token.0);
            w.u8(u8::from(*ok));
            w.finish()
        }
        FabricEvent::SaResponse { port, mad } => {
            let mut w = W::new(t::SA_RESPONSE);
            w.port(*port);
            w.bytes(mad.as_bytes());
            w.finish()
        }
        FabricEvent::SaSendFailed { port, tid, status } => {
            let mut w = W::new(t::SA_SEND_FAILED);
            w.port(*port);
            w.u64(*tid);
            w.i32(status.0);
            w.finish()
        }
        FabricEvent::SourceAnswer { id, result } => {
            let mut w = W::new(t::SOURCE_ANSWER);
            w.u64(id.0);
            put_addr(&mut w, result.ok());
            w.u8(result.err().unwrap_or(0));
            w.finish()
        }
        FabricEvent::NeighAnswer { id, result } => {
            let mut w = W::new(t::NEIGH_ANSWER);
            w.u64(id.0);
            let (kind, qpn, gid) = match *result {
                NeighResult::Found { qpn, gid } => (0, qpn, gid),
                NeighResult::Incomplete => (1, 0, Gid::ZERO),
                NeighResult::Unreachable => (2, 0, Gid::ZERO),
            };
            w.u8(kind);
            w.u32(qpn);
            w.gid(&gid);
            w.finish()
        }
    }
}

/// The fabric event of type `ty`, or `None` when `ty` is not one.
pub(super) fn get_event(ty: u8, r: &mut R<'_>) -> Result<Option<FabricEvent>, WireError> {
    Ok(Some(match ty {
        t::QP_OPENED => {
            let ep = EndpointId(r.u32()?);
            let ok = r.bool("QP_OPENED ok")?;
            let qpn = r.u32()?;
            FabricEvent::QpOpened {
                ep,
                result: if ok { Ok(qpn) } else { Err(()) },
            }
        }
        t::UD_RECEIVE => {
            let ep = EndpointId(r.u32()?);
            let wc = RecvInfo {
                slid: r.u16()?,
                src_qp: r.u32()?,
                dlid_path_bits: r.u8()?,
                pkey_index: r.u16()?,
            };
            let has_grh = r.bool("UD_RECEIVE grh")?;
            let grh: [u8; 40] = r.arr()?;
            FabricEvent::UdReceive {
                ep,
                wc,
                grh: has_grh.then_some(grh),
                mad: MadBytes::new(r.rest()),
            }
        }
        t::UD_SEND_DONE => FabricEvent::UdSendDone {
            ep: EndpointId(r.u32()?),
            token: SendToken(r.u64()?),
            ok: r.bool("UD_SEND_DONE ok")?,
        },
        t::SA_RESPONSE => FabricEvent::SaResponse {
            port: r.port()?,
            mad: MadBytes::new(r.rest()),
        },
        t::SA_SEND_FAILED => FabricEvent::SaSendFailed {
            port: r.port()?,
            tid: r.u64()?,
            status: UmadStatus(r.i32()?),
        },
        t::SOURCE_ANSWER => {
            let id = LookupId(r.u64()?);
            let addr = get_addr(r)?;
            let errno = r.u8()?;
            let result = match (addr, errno) {
                (Some(a), 0) => Ok(a),
                (None, e) if e != 0 => Err(e),
                _ => return Err(WireError::BadField("SOURCE_ANSWER errno")),
            };
            FabricEvent::SourceAnswer { id, result }
        }
        t::NEIGH_ANSWER => {
            let id = NeighId(r.u64()?);
            let (kind, qpn, gid) = (r.u8()?, r.u32()?, r.gid()?);
            let result = match kind {
                0 => NeighResult::Found { qpn, gid },
                1 => NeighResult::Incomplete,
                2 => NeighResult::Unreachable,
                _ => return Err(WireError::BadField("NEIGH_ANSWER result")),
            };
            FabricEvent::NeighAnswer { id, result }
        }
        _ => return Ok(None),
    }))
}
