//! What the core asks of the providers: the core decides, and returns each provider
//! hook to call as a [`ProviderCall`]; [`crate::Engine`] alone calls the providers
//! (`Engine::call`), lending each the core as its [`crate::provider::Ctx`].
//!
//! The core never calls a provider itself: then every path from an input to a provider
//! is read in one file (`engine.rs`), and a provider's context can borrow the whole
//! core while it runs.
//!
//! Most inputs need one call at most, and return it as an `Option<`[`Call`]`>` (a
//! client's request, an SA answer). A change of devices, ports, endpoints or addresses
//! needs several, with the core's own work between them (a port that comes up opens
//! the port, then creates its endpoints, then subscribes to the SA's events): it
//! returns a [`Plan`], whose later core steps run only once the calls before them are
//! made. So the outputs, logs included, come in the order the core and the providers
//! would produce them calling each other directly.

use super::Core;
use crate::addr::Address;
use crate::config::Options;
use crate::device::{DeviceDesc, DeviceId, PortAttrs, PortId};
use crate::io::{ConnId, EndpointId, NeighId, NeighResult, RecvInfo, SendToken};
use crate::request::PendingReply;
#[cfg(doc)]
use crate::request::Resolve;
use acm_proto::client::EpFlags;
use acm_proto::mad::UmadStatus;
use acm_proto::notice::SmTrap;
use alloc::boxed::Box;
use alloc::collections::VecDeque;

/// One call of a [`crate::provider::Provider`] hook, with its arguments (the context
/// is added by the engine).
#[derive(Debug)]
pub(crate) enum ProviderCall<'a> {
    /// [`crate::provider::Provider::start`].
    Start,
    /// [`crate::provider::Provider::resolve`] of a [`Resolve::Dest`]. The resolve's
    /// parts travel apart and the engine builds the [`Resolve`] in the hook's argument
    /// (moving a whole `Resolve` out of the call would copy it once more, on every
    /// cache hit).
    ResolveDest {
        ep: EndpointId,
        src: Address,
        dest: Address,
        flags: EpFlags,
        reply: PendingReply,
    },
    /// [`crate::provider::Provider::resolve`] of a [`Resolve::Path`] (in parts, as
    /// `ResolveDest`).
    ResolvePath {
        ep: EndpointId,
        path: [u8; 64],
        flags: EpFlags,
        reply: PendingReply,
    },
    /// [`crate::provider::Provider::query`].
    Query {
        ep: EndpointId,
        path: [u8; 64],
        reply: PendingReply,
    },
    /// [`crate::provider::Provider::open_device`].
    OpenDevice(DeviceDesc),
    /// [`crate::provider::Provider::close_device`].
    CloseDevice(DeviceId),
    /// [`crate::provider::Provider::open_port`].
    OpenPort { port: PortId, attrs: PortAttrs },
    /// [`crate::provider::Provider::close_port`].
    ClosePort(PortId),
    /// [`crate::provider::Provider::open_endpoint`].
    OpenEndpoint {
        ep: EndpointId,
        port: PortId,
        pkey: u16,
    },
    /// [`crate::provider::Provider::close_endpoint`].
    CloseEndpoint(EndpointId),
    /// [`crate::provider::Provider::add_address`].
    AddAddress { ep: EndpointId, addr: Address },
    /// [`crate::provider::Provider::remove_address`].
    RemoveAddress { ep: EndpointId, addr: Address },
    /// [`crate::provider::Provider::client_reregister`].
    ClientReregister(PortId),
    /// [`crate::provider::Provider::sm_event`].
    SmEvent { port: PortId, event: SmTrap },
    /// [`crate::provider::Provider::client_closed`].
    ClientClosed(ConnId),
    /// [`crate::provider::Provider::qp_opened`].
    QpOpened {
        ep: EndpointId,
        result: Result<u32, ()>,
    },
    /// [`crate::provider::Provider::ud_receive`].
    UdReceive {
        ep: EndpointId,
        wc: RecvInfo,
        grh: Option<&'a [u8]>,
        mad: &'a [u8],
    },
    /// [`crate::provider::Provider::ud_send_done`].
    UdSendDone {
        ep: EndpointId,
        token: SendToken,
        ok: bool,
    },
    /// [`crate::provider::Provider::sa_response`].
    SaResponse {
        port: PortId,
        tid: u64,
        result: Result<&'a [u8], UmadStatus>,
    },
    /// [`crate::provider::Provider::neigh_answer`].
    NeighAnswer { id: NeighId, result: NeighResult },
    /// [`crate::provider::Provider::handle_timeout`].
    Timeout,
    /// [`crate::provider::Provider::wake`].
    Wake,
    /// [`crate::provider::Provider::reconfigure`] (boxed: the options are large, and a
    /// call is moved on every request).
    Reconfigure(Box<Options>),
}

/// A call of provider `.0`: what a path that needs one call at most returns.
pub(crate) type Call<'a> = (usize, ProviderCall<'a>);

/// The core's work left for after the calls before it in a [`Plan`].
type CoreStep = Box<dyn FnOnce(&mut Core) -> Plan>;

/// One step of a [`Plan`].
pub(crate) enum Step {
    /// Call provider `.0`.
    Call(usize, ProviderCall<'static>),
    /// Let the core go on; it may plan more, which comes before the rest.
    Then(CoreStep),
}

/// Provider calls in the order to make them, with the core's work between them.
#[derive(Default)]
#[must_use = "a plan does nothing until the engine carries it out"]
pub(crate) struct Plan {
    steps: VecDeque<Step>,
}

impl Plan {
    /// Nothing to do.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Then call provider `provider`.
    pub(crate) fn call(&mut self, provider: usize, call: ProviderCall<'static>) {
        self.steps.push_back(Step::Call(provider, call));
    }

    /// Then let the core do `step` (after every call planned so far is made).
    pub(crate) fn then(&mut self, step: impl FnOnce(&mut Core) -> Self + 'static) {
        self.steps.push_back(Step::Then(Box::new(step)));
    }

    /// Then let the core do `step`, which calls no provider.
    pub(crate) fn then_do(&mut self, step: impl FnOnce(&mut Core) + 'static) {
        self.then(|core| {
            step(core);
            Self::new()
        });
    }

    /// The next step; what a core step plans goes first with [`Plan::prepend`].
    pub(crate) fn next_step(&mut self) -> Option<Step> {
        self.steps.pop_front()
    }

    /// Puts `first` before every step left.
    pub(crate) fn prepend(&mut self, mut first: Self) {
        first.steps.append(&mut self.steps);
        self.steps = first.steps;
    }
}
