//! `ib_acme -A` / `-O` end to end: address files from the sysfs fixture trees in
//! `tests/fixtures/` (selected with `ACM_SYSFS_ROOT`), the options file, and the
//! failure messages — compared with Debian's binary where the host allows (its `-A`
//! needs real RDMA devices, so only its "no devices" answer can be compared).

mod acme_fake;

use acme_fake::{DEBIAN, OURS, Run, debian_available, run_client, temp_dir};
use ib_acme::{ADDRESS_HEADER, OPTIONS_TEMPLATE, effective_lines, short_hostname};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ours(args: &[&str], sysfs: &Path) -> Run {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    run_client(OURS, &args, &[("ACM_SYSFS_ROOT", sysfs.to_str().unwrap())])
}

fn debian(args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    run_client(DEBIAN, &args, &[])
}

#[test]
fn address_file_from_a_fixture_tree() {
    let host = short_hostname().unwrap();
    let dir = temp_dir("addr");
    let d = dir.to_str().unwrap();
    let run = ours(&["-A", "-D", d, "-V"], &fixture("sysfs-hcas"));
    // mlx5_2 is RoCE (Ethernet) and left out; mlx5_0 port 1 is the first active port.
    let lines = [
        format!("{host} mlx5_0 1 default"),
        format!("{host}-1 mlx5_0 1 default"),
        format!("{host}-2 mlx5_1 1 default"),
        format!("{host}-3 mlx5_1 2 default"),
    ];
    assert_eq!(
        run.stdout,
        format!(
            "Generating {d}/ibacm_addr.cfg\n{}\nreturn status 0x0\n",
            lines.join("\n")
        )
    );
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let written = std::fs::read_to_string(dir.join("ibacm_addr.cfg")).unwrap();
    assert_eq!(written, format!("{ADDRESS_HEADER}{}\n", lines.join("\n")));
    assert_eq!(effective_lines(&written), lines);

    // Quiet without -V; a named file; an absolute name ignores -D.
    let run = ours(&["-A", "other.cfg", "-D", d], &fixture("sysfs-hcas"));
    assert_eq!((run.code, run.stdout.as_str()), (0, ""));
    assert_eq!(
        std::fs::read_to_string(dir.join("other.cfg")).unwrap(),
        written
    );
    let abs = dir.join("abs.cfg");
    let sub = dir.join("sub");
    let run = ours(
        &[
            "-A",
            abs.to_str().unwrap(),
            "-D",
            sub.to_str().unwrap(),
            "-V",
        ],
        &fixture("sysfs-hcas"),
    );
    assert_eq!(run.code, 0);
    // Debian prints the directory and the absolute name joined, and still creates -D.
    assert!(
        run.stdout
            .starts_with(&format!("Generating {}/{}\n", sub.display(), abs.display()))
    );
    assert_eq!(std::fs::read_to_string(&abs).unwrap(), written);
    assert!(sub.is_dir() && !sub.join("abs.cfg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn address_file_without_an_active_port() {
    let host = short_hostname().unwrap();
    let dir = temp_dir("down");
    let run = ours(&["-A", "-D", dir.to_str().unwrap()], &fixture("sysfs-down"));
    assert_eq!(run.code, 0);
    let written = std::fs::read_to_string(dir.join("ibacm_addr.cfg")).unwrap();
    assert_eq!(
        effective_lines(&written),
        [format!("{host}-1 hfi1_0 1 default")]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_devices_leaves_an_empty_file_and_skips_the_options() {
    let dir = temp_dir("nodev");
    let d = dir.to_str().unwrap();
    let args = ["-A", "-O", "-D", d, "-V"];
    let run = ours(&args, &dir.join("no-sysfs-here"));
    assert_eq!(
        run.stdout,
        format!(
            "Generating {d}/ibacm_addr.cfg\nibv_get_device_list - no devices present?\n\
             return status 0xffffffff\n"
        )
    );
    assert_eq!(run.code, 255);
    assert_eq!(std::fs::read(dir.join("ibacm_addr.cfg")).unwrap(), b"");
    assert!(!dir.join("ibacm_opts.cfg").exists());
    if debian_available("no_devices_leaves_an_empty_file_and_skips_the_options") {
        std::fs::remove_dir_all(&dir).unwrap();
        let theirs = debian(&args);
        if theirs.stdout.contains("no devices present") {
            assert_eq!(theirs, run);
        } else {
            eprintln!("this host has RDMA devices; Debian's -A cannot be compared");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn options_file_has_debians_settings() {
    let dir = temp_dir("opts");
    let d = dir.to_str().unwrap();
    let run = ours(&["-O", "-D", d], &fixture("sysfs-hcas"));
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "", "")
    );
    let written = std::fs::read_to_string(dir.join("ibacm_opts.cfg")).unwrap();
    assert_eq!(written, OPTIONS_TEMPLATE);
    let run = ours(&["-O", "x.cfg", "-D", d, "-V"], &fixture("sysfs-hcas"));
    assert_eq!(
        run.stdout,
        format!("Generating {d}/x.cfg\nreturn status 0x0\n")
    );

    if debian_available("options_file_has_debians_settings") {
        let theirs_dir = temp_dir("opts-debian");
        let td = theirs_dir.to_str().unwrap();
        let theirs = debian(&["-O", "x.cfg", "-D", td, "-V"]);
        assert_eq!(
            theirs.stdout,
            format!("Generating {td}/x.cfg\nreturn status 0x0\n")
        );
        let reference = std::fs::read_to_string(theirs_dir.join("x.cfg")).unwrap();
        // Same settings in the same order; the comments are our own words.
        assert_eq!(effective_lines(&written), effective_lines(&reference));
        std::fs::remove_dir_all(&theirs_dir).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn generation_failures_match_debian() {
    let dir = temp_dir("fail");
    let file = dir.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    let missing = dir.join("missing/a/b");
    let m = missing.to_str().unwrap();
    let cases: [(&[&str], String); 3] = [
        (
            &["-O", "-D", m],
            format!(
                "Failed to open directory {m}: No such file or directory\n\
                 Failed to open option configuration file: No such file or directory\n\
                 return status 0xffffffff\n"
            ),
        ),
        (
            &["-O", "-V", "-D", f],
            format!(
                "Generating {f}/ibacm_opts.cfg\n\
                 Failed to open directory {f}: Not a directory\n\
                 Failed to open option configuration file: Not a directory\n\
                 return status 0xffffffff\n"
            ),
        ),
        (
            &["-A", "-V", "-D", m],
            format!(
                "Generating {m}/ibacm_addr.cfg\n\
                 Failed to open directory {m}: No such file or directory\n\
                 Failed to open address configuration file: No such file or directory\n\
                 return status 0xffffffff\n"
            ),
        ),
    ];
    let with_debian = debian_available("generation_failures_match_debian");
    for (args, expected) in cases {
        let run = ours(args, &fixture("sysfs-hcas"));
        assert_eq!(run.stdout, expected, "{args:?}");
        assert_eq!(run.code, 255, "{args:?}");
        if with_debian {
            assert_eq!(debian(args), run, "{args:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Generation is skipped once a query failed (here: no service).
#[test]
fn files_are_not_written_after_a_failure() {
    let dir = temp_dir("after");
    let d = dir.to_str().unwrap();
    let args = ["-S", "/nonexistent/x", "-d", "1.2.3.4", "-O", "-A", "-D", d];
    let run = ours(&args, &fixture("sysfs-hcas"));
    assert_eq!(
        run.stdout,
        "/nonexistent/x,unable to contact service: No such file or directory\nreturn status 0x2\n"
    );
    assert_eq!(run.code, 2);
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    if debian_available("files_are_not_written_after_a_failure") {
        assert_eq!(debian(&args), run);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn generation_as_json() {
    let host = short_hostname().unwrap();
    let dir = temp_dir("json");
    let d = dir.to_str().unwrap();
    let run = ours(&["-A", "-O", "-D", d, "--json"], &fixture("sysfs-hcas"));
    assert_eq!(run.code, 0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["status"], 0);
    assert_eq!(v["exit_code"], 0);
    let g = &v["generated"];
    assert_eq!(g[0]["kind"], "address");
    assert_eq!(g[0]["file"], format!("{d}/ibacm_addr.cfg"));
    assert_eq!(g[0]["ok"], true);
    assert_eq!(g[0]["lines"][0], format!("{host} mlx5_0 1 default"));
    assert_eq!(g[0]["lines"].as_array().unwrap().len(), 4);
    assert_eq!(g[1]["kind"], "options");
    assert_eq!(g[1]["ok"], true);
    assert!(g[1]["error"].is_null());

    let run = ours(
        &["-O", "-D", "/nonexistent/q", "--json"],
        &fixture("sysfs-hcas"),
    );
    assert_eq!(run.code, 255);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let e = &v["generated"][0]["error"];
    assert_eq!(e["errno"], 2);
    assert_eq!(e["message"], "No such file or directory");
    assert_eq!(
        e["lines"][0],
        "Failed to open directory /nonexistent/q: No such file or directory"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
