//! Where the engine's fabric lives. Each backend takes client requests for this host's
//! engine and gives back what the engine says to clients (replies, closes), to the
//! kernel (netlink replies) and to the log ([`HostOutput`]); everything else (UD and SA
//! traffic, QPs, multicast, source lookups) the engine's driver carries out through the
//! backend's [`acm_engine::driver::Fabric`].
//!
//! - [`sim::SimBackend`]: an in-process simulated fabric; this host's engine runs inside
//!   the simulator with every other host's, on a clock kept in step with real time.
//! - [`hub::HubBackend`]: this host's engine, its fabric traffic going through a fabric
//!   hub shared with other processes.
//!
//! - `hw::HwBackend` (feature `verbs`): this host's engine on its InfiniBand ports,
//!   through acm-io-verbs.

pub(crate) mod hub;
pub(crate) mod hw;
pub(crate) mod sim;

use acm_engine::HostOutput;
use acm_engine::{Input, Instant};
use mio::{Registry, Token};
use std::collections::VecDeque;
use std::io;
use std::ops::ControlFlow;

/// The engine and its fabric, as the event loop sees them.
pub trait Backend {
    /// A short description for the start-up message ("simulated fabric demo, host
    /// node1").
    fn describe(&self) -> String;

    /// Registers the backend's own socket, if it has one, for readability.
    ///
    /// # Errors
    /// The poller refused it.
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()>;

    /// One of the host's inputs for this host's engine: a client's request or close, a
    /// kernel RDMA_NL_LS request, the SET_TIMEOUT of an
    /// [`acm_engine::ClientOutput::KernelTimeout`] sent, a reload
    /// ([`acm_engine::Input::Reconfigure`], after SIGHUP), a provider plugin's wake-up
    /// (it handed work to the core from one of its threads). The fabric's inputs come
    /// from the backend's own fabric, in [`Backend::advance`]. Several may be handed over
    /// before the outputs are drained with [`Backend::lend_outputs`], which the event
    /// loop does before it waits again.
    fn handle(&mut self, now: Instant, input: Input<'_>);

    /// Runs everything due by `now`: timers, and, when `io_ready` (the poller reported
    /// the backend's descriptors since the last call, and on the first call), whatever
    /// they have. Without `io_ready` a backend need not read its descriptors, which
    /// keeps a turn that only served clients free of extra system calls.
    ///
    /// # Errors
    /// The fabric is gone (the hub ended the attachment); the daemon stops.
    fn advance(&mut self, now: Instant, io_ready: bool) -> Result<(), BackendError>;

    /// Lends the outputs for the event loop (client replies and closes, netlink
    /// replies, log lines), oldest first, to `f`, each dropped once read; returns when
    /// there are no more (`None`) or with the output `f` answered
    /// [`ControlFlow::Break`] to, moved out (as [`acm_engine::driver::lend_outputs`],
    /// which the engine's outputs go through). Call again until `None` before waiting.
    fn lend_outputs(&mut self, f: impl FnMut(&HostOutput) -> ControlFlow<()>)
    -> Option<HostOutput>;

    /// When [`Backend::advance`] must run next, if nothing arrives before.
    fn poll_timeout(&self) -> Option<Instant>;

    /// This host's engine, for the metrics file's counters and cache sizes.
    fn engine(&self) -> &acm_engine::Engine;

    /// This host's engine, for the cache view worker threads answer from
    /// ([`acm_engine::Engine::publish_view`]); inputs go through [`Backend::handle`].
    fn engine_mut(&mut self) -> &mut acm_engine::Engine;

    /// Whether the kernel's RDMA_NL_LS path requests belong to this backend's engine:
    /// true only for real hardware, whose ports the kernel's requests name. The event
    /// loop then opens (or inherits from systemd) the NETLINK_RDMA socket.
    fn serves_kernel(&self) -> bool {
        false
    }
}

/// A fabric failure that ends the daemon.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The fabric hub failed or ended the attachment.
    #[error("fabric hub: {0}")]
    Hub(#[from] acm_io_sim::hub::HubError),
}

/// [`Backend::lend_outputs`] over outputs a backend already took out of its engine:
/// lends them to `f` in order, front first; `None` once `queue` is empty, or the one
/// `f` wanted, moved out.
fn lend_queued(
    queue: &mut VecDeque<HostOutput>,
    f: &mut impl FnMut(&HostOutput) -> ControlFlow<()>,
) -> Option<HostOutput> {
    while let Some(out) = queue.front() {
        let wanted = f(out).is_break();
        let out = queue.pop_front();
        if wanted {
            return out;
        }
    }
    None
}
