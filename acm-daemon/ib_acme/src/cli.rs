//! `ib_acme`'s options (docs/ib-acme.md §1): what each one sets, the checks that end in
//! the usage text, and the usage text itself.
//!
//! A few behaviours of Debian's tool that scripts may rely on are kept on purpose:
//! `-P N` and `-e N` set one shared endpoint index (the last wins, and `-P` alone asks
//! for it), `-P` keywords are matched on three characters ignoring case (`-P column` is
//! `col`) except `s` which must be exact, any other `-P` argument is read with `atoi`,
//! and `-f` looks only at its first character.

use super::generate::{DEFAULT_ADDR_FILE, DEFAULT_DIR, DEFAULT_OPTS_FILE};
use super::getopt::{Getopt, GetoptError, Item, OptString, Settings};
use crate::outcome::PerfMode;
use acm_client::DEFAULT_SERVICE;
use acm_client::addr::AddrFormat;
use acm_client::brackets::{self, BracketError};
use acm_client::cnum::atoi;
use thiserror::Error;

/// The getopt string of Debian's `ib_acme`.
pub const OPTSTRING: &str = "e::f:s:d:vcA::O::D:P::S:C:V";

/// Our long flags (extensions).
pub const LONG_FLAGS: &[&str] = &["json"];

/// Our long options with an argument (extensions).
pub const LONG_OPTIONS: &[&str] = &["format"];

/// How results are written (`--format`; `--json` is `--format json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OutputFormat {
    /// Debian's text, line for line.
    #[default]
    Text,
    /// One JSON document.
    Json,
    /// The Prometheus text exposition of the counters and endpoints
    /// ([`acm_client::metrics`]).
    Prometheus,
}

impl OutputFormat {
    /// The format `--format` names.
    #[must_use]
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        match name {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            "prometheus" => Some(Self::Prometheus),
            _ => None,
        }
    }
}

/// Everything the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// `-s`: source address (or bracket list).
    pub src: Option<String>,
    /// `-d`: destination address (or bracket list).
    pub dest: Option<String>,
    /// `-f`: the address format.
    pub format: AddrFormat,
    /// `-v`: verify paths with the SA.
    pub verify: bool,
    /// `-c`: cached answers only.
    pub nodelay: bool,
    /// `-P`: which counters.
    pub perf: Option<PerfMode>,
    /// The endpoint index shared by `-e N` and `-P N` (0: none).
    pub ep_index: i32,
    /// `-e`: enumerate endpoints.
    pub enum_ep: bool,
    /// `-A`: address file to write.
    pub addr_file: Option<String>,
    /// `-O`: options file to write.
    pub opts_file: Option<String>,
    /// `-D`: directory for `-A` / `-O`.
    pub dest_dir: String,
    /// `-S`: service (or bracket list).
    pub service: String,
    /// `-C`: repetitions, as given (0 means 1; negative means none).
    pub repetitions: i32,
    /// `-V`.
    pub verbose: bool,
    /// `--format` (or `--json`).
    pub output: OutputFormat,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            src: None,
            dest: None,
            format: AddrFormat::Unspecified,
            verify: false,
            nodelay: false,
            perf: None,
            ep_index: 0,
            enum_ep: false,
            addr_file: None,
            opts_file: None,
            dest_dir: DEFAULT_DIR.to_owned(),
            service: DEFAULT_SERVICE.to_owned(),
            repetitions: 1,
            verbose: false,
            output: OutputFormat::Text,
        }
    }
}

impl Options {
    /// Whether any service has to be contacted.
    #[must_use]
    pub(crate) const fn needs_service(&self) -> bool {
        self.dest.is_some() || self.perf.is_some() || self.enum_ep
    }

    /// Whether the text output ends with "return status": with `-V`, when no file was
    /// asked for, or when something failed.
    #[must_use]
    pub(crate) const fn prints_status(&self, status: i32) -> bool {
        self.verbose || (self.addr_file.is_none() && self.opts_file.is_none()) || status != 0
    }
}

/// Why the command line is refused (the usage text follows).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum CliError {
    /// getopt's complaint (printed as `prog: message`).
    #[error(transparent)]
    Getopt(#[from] GetoptError),
    /// An unknown `-f` format (`u` included).
    #[error("unknown address format '{0}'")]
    Format(String),
    /// A combination that asks for nothing, or `-s` without a use.
    #[error("nothing to do with these options")]
    Usage,
    /// `--format` names no format.
    #[error("unknown output format '{0}' (text, json or prometheus)")]
    OutputFormat(String),
    /// `--format prometheus` with something it cannot show.
    #[error(
        "--format prometheus shows counters and endpoints: use it with -P or -e, without -d, -A, -O or -P s"
    )]
    PrometheusUse,
    /// A bracket list that cannot be expanded.
    #[error("invalid list '{arg}': {error}")]
    List {
        /// The argument.
        arg: String,
        /// Why.
        error: BracketError,
    },
}

impl CliError {
    /// Whether a message is printed before the usage text. Debian's tool prints getopt's
    /// messages and nothing for its own checks; a refused bracket list is our addition.
    #[must_use]
    pub(crate) const fn has_message(&self) -> bool {
        matches!(
            self,
            Self::Getopt(_) | Self::List { .. } | Self::OutputFormat(_) | Self::PrometheusUse
        )
    }
}

/// Reads the arguments (without the program name). `posix` is set when
/// `POSIXLY_CORRECT` is in the environment (getopt then stops at the first operand).
///
/// # Errors
/// [`CliError`]; the caller prints the usage text and exits with 1.
pub(crate) fn parse(args: &[String], posix: bool) -> Result<Options, CliError> {
    let spec = OptString::parse(OPTSTRING);
    let settings = Settings {
        long_flags: LONG_FLAGS,
        long_options: LONG_OPTIONS,
        optional_next_word: true,
        posix,
    };
    let mut o = Options::default();
    for item in Getopt::new(&spec, args, settings) {
        match item? {
            Item::Short('e', arg) => {
                o.enum_ep = true;
                if let Some(a) = arg {
                    o.ep_index = atoi(&a);
                }
            }
            Item::Short('f', arg) => {
                let a = arg.unwrap_or_default();
                o.format = AddrFormat::from_flag(&a).ok_or(CliError::Format(a))?;
            }
            Item::Short('s', arg) => o.src = arg,
            Item::Short('d', arg) => o.dest = arg,
            Item::Short('v', _) => o.verify = true,
            Item::Short('c', _) => o.nodelay = true,
            Item::Short('A', arg) => {
                o.addr_file = Some(arg.unwrap_or_else(|| DEFAULT_ADDR_FILE.to_owned()));
            }
            Item::Short('O', arg) => {
                o.opts_file = Some(arg.unwrap_or_else(|| DEFAULT_OPTS_FILE.to_owned()));
            }
            Item::Short('D', arg) => o.dest_dir = arg.unwrap_or_default(),
            Item::Short('P', arg) => o.perf = Some(perf_mode(arg.as_deref(), &mut o.ep_index)),
            Item::Short('S', arg) => o.service = arg.unwrap_or_default(),
            Item::Short('C', arg) => o.repetitions = atoi(&arg.unwrap_or_default()),
            Item::Short('V', _) => o.verbose = true,
            Item::Long("json") => o.output = OutputFormat::Json,
            Item::LongArg("format", f) => {
                o.output = OutputFormat::from_name(&f).ok_or(CliError::OutputFormat(f))?;
            }
            // Operands are ignored, as getopt-based tools do; the option string lists
            // every other character.
            Item::Short(..) | Item::Long(_) | Item::LongArg(..) | Item::Operand(_) => {}
        }
    }
    check(&o)?;
    Ok(o)
}

/// The `-P` argument: a keyword, or a number that becomes the shared endpoint index.
fn perf_mode(arg: Option<&str>, ep_index: &mut i32) -> PerfMode {
    let Some(a) = arg else {
        return PerfMode::Row;
    };
    let starts = |word: &[u8]| {
        a.as_bytes()
            .get(..word.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(word))
    };
    if starts(b"col") {
        PerfMode::Column
    } else if starts(b"all") {
        PerfMode::All
    } else if a == "s" {
        PerfMode::BySource
    } else {
        *ep_index = atoi(a);
        PerfMode::Row
    }
}

/// The usage checks of docs/ib-acme.md §1, then the bracket lists that will be expanded.
fn check(o: &Options) -> Result<(), CliError> {
    let by_source = o.perf == Some(PerfMode::BySource);
    if o.src.is_some() && o.dest.is_none() && !by_source {
        return Err(CliError::Usage);
    }
    if by_source && o.src.is_none() {
        return Err(CliError::Usage);
    }
    if !o.needs_service() && o.addr_file.is_none() && o.opts_file.is_none() {
        return Err(CliError::Usage);
    }
    if o.output == OutputFormat::Prometheus
        && (o.dest.is_some()
            || o.addr_file.is_some()
            || o.opts_file.is_some()
            || by_source
            || (o.perf.is_none() && !o.enum_ep))
    {
        return Err(CliError::PrometheusUse);
    }
    let mut lists: Vec<&str> = Vec::new();
    if o.needs_service() {
        lists.push(&o.service);
    }
    if let Some(d) = &o.dest {
        lists.push(d);
        // `-P s` reads -s as one address; only resolves expand it.
        if let Some(s) = &o.src {
            lists.push(s);
        }
    }
    for arg in lists {
        brackets::expand(arg).map_err(|error| CliError::List {
            arg: arg.to_owned(),
            error,
        })?;
    }
    Ok(())
}

/// The usage text (our own wording), for program name `prog`.
#[must_use]
pub(crate) fn usage(prog: &str) -> String {
    format!(
        "\
usage: {prog} [-S svc] [-f i|n|l|g] [-s src] -d dest [-v] [-c] [-C count]
       {prog} [-S svc] -P [col|all|s|N] [-f i|n] [-s src]
       {prog} [-S svc] -e [N]
       {prog} -A [addr_file] -O [opt_file] [-D dir] [-V]
Ask an ibacm service for path records, counters or endpoints, or write its
configuration files. Every form also takes --json (or --format).

Queries:
   -d dest     resolve the path to dest; a list such as node[1-4,7] names several
   -s src      the source for -d (also a list), or the endpoint address for -P s
   -f format   how -s and -d are written: i (IPv4/IPv6), n (name), l (LID), g (GID);
               without it -d is read as an IP address, else looked up as a host name,
               else taken as a LID
   -v          check each resolved path with the subnet administrator
   -c          answer from the service's cache only
   -C count    resolve each path count times
   -P [opt]    performance counters: of the whole service (no opt), the same in a
               column (col), of every endpoint (all), of endpoint N (N = 1, 2, ...),
               or of the endpoint owning the -s address (s)
   -e [N]      list the service's endpoints, or endpoint N only
   -S svc      the service: a unix socket path starting with '/', otherwise a TCP host
               whose port is read from /run/ibacm-tcp.port (default 6125); a list
               queries several; default /run/ibacm-unix.sock
Configuration files:
   -A [file]   write an address file for this host's InfiniBand ports
               (default ibacm_addr.cfg; ports are read from $ACM_SYSFS_ROOT, or /sys)
   -O [file]   write an options file holding the defaults (default ibacm_opts.cfg)
   -D dir      directory for -A and -O (default /etc/rdma)
   -V          verbose: show the files written and always the return status
Output:
   --json      print one JSON document with the results instead of text; its schema
               is described in the documentation of ib_acme
   --format F  text (the default), json (as --json) or prometheus: with -P or -e, the
               global counters and every endpoint's description and counters (or
               endpoint N's only) in the Prometheus text format, for node_exporter's
               textfile collector or a scrape
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<Options, CliError> {
        let args: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
        parse(&args, false)
    }

    fn ok(words: &[&str]) -> Options {
        parse_words(words).unwrap()
    }

    #[test]
    fn resolve_options() {
        let o = ok(&[
            "-S",
            "/tmp/a.sock",
            "-f",
            "i",
            "-s",
            "10.0.0.1",
            "-d",
            "10.0.0.2",
            "-v",
            "-c",
            "-C",
            "3",
        ]);
        assert_eq!(o.service, "/tmp/a.sock");
        assert_eq!(o.format, AddrFormat::Ip);
        assert_eq!(o.src.as_deref(), Some("10.0.0.1"));
        assert_eq!(o.dest.as_deref(), Some("10.0.0.2"));
        assert!(o.verify && o.nodelay);
        assert_eq!(o.repetitions, 3);
        assert_eq!(ok(&["-d", "x", "-C", "abc"]).repetitions, 0);
        assert_eq!(ok(&["-d", "x", "-C", "-1"]).repetitions, -1);
        assert_eq!(ok(&["-d", "x", "-f", "gid"]).format, AddrFormat::Gid);
        assert_eq!(ok(&["-d", "x"]).format, AddrFormat::Unspecified);
    }

    #[test]
    fn perf_arguments() {
        let mode = |words: &[&str]| {
            let o = ok(words);
            (o.perf, o.ep_index)
        };
        assert_eq!(mode(&["-P"]), (Some(PerfMode::Row), 0));
        assert_eq!(mode(&["-Pcol"]), (Some(PerfMode::Column), 0));
        assert_eq!(mode(&["-P", "coL"]), (Some(PerfMode::Column), 0));
        assert_eq!(mode(&["-P", "column"]), (Some(PerfMode::Column), 0));
        assert_eq!(mode(&["-P", "co"]), (Some(PerfMode::Row), 0));
        assert_eq!(mode(&["-P", "ALL"]), (Some(PerfMode::All), 0));
        assert_eq!(mode(&["-P", "al"]), (Some(PerfMode::Row), 0));
        assert_eq!(
            mode(&["-P", "s", "-s", "10.0.0.1"]),
            (Some(PerfMode::BySource), 0)
        );
        assert_eq!(mode(&["-P", "2"]), (Some(PerfMode::Row), 2));
        assert_eq!(mode(&["-P", "5x"]), (Some(PerfMode::Row), 5));
        assert_eq!(mode(&["-P-1"]), (Some(PerfMode::Row), -1));
        assert_eq!(mode(&["-P", "300"]), (Some(PerfMode::Row), 300));
        // The last -P wins; -P with no argument keeps the index.
        assert_eq!(mode(&["-P", "col", "-P", "all"]), (Some(PerfMode::All), 0));
        assert_eq!(mode(&["-P", "2", "-P"]), (Some(PerfMode::Row), 2));
        assert_eq!(mode(&["-P", "col", "-P", "1"]), (Some(PerfMode::Row), 1));
    }

    #[test]
    fn shared_endpoint_index() {
        let o = ok(&["-P", "-e", "3"]);
        assert_eq!(
            (o.perf, o.enum_ep, o.ep_index),
            (Some(PerfMode::Row), true, 3)
        );
        let o = ok(&["-P", "3", "-e", "2"]);
        assert_eq!(o.ep_index, 2);
        let o = ok(&["-e", "2", "-P", "0"]);
        assert_eq!(o.ep_index, 0);
        let o = ok(&["-P", "3", "-e"]);
        assert_eq!(o.ep_index, 3);
        assert_eq!(ok(&["-ev"]).ep_index, 0);
        assert!(!ok(&["-ev"]).verify);
        assert_eq!(ok(&["-e5x"]).ep_index, 5);
    }

    #[test]
    fn generation_options() {
        let o = ok(&["-A", "-O", "-D", "/tmp/x", "-V"]);
        assert_eq!(o.addr_file.as_deref(), Some("ibacm_addr.cfg"));
        assert_eq!(o.opts_file.as_deref(), Some("ibacm_opts.cfg"));
        assert_eq!(o.dest_dir, "/tmp/x");
        assert!(o.verbose);
        let o = ok(&["-Aa.cfg", "-O", "b.cfg"]);
        assert_eq!(o.addr_file.as_deref(), Some("a.cfg"));
        assert_eq!(o.opts_file.as_deref(), Some("b.cfg"));
        assert_eq!(ok(&["-O"]).dest_dir, "/etc/rdma");
        assert_eq!(ok(&["-O", "--json"]).output, OutputFormat::Json);
        assert!(!ok(&["-O"]).prints_status(0));
        assert!(ok(&["-O"]).prints_status(-1));
        assert!(ok(&["-O", "-V"]).prints_status(0));
        assert!(ok(&["-P"]).prints_status(0));
    }

    #[test]
    fn usage_errors() {
        for words in [
            &[][..],
            &["-s", "10.0.0.1"],
            &["-s", "10.0.0.1", "-e"],
            &["-P", "s"],
            &["-P", "S", "-s", "1.2.3.4"],
            &["-D", "/tmp"],
            &["-V"],
            &["-c", "-v"],
            &["--", "-P"],
        ] {
            assert_eq!(parse_words(words), Err(CliError::Usage), "{words:?}");
        }
        assert_eq!(
            parse_words(&["-f", "u", "-d", "x"]),
            Err(CliError::Format("u".into()))
        );
        assert_eq!(
            parse_words(&["-f", "", "-d", "x"]),
            Err(CliError::Format(String::new()))
        );
        assert_eq!(
            parse_words(&["-x", "-P"]),
            Err(CliError::Getopt(GetoptError::Invalid('x')))
        );
        assert_eq!(
            parse_words(&["-P", "-s"]),
            Err(CliError::Getopt(GetoptError::MissingArgument('s')))
        );
        assert!(matches!(
            parse_words(&["-d", "n[3-1]"]),
            Err(CliError::List { .. })
        ));
        assert!(matches!(
            parse_words(&["-S", "/x[]", "-P"]),
            Err(CliError::List { .. })
        ));
        // -S is not expanded when no service is contacted.
        assert!(parse_words(&["-S", "/x[]", "-O"]).is_ok());
        // -P s reads -s whole, brackets and all.
        assert!(parse_words(&["-P", "s", "-s", "10.0.0.[3-1]"]).is_ok());
    }

    #[test]
    fn output_formats() {
        assert_eq!(ok(&["-P"]).output, OutputFormat::Text);
        assert_eq!(ok(&["-P", "--format", "json"]).output, OutputFormat::Json);
        assert_eq!(
            ok(&["--json", "-P", "--format=text"]).output,
            OutputFormat::Text
        );
        for words in [
            &["-P", "--format", "prometheus"][..],
            &["-P", "all", "--format=prometheus"],
            &["-P", "2", "--format=prometheus"],
            &["-e", "--format=prometheus"],
        ] {
            assert_eq!(ok(words).output, OutputFormat::Prometheus, "{words:?}");
        }
        assert_eq!(
            parse_words(&["-P", "--format", "yaml"]),
            Err(CliError::OutputFormat("yaml".into()))
        );
        for words in [
            &["-d", "x", "--format", "prometheus"][..],
            &["-P", "-d", "x", "--format", "prometheus"],
            &["-P", "s", "-s", "10.0.0.1", "--format", "prometheus"],
            &["-O", "--format", "prometheus"],
            &["-P", "-A", "--format", "prometheus"],
        ] {
            let e = parse_words(words).unwrap_err();
            assert_eq!(e, CliError::PrometheusUse, "{words:?}");
            assert!(e.has_message());
        }
    }

    #[test]
    fn usage_text_names_the_program_and_json() {
        let u = usage("/usr/bin/ib_acme");
        assert!(u.starts_with("usage: /usr/bin/ib_acme "));
        assert!(u.contains("--json"));
        assert!(u.contains("--format F"));
        assert!(u.contains("ACM_SYSFS_ROOT"));
    }
}
