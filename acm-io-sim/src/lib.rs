//! `acm-io-sim`: a deterministic simulated InfiniBand fabric (not built yet).
//!
//! It will model hosts, HCAs and ports (LIDs, GIDs, pkey tables), an SM/SA answering
//! PathRecord queries and MCMemberRecord joins, multicast delivery and faults, and drive
//! many `acm-engine` instances from one seed (`ACM_SIM_SEED`) on a virtual clock, so the
//! whole protocol can be tested without InfiniBand hardware. See issue 4.
