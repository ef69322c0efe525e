//! What the emulation knows about the application's verbs objects, and how the hub's
//! events become completions.

use crate::ffi::{EventPipe, lock};
use acm_engine::{AddressVector, RecvInfo};
use rdma_sys::{ibv_context, ibv_wc_opcode, ibv_wc_status};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::mpsc::SyncSender;

/// Everything, behind one lock.
pub static STATE: Mutex<State> = Mutex::new(State::new());

/// The device index of an open context (`None` for one that is not open).
pub fn context_device(ctx: *mut ibv_context) -> Option<usize> {
    lock(&STATE).contexts.get(&(ctx as usize)).map(|c| c.device)
}

/// An open device context.
#[derive(Debug)]
pub struct Context {
    /// Index of its device in the hub's setup.
    pub device: usize,
    /// Its async-event descriptor.
    pub events: EventPipe,
}

/// A completion queue.
#[derive(Debug, Default)]
pub struct Cq {
    /// Completions not polled yet.
    pub wcs: VecDeque<Wc>,
    /// Its capacity.
    pub cqe: usize,
    /// Armed by `req_notify_cq`: the next completion raises an event.
    pub armed: bool,
    /// The completion channel (its address), if any.
    pub channel: Option<usize>,
    /// Its context (its address), for the CQ error event.
    pub context: usize,
}

/// A work completion, as the emulation fills `ibv_wc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// `ibv_wc_status`.
    pub status: ibv_wc_status::Type,
    /// `ibv_wc_opcode`.
    pub opcode: ibv_wc_opcode::Type,
    /// Bytes received (receives).
    pub byte_len: u32,
    /// The local QP.
    pub qp_num: u32,
    /// Where a receive came from, and its pkey index.
    pub recv: RecvInfo,
    /// Whether a GRH precedes the receive's payload.
    pub grh: bool,
}

/// A QP's place in the state machine (`ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Fresh or reset.
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Error: posted work is flushed.
    Err,
}

/// One scatter entry of a posted receive.
#[derive(Debug, Clone, Copy)]
pub struct Sge {
    /// Where.
    pub addr: u64,
    /// How many bytes.
    pub len: u32,
}

/// A posted receive.
#[derive(Debug, Clone)]
pub struct Recv {
    /// Its id.
    pub wr_id: u64,
    /// Its buffers.
    pub sges: Vec<Sge>,
}

/// A UD queue pair.
#[derive(Debug)]
pub struct Qp {
    /// Its endpoint at the hub.
    pub ep: u32,
    /// Its number.
    pub qpn: u32,
    /// Its state.
    pub state: QpState,
    /// Port (from 1), pkey index and Q_Key, set at INIT.
    pub port: u8,
    /// See `port`.
    pub pkey_index: u16,
    /// See `port`.
    pub qkey: u32,
    /// Its context's device index.
    pub device: usize,
    /// CQs (their addresses).
    pub send_cq: usize,
    /// See `send_cq`.
    pub recv_cq: usize,
    /// Capacities.
    pub max_send_wr: u32,
    /// See `max_send_wr`.
    pub max_recv_wr: u32,
    /// See `max_send_wr`.
    pub max_send_sge: u32,
    /// See `max_send_wr`.
    pub max_recv_sge: u32,
    /// Every send signals a completion.
    pub sq_sig_all: bool,
    /// Posted receives, oldest first.
    pub recvs: VecDeque<Recv>,
    /// Sends handed to the hub and not completed.
    pub sends_out: u32,
}

/// A send in flight at the hub.
#[derive(Debug, Clone, Copy)]
pub struct SendOut {
    /// The QP (its address).
    pub qp: usize,
    /// The work request's id.
    pub wr_id: u64,
    /// Whether it completes with a work completion.
    pub signaled: bool,
}

/// An address handle.
#[derive(Debug, Clone, Copy)]
pub struct Ah {
    /// The port it sends from.
    pub port: u8,
    /// Where to (remote QPN and Q_Key come from each send).
    pub av: AddressVector,
}

/// The emulation's state.
#[derive(Debug)]
pub struct State {
    /// Contexts by address.
    pub contexts: BTreeMap<usize, Context>,
    /// Completion channels by address.
    pub channels: BTreeMap<usize, EventPipe>,
    /// CQs by address.
    pub cqs: BTreeMap<usize, Cq>,
    /// QPs by address.
    pub qps: BTreeMap<usize, Qp>,
    /// QP addresses by endpoint.
    pub by_ep: BTreeMap<u32, usize>,
    /// Address handles by address.
    pub ahs: BTreeMap<usize, Ah>,
    /// Memory regions by lkey: start and length.
    pub mrs: BTreeMap<u32, (u64, u64)>,
    /// Sends at the hub by token.
    pub sends: BTreeMap<u64, SendOut>,
    /// Who waits for the hub's QP_OPENED of an endpoint.
    pub qp_waiters: BTreeMap<u32, SyncSender<Result<u32, ()>>>,
    /// Counters for endpoints, tokens and keys.
    pub next_ep: u32,
    /// See `next_ep`.
    pub next_token: u64,
    /// See `next_ep`.
    pub next_key: u32,
}

impl State {
    const fn new() -> Self {
        Self {
            contexts: BTreeMap::new(),
            channels: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            by_ep: BTreeMap::new(),
            ahs: BTreeMap::new(),
            mrs: BTreeMap::new(),
            sends: BTreeMap::new(),
            qp_waiters: BTreeMap::new(),
            next_ep: 1,
            next_token: 1,
            next_key: 0x100,
        }
    }
}
