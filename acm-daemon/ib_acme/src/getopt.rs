//! A getopt(3)-compatible scanner for `ib_acme`'s command line.
//!
//! clap cannot express what `ib_acme` accepts: optional arguments written either attached
//! (`-Pcol`) or as the next word when that word does not start with `-` (`-P col`, but
//! `-P -e` is two options), grouped flags (`-vc`), required arguments that swallow the
//! next word whatever it is (`-s -d` gives `-s` the argument `-d`), GNU argument
//! permutation (operands may appear anywhere and are ignored), `--` to end the options,
//! and glibc's exact diagnostics. This module implements that grammar from an option
//! string in getopt's notation (`x` flag, `x:` required, `x::` optional), plus long
//! options for our own extensions (`--json`, `--format FORMAT`), matched like
//! getopt_long (unique prefixes; an argument as `--format=x` or the next word).

use thiserror::Error;

/// Whether an option takes an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgKind {
    /// A flag (`v`).
    None,
    /// A required argument (`s:`): the rest of the word, or the whole next word.
    Required,
    /// An optional argument (`e::`): the rest of the word, or (when enabled) the next
    /// word if it does not start with `-`.
    Optional,
}

/// A parsed getopt option string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OptString {
    opts: Vec<(char, ArgKind)>,
    /// A leading `+`: stop at the first operand, as POSIX requires.
    stop_at_operand: bool,
}

impl OptString {
    /// Parses getopt notation. A leading `+` asks for POSIX scanning; a leading `:` (quiet
    /// mode in getopt) is accepted and ignored, since errors are returned, not printed.
    #[must_use]
    pub(crate) fn parse(spec: &str) -> Self {
        let mut rest = spec;
        let mut stop_at_operand = false;
        if let Some(r) = rest.strip_prefix('+') {
            stop_at_operand = true;
            rest = r;
        }
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        let chars: Vec<char> = rest.chars().collect();
        let mut opts = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let colons = chars[i + 1..]
                .iter()
                .take(2)
                .take_while(|&&x| x == ':')
                .count();
            let kind = match colons {
                0 => ArgKind::None,
                1 => ArgKind::Required,
                _ => ArgKind::Optional,
            };
            opts.push((c, kind));
            i += 1 + colons;
        }
        Self {
            opts,
            stop_at_operand,
        }
    }

    /// How option `c` takes its argument, or `None` if `c` is not an option.
    #[must_use]
    pub(crate) fn kind(&self, c: char) -> Option<ArgKind> {
        if c == ':' {
            return None;
        }
        self.opts.iter().find(|(o, _)| *o == c).map(|(_, k)| *k)
    }
}

/// One element of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A short option and its argument, if it took one.
    Short(char, Option<String>),
    /// A long flag, by its full name (without `--`).
    Long(&'static str),
    /// A long option with its argument.
    LongArg(&'static str, String),
    /// A word that is not an option.
    Operand(String),
}

/// A command-line error; `Display` is glibc's wording without the `prog: ` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum GetoptError {
    /// A character that is not in the option string.
    #[error("invalid option -- '{0}'")]
    Invalid(char),
    /// A required argument is missing (the option ended the command line).
    #[error("option requires an argument -- '{0}'")]
    MissingArgument(char),
    /// A `--word` that names no long flag (or is ambiguous).
    #[error("unrecognized option '{0}'")]
    UnknownLong(String),
    /// `--flag=value` for a flag that takes no value.
    #[error("option '--{0}' doesn't allow an argument")]
    LongWithArgument(&'static str),
    /// A long option that needs an argument ended the command line.
    #[error("option '--{0}' requires an argument")]
    LongMissingArgument(&'static str),
}

/// Scanner settings beyond the option string.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Settings<'a> {
    /// Long flags (no arguments), without the leading `--`.
    pub long_flags: &'a [&'static str],
    /// Long options that take an argument, without the leading `--`.
    pub long_options: &'a [&'static str],
    /// Let an optional argument be the next word when it does not start with `-`
    /// (`ib_acme`'s rule; plain getopt only takes attached optional arguments).
    pub optional_next_word: bool,
    /// Stop at the first operand (POSIXLY_CORRECT, or a `+` option string).
    pub posix: bool,
}

/// Iterator over the options and operands of `args` (which excludes the program name).
#[derive(Debug)]
pub(crate) struct Getopt<'a> {
    spec: &'a OptString,
    settings: Settings<'a>,
    args: &'a [String],
    /// Index of the word being scanned.
    word: usize,
    /// Byte offset of the next option character inside a grouped word, if any.
    cluster: Option<usize>,
    /// After `--`, or in POSIX mode after the first operand, everything is an operand.
    operands_only: bool,
}

impl<'a> Getopt<'a> {
    /// Scans `args` with `spec`.
    #[must_use]
    pub(crate) fn new(spec: &'a OptString, args: &'a [String], settings: Settings<'a>) -> Self {
        let mut settings = settings;
        settings.posix |= spec.stop_at_operand;
        Self {
            spec,
            settings,
            args,
            word: 0,
            cluster: None,
            operands_only: false,
        }
    }

    fn long(&mut self, body: &str) -> Result<Item, GetoptError> {
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let flags = self.settings.long_flags.iter().map(|f| (*f, false));
        let options = self.settings.long_options.iter().map(|f| (*f, true));
        let all: Vec<(&'static str, bool)> = flags.chain(options).collect();
        let exact = all.iter().find(|(f, _)| *f == name);
        let mut prefixed = all.iter().filter(|(f, _)| f.starts_with(name));
        let found = match exact {
            Some(f) => Some(*f),
            None => match (prefixed.next(), prefixed.next()) {
                (Some(f), None) => Some(*f),
                _ => None,
            },
        };
        match (found, value) {
            (Some((f, false)), None) => Ok(Item::Long(f)),
            (Some((f, false)), Some(_)) => Err(GetoptError::LongWithArgument(f)),
            (Some((f, true)), Some(v)) => Ok(Item::LongArg(f, v.to_owned())),
            (Some((f, true)), None) => {
                // Like a required short argument, the next word whatever it is.
                let next = self.args.get(self.word).cloned();
                let v = next.ok_or(GetoptError::LongMissingArgument(f))?;
                self.word += 1;
                Ok(Item::LongArg(f, v))
            }
            (None, _) => Err(GetoptError::UnknownLong(format!("--{body}"))),
        }
    }

    /// Continues a grouped word at byte `at`.
    fn short(&mut self, at: usize) -> Result<Item, GetoptError> {
        let args = self.args;
        let word = &args[self.word];
        let c = word[at..].chars().next().unwrap_or('\0');
        let next = at + c.len_utf8();
        let rest = &word[next..];
        let finish_word = |s: &mut Self| {
            s.cluster = None;
            s.word += 1;
        };
        let kind = match self.spec.kind(c) {
            Some(k @ (ArgKind::Required | ArgKind::Optional)) => k,
            // No argument: the word's next option, if it has one, comes next.
            unknown_or_none => {
                if rest.is_empty() {
                    finish_word(self);
                } else {
                    self.cluster = Some(next);
                }
                return match unknown_or_none {
                    None => Err(GetoptError::Invalid(c)),
                    Some(_) => Ok(Item::Short(c, None)),
                };
            }
        };
        // The argument is the rest of the word; else the next word, which an optional
        // argument takes only when the settings say so and it is no option.
        finish_word(self);
        if !rest.is_empty() {
            return Ok(Item::Short(c, Some(rest.to_owned())));
        }
        let next_word = args.get(self.word).filter(|a| {
            kind == ArgKind::Required || (self.settings.optional_next_word && !a.starts_with('-'))
        });
        match next_word {
            Some(a) => {
                let arg = a.clone();
                self.word += 1;
                Ok(Item::Short(c, Some(arg)))
            }
            None if kind == ArgKind::Required => Err(GetoptError::MissingArgument(c)),
            None => Ok(Item::Short(c, None)),
        }
    }
}

impl Iterator for Getopt<'_> {
    type Item = Result<Item, GetoptError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(at) = self.cluster {
            return Some(self.short(at));
        }
        let args = self.args;
        loop {
            let word = args.get(self.word)?;
            if self.operands_only {
                self.word += 1;
                return Some(Ok(Item::Operand(word.clone())));
            }
            if word == "--" {
                self.operands_only = true;
                self.word += 1;
                continue;
            }
            if let Some(body) = word.strip_prefix("--")
                && !(self.settings.long_flags.is_empty() && self.settings.long_options.is_empty())
            {
                let body = body.to_owned();
                self.word += 1;
                return Some(self.long(&body));
            }
            if word.len() > 1 && word.starts_with('-') {
                return Some(self.short(1));
            }
            // An operand ("-" alone is one too).
            if self.settings.posix {
                self.operands_only = true;
            }
            self.word += 1;
            return Some(Ok(Item::Operand(word.clone())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACME: &str = "e::f:s:d:vcA::O::D:P::S:C:V";

    fn scan(
        spec: &str,
        words: &[&str],
        optional_next_word: bool,
    ) -> Vec<Result<Item, GetoptError>> {
        let spec = OptString::parse(spec);
        let args: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
        let settings = Settings {
            long_flags: &["json"],
            long_options: &["format"],
            optional_next_word,
            posix: false,
        };
        Getopt::new(&spec, &args, settings).collect()
    }

    fn short(c: char, a: Option<&str>) -> Result<Item, GetoptError> {
        Ok(Item::Short(c, a.map(str::to_owned)))
    }

    #[test]
    fn option_string_kinds() {
        let s = OptString::parse(ACME);
        assert_eq!(s.kind('e'), Some(ArgKind::Optional));
        assert_eq!(s.kind('f'), Some(ArgKind::Required));
        assert_eq!(s.kind('v'), Some(ArgKind::None));
        assert_eq!(s.kind('V'), Some(ArgKind::None));
        assert_eq!(s.kind('x'), None);
        assert_eq!(s.kind(':'), None);
        let plus = OptString::parse("+a:b");
        assert!(plus.stop_at_operand);
        assert_eq!(plus.kind('a'), Some(ArgKind::Required));
    }

    #[test]
    fn optional_argument_attached_or_next_word() {
        assert_eq!(scan(ACME, &["-Pcol"], true), [short('P', Some("col"))]);
        assert_eq!(scan(ACME, &["-P", "col"], true), [short('P', Some("col"))]);
        // A next word starting with '-' is an option of its own.
        assert_eq!(
            scan(ACME, &["-P", "-e", "1"], true),
            [short('P', None), short('e', Some("1"))]
        );
        // "-" and "--" start with '-', so they are not taken either.
        assert_eq!(
            scan(ACME, &["-P", "-"], true),
            [short('P', None), Ok(Item::Operand("-".into()))]
        );
        assert_eq!(
            scan(ACME, &["-P", "--", "x"], true),
            [short('P', None), Ok(Item::Operand("x".into()))]
        );
        // Plain getopt never takes the next word for an optional argument.
        assert_eq!(
            scan(ACME, &["-P", "col"], false),
            [short('P', None), Ok(Item::Operand("col".into()))]
        );
        // At the end of the line.
        assert_eq!(scan(ACME, &["-e"], true), [short('e', None)]);
        // An empty next word does not start with '-'.
        assert_eq!(scan(ACME, &["-A", ""], true), [short('A', Some(""))]);
    }

    #[test]
    fn grouped_flags_and_attached_arguments() {
        assert_eq!(
            scan(ACME, &["-vcP"], true),
            [short('v', None), short('c', None), short('P', None)]
        );
        // An optional argument attached after a flag group: "-ev" is -e with "v".
        assert_eq!(scan(ACME, &["-ev"], true), [short('e', Some("v"))]);
        assert_eq!(
            scan(ACME, &["-vs10.0.0.1"], true),
            [short('v', None), short('s', Some("10.0.0.1"))]
        );
        assert_eq!(
            scan(ACME, &["-vcP", "all"], true)[2],
            short('P', Some("all"))
        );
    }

    #[test]
    fn required_argument_takes_any_next_word() {
        assert_eq!(scan(ACME, &["-s", "-d"], true), [short('s', Some("-d"))]);
        assert_eq!(scan(ACME, &["-C", "-1"], true), [short('C', Some("-1"))]);
        assert_eq!(
            scan(ACME, &["-s"], true),
            [Err(GetoptError::MissingArgument('s'))]
        );
        assert_eq!(
            scan(ACME, &["-vD"], true),
            [short('v', None), Err(GetoptError::MissingArgument('D'))]
        );
    }

    #[test]
    fn invalid_options_and_glibc_messages() {
        let r = scan(ACME, &["-x", "-P"], true);
        assert_eq!(r[0], Err(GetoptError::Invalid('x')));
        assert_eq!(
            r[0].clone().unwrap_err().to_string(),
            "invalid option -- 'x'"
        );
        assert_eq!(
            GetoptError::MissingArgument('s').to_string(),
            "option requires an argument -- 's'"
        );
        // Scanning goes on after an error, inside the same word too.
        assert_eq!(
            scan(ACME, &["-xv"], true),
            [Err(GetoptError::Invalid('x')), short('v', None)]
        );
        // "-e -2": the -2 is not -e's argument but an invalid option '2'.
        assert_eq!(
            scan(ACME, &["-e", "-2"], true),
            [short('e', None), Err(GetoptError::Invalid('2'))]
        );
        assert_eq!(scan(ACME, &["-:"], true), [Err(GetoptError::Invalid(':'))]);
    }

    #[test]
    fn operands_are_permuted_past_and_double_dash_ends_options() {
        assert_eq!(
            scan(ACME, &["foo", "-P", "bar", "baz"], true),
            [
                Ok(Item::Operand("foo".into())),
                short('P', Some("bar")),
                Ok(Item::Operand("baz".into()))
            ]
        );
        assert_eq!(
            scan(ACME, &["--", "-P"], true),
            [Ok(Item::Operand("-P".into()))]
        );
    }

    #[test]
    fn posix_mode_stops_at_the_first_operand() {
        let spec = OptString::parse(ACME);
        let args: Vec<String> = ["foo", "-P"].iter().map(|s| (*s).to_owned()).collect();
        let settings = Settings {
            optional_next_word: true,
            posix: true,
            ..Settings::default()
        };
        let items: Vec<_> = Getopt::new(&spec, &args, settings).collect();
        assert_eq!(
            items,
            [
                Ok(Item::Operand("foo".into())),
                Ok(Item::Operand("-P".into()))
            ]
        );
    }

    #[test]
    fn long_flags() {
        assert_eq!(
            scan(ACME, &["--json", "-P"], true)[0],
            Ok(Item::Long("json"))
        );
        assert_eq!(scan(ACME, &["--js"], true), [Ok(Item::Long("json"))]);
        assert_eq!(
            scan(ACME, &["--jsonx"], true),
            [Err(GetoptError::UnknownLong("--jsonx".into()))]
        );
        assert_eq!(
            scan(ACME, &["--json=1"], true),
            [Err(GetoptError::LongWithArgument("json"))]
        );
        assert_eq!(
            GetoptError::UnknownLong("--x".into()).to_string(),
            "unrecognized option '--x'"
        );
        // Long options take their argument after '=' or as the next word, whatever it is.
        let arg = |v: &str| Ok(Item::LongArg("format", v.to_owned()));
        assert_eq!(scan(ACME, &["--format=json"], true), [arg("json")]);
        assert_eq!(scan(ACME, &["--form", "-P"], true), [arg("-P")]);
        assert_eq!(scan(ACME, &["--format="], true), [arg("")]);
        assert_eq!(
            scan(ACME, &["-P", "--format"], true)[1],
            Err(GetoptError::LongMissingArgument("format"))
        );
        assert_eq!(
            GetoptError::LongMissingArgument("format").to_string(),
            "option '--format' requires an argument"
        );
        // Without long flags, "--json" is scanned as short options, as plain getopt does.
        let spec = OptString::parse(ACME);
        let args = vec!["--json".to_owned()];
        let first = Getopt::new(&spec, &args, Settings::default()).next();
        assert_eq!(first, Some(Err(GetoptError::Invalid('-'))));
    }
}
