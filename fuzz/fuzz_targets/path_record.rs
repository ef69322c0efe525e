//! PathRecord and ibv_path_data: parse → emit → parse.
#![no_main]

use acm_proto::path_record::{PathDataRepr, PathRecordRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = PathRecordRepr::parse(data) {
        let out = p.to_bytes();
        assert_eq!(&out[..], &data[..64]);
        assert_eq!(PathRecordRepr::parse(&out), Ok(p));
    }
    if let Ok(d) = PathDataRepr::parse(data) {
        let mut out = [0u8; 72];
        d.emit(&mut out);
        assert_eq!(PathDataRepr::parse(&out), Ok(d));
    }
});
