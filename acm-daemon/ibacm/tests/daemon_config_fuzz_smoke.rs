//! The `daemon_config` fuzz target's body (`support/daemon_config_fuzz.rs`) on a few
//! hundred inputs from acm-engine's seeded generator, so that CI exercises it on the
//! stable toolchain; `cargo +nightly fuzz run daemon_config` explores far more
//! (fuzz/README.md).

mod support {
    #[allow(unreachable_pub)]
    pub(crate) mod daemon_config_fuzz;
}

use support::daemon_config_fuzz::{Outcome, run};

#[allow(dead_code, unreachable_pub)]
#[path = "../../../acm-engine/tests/support/seeded.rs"]
mod seeded;

use seeded::Rng;

/// Lines that reach every branch of the daemon's options at least once: good and bad
/// values of each, Latin-1 in a value and in a comment.
const OPTION_LINES: [&[u8]; 18] = [
    b"max_queued_reply_bytes 1048576",
    b"worker_threads 4",
    b"worker_threads 257",
    b"max_connections_per_user 4096",
    b"max_connections_per_user 0",
    b"max_queued_reply_bytes 65535",
    b"max_queued_reply_bytes banana",
    b"metrics_interval 0",
    b"metrics_interval 30",
    b"metrics_file /tmp/acm.prom",
    b"metrics_file relative.prom",
    b"server_socket_mode 0660",
    b"server_socket_mode 0999",
    b"allow_users root, 0",
    b"allow_groups gr\xfcn",
    b"server_socket_group",
    b"# r\xe9glages",
    b"log_file /var/log/caf\xe9.log",
];

/// Address-file lines: good, an unknown device, a bad port, Latin-1.
const ADDR_LINES: [&[u8]; 4] = [
    b"fakehost fakeib0 1 default",
    b"x mlx9_9 1 default",
    b"y fakeib0 99 0x12345",
    b"caf\xe9 fakeib0 1 default",
];

#[test]
fn daemon_config_fuzz_body_on_seeded_inputs() {
    let mut rng = Rng(0x15_dae);
    let mut outcomes = Vec::new();
    for i in 0..300 {
        let mut input = Vec::new();
        // Some known lines (one of them alone every 20th input, so that each is also
        // read where nothing refused comes before it), then generated text.
        let known = if i % 20 == 0 { 1 } else { rng.next() % 4 };
        for _ in 0..known {
            input
                .extend_from_slice(OPTION_LINES[(rng.next() % OPTION_LINES.len() as u64) as usize]);
            input.push(b'\n');
        }
        input.extend_from_slice(&rng.config_text(300));
        input.push(0);
        for _ in 0..rng.next() % 3 {
            input.extend_from_slice(ADDR_LINES[(rng.next() % 4) as usize]);
            input.push(b'\n');
        }
        input.extend_from_slice(&rng.config_text(200));
        outcomes.push(run(&input));
    }
    // And raw bytes, NULs and all.
    for _ in 0..300 {
        outcomes.push(run(&rng.bytes(600)));
    }
    // The inputs reach both ends: options the daemon starts with, and refused ones.
    let accepted = outcomes.iter().filter(|&&o| o == Outcome::Accepted).count();
    let refused = outcomes.len() - accepted;
    assert!(
        accepted > 50 && refused > 50,
        "{accepted} accepted, {refused} refused"
    );
}
