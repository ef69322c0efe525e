//! Bracket lists for `-d`, `-s` and `-S` (docs/ib-acme.md §8): `node[01-03,7]` names
//! node01, node02, node03 and node07, so one command can resolve or query a whole range.
//!
//! Grammar, as Debian's `ib_acme` reads it:
//!
//! * `base[items]`: everything before the first `[` is the base (possibly empty);
//!   everything after the first `]` is ignored (Debian drops it too); a missing `]` is
//!   tolerated.
//! * Items are separated by `,`; empty items are skipped.
//! * An item is `a` or `a-b`, numbers read like C's `atoi` (leading blanks, a sign, then
//!   digits; anything else reads as 0). Each number is zero-padded to the width of the
//!   text before the item's `-` (the whole item when it has none), so `01-03` keeps two
//!   digits.
//! * A word without `[` is one item, taken whole.
//!
//! Where Debian produces garbage or crashes we refuse the list instead: a range whose end
//! is below its start, a list with no items, or more than [`MAX_ITEMS`] names.

use super::cnum::atoi;
use thiserror::Error;

/// Most names one list may expand to; far more than any fabric has hosts, and a bound on
/// the memory a typo like `[1-999999999]` can take.
pub const MAX_ITEMS: usize = 65_536;

/// Why a list cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BracketError {
    /// `b < a` in an item `a-b`.
    #[error("range '{0}' ends before it starts")]
    Reversed(String),
    /// `[]`, `[,]`, …
    #[error("the list names nothing")]
    Empty,
    /// More than [`MAX_ITEMS`] names.
    #[error("the list names more than {MAX_ITEMS} items")]
    TooMany,
}

/// Expands one argument into the names it stands for.
///
/// # Errors
/// See [`BracketError`].
pub fn expand(arg: &str) -> Result<Vec<String>, BracketError> {
    let Some(open) = arg.find('[') else {
        return Ok(vec![arg.to_owned()]);
    };
    let base = &arg[..open];
    let after = &arg[open + 1..];
    let list = after.find(']').map_or(after, |close| &after[..close]);
    let mut out = Vec::new();
    for item in list.split(',').filter(|i| !i.is_empty()) {
        let (low, high, width) = match item.find('-') {
            Some(dash) => (atoi(item), atoi(&item[dash + 1..]), dash),
            None => {
                let v = atoi(item);
                (v, v, item.chars().count())
            }
        };
        if high < low {
            return Err(BracketError::Reversed(item.to_owned()));
        }
        let count = usize::try_from(i64::from(high) - i64::from(low) + 1).unwrap_or(usize::MAX);
        if out.len().saturating_add(count) > MAX_ITEMS {
            return Err(BracketError::TooMany);
        }
        out.extend((low..=high).map(|n| format!("{base}{n:0width$}")));
    }
    if out.is_empty() {
        return Err(BracketError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(arg: &str) -> Vec<String> {
        expand(arg).unwrap()
    }

    #[test]
    fn spec_examples() {
        assert_eq!(ok("node[01-03]"), ["node01", "node02", "node03"]);
        assert_eq!(ok("node[1-3,5]"), ["node1", "node2", "node3", "node5"]);
        assert_eq!(ok("[1-2]"), ["1", "2"]);
        assert_eq!(ok("10.0.0.[2-3]"), ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(ok("/tmp/acm[1-2]"), ["/tmp/acm1", "/tmp/acm2"]);
    }

    #[test]
    fn no_brackets_is_one_item() {
        assert_eq!(ok("10.0.0.1"), ["10.0.0.1"]);
        assert_eq!(ok("/tmp/a,b.sock"), ["/tmp/a,b.sock"]);
        assert_eq!(ok(""), [""]);
    }

    #[test]
    fn widths_follow_the_first_number() {
        assert_eq!(ok("x[001-2,7,09-10]"), ["x001", "x002", "x7", "x09", "x10"]);
        assert_eq!(ok("x[007]"), ["x007"]);
        assert_eq!(ok("x[ 1- 2]"), ["x01", "x02"]);
        assert_eq!(ok("x[7 ]"), ["x07"]);
        assert_eq!(ok("x[+1-+2]"), ["x01", "x02"]);
    }

    #[test]
    fn debian_tolerances() {
        // Suffix after ']' dropped, unclosed list accepted, empty items skipped.
        assert_eq!(ok("x[1-2].sock"), ["x1", "x2"]);
        assert_eq!(ok("x[1-3"), ["x1", "x2", "x3"]);
        assert_eq!(ok("x[1,,2]"), ["x1", "x2"]);
        assert_eq!(ok("x[1][2]"), ["x1"]);
        // atoi reads junk as 0 and stops at the first non-digit.
        assert_eq!(ok("x[a-b]"), ["x0"]);
        assert_eq!(ok("x[k]"), ["x0"]);
        assert_eq!(ok("x[1-2-3]"), ["x1", "x2"]);
        // A leading '-' is the range separator at width 0, as in Debian.
        assert_eq!(ok("x[-2]"), ["x-2", "x-1", "x0", "x1", "x2"]);
        assert_eq!(ok("x[2-2]"), ["x2"]);
    }

    #[test]
    fn refused_lists() {
        assert_eq!(expand("x[3-1]"), Err(BracketError::Reversed("3-1".into())));
        assert_eq!(expand("x[1-]"), Err(BracketError::Reversed("1-".into())));
        assert_eq!(
            expand("x[1--2]"),
            Err(BracketError::Reversed("1--2".into()))
        );
        assert_eq!(expand("x[]"), Err(BracketError::Empty));
        assert_eq!(expand("x[,]"), Err(BracketError::Empty));
        assert_eq!(expand("x["), Err(BracketError::Empty));
        assert_eq!(expand("x[1-999999999]"), Err(BracketError::TooMany));
        assert_eq!(expand("x[1-65536]").map(|v| v.len()), Ok(65_536));
    }
}
