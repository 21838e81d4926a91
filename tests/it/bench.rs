//! `bench/run`'s argument handling: every refusal is one line and exit code 2, before the script
//! installs, builds or runs anything (these tests take milliseconds).

use std::path::Path;
use std::process::{Command, Output};

fn bench_run(args: &[&str]) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/run"))
        .args(args)
        .output()
        .expect("run bench/run")
}

/// Asserts exit code 2 and a one-line message on stderr containing `needle`.
fn refused(args: &[&str], needle: &str) {
    let out = bench_run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bench_run_refuses_bad_arguments() {
    refused(&["--bogus"], "unknown argument '--bogus'");
    refused(&["--full", "--program"], "--program needs a value");
    refused(&["--full", "--program", "mysql"], "unknown program 'mysql'");
    // The quick mode always runs the built-in example.
    refused(
        &["--quick", "--program", "postgres"],
        "--program goes with --full",
    );
}

#[test]
fn bench_run_help_lists_every_program() {
    // postgres is a program like the others now (it used to be refused as not implemented).
    let out = bench_run(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for p in ["--program sqlite", "--program lua", "--program postgres"] {
        assert!(help.contains(p), "{p} missing from:\n{help}");
    }
    assert!(!help.contains("not implemented"), "{help}");
}
