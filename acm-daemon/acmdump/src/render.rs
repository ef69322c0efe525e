//! Printing decoded messages field by field, as text or JSON.
//!
//! Both forms come from the same `serde` serialisation of the acm-proto Reprs, so the
//! text and the JSON can never disagree: text is the JSON tree flattened to one
//! `path = value` line per leaf.

use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// One decoded message, ready to print.
#[derive(Debug, Serialize)]
pub struct Decoded {
    /// Position in the input (0-based).
    pub index: usize,
    /// Byte offset of the message in the input.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
    /// What it was decoded as (e.g. `client RESOLVE`, `ACM MAD`).
    pub kind: String,
    /// The decoded fields.
    pub fields: Value,
}

/// The text form: a heading line per message, then `  path = value` per field.
pub fn to_text(messages: &[Decoded]) -> String {
    let mut out = String::new();
    for m in messages {
        let _ = writeln!(
            out,
            "[{:03}] @{} len={} {}",
            m.index, m.offset, m.len, m.kind
        );
        flatten(&m.fields, "", &mut out);
    }
    out
}

fn flatten(v: &Value, path: &str, out: &mut String) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(child, &p, out);
            }
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(is_scalar) => {
            let joined: Vec<String> = items.iter().map(scalar_text).collect();
            let _ = writeln!(out, "  {path} = [{}]", joined.join(", "));
        }
        Value::Array(items) => {
            if items.is_empty() {
                let _ = writeln!(out, "  {path} = []");
            }
            for (i, child) in items.iter().enumerate() {
                flatten(child, &format!("{path}[{i}]"), out);
            }
        }
        scalar => {
            let _ = writeln!(out, "  {path} = {}", scalar_text(scalar));
        }
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The JSON form: an array of messages.
pub fn to_json(messages: &[Decoded]) -> String {
    let mut s =
        serde_json::to_string_pretty(messages).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_flattens_nested_fields() {
        let m = Decoded {
            index: 0,
            offset: 16,
            len: 88,
            kind: "client RESOLVE".into(),
            fields: json!({"header": {"opcode": "RESOLVE", "data": [0, 1, 2]}, "entries": [{"addr": "10.0.0.1"}], "trailing": []}),
        };
        let text = to_text(&[m]);
        assert_eq!(
            text,
            "[000] @16 len=88 client RESOLVE\n  header.opcode = RESOLVE\n  header.data = [0, 1, 2]\n  entries[0].addr = 10.0.0.1\n  trailing = []\n"
        );
    }
}
