//! Changing a running hub's fabric from another process: a test, or an operator's
//! tool, sends one [`Control`] from a socket of its own and waits for the hub's word.

use super::HubError;
use super::server::bind_fresh;
use super::wire::{Control, HostMsg, HubMsg, MAX_DATAGRAM};
use std::path::Path;
use std::time::Duration;

/// How long [`change`] waits for the hub.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the hub at `hub` to make `change`, from a socket bound at `my_socket` for the
/// exchange (removed afterwards), and waits up to [`CHANGE_TIMEOUT`] for its answer.
/// When this returns, every attached host concerned has been sent its notice.
///
/// # Errors
/// The socket cannot be bound or reach the hub; the hub refuses the change
/// ([`HubError::Refused`]: an unknown host, HCA, port or LID) or does not answer.
pub fn change(hub: &Path, my_socket: &Path, change: &Control) -> Result<(), HubError> {
    let sock = bind_fresh(my_socket)?;
    let result = (|| {
        sock.connect(hub).map_err(|source| HubError::Socket {
            what: "cannot reach the hub at",
            path: hub.to_path_buf(),
            source,
        })?;
        sock.set_write_timeout(Some(CHANGE_TIMEOUT))?;
        sock.set_read_timeout(Some(CHANGE_TIMEOUT))?;
        sock.send(&HostMsg::Control(change.clone()).encode())?;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let n = sock.recv(&mut buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                HubError::Timeout(CHANGE_TIMEOUT)
            }
            _ => HubError::Io(e),
        })?;
        match HubMsg::decode(&buf[..n])? {
            HubMsg::Done => Ok(()),
            HubMsg::Error { message, .. } => Err(HubError::Refused(message)),
            other => Err(HubError::Refused(format!("unexpected answer {other:?}"))),
        }
    })();
    drop(sock);
    let _ = std::fs::remove_file(my_socket);
    result
}
