//! Seeds: `ACM_SIM_SEED` pins one, a fixed one is the default, and a failing run says
//! how to reproduce it.

/// The seed scenarios use when `ACM_SIM_SEED` is not set.
pub const DEFAULT_SEED: u64 = 0x5EED_0ACE;

/// `ACM_SIM_SEED` (decimal or 0x-hex), or [`DEFAULT_SEED`].
#[must_use]
pub fn seed_from_env() -> u64 {
    std::env::var("ACM_SIM_SEED")
        .ok()
        .and_then(|s| parse_seed(&s))
        .unwrap_or(DEFAULT_SEED)
}

fn parse_seed(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Prints how to rerun a failing seed when dropped during a panic.
struct RerunHint(u64);

impl Drop for RerunHint {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("rerun with ACM_SIM_SEED={}", self.0);
        }
    }
}

/// Runs a scenario twice with `seed` and checks that both runs give the same trace
/// hash (the scenario returns it). On any failure it prints `rerun with
/// ACM_SIM_SEED=<seed>`. Returns the hash.
///
/// # Panics
/// If the scenario panics or the two runs differ.
pub fn run_seeded(seed: u64, scenario: impl Fn(u64) -> u64) -> u64 {
    let _hint = RerunHint(seed);
    let first = scenario(seed);
    let second = scenario(seed);
    assert_eq!(
        first, second,
        "two runs with seed {seed} gave different traces"
    );
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_both_bases() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2A "), Some(42));
        assert_eq!(parse_seed("junk"), None);
        assert_eq!(run_seeded(7, |s| s * 2), 14);
    }
}
