//! libibverbs, emulated: the entry points a verbs consumer (the daemon's hardware
//! backend, a C provider) calls, with the objects laid out as `infiniband/verbs.h`
//! says (rdma-sys's definitions), and the data path through the context's ops table,
//! which verbs.h's inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and
//! `ibv_req_notify_cq` call.
//!
//! Every object the application sees is a heap-allocated verbs structure; what the
//! emulation keeps about it lives in [`State`], keyed by the structure's address,
//! behind one lock shared with the hub thread, which delivers receives and send
//! completions into it.

pub mod async_event;
pub mod cq;
pub mod device;
pub mod objects;
pub mod qp;
pub mod state;

pub use state::{STATE, State};
