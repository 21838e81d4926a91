//! `sediment match` end to end: a real callgrind profile of one build of a C program, matched to
//! a second build whose symbols differ the way new versions do (a renamed static, a clone that
//! disappeared, a new clone with a `.cold` part, a static that became global). Every expected
//! number is derived from the recorded profile and the second build's symbol table, with the
//! fate of each function known from how the program was written.

use crate::common::{fails_one_line, have_tool, record_callgrind, sediment};
use sediment_elf::Binary;
use sediment_profile::{normalize, FuncKey, Meta, Profile, ProfileBuilder};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The program; `-DV2` makes the "next version". gcc 12 at -O2 names the functions of v1
/// `scaled_sum.constprop.0`, `fold` + `fold.cold`, `mix.isra.0`, `tally` (static), and those
/// of v2 `scaled_sum`, `fold.constprop.0` + `fold.constprop.0.cold`, `blend.isra.0`, `tally`
/// (global); [`builds`] checks this premise before the test relies on it.
const SOURCE: &str = r#"/* Two builds of one program; -DV2 is the "next version". */
#include <stdio.h>
#include <stdlib.h>

#ifdef V2
#define MIX blend                              /* renamed static */
#define SCALED_ATTR __attribute__((noipa))      /* no more .constprop clone */
#define FOLD_ATTR __attribute__((noinline))     /* now cloned: fold.constprop.0 */
#define TALLY_LINKAGE                          /* static became global */
#else
#define MIX mix
#define SCALED_ATTR __attribute__((noinline))
#define FOLD_ATTR __attribute__((noipa))
#define TALLY_LINKAGE static
#endif

__attribute__((cold)) void report(const char *what, unsigned x)
{
    fprintf(stderr, "unexpected %s: %u\n", what, x);
}

/* Always called with scale 3: IPA-CP makes scaled_sum.constprop.0 unless noipa. */
static SCALED_ATTR unsigned long scaled_sum(const unsigned *v, int n, int scale)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s += (unsigned long)v[i] * scale;
    return s;
}

/* Always called with mod 7. */
static FOLD_ATTR unsigned long fold(const unsigned *v, int n, unsigned mod)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++) {
        if (v[i] == 0xdeadbeef) {
            report("value", v[i]);
            report("index", (unsigned)i);
        }
        s += v[i] % mod;
    }
    return s;
}

struct pair { unsigned a, b, c, d[8]; };

/* Reads two fields of a struct passed by value: IPA-SRA makes MIX.isra.0. */
static __attribute__((noinline)) unsigned MIX(struct pair p, unsigned x)
{
    unsigned h = p.a * 2654435761u;
    for (unsigned k = 0; k < 200; k++)
        h = h * 31 + (p.b ^ (x + k));
    return h;
}

TALLY_LINKAGE __attribute__((noinline)) unsigned long tally(const unsigned *v, int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i += 3)
        s ^= v[i] << (i & 7);
    return s;
}

unsigned long work(unsigned *v, int n, int rounds)
{
    unsigned long t = 0;
    struct pair p = {1, 2, 3, {0}};
    for (int r = 0; r < rounds; r++) {
        t += scaled_sum(v, n, 3);
        t += fold(v, n, 7);
        t += tally(v, n);
        p.a = (unsigned)t;
        p.b = (unsigned)r;
        v[r % n] = MIX(p, (unsigned)r);
    }
    return t;
}

int main(int argc, char **argv)
{
    int n = 500, rounds = argc > 1 ? atoi(argv[1]) : 200;
    unsigned *v = malloc(n * sizeof *v);
    if (!v)
        return 1;
    for (int i = 0; i < n; i++)
        v[i] = i * 7u;
    printf("%lu\n", work(v, n, rounds));
    free(v);
    return 0;
}
"#;

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn symbols(path: &Path) -> Binary {
    let data = std::fs::read(path).unwrap();
    Binary::parse(&path.display().to_string(), &data).unwrap()
}

fn g(n: &str) -> FuncKey {
    FuncKey::global(n)
}

fn l(n: &str) -> FuncKey {
    FuncKey::local(n, "b.c")
}

/// Compiles v1 and v2 in `dir` and checks the symbol names the tests rely on.
fn builds(dir: &Path) -> (Binary, Binary) {
    std::fs::write(dir.join("b.c"), SOURCE).unwrap();
    run_ok(
        Command::new("gcc")
            .current_dir(dir)
            .args(["-O2", "-o", "v1", "b.c"]),
    );
    run_ok(
        Command::new("gcc")
            .current_dir(dir)
            .args(["-O2", "-DV2", "-o", "v2", "b.c"]),
    );
    let (v1, v2) = (symbols(&dir.join("v1")), symbols(&dir.join("v2")));
    let has = |b: &Binary, k: &FuncKey| b.functions.iter().any(|s| &s.key == k);
    for k in [
        l("scaled_sum.constprop.0"),
        l("fold"),
        l("fold.cold"),
        l("mix.isra.0"),
        l("tally"),
    ] {
        assert!(has(&v1, &k), "v1 lacks {k}: {:?}", v1.functions);
    }
    for k in [
        l("scaled_sum"),
        l("fold.constprop.0"),
        l("fold.constprop.0.cold"),
        l("blend.isra.0"),
        g("tally"),
    ] {
        assert!(has(&v2, &k), "v2 lacks {k}: {:?}", v2.functions);
    }
    (v1, v2)
}

fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

// A profile of v1 carried over to v2: each function lands where the source changes say, the
// report's numbers follow from the profile, and the output is byte-identical on a rerun.
#[test]
fn matches_a_callgrind_profile_to_the_next_build() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, v2) = builds(dir);
    let v1p = record_callgrind(dir, "v1.sprof", "./v1");

    // The fate of each profile function, from the -DV2 changes in SOURCE.
    let v2_keys: Vec<FuncKey> = v2.functions.iter().map(|s| s.key.clone()).collect();
    let weight = |k: &FuncKey| {
        let id = v1p
            .find(k)
            .unwrap_or_else(|| panic!("{k} not in the v1 profile"));
        v1p.functions[id as usize].self_weight
    };
    let special = [
        (l("scaled_sum.constprop.0"), Some(l("scaled_sum"))), // normalized
        (l("fold"), Some(l("fold.constprop.0"))),             // normalized
        (l("tally"), Some(g("tally"))),                       // other file
        (l("mix.isra.0"), None),                              // renamed: missing
    ];
    let mut targets_used = BTreeSet::new();
    let mut exact = 0;
    for f in &v1p.functions {
        match special.iter().find(|(k, _)| *k == f.key) {
            Some((_, Some(t))) => {
                targets_used.insert(t.clone());
            }
            Some((_, None)) => {}
            None => {
                assert!(v2_keys.contains(&f.key), "{} should be in v2", f.key);
                targets_used.insert(f.key.clone());
                exact += 1;
            }
        }
    }
    let total = v1p.self_total();
    let missing = weight(&l("mix.isra.0"));
    let unused: BTreeSet<&FuncKey> = v2_keys
        .iter()
        .filter(|k| !targets_used.contains(*k))
        .collect();
    let mut expected = format!(
        "profile: v1.sprof (binary {}, arch x86_64, {} functions)\n\
         target:  v2 (arch x86_64, {} functions)\n\
         matched {:.1}% of the profile weight ({} of {total})\n\
         functions matched: {exact} exact, 1 by name with another file, 2 by normalized name\n\
         profile functions not in the target: 1\n  mix.isra.0 (b.c) ({missing})\n\
         target functions not in the profile: {}",
        v1p.meta.binary,
        v1p.functions.len(),
        v2.functions.len(),
        (total - missing) as f64 * 100.0 / total as f64,
        total - missing,
        unused.len()
    );
    for k in unused.iter().take(5) {
        expected.push_str(&format!("\n  {k}"));
    }
    expected.push('\n');
    // The renamed static and the new cold part are on the target's side of the ledger.
    assert!(unused.contains(&l("blend.isra.0")) && unused.contains(&l("fold.constprop.0.cold")));

    let args = [
        "match", "-p", "v1.sprof", "--binary", "v2", "-o", "v2.sprof",
    ];
    let report = stdout_of(&sediment(dir, &args));
    assert_eq!(report, expected);

    // The written profile: v2's identity and sizes, only v2's keys, clone weights carried over.
    let bytes = std::fs::read(dir.join("v2.sprof")).unwrap();
    let v2p = Profile::from_text(std::str::from_utf8(&bytes).unwrap()).unwrap();
    assert_eq!(v2p.meta.binary, "v2");
    assert_eq!(v2p.meta.build_id, v2.build_id);
    assert_eq!(v2p.meta.extra.get("matched-from"), Some(&v1p.meta.binary));
    assert_eq!(v2p.functions.len(), v1p.functions.len() - 1);
    for f in &v2p.functions {
        let sym = v2.functions.iter().find(|s| s.key == f.key);
        let sym = sym.unwrap_or_else(|| panic!("{} is not a v2 function", f.key));
        assert_eq!(f.size, (sym.size > 0).then_some(sym.size), "{}", f.key);
    }
    let w2 = |k: &FuncKey| v2p.functions[v2p.find(k).unwrap() as usize].self_weight;
    assert_eq!(w2(&l("scaled_sum")), weight(&l("scaled_sum.constprop.0")));
    assert_eq!(w2(&l("fold.constprop.0")), weight(&l("fold")));
    assert_eq!(w2(&g("tally")), weight(&l("tally")));
    assert_eq!(v2p.self_total(), total - missing);
    // The calls from work: to scaled_sum, fold, tally; the one to mix is gone.
    let work = v2p.find(&g("work")).unwrap();
    assert_eq!(v2p.edges.iter().filter(|e| e.caller == work).count(), 3);

    // Same inputs, same bytes.
    let again = [
        "match",
        "-p",
        "v1.sprof",
        "--binary",
        "v2",
        "-o",
        "again.sprof",
    ];
    assert_eq!(stdout_of(&sediment(dir, &again)), expected);
    assert_eq!(std::fs::read(dir.join("again.sprof")).unwrap(), bytes);

    // The JSON report carries the same numbers.
    let json = stdout_of(&sediment(
        dir,
        &["match", "-p", "v1.sprof", "--binary", "v2", "--json"],
    ));
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(j["profile_weight"], total);
    assert_eq!(j["matched_weight"], total - missing);
    assert_eq!(j["matched"]["exact"], exact);
    assert_eq!(j["matched"]["other_file"], 1);
    assert_eq!(j["matched"]["normalized"], 2);
    assert_eq!(j["missing_in_target"]["heaviest"][0]["name"], "mix.isra.0");
    assert_eq!(j["missing_in_target"]["heaviest"][0]["file"], "b.c");
    assert_eq!(j["missing_in_profile"]["count"], unused.len());
}

/// Runs `sediment match` expecting failure; returns stderr after checking it is one line and
/// that `out` was not written.
fn fails(dir: &Path, profile: &str, binary: &str) -> String {
    let out = sediment(
        dir,
        &[
            "match",
            "-p",
            profile,
            "--binary",
            binary,
            "-o",
            "out.sprof",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!dir.join("out.sprof").exists());
    err
}

// A missing binary, a stripped binary and a truncated profile are one-line errors naming the
// file, and leave no output behind.
#[test]
fn bad_inputs_are_one_line_errors() {
    if !have_tool("gcc") || !have_tool("strip") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    builds(dir);
    run_ok(
        Command::new("strip")
            .current_dir(dir)
            .args(["-o", "v2.stripped", "v2"]),
    );
    let mut b = ProfileBuilder::new(Meta {
        binary: "v1".into(),
        source: "test".into(),
        ..Meta::default()
    });
    b.add_self(&g("main"), 5);
    let text = b.build().to_text();
    std::fs::write(dir.join("ok.sprof"), &text).unwrap();
    std::fs::write(dir.join("cut.sprof"), &text[..text.len() - 3]).unwrap();

    let e = fails(dir, "ok.sprof", "absent");
    assert!(e.starts_with("sediment: absent: cannot open"), "{e}");
    let e = fails(dir, "ok.sprof", "v2.stripped");
    assert_eq!(e, "sediment: v2.stripped: no symbol table (stripped?)\n");
    let e = fails(dir, "cut.sprof", "v2");
    assert!(e.starts_with("sediment: cut.sprof: line "), "{e}");
    // The good pair works, so the failures above were about the bad file.
    let ok = sediment(dir, &["match", "-p", "ok.sprof", "--binary", "v2"]);
    assert!(stdout_of(&ok).contains("functions matched: 1 exact, 0 by name with another file"));
}

/// Two translation units with a static `helper` each (the `STT_FILE` symbol is all that tells
/// them apart); `-DV2` adds a third in `c.c`.
const TWIN_A: &str = r#"
static __attribute__((noinline)) unsigned helper(unsigned x) { return x * 2654435761u; }
__attribute__((noinline)) unsigned run_a(unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++) s += helper(i);
    return s;
}
unsigned run_b(unsigned n);
unsigned run_c(unsigned n);
int main(void) {
    unsigned s = run_a(300) + run_b(700);
#ifdef V2
    s += run_c(50);
#endif
    return (int)(s & 1);
}
"#;
const TWIN_B: &str = r#"
static __attribute__((noinline)) unsigned helper(unsigned x) { return (x ^ 0x9e3779b9u) * 31u + 7u; }
__attribute__((noinline)) unsigned run_b(unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++) s ^= helper(i);
    return s;
}
"#;
const TWIN_C: &str = r#"
static __attribute__((noinline)) unsigned helper(unsigned x) { return x + 1u; }
__attribute__((noinline)) unsigned run_c(unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++) s += helper(i);
    return s;
}
"#;

// Same-named statics: the profile of v1 keeps `helper (a.c)` and `helper (b.c)` apart, and
// `match` carries each to the helper of the same source file in v2, although v2 links the files
// in the other order (other addresses) and has a third `helper` in `c.c`. The same for v3, v2
// built with LTO: GCC renames the three statics `helper.lto_priv.N` (numbered by partition)
// under an empty STT_FILE, and only their DWARF still says which file each came from.
#[test]
fn same_named_statics_match_by_source_file() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (name, text) in [("a.c", TWIN_A), ("b.c", TWIN_B), ("c.c", TWIN_C)] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let gcc = |args: &[&str]| run_ok(Command::new("gcc").current_dir(dir).args(args));
    gcc(&["-O2", "-o", "v1", "a.c", "b.c"]);
    gcc(&["-O2", "-DV2", "-o", "v2", "c.c", "b.c", "a.c"]);
    gcc(&[
        "-O2", "-g", "-flto", "-DV2", "-o", "v3", "c.c", "b.c", "a.c",
    ]);
    let helper = |f: &str| FuncKey::local("helper", f);
    let v1p = record_callgrind(dir, "v1.sprof", "./v1");
    let calls_to = |p: &Profile, caller: &FuncKey, callee: &FuncKey| {
        let (a, b) = (p.find(caller).unwrap(), p.find(callee).unwrap());
        p.edges
            .iter()
            .find(|e| e.caller == a && e.callee == b)
            .map_or(0, |e| e.weight)
    };
    let w = |p: &Profile, k: &FuncKey| p.functions[p.find(k).unwrap() as usize].self_weight;
    assert_eq!(calls_to(&v1p, &g("run_a"), &helper("a.c")), 300);
    assert_eq!(calls_to(&v1p, &g("run_b"), &helper("b.c")), 700);
    assert_ne!(w(&v1p, &helper("a.c")), w(&v1p, &helper("b.c")));

    for target in ["v2", "v3"] {
        // The target's function of that name before any clone or LTO suffix, and that file
        // (in v3 the helpers are `helper.lto_priv.N`, the callers `run_a.constprop.0`).
        let bin = symbols(&dir.join(target));
        let key = |name: &str, file: Option<&str>| -> FuncKey {
            let found: Vec<&FuncKey> = bin
                .functions
                .iter()
                .map(|s| &s.key)
                .filter(|k| k.file.as_deref() == file && normalize(&k.name).base == name)
                .collect();
            assert_eq!(found.len(), 1, "{target}: {name} ({file:?}): {found:?}");
            found[0].clone()
        };
        let in_target = |f: &str| key("helper", Some(f));
        let keys: BTreeSet<FuncKey> = ["a.c", "b.c", "c.c"].map(in_target).into();
        assert_eq!(keys.len(), 3, "{keys:?}");
        if target == "v3" {
            assert!(keys.iter().all(|k| k.name.starts_with("helper.lto_priv.")));
        }

        let out_name = format!("{target}.sprof");
        let out = sediment(
            dir,
            &[
                "match", "-p", "v1.sprof", "--binary", target, "-o", &out_name,
            ],
        );
        let report = stdout_of(&out);
        assert!(report.contains(" 0 by name with another file"), "{report}");
        let unmatched = format!("\n  {} (c.c)\n", in_target("c.c").name);
        assert!(report.contains(&unmatched), "{report}");
        let p = Profile::from_text(&std::fs::read_to_string(dir.join(&out_name)).unwrap()).unwrap();
        for (f, caller, calls) in [("a.c", "run_a", 300), ("b.c", "run_b", 700)] {
            let k = in_target(f);
            assert_eq!(w(&p, &k), w(&v1p, &helper(f)), "{target}: {k}");
            assert_eq!(calls_to(&p, &key(caller, None), &k), calls, "{target}: {k}");
        }
        assert!(p.find(&in_target("c.c")).is_none());
    }
}

// Regression: a profile of another program "matched 0.0%" (or only its `main`), exited 0 and
// overwrote the output with an empty profile; `order --refine` simulated it on the other
// program. Both now fail naming the files and the share found, and write nothing.
#[test]
fn regress_profile_of_another_program_is_refused() {
    if !have_tool("gcc") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    builds(dir);
    std::fs::write(dir.join("z.c"), "int main(void) { return 0; }\n").unwrap();
    run_ok(
        Command::new("gcc")
            .current_dir(dir)
            .args(["-O1", "-o", "z", "z.c"]),
    );
    // A profile of v1 whose heaviest function is `main` (as a small program's loop is).
    let mut b = ProfileBuilder::new(Meta {
        binary: "v1".into(),
        source: "test".into(),
        ..Meta::default()
    });
    b.add_self(&g("main"), 600);
    b.add_self(&g("work"), 100);
    b.add_self(&l("tally"), 300);
    b.add_self(&l("mix.isra.0"), 100);
    std::fs::write(dir.join("v1.sprof"), b.build().to_text()).unwrap();
    std::fs::write(dir.join("out.sprof"), "kept\n").unwrap();

    let refused = |args: &[&str], output: &str, needles: &[&str]| {
        let out = fails_one_line(dir, args, needles);
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
        let kept = std::fs::read_to_string(dir.join(output)).ok();
        assert!(
            kept.is_none() || kept.as_deref() == Some("kept\n"),
            "{args:?} wrote {output}"
        );
    };
    let share = "v1.sprof: only 0.0% of the profile's weight (not counting main";
    refused(
        &[
            "match",
            "-p",
            "v1.sprof",
            "--binary",
            "z",
            "-o",
            "out.sprof",
        ],
        "out.sprof",
        &[share, "functions z defines", "10% needed"],
    );
    // `--min-share` raises the bar for another build too: v2 defines `work` and `tally` but
    // renamed `mix`, so 80% of the weight outside `main` (400 of 500) lands on it.
    refused(
        &[
            "match",
            "-p",
            "v1.sprof",
            "--binary",
            "v2",
            "--min-share",
            "0.9",
            "-o",
            "out.sprof",
        ],
        "out.sprof",
        &[
            "v1.sprof: only 80.0% ",
            "functions v2 defines",
            "90% needed",
        ],
    );
    let refine = [
        "order",
        "-p",
        "v1.sprof",
        "--refine",
        "--simulate",
        "./z",
        "--refine-budget",
        "5",
        "-o",
        "r.order",
        "--",
    ];
    refused(&refine, "r.order", &[share, "functions ./z defines"]);
    // Another build of the program matches, and writes its profile.
    let ok = sediment(
        dir,
        &[
            "match",
            "-p",
            "v1.sprof",
            "--binary",
            "v2",
            "-o",
            "out.sprof",
        ],
    );
    assert!(stdout_of(&ok).contains("matched 90.9% of the profile weight (1000 of 1100)"));
    assert_ne!(
        std::fs::read_to_string(dir.join("out.sprof")).unwrap(),
        "kept\n"
    );
}
