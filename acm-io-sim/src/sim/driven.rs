//! Serving one host's clients from outside the simulator.
//!
//! `ibacm --fabric sim` is one host of a simulated fabric: the simulator runs every
//! engine, this one included, and the daemon feeds its host's client connections in and
//! takes the replies, closes and log lines out. The daemon moves the virtual clock in
//! step with real time ([`Sim::run_until`] with the elapsed time, sleeping until
//! [`Sim::next_due`]), so the fabric behaves like a real one, only without hardware.
//!
//! Connection ids are the serving program's own, unchanged on their way to the engine: the
//! engine's log lines then name a client by the number the daemon's own lines use.
//! [`Sim::submit`]'s one-shot connections are the ones marked, with
//! [`SUBMIT_CONN_BIT`], so that the two never meet on the same host.

use super::Sim;
use crate::spec::HostId;
use acm_engine::HostOutput;
use acm_engine::{ConnId, Input, Instant};
use std::collections::VecDeque;

/// Makes a driven host's providers from its engine configuration
/// ([`Sim::driving_with_providers`]).
pub type ProviderFactory =
    Box<dyn FnMut(&acm_engine::EngineConfig) -> Vec<Box<dyn acm_engine::provider::Provider>>>;

/// Set in the id of every one-shot connection of [`Sim::submit`], and clear in every
/// driven host's connection's.
pub const SUBMIT_CONN_BIT: u64 = 1 << 63;

/// The driven host and its engine's outputs for the program serving it.
#[derive(Debug)]
pub(crate) struct DrivenHost {
    host: HostId,
    out: VecDeque<HostOutput>,
}

impl Sim {
    /// Hands host `h`'s clients to a program serving them (the daemon): from now on its engine's log lines, and
    /// its replies and closes on connections fed through [`Sim::driven_request`], wait
    /// in [`Sim::poll_driven_output`] instead of going to the test client API.
    ///
    /// # Panics
    /// If `h` is not a host of the fabric.
    pub fn drive_host(&mut self, h: HostId) {
        assert!(h.index() < self.hosts.len(), "no host {h}");
        self.driven = Some(DrivenHost {
            host: h,
            out: VecDeque::new(),
        });
    }

    /// The host [`Sim::drive_host`] chose.
    #[must_use]
    pub fn driven_host(&self) -> Option<HostId> {
        self.driven.as_ref().map(|d| d.host)
    }

    /// One of the host's inputs to the driven host's engine, now: what a daemon's event
    /// loop hands its engine (client requests and closes, netlink requests, a sent
    /// SET_TIMEOUT, a reload, a plugin's wake-up, the cache hits its worker threads
    /// answered). The fabric's inputs are the
    /// simulator's own.
    ///
    /// # Panics
    /// Without a driven host, if `input` is one of the fabric's, or if it is a client
    /// request on a connection with [`SUBMIT_CONN_BIT`] set (those ids are the
    /// simulator's own submitted requests').
    pub fn driven_input(&mut self, input: Input<'_>) {
        let h = self.driven();
        match input {
            Input::ClientRequest { conn, .. } | Input::ClientClosed(conn) => assert_eq!(
                conn.0 & SUBMIT_CONN_BIT,
                0,
                "driven host's connection ids have the high bit clear"
            ),
            Input::Netlink(_)
            | Input::KernelTimeoutSent { .. }
            | Input::Reconfigure(_)
            | Input::ProviderWake
            | Input::CacheHits { .. }
            | Input::Tick => {}
            _ => panic!("the fabric's inputs are the simulator's own"),
        }
        self.input(h, input);
    }

    /// A request read from driven host's connection `conn` ([`Sim::driven_input`]).
    pub fn driven_request(&mut self, conn: ConnId, bytes: &[u8]) {
        self.driven_input(Input::ClientRequest { conn, bytes });
    }

    /// The driven host's connection `conn` is gone ([`Sim::driven_input`]).
    pub fn driven_closed(&mut self, conn: ConnId) {
        self.driven_input(Input::ClientClosed(conn));
    }

    /// The next reply, close or log line for the program serving it.
    #[must_use]
    pub fn poll_driven_output(&mut self) -> Option<HostOutput> {
        self.driven.as_mut()?.out.pop_front()
    }

    /// When the next event or engine timer is due, if anything is scheduled.
    #[must_use]
    pub fn next_due(&self) -> Option<Instant> {
        let ev = self.queue.first_key_value().map(|(&(t, _), _)| t);
        let timer = self.timers.first().map(|&(t, _)| t);
        match (ev, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn driven(&self) -> HostId {
        self.driven_host()
            .expect("no driven host: call Sim::drive_host first")
    }

    pub(crate) fn is_driven_host(&self, h: HostId) -> bool {
        self.driven_host() == Some(h)
    }

    pub(crate) fn is_driven_conn(&self, h: HostId, conn: ConnId) -> bool {
        conn.0 & SUBMIT_CONN_BIT == 0 && self.is_driven_host(h)
    }

    /// Queues an output for the serving program (the connection ids are its own).
    pub(crate) fn push_driven_output(&mut self, out: HostOutput) {
        if let Some(d) = self.driven.as_mut() {
            d.out.push_back(out);
        }
    }
}
