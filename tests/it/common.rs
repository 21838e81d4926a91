//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the built `sediment` binary.
pub fn sediment_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sediment"))
}

/// Runs `sediment` with the given arguments in `dir`.
pub fn sediment(dir: &Path, args: &[&str]) -> Output {
    Command::new(sediment_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run sediment")
}

/// Runs `sediment` in `dir` expecting failure with one line of stderr holding every needle;
/// returns the output for the caller's checks of what was (not) written.
pub fn fails_one_line(dir: &Path, args: &[&str], needles: &[&str]) -> Output {
    let out = sediment(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in {err}");
    }
    out
}

/// True when `tool` runs (`tool --version` exits 0). Tests that need a missing tool fail
/// loudly rather than skip, unless `SEDIMENT_ALLOW_MISSING_TOOLS=1` is set.
pub fn have_tool(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("SEDIMENT_ALLOW_MISSING_TOOLS").is_none() {
        panic!("{tool} is not installed; run the README's setup (or set SEDIMENT_ALLOW_MISSING_TOOLS=1)");
    }
    ok
}

/// Runs `prog args` in `dir`, asserts it succeeded (its stderr in the message), and returns its
/// standard output.
pub fn sh(dir: &Path, prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Path to a fixture under `tests/fixtures`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Records `program` (run in `dir`) with `sediment record --via callgrind -o OUT`, asserts
/// success, and returns the main executable's profile.
pub fn record_callgrind(dir: &Path, out: &str, program: &str) -> sediment_profile::Profile {
    let rec = sediment(
        dir,
        &["record", "--via", "callgrind", "-o", out, "--", program],
    );
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    sediment_profile::Profile::from_text(&std::fs::read_to_string(dir.join(out)).unwrap()).unwrap()
}
