//! `ib_acme`, the ibacm test and configuration tool: a drop-in for rdma-core's
//! (docs/ib-acme.md), with a `--json` output added.
//!
//! It asks an ibacm service for path records (`-d`, `-s`, `-f`, `-v`, `-c`, `-C`),
//! performance counters (`-P`) and endpoints (`-e`), and writes the daemon's address and
//! options files (`-A`, `-O`, `-D`). Command lines, request bytes, text output, return
//! status and exit code follow Debian's `/usr/bin/ib_acme` (rdma-core 44), including
//! its getopt rules (`-P col` and `-Pcol`, `-P -e` as two options), its errno texts,
//! the endpoint index shared by `-P N` and `-e N`, and its quirks such as printing MTU,
//! rate and lifetime masked with 0x1F. Everything it prints goes to stdout except
//! getopt's complaints.
//!
//! # Modules
//!
//! | module | purpose |
//! |---|---|
//! | `getopt` | getopt(3)-compatible scanning |
//! | `cli` | options, usage checks, usage text |
//! | `resolve`, `perf`, `endpoints` | the three kinds of query |
//! | `generate` | `-A` / `-O`; `-A` lists ports with `acm_io_verbs::sysfs` |
//! | `format` | text and JSON output |
//! | `run` | order of work, exit status |
//!
//! What `acm-load` shares with it (connecting, request entries, address formats, bracket
//! lists, C number parsing, errno texts) is in [`acm_client`].
//!
//! # Environment
//!
//! * `ACM_SYSFS_ROOT`: read InfiniBand devices for `-A` from
//!   `$ACM_SYSFS_ROOT/class/infiniband/` instead of `/sys/class/infiniband/` (tests use
//!   fixture trees), with the daemon's sysfs discovery. Ports whose link layer is not
//!   InfiniBand are skipped.
//! * `POSIXLY_CORRECT`: options end at the first operand, as with getopt.
//!
//! # `--json`
//!
//! With `--json`, nothing but one JSON document is written to stdout, when the run ends
//! (usage errors go to stderr instead). The exit code is unchanged. The document:
//!
//! ```text
//! {
//!   "services": [                      one per -S service (after list expansion), in order
//!     {
//!       "service": "/run/ibacm-unix.sock",
//!       "connect_status": 0,           0, or the status a failed connect sets
//!       "error": null | ERROR,         why the service could not be reached
//!       "resolves": [                  one per -d destination (x -s source)
//!         {
//!           "destination": "10.0.0.2", after auto-detection ("5" becomes "0.0.0.5")
//!           "source": "10.0.0.1" | null,
//!           "format": "ip" | "name" | "lid" | "gid",
//!           "attempts": [ { "ok": true, "error": null }, { "ok": false, "error": ERROR } ],
//!           "daemon_source": "10.0.0.1" | null,   source chosen by the daemon
//!           "path": null | {
//!             "service_id": "0x0000000000000000", "dgid": "fe80::…", "sgid": "fe80::…",
//!             "dlid": 2, "slid": 1, "flow_label": 0, "hop_limit": 0, "tclass": 0,
//!             "reversible": true, "numpath": 1, "pkey": 65535, "qos_class": 0, "sl": 0,
//!             "mtu": 4, "rate": 3, "packet_lifetime": 18, "preference": 0,
//!             "lines": ["Path information", "  dgid: …", …]   the text block
//!           },
//!           "sa_verification": null | { "ok": true, "error": null | ERROR },
//!           "status": 0 | -1
//!         }
//!       ],
//!       "perf": [ { "endpoint": null | 1,
//!                   "counters": { "error_count": 1, "resolve_count": 18, "no_data": 2,
//!                                 "addr_query_count": 3, "addr_cache_count": 3,
//!                                 "route_query_count": 9, "route_cache_count": 8 } } ],
//!       "perf_error": null | ERROR,
//!       "endpoints": [ { "index": 1, "guid": "0x0002c90300a0b000", "port": 1,
//!                        "port_count": 1, "pkey": 65535, "provider": "ibacmp",
//!                        "addresses": ["fakehost", "10.0.0.1", "fd00::1"] } ],
//!       "missing_endpoint": null | 5,  -e N found nothing
//!       "endpoints_error": null | ERROR
//!     }
//!   ],
//!   "generated": [ { "kind": "address" | "options", "file": "/etc/rdma/ibacm_addr.cfg",
//!                    "ok": true, "lines": ["node1 mlx5_0 1 default", …],
//!                    "error": null | ERROR } ],
//!   "notices": ["Failed to read server port"],
//!   "status": 0,                       the text output's "return status", signed
//!   "exit_code": 0
//! }
//!
//! ERROR = { "errno": 61 | null, "message": "No data available",
//!           "lines": ["ib_acm_resolve_ip failed: No data available"] }
//! ```
//!
//! `errno` is null for failures without one (an address that does not parse); `lines`
//! are exactly what the text output prints for the failure.
//!
//! # Known differences from Debian's `ib_acme`
//!
//! Kept on purpose: where Debian prints `strerror` of a stale errno (a name of 64 bytes
//! or more, a `-P s` source it cannot encode, a host-name lookup that fails) we print
//! the same "No such file or directory" that Debian prints there
//! ([`UNSET`](acm_client::errno::UNSET)).
//! Different on purpose:
//!
//! * The usage text and the comments of generated files are our own wording.
//! * Where Debian crashes or prints uninitialised memory (the daemon hangs up, a reply
//!   without a path, an address count beyond the reply, more than seven counters) we
//!   report ECONNRESET / EPROTO or print what the reply holds.
//! * Bracket lists that Debian mangles (`[3-1]`, `[]`) are refused with the usage text;
//!   a word without brackets is never cut at a comma.
//! * `-P all` and `-e` stop at endpoint 255 (Debian wraps the one-byte index around).
//! * `-A` lists devices in natural name order from sysfs, skips non-InfiniBand ports, and
//!   the output directory is created with mode 0755 instead of 0644.

mod cli;
mod endpoints;
mod format;
mod generate;
mod getopt;
mod outcome;
mod perf;
mod resolve;
mod run;

// What the man-page and `-A`/`-O` tests compare with the documentation and with
// Debian's files.
pub use cli::{LONG_FLAGS, LONG_OPTIONS, OPTSTRING};
pub use generate::{ADDRESS_HEADER, OPTIONS_TEMPLATE, effective_lines, short_hostname};

/// Runs `ib_acme` with the process's arguments and environment; returns the exit code.
#[must_use]
pub fn main_from_env() -> u8 {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let posix = std::env::var_os("POSIXLY_CORRECT").is_some();
    let env = run::Environment::system();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    run::main(&args, posix, &env, &mut stdout, &mut stderr)
}
