//! IPoIB hardware address: parse → emit → parse, and bytes re-emit unchanged.
#![no_main]

use acm_proto::ipoib::IpoibHwAddrRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = IpoibHwAddrRepr::parse(data) {
        let out = a.to_bytes();
        assert_eq!(&out[..], &data[..20]);
        assert_eq!(IpoibHwAddrRepr::parse(&out), Ok(a));
    }
});
