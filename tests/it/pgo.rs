//! `sediment pgo` end to end with the real tools: a small C program built by clang 16 with
//! line tables for profiling, trained under callgrind, converted by Sediment to llvm-profgen's
//! unsymbolized profile, turned into a sample profile by the real `llvm-profgen` 16, and used
//! by clang's `-fprofile-sample-use`. The counts checked follow from the program: `main` calls
//! `hot_step` 10 times per loop iteration, and never calls `cold_path` without a second
//! argument.

use crate::common::{have_tool, sediment, sediment_ok, sh};

const PROFGEN: &str = "/usr/lib/llvm-16/bin/llvm-profgen";

const APP_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int hot_step(int x) {
    if (x % 3 == 0)
        return x / 3;
    return 3 * x + 1;
}
__attribute__((noinline)) int cold_path(int x) {
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i * i;
    return s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    long total = 0;
    for (int i = 1; i < n; i++) {
        int x = i;
        for (int k = 0; k < 10; k++)
            x = hot_step(x);
        total += x;
    }
    if (argc > 2)
        total += cold_path(n);
    printf("%ld\n", total);
    return 0;
}
"#;

/// clang-16 flags of the profiled build and of the PGO build: line tables with discriminators
/// (DWARF 4: valgrind 3.19 does not read clang 16's DWARF 5 of larger programs).
const PROFILING_FLAGS: &[&str] = &[
    "-O2",
    "-gdwarf-4",
    "-gline-tables-only",
    "-fdebug-info-for-profiling",
];

/// Loop iterations of the training run (`app N` runs `i = 1 .. N-1`).
const N: u64 = 2000;

/// A directory with `app` (clang-16, line tables for profiling) and `cg.out` (callgrind of
/// `app N`, with `jumps`), or `None` when a tool is missing (the test is skipped).
fn trained(collect_jumps: bool) -> Option<tempfile::TempDir> {
    if !have_tool("clang-16") || !have_tool("valgrind") || !have_tool(PROFGEN) {
        eprintln!("skipped: needs clang-16, valgrind and {PROFGEN}");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    sh(
        dir,
        "clang-16",
        &[PROFILING_FLAGS, &["app.c", "-o", "app"]].concat(),
    );
    let n = N.to_string();
    sh(
        dir,
        "valgrind",
        &[
            "--tool=callgrind",
            "--dump-instr=yes",
            if collect_jumps {
                "--collect-jumps=yes"
            } else {
                "--collect-jumps=no"
            },
            "--callgrind-out-file=cg.out",
            "./app",
            &n,
        ],
    );
    Some(tmp)
}

/// One function of a text sample profile: `name:total:head`, its body lines
/// (`offset[.discriminator]: count [callee:count...]`) at the first indentation level.
struct FnSamples {
    head: u64,
    body: Vec<BodyLine>,
}

/// `offset[.discriminator]: count [callee:count...]`.
struct BodyLine {
    count: u64,
    targets: Vec<(String, u64)>,
}

fn function(profile: &str, name: &str) -> Option<FnSamples> {
    let mut lines = profile.lines();
    let header = lines.find(|l| l.starts_with(&format!("{name}:")))?;
    let head = header.rsplit(':').next()?.parse().ok()?;
    let mut body = Vec::new();
    for l in lines {
        // One leading space: this function's own lines; deeper ones are inlinees.
        let Some(rest) = l.strip_prefix(' ') else {
            break;
        };
        if rest.starts_with(' ') {
            continue;
        }
        let (_loc, counts) = rest.split_once(": ")?;
        let mut words = counts.split_whitespace();
        let Ok(count) = words.next()?.parse() else {
            continue; // an inlined call site: `loc: callee:total`
        };
        let targets = words
            .filter_map(|w| {
                let (f, c) = w.rsplit_once(':')?;
                Some((f.to_string(), c.parse().ok()?))
            })
            .collect();
        body.push(BodyLine { count, targets });
    }
    Some(FnSamples { head, body })
}

// The whole route: callgrind -> sediment pgo -> llvm-profgen -> clang -fprofile-sample-use.
#[test]
fn callgrind_profile_feeds_llvm_profgen_and_clang() {
    let Some(tmp) = trained(true) else { return };
    let dir = tmp.path();
    sediment_ok(
        dir,
        &["pgo", "--binary", "app", "cg.out", "-o", "app.unsym"],
    );
    let unsym = std::fs::read_to_string(dir.join("app.unsym")).unwrap();
    let ranges: usize = unsym.lines().next().unwrap().parse().unwrap();
    assert!(ranges > 10, "{unsym}");

    sh(
        dir,
        PROFGEN,
        &[
            "--binary=app",
            "--unsymbolized-profile=app.unsym",
            "--format=text",
            "--output=app.prof",
        ],
    );
    let profile = std::fs::read_to_string(dir.join("app.prof")).unwrap();
    let calls = 10 * (N - 1);

    // Every call of hot_step is a head sample, and its first line (the `if`) runs on each.
    let hot = function(&profile, "hot_step").unwrap_or_else(|| panic!("no hot_step:\n{profile}"));
    assert_eq!(hot.head, calls, "{profile}");
    let max = hot.body.iter().map(|b| b.count).max().unwrap();
    assert_eq!(max, calls, "{profile}");
    // The two returns split the calls between them: each ran, neither on every call.
    let split: Vec<u64> = hot
        .body
        .iter()
        .map(|b| b.count)
        .filter(|&c| c > 0 && c < calls)
        .collect();
    assert!(!split.is_empty(), "{profile}");
    // main's call sites name hot_step as the target, with every call counted once.
    let main = function(&profile, "main").unwrap_or_else(|| panic!("no main:\n{profile}"));
    let to_hot: u64 = main
        .body
        .iter()
        .flat_map(|b| &b.targets)
        .filter(|(f, _)| f == "hot_step")
        .map(|(_, c)| c)
        .sum();
    assert_eq!(to_hot, calls, "{profile}");
    // Code that never ran has no samples.
    assert!(function(&profile, "cold_path").is_none(), "{profile}");

    // clang reads the profile and the program still computes the same result.
    sh(
        dir,
        "clang-16",
        &[
            PROFILING_FLAGS,
            &["-fprofile-sample-use=app.prof", "app.c", "-o", "app.pgo"],
        ]
        .concat(),
    );
    let n = N.to_string();
    assert_eq!(
        sh(dir, "./app.pgo", &[&n]),
        sh(dir, "./app", &[&n]),
        "the sample-PGO build computes another result"
    );
}

// Same inputs, same bytes.
#[test]
fn pgo_output_is_deterministic() {
    let Some(tmp) = trained(true) else { return };
    let dir = tmp.path();
    for out in ["a.unsym", "b.unsym"] {
        sediment_ok(dir, &["pgo", "--binary", "app", "cg.out", "-o", out]);
    }
    assert_eq!(
        std::fs::read(dir.join("a.unsym")).unwrap(),
        std::fs::read(dir.join("b.unsym")).unwrap()
    );
}

// Bad input: one line naming the file, non-zero exit, nothing written.
#[test]
fn pgo_refuses_bad_input() {
    let Some(tmp) = trained(false) else { return };
    let dir = tmp.path();
    std::fs::write(dir.join("junk.out"), "hello\nworld\n").unwrap();
    std::fs::write(dir.join("notelf"), "not an ELF file").unwrap();
    let cases: [(&[&str], &str); 3] = [
        // Recorded without --collect-jumps: no branches for llvm-profgen.
        (&["--binary", "app", "cg.out"], "cg.out: no jump counts"),
        (&["--binary", "app", "junk.out"], "junk.out"),
        (&["--binary", "notelf", "cg.out"], "notelf"),
    ];
    for (args, want) in cases {
        let mut a = vec!["pgo"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "out.unsym"]);
        let o = sediment(dir, &a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{a:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert!(!dir.join("out.unsym").exists(), "{a:?} wrote output");
    }
}

/// A program whose executed code lies mostly after 8 KiB of never-run padding: `work` (a long
/// straight line) is placed after `pad` by `-fno-toplevel-reorder`.
const PADDED_C: &str = r#"#include <stdio.h>
int pad(int x);
int work(int x);
int main(int argc, char **argv) {
    (void)argv;
    int s = pad(argc);
    for (int i = 0; i < 100; i++) s = work(s + i);
    printf("%d\n", s);
    return 0;
}
__attribute__((noinline)) int pad(int x) { if (x > 1000000) __asm__ volatile(".skip 8192, 0x90"); return x + 1; }
__attribute__((noinline)) int work(int x) {
    volatile int v = x;
#define S v = v * 31 + 7; v ^= v >> 3;
#define S8 S S S S S S S S
    S8 S8 S8 S8
    return v;
}
"#;

// Regression: a callgrind profile given with another binary of the same base name (callgrind
// names objects by path, and `pgo` falls back to the base name) only warned that most of its
// addresses lay outside the binary's code, and wrote a profile of the few that did not. Now
// more addresses outside than inside is a one-line error naming both files, and nothing is
// written; the right binary still works.
#[test]
fn regress_profile_of_another_build_with_the_same_name_is_refused() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("oth")).unwrap();
    std::fs::write(dir.join("app.c"), PADDED_C).unwrap();
    std::fs::write(dir.join("oth/app.c"), "int main(void) { return 0; }\n").unwrap();
    sh(
        dir,
        "gcc",
        &["-O1", "-fno-toplevel-reorder", "-o", "app", "app.c"],
    );
    sh(dir, "gcc", &["-O1", "-o", "oth/app", "oth/app.c"]);
    sh(
        dir,
        "valgrind",
        &[
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-jumps=yes",
            "--callgrind-out-file=cg.out",
            "./app",
        ],
    );
    let o = sediment(
        dir,
        &["pgo", "--binary", "oth/app", "cg.out", "-o", "u.txt"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("sediment: cg.out: "), "{err}");
    assert!(err.contains("lie outside oth/app's code"), "{err}");
    assert!(!dir.join("u.txt").exists());
    // `-p` is the old spelling of the positional INPUT, a hidden alias.
    sediment_ok(
        dir,
        &["pgo", "--binary", "app", "-p", "cg.out", "-o", "u.txt"],
    );
}
