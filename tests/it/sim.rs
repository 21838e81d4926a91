//! `sediment sim`: lackey's streamed trace through Sediment's own simulator, checked against
//! hand-derived counts on a program without libc and against cachegrind on a libc program.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{fixture, have_tool, sediment, sediment_ok};

use crate::common::run;

/// `sediment sim --json BINARY -- ARGS`: the metrics object of the one column, and the raw text.
fn sim(dir: &Path, binary: &str, args: &[&str]) -> (serde_json::Value, String) {
    let mut a = vec!["sim", "--json", binary, "--"];
    a.extend_from_slice(args);
    let out = sediment_ok(dir, &a);
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
    // Shifted views fed on one thread and on two, over several batches of fetches.
    let shifted = |jobs: &str| {
        let a = [
            "sim", "--json", "--shifts", "4", "-j", jobs, "loop", "--", "100000",
        ];
        let out = sediment_ok(dir.path(), &a);
        out.stdout
    };
    assert_eq!(shifted("1"), shifted("2"), "-j 1 and -j 2 differ");
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

/// Labels sorted best first by `key` (ties by label): the ranking a tool gives the layouts.
fn ranking(columns: &[(String, serde_json::Value)], key: &str) -> Vec<String> {
    let mut v: Vec<(u64, String)> = columns
        .iter()
        .map(|(l, m)| (n(m, key), l.clone()))
        .collect();
    v.sort();
    v.into_iter().map(|(_, l)| l).collect()
}

/// The `(label, metrics)` columns of a `sediment compare --json` or `sediment sim --json`.
fn columns(doc: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    doc["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_string(),
                c["metrics"].clone(),
            )
        })
        .collect()
}

/// Runs `sediment ARGS` in `dir`, fails the test with its stderr, returns stdout as JSON.
fn json_of(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = sediment_ok(dir, args);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn demo_sim_ranks_layouts_like_cachegrind_and_predicts_relinks() {
    // The built-in demo linked by lld three ways (default input order, Sediment's hot order,
    // C3), run for 300 iterations to stay cheap: the simulator ranks the three by 64-entry
    // iTLB misses and by 4 KiB pages for 99% exactly as cachegrind/callgrind
    // (`sediment compare`) do, and the default is strictly worst by both. Then the no-relink
    // prediction (`sim --order c3.order default`) lands within 10% of the relinked C3 binary on
    // both metrics, and `--shifts 3` reports a spread whose instruction count does not move.
    for tool in ["gcc", "ld.lld", "valgrind"] {
        if !have_tool(tool) {
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sediment_ok(d, &["demo", "--dir", ".", "--build-only"]);
    let mut objects: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".o"))
        .collect();
    objects.sort();
    let link = |out: &str, extra: &[String]| {
        let mut a: Vec<String> = vec!["-fuse-ld=lld".into(), "-o".into(), out.into()];
        a.extend(extra.iter().cloned());
        a.extend(objects.iter().cloned());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run(d, "gcc", &a);
    };
    link("default", &[]);
    let iters = "300";
    sediment_ok(
        d,
        &[
            "record",
            "--via",
            "callgrind",
            "-o",
            "train.sprof",
            "--",
            "./default",
            iters,
        ],
    );
    for alg in ["hot", "c3"] {
        let order = format!("{alg}.order");
        let sym = format!("{alg}.sym");
        sediment_ok(
            d,
            &[
                "order",
                "-p",
                "train.sprof",
                "--algorithm",
                alg,
                "-o",
                &order,
            ],
        );
        let mut a = vec!["link", "--linker", "lld", "--order", &order, "-o", &sym];
        a.extend(objects.iter().map(String::as_str));
        sediment_ok(d, &a);
        link(alg, &[format!("-Wl,--symbol-ordering-file={sym}")]);
    }
    let layouts = ["default", "hot", "c3"];
    let mut a = vec!["compare", "--json", "-j", "2"];
    a.extend(layouts);
    a.extend(["--", iters]);
    let cg = columns(&json_of(d, &a));
    a[0] = "sim";
    let sim = columns(&json_of(d, &a));
    for key in ["itlb_misses_64", "pages_99"] {
        let (r_cg, r_sim) = (ranking(&cg, key), ranking(&sim, key));
        assert_eq!(r_cg, r_sim, "{key}: cachegrind {cg:?} vs sim {sim:?}");
        assert_eq!(r_sim[2], "default", "{key}: {sim:?}");
        assert!(
            n(&sim[0].1, key) > n(&sim[1].1, key).max(n(&sim[2].1, key)),
            "{key}"
        );
    }

    let pred = json_of(
        d,
        &[
            "sim", "--json", "--shifts", "3", "--order", "c3.order", "default", "--", iters,
        ],
    );
    let pred_cols = columns(&pred);
    assert_eq!(pred_cols[1].0, "default@c3.order");
    // The relinked binary is simulated as linked: compare with the prediction's unshifted
    // layout (the default step moves the code by whole pages, which changes iTLB sets).
    let unshifted = &pred["columns"][1]["per_shift"][0];
    for key in ["itlb_misses_64", "pages_99"] {
        let (p, real) = (n(unshifted, key) as f64, n(&sim[2].1, key) as f64);
        assert!(
            (p - real).abs() <= 0.1 * real + 1.0,
            "{key}: predicted {p}, relinked {real}"
        );
    }
    let c = &pred["columns"][0];
    assert_eq!(pred["shifts"], serde_json::json!([0, 4176, 8352]));
    assert_eq!(c["min"]["instructions"], c["max"]["instructions"]);
    let (lo, mid, hi) = (
        c["min"]["i1_misses_32k_8way"].as_f64().unwrap(),
        c["metrics"]["i1_misses_32k_8way"].as_f64().unwrap(),
        c["max"]["i1_misses_32k_8way"].as_f64().unwrap(),
    );
    assert!(lo <= mid && mid <= hi, "{c}");

    // `compare --shifts`: the cachegrind table loses its I1 rows, which come back once, below,
    // over the shifted layouts.
    let out = sediment_ok(
        d,
        &["compare", "--shifts", "2", "default", "c3", "--", iters],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (exact, shifted) = text.split_once("\n# 2 layouts per column").unwrap();
    assert!(
        exact.contains("iTLB misses 64 entries") && !exact.contains("I1 misses"),
        "{text}"
    );
    assert_eq!(shifted.matches("I1 misses 32K/8-way").count(), 1, "{text}");
}

// `sim --first-order` writes the functions in the order they first ran (the startup order
// `order --algorithm bp --startup` takes): main calls a1, b2, c3 in that order although they
// are defined the other way round.
#[test]
fn first_order_lists_functions_as_they_first_ran() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fo.c"),
        r#"#include <stdio.h>
__attribute__((noinline)) int c3(int x) { return x * 3; }
__attribute__((noinline)) int b2(int x) { return x + 2; }
__attribute__((noinline)) int a1(int x) { return x - 1; }
int main(int argc, char **argv) {
    (void)argv;
    int s = a1(argc);
    s = b2(s);
    s = c3(s);
    printf("%d\n", s);
    return 0;
}
"#,
    )
    .unwrap();
    let ok = std::process::Command::new("gcc")
        .current_dir(dir.path())
        .args(["-O1", "-o", "fo", "fo.c"])
        .status()
        .unwrap();
    assert!(ok.success());
    sediment_ok(dir.path(), &["sim", "--first-order", "fo.order", "./fo"]);
    let order = sediment_profile::FunctionOrder::from_text(
        &std::fs::read_to_string(dir.path().join("fo.order")).unwrap(),
    )
    .unwrap();
    let pos = |n: &str| {
        order
            .functions
            .iter()
            .position(|k| k.name == n)
            .unwrap_or_else(|| panic!("{n} not in the first-execution order"))
    };
    assert!(pos("_start") < pos("main"));
    assert!(pos("main") < pos("a1") && pos("a1") < pos("b2") && pos("b2") < pos("c3"));

    // It feeds `bp` directly.
    sediment_ok(
        dir.path(),
        &[
            "record",
            "--via",
            "callgrind",
            "-o",
            "fo.sprof",
            "--",
            "./fo",
        ],
    );
    sediment_ok(
        dir.path(),
        &[
            "order",
            "-p",
            "fo.sprof",
            "--algorithm",
            "bp",
            "--startup",
            "fo.order",
            "-o",
            "bp.order",
        ],
    );

    // `order --compare --simulate` replays every algorithm's order on one lackey run.
    let cmp = sediment_ok(
        dir.path(),
        &["order", "-p", "fo.sprof", "--compare", "--simulate", "./fo"],
    );
    let text = String::from_utf8(cmp.stdout).unwrap();
    let header = text
        .lines()
        .find(|l| l.starts_with("metric "))
        .expect("a simulated table");
    for name in sediment_order::Algorithm::NAMES {
        assert!(
            header.contains(&format!(" {name} ")),
            "{name} column: {header}"
        );
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("instructions  "))
        .expect("instructions row");
    let counts: Vec<&str> = row.split_whitespace().skip(1).take(8).collect();
    assert_eq!(counts.len(), 8, "{row}");
    assert!(
        counts.windows(2).all(|w| w[0] == w[1]),
        "every layout runs the same instructions: {row}"
    );
}
