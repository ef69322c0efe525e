//! RDMA netlink LS requests and replies: parse → emit → parse.
#![no_main]

use acm_proto::netlink::{LsReplyRepr, LsRequestRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = LsRequestRepr::parse(data) {
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(LsRequestRepr::parse(&out), Ok(r));
    }
    if let Ok(r) = LsReplyRepr::parse(data) {
        assert_eq!(LsReplyRepr::parse(&r.to_vec()), Ok(r));
    }
});
