//! `sediment order`: profile in, order file out; deterministic, and bad profiles rejected cleanly.

use crate::common::{sediment, sediment_ok, sh};
use std::fs;

/// A hand-written profile: `main -> work -> helper` hot, `cold` never seen.
const PROFILE: &str = "sediment-profile 1\n\
meta binary demo\n\
meta source callgrind\n\
meta total 100\n\
fn 0 0 - cold -\n\
fn 1 30 - helper a.c\n\
fn 2 10 - main -\n\
fn 3 40 200 work -\n\
call 2 3 5\n\
call 3 1 50\n";

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `sediment args` in `d`, asserts it succeeded, and returns its standard error.
fn ok(d: &std::path::Path, args: &[&str]) -> String {
    let o = sediment_ok(d, args);
    stderr(&o)
}

// C3 chains main, work, helper in call order, leaves `cold` out, and is byte-identical on rerun.
#[test]
fn order_c3_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    for out in ["a.order", "b.order"] {
        sediment_ok(dir.path(), &["order", "-p", "p.sprof", "-o", out]);
    }
    let a = fs::read(dir.path().join("a.order")).unwrap();
    let b = fs::read(dir.path().join("b.order")).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        String::from_utf8(a).unwrap(),
        "sediment-order 1\n\
         meta algorithm c3\n\
         meta binary demo\n\
         meta parameters max-cluster-size=1048576,caller-degrade-factor=8,min-arc-probability=0.1,default-size=64\n\
         main -\n\
         work -\n\
         helper a.c\n"
    );
}

// `--algorithm hot` lists the seen functions hottest first.
#[test]
fn order_hot() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    sediment_ok(
        dir.path(),
        &[
            "order",
            "-p",
            "p.sprof",
            "--algorithm",
            "hot",
            "-o",
            "h.order",
        ],
    );
    let text = fs::read_to_string(dir.path().join("h.order")).unwrap();
    let entries: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("meta") && !l.starts_with("sediment"))
        .collect();
    assert_eq!(entries, ["work -", "helper a.c", "main -"]);
    assert!(text.contains("meta algorithm hot\n"), "{text}");
}

// A corrupt profile: one-line error naming the file and line, non-zero exit, no order file.
#[test]
fn order_bad_profile_names_line() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("bad.sprof"),
        PROFILE.replace("call 3 1 50", "call 3 9 50"),
    )
    .unwrap();
    let o = sediment(dir.path(), &["order", "-p", "bad.sprof", "-o", "x.order"]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o),
        "sediment: bad.sprof: line 10: call refers to unknown function 9\n"
    );
    assert!(!dir.path().join("x.order").exists());

    // Truncated mid-line (`call 3 1 5`, no newline): the last line is named.
    fs::write(dir.path().join("cut.sprof"), &PROFILE[..PROFILE.len() - 2]).unwrap();
    let o = sediment(dir.path(), &["order", "-p", "cut.sprof", "-o", "x.order"]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o),
        "sediment: cut.sprof: line 10: file ends in the middle of a line (truncated?)\n"
    );
    assert!(!dir.path().join("x.order").exists());
}

// A missing profile and an unknown algorithm fail without writing anything.
#[test]
fn order_missing_input_and_unknown_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let o = sediment(dir.path(), &["order", "-p", "none.sprof", "-o", "x.order"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).starts_with("sediment: none.sprof: cannot open"),
        "{}",
        stderr(&o)
    );
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    let o = sediment(
        dir.path(),
        &[
            "order",
            "-p",
            "p.sprof",
            "--algorithm",
            "tsp",
            "-o",
            "x.order",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "unknown ordering algorithm `tsp` (known: bp, c3, cdsort, ext-tsp, hot, paged, pettis-hansen, tiered)"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("x.order").exists());
}

// `ext-tsp` and `cdsort` both chain main -> work -> helper in call order, record their
// parameters, and write byte-identical files on a rerun.
#[test]
fn order_ext_tsp_and_cdsort_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    for (alg, params) in [
        (
            "ext-tsp",
            "fallthrough-weight=1,forward-weight=0.1,backward-weight=0.1,forward-distance=1024,\
             backward-distance=640,max-chain-size=512,default-size=64",
        ),
        (
            "cdsort",
            "cache-entries=16,cache-size=2048,max-chain-size=128,distance-power=0.25,\
             frequency-scale=0.25,default-size=64",
        ),
    ] {
        let mut texts = Vec::new();
        for out in ["a.order", "b.order"] {
            sediment_ok(
                dir.path(),
                &["order", "-p", "p.sprof", "--algorithm", alg, "-o", out],
            );
            texts.push(fs::read(dir.path().join(out)).unwrap());
        }
        assert_eq!(texts[0], texts[1], "{alg}");
        assert_eq!(
            String::from_utf8(texts.remove(0)).unwrap(),
            format!(
                "sediment-order 1\n\
                 meta algorithm {alg}\n\
                 meta binary demo\n\
                 meta parameters {params}\n\
                 main -\n\
                 work -\n\
                 helper a.c\n"
            )
        );
    }
}

// `--compare` prints one row per algorithm with the predicted footprint and scores, marks the
// chosen one, is byte-identical on a rerun, and still writes the chosen order with `-o`.
#[test]
fn order_compare_prints_every_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    let args = [
        "order",
        "-p",
        "p.sprof",
        "--compare",
        "--algorithm",
        "tiered",
    ];
    let a = sediment_ok(dir.path(), &args);
    let b = sediment(dir.path(), &args);
    assert_eq!(a.stdout, b.stdout);
    let table = String::from_utf8(a.stdout).unwrap();
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .filter(|l| l.starts_with('|'))
        .collect();
    // The table says its footprints are predicted from the profile, not measured.
    assert!(
        table.contains("predicted from the profile's weights"),
        "{table}"
    );
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r.split('|').nth(1).unwrap().trim())
        .collect();
    assert_eq!(
        names,
        [
            "bp",
            "c3",
            "cdsort",
            "ext-tsp",
            "hot",
            "paged",
            "pettis-hansen",
            "tiered (chosen)"
        ]
    );
    // All functions (64 + 64 + 64 + 200 bytes) fit in one page: one page holds 99%, and both
    // calls stay within it whatever the order. C3 lays out main (10 units, 64 bytes), work (40,
    // 200 bytes), helper (30, 64 bytes) over 6 lines; the lightest, helper's last 8 bytes
    // (3.75), is more than the 1% (0.8) that may be left out, so 99% needs all 6. The chain
    // makes both calls fall-throughs: ExtTSP 5 + 50 = 55.
    let c3: Vec<&str> = rows[1].split('|').map(str::trim).collect();
    assert_eq!(c3[2..7], ["1", "1", "6", "100.0%", "5.5000e1"]);
    assert!(!dir.path().join("x.order").exists());
    sediment_ok(
        dir.path(),
        &["order", "-p", "p.sprof", "--compare", "-o", "x.order"],
    );
    assert!(dir.path().join("x.order").exists());
    // Without --compare an output is required.
    let o = sediment(dir.path(), &["order", "-p", "p.sprof"]);
    assert!(!o.status.success());
}

// `--startup` feeds `bp`: `cold` never sampled but ran first, so it leads; an unknown name is
// one counted warning.
#[test]
fn order_bp_follows_startup_order() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("p.sprof"), PROFILE).unwrap();
    fs::write(
        dir.path().join("first.order"),
        "sediment-order 1\ncold -\nnope -\nmain -\n",
    )
    .unwrap();
    let o = sediment_ok(
        dir.path(),
        &[
            "order",
            "-p",
            "p.sprof",
            "--algorithm",
            "bp",
            "--startup",
            "first.order",
            "-o",
            "bp.order",
        ],
    );
    assert_eq!(
        stderr(&o),
        "sediment: warning: first.order: 1 of 3 functions are not in the profile, ignored\n"
    );
    let text = fs::read_to_string(dir.path().join("bp.order")).unwrap();
    let entries: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("meta") && !l.starts_with("sediment"))
        .collect();
    assert_eq!(entries, ["cold -", "main -", "work -", "helper a.c"]);
}

/// A program whose static call graph reaches past the sampled functions: `work` calls
/// `lukewarm`, which calls `deep`; `caller_only` calls `work`; `cold` is called by nobody.
const FILL_SOURCE: &str = r#"
__attribute__((noinline)) int deep(int x) { return x * 7; }
__attribute__((noinline)) int lukewarm(int x) { return deep(x) + 1; }
__attribute__((noinline)) int work(int x) { return x > 1000000 ? lukewarm(x) : x + 2; }
__attribute__((noinline)) int caller_only(int x) { return work(x) - 1; }
__attribute__((noinline)) int cold(int x) { return x - 3; }
int main(int argc, char **argv) { (void)argv; return work(argc); }
"#;

/// The function names of an order file.
fn order_names(path: &std::path::Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("sediment-order") && !l.starts_with("meta "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

// A real -fcallgraph-info graph fills the sampled order: the sampled `main`, `work` keep their
// places, callees follow level by level, callers only with --fill-callers, `cold` never.
#[test]
fn fill_from_gcc_callgraph() {
    if !crate::common::have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("prog.c"), FILL_SOURCE).unwrap();
    sh(
        d,
        "gcc",
        &["-O2", "-fcallgraph-info", "-c", "prog.c", "-o", "prog.o"],
    );
    let run = |args: &[&str]| ok(d, args);
    run(&[
        "import",
        "--format",
        "gcc-callgraph",
        "--program",
        "prog",
        "prog.ci",
        "-o",
        "static.sprof",
    ]);
    // The sampled profile saw only main -> work.
    let sampled = "sediment-profile 1\nmeta binary prog\nmeta source perf\nmeta total 10\n\
                   fn 0 2 - main -\nfn 1 8 - work -\ncall 0 1 2\n";
    fs::write(d.join("p.sprof"), sampled).unwrap();
    run(&["order", "-p", "p.sprof", "-o", "plain.order"]);
    assert_eq!(order_names(&d.join("plain.order")), ["main", "work"]);
    let log = run(&[
        "order",
        "-p",
        "p.sprof",
        "--fill-from",
        "static.sprof",
        "-o",
        "f.order",
    ]);
    assert_eq!(
        order_names(&d.join("f.order")),
        ["main", "work", "lukewarm", "deep"]
    );
    assert!(
        log.contains("2 functions ordered from the profile, 2 added"),
        "{log}"
    );
    run(&[
        "order",
        "-p",
        "p.sprof",
        "--fill-from",
        "static.sprof",
        "--fill-depth",
        "1",
        "-o",
        "f1.order",
    ]);
    assert_eq!(
        order_names(&d.join("f1.order")),
        ["main", "work", "lukewarm"]
    );
    run(&[
        "order",
        "-p",
        "p.sprof",
        "--fill-from",
        "static.sprof",
        "--fill-callers",
        "-o",
        "fc.order",
    ]);
    // Level 1 from work: its callee lukewarm, then its other caller caller_only; level 2: deep.
    assert_eq!(
        order_names(&d.join("fc.order")),
        ["main", "work", "lukewarm", "caller_only", "deep"]
    );
}

// The static graph from object relocations (any compiler, no extra flag) and `--fill-rest`:
// after the sampled `main`, `work` and the fill (`lukewarm`, `deep`), every other function
// follows in call-tree clusters, entry points in name order (the static profile's): the
// lone `caller_only` and `cold`; `feature`, which never ran and which nothing calls, followed
// by what its code refers to, `apply` (a call into b.o) and the static `step` (its address
// handed to `apply`, which a graph of calls alone would not show); then `zzz_unused` with
// b.c's static `helper`.
#[test]
fn fill_rest_from_object_relocations() {
    if !crate::common::have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = format!(
        "{FILL_SOURCE}\nstatic __attribute__((noinline)) int step(int x) {{ return x ^ 5; }}\n\
         int apply(int (*f)(int), int x);\n\
         __attribute__((noinline)) int feature(int x) {{ return apply(step, x) + 3; }}\n"
    );
    fs::write(d.join("a.c"), a).unwrap();
    fs::write(
        d.join("b.c"),
        "int apply(int (*f)(int), int x) { return f(x) * 2; }\n\
         static __attribute__((noinline)) int helper(int x) { return x + 9; }\n\
         int zzz_unused(int x) { return helper(x); }\n",
    )
    .unwrap();
    sh(
        d,
        "gcc",
        &["-O2", "-ffunction-sections", "-c", "a.c", "b.c"],
    );
    ok(
        d,
        &[
            "import",
            "--format",
            "objects",
            "--program",
            "prog",
            "a.o",
            "b.o",
            "-o",
            "static.sprof",
        ],
    );
    let graph =
        sediment_profile::Profile::from_text(&fs::read_to_string(d.join("static.sprof")).unwrap())
            .unwrap();
    let edges = graph.named_edges();
    for want in [
        ("feature", "apply"),
        ("feature", "step (a.c)"),
        ("lukewarm", "deep"),
        ("zzz_unused", "helper (b.c)"),
        ("main", "work"),
    ] {
        assert!(
            edges.contains(&(want.0.into(), want.1.into(), 1)),
            "{want:?} not in {edges:?}"
        );
    }
    assert_eq!(graph.meta.extra["confidence"], "low");
    let sampled = "sediment-profile 1\nmeta binary prog\nmeta source perf\nmeta total 10\n\
                   fn 0 2 - main -\nfn 1 8 - work -\ncall 0 1 2\n";
    fs::write(d.join("p.sprof"), sampled).unwrap();
    let fill = ["order", "-p", "p.sprof", "--fill-from", "static.sprof"];
    ok(d, &[&fill[..], &["-o", "f.order"]].concat());
    ok(d, &[&fill[..], &["--fill-rest", "-o", "r.order"]].concat());
    assert_eq!(
        order_names(&d.join("f.order")),
        ["main", "work", "lukewarm", "deep"]
    );
    assert_eq!(
        order_names(&d.join("r.order")),
        [
            "main",
            "work",
            "lukewarm",
            "deep",
            "caller_only",
            "cold",
            "feature",
            "apply",
            "step",
            "zzz_unused",
            "helper"
        ]
    );
    // Without --fill-from there is nothing to fill the rest from (clap names the missing flag).
    let o = sediment(
        d,
        &["order", "-p", "p.sprof", "--fill-rest", "-o", "x.order"],
    );
    assert!(!o.status.success() && stderr(&o).contains("--fill-from"));
    assert!(!d.join("x.order").exists());
}

// Regression: `--fill-from` took another program's static graph without a check, which
// `merge` refuses. The same check now applies: a different binary (or build-id) is an error
// naming both files, and no order is written; the same program under another path passes.
#[test]
fn fill_from_another_program_is_refused() {
    // A static graph of another program names none of the profile's functions but `main`; one
    // of the same objects under another binary's name (another link) is taken.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("p.sprof"), PROFILE).unwrap();
    let graph = |binary: &str, callee: &str| {
        format!(
            "sediment-profile 1\nmeta binary {binary}\nmeta source relocations\nmeta total 0\n\
             fn 0 0 - main -\nfn 1 0 - {callee} -\ncall 0 1 1\n"
        )
    };
    fs::write(d.join("other.sprof"), graph("/usr/bin/other", "parse")).unwrap();
    fs::write(d.join("same.sprof"), graph("/build/v01-s0", "work")).unwrap();
    let fill =
        |g: &str, out: &str| sediment(d, &["order", "-p", "p.sprof", "--fill-from", g, "-o", out]);
    let o = fill("other.sprof", "x.order");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("sediment: p.sprof: only 0.0% of the profile's weight")
            && err.contains("other.sprof"),
        "{err}"
    );
    assert!(!d.join("x.order").exists());
    let o = fill("same.sprof", "y.order");
    assert!(o.status.success(), "{}", stderr(&o));
}

// `order --compare --simulate BIN` has a first row for the binary as linked, and recommends
// an algorithm only from the simulator's replay. Here 80 hot functions sit 8 KiB apart, each
// between two never-run functions of nops: as linked, the hot loop walks 80 pages (more than
// a 64-entry iTLB holds), and any order packs them into a few, so the as-linked row predicts
// more pages than c3's and the replay names an algorithm.
#[test]
fn compare_has_the_current_layout_and_recommends_from_the_replay() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut src = String::from("#include <stdio.h>\n");
    for i in 0..80 {
        src.push_str(&format!(
            "__attribute__((noinline)) int hot{i}(int x) {{ return x * {} + {i}; }}\n\
             __attribute__((noinline)) void cold{i}(void) {{ __asm__ volatile(\".skip 8192, 0x90\"); }}\n",
            i % 7 + 2
        ));
    }
    src.push_str("int main(int argc, char **argv) { (void)argv; int s = 0;\n");
    src.push_str("  for (int r = 0; r < 300; r++) {\n");
    for i in 0..80 {
        src.push_str(&format!("    s = hot{i}(s);\n"));
    }
    src.push_str("  }\n  if (argc > 5) {\n");
    for i in 0..80 {
        src.push_str(&format!("    cold{i}();\n"));
    }
    src.push_str("  }\n  printf(\"%d\\n\", s); return 0; }\n");
    std::fs::write(d.join("app.c"), src).unwrap();
    crate::common::run(
        d,
        "gcc",
        &["-O1", "-ffunction-sections", "app.c", "-o", "app"],
    );
    crate::common::record_callgrind(d, "app.sprof", "./app");
    let out = sediment_ok(
        d,
        &[
            "order",
            "-p",
            "app.sprof",
            "--compare",
            "--simulate",
            "./app",
            "-j",
            "1",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let pages = |prefix: &str| -> u64 {
        let row = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` row: {text}"));
        row.split('|').nth(2).unwrap().trim().parse().unwrap()
    };
    let (linked, c3) = (pages("| as linked (./app) |"), pages("| c3 (chosen) |"));
    assert!(
        linked >= 40 && c3 <= 4,
        "as linked {linked} pages, c3 {c3}: {text}"
    );
    let replay = text
        .lines()
        .find(|l| l.starts_with("replay: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        replay.starts_with("replay: `") && replay.contains("order with --algorithm"),
        "{replay}"
    );
    // Without --simulate there is no current-layout row and no recommendation.
    let out = sediment(d, &["order", "-p", "app.sprof", "--compare"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("as linked") && !text.contains("replay:"),
        "{text}"
    );
}
