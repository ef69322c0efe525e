//! Hex text input for `acmdump --hex`.

use thiserror::Error;

/// Hex text that is not an even run of hex digits.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HexError {
    /// A character that is neither a hex digit nor a separator.
    #[error("hex input: unexpected {found:?} at character {position}")]
    BadChar {
        /// The character.
        found: char,
        /// Its index in the text (0-based, counted in characters).
        position: usize,
    },
    /// An odd number of hex digits.
    #[error("hex input: odd number of hex digits ({digits})")]
    OddDigits {
        /// How many digits there were.
        digits: usize,
    },
}

/// Decodes hex text. Whitespace, `:`, `-` and `_` separate nothing and are skipped, as is
/// a `0x` prefix on any whitespace-separated word and anything from `#` to the end of a
/// line (so annotated dumps can be pasted back in).
pub fn decode_hex(text: &str) -> Result<Vec<u8>, HexError> {
    let mut digits = Vec::with_capacity(text.len());
    let mut position = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or("");
        let mut chars = code.chars().peekable();
        let mut word_start = true;
        while let Some(c) = chars.next() {
            let here = position;
            position += 1;
            if c.is_whitespace() {
                word_start = true;
                continue;
            }
            if word_start && c == '0' && matches!(chars.peek(), Some('x' | 'X')) {
                chars.next();
                position += 1;
                word_start = false;
                continue;
            }
            word_start = false;
            match c {
                ':' | '-' | '_' => {}
                _ => match c.to_digit(16) {
                    Some(d) => digits.push(d as u8),
                    None => {
                        return Err(HexError::BadChar {
                            found: c,
                            position: here,
                        });
                    }
                },
            }
        }
        position += line.chars().count() - code.chars().count();
    }
    if digits.len() % 2 != 0 {
        return Err(HexError::OddDigits {
            digits: digits.len(),
        });
    }
    Ok(digits.chunks_exact(2).map(|p| (p[0] << 4) | p[1]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_prefixes_and_comments() {
        assert_eq!(
            decode_hex("01 02:03\n0xff # note 99\n"),
            Ok(vec![1, 2, 3, 0xff])
        );
        assert_eq!(decode_hex("0A0b"), Ok(vec![0x0a, 0x0b]));
        assert_eq!(decode_hex(""), Ok(vec![]));
    }

    #[test]
    fn errors_say_where() {
        assert_eq!(
            decode_hex("01 zz"),
            Err(HexError::BadChar {
                found: 'z',
                position: 3
            })
        );
        assert_eq!(decode_hex("012"), Err(HexError::OddDigits { digits: 3 }));
        assert_eq!(
            decode_hex("# c\n0g"),
            Err(HexError::BadChar {
                found: 'g',
                position: 5
            })
        );
    }
}
