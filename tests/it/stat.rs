//! `sediment stat`: two real shell loops, one four times longer, run interleaved.

use crate::common::{sediment, sediment_ok};

/// A shell loop of `n` iterations (about 1 µs each in dash), as a command line.
fn loop_cmd(n: u32) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"),
    ]
}

fn stat_args<'a>(extra: &[&'a str], a: &'a [String], b: &'a [String]) -> Vec<&'a str> {
    let mut args = vec!["stat"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend(a.iter().map(String::as_str));
    args.push(":::");
    args.extend(b.iter().map(String::as_str));
    args
}

// A 4x longer loop: the CPU-time ratio's 95% interval lies above 1, and the JSON has every field.
#[test]
fn stat_detects_fourfold_loop() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (loop_cmd(20_000), loop_cmd(80_000));
    let out = sediment_ok(
        dir.path(),
        &stat_args(&["-n", "5", "--json", "--seed", "7"], &a, &b),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stat --json is JSON");
    assert_eq!(v["runs"], 5);
    assert_eq!(v["order"], "abba");
    assert_eq!(v["seed"], 7);
    assert_eq!(
        v["command_b"],
        "sh -c 'i=0; while [ $i -lt 80000 ]; do i=$((i+1)); done'"
    );
    assert!(v["unavailable"].is_array() && v["perf_events"].is_array());
    let metrics = v["metrics"].as_array().expect("metrics array");
    let names: Vec<&str> = metrics
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    for want in [
        "wall_s",
        "cpu_s",
        "user_s",
        "sys_s",
        "max_rss_kib",
        "minor_faults",
        "major_faults",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for key in [
        "n_a",
        "n_b",
        "median_a",
        "median_b",
        "mean_a",
        "mean_b",
        "sd_a",
        "sd_b",
        "ratio",
        "ratio_ci_low",
        "ratio_ci_high",
        "median_ratio",
        "median_ratio_ci_low",
        "median_ratio_ci_high",
        "paired_ratio",
        "paired_ratio_ci_low",
        "paired_ratio_ci_high",
        "paired_p",
        "welch_t",
        "welch_df",
        "p_value",
        "sigmas",
    ] {
        assert!(metrics[0].get(key).is_some(), "field {key} missing");
    }
    // CPU time is the robust signal; wall time only has to point the same way (other jobs
    // on a loaded 2-core machine can widen its interval).
    let cpu = metrics.iter().find(|m| m["metric"] == "cpu_s").unwrap();
    assert_eq!(cpu["n_a"], 5);
    let (lo, hi) = (
        cpu["ratio_ci_low"].as_f64().unwrap(),
        cpu["ratio_ci_high"].as_f64().unwrap(),
    );
    let r = cpu["ratio"].as_f64().unwrap();
    assert!(
        1.0 < lo && lo <= r && r <= hi,
        "cpu_s: ratio {r} [{lo}, {hi}] not above 1"
    );
    assert!(cpu["sigmas"].as_f64().unwrap() > 0.0);
    let (plo, pr) = (
        cpu["paired_ratio_ci_low"].as_f64().unwrap(),
        cpu["paired_ratio"].as_f64().unwrap(),
    );
    assert!(
        1.0 < plo && plo <= pr && pr <= cpu["paired_ratio_ci_high"].as_f64().unwrap(),
        "cpu_s: paired {pr} [{plo}, ..] not above 1"
    );
    let wall = metrics.iter().find(|m| m["metric"] == "wall_s").unwrap();
    assert!(wall["median_ratio"].as_f64().unwrap() > 1.0, "{wall}");
}

// The text table names both commands and has a row per metric.
#[test]
fn stat_prints_table() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (vec!["true".to_string()], loop_cmd(1000));
    let out = sediment_ok(
        dir.path(),
        &stat_args(&["-n", "2", "--warmup", "0", "--no-alternate"], &a, &b),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("A: true\nB: sh -c "), "{text}");
    assert!(
        text.contains("2 runs each (AB order), 0 warm-up; bootstrap seed 1\n"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("cpu_s ")).collect();
    assert_eq!(rows.len(), 1, "{text}");
}

// A command exiting non-zero is a one-line error naming the command, the run and its stderr.
#[test]
fn stat_failing_command_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let a = vec!["true".to_string()];
    let b: Vec<String> = ["sh", "-c", "echo broken >&2; exit 3"]
        .map(String::from)
        .to_vec();
    let out = sediment(
        dir.path(),
        &stat_args(&["-n", "3", "--warmup", "0"], &a, &b),
    );
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "sediment: command B (`sh -c 'echo broken >&2; exit 3'`) failed on run 1: exit status 3: broken\n"
    );
}

// Missing separator and too few runs are refused before anything runs.
#[test]
fn stat_rejects_bad_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = sediment(dir.path(), &["stat", "--", "true", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("separated by `:::`"), "{err}");
    let out = sediment(
        dir.path(),
        &["stat", "-n", "1", "--", "true", ":::", "true"],
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "sediment: -n 1: at least 2 runs of each command are needed for a variance\n"
    );
}

/// Processes whose command line contains `needle` (via `pgrep -f`).
fn running(needle: &str) -> usize {
    let out = std::process::Command::new("pgrep")
        .args(["-f", needle])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

// A `sediment stat` or `sediment compare` stopped with SIGTERM takes its runs with it
// (PR_SET_PDEATHSIG): nothing keeps running behind a killed benchmark.
#[test]
fn killed_runners_leave_no_children_behind() {
    require!("valgrind");
    for (i, sub) in ["stat", "compare"].iter().enumerate() {
        let needle = format!("31.{}{}7", std::process::id() % 1000, i);
        let args: Vec<String> = match *sub {
            "stat" => [
                "stat", "-n", "3", "--", "sleep", &needle, ":::", "sleep", &needle,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            _ => ["compare", "/bin/sleep", "/bin/sleep", "--", &needle]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        let mut child = std::process::Command::new(crate::common::sediment_bin())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while running(&needle) < 2 && started.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(running(&needle) >= 2, "{sub}: its runs started");
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let _ = child.wait();
        let stopped = std::time::Instant::now();
        while running(&needle) > 0 && stopped.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(running(&needle), 0, "{sub}: children outlived the runner");
    }
}

/// Writes `NAME.c` from `source` into `dir` and compiles it to `NAME.o` (gcc -O2
/// -ffunction-sections).
fn compile(dir: &std::path::Path, name: &str, source: &str) {
    std::fs::write(dir.join(format!("{name}.c")), source).unwrap();
    crate::common::run(
        dir,
        "gcc",
        &[
            "-O2",
            "-ffunction-sections",
            "-c",
            &format!("{name}.c"),
            "-o",
            &format!("{name}.o"),
        ],
    );
}

/// A program of 24 small functions, the hot loop calling every other one `iters` times.
fn layout_program(iters: u32) -> String {
    use std::fmt::Write as _;
    let mut c = String::from("#include <stdio.h>\n");
    for k in 0..24 {
        writeln!(
            c,
            "__attribute__((noinline)) unsigned f{k}(unsigned x) {{ return x * {} + {k}; }}",
            2 * k + 3
        )
        .unwrap();
    }
    c.push_str("int main(void) {\n  unsigned acc = 1;\n");
    writeln!(c, "  for (int i = 0; i < {iters}; i++) {{").unwrap();
    for k in (0..24).step_by(2) {
        writeln!(c, "    acc = f{k}(acc);").unwrap();
    }
    c.push_str("  }\n  printf(\"%u\\n\", acc);\n  return 0;\n}\n");
    c
}

/// Runs `stat --layouts 4 --json -- A ::: B` in `dir`; returns the verdict per metric.
fn layout_verdicts(
    dir: &std::path::Path,
    a: &[&str],
    b: &[&str],
) -> std::collections::BTreeMap<String, String> {
    let mut args = vec!["stat", "--layouts", "4", "--json", "--"];
    args.extend_from_slice(a);
    args.push(":::");
    args.extend_from_slice(b);
    let out = sediment_ok(dir, &args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["labels"],
        serde_json::json!(["shift-0", "shift-80", "shift-160", "shift-240"])
    );
    v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["a"].as_array().unwrap().len(), 4);
            (
                m["metric"].as_str().unwrap().to_string(),
                m["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

// Two builds of one program, B shifted by an unused 48-byte function in an object linked
// first: over four shifted layouts each, no metric differs beyond the layouts' spread (the
// work is the same, and B's line offsets are A's shifted by one step). B with the hot loop
// run twice as often: instructions are a real difference. Deterministic (simulated counts).
#[test]
fn stat_layouts_tell_a_shift_from_a_real_difference() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    compile(d, "prog", &layout_program(20_000));
    compile(d, "twice", &layout_program(40_000));
    compile(
        d,
        "shim",
        "__attribute__((used, noinline)) int sediment_test_shim(int x) { \
         return x * 3 + 1 + (x > 5 ? x * 7 : x / 3) + (x < 0 ? -x : x) * 11; }\n",
    );
    let shifted = layout_verdicts(d, &["prog.o"], &["shim.o", "prog.o"]);
    assert_eq!(shifted["instructions"], "same", "{shifted:?}");
    assert!(
        shifted.values().all(|v| v != "real"),
        "a shifted build called different: {shifted:?}"
    );
    let real = layout_verdicts(d, &["prog.o"], &["twice.o"]);
    assert_eq!(real["instructions"], "real", "{real:?}");
}

// Bad layout requests fail with one line: too few layouts, an unknown --pad-after input, a
// B side without inputs, and --layouts with a flag of the interleaved runs.
#[test]
fn stat_layouts_bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    crate::common::fails_one_line(
        d,
        &["stat", "--layouts", "1", "--", "a.o", ":::", "b.o"],
        &["--layouts 1"],
    );
    crate::common::fails_one_line(
        d,
        &[
            "stat",
            "--layouts",
            "4",
            "--pad-after",
            "x.o",
            "--",
            "a.o",
            ":::",
            "b.o",
        ],
        &["--pad-after x.o"],
    );
    crate::common::fails_one_line(
        d,
        &["stat", "--layouts", "4", "--", "a.o", ":::", "--", "x"],
        &["build B"],
    );
    let out = sediment(
        d,
        &[
            "stat",
            "--layouts",
            "4",
            "-n",
            "3",
            "--",
            "a.o",
            ":::",
            "b.o",
        ],
    );
    assert!(!out.status.success());
}

// `--stdin FILE` reaches every run of both builds: a program that loops as many times as the
// number it reads runs 50000 iterations more (a few instructions each) with the file than with
// the default empty input, in every layout of A and of B.
#[test]
fn stat_layouts_stdin_feeds_every_run() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    compile(
        d,
        "reader",
        "#include <stdio.h>\n\
         __attribute__((noinline)) unsigned step(unsigned x) { return x * 5 + 3; }\n\
         int main(void) {\n  unsigned n = 0, acc = 1;\n  if (scanf(\"%u\", &n) != 1) n = 0;\n\
         \x20 for (unsigned i = 0; i < n; i++) acc = step(acc);\n  printf(\"%u\\n\", acc);\n  return 0;\n}\n",
    );
    std::fs::write(d.join("n.txt"), "50000\n").unwrap();
    let instructions = |stdin: Option<&str>| -> Vec<f64> {
        let mut args = vec!["stat", "--layouts", "4", "--json"];
        if let Some(f) = stdin {
            args.extend_from_slice(&["--stdin", f]);
        }
        args.extend_from_slice(&["--", "reader.o", ":::", "reader.o"]);
        let out = sediment(d, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let m = v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "instructions")
            .unwrap()
            .clone();
        ["a", "b"]
            .iter()
            .flat_map(|s| m[*s].as_array().unwrap().clone())
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let fed = instructions(Some("n.txt"));
    let empty = instructions(None);
    assert_eq!(fed.len(), 8);
    let most_empty = empty.iter().cloned().fold(0.0, f64::max);
    for x in &fed {
        assert!(
            *x > most_empty + 150_000.0,
            "a run did not read the file: {fed:?} against {empty:?}"
        );
    }
}

// `--stdin` naming a directory or nothing that exists is one line, before any link or run.
#[test]
fn stdin_bad_file_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    crate::common::fails_one_line(
        d,
        &[
            "stat",
            "--layouts",
            "4",
            "--stdin",
            "sub",
            "--",
            "a.o",
            ":::",
            "b.o",
        ],
        &["sub: a directory"],
    );
    crate::common::fails_one_line(
        d,
        &[
            "align",
            "--binary",
            "x",
            "--stdin",
            "missing.sql",
            "--",
            "y",
        ],
        &["missing.sql: cannot open"],
    );
}
