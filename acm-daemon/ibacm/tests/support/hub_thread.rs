//! A fabric hub served from a thread of the test, for the process tests whose daemons
//! share one fabric (`--fabric hub:…`).

use acm_io_sim::FabricSpec;
use acm_io_sim::hub::Hub;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

/// The fabric hub in a thread of the test; stopped on drop.
pub(crate) struct HubThread {
    flag: Arc<AtomicBool>,
    done: Option<mpsc::Receiver<Result<(), String>>>,
}

impl HubThread {
    /// Serves `spec` on the socket at `path` until stopped.
    pub(crate) fn start(spec: FabricSpec, path: &Path) -> Self {
        let mut hub = Hub::bind(spec, path).expect("bind the hub");
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        let (tx, done) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(hub.serve_until(&f).map_err(|e| e.to_string()));
        });
        Self {
            flag,
            done: Some(done),
        }
    }

    /// Stops the hub and checks that it served without an error.
    pub(crate) fn stop(mut self) {
        self.flag.store(true, Ordering::Relaxed);
        let done = self.done.take().expect("running");
        let r = done
            .recv_timeout(Duration::from_secs(5))
            .expect("the hub stops within 5 s");
        assert_eq!(r, Ok(()), "the hub served without error");
    }
}

impl Drop for HubThread {
    fn drop(&mut self) {
        self.flag.store(true, Ordering::Relaxed);
    }
}
