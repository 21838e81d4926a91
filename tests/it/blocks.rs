//! `sediment blocks` end to end with the real compilers: a small C program with a hot loop and
//! cold error paths, built twice with clang 16 (`-fbasic-block-sections=labels`, then
//! `=list=` with Sediment's clusters) or with GCC's profile-driven
//! `-freorder-blocks-and-partition`, profiled under callgrind, linked with lld and the emitted
//! order; the split sections and the final addresses are checked with the ELF readers.

use crate::common::{fails_one_line, have_tool, sediment, sediment_ok, sh};
use object::{Object, ObjectSection, ObjectSymbol};
use sediment_elf::{read_bb_addr_map, Binary};
use std::path::Path;

const APP_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static void fail(const char *m, int v) { fprintf(stderr, "error: %s %d\n", m, v); exit(3); }
__attribute__((noinline)) int step(int x) {
  if (x < 0) { fprintf(stderr, "negative %d\n", x); fail("neg", x); }
  if (x == 123456789) { puts("rare value"); x ^= 0x55; }
  return (x * 7 + 3) % 1000003;
}
__attribute__((noinline)) long run(int n) {
  long s = 0; int x = 1;
  for (int i = 0; i < n; i++) {
    x = step(x);
    if (x % 1000 == 999 && i < 0) { fprintf(stderr, "odd state %d at %d\n", x, i); fail("state", i); }
    s += x;
  }
  return s;
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (n <= 0) { fail("bad n", n); }
  printf("%ld\n", run(n));
  return 0;
}
"#;

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = sediment_ok(dir, args);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command` under callgrind with the instruction addresses and jumps a block plan reads,
/// into `out`.
fn callgrind(dir: &Path, out: &str, command: &[&str]) {
    let file = format!("--callgrind-out-file={out}");
    let mut args = vec![
        "--tool=callgrind",
        "--dump-instr=yes",
        "--collect-jumps=yes",
        &file,
    ];
    args.extend_from_slice(command);
    sh(dir, "valgrind", &args);
}

/// A temporary directory holding `app.c` (APP_C), or `None` (the test is skipped) when
/// clang-16, valgrind or lld is missing.
fn clang_app() -> Option<tempfile::TempDir> {
    if !have_tool("clang-16") || !have_tool("valgrind") || !have_tool("ld.lld") {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("app.c"), APP_C).unwrap();
    Some(tmp)
}

/// `CC -O2 -ffunction-sections ARGS` in `dir`.
fn cc(dir: &Path, compiler: &str, args: &[&str]) {
    let mut a = vec!["-O2", "-ffunction-sections"];
    a.extend_from_slice(args);
    sh(dir, compiler, &a);
}

/// Build 1 of the clang route: `app1`, with `-fbasic-block-sections=labels`, run once and
/// profiled under callgrind into `cg.out`; returns its output.
fn labels_trained(dir: &Path) -> String {
    cc(
        dir,
        "clang-16",
        &[
            "-fbasic-block-sections=labels",
            "-fuse-ld=lld",
            "app.c",
            "-o",
            "app1",
        ],
    );
    let expected = sh(dir, "./app1", &["20000"]);
    callgrind(dir, "cg.out", &["./app1", "20000"]);
    expected
}

/// Build 2 of the clang route: `app2.o` with the plan's clusters; returns the section name of
/// each named symbol, as (symbol, section).
fn list_build(dir: &Path) -> Vec<(String, String)> {
    let list = "-fbasic-block-sections=list=plan/bb-list.txt";
    cc(dir, "clang-16", &[list, "-c", "app.c", "-o", "app2.o"]);
    let obj = std::fs::read(dir.join("app2.o")).unwrap();
    let file = object::File::parse(&*obj).unwrap();
    file.symbols()
        .filter_map(|s| {
            let section = file.section_by_index(s.section_index()?).ok()?;
            Some((s.name().ok()?.to_string(), section.name().ok()?.to_string()))
        })
        .collect()
}

/// The section of `symbol` in a [`list_build`] result.
fn section_of<'a>(sections: &'a [(String, String)], symbol: &str) -> &'a str {
    let found = sections.iter().find(|s| s.0 == symbol);
    &found.unwrap_or_else(|| panic!("no {symbol} in app2.o")).1
}

/// `sediment link` of `plan/order.txt` for lld over `obj`, then `compiler` links `obj` into
/// `out` with `sediment link-flags`; returns lld's ordering file.
fn link_ordered(dir: &Path, compiler: &str, obj: &str, out: &str) -> String {
    let order = ["--order", "plan/order.txt", "-o", "app.symorder", obj];
    ok(
        dir,
        &[&["link", "--linker", "lld"][..], &order[..]].concat(),
    );
    let flags = ok(dir, &["link-flags", "--linker", "lld", "app.symorder"]);
    let mut args = vec!["-fuse-ld=lld", obj, "-o", out];
    args.extend(flags.split_whitespace());
    cc(dir, compiler, &args);
    std::fs::read_to_string(dir.join("app.symorder")).unwrap()
}

/// Address and name of every function symbol of a linked binary (including clang's NOTYPE
/// `.cold` parts, as `sediment_elf::Binary` reads them).
fn symbols(path: &Path) -> Vec<(u64, String)> {
    let bytes = std::fs::read(path).unwrap();
    let b = Binary::parse(&path.display().to_string(), &bytes).unwrap();
    b.functions
        .iter()
        .map(|f| (f.address, f.key.name.clone()))
        .collect()
}

fn address(syms: &[(u64, String)], name: &str) -> u64 {
    syms.iter()
        .find(|s| s.1 == name)
        .unwrap_or_else(|| panic!("no symbol {name} in {syms:?}"))
        .0
}

/// A function's address and its blocks as (id, offset, size).
type MapEntry = (u64, Vec<(u64, u64, u64)>);

/// `llvm-readobj --bb-addr-map` printed as (function address, [(id, offset, size)]).
fn readobj_map(dir: &Path, binary: &str) -> Vec<MapEntry> {
    let text = sh(dir, "llvm-readobj-16", &["--bb-addr-map", binary]);
    let hex = |l: &str, key: &str| {
        l.trim()
            .strip_prefix(key)
            .map(|v| u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).unwrap())
    };
    let mut out: Vec<MapEntry> = Vec::new();
    let mut block = (0, 0, 0);
    for l in text.lines() {
        if let Some(a) = hex(l, "At:") {
            out.push((a, Vec::new()));
        } else if let Some(id) = l.trim().strip_prefix("ID:") {
            block.0 = id.trim().parse().unwrap();
        } else if let Some(o) = hex(l, "Offset:") {
            block.1 = o;
        } else if let Some(s) = hex(l, "Size:") {
            block.2 = s;
            out.last_mut().unwrap().1.push(block);
        }
    }
    out.sort();
    out
}

// Sediment's reader of `.llvm_bb_addr_map` agrees with llvm-readobj on a clang 16 build.
#[test]
fn bb_addr_map_matches_llvm_readobj() {
    if !have_tool("clang-16") || !have_tool("llvm-readobj-16") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    sh(
        dir,
        "clang-16",
        &[
            "-O2",
            "-ffunction-sections",
            "-fbasic-block-sections=labels",
            "-fuse-ld=lld",
            "app.c",
            "-o",
            "app",
        ],
    );
    let bytes = std::fs::read(dir.join("app")).unwrap();
    let ours: Vec<MapEntry> = read_bb_addr_map("app", &bytes)
        .unwrap()
        .into_iter()
        .map(|f| {
            let blocks = f
                .blocks
                .iter()
                .map(|b| (u64::from(b.id), b.offset, b.size))
                .collect();
            (f.address, blocks)
        })
        .collect();
    let theirs = readobj_map(dir, "app");
    assert!(ours.len() >= 4, "{ours:?}");
    assert_eq!(ours, theirs);
}

// The clang route: the cold error paths of `step`, `run` and `main` move to `.cold` parts in
// `.text.split.*` sections, and the linked binary has every hot part before every cold part.
#[test]
fn clang_flow_puts_cold_parts_after_hot_code() {
    let Some(tmp) = clang_app() else { return };
    let dir = tmp.path();
    // Build 1: labels, profiled.
    let expected = labels_trained(dir);
    ok(
        dir,
        &["blocks", "plan", "--binary", "app1", "cg.out", "-o", "plan"],
    );
    let list = std::fs::read_to_string(dir.join("plan/bb-list.txt")).unwrap();
    for f in ["!step\n!!0 ", "!run\n!!0 ", "!main\n!!0 "] {
        assert!(list.contains(f), "{f:?} not in\n{list}");
    }
    assert!(!list.contains("!fail"), "fail never ran:\n{list}");
    // Same plan again: byte-identical.
    ok(
        dir,
        &[
            "blocks", "plan", "--binary", "app1", "cg.out", "-o", "plan2",
        ],
    );
    for f in ["bb-list.txt", "order.txt"] {
        assert_eq!(
            std::fs::read(dir.join("plan").join(f)).unwrap(),
            std::fs::read(dir.join("plan2").join(f)).unwrap(),
            "{f}"
        );
    }

    // Build 2: the clusters, then the hot-then-cold order through `sediment link`.
    let sections = list_build(dir);
    assert_eq!(section_of(&sections, "step"), ".text.hot.step");
    assert_eq!(section_of(&sections, "step.cold"), ".text.split.step");
    assert_eq!(section_of(&sections, "run.cold"), ".text.split.run");

    let symorder = link_ordered(dir, "clang-16", "app2.o", "app2");
    assert!(symorder.contains("step.cold\n"), "{symorder}");
    assert_eq!(sh(dir, "./app2", &["20000"]), expected);

    let syms = symbols(&dir.join("app2"));
    let hot_end = ["main", "run", "step"]
        .iter()
        .map(|n| address(&syms, n))
        .max()
        .unwrap();
    let cold_start = ["main.cold", "run.cold", "step.cold"]
        .iter()
        .map(|n| address(&syms, n))
        .min()
        .unwrap();
    assert!(hot_end < cold_start, "{syms:?}");
    let report = ok(
        dir,
        &["blocks", "check", "--plan", "plan", "--binary", "app2"],
    );
    assert!(report.contains("3 found of 3"), "{report}");
    // The labels build itself (no split) has no cold parts to find.
    let unsplit = symbols(&dir.join("app1"));
    assert!(
        !unsplit.iter().any(|s| s.1.ends_with(".cold")),
        "{unsplit:?}"
    );
}

// Two clusters per function (`--hot-coverage`): `run`'s loop runs 20000 times but its entry
// once, so the loop becomes `run.__part.1` in its own `.text.hot.run` section and is placed
// with `step` (also run 20000 times) before the warm parts (`main`, `run`'s entry), which come
// before every cold part. Checked on the linked binary with the ELF reader.
#[test]
fn clang_flow_places_very_hot_parts_first() {
    let Some(tmp) = clang_app() else { return };
    let dir = tmp.path();
    let expected = labels_trained(dir);
    let plan = ["blocks", "plan", "--binary", "app1", "cg.out"];
    ok(
        dir,
        &[&plan[..], &["--hot-coverage", "0.9", "-o", "plan"]].concat(),
    );
    // Same inputs, byte-identical outputs; a share outside 0..=1 is a one-line error.
    ok(
        dir,
        &[&plan[..], &["--hot-coverage", "0.9", "-o", "again"]].concat(),
    );
    for f in ["bb-list.txt", "order.txt"] {
        let read = |d: &str| std::fs::read(dir.join(d).join(f)).unwrap();
        assert_eq!(read("plan"), read("again"), "{f}");
    }
    let bad = sediment(
        dir,
        &[&plan[..], &["--hot-coverage", "2", "-o", "bad"]].concat(),
    );
    assert!(!bad.status.success() && !dir.join("bad").exists());
    let list = std::fs::read_to_string(dir.join("plan/bb-list.txt")).unwrap();
    let run = list.split("!run\n").nth(1).unwrap();
    let run_clusters = run.lines().take_while(|l| l.starts_with("!!")).count();
    assert_eq!(run_clusters, 2, "{list}");
    let order = std::fs::read_to_string(dir.join("plan/order.txt")).unwrap();
    let at = |name: &str| {
        order
            .lines()
            .position(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in\n{order}"))
    };
    assert!(
        at("run.__part.1") < at("main") && at("step") < at("run"),
        "{order}"
    );

    // The loop's cluster is a section of its own, named after the function like the first.
    let sections = list_build(dir);
    assert_eq!(section_of(&sections, "run.__part.1"), ".text.hot.run");
    assert_eq!(section_of(&sections, "run"), ".text.hot.run");
    link_ordered(dir, "clang-16", "app2.o", "app2");
    assert_eq!(sh(dir, "./app2", &["20000"]), expected);

    let syms = symbols(&dir.join("app2"));
    let last = |names: &[&str]| names.iter().map(|n| address(&syms, n)).max().unwrap();
    let first = |names: &[&str]| names.iter().map(|n| address(&syms, n)).min().unwrap();
    assert!(
        last(&["step", "run.__part.1"]) < first(&["main", "run"]),
        "{syms:?}"
    );
    assert!(
        last(&["main", "run"]) < first(&["run.cold", "step.cold"]),
        "{syms:?}"
    );
    let report = ok(
        dir,
        &["blocks", "check", "--plan", "plan", "--binary", "app2"],
    );
    assert!(report.contains("ok: every hot part"), "{report}");
    // The same objects linked without the order: the check fails.
    sh(dir, "clang-16", &["-fuse-ld=lld", "app2.o", "-o", "app3"]);
    // The binary as the operand: the old spelling of `--binary`, still accepted.
    let out = sediment(dir, &["blocks", "check", "--plan", "plan", "app3"]);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// The GCC route: profile-driven -freorder-blocks-and-partition splits `name.cold` into
// `.text.unlikely.*`; the plan (no block map) orders the hot functions and leaves every
// `.cold` part after them.
#[test]
fn gcc_flow_puts_cold_parts_last() {
    if !have_tool("gcc") || !have_tool("valgrind") || !have_tool("ld.lld") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    let cc = |args: &[&str]| cc(dir, "gcc", args);
    cc(&["-fprofile-generate", "-c", "app.c", "-o", "app.o"]);
    cc(&["-fprofile-generate", "app.o", "-o", "gen"]);
    let expected = sh(dir, "./gen", &["20000"]);
    cc(&[
        "-fprofile-use",
        "-freorder-blocks-and-partition",
        "-c",
        "app.c",
        "-o",
        "app.o",
    ]);
    cc(&["-fuse-ld=lld", "app.o", "-o", "pgo"]);
    let split: Vec<String> = symbols(&dir.join("pgo"))
        .into_iter()
        .map(|s| s.1)
        .filter(|n| n.ends_with(".cold"))
        .collect();
    assert!(!split.is_empty(), "GCC split nothing");
    callgrind(dir, "cg.out", &["./pgo", "20000"]);
    ok(
        dir,
        &["blocks", "plan", "--binary", "pgo", "cg.out", "-o", "plan"],
    );
    assert!(!dir.join("plan/bb-list.txt").exists());
    link_ordered(dir, "gcc", "app.o", "app");
    assert_eq!(sh(dir, "./app", &["20000"]), expected);
    let syms = symbols(&dir.join("app"));
    let hot_end = ["run", "step"]
        .iter()
        .map(|n| address(&syms, n))
        .max()
        .unwrap();
    for c in &split {
        assert!(address(&syms, c) > hot_end, "{c} before hot code: {syms:?}");
    }
    ok(
        dir,
        &["blocks", "check", "--plan", "plan", "--binary", "app"],
    );
}

// Bad input: a truncated binary and a damaged profile are one-line errors naming the file,
// with a non-zero exit and no output written.
#[test]
fn bad_inputs_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("bin"), b"\x7fELF\x02\x01\x01truncated").unwrap();
    std::fs::write(dir.join("cg.out"), "events: Ir\nfn=x\n0x10 zz\n").unwrap();
    let out = sediment(
        dir,
        &["blocks", "plan", "--binary", "bin", "cg.out", "-o", "plan"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bin:"), "{err}");
    assert!(!dir.join("plan").exists());

    // A real binary with a damaged profile: the error names the profile and its line.
    let me = crate::common::sediment_bin();
    let out = sediment(
        dir,
        &[
            "blocks",
            "plan",
            "--binary",
            me.to_str().unwrap(),
            // `-p` is the old spelling of the positional INPUT, a hidden alias.
            "-p",
            "cg.out",
            "-o",
            "plan",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cg.out: line 3"), "{err}");
    assert!(!dir.join("plan").exists());
}

// Regression: `blocks check` said "ok" when the plan's parts were not in the binary at all
// (another program: "1 found of 4"), and printed `first at 0xffffffffffffffff` when no cold
// part was found. Missing parts now fail the check, naming the binary and the first missing
// part, and an address is printed only for parts found.
#[test]
fn regress_check_fails_when_plan_parts_are_missing() {
    if !have_tool("gcc") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("app.c"),
        "__attribute__((noinline)) int hot(int x) { return x * 3 + 1; }\n\
         int main(int argc, char **argv) { (void)argv; return hot(argc) & 1; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("z.c"), "int main(void) { return 0; }\n").unwrap();
    sh(dir, "gcc", &["-O1", "-o", "app", "app.c"]);
    sh(dir, "gcc", &["-O1", "-o", "z", "z.c"]);
    // A plan without a list file (the GCC route): `_start` is the C runtime's, not checked.
    let plan = |name: &str, parts: &str| {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let text = format!("sediment-order 1\n{parts}");
        std::fs::write(dir.join(name).join("order.txt"), text).unwrap();
    };
    plan("plan", "main -\nhot -\n_start -\n");
    plan("cold", "main -\nhot -\nhot.cold -\n");
    plan("empty", "_start -\n");

    let report = ok(
        dir,
        &["blocks", "check", "--plan", "plan", "--binary", "app"],
    );
    assert!(report.contains("hot parts: 2 found of 2"), "{report}");
    assert!(report.contains("cold parts: 0 found of 0\n"), "{report}");
    assert!(!report.contains("0xffffffffffffffff"), "{report}");

    let fails = |args: &[&str], needles: &[&str]| {
        let out = fails_one_line(dir, args, needles);
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(!report.contains("ok"), "{report}");
        assert!(!report.contains("0xffffffffffffffff"), "{report}");
    };
    fails(
        &["blocks", "check", "--plan", "plan", "--binary", "z"],
        &["z: 1 of the 2 parts in plan/order.txt are not in the binary (first: hot)"],
    );
    fails(
        &["blocks", "check", "--plan", "cold", "--binary", "app"],
        &["app: 1 of the 3 parts", "(first: hot.cold)"],
    );
    fails(
        &["blocks", "check", "--plan", "empty", "--binary", "app"],
        &["empty/order.txt: lists no parts to check"],
    );
}

/// A GCC build of APP_C without a block map (`app`) profiled under callgrind into `cg.out`, in
/// a new temporary directory; `None` (the test is skipped) when gcc or valgrind is missing.
fn gcc_profiled() -> Option<tempfile::TempDir> {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    cc(dir, "gcc", &["app.c", "-o", "app"]);
    callgrind(dir, "cg.out", &["./app", "20000"]);
    Some(tmp)
}

// Regression: a plan without a block map left the `bb-list.txt` of an earlier clang plan in
// the directory, and `blocks check` then took the plan for a clang one. Now the plan removes
// it (docs/design/blocks.md: the GCC route writes `order.txt` only).
#[test]
fn gcc_plan_removes_a_stale_block_list() {
    let Some(tmp) = gcc_profiled() else { return };
    let dir = tmp.path();
    std::fs::create_dir(dir.join("plan")).unwrap();
    std::fs::write(dir.join("plan/bb-list.txt"), "v1\nf stale\n!stale\n!!0\n").unwrap();
    ok(
        dir,
        &["blocks", "plan", "--binary", "app", "cg.out", "-o", "plan"],
    );
    assert!(!dir.join("plan/bb-list.txt").exists());
    let order = std::fs::read_to_string(dir.join("plan/order.txt")).unwrap();
    assert!(order.lines().any(|l| l.contains("step")), "{order}");
}

// Regression: the outputs were written one by one. Now one that cannot be replaced (a
// directory in the way of the stale list's removal) fails the plan with `order.txt` as it was.
#[test]
fn plan_changes_nothing_when_an_output_is_in_the_way() {
    let Some(tmp) = gcc_profiled() else { return };
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("plan/bb-list.txt")).unwrap();
    std::fs::write(dir.join("plan/order.txt"), "keep").unwrap();
    let out = sediment(
        dir,
        &["blocks", "plan", "--binary", "app", "cg.out", "-o", "plan"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("bb-list.txt"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("plan/order.txt")).unwrap(),
        "keep"
    );
}

// C++ for the clang route: the sources of `clang_flow_on_cxx`, (file, text). `h.h` has an
// inline function (`mix`) and a template (`Acc<T>::sum`) that every translation unit using
// them defines in a COMDAT group, and classes with virtual destructors: `Circle`'s is inline
// (D0 and D2 COMDAT), `Square`'s is defined in `a.cc`, where clang makes `D1` an alias of
// `D2` (`-mconstructor-aliases`, its default on Linux), and `Cm`'s, empty, is an alias of its
// base class `Node`'s (all four names at one address; the symbol table's first, `_ZN2CmD1Ev`,
// is not the function clang compiles: the DWARF says which). `a.cc` has exception handlers, one
// that training runs (`trained_throw`) and one it never runs (`guarded`), and cold paths
// (`__builtin_expect`, a `[[noreturn]]` error function).
const CXX_APP: [(&str, &str); 4] = [
    ("h.h", H_H),
    ("a.cc", A_CC),
    ("b.cc", B_CC),
    ("main.cc", MAIN_CC),
];
const H_H: &str = r#"#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>
#include <string>
[[noreturn]] void die(const char *m, long v);
// Inline in the header: a COMDAT copy in every translation unit that calls it.
inline __attribute__((noinline)) long mix(long x) {
  if (__builtin_expect(x == 123456789, 0)) { std::printf("rare %ld\n", x); x ^= 0x55; }
  return (x * 7 + 3) % 1000003;
}
// A template instantiated in several translation units (a COMDAT group in each).
template <class T> struct Acc {
  std::vector<T> v;
  __attribute__((noinline)) T sum(int rounds) {
    T s = 0;
    for (int r = 0; r < rounds; r++)
      for (auto x : v) {
        if (__builtin_expect(x < 0, 0)) die("negative element", (long)x);
        s += mix((long)x);
      }
    return s;
  }
};
struct Shape {
  virtual ~Shape() {}                        // inline virtual: D0/D1/D2 COMDAT in each TU
  virtual long area(long x) const = 0;
};
struct Square : Shape {
  std::vector<long> cache;
  ~Square() override;                        // defined in a.cc: D1 an alias of D2
  long area(long x) const override;
};
struct Circle : Shape {
  std::string name;
  ~Circle() override { if (__builtin_expect(name.size() > 1000, 0)) std::printf("big %s\n", name.c_str()); }
  long area(long x) const override { return mix(x) * 3; }
};
struct Node {
  std::vector<long> kids;
  virtual ~Node();                           // defined in a.cc
};
struct Cm : Node {
  ~Cm() override;                            // empty, in a.cc: an alias of Node's D2
};
long run_a(int n);
long run_b(int n);
long guarded(long x);
"#;
const A_CC: &str = r#"#include "h.h"
Square::~Square() {
  long t = 0;
  for (long c : cache) t += mix(c);
  if (__builtin_expect(t == -1, 0)) die("sum", t);
  if (__builtin_expect(cache.size() > 100000, 0)) std::printf("large cache %zu\n", cache.size());
}
long Square::area(long x) const {
  if (__builtin_expect(x < 0, 0)) die("negative side", x);
  return mix(x) * mix(x + 1);
}
Node::~Node() {
  long t = 0;
  for (long k : kids) t += mix(k);
  if (__builtin_expect(t == -3, 0)) die("node", t);
  if (__builtin_expect(kids.size() > 100000, 0)) std::printf("large node %zu\n", kids.size());
}
Cm::~Cm() {}
void die(const char *m, long v) { std::fprintf(stderr, "error: %s %ld\n", m, v); std::exit(3); }
// Exception tables: a try/catch around a call that throws on a rare path.
long guarded(long x) {
  try {
    if (__builtin_expect(x == -5, 0)) throw std::runtime_error("minus five");
    return mix(x);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "caught %s\n", e.what());
    return 0;
  }
}
// Exceptions thrown in training: the catch runs now and then, the cleanup of `s` with it;
// another handler never runs.
long trained_throw(long x) {
  long r = 0;
  try {
    std::string s(24, (char)('a' + x % 26));
    if (x % 97 == 0) throw std::runtime_error("every 97th");
    if (__builtin_expect(x == -7, 0)) throw std::logic_error("never");
    r = mix(x) + (long)s.size();
  } catch (const std::runtime_error &e) {
    r = 1;
  } catch (const std::logic_error &e) {
    std::fprintf(stderr, "logic %s\n", e.what());
    r = 2;
  }
  return r;
}
long run_a(int n) {
  Acc<long> acc;
  for (int i = 0; i < 64; i++) acc.v.push_back(i);
  long s = acc.sum(n);
  for (int i = 0; i < n; i++) {
    Shape *p = (i & 1) ? static_cast<Shape *>(new Square) : static_cast<Shape *>(new Circle);
    s += p->area(i) + guarded(i) + trained_throw(i);
    delete p;
    Node *nd = new Cm;
    nd->kids.push_back(i);
    delete nd;
  }
  return s;
}
"#;
const B_CC: &str = r#"#include "h.h"
long run_b(int n) {
  Acc<long> acc;
  Acc<int> small;
  for (int i = 0; i < 32; i++) { acc.v.push_back(i * 3); small.v.push_back(i); }
  long s = acc.sum(n) + small.sum(n);
  for (int i = 0; i < n; i++) {
    Circle c;
    Square q; q.cache.push_back(i);
    s += c.area(i) + mix(i);
  }
  return s;
}
"#;
const MAIN_CC: &str = r#"#include "h.h"
int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (n <= 0) die("bad n", n);
  Acc<long> acc;
  acc.v.push_back(argc);
  long s = run_b(n) + run_a(n) + acc.sum(n) + guarded(argc > 5 ? -5 : 1);
  std::printf("%ld\n", s);
  return 0;
}
"#;

/// Every defined symbol of the objects `objs` in `dir`, as (object, symbol, section).
fn object_symbols(dir: &Path, objs: &[&str]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for o in objs {
        let data = std::fs::read(dir.join(o)).unwrap();
        let file = object::File::parse(&*data).unwrap();
        for s in file.symbols() {
            let Some(index) = s.section_index() else {
                continue;
            };
            let section = file.section_by_index(index).unwrap();
            out.push((
                o.to_string(),
                s.name().unwrap().to_string(),
                section.name().unwrap().to_string(),
            ));
        }
    }
    out
}

// The clang route on C++ (`clang++-16`, lld): COMDAT copies of inline functions and template
// instances, a destructor whose `D1` is an alias of `D2`, exception landing pads. The plan
// names `D2` (the function clang compiles) with `D1` as its alias, every object defining a
// COMDAT copy is rebuilt with the list (so every copy has the parts, named alike), `sediment
// link` places those same-named locals (one copy survives the link), and `blocks check` finds
// every part with every hot part before every cold part. Landing pads of one function stay in
// one section (no `.text.eh.` section that no order names). The program's output, exceptions
// included, is unchanged.
#[test]
fn clang_flow_on_cxx() {
    require!("clang++-16", "valgrind", "ld.lld");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (name, text) in CXX_APP {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let tus = ["main", "b", "a"];
    let build = |flag: &str, out: &str| -> Vec<String> {
        std::fs::create_dir_all(dir.join(out)).unwrap();
        let objs: Vec<String> = tus.iter().map(|t| format!("{out}/{t}.o")).collect();
        for (t, o) in tus.iter().zip(&objs) {
            let src = format!("{t}.cc");
            cc(
                dir,
                "clang++-16",
                &[flag, "-g1", "-gdwarf-4", "-c", &src, "-o", o],
            );
        }
        objs
    };
    // Build 1: labels, in link order main, b, a (the kept COMDAT copies are main.o's).
    let labels = build("-fbasic-block-sections=labels", "l1");
    let mut link1: Vec<&str> = vec!["-fuse-ld=lld", "-o", "app1"];
    link1.extend(labels.iter().map(String::as_str));
    sh(dir, "clang++-16", &link1);
    let expected = sh(dir, "./app1", &["2000"]);
    let expected_throw = sh(dir, "./app1", &["2000", "a", "b", "c", "d", "e"]);
    callgrind(dir, "cg.out", &["./app1", "2000"]);
    let plan = ["blocks", "plan", "--binary", "app1", "cg.out"];
    ok(
        dir,
        &[&plan[..], &["--hot-coverage", "0.9", "-o", "plan"]].concat(),
    );
    let list = std::fs::read_to_string(dir.join("plan/bb-list.txt")).unwrap();
    // Square's destructor under the name clang compiles, its D1 alias after it.
    assert!(
        list.contains("\n!_ZN6SquareD2Ev/_ZN6SquareD1Ev\n"),
        "{list}"
    );
    // Cm's destructor under its base class's name, which clang compiles.
    assert!(list.contains("\n!_ZN4NodeD2Ev/_ZN2CmD1Ev\n"), "{list}");
    let order = std::fs::read_to_string(dir.join("plan/order.txt")).unwrap();
    for part in [
        "_ZN3AccIlE3sumEi.__part.1 -",
        "_ZN6SquareD2Ev.cold -",
        "_ZN4NodeD2Ev.cold -",
        "_Z3mixl.cold -",
    ] {
        assert!(order.lines().any(|l| l == part), "{part} not in\n{order}");
    }

    // Build 2: every object rebuilt with the list (each defines a listed function).
    let split = build("-fbasic-block-sections=list=plan/bb-list.txt", "l2");
    let syms = object_symbols(dir, &split.iter().map(String::as_str).collect::<Vec<_>>());
    // The COMDAT case is exercised: the template's hot part and the inline function's cold
    // part are defined, alike, in several objects.
    for part in ["_ZN3AccIlE3sumEi.__part.1", "_Z3mixl.cold"] {
        let copies = syms.iter().filter(|s| s.1 == part).count();
        assert!(copies >= 2, "{part}: {copies} copies in {split:?}");
    }
    assert!(
        !syms.iter().any(|s| s.2.starts_with(".text.eh.")),
        "landing pads split across sections: {:?}",
        syms.iter()
            .filter(|s| s.2.starts_with(".text.eh."))
            .collect::<Vec<_>>()
    );
    let link = [
        "link",
        "--linker",
        "lld",
        "--order",
        "plan/order.txt",
        "-o",
        "app.symorder",
    ];
    let mut args: Vec<&str> = link.to_vec();
    args.extend(split.iter().map(String::as_str));
    let out = sediment(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("ambiguous"), "{err}");
    let flags = ok(dir, &["link-flags", "--linker", "lld", "app.symorder"]);
    let mut link2: Vec<&str> = vec!["-fuse-ld=lld", "-o", "app2"];
    link2.extend(split.iter().map(String::as_str));
    link2.extend(flags.split_whitespace());
    sh(dir, "clang++-16", &link2);
    assert_eq!(sh(dir, "./app2", &["2000"]), expected);
    assert_eq!(
        sh(dir, "./app2", &["2000", "a", "b", "c", "d", "e"]),
        expected_throw
    );

    let report = ok(
        dir,
        &["blocks", "check", "--plan", "plan", "--binary", "app2"],
    );
    assert!(report.contains("ok: every hot part"), "{report}");
    let found = |kind: &str| {
        let line = report.lines().find(|l| l.starts_with(kind)).unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        (
            words[2].to_string(),
            words[5].trim_end_matches(',').to_string(),
        )
    };
    let (hot, hot_of) = found("hot parts:");
    let (cold, cold_of) = found("cold parts:");
    assert_eq!((&hot, &cold), (&hot_of, &cold_of), "{report}");
}

// A program of short loops and biased branches, the shapes whose layout a wrong jump count
// turns around (a loop rotated so that its latch needs an extra jump each iteration).
const LOOPS_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
struct tok { struct tok *next, *prev; long v; };
__attribute__((noinline)) struct tok *tok_at(struct tok *t, int index) {
  while (index > 0 && t) { t = t->next; --index; }
  while (index < 0 && t) { t = t->prev; ++index; }
  return t;
}
__attribute__((noinline)) long classify(long x) {
  long r = 0;
  if (x % 10 < 7) r += x * 3; else r -= x;
  switch (x & 3) { case 0: r ^= 5; break; case 1: r += 11; break; default: r -= 2; }
  if (__builtin_expect(x == -1, 0)) { fprintf(stderr, "never\n"); exit(4); }
  return r;
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  struct tok toks[64];
  for (int i = 0; i < 64; i++) {
    toks[i].next = i < 63 ? &toks[i + 1] : NULL;
    toks[i].prev = i > 0 ? &toks[i - 1] : NULL;
    toks[i].v = i;
  }
  long s = 0;
  for (int i = 0; i < n; i++) {
    struct tok *t = tok_at(&toks[32], (i % 5 == 0) ? -(i % 3) : 1 + (i & 1));
    s += (t ? t->v : 0) + classify(i);
  }
  printf("%ld\n", s);
  return 0;
}
"#;

/// The instructions a callgrind output counted (its `summary:` line).
fn instructions(dir: &Path, out: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join(out)).unwrap();
    let line = text.lines().find(|l| l.starts_with("summary:")).unwrap();
    line["summary:".len()..].trim().parse().unwrap()
}

// The split build runs no more instructions than the labels build on the training workload:
// the plan keeps the fall-throughs the training took (callgrind's `jcnd=` counts read the right
// way round), so the blocks it moves need no extra jumps on the hot path. Both builds are
// packed (`-falign-loops=1`): loop alignment padding that a new layout falls through would
// count as executed instructions. Read the other way round, the counts made this program run
// 0.6% more instructions.
#[test]
fn clang_flow_adds_no_instructions_on_the_trained_path() {
    require!("clang-16", "valgrind", "ld.lld");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("loops.c"), LOOPS_C).unwrap();
    let pack = "-falign-loops=1";
    let labels = "-fbasic-block-sections=labels";
    cc(
        dir,
        "clang-16",
        &[pack, labels, "-fuse-ld=lld", "loops.c", "-o", "app1"],
    );
    let expected = sh(dir, "./app1", &["50000"]);
    callgrind(dir, "cg1.out", &["./app1", "50000"]);
    ok(
        dir,
        &[
            "blocks", "plan", "--binary", "app1", "cg1.out", "-o", "plan",
        ],
    );
    let list = "-fbasic-block-sections=list=plan/bb-list.txt";
    cc(
        dir,
        "clang-16",
        &[pack, list, "-c", "loops.c", "-o", "app2.o"],
    );
    link_ordered(dir, "clang-16", "app2.o", "app2");
    assert_eq!(sh(dir, "./app2", &["50000"]), expected);
    callgrind(dir, "cg2.out", &["./app2", "50000"]);
    let (before, after) = (instructions(dir, "cg1.out"), instructions(dir, "cg2.out"));
    assert!(
        after * 1000 <= before * 1001,
        "split build ran {after} instructions, labels build {before}\n{}",
        std::fs::read_to_string(dir.join("plan/bb-list.txt")).unwrap()
    );
}
