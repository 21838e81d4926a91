//! `sediment sim`: lackey's streamed trace through Sediment's own simulator, checked against
//! hand-derived counts on a program without libc and against cachegrind on a libc program.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{fixture, have_tool, sediment};

/// Runs a tool in `dir` and panics with its stderr if it fails.
fn run(dir: &Path, tool: &str, args: &[&str]) {
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
}

/// `sediment sim --json BINARY -- ARGS`: the metrics object of the one column, and the raw text.
fn sim(dir: &Path, binary: &str, args: &[&str]) -> (serde_json::Value, String) {
    let mut a = vec!["sim", "--json", binary, "--"];
    a.extend_from_slice(args);
    let out = sediment(dir, &a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    (v["columns"][0]["metrics"].clone(), text)
}

/// Cachegrind's (Ir, I1mr) for `binary` with `i1` (`size,assoc,line`), run the way
/// `sediment compare` runs it: canonical path, standard input from /dev/null.
fn cachegrind(dir: &Path, binary: &str, args: &[&str], i1: &str) -> (u64, u64) {
    let canon = std::fs::canonicalize(dir.join(binary)).unwrap();
    let out_file = dir.join(format!("cg.{binary}.{i1}.out"));
    let status = Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=yes", "-q"])
        .arg(format!("--I1={i1}"))
        .args(["--D1=32768,8,64", "--LL=8388608,16,64"])
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(&canon)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let t =
        sediment_measure::cachegrind::totals(&std::fs::read_to_string(out_file).unwrap()).unwrap();
    (t["Ir"], t["I1mr"])
}

fn n(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn sim_tiny_static_program_exact() {
    // tiny.c (no libc, no loader; see tests/fixtures/measure/README.md): `step` (one line at
    // 0x401000) and `_start` (page-aligned at 0x402000) each fit in one 64-byte line, so every
    // I1 and iTLB geometry misses exactly twice (compulsory), and the whole process is the
    // binary: 2 pages and 2 lines touched, all of it packable into one page.
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("measure/tiny.c");
    run(
        dir.path(),
        "gcc",
        &[
            "-O1",
            "-static",
            "-nostdlib",
            "-no-pie",
            "-o",
            "tiny",
            src.to_str().unwrap(),
        ],
    );
    let (m, _) = sim(dir.path(), "tiny", &[]);
    let (ir, i1mr) = cachegrind(dir.path(), "tiny", &[], "32768,8,64");
    assert_eq!(n(&m, "instructions"), ir);
    assert_eq!(n(&m, "object_instructions"), ir);
    assert_eq!(n(&m, "i1_misses_32k_8way"), i1mr);
    for key in [
        "i1_misses_32k_8way",
        "i1_misses_16k_4way",
        "itlb_misses_64",
        "itlb_misses_128",
        "itlb_misses_64_full",
        "itlb_misses_128_full",
        "pages_touched",
        "lines_touched",
        "pages_99",
        "lines_99",
    ] {
        assert_eq!(n(&m, key), 2, "{key}");
    }
    assert_eq!(n(&m, "pages_touched_bound"), 1);
    assert_eq!(n(&m, "pages_99_bound"), 1);
    assert_eq!(m["pages_99_to_bound"].as_f64(), Some(2.0));
}

#[test]
fn sim_agrees_with_cachegrind_and_is_deterministic() {
    // A libc PIE with one small hot loop: its I1 misses (32K/8-way and 16K/4-way) and
    // instruction count agree with cachegrind within 2% (the model differs only on instructions
    // straddling two missing lines, and lackey and cachegrind start the program with slightly
    // different stacks); two runs give byte-identical output; 1000 more iterations of a loop
    // that fits add no miss and the same number of instructions each time.
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loop.c"),
        "#include <stdio.h>\n#include <stdlib.h>\n\
         __attribute__((noinline)) static long hot(long n) {\n\
         \x20 long s = 0;\n  for (long i = 0; i < n; i++) s += i ^ (s >> 3);\n  return s;\n}\n\
         int main(int argc, char **argv) {\n\
         \x20 printf(\"%ld\\n\", hot(argc > 1 ? atol(argv[1]) : 1000));\n  return 0;\n}\n",
    )
    .unwrap();
    run(dir.path(), "gcc", &["-O2", "-o", "loop", "loop.c"]);

    let (m1, t1) = sim(dir.path(), "loop", &["1000"]);
    let (_, t1b) = sim(dir.path(), "loop", &["1000"]);
    assert_eq!(t1, t1b, "two runs differ");
    let (m2, _) = sim(dir.path(), "loop", &["2000"]);
    let (m3, _) = sim(dir.path(), "loop", &["3000"]);

    let d21 = n(&m2, "object_instructions") - n(&m1, "object_instructions");
    let d32 = n(&m3, "object_instructions") - n(&m2, "object_instructions");
    assert_eq!(d21, d32);
    assert!(d21 >= 3000, "loop body of at least 3 instructions: {d21}");
    assert_eq!(n(&m2, "i1_misses_32k_8way"), n(&m1, "i1_misses_32k_8way"));
    // With 100000 iterations the loop holds 99% of the binary's bytes: at most 2 lines (a
    // loop under 64 bytes may straddle a boundary), and the bound is 1 line, 1 page.
    let (big, _) = sim(dir.path(), "loop", &["100000"]);
    assert!((1..=2).contains(&n(&big, "lines_99")), "{big}");
    assert_eq!(n(&big, "lines_99_bound"), 1);
    assert_eq!(n(&big, "pages_99"), 1);

    let close = |what: &str, ours: u64, theirs: u64| {
        let err = (ours as f64 - theirs as f64).abs() / theirs as f64;
        assert!(err <= 0.02, "{what}: sim {ours} vs cachegrind {theirs}");
    };
    for (key, i1) in [
        ("i1_misses_32k_8way", "32768,8,64"),
        ("i1_misses_16k_4way", "16384,4,64"),
        ("itlb_misses_64", "262144,8,4096"),
    ] {
        let (ir, miss) = cachegrind(dir.path(), "loop", &["1000"], i1);
        close("instructions", n(&m1, "instructions"), ir);
        close(key, n(&m1, key), miss);
    }
}

#[test]
fn sim_rejects_a_non_elf_file() {
    // A text file is named in a one-line error and nothing is printed on stdout.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notelf"), "hello\n").unwrap();
    let out = sediment(dir.path(), &["sim", "notelf"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("notelf"), "{err}");
}
