//! MAD-family parsers (common header, SA header, MCMemberRecord, InformInfo, Notice,
//! ACM MAD, MGID):
//! parse → emit → parse must give the same value.
#![no_main]

use acm_proto::acm_mad::AcmMadRepr;
use acm_proto::mad::MadHeaderRepr;
use acm_proto::mcmember::McMemberRecordRepr;
use acm_proto::mgid::AcmMgid;
use acm_proto::notice::{InformInfoRepr, NoticeRepr};
use acm_proto::sa::SaHeaderRepr;
use acm_proto::Gid;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = MadHeaderRepr::parse(data) {
        assert_eq!(MadHeaderRepr::parse(&h.to_bytes()), Ok(h));
    }
    if let Ok(h) = SaHeaderRepr::parse(data) {
        let mut out = [0u8; 56];
        h.emit(&mut out);
        assert_eq!(SaHeaderRepr::parse(&out), Ok(h));
    }
    if let Ok(r) = McMemberRecordRepr::parse(data) {
        assert_eq!(McMemberRecordRepr::parse(&r.to_bytes()), Ok(r));
    }
    if let Ok(r) = InformInfoRepr::parse(data) {
        assert_eq!(InformInfoRepr::parse(&r.to_bytes()), Ok(r));
    }
    if let Ok(n) = NoticeRepr::parse(data) {
        assert_eq!(NoticeRepr::parse(&n.to_bytes()), Ok(n));
        let _ = n.sm_event();
    }
    if let Ok(m) = AcmMadRepr::parse(data) {
        let out = m.to_bytes();
        let again = AcmMadRepr::parse(&out).expect("re-emitted ACM MAD must parse");
        assert_eq!(again.to_bytes(), out);
    }
    if let Some(g) = Gid::read(data) {
        if let Ok(m) = AcmMgid::parse(&g) {
            assert_eq!(AcmMgid::parse(&m.to_gid()), Ok(m));
        }
    }
});
