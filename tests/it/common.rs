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

/// Runs `sediment` with the given arguments in `dir` and asserts that it succeeded (the
/// failure message shows the arguments and both outputs); returns the output.
#[track_caller]
pub fn sediment_ok(dir: &Path, args: &[&str]) -> Output {
    let out = sediment(dir, args);
    assert!(
        out.status.success(),
        "sediment {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
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

/// The two test tiers. The quick tier (`SEDIMENT_TEST_TIER=quick`, `scripts/test --quick`) runs
/// no external tool: every test that needs one (a compiler, a linker, valgrind, perf, a build
/// system) is skipped with a printed reason, even when the tool is installed, so the tier is
/// fast and runs anywhere. The full tier (the default) runs them all and fails on a missing
/// tool.
pub fn quick_tier() -> bool {
    std::env::var_os("SEDIMENT_TEST_TIER").is_some_and(|t| t == "quick")
}

/// The running test's name, for skip messages.
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string()
}

/// True when `tool --version` (or `tool -V`, as `dot` wants) exits 0.
fn runs(tool: &str) -> bool {
    ["--version", "-V"].iter().any(|flag| {
        Command::new(tool)
            .arg(flag)
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Whether the calling test may run `tools`. Quick tier: false, after printing
/// `skipped: TEST: needs TOOL (full tier)` (or `TOOL not found`). Full tier: true when every
/// tool runs (`TOOL --version` or `TOOL -V` exits 0); a missing one panics, unless
/// `SEDIMENT_ALLOW_MISSING_TOOLS=1` is set, which makes it a printed skip. Use [`require!`].
pub fn require(tools: &[&str]) -> bool {
    let missing = tools.iter().find(|t| !runs(t));
    if quick_tier() {
        match missing {
            Some(t) => skipped(&format!("{t} not found")),
            None => skipped(&format!("needs {} (full tier)", tools.join(", "))),
        }
        return false;
    }
    let Some(t) = missing else { return true };
    if std::env::var_os("SEDIMENT_ALLOW_MISSING_TOOLS").is_none() {
        panic!(
            "{t} is not installed; run the README's setup (or set SEDIMENT_ALLOW_MISSING_TOOLS=1)"
        );
    }
    skipped(&format!("{t} not found"));
    false
}

/// [`require`] for `python3` with each of `modules` importable (`python3 -c "import M"`), the
/// packages scripts/setup installs from PyPI; the same tiers and the same rule for a missing one.
pub fn require_python(modules: &[&str]) -> bool {
    if !require(&["python3"]) {
        return false;
    }
    let missing = modules.iter().find(|m| {
        !Command::new("python3")
            .args(["-c", &format!("import {m}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(m) = missing else { return true };
    if std::env::var_os("SEDIMENT_ALLOW_MISSING_TOOLS").is_none() {
        panic!(
            "python module {m} is not installed; run scripts/setup (or set SEDIMENT_ALLOW_MISSING_TOOLS=1)"
        );
    }
    skipped(&format!("python module {m} not found"));
    false
}

/// Prints `skipped: TEST: WHY` on standard error past the test harness's capture (a write to
/// the stream itself, not `eprintln!`), so that the reason shows in a passing run.
fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {}: {why}", test_name());
}

/// `require!("gcc", "valgrind");` at the top of a test: returns from the test (skips it) when
/// [`require`] says so. In a helper returning `Option`: `require!(None; "clang")`.
macro_rules! require {
    ($ret:expr; $($tool:expr),+ $(,)?) => {
        if !$crate::common::require(&[$($tool),+]) {
            return $ret;
        }
    };
    ($($tool:expr),+ $(,)?) => {
        if !$crate::common::require(&[$($tool),+]) {
            return;
        }
    };
}

/// True when `tool` may run: [`require`] for one tool (a test that gets false returns).
pub fn have_tool(tool: &str) -> bool {
    require(&[tool])
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
    sediment_ok(
        dir,
        &["record", "--via", "callgrind", "-o", out, "--", program],
    );
    sediment_profile::Profile::from_text(&std::fs::read_to_string(dir.join(out)).unwrap()).unwrap()
}

/// Runs a tool in `dir`, panics with its stderr if it fails, and returns its stdout.
pub fn run(dir: &Path, tool: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The processes descended from `pid` (children, their children, ...), from `/proc`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            if let Some((_, rest)) = stat.rsplit_once(')') {
                if let Some(ppid) = rest.split_whitespace().nth(1) {
                    parent_of.push((p, ppid.parse::<u32>().unwrap_or(0)));
                }
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|e| e.1 == p).map(|e| e.0));
        i += 1;
    }
    found.remove(0);
    found
}
