//! `acm-engine`: the sans-IO ACM resolution state machine (not built yet).
//!
//! It will hold everything the reference daemon core and its `ibacmp` provider decide —
//! request validation, the destination and route caches, the ACM multicast protocol
//! (MAD class 0x2C), SA PathRecord queries and MCMemberRecord joins, retries, credits,
//! timers, perf counters and config-file parsing — behind a quinn-style API:
//! `handle(now, Input)`, `poll_output()`, `poll_timeout()`. Time and a seed are passed
//! in; it never touches sockets, files, clocks or OS randomness. See issue 3.
#![no_std]
