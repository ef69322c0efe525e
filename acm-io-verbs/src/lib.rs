//! `acm-io-verbs`: the real InfiniBand backend (not built yet).
//!
//! It will carry SA traffic through the kernel's user MAD interface (umad), the ACM
//! multicast protocol over a verbs UD QP (rdma-sys, behind the `verbs` feature), device
//! and port discovery from sysfs, and async port events — I/O only, no protocol logic.
//! See issue 6.
