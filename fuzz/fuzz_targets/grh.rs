//! GRH: parse → emit → parse, and bytes re-emit unchanged.
#![no_main]

use acm_proto::grh::GrhRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = GrhRepr::parse(data) {
        let out = g.to_bytes();
        assert_eq!(GrhRepr::parse(&out), Ok(g));
    }
});
