//! `sediment tune`: every algorithm's order replayed on one recorded lackey run, the best
//! refined by the simulator; and `order --refine`, its hidden former spelling, giving the same
//! bytes.

use std::path::Path;
use std::process::Output;

use crate::common::sediment;

use crate::common::run;

/// Panics with the command's stderr unless it succeeded; returns the stderr.
fn ok(out: &Output) -> String {
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{log}");
    log
}

/// A program whose hot functions are defined between large cold ones, so the linked layout
/// spreads them over pages, built with `-ffunction-sections` in `d` as `r` (and `r.o`), with
/// its callgrind profile `r.sprof`.
fn hot_between_cold(d: &Path) {
    let mut src = String::from("#include <stdio.h>\n");
    for i in 0..6 {
        src.push_str(&format!(
            "__attribute__((noinline)) int cold{i}(int x) {{ if (x > 1000000) {{ __asm__ volatile(\".skip 3000, 0x90\"); }} return x ^ {i}; }}\n\
             __attribute__((noinline)) int hot{i}(int x) {{ return (x * {m}) ^ (x >> 3); }}\n",
            m = 2 * i + 3
        ));
    }
    src.push_str(
        "int main(void) {\n    int s = 0;\n    for (int i = 0; i < 6; i++) s += cold0(i) + cold1(i) + cold2(i) + cold3(i) + cold4(i) + cold5(i);\n    for (int i = 0; i < 20000; i++) s = hot0(s) + hot1(i) + hot2(s) + hot3(i) + hot4(s) + hot5(i);\n    printf(\"%d\\n\", s);\n    return 0;\n}\n",
    );
    std::fs::write(d.join("r.c"), src).unwrap();
    run(d, "gcc", &["-O1", "-ffunction-sections", "-o", "r", "r.c"]);
    crate::common::record_callgrind(d, "r.sprof", "./r");
}

/// A program of forty functions of assorted sizes, called in four phases of twelve with
/// assorted frequencies: the search keeps moves on it. Built in `d` as `q` (and `q.o`), with
/// its callgrind profile `q.sprof`.
fn phases(d: &Path) {
    let mut src = String::from("#include <stdio.h>\n");
    for i in 0..40 {
        let pad = 600 + (i * 137) % 2400;
        src.push_str(&format!(
            "__attribute__((noinline)) int f{i}(int x) {{ if (x == -{k}) {{ __asm__ volatile(\".skip {pad}, 0x90\"); }} return (x * {m}) ^ (x >> {s}); }}\n",
            k = i + 7,
            m = 2 * i + 3,
            s = i % 5 + 1
        ));
    }
    src.push_str("int main(int argc, char **argv) {\n    int s = argc;\n");
    for ph in 0..4usize {
        let mut body = String::new();
        for k in 0..12usize {
            let f = (ph * 13 + k * 7) % 40;
            if k % 3 == 0 {
                body.push_str(&format!("if (i % {} == 0) s = f{f}(s); ", k + 2));
            } else {
                body.push_str(&format!("s = f{f}(s + i); "));
            }
        }
        src.push_str(&format!(
            "    for (int i = 0; i < {}; i++) {{ {body}}}\n",
            300 * (ph + 1)
        ));
    }
    src.push_str("    printf(\"%d\\n\", s);\n    return 0;\n}\n");
    std::fs::write(d.join("q.c"), src).unwrap();
    run(d, "gcc", &["-O1", "-ffunction-sections", "-o", "q", "q.c"]);
    run(d, "gcc", &["-O1", "-ffunction-sections", "-c", "q.c"]);
    crate::common::record_callgrind(d, "q.sprof", "./q");
}

// The verb and its hidden former spelling are one stage: `tune` and `order --refine` write
// the same bytes, recorded afresh or read back from a kept run, with the default start, the
// cheapest start and the static graph's fill; and the search kept moves (so the identity is
// of a search that did something).
#[test]
fn tune_and_order_refine_write_the_same_bytes() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    phases(d);
    let bin = crate::common::sediment_bin();
    let import = [
        "import",
        "--format",
        "objects",
        "--program",
        "./q",
        "q.o",
        "-o",
        "s.sprof",
    ];
    run(d, bin.to_str().unwrap(), &import);
    let tune = |out: &str, more: &[&str]| {
        let mut args = vec![
            "tune", "-p", "q.sprof", "--binary", "./q", "--budget", "30", "-o", out,
        ];
        args.extend(more);
        sediment(d, &args)
    };
    let refine = |out: &str, more: &[&str]| {
        let mut args = vec![
            "order",
            "-p",
            "q.sprof",
            "--refine",
            "--refine-budget",
            "30",
            "--simulate",
            "./q",
            "-o",
            out,
        ];
        args.extend(more);
        sediment(d, &args)
    };
    let read = |f: &str| std::fs::read(d.join(f)).unwrap();
    // Recorded afresh by each.
    let old_log = ok(&refine("old.order", &[]));
    let new_log = ok(&tune("new.order", &[]));
    assert_eq!(read("old.order"), read("new.order"));
    assert_eq!(old_log, new_log);
    let moves = new_log
        .lines()
        .find_map(|l| l.split("; ").nth(1)?.strip_suffix(" moves kept"))
        .unwrap_or_else(|| panic!("no moves line: {new_log}"));
    assert_ne!(moves, "0", "premise: the search kept moves: {new_log}");
    // The same run kept in a file, then read back by the other spelling.
    ok(&tune("kept.order", &["--recording", "run.srec"]));
    assert_eq!(read("kept.order"), read("new.order"));
    let alias = ["--refine-recording", "run.srec"];
    ok(&refine("kept-old.order", &alias));
    assert_eq!(read("kept-old.order"), read("new.order"));
    // The cheapest start and the fill, on the kept run.
    let cheapest_old = [&alias[..], &["--refine-start", "cheapest"]].concat();
    ok(&refine("cheap-old.order", &cheapest_old));
    ok(&tune(
        "cheap-new.order",
        &["--recording", "run.srec", "--start", "cheapest"],
    ));
    assert_eq!(read("cheap-old.order"), read("cheap-new.order"));
    let fill = ["--fill-from", "s.sprof", "--fill-rest"];
    ok(&refine("fill-old.order", &[&alias[..], &fill[..]].concat()));
    ok(&tune(
        "fill-new.order",
        &[&["--recording", "run.srec"][..], &fill[..]].concat(),
    ));
    assert_eq!(read("fill-old.order"), read("fill-new.order"));
    assert_ne!(read("fill-new.order"), read("new.order"));
}

// The refined order must list every function the profile saw, be the same bytes on a second
// run, and be no worse on its cost (the largest ratio of a metric to the best published value)
// than the best candidate.
/// From `tune`'s table on stderr (cells "value (ratio)"): the refined row's worst
/// ratio, and the least worst ratio of the candidates' rows.
fn worst_ratios(log: &str) -> (f64, f64) {
    let worst = |label: &str| -> f64 {
        let line = log
            .lines()
            .find(|l| l.starts_with(&format!("| {label}")))
            .unwrap_or_else(|| panic!("no row {label}: {log}"));
        line.split('(')
            .skip(1)
            .filter_map(|c| c.split(')').next()?.parse::<f64>().ok())
            .fold(0.0, f64::max)
    };
    let best_candidate = sediment_order::Algorithm::NAMES
        .iter()
        .map(|n| worst(n))
        .fold(f64::INFINITY, f64::min);
    (worst("refined"), best_candidate)
}

#[test]
fn tune_is_no_worse_than_its_best_candidate() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    hot_between_cold(d);
    let refine = |out: &str, more: &[&str]| {
        let mut args = vec![
            "tune", "-p", "r.sprof", "--budget", "30", "--binary", "./r", "-o", out,
        ];
        args.extend(more);
        sediment(d, &args)
    };
    let first = refine("a.order", &[]);
    let log = String::from_utf8_lossy(&first.stderr).to_string();
    assert!(first.status.success(), "{log}");
    let text = std::fs::read_to_string(d.join("a.order")).unwrap();
    let order = sediment_profile::FunctionOrder::from_text(&text).unwrap();
    for i in 0..6 {
        assert!(
            order.functions.iter().any(|k| k.name == format!("hot{i}")),
            "hot{i} missing: {text}"
        );
    }
    // The default weighs the footprint by the profile too: twelve columns; it climbs from
    // c3 and counts the I1 misses as means over every page phase.
    let header = log.lines().find(|l| l.starts_with("| layout")).unwrap();
    assert_eq!(header.matches("(profile)").count(), 4, "{header}");
    assert!(text.contains("weights=profile"), "{text}");
    assert!(
        (log.contains("started from c3") || log.contains("the climbs from c3 ended costlier"))
            && log.contains("I1 means over shifts [0, 4176, 8352] and the iTLB's"),
        "{log}"
    );
    let (refined, best_candidate) = worst_ratios(&log);
    assert!(
        refined <= best_candidate,
        "refined {refined} vs best candidate {best_candidate}: {log}"
    );
    // A second search on the run kept by --recording: recorded once, then read back,
    // the same bytes each time.
    let kept = ["--recording", "run.srec"];
    let recorded = refine("b.order", &kept);
    assert!(recorded.status.success());
    assert_eq!(std::fs::read(d.join("b.order")).unwrap(), text.as_bytes());
    let reused = refine("r.order", &kept);
    let log = String::from_utf8_lossy(&reused.stderr);
    assert!(log.contains("the run recorded in run.srec"), "{log}");
    assert_eq!(std::fs::read(d.join("r.order")).unwrap(), text.as_bytes());
    // The cheapest start (on the same kept run): said in the order's parameters, and still no
    // worse than the best candidate.
    let other = refine(
        "m.order",
        &["--recording", "run.srec", "--start", "cheapest"],
    );
    let log = String::from_utf8_lossy(&other.stderr).to_string();
    assert!(other.status.success(), "{log}");
    let (refined, best_candidate) = worst_ratios(&log);
    assert!(refined <= best_candidate, "{log}");
    let text_m = std::fs::read_to_string(d.join("m.order")).unwrap();
    assert!(text_m.contains("start=cheapest"), "{text_m}");
    assert!(
        text.contains("itlb=median")
            && text.contains("footprint=placed")
            && text.contains("i1=mean")
            && text.contains("start=c3"),
        "{text}"
    );
    // A forced start (on the same kept run): the climb starts from it, said in the log and the
    // order's parameters; an unknown name is an error before anything is recorded or written.
    let forced = refine("s.order", &["--recording", "run.srec", "--start", "bp"]);
    let log = String::from_utf8_lossy(&forced.stderr).to_string();
    assert!(forced.status.success(), "{log}");
    assert!(
        log.contains("started from bp") || log.contains("the climbs from bp ended costlier"),
        "{log}"
    );
    let (refined, best_candidate) = worst_ratios(&log);
    assert!(refined <= best_candidate, "{log}");
    let text_s = std::fs::read_to_string(d.join("s.order")).unwrap();
    assert!(text_s.contains("start=bp"), "{text_s}");
    let bad = refine("e.order", &["--start", "c4"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("--start") && err.contains("`c4`"),
        "{err}"
    );
    assert!(!d.join("e.order").exists());
    // A run of other arguments, or a file that is not a recording: one-line errors, no order.
    for (file, more) in [("run.srec", vec!["--", "x"]), ("r.c", vec![])] {
        let args: Vec<&str> = ["--recording", file].into_iter().chain(more).collect();
        let bad = refine("e.order", &args);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains(file), "{err}");
        assert!(!d.join("e.order").exists());
    }

    // `--fill-from` follows the refined order without changing it: the static graph of the
    // same code, from its object's relocations, adds `printf` (called by `main`) after it.
    run(d, "gcc", &["-O1", "-ffunction-sections", "-c", "r.c"]);
    let bin = crate::common::sediment_bin();
    let import = [
        "import",
        "--format",
        "objects",
        "--program",
        "./r",
        "r.o",
        "-o",
        "s.sprof",
    ];
    run(d, bin.to_str().unwrap(), &import);
    let fill = ["--fill-from", "s.sprof", "--fill-rest"];
    let filled = refine("f.order", &fill);
    assert!(
        filled.status.success(),
        "{}",
        String::from_utf8_lossy(&filled.stderr)
    );
    let f = sediment_profile::FunctionOrder::from_text(
        &std::fs::read_to_string(d.join("f.order")).unwrap(),
    )
    .unwrap();
    assert_eq!(f.functions[..order.functions.len()], order.functions[..]);
    let added: Vec<&str> = f.functions[order.functions.len()..]
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert!(added.contains(&"printf"), "{added:?}");

    // Without a binary to simulate there is nothing to refine on, and no file is written.
    let bad = sediment(d, &["order", "-p", "r.sprof", "--refine", "-o", "c.order"]);
    assert!(!bad.status.success());
    assert!(!d.join("c.order").exists());
    let bad = sediment(d, &["tune", "-p", "r.sprof", "-o", "c.order"]);
    assert!(!bad.status.success());
    assert!(!d.join("c.order").exists());
}
