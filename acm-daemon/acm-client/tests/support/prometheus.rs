//! A strict check of the Prometheus text exposition format (version 0.0.4), for the
//! metrics `ib_acme --format prometheus` prints and the daemon's `--metrics-file`
//! holds. Stricter than Prometheus where our writer promises more: every family has a
//! `TYPE` line before its samples, counters end in `_total`, there are no blank lines
//! and no timestamps (node_exporter's textfile collector refuses them).
//!
//! Shared by the unit tests of `acm_client::metrics` (included by path) and the process
//! tests, so both hold the text to the same rules.

use std::collections::HashSet;

/// Checks `text`; returns how many samples it holds, or the first problem with its line
/// number.
pub(crate) fn check(text: &str) -> Result<usize, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the text does not end with a line feed".into());
    }
    let mut v = Validator::default();
    for (i, line) in text.lines().enumerate() {
        v.line(line)
            .map_err(|e| format!("line {}: {e}: {line:?}", i + 1))?;
    }
    Ok(v.samples)
}

#[derive(Default)]
struct Validator {
    /// The family being written: its name and type (once its `TYPE` line was seen).
    current: Option<(String, Option<String>)>,
    /// Families already ended: none may come back.
    done: HashSet<String>,
    helps: HashSet<String>,
    types: HashSet<String>,
    series: HashSet<String>,
    samples: usize,
}

impl Validator {
    fn line(&mut self, line: &str) -> Result<(), String> {
        if line.is_empty() {
            return Err("blank line".into());
        }
        if let Some(rest) = line.strip_prefix('#') {
            return self.comment(rest);
        }
        self.sample(line)
    }

    /// Enters family `name`, ending the one before.
    fn enter(&mut self, name: &str) -> Result<(), String> {
        if self.current.as_ref().is_some_and(|(n, _)| n == name) {
            return Ok(());
        }
        if let Some((old, _)) = self.current.take() {
            self.done.insert(old);
        }
        if self.done.contains(name) {
            return Err(format!("family {name} is split"));
        }
        self.current = Some((name.to_owned(), None));
        Ok(())
    }

    fn comment(&mut self, rest: &str) -> Result<(), String> {
        let mut words = rest.strip_prefix(' ').unwrap_or(rest).splitn(3, ' ');
        match words.next() {
            Some("HELP") => {
                let name = words.next().ok_or("HELP without a name")?;
                metric_name(name)?;
                let text = words.next().unwrap_or("");
                check_escapes(text)?;
                if !self.helps.insert(name.to_owned()) {
                    return Err(format!("second HELP for {name}"));
                }
                self.enter(name)
            }
            Some("TYPE") => {
                let name = words.next().ok_or("TYPE without a name")?;
                metric_name(name)?;
                let kind = words.next().ok_or("TYPE without a type")?;
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                    return Err(format!("unknown type {kind}"));
                }
                if kind == "counter" && !name.ends_with("_total") {
                    return Err(format!("counter {name} does not end in _total"));
                }
                if !self.types.insert(name.to_owned()) {
                    return Err(format!("second TYPE for {name}"));
                }
                self.enter(name)?;
                if let Some((_, k)) = &mut self.current {
                    *k = Some(kind.to_owned());
                }
                Ok(())
            }
            // Any other comment is allowed.
            _ => Ok(()),
        }
    }

    fn sample(&mut self, line: &str) -> Result<(), String> {
        let name_end = line.find(['{', ' ']).ok_or("no value")?;
        let name = &line[..name_end];
        metric_name(name)?;
        let (family, kind) = self.current.as_ref().ok_or("a sample before any TYPE")?;
        let kind = kind.as_deref().ok_or("a sample before its family's TYPE")?;
        let suffixed = matches!(kind, "histogram" | "summary")
            && ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family.as_str()));
        if name != family && !suffixed {
            return Err(format!("sample {name} outside its family ({family})"));
        }
        let mut rest = &line[name_end..];
        let mut label_names = Vec::new();
        if let Some(after) = rest.strip_prefix('{') {
            rest = labels(after, &mut label_names)?;
        }
        let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
        if value.contains(' ') {
            return Err("a timestamp or trailing text after the value".into());
        }
        number(value)?;
        let mut key = label_names;
        key.sort();
        if !self.series.insert(format!("{name}{{{}}}", key.join(","))) {
            return Err(format!("series {name} repeated"));
        }
        self.samples += 1;
        Ok(())
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn metric_name(name: &str) -> Result<(), String> {
    let ok = name.chars().enumerate().all(|(i, c)| {
        c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
    });
    if ok && !name.is_empty() {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

/// Label pairs up to the closing brace; returns what follows it and collects
/// `name="value"` for the series key.
fn labels<'a>(mut s: &'a str, seen: &mut Vec<String>) -> Result<&'a str, String> {
    let mut names = HashSet::new();
    loop {
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let eq = s.find('=').ok_or("label without '='")?;
        let name = &s[..eq];
        let ok = !name.is_empty()
            && name
                .chars()
                .enumerate()
                .all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()));
        if !ok {
            return Err(format!("bad label name {name:?}"));
        }
        if !names.insert(name.to_owned()) {
            return Err(format!("label {name} repeated"));
        }
        let body = s[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match (escaped, c) {
                (true, '\\' | '"' | 'n') => escaped = false,
                (true, _) => return Err(format!("bad escape \\{c}")),
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, '\n') => return Err("raw line feed in a label".into()),
                (false, _) => {}
            }
        }
        let end = end.ok_or("unterminated label value")?;
        seen.push(format!("{name}=\"{}\"", &body[..end]));
        s = &body[end + 1..];
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("expected ',' or '}' after a label".into());
        }
    }
}

/// The escapes a HELP text may hold: `\\` and `\n`.
fn check_escapes(s: &str) -> Result<(), String> {
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && !matches!(chars.next(), Some('\\' | 'n')) {
            return Err("bad escape in HELP".into());
        }
    }
    Ok(())
}

/// A Go `ParseFloat` number as Prometheus writes them, or `NaN`, `+Inf`, `-Inf`.
fn number(s: &str) -> Result<(), String> {
    if ["NaN", "+Inf", "-Inf"].contains(&s) {
        return Ok(());
    }
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match digits.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (digits, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    let ok = (!int.is_empty() || !frac.is_empty())
        && all_digits(int)
        && all_digits(frac)
        && exponent.is_none_or(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && all_digits(e)
        });
    if ok {
        Ok(())
    } else {
        Err(format!("bad value {s:?}"))
    }
}
