//! The callgrind importer on real captures (`tests/fixtures/callgrind`, see its README) and on
//! a fresh valgrind run: exact call counts known from the programs' source, golden profile
//! texts, and damaged files.

use crate::common::{fixture, have_tool, sediment, sediment_ok};
use sediment_import::callgrind::{self, Input};
use sediment_profile::Profile;
use std::process::Command;

/// Object path of the test program in the fixtures (where they were captured).
const CALLS_BIN: &str = "/tmp/sediment-fixture/calls";
const THREADS_BIN: &str = "/tmp/sediment-fixture/threads";

fn read_fixture(names: &[&str]) -> Vec<Profile> {
    let texts: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let path = fixture(&format!("callgrind/{n}"));
            (n.to_string(), std::fs::read_to_string(path).unwrap())
        })
        .collect();
    let inputs: Vec<Input<'_>> = texts
        .iter()
        .map(|(path, text)| Input { path, text })
        .collect();
    callgrind::read_all(&inputs).unwrap()
}

fn object<'p>(profiles: &'p [Profile], binary: &str) -> &'p Profile {
    profiles
        .iter()
        .find(|p| p.meta.binary == binary)
        .unwrap_or_else(|| panic!("no profile for {binary}"))
}

fn index(p: &Profile, name: &str) -> usize {
    p.functions
        .iter()
        .position(|f| f.key.name == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

fn calls(p: &Profile, caller: &str, callee: &str) -> u64 {
    let (a, c) = (index(p, caller) as u32, index(p, callee) as u32);
    p.edges
        .iter()
        .find(|e| e.caller == a && e.callee == c)
        .map_or(0, |e| e.weight)
}

/// Compares the concatenated profile texts with `tests/fixtures/callgrind/<name>`; rewrites
/// the file instead when `SEDIMENT_UPDATE_GOLDEN=1`.
fn golden(profiles: &[Profile], name: &str) {
    let text: String = profiles.iter().map(Profile::to_text).collect();
    let path = fixture(&format!("callgrind/{name}"));
    if std::env::var_os("SEDIMENT_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (SEDIMENT_UPDATE_GOLDEN=1 makes it)",
            path.display()
        )
    });
    assert!(
        want == text,
        "{} differs from the importer's output (regenerate with SEDIMENT_UPDATE_GOLDEN=1 and review the diff)",
        path.display()
    );
}

/// The known structure of `calls.c`: main -> a 1000 times, a -> b 2000 times, b is static.
fn check_calls_program(p: &Profile) {
    assert_eq!(calls(p, "main", "a"), 1000);
    assert_eq!(calls(p, "a", "b"), 2000);
    assert_eq!(calls(p, "b", "a"), 0);
    assert_eq!(p.meta.source, "callgrind");
    assert_eq!(p.meta.event.as_deref(), Some("Ir"));
    assert_eq!(
        p.functions[index(p, "b")].key.file.as_deref(),
        Some("calls.c")
    );
    assert!(p.is_canonical());
}

// Default options: exact call counts, and the whole output against the golden file.
#[test]
fn default_capture_counts_and_golden() {
    let ps = read_fixture(&["calls.default.out"]);
    check_calls_program(object(&ps, CALLS_BIN));
    golden(&ps, "calls.golden");
}

// `--dump-instr=yes --collect-jumps=yes` (two position columns, jumps) gives the same counts
// and the same self weights for the program's functions as the default capture.
#[test]
fn instr_capture_matches_default() {
    let ps = read_fixture(&["calls.instr.out"]);
    let p = object(&ps, CALLS_BIN);
    check_calls_program(p);
    let default = read_fixture(&["calls.default.out"]);
    let d = object(&default, CALLS_BIN);
    for name in ["main", "a", "b"] {
        assert_eq!(
            p.functions[index(p, name)].self_weight,
            d.functions[index(d, name)].self_weight,
            "{name}"
        );
    }
    // The same run recorded another way gives the very same profiles.
    golden(&ps, "calls.golden");
}

// Two parts in one file (`--dump-every-bb --combine-dumps=yes`) sum to the whole run.
#[test]
fn parts_capture_sums_parts() {
    let ps = read_fixture(&["calls.parts.out"]);
    check_calls_program(object(&ps, CALLS_BIN));
    golden(&ps, "calls.golden");
}

// `--separate-threads=yes`: the worker's calls are in the second file; reading both sums them.
#[test]
fn separate_thread_files_are_summed() {
    let both = read_fixture(&["threads.out-01", "threads.out-02"]);
    let p = object(&both, THREADS_BIN);
    assert_eq!(calls(p, "worker", "work"), 500);
    assert_eq!(calls(p, "work", "leaf"), 1500);
    assert_eq!(
        p.functions[index(p, "leaf")].key.file.as_deref(),
        Some("threads.c")
    );
    let main_only = read_fixture(&["threads.out-01"]);
    let m = object(&main_only, THREADS_BIN);
    assert!(m.functions.iter().all(|f| f.key.name != "leaf"));
    let worker_only = read_fixture(&["threads.out-02"]);
    let w = object(&worker_only, THREADS_BIN);
    assert_eq!(p.meta.total, m.meta.total + w.meta.total);
    golden(&both, "threads.golden");
}

/// Reads `text` as the fixture's damaged copy and returns the error message.
fn damaged(text: &str) -> String {
    callgrind::read(text, "damaged.out")
        .expect_err("damaged input must fail")
        .to_string()
}

// A capture cut in the middle of a line fails on the last line, naming file and line.
#[test]
fn truncated_mid_line_is_an_error() {
    let text = std::fs::read_to_string(fixture("callgrind/calls.default.out")).unwrap();
    let cut = &text[..text.len() / 2];
    let line = cut.matches('\n').count() + 1;
    let msg = damaged(cut);
    assert_eq!(
        msg,
        format!("damaged.out: line {line}: file ends in the middle of a line (truncated?)")
    );
}

// A capture cut at a line boundary misses its `totals:` line.
#[test]
fn truncated_at_line_end_is_an_error() {
    let text = std::fs::read_to_string(fixture("callgrind/calls.default.out")).unwrap();
    let half = text[..text.len() / 2].rfind('\n').unwrap() + 1;
    let msg = damaged(&text[..half]);
    assert!(msg.starts_with("damaged.out: line "), "{msg}");
    assert!(
        msg.contains("`totals:`") || msg.contains("`calls=`"),
        "{msg}"
    );
}

// Dropping the line that defines a compressed name makes its first use an unknown id.
#[test]
fn missing_name_definition_is_an_error() {
    let text = std::fs::read_to_string(fixture("callgrind/calls.default.out")).unwrap();
    let def = "cfn=(538) a\n";
    let at = text.find(def).unwrap();
    let line = text[..at].matches('\n').count() + 1;
    let damaged_text = text.replacen(def, "cfn=(538)\n", 1);
    assert_eq!(
        damaged(&damaged_text),
        format!("damaged.out: line {line}: unknown function id (538) (used before its definition)")
    );
}

// Garbage in the body is reported with its line.
#[test]
fn garbage_line_is_an_error() {
    let text = std::fs::read_to_string(fixture("callgrind/calls.default.out")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(30, "%%% not callgrind %%%");
    let text = lines.join("\n") + "\n";
    assert_eq!(
        damaged(&text),
        "damaged.out: line 31: not a callgrind line: `%%% not callgrind %%%`"
    );
}

// A fresh capture on this machine: compile calls.c, run it under callgrind, import.
#[test]
fn live_capture_has_exact_call_counts() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("calls");
    let out = dir.path().join("callgrind.out");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&bin)
        .arg(fixture("callgrind/calls.c")));
    run(Command::new("valgrind")
        .args(["--tool=callgrind", "--demangle=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&bin));
    let text = std::fs::read_to_string(&out).unwrap();
    let ps = callgrind::read(&text, &out.display().to_string()).unwrap();
    check_calls_program(object(&ps, bin.to_str().unwrap()));
    // The executable's profile is not the only one: ld.so and libc ran too.
    assert!(ps.len() >= 2, "{}", ps.len());
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// `sediment import` on a cut capture: a one-line error naming file and line, no output file.
#[test]
fn import_command_rejects_truncated_capture() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("callgrind/calls.default.out")).unwrap();
    let cut = &text[..text.len() / 3];
    let line = cut.matches('\n').count() + 1;
    std::fs::write(dir.path().join("cut.out"), cut).unwrap();
    let out = sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "callgrind",
            "cut.out",
            "-o",
            "p.sprof",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cut.out: line {line}: file ends in the middle of a line (truncated?)"
        )),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!dir.path().join("p.sprof").exists());
}

/// Object path of `twins` in its fixture capture.
const TWINS_BIN: &str = "/tmp/sediment-fixture/twins";

/// Calls `caller -> callee` by full key text (`twin (a.c)`), 0 when there is no such edge.
fn calls_by_key(p: &Profile, caller: &str, callee: &str) -> u64 {
    let index = |k: &str| {
        p.functions
            .iter()
            .position(|f| f.key.to_string() == k)
            .unwrap_or_else(|| panic!("no function `{k}` in {}", p.to_text()))
    };
    let (a, c) = (index(caller) as u32, index(callee) as u32);
    p.edges
        .iter()
        .find(|e| e.caller == a && e.callee == c)
        .map_or(0, |e| e.weight)
}

/// The known structure of `twins`: main -> run_a -> twin of a.c 300 times, main -> run_b ->
/// twin of b.c 700 times; the two `twin`s are separate keys with their symbol sizes.
fn check_twins(p: &Profile) {
    assert_eq!(calls_by_key(p, "main", "run_a"), 1);
    assert_eq!(calls_by_key(p, "main", "run_b"), 1);
    assert_eq!(calls_by_key(p, "run_a", "twin (a.c)"), 300);
    assert_eq!(calls_by_key(p, "run_b", "twin (b.c)"), 700);
    assert_eq!(calls_by_key(p, "run_a", "twin (b.c)"), 0);
    assert_eq!(calls_by_key(p, "run_b", "twin (a.c)"), 0);
    let twins: Vec<&sediment_profile::Function> = p
        .functions
        .iter()
        .filter(|f| f.key.name == "twin")
        .collect();
    assert_eq!(twins.len(), 2, "{}", p.to_text());
    for f in twins {
        assert!(f.size.is_some_and(|s| s > 0), "{}", p.to_text());
        assert!(f.self_weight > 0, "{}", p.to_text());
    }
    assert!(p.is_canonical());
}

/// Imports the `twins` fixture capture, giving the importer the fixture's copy of the binary.
fn import_twins() -> callgrind::CallgrindImport {
    let text = std::fs::read_to_string(fixture("callgrind/twins.out")).unwrap();
    let binary = std::fs::read(fixture("callgrind/twins/twins")).unwrap();
    let mut resolver = |path: &str, _: Option<&str>| -> Result<Option<Vec<u8>>, String> {
        Ok((path == TWINS_BIN).then(|| binary.clone()))
    };
    let input = Input {
        path: "twins.out",
        text: &text,
    };
    callgrind::import(&[input], &mut resolver).unwrap()
}

// Regression (demo's 40 static `mix` in unit.h): two statics named `twin` defined in one header
// share `fn=` and `fl=`, so callgrind merges them; with `--dump-instr=yes` and the binary they
// are attributed by address to `twin (a.c)` and `twin (b.c)` with exact counts; golden output.
#[test]
fn header_statics_are_split_by_address() {
    let result = import_twins();
    assert_eq!(result.stats.by_address, [TWINS_BIN]);
    assert!(result.stats.no_base.is_empty());
    assert_eq!(result.stats.unattributed_calls, 0);
    let p = object(&result.profiles, TWINS_BIN);
    check_twins(p);
    // Every Ir of the capture's only object with cost is attributed.
    assert_eq!(result.stats.unattributed_cost, 0);
    assert_eq!(p.self_total(), p.meta.total);
    golden(&result.profiles, "twins.golden");
}

// Without the binary (or read by name) the capture shows the bug being fixed: one `twin` with
// the file hint `twin.h`, called by both.
#[test]
fn header_statics_merge_by_name() {
    let text = std::fs::read_to_string(fixture("callgrind/twins.out")).unwrap();
    let ps = callgrind::read(&text, "twins.out").unwrap();
    let p = object(&ps, TWINS_BIN);
    // Unbound keys keep callgrind's `fl=` hint, for globals too.
    assert_eq!(calls_by_key(p, "run_a (a.c)", "twin (twin.h)"), 300);
    assert_eq!(calls_by_key(p, "run_b (b.c)", "twin (twin.h)"), 700);
    assert_eq!(
        p.functions.iter().filter(|f| f.key.name == "twin").count(),
        1
    );
}

// `sediment import --binary` on an instruction-position capture takes the address path and
// writes exactly the golden profile.
#[test]
fn import_command_uses_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture("callgrind/twins/twins");
    let input = fixture("callgrind/twins.out");
    sediment_ok(
        dir.path(),
        &[
            "import",
            "--format",
            "callgrind",
            "--binary",
            bin.to_str().unwrap(),
            input.to_str().unwrap(),
            "-o",
            "p.sprof",
        ],
    );
    let written = std::fs::read_to_string(dir.path().join("p.sprof")).unwrap();
    let want = std::fs::read_to_string(fixture("callgrind/twins.golden")).unwrap();
    assert_eq!(written, want);
}

// A fresh `sediment record --via callgrind` of twins built here: the two header statics come
// out as separate keys with their call counts and sizes.
#[test]
fn record_splits_header_statics() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("callgrind/twins");
    let bin = dir.path().join("twins");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&bin)
        .arg(src.join("a.c"))
        .arg(src.join("b.c")));
    sediment_ok(
        dir.path(),
        &[
            "record",
            "--via",
            "callgrind",
            "-o",
            "p.sprof",
            "--",
            bin.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(dir.path().join("p.sprof")).unwrap();
    let p = Profile::from_text(&text).unwrap();
    assert_eq!(p.meta.binary, bin.to_str().unwrap());
    check_twins(&p);
    assert!(p.meta.build_id.is_some());
}

/// Profiles in `dir/<out>` after `sediment import --format callgrind FILES -o <out>`.
fn import_files(dir: &std::path::Path, files: &[String], out: &str) -> Profile {
    let mut args = vec!["import", "--format", "callgrind"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["-o", out]);
    sediment_ok(dir, &args);
    Profile::from_text(&std::fs::read_to_string(dir.join(out)).unwrap()).unwrap()
}

/// Self weights by function, and call weights by edge, as key texts.
type Weights = (Vec<(String, u64)>, Vec<(String, String, u64)>);

/// Self weight per function and weight per edge, by key text, for comparing profiles.
fn weights(p: &Profile) -> Weights {
    let fns = p
        .functions
        .iter()
        .map(|f| (f.key.to_string(), f.self_weight))
        .collect();
    (fns, p.named_edges())
}

// A fresh pthread program under `--separate-threads=yes --dump-every-bb=N` (one file per thread
// and part): importing every file gives the sum of importing each alone, and the very profile
// of a run recorded in one piece.
#[test]
fn live_threads_and_parts_sum_to_one_run() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run(Command::new("gcc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(d.join("threads"))
        .arg(fixture("callgrind/threads.c")));
    let cg = |extra: &[&str], out: &str| {
        run(Command::new("valgrind")
            .current_dir(d)
            .args([
                "-q",
                "--tool=callgrind",
                "--demangle=no",
                "--dump-instr=yes",
            ])
            .args(extra)
            .arg(format!("--callgrind-out-file={out}"))
            .arg("./threads"));
    };
    cg(&[], "whole.out");
    std::fs::create_dir(d.join("split")).unwrap();
    cg(
        &["--separate-threads=yes", "--dump-every-bb=40000"],
        "split/cg.out",
    );
    // Non-empty files only: with separate threads, `cg.out` itself stays empty.
    let mut files: Vec<String> = std::fs::read_dir(d.join("split"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .map(|p| format!("split/{}", p.file_name().unwrap().to_str().unwrap()))
        .collect();
    files.sort();
    let thread_files = files.iter().filter(|f| f.ends_with("-02")).count();
    assert!(thread_files >= 1, "no worker-thread file: {files:?}");
    assert!(
        files.len() > 2 * thread_files.min(1) + 1,
        "not several parts: {files:?}"
    );

    // Every file at once, through the CLI (addresses against the binary).
    let whole = import_files(d, &["whole.out".to_string()], "whole.sprof");
    let split = import_files(d, &files, "split.sprof");
    assert_eq!(weights(&split), weights(&whole));
    assert_eq!(split.meta.total, whole.meta.total);
    assert_eq!(calls(&split, "worker", "work"), 500);
    assert_eq!(calls(&split, "work", "leaf"), 1500);

    // ... is the sum of the files imported one by one.
    let bin = d.join("threads").display().to_string();
    let mut self_sum = std::collections::BTreeMap::<String, u64>::new();
    let mut edge_sum = std::collections::BTreeMap::<(String, String), u64>::new();
    let mut total = 0;
    for f in &files {
        let text = std::fs::read_to_string(d.join(f)).unwrap();
        let ps = callgrind::read(&text, f).unwrap();
        let Some(p) = ps.iter().find(|p| p.meta.binary == bin) else {
            continue;
        };
        total += p.meta.total;
        for (k, w) in weights(p).0 {
            *self_sum.entry(k).or_default() += w;
        }
        for (a, b, w) in p.named_edges() {
            *edge_sum.entry((a, b)).or_default() += w;
        }
    }
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.clone(), std::fs::read_to_string(d.join(f)).unwrap()))
        .collect();
    let inputs: Vec<Input<'_>> = texts
        .iter()
        .map(|(path, text)| Input { path, text })
        .collect();
    let all = callgrind::read_all(&inputs).unwrap();
    let merged = object(&all, &bin);
    assert_eq!(merged.meta.total, total);
    let (fns, edges) = weights(merged);
    assert_eq!(fns, self_sum.into_iter().collect::<Vec<_>>());
    let edge_sum: Vec<(String, String, u64)> =
        edge_sum.into_iter().map(|((a, b), w)| (a, b, w)).collect();
    assert_eq!(edges, edge_sum);
}

// `record -o app.sprof` writes the main executable's profile only, and names the others in one
// line; `--keep-binaries` writes the named ones (or all) beside it as `app.<basename>.sprof`
// (regression: every library touched became `app.sprof.<lib>.sprof`, most with one sample).
#[test]
fn record_keeps_the_main_executable_unless_asked() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.c"),
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    )
    .unwrap();
    crate::common::run(d, "gcc", &["-O1", "p.c", "-o", "p"]);
    let files = |sub: &str| {
        let mut v: Vec<String> = std::fs::read_dir(d.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let record = |sub: &str, extra: &[&str]| {
        std::fs::create_dir(d.join(sub)).unwrap();
        let out = format!("{sub}/app.sprof");
        let mut args = vec!["record", "--via", "callgrind", "-o", &out];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "./p"]);
        let o = sediment_ok(d, &args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        err
    };
    let err = record("main", &[]);
    assert_eq!(files("main"), ["app.sprof"]);
    let note: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("were not written"))
        .collect();
    assert_eq!(note.len(), 1, "{err}");
    assert!(note[0].contains("libc.so.6"), "{err}");
    record("libc", &["--keep-binaries", "libc.so.6"]);
    assert_eq!(files("libc"), ["app.libc.so.6.sprof", "app.sprof"]);
    record("all", &["--keep-binaries", "all"]);
    let all = files("all");
    assert!(all.len() >= 3, "{all:?}");
    assert!(all.iter().all(|f| !f.contains(".sprof.")), "{all:?}");
}
