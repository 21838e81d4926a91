//! `sediment compare`'s one-pass measurement: one run per binary under Sediment's trace tool,
//! the result cache, `--metrics`, `--sample-first`, the output and determinism checks, and its
//! agreement with the cachegrind/callgrind measurement it replaced.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::sediment_bin;

/// A program whose stdout depends on `argv[1]` iterations, whose stderr says `MSG` (a macro,
/// so two builds can disagree on stderr only), and which with `argv[2] == "pid"` runs a number
/// of extra iterations that depends on its process id (a non-deterministic workload).
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifndef MSG
#define MSG "done"
#endif
unsigned leaf(unsigned x);
__attribute__((noinline)) unsigned hot(unsigned long n) {
    unsigned x = 0; for (unsigned long i = 0; i < n; i++) x = leaf(x + i); return x; }
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
    if (argc > 2 && strcmp(argv[2], "pid") == 0) n += (unsigned long)getpid() % 5000 * 10 + 10;
    printf("%u\n", hot(n));
    fprintf(stderr, "%s\n", MSG);
    return 0;
}
"#;

const LEAF: &str =
    "__attribute__((noinline)) unsigned leaf(unsigned x) { return x * 2654435761u + 1; }\n";

fn gcc(dir: &Path, args: &[&str]) {
    let out = Command::new("gcc")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gcc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `a` and `b` (the same objects linked in two orders) and `loud` (other stderr) in
/// `dir`.
fn build(dir: &Path) {
    std::fs::write(dir.join("p.c"), PROGRAM).unwrap();
    std::fs::write(dir.join("leaf.c"), LEAF).unwrap();
    gcc(dir, &["-O1", "-c", "p.c", "leaf.c"]);
    gcc(dir, &["-o", "a", "p.o", "leaf.o"]);
    gcc(dir, &["-o", "b", "leaf.o", "p.o"]);
    gcc(
        dir,
        &["-O1", "-DMSG=\"other\"", "-c", "p.c", "-o", "loud.o"],
    );
    gcc(dir, &["-o", "loud", "loud.o", "leaf.o"]);
}

/// `sediment compare ARGS` in `dir` with its cache under `dir/cache`.
fn compare(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(sediment_bin())
        .arg("compare")
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "compare {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The value of table row `label` in column `col` (0 = base).
fn cell(o: &Output, label: &str, col: usize) -> u64 {
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label} in {text}"));
    // Labels may end in a parenthesised note (`(executed bytes)`): count numeric cells only.
    line[label.len()..]
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .nth(col)
        .unwrap()
}

// Adding a variant to a comparison runs only the variant: the first compare measures two
// binaries, the second reads them from the cache and measures the third, `--no-cache`
// measures all three again, with the same numbers.
#[test]
fn adding_a_variant_measures_only_the_variant() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    let first = compare(d, &["a", "b", "--", "20000"]);
    let e = stderr(&first);
    assert_eq!(e.matches("instructions measured in").count(), 2, "{e}");
    let second = compare(d, &["a", "b", "loud", "--", "20000"]);
    let e = stderr(&second);
    assert_eq!(e.matches("(cached)").count(), 2, "{e}");
    assert!(
        e.contains("loud: ") && e.matches("measured in").count() == 1,
        "{e}"
    );
    let fresh = compare(d, &["--no-cache", "a", "b", "loud", "--", "20000"]);
    assert_eq!(stderr(&fresh).matches("measured in").count(), 3);
    for row in ["instructions", "I1 misses 32K/8-way", "4K pages for 99%"] {
        for col in 0..2 {
            assert_eq!(cell(&second, row, col), cell(&fresh, row, col), "{row}");
            assert_eq!(cell(&first, row, col), cell(&fresh, row, col), "{row}");
        }
    }
    // Other arguments are another key.
    let other = compare(d, &["a", "b", "--", "30000"]);
    assert!(stderr(&other).contains("measured in"));
}

// A program reporting on stderr: `loud` prints the same stdout as `a` but another stderr, and
// the warning names it; `a` against `b` (same objects relinked) warns of nothing.
#[test]
fn differing_stderr_is_named() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    let out = compare(d, &["--no-cache", "a", "b", "loud", "--", "1000"]);
    let e = stderr(&out);
    assert!(
        e.contains("warning: standard error differs from a's for: loud"),
        "{e}"
    );
    assert!(!e.contains("standard output differs"), "{e}");
    assert!(!e.contains("not deterministic"), "{e}");
}

// The same objects relinked execute the same instructions unless the workload varies: with
// the process id deciding the loop count, the two links are flagged, with the usual fixes.
#[test]
fn nondeterministic_relinks_are_flagged() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    let out = compare(d, &["--no-cache", "a", "b", "--", "1000", "pid"]);
    let e = stderr(&out);
    assert!(
        e.contains("linked from the same objects executed different instruction counts"),
        "{e}"
    );
    assert!(
        e.contains("setarch -R") && e.contains("PYTHONHASHSEED=0"),
        "{e}"
    );
}

// `--metrics` picks rows; `--sample-first N` measures about N instructions and says so.
#[test]
fn metrics_and_sampling_options() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    let out = compare(d, &["--metrics", "i1,footprint", "a", "b", "--", "1000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("I1 misses 16K/4-way"), "{text}");
    assert!(text.contains("4K pages for 99%"), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("instructions")),
        "{text}"
    );
    assert!(!text.contains("iTLB"), "{text}");

    let out = compare(d, &["--sample-first", "100000", "a", "b", "--", "100000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("# sampled: only about the first 100000"),
        "{text}"
    );
    let n = cell(&out, "instructions", 0);
    assert!((100_000..100_100).contains(&n), "{n}");
    assert!(stderr(&out).contains("outputs not compared"));
}

/// The one-pass numbers against cachegrind's and callgrind's on one binary: the same
/// instruction count; L1i and iTLB misses equal or a little higher (an instruction straddling
/// two lines or pages counts each block it misses, cachegrind one); the binary's own
/// instructions close (callgrind's object against the executable segments' hull).
#[test]
fn one_pass_agrees_with_cachegrind() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    let bins: Vec<PathBuf> = vec![d.join("a")];
    let args = [OsString::from("50000")];
    let old = sediment_measure::measure(&bins, &args, &sediment_measure::Options::default())
        .unwrap()
        .remove(0);
    let opts = sediment_measure::onepass::OnePassOptions {
        cache: None,
        ..Default::default()
    };
    let new = sediment_measure::onepass::measure_one_pass(&bins, &args, &opts, &|_, _| {})
        .unwrap()
        .remove(0)
        .metrics;
    assert_eq!(new.instructions, old.instructions);
    assert_eq!(new.stdout_fnv1a, old.stdout_fnv1a);
    for (name, n, o) in [
        ("i1 32k", new.i1_misses_32k_8way, old.i1_misses_32k_8way),
        ("i1 16k", new.i1_misses_16k_4way, old.i1_misses_16k_4way),
        ("itlb 64", new.itlb_misses_64, old.itlb_misses_64),
        ("itlb 128", new.itlb_misses_128, old.itlb_misses_128),
    ] {
        assert!(
            n >= o && n <= o + o / 20 + 5,
            "{name}: one-pass {n}, cachegrind {o}"
        );
    }
    let (n, o) = (new.object_instructions, old.object_instructions);
    assert!(
        n.abs_diff(o) < o / 100 + 100,
        "object instructions {n} vs {o}"
    );
    assert_eq!(new.pages_99, old.pages_99);
}
