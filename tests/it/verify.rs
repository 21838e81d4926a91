//! `sediment verify` end to end: small C programs built by gcc and linked through lld, gold and
//! GNU ld, once in an order and once by default, checked against the order; profiles naming
//! functions the binary lacks; GCC's clones and LTO renames; a stripped binary; and the
//! pre-build check of a profile directory against a build tree.

use crate::common::{fails_one_line, sediment, sediment_ok, sh};
use sediment_profile::{FuncKey, FunctionOrder};
use std::path::Path;

/// How many functions each source file defines (`fN_M`, N the file).
const PER_FILE: usize = 6;
const FILES: usize = 3;

/// Writes `uN.c` for each file: PER_FILE non-inlined functions, each calling the next, and a
/// `main` in `main.c` that calls the first of each file.
fn write_sources(dir: &Path) {
    for n in 0..FILES {
        let mut s = String::new();
        for m in (0..PER_FILE).rev() {
            let next = if m + 1 < PER_FILE {
                format!("f{n}_{}(x + 1)", m + 1)
            } else {
                "x".to_string()
            };
            s.push_str(&format!(
                "int f{n}_{m}(int x);\n__attribute__((noinline)) int f{n}_{m}(int x) {{ return ({next}) * 3 + {m}; }}\n"
            ));
        }
        std::fs::write(dir.join(format!("u{n}.c")), s).unwrap();
    }
    let mut main = String::from("#include <stdio.h>\n");
    for n in 0..FILES {
        main.push_str(&format!("int f{n}_0(int);\n"));
    }
    main.push_str("int main(int argc, char **argv) {\n  (void)argv;\n  int t = 0;\n");
    for n in 0..FILES {
        main.push_str(&format!("  t += f{n}_0(argc);\n"));
    }
    main.push_str("  printf(\"%d\\n\", t);\n  return 0;\n}\n");
    std::fs::write(dir.join("main.c"), main).unwrap();
}

/// Every function of the program in the reverse of the default layout (which follows the
/// sources, file by file), so that a default link holds next to none of it.
fn against_default() -> Vec<String> {
    let mut names = Vec::new();
    for n in 0..FILES {
        for m in 0..PER_FILE {
            names.push(format!("f{n}_{m}"));
        }
    }
    names.reverse();
    names
}

fn write_order(dir: &Path, file: &str, names: &[String]) {
    let order = FunctionOrder {
        functions: names.iter().map(|n| FuncKey::global(n.as_str())).collect(),
        ..Default::default()
    };
    std::fs::write(dir.join(file), order.to_text()).unwrap();
}

fn objects() -> Vec<String> {
    let mut v: Vec<String> = (0..FILES).map(|n| format!("u{n}.o")).collect();
    v.push("main.o".to_string());
    v
}

/// `sediment verify ARGS --json`, parsed, with the exit status.
fn verify_json(dir: &Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let out = sediment(dir, &all);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Links the objects with `linker` in the order of `order.txt` (`sediment link` and
/// `link-flags`) into `ordered_LINKER`, and by default into `default_LINKER`.
fn link_both(dir: &Path, linker: &str) {
    let file = format!("{linker}.input");
    let mut args = vec![
        "link",
        "--linker",
        linker,
        "--order",
        "order.txt",
        "-o",
        &file,
    ];
    let objs = objects();
    args.extend(objs.iter().map(String::as_str));
    sediment_ok(dir, &args);
    let flags = sediment_ok(dir, &["link-flags", "--linker", linker, &file]);
    let flags = String::from_utf8(flags.stdout).unwrap();
    let mut gcc: Vec<String> = flags.split_whitespace().map(str::to_string).collect();
    gcc.extend(objs.iter().cloned());
    gcc.extend(["-o".to_string(), format!("ordered_{linker}")]);
    let gcc: Vec<&str> = gcc.iter().map(String::as_str).collect();
    sh(dir, "gcc", &gcc);
    let fuse = format!("-fuse-ld={linker}");
    let mut plain = vec![fuse.as_str()];
    plain.extend(objs.iter().map(String::as_str));
    let out = format!("default_{linker}");
    plain.extend(["-o", &out]);
    sh(dir, "gcc", &plain);
}

// Each linker: the ordered link holds the whole order (exit 0); the default link holds little
// of it, fails the default threshold (exit 1, one line naming the binary) and the distance
// says it is far from intended.
#[test]
fn ordered_link_passes_default_link_fails() {
    require!("gcc", "ld.lld", "ld.gold", "ld.bfd");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sources(dir);
    let mut cc = vec!["-O2", "-ffunction-sections", "-c", "main.c"];
    let srcs: Vec<String> = (0..FILES).map(|n| format!("u{n}.c")).collect();
    cc.extend(srcs.iter().map(String::as_str));
    sh(dir, "gcc", &cc);
    let order = against_default();
    write_order(dir, "order.txt", &order);
    for linker in ["lld", "gold", "bfd"] {
        link_both(dir, linker);
        let ordered = format!("ordered_{linker}");
        let (ok, json, err) = verify_json(dir, &[&ordered, "--order", "order.txt"]);
        let b = &json["binaries"][0];
        assert!(ok, "{linker}: {err}\n{json}");
        assert_eq!(b["found"], order.len(), "{linker}: {json}");
        assert_eq!(b["in_order"], order.len(), "{linker}: {json}");
        assert_eq!(b["kendall_distance"], 0.0, "{linker}: {json}");
        assert_eq!(b["passes"], true);

        let default = format!("default_{linker}");
        let (ok, json, err) = verify_json(dir, &[&default, "--order", "order.txt"]);
        let b = &json["binaries"][0];
        assert!(!ok, "{linker}: the default link passed: {json}");
        assert_eq!(b["found"], order.len(), "{linker}: {json}");
        assert!(b["in_order_share"].as_f64().unwrap() < 0.9, "{json}");
        assert!(b["kendall_distance"].as_f64().unwrap() > 0.5, "{json}");
        assert_eq!(b["passes"], false);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&default) && err.contains("--min-in-order"),
            "{err}"
        );
        // A threshold the default link meets passes it.
        let share = b["in_order_share"].as_f64().unwrap();
        let low = format!("{share}");
        sediment_ok(
            dir,
            &[
                "verify",
                &default,
                "--order",
                "order.txt",
                "--min-in-order",
                &low,
            ],
        );
    }
}

// A profile naming functions the binary lacks: they are counted, named, and their share of the
// profile's weight reported; `--min-found` above the found share fails.
#[test]
fn profile_missing_share() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sources(dir);
    let mut cc = vec!["-O2", "main.c", "-o", "prog"];
    let srcs: Vec<String> = (0..FILES).map(|n| format!("u{n}.c")).collect();
    cc.extend(srcs.iter().map(String::as_str));
    sh(dir, "gcc", &cc);
    // Present functions and two ghosts, with weights; the ghosts' share is what must be missing.
    let fns: [(&str, u64); 5] = [
        ("f0_0", 400),
        ("f1_2", 300),
        ("ghost_one", 150),
        ("f2_5", 100),
        ("ghost_two", 50),
    ];
    let mut text = String::from("sediment-profile 1\nmeta binary prog\n");
    let mut sorted = fns;
    sorted.sort();
    for (i, (name, w)) in sorted.iter().enumerate() {
        text.push_str(&format!("fn {i} {w} - {name} -\n"));
    }
    std::fs::write(dir.join("prog.sprof"), text).unwrap();
    let ghosts: u64 = fns
        .iter()
        .filter(|(n, _)| n.starts_with("ghost"))
        .map(|(_, w)| w)
        .sum();
    let total: u64 = fns.iter().map(|(_, w)| w).sum();
    let (ok, json, err) = verify_json(dir, &["prog", "-p", "prog.sprof"]);
    let b = &json["binaries"][0];
    assert!(json["weighted"].as_bool().unwrap());
    assert_eq!(b["missing"]["count"], 2, "{json}");
    let share = b["missing"]["weight_share"].as_f64().unwrap();
    assert!(
        (share - ghosts as f64 / total as f64).abs() < 1e-9,
        "{json}"
    );
    let mut first: Vec<String> = b["missing"]["first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    first.sort();
    assert_eq!(first, ["ghost_one", "ghost_two"]);
    // Whether the three found are in order depends on the default layout; the check is about
    // what is missing: --min-in-order 0 isolates it.
    let _ = (ok, err);
    let found = 1.0 - share;
    let above = format!("{}", (found + 0.01).min(1.0));
    let below = format!("{}", found - 0.01);
    let out = sediment_ok(
        dir,
        &[
            "verify",
            "prog",
            "-p",
            "prog.sprof",
            "--min-in-order",
            "0",
            "--min-found",
            &below,
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("missing: 2, "), "{text}");
    assert!(text.contains("ghost_one"), "{text}");
    fails_one_line(
        dir,
        &[
            "verify",
            "prog",
            "-p",
            "prog.sprof",
            "--min-in-order",
            "0",
            "--min-found",
            &above,
        ],
        &["prog", "--min-found"],
    );
}

/// The function symbols of `exe` (`nm --defined-only`, text symbols), by name.
fn text_symbols(dir: &Path, exe: &str) -> Vec<String> {
    sh(dir, "nm", &["--defined-only", exe])
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, kind, name) = (w.next()?, w.next()?, w.next()?);
            matches!(kind, "t" | "T" | "W" | "w").then(|| name.to_string())
        })
        .collect()
}

/// Source with statics GCC clones at -O3: `scale` is always called with the same constant
/// (`.constprop`), `sum` takes a struct by pointer it only reads one field of (`.isra`), and
/// each file has a `static int helper` that LTO must rename.
const CLONES_A: &str = r#"#include <stdio.h>
struct big { long a[16]; int k; };
__attribute__((noinline)) static int scale(int x, int by) { for (int i = 0; i < by; i++) x = x * 3 + i; return x; }
__attribute__((noinline)) static int sum(const struct big *b, int n) { int s = 0; for (int i = 0; i < n; i++) s += b->k * i; return s; }
__attribute__((noinline)) static int helper(int x) { return x * 7 - 1; }
int other(int);
int main(int argc, char **argv) {
  (void)argv;
  struct big b = { .k = argc };
  printf("%d\n", scale(argc, 9) + scale(argc + 1, 9) + sum(&b, argc + 3) + sum(&b, argc + 4) + helper(argc) + other(argc));
  return 0;
}
"#;

const CLONES_B: &str = r#"__attribute__((noinline)) static int helper(int x) { return x * 5 + 2; }
__attribute__((noinline)) int other(int x) { return helper(x) + helper(x + 1); }
"#;

/// Base names (every clone and LTO suffix stripped) of the symbols of `exe` that carry such a
/// suffix and whose base is not itself a symbol: the names an order of `bases` finds only by
/// rename.
fn renamed_in(dir: &Path, exe: &str, bases: &[&str]) -> usize {
    let syms = text_symbols(dir, exe);
    bases
        .iter()
        .filter(|b| {
            !syms.iter().any(|s| s == *b)
                && syms.iter().any(|s| {
                    s.starts_with(&format!("{b}."))
                        && [
                            ".constprop.",
                            ".isra.",
                            ".part.",
                            ".cold",
                            ".lto_priv.",
                            ".llvm.",
                        ]
                        .iter()
                        .any(|suf| s.contains(suf))
                })
        })
        .count()
}

// gcc -O3 clones `scale` and `sum`, and gcc -flto renames the two statics `helper`: an order
// naming the plain names finds them, and counts as many renames as the ELF shows.
#[test]
fn gcc_clones_and_lto_renames_recognised() {
    require!("gcc", "nm");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("a.c"), CLONES_A).unwrap();
    std::fs::write(dir.join("b.c"), CLONES_B).unwrap();
    let bases = ["scale", "sum", "helper", "other", "main"];
    let names: Vec<String> = bases.iter().map(|s| s.to_string()).collect();
    write_order(dir, "order.txt", &names);
    for (exe, flags) in [
        ("o3", &["-O3"][..]),
        ("lto", &["-O2", "-flto", "-ffunction-sections"][..]),
    ] {
        let mut cc = flags.to_vec();
        cc.extend(["a.c", "b.c", "-o", exe]);
        sh(dir, "gcc", &cc);
        let want = renamed_in(dir, exe, &bases);
        assert!(
            want > 0,
            "{exe}: gcc made no clone or rename: {:?}",
            text_symbols(dir, exe)
        );
        let (_, json, _) = verify_json(dir, &[exe, "--order", "order.txt"]);
        let b = &json["binaries"][0];
        assert_eq!(b["renamed"]["count"], want, "{exe}: {json}");
        assert_eq!(b["found"], bases.len(), "{exe}: {json}");
    }
}

// clang's ThinLTO promotes a static another module imports to `NAME.llvm.HASH`: found under
// that name, counted as renamed (as many as the ELF shows).
#[test]
fn thinlto_promotion_recognised() {
    require!("clang", "ld.lld", "nm");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("c1.c"),
        "__attribute__((noinline)) static int hidden(int x) { return x * 11 + 3; }\nint entry(int x) { return hidden(x) + 1; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("c2.c"),
        "#include <stdio.h>\nint entry(int);\nint main(int argc, char **argv) { (void)argv; printf(\"%d\\n\", entry(argc)); return 0; }\n",
    )
    .unwrap();
    sh(
        dir,
        "clang",
        &[
            "-O2",
            "-flto=thin",
            "-fuse-ld=lld",
            "c1.c",
            "c2.c",
            "-o",
            "thin",
        ],
    );
    let bases = ["hidden", "entry", "main"];
    let names: Vec<String> = bases.iter().map(|s| s.to_string()).collect();
    write_order(dir, "order.txt", &names);
    let want = renamed_in(dir, "thin", &bases);
    assert!(want > 0, "no promotion: {:?}", text_symbols(dir, "thin"));
    let (_, json, _) = verify_json(dir, &["thin", "--order", "order.txt"]);
    let b = &json["binaries"][0];
    assert_eq!(b["renamed"]["count"], want, "{json}");
    assert_eq!(b["renamed"]["by_suffix"]["llvm"], want, "{json}");
    assert_eq!(b["found"], bases.len(), "{json}");
}

// A stripped binary: one line saying it has no symbol table, exit 1, nothing on stdout.
#[test]
fn stripped_binary_is_one_line() {
    require!("gcc", "strip");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sources(dir);
    let mut cc = vec!["-O2", "main.c", "-o", "prog"];
    let srcs: Vec<String> = (0..FILES).map(|n| format!("u{n}.c")).collect();
    cc.extend(srcs.iter().map(String::as_str));
    sh(dir, "gcc", &cc);
    sh(dir, "strip", &["prog"]);
    write_order(dir, "order.txt", &against_default());
    let out = fails_one_line(
        dir,
        &["verify", "prog", "--order", "order.txt"],
        &["prog", "no symbol table"],
    );
    assert!(out.stdout.is_empty());
}

// The pre-build check: a profile applying to an output of the tree (found in a subdirectory,
// beside a script of the same name that is not ELF) with its matched share, a profile for
// something the build does not make, listed as matching nothing, and the output no profile
// applies to; exit 0. `--min-found` above
// an output's share fails.
#[test]
fn prebuild_check_lists_profiles_that_match_nothing() {
    require!("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tree = dir.join("build");
    std::fs::create_dir_all(tree.join("src/.libs")).unwrap();
    write_sources(&tree);
    let mut cc = vec!["-O2", "main.c", "-o", "src/.libs/prog"];
    let srcs: Vec<String> = (0..FILES).map(|n| format!("u{n}.c")).collect();
    cc.extend(srcs.iter().map(String::as_str));
    sh(&tree, "gcc", &cc);
    std::fs::write(tree.join("src/prog"), "#!/bin/sh\nexec .libs/prog \"$@\"\n").unwrap();
    // Another program the build makes, with no profile; an object beside it is no output.
    std::fs::create_dir(tree.join("tools")).unwrap();
    sh(&tree, "gcc", &["-O2", "-c", "main.c", "-o", "tools/main.o"]);
    let mut cc = vec!["-O2", "main.c", "-o", "tools/helper"];
    cc.extend(srcs.iter().map(String::as_str));
    sh(&tree, "gcc", &cc);
    let profs = dir.join("profiles");
    std::fs::create_dir(&profs).unwrap();
    // prog: 3 of 4 functions' weight present.
    std::fs::write(
        profs.join("prog.sprof"),
        "sediment-profile 1\nmeta binary prog\nfn 0 60 - f0_1 -\nfn 1 20 - f2_2 -\nfn 2 20 - gone -\nfn 3 0 - main -\n",
    )
    .unwrap();
    std::fs::write(
        profs.join("other-tool.sprof"),
        "sediment-profile 1\nmeta binary other-tool\nfn 0 10 - x -\n",
    )
    .unwrap();
    let out = sediment_ok(dir, &["verify", "--prof-dir", "profiles", "build"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |p: &str| {
        text.lines()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no row for {p}: {text}"))
            .to_string()
    };
    assert!(
        row("other-tool.sprof").contains("no output of this name"),
        "{text}"
    );
    let prog = row("prog.sprof");
    assert!(
        prog.contains("build/src/.libs/prog") && prog.contains("80.0%"),
        "{text}"
    );
    assert!(text.contains("1 match nothing the build makes"), "{text}");
    assert!(
        text.contains("1 linked outputs without a profile: build/tools/helper\n"),
        "{text}"
    );
    let (ok, json, _) = verify_json(dir, &["--prof-dir", "profiles", "build"]);
    assert!(ok);
    let profiles = json["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    assert_eq!(
        profiles[0]["outputs"].as_array().unwrap().len(),
        0,
        "{json}"
    );
    assert_eq!(
        profiles[1]["outputs"].as_array().unwrap().len(),
        1,
        "{json}"
    );
    fails_one_line(
        dir,
        &[
            "verify",
            "--prof-dir",
            "profiles",
            "build",
            "--min-found",
            "0.9",
        ],
        &["prog.sprof", "--min-found"],
    );
}

// The packager's route: a profile recorded with `record --prof-dir`, the program relinked
// through the linker shims with each linker, then checked against that profile: every entry
// found and in order (the C runtime's start-up code counted apart), exit 0; the recorded
// default build fails the same check.
#[test]
fn shim_links_hold_their_profile() {
    require!("gcc", "valgrind", "ld.lld", "ld.gold", "ld.bfd");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_sources(dir);
    let srcs: Vec<String> = (0..FILES).map(|n| format!("u{n}.c")).collect();
    let build = |extra: &[&str]| {
        let mut cc = vec!["-O2", "-ffunction-sections"];
        cc.extend_from_slice(extra);
        cc.push("main.c");
        cc.extend(srcs.iter().map(String::as_str));
        cc.extend(["-o", "prog"]);
        sh(dir, "gcc", &cc);
    };
    build(&[]);
    sediment_ok(
        dir,
        &[
            "record",
            "--via",
            "callgrind",
            "--prof-dir",
            "profs",
            "--",
            "./prog",
        ],
    );
    // The recorded build itself does not hold the profile's order (its sources define each
    // chain callee first, C3 places callers first).
    let (ok, json, _) = verify_json(dir, &["prog", "-p", "profs/prog.sprof"]);
    assert!(!ok, "the default link passed: {json}");
    let shims = sediment_ok(dir, &["wrappers", "--prof-dir", "profs", "shims"]);
    let b = String::from_utf8(shims.stdout).unwrap();
    for linker in ["lld", "gold", "bfd"] {
        build(&[b.trim(), &format!("-fuse-ld={linker}")]);
        let (ok, json, err) = verify_json(dir, &["prog", "-p", "profs/prog.sprof"]);
        let r = &json["binaries"][0];
        assert!(ok, "{linker}: {err}\n{json}");
        assert!(r["entries"].as_u64().unwrap() > 0, "{json}");
        assert_eq!(r["found"], r["entries"], "{linker}: {json}");
        assert_eq!(r["in_order"], r["found"], "{linker}: {json}");
    }
}

// Bad input, no tool needed: a binary that is not ELF, a corrupt order file, a corrupt profile
// of the profile directory, a profile directory that is not there: one line naming the file,
// exit 1, nothing on standard output.
#[test]
fn bad_input_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("notelf"), "just text\n").unwrap();
    write_order(dir, "order.txt", &against_default());
    std::fs::write(dir.join("bad.order"), "sediment-order 1\nf x y z\n").unwrap();
    for (args, needles) in [
        (
            &["verify", "notelf", "--order", "order.txt"][..],
            &["notelf"][..],
        ),
        (
            &["verify", "notelf", "--order", "bad.order"][..],
            &["bad.order"][..],
        ),
        (
            &["verify", "missing", "--order", "order.txt"][..],
            &["missing"][..],
        ),
        (&["verify", "--prof-dir", "nodir", "."][..], &["nodir"][..]),
    ] {
        let out = fails_one_line(dir, args, needles);
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    std::fs::create_dir(dir.join("profs")).unwrap();
    std::fs::write(dir.join("profs/notelf.sprof"), "sediment-profile 1\nfn 0\n").unwrap();
    let out = fails_one_line(
        dir,
        &["verify", "--prof-dir", "profs", "."],
        &["notelf.sprof"],
    );
    assert!(out.stdout.is_empty());
}

// Same-named statics of two files, ordered apart: GNU ld's script names each file, so the link
// holds the order whole, and verify finds each static at its own address (by its file).
#[test]
fn same_named_statics_are_found_by_file() {
    require!("gcc", "ld.bfd");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (f, k) in [("s1", 3), ("s2", 5)] {
        std::fs::write(
            dir.join(format!("{f}.c")),
            format!("__attribute__((noinline)) static int mix(int x) {{ return x * {k} + 1; }}\nint {f}(int x) {{ return mix(x) + 2; }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("m.c"),
        "#include <stdio.h>\nint s1(int); int s2(int);\nint main(int c, char **v) { (void)v; printf(\"%d\\n\", s1(c) + s2(c)); return 0; }\n",
    )
    .unwrap();
    sh(
        dir,
        "gcc",
        &["-O2", "-ffunction-sections", "-c", "s1.c", "s2.c", "m.c"],
    );
    // Each static just before the other file's function: apart, and against the default.
    let order = FunctionOrder {
        functions: vec![
            FuncKey::global("s2"),
            FuncKey::local("mix", "s1.c"),
            FuncKey::global("s1"),
            FuncKey::local("mix", "s2.c"),
        ],
        ..Default::default()
    };
    std::fs::write(dir.join("order.txt"), order.to_text()).unwrap();
    sediment_ok(
        dir,
        &[
            "link",
            "--linker",
            "bfd",
            "--order",
            "order.txt",
            "-o",
            "bfd.input",
            "s1.o",
            "s2.o",
            "m.o",
        ],
    );
    let flags = sediment(dir, &["link-flags", "--linker", "bfd", "bfd.input"]);
    let flags = String::from_utf8(flags.stdout).unwrap();
    let mut cc: Vec<&str> = flags.split_whitespace().collect();
    cc.extend(["s1.o", "s2.o", "m.o", "-o", "prog"]);
    sh(dir, "gcc", &cc);
    let (ok, json, err) = verify_json(dir, &["prog", "--order", "order.txt"]);
    let b = &json["binaries"][0];
    assert!(ok, "{err}\n{json}");
    assert_eq!(b["found"], 4, "{json}");
    assert_eq!(b["in_order"], 4, "{json}");
}
