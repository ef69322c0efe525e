//! Client messages, both directions, and the stream splitter: whatever parses must
//! re-emit to the same bytes, and the re-emitted bytes must parse to the same value.
#![no_main]

use acm_proto::client::{ClientMessage, Direction, split_stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for dir in [Direction::Request, Direction::Response] {
        for part in split_stream(data, dir) {
            let Ok((_, bytes)) = part else { break };
            if let Ok(msg) = ClientMessage::parse(bytes, dir) {
                let out = msg.to_vec(dir);
                assert_eq!(out, bytes);
                assert_eq!(ClientMessage::parse(&out, dir).as_ref(), Ok(&msg));
            }
        }
    }
});
