//! The man pages in `man/` against the binaries: every option a binary's usage text
//! lists, and every option it accepts, is documented in its page's OPTIONS section;
//! every option documented there is accepted; every option of the options file the
//! engine parses is documented in ibacm(8)'s OPTIONS FILE section, and every one
//! documented there is parsed; every environment variable the code reads is in some
//! page's ENVIRONMENT section.
//!
//! The pages are roff (man(7) macros). In OPTIONS, each option is the tag of a `.TP`
//! (or `.TQ`) paragraph: the line after the macro names it, for example
//! `.BR \-S ", " \-\-socket " \fIPATH\fP"`. In ibacm(8)'s OPTIONS FILE, the tag's first
//! word is the option's name (`.BI log_file " path"`). Rendering warnings are checked
//! separately, by `.ci/check-man`.

#[path = "support/programs.rs"]
mod programs;
#[path = "support/workspace.rs"]
mod workspace;

use acm_engine::config::{DAEMON_OPTIONS, Options};
use acm_load::args::Args as LoadArgs;
use clap::CommandFactory;
use ib_acme::{LONG_FLAGS, LONG_OPTIONS, OPTSTRING};
use ibacm::args::{self, ArgError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A page's source, and its name for messages.
struct Page {
    file: &'static str,
    text: String,
}

impl Page {
    fn read(file: &'static str) -> Self {
        let path = workspace::root().join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        Self { file, text }
    }

    /// The lines of section `name` (`.SH NAME` or `.SH "NAME"`), up to the next `.SH`.
    fn section(&self, name: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut inside = false;
        for line in self.text.lines() {
            if let Some(title) = line.strip_prefix(".SH") {
                inside = title.trim().trim_matches('"') == name;
                continue;
            }
            if inside {
                out.push(line);
            }
        }
        out
    }

    /// The tag lines of the `.TP`/`.TQ` paragraphs of section `name`, as plain text.
    fn tags(&self, name: &str) -> Vec<String> {
        let lines = self.section(name);
        assert!(
            !lines.is_empty(),
            "{} has no {name:?} section (or it is empty)",
            self.file
        );
        lines
            .windows(2)
            .filter(|w| w[0].starts_with(".TP") || w[0].starts_with(".TQ"))
            .map(|w| plain(w[1]))
            .collect()
    }

    /// Every option named in the tags of the OPTIONS section.
    fn options(&self) -> BTreeSet<String> {
        self.tags("OPTIONS")
            .iter()
            .flat_map(|t| option_words(t))
            .collect()
    }
}

/// A roff line as text: the leading macro dropped, escapes for `-`, fonts, quotes and
/// the like undone.
fn plain(line: &str) -> String {
    let body = if line.starts_with('.') {
        line.split_once(char::is_whitespace).map_or("", |(_, b)| b)
    } else {
        line
    };
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('-') => out.push('-'),
            Some('e') => out.push('\\'),
            Some('&' | 'c') | None => {}
            // \fB, \fI, \fR, \fP; \f(XX
            Some('f') => {
                if chars.next() == Some('(') {
                    chars.next();
                    chars.next();
                }
            }
            // \(aq, \(em and other two-letter glyphs
            Some('(') => {
                let name: String = chars.by_ref().take(2).collect();
                out.push_str(match name.as_str() {
                    "aq" => "'",
                    "dq" => "\"",
                    _ => " ",
                });
            }
            Some(other) => out.push(other),
        }
    }
    out.replace('"', " ")
}

/// The options in a piece of text: words `-x` (one letter or digit) and `--name`.
fn option_words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || ",[]|=<>()".contains(c))
        .filter(|w| is_option(w))
        .map(str::to_owned)
        .collect()
}

fn is_option(w: &str) -> bool {
    if let Some(long) = w.strip_prefix("--") {
        long.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && long
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    } else if let Some(short) = w.strip_prefix('-') {
        short.len() == 1 && short.chars().all(|c| c.is_ascii_alphanumeric())
    } else {
        false
    }
}

/// The options a usage text defines: the leading words of its lines that start with
/// an option (`-S, --socket <PATH>  ...`, `   -d dest   ...`, `   --json   ...`).
fn usage_options(usage: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in usage.lines() {
        for word in line.split_whitespace() {
            let w = word.trim_end_matches(',');
            if !is_option(w.split('=').next().unwrap_or(w)) {
                break;
            }
            out.insert(w.split('=').next().unwrap_or(w).to_owned());
            if !word.ends_with(',') {
                break;
            }
        }
    }
    out
}

/// What `bin --help` prints on stdout (`ib_acme`, which has no `--help`, prints its
/// usage text for the unknown option).
fn help_output(bin: &Path) -> String {
    let out = Command::new(bin)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    String::from_utf8(out.stdout).expect("usage text is UTF-8")
}

/// Collects the mismatches of one page so every one is reported at once.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    /// Every option of `want` missing from `have`, as `message(option)`.
    fn missing(
        &mut self,
        want: &BTreeSet<String>,
        have: &BTreeSet<String>,
        message: impl Fn(&str) -> String,
    ) {
        for o in want.difference(have) {
            self.0.push(message(o));
        }
    }

    fn check(self) {
        assert!(
            self.0.is_empty(),
            "the man pages and the binaries disagree:\n  {}",
            self.0.join("\n  ")
        );
    }
}

/// The options `ibacm`'s hand-written parser accepts among `candidates`: those it does
/// not call unknown (a missing or bad value still means the option exists).
fn ibacm_accepts(candidates: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    candidates
        .into_iter()
        .filter(|o| !matches!(args::parse([o.as_str()]), Err(ArgError::Unknown(_))))
        .collect()
}

#[test]
fn ibacm_options_are_documented() {
    let page = Page::read("man/ibacm.8");
    let documented = page.options();
    let usage = usage_options(&help_output(Path::new(env!("CARGO_BIN_EXE_ibacm"))));
    // Every single-character option the parser takes, found by asking it.
    let shorts = ibacm_accepts(
        ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .map(|c| format!("-{c}")),
    );
    let mut p = Problems::default();
    p.missing(&usage, &documented, |o| {
        format!("man/ibacm.8 does not document {o} (listed by `ibacm --help`) in OPTIONS")
    });
    p.missing(&shorts, &documented, |o| {
        format!("man/ibacm.8 does not document {o} (accepted by ibacm) in OPTIONS")
    });
    p.missing(&shorts, &usage, |o| {
        format!("`ibacm --help` (daemon::args::USAGE) does not list {o}, which ibacm accepts")
    });
    let accepted = ibacm_accepts(documented.iter().cloned());
    p.missing(&documented, &accepted, |o| {
        format!("man/ibacm.8 documents {o} in OPTIONS, but ibacm rejects it as unknown")
    });
    p.check();
}

#[test]
fn ib_acme_options_are_documented() {
    let page = Page::read("man/ib_acme.1");
    let documented = page.options();
    let usage = usage_options(&help_output(&programs::program("ib_acme")));
    let accepted: BTreeSet<String> = OPTSTRING
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| format!("-{c}"))
        .chain(LONG_FLAGS.iter().map(|l| format!("--{l}")))
        .chain(LONG_OPTIONS.iter().map(|l| format!("--{l}")))
        .collect();
    let mut p = Problems::default();
    p.missing(&usage, &documented, |o| {
        format!("man/ib_acme.1 does not document {o} (listed by ib_acme's usage text) in OPTIONS")
    });
    p.missing(&accepted, &documented, |o| {
        format!("man/ib_acme.1 does not document {o} (in acme::cli's OPTSTRING, LONG_FLAGS or LONG_OPTIONS) in OPTIONS")
    });
    p.missing(&accepted, &usage, |o| {
        format!("ib_acme's usage text (acme::cli::usage) does not list {o}, which it accepts")
    });
    p.missing(&documented, &accepted, |o| {
        format!("man/ib_acme.1 documents {o} in OPTIONS, but ib_acme does not accept it")
    });
    p.check();
}

#[test]
fn acm_load_options_are_documented() {
    let page = Page::read("man/acm-load.1");
    let documented = page.options();
    let usage = usage_options(&help_output(&programs::program("acm-load")));
    let mut cmd = LoadArgs::command();
    cmd.build();
    let accepted: BTreeSet<String> = cmd
        .get_arguments()
        .flat_map(|a| {
            a.get_short()
                .map(|c| format!("-{c}"))
                .into_iter()
                .chain(a.get_long().map(|l| format!("--{l}")))
        })
        .collect();
    let mut p = Problems::default();
    p.missing(&usage, &documented, |o| {
        format!("man/acm-load.1 does not document {o} (listed by `acm-load --help`) in OPTIONS")
    });
    p.missing(&accepted, &documented, |o| {
        format!("man/acm-load.1 does not document {o} (an argument of load::args::Args) in OPTIONS")
    });
    p.missing(&documented, &accepted, |o| {
        format!("man/acm-load.1 documents {o} in OPTIONS, but acm-load does not accept it")
    });
    p.check();
}

#[test]
fn acmdump_options_are_documented() {
    let page = Page::read("man/acmdump.1");
    let documented = page.options();
    // clap writes the help from the options it accepts, so the two are one set.
    let usage = usage_options(&help_output(&programs::program("acmdump")));
    assert!(usage.contains("--kind"), "acmdump --help: {usage:?}");
    let mut p = Problems::default();
    p.missing(&usage, &documented, |o| {
        format!("man/acmdump.1 does not document {o} (listed by `acmdump --help`) in OPTIONS")
    });
    p.missing(&documented, &usage, |o| {
        format!("man/acmdump.1 documents {o} in OPTIONS, but `acmdump --help` does not list it")
    });
    p.check();
}

/// The option names of the options file: the fields of the engine's `Options` (its
/// pretty `Debug` form lists them one per line), each one option named like the field
/// except where the table says otherwise, plus the daemon's own options
/// ([`DAEMON_OPTIONS`], whose lines the engine keeps in its `daemon_options` field).
fn options_file_names() -> BTreeSet<String> {
    const RENAMED: &[(&str, &str)] = &[
        ("timeout_ms", "timeout"),
        ("providers", "provider"),
        ("sa_timeout_max_ms", "sa_timeout_max"),
        ("acm_timeout_max_ms", "acm_timeout_max"),
    ];
    let debug = format!("{:#?}", Options::default());
    debug
        .lines()
        .filter_map(|l| {
            let field = l.strip_prefix("    ")?.split_once(':')?.0;
            (!field.starts_with(' ') && field != "daemon_options").then_some(field)
        })
        .map(|f| {
            RENAMED
                .iter()
                .find(|(from, _)| *from == f)
                .map_or(f, |(_, to)| to)
                .to_owned()
        })
        .chain(DAEMON_OPTIONS.iter().map(|&o| o.to_owned()))
        .collect()
}

#[test]
fn ibacm_options_file_is_documented() {
    let page = Page::read("man/ibacm.8");
    let documented: BTreeSet<String> = page
        .tags("OPTIONS FILE")
        .iter()
        .filter_map(|t| t.split_whitespace().next().map(str::to_owned))
        .collect();
    let parsed = options_file_names();
    assert!(
        parsed.contains("log_file") && parsed.contains("provider"),
        "{parsed:?}"
    );
    let mut p = Problems::default();
    p.missing(&parsed, &documented, |o| {
        format!(
            "man/ibacm.8 does not document option {o} of the options file (a field of acm_engine::config::Options) in OPTIONS FILE"
        )
    });
    for name in &documented {
        let (_, diags) = Options::parse("ibacm_opts.cfg", &format!("{name} 1\n"));
        if diags
            .iter()
            .any(|d| d.message.starts_with("unknown option"))
        {
            p.0.push(format!(
                "man/ibacm.8 documents {name} in OPTIONS FILE, but the options file parser does not know it"
            ));
        }
    }
    p.check();
}

#[test]
fn environment_variables_are_documented() {
    let pages = [
        "man/ibacm.8",
        "man/ib_acme.1",
        "man/acm-load.1",
        "man/acmdump.1",
    ]
    .map(Page::read);
    let documented: BTreeSet<String> = pages
        .iter()
        .flat_map(|p| p.section("ENVIRONMENT"))
        .flat_map(|l| {
            plain(l)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    // Every "ACM_..." or "POSIXLY_CORRECT" string in the sources the binaries are built
    // from (test-only variables live under tests/).
    let mut read = BTreeSet::new();
    for dir in [
        "acm-daemon/ibacm/src",
        "acm-daemon/ib_acme/src",
        "acm-daemon/acm-load/src",
        "acm-daemon/acmdump/src",
        "acm-daemon/acm-client/src",
        "acm-io-verbs/src",
        "acm-io-sim/src",
        "acm-engine/src",
    ] {
        for file in rust_files(&workspace::root().join(dir)) {
            let text = std::fs::read_to_string(&file).expect("source");
            for piece in text.split('"').skip(1).step_by(2) {
                let is_var = (piece.starts_with("ACM_") || piece == "POSIXLY_CORRECT")
                    && piece
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if is_var {
                    read.insert(piece.to_owned());
                }
            }
        }
    }
    assert!(read.contains("ACM_SYSFS_ROOT"), "{read:?}");
    let mut p = Problems::default();
    p.missing(&read, &documented, |v| {
        format!("no man page documents the environment variable {v} in ENVIRONMENT")
    });
    p.check();
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

#[test]
fn every_page_has_the_usual_sections() {
    for (file, extra) in [
        (
            "man/ibacm.8",
            &["OPTIONS", "EXIT STATUS", "FILES", "ENVIRONMENT", "EXAMPLES"][..],
        ),
        (
            "man/ib_acme.1",
            &["OPTIONS", "EXIT STATUS", "FILES", "ENVIRONMENT", "EXAMPLES"],
        ),
        ("man/acm-load.1", &["OPTIONS", "EXIT STATUS", "EXAMPLES"]),
        ("man/acmdump.1", &["OPTIONS", "EXIT STATUS", "EXAMPLES"]),
        ("man/ibacm_prov.7", &[]),
    ] {
        let page = Page::read(file);
        for s in ["NAME", "DESCRIPTION", "SEE ALSO"].iter().chain(extra) {
            assert!(
                !page.section(s).is_empty(),
                "{file} has no (or an empty) {s} section"
            );
        }
    }
}

#[test]
fn the_parsers_of_this_test_read_what_they_should() {
    assert_eq!(
        plain(r#".BR \-S ", " \-\-socket " \fIPATH\fP""#),
        "-S  ,   --socket   PATH "
    );
    assert_eq!(
        option_words(&plain(r#".BR \-\-fabric "sim[:\fIFILE\fP[:\fIHOST\fP]]""#)),
        ["--fabric"]
    );
    assert_eq!(
        usage_options(
            "usage: x [-a]\n  -S, --socket <PATH>  text -d\n   -d dest   the -x\n      --json\n  - client: no\n"
        ),
        ["--json", "--socket", "-S", "-d"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert!(!is_option("-"));
    assert!(!is_option("-10"));
    assert!(!is_option("--Foo"));
}
