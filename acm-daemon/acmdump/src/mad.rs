//! MAD input (optionally behind a 40-byte GRH): fixed-size records, decoded by class.
//!
//! ACM MADs (class 0x2C) and SA MADs carrying a PathRecord, an MCMemberRecord, an
//! InformInfo or a Notice (trap subscriptions and Reports, docs/protocol/sa.md §9) are
//! decoded completely; for anything else the common header is decoded and the rest is shown as
//! hex (and re-emitted from that hex, so `--roundtrip` still checks the decoded part).

use super::{DumpError, Item, fields, parse_error};
use crate::Decoded;
use acm_proto::acm_mad::AcmMadRepr;
use acm_proto::grh::GrhRepr;
use acm_proto::mad::{AttrId, MAD_HEADER_LEN, MAD_LEN, MadHeaderRepr, MgmtClass};
use acm_proto::mcmember::{MCMEMBER_RECORD_LEN, McMemberRecordRepr};
use acm_proto::notice::{INFORM_INFO_LEN, InformInfoRepr, NOTICE_LEN, NoticeRepr};
use acm_proto::path_record::{PATH_RECORD_LEN, PathRecordRepr};
use acm_proto::sa::{SA_HEADER_LEN, SaHeaderRepr};
use acm_proto::{ParseError, Reason};
use serde_json::{Map, Value, json};

pub(crate) fn decode(
    input: &[u8],
    grh_len: usize,
) -> impl Iterator<Item = Result<Item, DumpError>> + '_ {
    let record = grh_len + MAD_LEN;
    let count = input.len().div_ceil(record);
    (0..count).map(move |index| {
        let offset = index * record;
        let bytes = &input[offset..input.len().min(offset + record)];
        if bytes.len() < record {
            let e = ParseError {
                format: if grh_len > 0 { "GRH+MAD" } else { "MAD" },
                field: "record",
                offset: 0,
                reason: Reason::Truncated {
                    needed: record,
                    available: bytes.len(),
                },
            };
            return Err(parse_error(index, offset, e));
        }
        let mut out = Map::new();
        let mut reencoded = Vec::with_capacity(record);
        if grh_len > 0 {
            let grh = GrhRepr::parse(bytes).map_err(|e| parse_error(index, offset, e))?;
            out.insert("grh".into(), fields(&grh));
            reencoded.extend_from_slice(&grh.to_bytes());
        }
        let mad = &bytes[grh_len..];
        let (kind, value, mad_bytes) =
            decode_mad(mad).map_err(|e| parse_error(index, offset + grh_len, e))?;
        out.insert("mad".into(), value);
        reencoded.extend_from_slice(&mad_bytes);
        Ok(Item {
            decoded: Decoded {
                index,
                offset,
                len: record,
                kind,
                fields: Value::Object(out),
            },
            bytes_in: offset..offset + record,
            reencoded,
        })
    })
}

/// Decodes one 256-byte MAD; returns its kind, its fields and its re-encoding.
fn decode_mad(mad: &[u8]) -> Result<(String, Value, Vec<u8>), ParseError> {
    let header = MadHeaderRepr::parse(mad)?;
    if header.mgmt_class == MgmtClass::ACM {
        let m = AcmMadRepr::parse(mad)?;
        return Ok(("ACM MAD".into(), fields(&m), m.to_bytes().to_vec()));
    }
    if header.mgmt_class == MgmtClass::SA {
        let sa = SaHeaderRepr::parse(mad)?;
        let mut out = vec![0u8; MAD_LEN];
        sa.emit(&mut out);
        let data = &mad[SA_HEADER_LEN..];
        let mut value = Map::new();
        value.insert("header".into(), fields(&sa));
        // A record: parsed, written back after the header, its fields named; its length.
        macro_rules! record {
            ($repr:ty, $name:literal, $len:expr) => {{
                let r = <$repr>::parse(data).map_err(|e| e.at_base(SA_HEADER_LEN))?;
                r.emit(&mut out[SA_HEADER_LEN..]);
                value.insert($name.into(), fields(&r));
                $len
            }};
        }
        let record_len = match sa.mad.attr_id {
            AttrId::PATH_RECORD => record!(PathRecordRepr, "path_record", PATH_RECORD_LEN),
            AttrId::MC_MEMBER_RECORD => {
                record!(McMemberRecordRepr, "mcmember_record", MCMEMBER_RECORD_LEN)
            }
            AttrId::INFORM_INFO => record!(InformInfoRepr, "inform_info", INFORM_INFO_LEN),
            AttrId::NOTICE => record!(NoticeRepr, "notice", NOTICE_LEN),
            _ => 0,
        };
        let rest = &data[record_len..];
        out[SA_HEADER_LEN + record_len..].copy_from_slice(rest);
        if rest.iter().any(|&b| b != 0) {
            value.insert("data_rest_hex".into(), json!(hex(rest)));
        }
        let kind = format!("SA MAD {} {}", sa.mad.method, sa.mad.attr_id);
        return Ok((kind, Value::Object(value), out));
    }
    let mut out = header.to_bytes().to_vec();
    out.extend_from_slice(&mad[MAD_HEADER_LEN..MAD_LEN]);
    let value =
        json!({ "header": fields(&header), "payload_hex": hex(&mad[MAD_HEADER_LEN..MAD_LEN]) });
    Ok((format!("MAD class {}", header.mgmt_class), value, out))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_proto::Gid;
    use acm_proto::mad::Method;
    use acm_proto::notice::{SmTrap, TrapNumber};

    #[test]
    fn subscriptions_and_reports_are_decoded_and_round_trip() {
        let gid = Gid::from_parts(0xfe80 << 48, 0x0002_c903_00a0_b002);
        let mut report = [0u8; MAD_LEN];
        let mut h = SaHeaderRepr::report_resp(7);
        h.mad.method = Method::REPORT;
        h.emit(&mut report);
        NoticeRepr::sm_trap(SmTrap::GidOutOfService(gid), 1, Gid::default())
            .emit(&mut report[SA_HEADER_LEN..]);
        let (kind, value, out) = decode_mad(&report).unwrap();
        assert_eq!(kind, "SA MAD REPORT NOTICE");
        assert_eq!(value["notice"]["trap_number"], "GID_OUT_OF_SERVICE");
        assert_eq!(out, report.to_vec());

        let mut set = [0u8; MAD_LEN];
        SaHeaderRepr::inform_info_set(9).emit(&mut set);
        InformInfoRepr::subscribe(TrapNumber::MCAST_GROUP_CREATED).emit(&mut set[SA_HEADER_LEN..]);
        let (kind, value, out) = decode_mad(&set).unwrap();
        assert_eq!(kind, "SA MAD SET INFORM_INFO");
        assert_eq!(value["inform_info"]["trap_number"], "MCAST_GROUP_CREATED");
        assert_eq!(out, set.to_vec());
    }
}
