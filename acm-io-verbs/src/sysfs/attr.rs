//! Reading sysfs files and directories, with every failure turned into a
//! [`DiscoveryError`] that names the path.
//!
//! A missing file is not an error at this level: some attributes are optional (old
//! kernels lack `link_layer`) and tables end where the next index is missing, so the
//! callers decide.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use super::error::DiscoveryError;
use super::values::Value;

/// sysfs attributes are at most a page; reading stops well beyond that so that a
/// fixture or a mis-mounted root pointing at a huge file cannot exhaust memory.
const MAX_ATTR_BYTES: u64 = 64 * 1024;

/// Bad text is quoted in messages up to this many characters.
const MAX_QUOTED_CHARS: usize = 80;

/// The file's text without surrounding whitespace (the kernel ends every attribute
/// with a newline), or `None` when the file does not exist.
pub(super) fn read_text(path: &Path) -> Result<Option<String>, DiscoveryError> {
    let io_error = |source| DiscoveryError::Io {
        path: path.to_owned(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_ATTR_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    Ok(Some(String::from_utf8_lossy(&bytes).trim().to_owned()))
}

/// The file parsed as `value`, or `None` when it does not exist.
pub(super) fn read_optional<T>(path: &Path, value: &Value<T>) -> Result<Option<T>, DiscoveryError> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    parse_at(path, &text, value).map(Some)
}

/// The file parsed as `value`; a missing file is an error.
pub(super) fn read_required<T>(path: &Path, value: &Value<T>) -> Result<T, DiscoveryError> {
    match read_optional(path, value)? {
        Some(v) => Ok(v),
        None => Err(missing(path, "file")),
    }
}

/// The error for a file or directory that must exist and does not.
pub(super) fn missing(path: &Path, what: &str) -> DiscoveryError {
    DiscoveryError::Io {
        path: path.to_owned(),
        source: io::Error::new(
            io::ErrorKind::NotFound,
            format!("the {what} does not exist"),
        ),
    }
}

/// `text`, found at `path`, parsed as `value`.
pub(super) fn parse_at<T>(path: &Path, text: &str, value: &Value<T>) -> Result<T, DiscoveryError> {
    (value.parse)(text).ok_or_else(|| DiscoveryError::Malformed {
        path: path.to_owned(),
        text: quoted(text),
        expected: value.expected,
    })
}

/// The names in a directory, dot entries left out (fixture trees keep empty directories
/// in git with a `.gitkeep`), or `None` when the directory does not exist.
///
/// The order is the file system's; callers sort.
pub(super) fn list_dir(path: &Path) -> Result<Option<Vec<String>>, DiscoveryError> {
    let io_error = |source| DiscoveryError::Io {
        path: path.to_owned(),
        source,
    };
    let entries = match path.read_dir() {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_error)?.file_name();
        let Some(name) = name.to_str() else {
            return Err(DiscoveryError::Malformed {
                path: path.join(&name),
                text: quoted(&name.to_string_lossy()),
                expected: "a UTF-8 name",
            });
        };
        if !name.starts_with('.') {
            names.push(name.to_owned());
        }
    }
    Ok(Some(names))
}

/// `text` shortened for an error message.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_shortened_on_a_char_boundary() {
        assert_eq!(quoted("zzz"), "zzz");
        let long = "é".repeat(100);
        let q = quoted(&long);
        assert_eq!(q.chars().count(), MAX_QUOTED_CHARS + 1);
        assert!(q.ends_with('…'));
    }
}
