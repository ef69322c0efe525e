//! Our event loop (`Server` on the simulated demo fabric, log_level 0) on a thread of
//! the test process, for tests that look at the process from inside (its allocations,
//! its epoll descriptor).

use acm_io_sim::FabricSpec;
use ibacm::{DEMO_FABRIC, KernelChannel, Listener, Logger, Server, SimBackend};
use std::path::Path;

/// Binds `sock` and serves on it from a new thread, after `tune` had its say on the
/// server; the thread runs until the process ends.
pub(crate) fn spawn(sock: &Path, tune: impl FnOnce(&mut Server<SimBackend>) + Send + 'static) {
    let listener = Listener::Unix(mio::net::UnixListener::bind(sock).expect("bind"));
    // The engine and the simulator are single-threaded: build the server on its thread.
    std::thread::spawn(move || {
        let spec = FabricSpec::parse(DEMO_FABRIC).expect("the demo fabric");
        let mut config = acm_io_sim::fabric::engine_config(&spec, acm_io_sim::HostId(0));
        // log_level 0, as in production: level 2 formats a line per request by design.
        config.options.log_level = 0;
        let backend = SimBackend::new(spec, acm_io_sim::HostId(0), config, 1, "demo".into());
        let (log, _) = Logger::open("stderr", ibacm::max_level(0));
        let mut server = Server::new(
            listener,
            backend,
            KernelChannel::none(),
            log,
            std::time::Instant::now(),
        )
        .expect("server");
        tune(&mut server);
        let _ = server.run();
    });
}
