//! PERF_QUERY and EP_QUERY (docs/protocol/client-messages.md §9, §10): answered by the
//! core at once.

use super::Core;
use super::client::Request;
use crate::counters::Counters;
use crate::io::{ClientOutput, ConnId, EndpointId, Reply};
use crate::log::{Level, log};
use crate::provider::Provider;
use acm_proto::Bytes64;
use acm_proto::client::{
    Direction, ENTRY_LEN, EP_CONFIG_LEN, EpConfigRepr, EpFlags, EpQueryReplyRepr, EpQueryRepr,
    HEADER_LEN, HeaderRepr, MAX_COUNTERS, PerfQueryRepr, PerfReplyRepr, Status,
};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// EP_QUERY replies stop growing at this size; addresses that would not fit are left
/// out and not counted.
const EP_REPLY_MAX: usize = 65535;

impl Core {
    /// Endpoints in enumeration order (docs/daemon.md §13) on ports numbered `port` (0:
    /// all).
    pub(crate) fn enumerate(&self, port: u8) -> impl Iterator<Item = EndpointId> + '_ {
        self.active_ports()
            .filter(move |(_, p)| port == 0 || p.num == port)
            .flat_map(|(_, p)| p.endpoints.iter().copied())
    }

    /// An endpoint's counters, from its provider.
    pub(crate) fn endpoint_counters(
        &self,
        ep: EndpointId,
        providers: &[Box<dyn Provider>],
    ) -> Option<Counters> {
        providers.get(self.endpoint(ep)?.provider)?.perf(ep)
    }

    /// A PERF_QUERY: the global counters, or an endpoint's from its provider.
    pub(crate) fn perf_query(
        &mut self,
        conn: ConnId,
        req: &Request<'_>,
        providers: &[Box<dyn Provider>],
    ) {
        let len = req.hdr.length;
        let idx = PerfQueryRepr::index_in(&req.hdr);
        // docs/reference-quirks.md §36: the entry's flags are host order although the
        // rest is big-endian.
        let entry = req.msg.entry(0);
        let has_source = entry
            .as_ref()
            .is_some_and(|e| e.flags().contains(EpFlags::SOURCE));
        let with_entry = usize::from(len) >= HEADER_LEN + ENTRY_LEN;
        let counters: Option<Counters> = if (!with_entry && idx < 1) || (with_entry && !has_source)
        {
            Some(self.counters)
        } else if idx >= 1 {
            // The reference also uses the index as a port filter
            // (docs/reference-quirks.md §1), so `-P 2` never finds the second endpoint of
            // a one-port HCA. Fixed: count over every port.
            self.enumerate(0)
                .nth(usize::from(idx) - 1)
                .and_then(|ep| self.endpoint_counters(ep, providers))
        } else {
            entry
                .and_then(|e| {
                    let addr = crate::Address {
                        ty: e.addr_type(),
                        bytes: Bytes64::read(e.info()).unwrap_or_default(),
                    };
                    self.find_ep_by_addr(&addr)
                })
                .and_then(|ep| self.endpoint_counters(ep, providers))
        };
        let reply = match counters {
            Some(c) => PerfReplyRepr::answer(&req.hdr, Status::SUCCESS, &c.0),
            None => {
                log!(
                    self,
                    Level::Verbose,
                    "acm_svr_perf_query",
                    "no endpoint for the perf query"
                );
                PerfReplyRepr::answer(&req.hdr, Status::ESRCADDR, &[])
            }
        };
        let mut buf = [0u8; HEADER_LEN + 8 * MAX_COUNTERS];
        let n = reply.emit(&mut buf, Direction::Response);
        self.push_client(ClientOutput::Reply {
            conn,
            reply: Reply::new(&buf[..n]),
        });
    }

    /// An EP_QUERY: the description of the endpoint the request names by index.
    pub(crate) fn ep_query(&mut self, conn: ConnId, hdr: &HeaderRepr) {
        let request = EpQueryRepr::from_header(*hdr);
        let index = request.index();
        let found = usize::from(index)
            .checked_sub(1)
            .and_then(|i| self.enumerate(request.port()).nth(i));
        let config = found.and_then(|ep| self.ep_config(ep));
        if config.is_none() {
            log!(
                self,
                Level::Verbose,
                "acm_get_ep",
                "notice - could not find ep {index}"
            );
        }
        // The request's status byte is not echoed: a client that sends a non-zero one
        // (the protocol says 0, but nothing checks) must still read success as 0.
        let reply = EpQueryReplyRepr::answer(&request, config);
        let mut buf = alloc::vec![0u8; reply.buffer_len()];
        reply.emit(&mut buf, Direction::Response);
        self.push_client(ClientOutput::Reply {
            conn,
            reply: Reply::from_vec(buf),
        });
    }

    /// The EP_QUERY description of an endpoint, with as many addresses as fit in a
    /// reply.
    fn ep_config(&self, ep: EndpointId) -> Option<EpConfigRepr> {
        let e = self.endpoint(ep)?;
        let dev = self.device(e.port.device)?;
        let name = self
            .provider_names
            .get(e.provider)
            .map_or("", |s| s.as_str());
        let room = (EP_REPLY_MAX - HEADER_LEN - EP_CONFIG_LEN) / 64;
        let addrs: Vec<Bytes64> = e
            .addrs
            .iter()
            .take(room)
            .map(|a| Bytes64::c_string(&a.display))
            .collect();
        Some(EpConfigRepr {
            dev_guid: dev.guid,
            port_num: e.port.port,
            phys_port_cnt: dev.ports.len() as u8,
            reserved: 0,
            pkey: e.pkey,
            addr_cnt: addrs.len() as u16,
            prov_name: Bytes64::c_string(name),
            addrs,
        })
    }
}
