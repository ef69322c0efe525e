//! PERF_QUERY (spec 1.9) and EP_QUERY (spec 1.10): answered by the core at once.

use crate::Engine;
use crate::counters::Counters;
use crate::io::{ClientOutput, ConnId, EndpointId, Reply};
use crate::log::{Level, log};
use acm_proto::Bytes64;
use acm_proto::client::{AddrType, EpFlags, Status};
use alloc::vec::Vec;

/// EP_QUERY replies stop growing at this size; addresses that would not fit are left
/// out and not counted.
const EP_REPLY_MAX: usize = 65535;

impl Engine {
    /// Endpoints in enumeration order (spec 5.13) on ports numbered `port` (0: all).
    fn enumerate(&self, port: u8) -> impl Iterator<Item = EndpointId> + '_ {
        self.core
            .active_ports()
            .filter(move |(_, p)| port == 0 || p.num == port)
            .flat_map(|(_, p)| p.endpoints.iter().copied())
    }

    pub(crate) fn perf_query(&mut self, conn: ConnId, bytes: &[u8]) {
        let len = u16::from_be_bytes([bytes[6], bytes[7]]);
        let idx = bytes[4];
        // Quirk 36: the entry's flags are host order although the rest is big-endian.
        let entry = bytes.get(16..88);
        let has_source = entry.is_some_and(|e| {
            EpFlags(u32::from_ne_bytes([e[0], e[1], e[2], e[3]])).contains(EpFlags::SOURCE)
        });
        let counters: Option<Counters> = if (len < 88 && idx < 1) || (len >= 88 && !has_source) {
            Some(self.core.counters)
        } else if idx >= 1 {
            // The reference also uses the index as a port filter (its bug 1), so
            // `-P 2` never finds the second endpoint of a one-port HCA. Fixed: count
            // over every port.
            self.enumerate(0)
                .nth(usize::from(idx) - 1)
                .and_then(|ep| self.endpoint_counters(ep))
        } else {
            entry
                .and_then(|e| {
                    let mut b = [0u8; 64];
                    b.copy_from_slice(&e[8..72]);
                    let addr = crate::Address {
                        ty: AddrType(u16::from_ne_bytes([e[4], e[5]])),
                        bytes: Bytes64(b),
                    };
                    self.core.find_ep_by_addr(&addr)
                })
                .and_then(|ep| self.endpoint_counters(ep))
        };
        let mut buf = [0u8; 16 + 8 * 7];
        buf[..16].copy_from_slice(&bytes[..16]);
        buf[1] |= 0x80;
        buf[5] = 0;
        let n = match counters {
            Some(c) => {
                buf[2] = 0;
                buf[3] = c.0.len() as u8;
                for (i, v) in c.0.iter().enumerate() {
                    buf[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_be_bytes());
                }
                16 + 8 * c.0.len()
            }
            None => {
                log!(
                    self.core,
                    Level::Verbose,
                    "acm_svr_perf_query",
                    "no endpoint for the perf query"
                );
                buf[2] = Status::ESRCADDR.0;
                buf[3] = 0;
                16
            }
        };
        buf[6..8].copy_from_slice(&(n as u16).to_be_bytes());
        self.core.push_client(ClientOutput::Reply {
            conn,
            reply: Reply::new(&buf[..n]),
        });
    }

    pub(crate) fn ep_query(&mut self, conn: ConnId, bytes: &[u8]) {
        let index = bytes[3];
        let port = bytes[4];
        let found = usize::from(index)
            .checked_sub(1)
            .and_then(|i| self.enumerate(port).nth(i));
        let mut hdr = [0u8; 16];
        hdr.copy_from_slice(&bytes[..16]);
        hdr[1] |= 0x80;
        hdr[4] = 0;
        hdr[5] = 0;
        let Some(reply) = found.and_then(|ep| self.ep_config(ep, hdr)) else {
            log!(
                self.core,
                Level::Verbose,
                "acm_get_ep",
                "notice - could not find ep {index}"
            );
            hdr[2] = Status::EINVAL.0;
            hdr[6..8].copy_from_slice(&16u16.to_be_bytes());
            self.core.push_client(ClientOutput::Reply {
                conn,
                reply: Reply::new(&hdr),
            });
            return;
        };
        self.core.push_client(ClientOutput::Reply { conn, reply });
    }

    /// The EP_QUERY success reply for an endpoint.
    fn ep_config(&self, ep: EndpointId, hdr: [u8; 16]) -> Option<Reply> {
        let e = self.core.endpoint(ep)?;
        let dev = self.core.device(e.port.device)?;
        let mut body: Vec<u8> = Vec::with_capacity(16 + 80 + 64 * e.addrs.len());
        body.extend_from_slice(&hdr);
        body.extend_from_slice(&dev.guid.to_be_bytes());
        body.push(e.port.port);
        body.push(dev.ports.len() as u8);
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&e.pkey.to_be_bytes());
        body.extend_from_slice(&[0, 0]); // addr_cnt, filled below
        let name = self
            .core
            .provider_names
            .get(e.provider)
            .map_or("", |s| s.as_str());
        body.extend_from_slice(&Bytes64::c_string(name).0);
        let mut cnt: u16 = 0;
        for a in &e.addrs {
            if body.len() + 64 > EP_REPLY_MAX {
                break;
            }
            body.extend_from_slice(&Bytes64::c_string(&a.display).0);
            cnt += 1;
        }
        body[16 + 14..16 + 16].copy_from_slice(&cnt.to_be_bytes());
        let len = body.len() as u16;
        body[6..8].copy_from_slice(&len.to_be_bytes());
        Some(Reply::from_vec(body))
    }
}
