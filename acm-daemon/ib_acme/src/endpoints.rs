//! Endpoint enumeration (`-e [N]`, docs/protocol/client-messages.md §10,
//! docs/ib-acme.md §6).
//!
//! The daemon answers EP_QUERY for one (index, port) pair at a time, counting endpoints
//! per port number. So, like Debian's `ib_acme`, each index is tried on ports 1, 2, …
//! up to the device's port count — 255 until a reply tells the real count — and without
//! `N` the indexes 1, 2, … are walked until one is found on no port. The request counts
//! matter: a capture of the real tool shows 255 queries for a missing endpoint.

use super::format::Report;
use acm_client::{ClientError, Connection};

/// Highest index and port a one-byte field can name.
pub(crate) const MAX_INDEX: i32 = 255;

/// Runs `-e` on one service. `index` > 0 asks for that endpoint only; anything else
/// walks them all (Debian treats `-e 0` and `-e junk` that way too).
pub(crate) fn run(conn: &mut Connection, svc: &str, index: i32, report: &mut dyn Report) {
    if index > 0 {
        match query_on_every_port(conn, svc, index, report) {
            Ok(true) => {}
            Ok(false) => report.endpoint_missing(index),
            Err(e) => report.endpoints_failed(svc, &e),
        }
        return;
    }
    for i in 1..=MAX_INDEX {
        match query_on_every_port(conn, svc, i, report) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                report.endpoints_failed(svc, &e);
                break;
            }
        }
    }
}

/// Asks for endpoint `index` on each port, reporting every one found; `Ok(false)` when no
/// port has it. A daemon status is "not on this port"; any other failure ends the walk.
///
/// # Errors
/// A failed exchange (the connection is then unusable).
pub(crate) fn query_on_every_port(
    conn: &mut Connection,
    svc: &str,
    index: i32,
    report: &mut dyn Report,
) -> Result<bool, ClientError> {
    let mut found = false;
    let mut ports: u32 = 255;
    let mut port: u32 = 1;
    while port <= ports {
        // The index field is one byte; larger values are truncated as in Debian.
        match conn.endpoint(index as u8, port as u8) {
            Ok(ep) => {
                report.endpoint(svc, index, &ep);
                ports = u32::from(ep.phys_port_cnt);
                found = true;
            }
            Err(ClientError::Status(_)) => {}
            Err(e) => return Err(e),
        }
        port += 1;
    }
    Ok(found)
}
