//! `sediment noise`: layouts that differ only in placement do the same work, the spread is
//! consistent, the output is deterministic, and bad inputs fail with one line.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::common::{have_tool, sediment, sediment_ok};

/// Functions in the test program.
const FUNCS: usize = 36;

/// Writes and compiles `prog.c` into `prog.o` (with -ffunction-sections) in `dir`: 36
/// non-inlined functions, the hot loop calling every third one, the rest run once.
fn build(dir: &Path) {
    let mut c = String::from("#include <stdio.h>\n");
    for k in 0..FUNCS {
        writeln!(
            c,
            "__attribute__((noinline)) unsigned f{k}(unsigned x) {{ return x * {} + {k}; }}",
            2 * k + 3
        )
        .unwrap();
    }
    c.push_str("int main(void) {\n  unsigned acc = 1;\n");
    for k in 0..FUNCS {
        writeln!(c, "  acc = f{k}(acc);").unwrap();
    }
    c.push_str("  for (int i = 0; i < 20000; i++) {\n");
    for k in (0..FUNCS).step_by(3) {
        writeln!(c, "    acc = f{k}(acc);").unwrap();
    }
    c.push_str("  }\n  printf(\"%u\\n\", acc);\n  return 0;\n}\n");
    std::fs::write(dir.join("prog.c"), c).unwrap();
    let out = Command::new("gcc")
        .args(["-O2", "-ffunction-sections", "-c", "prog.c", "-o", "prog.o"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `sediment noise --json -n 3 --vary MODE prog.o` in `dir`; returns stdout and the JSON.
fn noise_json(dir: &Path, mode: &str) -> (String, serde_json::Value) {
    let out = sediment_ok(
        dir,
        &["noise", "--json", "-n", "3", "--vary", mode, "prog.o"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    (text, v)
}

/// Checks the document's shape: 3 labelled variants doing the same work, and every spread row
/// consistent with the variants' values.
fn check(v: &serde_json::Value, labels: [&str; 3]) {
    let variants = v["variants"].as_array().unwrap();
    let got: Vec<&str> = variants
        .iter()
        .map(|x| x["label"].as_str().unwrap())
        .collect();
    assert_eq!(got, labels);
    let instr: Vec<u64> = variants
        .iter()
        .map(|x| x["metrics"]["instructions"].as_u64().unwrap())
        .collect();
    let (lo, hi) = (*instr.iter().min().unwrap(), *instr.iter().max().unwrap());
    assert!(
        lo > 20000 * (FUNCS as u64 / 3),
        "too few instructions: {instr:?}"
    );
    assert!(
        (hi - lo) as f64 <= 0.005 * lo as f64,
        "layout changed the work: {instr:?}"
    );
    let hashes: Vec<&str> = variants
        .iter()
        .map(|x| x["metrics"]["stdout_fnv1a"].as_str().unwrap())
        .collect();
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");

    let rows = v["spread"].as_array().unwrap();
    assert_eq!(rows.len(), 11);
    assert_eq!(rows[0]["metric"], "instructions");
    assert_eq!(rows[0]["min"].as_u64().unwrap(), lo);
    assert_eq!(rows[0]["max"].as_u64().unwrap(), hi);
    for r in rows {
        let (min, max) = (r["min"].as_u64().unwrap(), r["max"].as_u64().unwrap());
        let median = r["median"].as_f64().unwrap();
        assert!(min as f64 <= median && median <= max as f64, "{r}");
        match r["relative_range"].as_f64() {
            Some(rel) => assert!((rel - (max - min) as f64 / median).abs() < 1e-12, "{r}"),
            None => assert_eq!(median, 0.0, "{r}"),
        }
    }
}

#[test]
fn shuffled_and_shifted_layouts_do_the_same_work_deterministically() {
    // Three shuffled and three shifted links execute the same instructions within 0.5%, print
    // the same output, report min <= median <= max, and a second run is byte-identical.
    if !(have_tool("gcc") && have_tool("valgrind") && have_tool("ld.lld")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (_, shuffled) = noise_json(dir.path(), "shuffle");
    check(&shuffled, ["seed-1", "seed-2", "seed-3"]);
    let (first, shifted) = noise_json(dir.path(), "shift");
    check(&shifted, ["shift-0", "shift-80", "shift-160"]);
    let (second, _) = noise_json(dir.path(), "shift");
    assert_eq!(first, second);
}

#[test]
fn non_object_input_is_a_one_line_error() {
    // A C source given as an object is refused before any link, naming the file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let out = sediment(dir.path(), &["noise", "-n", "2", "main.c"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("main.c: not an ELF file or archive"),
        "{stderr}"
    );
}

#[test]
fn link_failure_reports_the_linkers_last_line() {
    // An object calling an undefined function fails to link; the one-line error names the
    // variant and carries the linker's complaint about the missing symbol.
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = "void missing_fn(void);\nint main(void) { missing_fn(); return 0; }\n";
    std::fs::write(dir.path().join("u.c"), src).unwrap();
    let ok = Command::new("gcc")
        .args(["-c", "u.c", "-o", "u.o"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(ok.success());
    // `--mode` is the old spelling of `--vary`, still accepted.
    let out = sediment(dir.path(), &["noise", "-n", "2", "--mode", "shift", "u.o"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("linking variant shift-0 with gcc"),
        "{stderr}"
    );
    assert!(stderr.contains("missing_fn"), "{stderr}");
}
