//! `acm-io-sim`: a deterministic simulated InfiniBand fabric that runs many engines.
//!
//! Nobody needs InfiniBand hardware to exercise the whole protocol: a [`spec`] file (or
//! [`spec::FabricSpec::generate`]) describes hosts, HCAs, ports, addresses and options;
//! the [`topology`] holds its live state; the [`sa`] module is the SM/SA; and
//! [`sim::Sim`] drives one `acm-engine` per host on a virtual clock, carrying their
//! UD MADs (multicast and unicast, with pkey and Q_Key checks and a GRH on every
//! receive) and umad sends (the kernel's timeout, retries and TID rewrite), applying
//! faults, and checking invariants. The delivery rules themselves live in [`fabric`].
//!
//! For tests with separate processes, the [`hub`] serves one fabric on a unix datagram
//! socket (the `acm-fabric-hub` binary, a package of its own in `fabric-hub/`, as
//! `fabric-bench` is in `fabric-bench/`) and each process attaches as one host through
//! [`hub::HubClient`]; that runs in real time and is not deterministic.
//!
//! Everything random comes from one seed: `ACM_SIM_SEED` pins it
//! ([`sim::seed_from_env`]), and [`sim::run_seeded`] runs a scenario twice, compares
//! the trace hashes, and prints `rerun with ACM_SIM_SEED=<seed>` when it fails.

pub mod fabric;
pub mod hub;
pub mod rng;
pub mod sa;
pub mod sim;
pub mod spec;
pub mod topology;

pub use sim::{ProviderFactory, Sim};
pub use spec::{FabricSpec, HostId};
