//! Helpers shared by the hub's tests (`tests/hub.rs`) and those of the
//! `acm-fabric-hub` binary (`fabric-hub/tests/binary.rs`, which includes this file by
//! path): a directory for their sockets, and bounded waits for what the hub sends.

#![allow(dead_code, unreachable_pub)]

use acm_engine::FabricEvent;
use acm_io_sim::hub::wire::TopologyEvent;
use acm_io_sim::hub::{HubClient, HubError};
use std::path::PathBuf;
use std::time::Duration;

/// How long a test waits for the hub's next message before failing.
pub const WAIT: Duration = Duration::from_secs(5);

/// A directory for the test's sockets, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory named after `tag`, the process and the time, so that tests
    /// running at once never share one.
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("acm-hub-{tag}-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    /// The path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a receive brought within [`WAIT`]; panics if the hub failed or sent nothing.
fn arrived<T>(received: Result<Option<T>, HubError>) -> T {
    received
        .expect("the hub answers")
        .unwrap_or_else(|| panic!("nothing from the hub within {WAIT:?}"))
}

/// The next fabric event the hub sends `client`.
pub fn next_event(client: &mut HubClient) -> FabricEvent {
    arrived(client.recv_event(WAIT))
}

/// The next topology change the hub tells `client`.
pub fn next_change(client: &mut HubClient) -> TopologyEvent {
    arrived(client.recv_topology(WAIT))
}
