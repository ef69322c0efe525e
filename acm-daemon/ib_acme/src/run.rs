//! The order of work (docs/ib-acme.md §1): for each service, connect, then resolves, perf
//! query and enumeration; then the files; then the return status. Also the process-level
//! entry point, which turns the command line into a run and the run into an exit code.

use super::cli::{self, CliError, Options, OutputFormat};
use super::format::{JsonReport, PrometheusReport, Report, TextReport};
use super::{endpoints, generate, perf, resolve};
use acm_client::brackets;
use acm_client::{self, PORT_FILE};
use std::io::Write;
use std::path::PathBuf;

/// What a run reads from the system, so tests can substitute it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Environment {
    /// The TCP port file (`/run/ibacm-tcp.port`).
    pub port_file: PathBuf,
    /// The sysfs root for `-A` (`$ACM_SYSFS_ROOT` or `/sys`).
    pub sysfs_root: PathBuf,
}

impl Environment {
    /// The real system's paths.
    #[must_use]
    pub(crate) fn system() -> Self {
        Self {
            port_file: PathBuf::from(PORT_FILE),
            sysfs_root: acm_io_verbs::sysfs::root_from_env(),
        }
    }
}

/// Does everything `opts` asks for, reporting to `report`, and returns `ib_acme`'s
/// return status: the last connect's result, overwritten by each resolve (perf and
/// enumeration never change it), then by the file generation, which only runs while the
/// status is 0.
pub(crate) fn execute(opts: &Options, env: &Environment, report: &mut dyn Report) -> i32 {
    let mut status = 0;
    if opts.needs_service() {
        // Checked when the options were read.
        let services = brackets::expand(&opts.service).unwrap_or_default();
        for svc in services {
            report.begin_service(&svc);
            let connected = acm_client::connect(&svc, &env.port_file, &mut |m| report.notice(m));
            let mut conn = match connected {
                Ok(c) => c,
                Err(e) => {
                    report.unreachable(&svc, &e);
                    status = e.status();
                    continue;
                }
            };
            status = 0;
            if opts.dest.is_some() {
                status = resolve::run(&mut conn, &svc, opts, report);
            }
            if opts.output == OutputFormat::Prometheus {
                perf::snapshot(&mut conn, &svc, opts, report);
                continue;
            }
            perf::run(&mut conn, &svc, opts, report);
            if opts.enum_ep {
                endpoints::run(&mut conn, &svc, opts.ep_index, report);
            }
        }
    }
    if let Some(file) = &opts.addr_file
        && status == 0
    {
        status = generate::address_file(&opts.dest_dir, file, &env.sysfs_root, report);
    }
    if let Some(file) = &opts.opts_file
        && status == 0
    {
        status = generate::options_file(&opts.dest_dir, file, report);
    }
    status
}

/// A whole `ib_acme` invocation: `args` includes the program name. Text, JSON and
/// Prometheus text go to `stdout`; getopt's complaints go to `stderr`, the usage text to
/// `stdout` (both to `stderr` with `--json` or `--format json|prometheus`, keeping stdout
/// parseable; so do the failures of a Prometheus run). Returns the exit code.
pub(crate) fn main(
    args: &[String],
    posix: bool,
    env: &Environment,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    let prog = args.first().map_or("ib_acme", String::as_str);
    let rest = args.get(1..).unwrap_or_default();
    let opts = match cli::parse(rest, posix) {
        Ok(o) => o,
        Err(e) => {
            usage_error(prog, &e, machine_output(rest), stdout, stderr);
            return 1;
        }
    };
    let status = match opts.output {
        OutputFormat::Json => {
            let mut report = JsonReport::new(&mut *stdout);
            finish(&opts, env, &mut report)
        }
        OutputFormat::Prometheus => {
            let mut report = PrometheusReport::new(&mut *stdout, &mut *stderr);
            finish(&opts, env, &mut report)
        }
        OutputFormat::Text => {
            let mut report = TextReport::new(&mut *stdout, opts.verbose);
            finish(&opts, env, &mut report)
        }
    };
    // The exit code is the low byte of the status, as the C exit() keeps it.
    (status & 0xff) as u8
}

/// Whether a command line that does not parse asked for output a program reads
/// (`--json`, `--format json`, `--format prometheus`), whose stdout must then stay
/// empty.
fn machine_output(args: &[String]) -> bool {
    let machine = |f: &str| f == "json" || f == "prometheus";
    args.iter().enumerate().any(|(i, a)| {
        a == "--json"
            || a.strip_prefix("--format=").is_some_and(machine)
            || (a == "--format" && args.get(i + 1).is_some_and(|f| machine(f)))
    })
}

fn finish(opts: &Options, env: &Environment, report: &mut dyn Report) -> i32 {
    let status = execute(opts, env, report);
    report.finish(status, opts.prints_status(status));
    status
}

fn usage_error(
    prog: &str,
    error: &CliError,
    json: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) {
    // Nothing sensible can be done when the terminal is gone.
    if error.has_message() {
        let _ = writeln!(stderr, "{prog}: {error}");
    }
    let text = cli::usage(prog);
    if json {
        let _ = stderr.write_all(text.as_bytes());
    } else {
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_words(words: &[&str]) -> (u8, String, String) {
        let args: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
        let env = Environment {
            port_file: PathBuf::from("/nonexistent/ibacm-tcp.port"),
            sysfs_root: PathBuf::from("/nonexistent/sys"),
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = main(&args, false, &env, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn unreachable_unix_service() {
        let (code, out, err) =
            run_words(&["ib_acme", "-S", "/nonexistent/path.sock", "-d", "10.0.0.1"]);
        assert_eq!(code, 2);
        assert_eq!(
            out,
            "/nonexistent/path.sock,unable to contact service: No such file or directory\nreturn status 0x2\n"
        );
        assert_eq!(err, "");
    }

    #[test]
    fn prometheus_run_of_an_unreachable_service_says_so_on_stderr_only() {
        let (code, out, err) = run_words(&[
            "ib_acme",
            "-S",
            "/nonexistent/path.sock",
            "-P",
            "--format",
            "prometheus",
        ]);
        assert_eq!(code, 2);
        assert_eq!(
            out,
            "# HELP acm_up Whether the service answered (1) or could not be reached (0).\n# TYPE acm_up gauge\nacm_up 0\n"
        );
        assert_eq!(
            err,
            "/nonexistent/path.sock,unable to contact service: No such file or directory\n"
        );
    }

    #[test]
    fn usage_goes_to_stdout_and_getopt_errors_to_stderr() {
        let (code, out, err) = run_words(&["/usr/bin/ib_acme", "-x"]);
        assert_eq!(code, 1);
        assert_eq!(err, "/usr/bin/ib_acme: invalid option -- 'x'\n");
        assert!(out.starts_with("usage: /usr/bin/ib_acme"));
        let (code, out, err) = run_words(&["ib_acme"]);
        assert_eq!((code, err.as_str()), (1, ""));
        assert!(out.starts_with("usage: ib_acme"));
        let (code, out, err) = run_words(&["ib_acme", "--json", "-s", "x"]);
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(err.starts_with("usage: ib_acme"));
        let (code, out, err) = run_words(&["ib_acme", "--format", "prometheus", "-d", "x"]);
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(
            err.starts_with("ib_acme: --format prometheus shows counters and endpoints"),
            "{err}"
        );
        let (code, out, _) = run_words(&["ib_acme", "--format=json", "-s", "x"]);
        assert_eq!((code, out.as_str()), (1, ""));
    }

    #[test]
    fn no_devices_for_address_file_and_options_skipped() {
        let dir = std::env::temp_dir().join(format!("acme-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_str().unwrap();
        let (code, out, _) = run_words(&["ib_acme", "-A", "-O", "-D", d, "-V"]);
        assert_eq!(code, 255);
        assert_eq!(
            out,
            format!(
                "Generating {d}/ibacm_addr.cfg\nibv_get_device_list - no devices present?\nreturn status 0xffffffff\n"
            )
        );
        // The address file is left empty and the options file is not written.
        assert_eq!(std::fs::read(dir.join("ibacm_addr.cfg")).unwrap(), b"");
        assert!(!dir.join("ibacm_opts.cfg").exists());
        let (code, out, _) = run_words(&["ib_acme", "-O", "-D", d]);
        assert_eq!((code, out.as_str()), (0, ""));
        let written = std::fs::read_to_string(dir.join("ibacm_opts.cfg")).unwrap();
        assert_eq!(written, generate::OPTIONS_TEMPLATE);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
