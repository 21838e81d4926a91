//! `sediment merge`: weighted inputs normalized and summed, exact text out, one-line errors,
//! no output on failure, identical bytes on rerun.

use crate::common::{sediment, sediment_ok};
use sediment_profile::{FuncKey, Meta, Profile, ProfileBuilder};
use std::fs;
use std::path::Path;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A perf-like profile: 100 samples, `main -> work`.
fn perf_profile() -> Profile {
    let mut b = ProfileBuilder::new(Meta {
        binary: "/usr/bin/demo".into(),
        source: "perf".into(),
        event: Some("cpu-clock".into()),
        total: 120,
        ..Meta::default()
    });
    let main = FuncKey::global("main");
    let work = FuncKey::global("work");
    b.add_self(&main, 25);
    b.add_self(&work, 75);
    b.set_size(&work, 96);
    b.add_call(&main, &work, 40);
    b.build()
}

/// A callgrind-like profile of the same program built elsewhere: 4000 instructions.
fn callgrind_profile() -> Profile {
    let mut b = ProfileBuilder::new(Meta {
        binary: "/home/u/build/demo".into(),
        source: "callgrind".into(),
        event: Some("Ir".into()),
        total: 4000,
        ..Meta::default()
    });
    let main = FuncKey::global("main");
    let helper = FuncKey::local("helper", "unit07.c");
    b.add_self(&main, 1000);
    b.add_self(&helper, 3000);
    b.add_call(&main, &helper, 12);
    b.build()
}

fn write_inputs(dir: &Path) {
    fs::write(dir.join("a.sprof"), perf_profile().to_text()).unwrap();
    fs::write(dir.join("b.sprof"), callgrind_profile().to_text()).unwrap();
}

// Weight 3 on the perf profile, 1 on the callgrind one: each scaled to 10^9 first, then
// weighted; sizes kept, events differ so none is recorded, and reruns are byte-identical.
#[test]
fn merge_two_profiles_exactly() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    for out in ["m1.sprof", "m2.sprof"] {
        sediment_ok(
            dir.path(),
            // `-f` is the old spelling of `-p`, still accepted.
            &[
                "merge", "-o", out, "-w", "3", "-f", "a.sprof", "-w", "1", "-f", "b.sprof",
            ],
        );
    }
    let m1 = fs::read(dir.path().join("m1.sprof")).unwrap();
    let m2 = fs::read(dir.path().join("m2.sprof")).unwrap();
    assert_eq!(m1, m2);
    assert_eq!(
        String::from_utf8(m1).unwrap(),
        "sediment-profile 1\n\
         meta binary /home/u/build/demo\n\
         meta source merge\n\
         meta total 4600000000\n\
         meta merge-inputs 2\n\
         meta merge-scale 1000000000\n\
         # fn INDEX SELF-WEIGHT SIZE NAME FILE\n\
         fn 0 750000000 - helper unit07.c\n\
         fn 1 1000000000 - main -\n\
         fn 2 2250000000 96 work -\n\
         # call CALLER CALLEE WEIGHT\n\
         call 1 0 3000000\n\
         call 1 2 1200000000\n"
    );
}

// A profile without -w gets weight 1, and the order of the inputs does not change the bytes.
#[test]
fn default_weight_and_input_order() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    sediment_ok(
        dir.path(),
        &["merge", "-o", "x.sprof", "-p", "a.sprof", "b.sprof"],
    );
    sediment_ok(
        dir.path(),
        &[
            "merge", "-o", "y.sprof", "-w", "1.0", "-p", "b.sprof", "-f", "a.sprof",
        ],
    );
    let x = fs::read_to_string(dir.path().join("x.sprof")).unwrap();
    let y = fs::read_to_string(dir.path().join("y.sprof")).unwrap();
    assert_eq!(x, y);
    let p = Profile::from_text(&x).unwrap();
    let weights: Vec<u64> = p.functions.iter().map(|f| f.self_weight).collect();
    assert_eq!(weights, vec![750_000_000, 500_000_000, 750_000_000]);
}

// A truncated input is one line naming the file and line, exit 1, and no output file.
#[test]
fn bad_input_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let text = perf_profile().to_text();
    fs::write(dir.path().join("cut.sprof"), &text[..text.len() - 3]).unwrap();
    let o = sediment(
        dir.path(),
        &[
            "merge",
            "-o",
            "out.sprof",
            "-p",
            "a.sprof",
            "-p",
            "cut.sprof",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("sediment: cut.sprof: line 10: "), "{err}");
    assert!(!dir.path().join("out.sprof").exists());
}

// Profiles of different binaries are refused, naming both files, unless --force.
#[test]
fn different_binaries_need_force() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let mut other = perf_profile();
    other.meta.binary = "/usr/bin/other".into();
    fs::write(dir.path().join("o.sprof"), other.to_text()).unwrap();
    let o = sediment(
        dir.path(),
        &["merge", "-o", "out.sprof", "-p", "a.sprof", "-f", "o.sprof"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "sediment: a.sprof and o.sprof: different binary (`demo` vs `other`); use --force to merge anyway\n"
    );
    assert!(!dir.path().join("out.sprof").exists());
    sediment_ok(
        dir.path(),
        &[
            "merge",
            "--force",
            "-o",
            "out.sprof",
            "-p",
            "a.sprof",
            "-p",
            "o.sprof",
        ],
    );
    let p = Profile::from_text(&fs::read_to_string(dir.path().join("out.sprof")).unwrap()).unwrap();
    assert_eq!(p.meta.binary, "/usr/bin/demo");
    assert_eq!(p.meta.event.as_deref(), Some("cpu-clock"));
}

// Negative weights and a -w with no profile after it are usage errors, with no output.
#[test]
fn bad_weights_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let o = sediment(
        dir.path(),
        &["merge", "-o", "out.sprof", "-w", "-1", "-p", "a.sprof"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`-1` is not a finite number >= 0"),
        "{}",
        stderr(&o)
    );
    let o = sediment(
        dir.path(),
        &["merge", "-o", "out.sprof", "-w", "nan", "-p", "a.sprof"],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = sediment(
        dir.path(),
        &["merge", "-o", "out.sprof", "-p", "a.sprof", "-w", "2"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "sediment: merge: -w 2 after the last profile applies to nothing\n"
    );
    assert!(!dir.path().join("out.sprof").exists());
}

/// A profile of `demo` whose whole weight is in the one function `only` (so each input's
/// effective weight reads directly off the merge), sent by `who` at `t`.
fn submission(only: &str, who: Option<&str>, t: Option<i64>) -> String {
    let mut b = ProfileBuilder::new(Meta {
        binary: "demo".into(),
        source: "perf".into(),
        total: 10,
        ..Meta::default()
    });
    b.add_self(&FuncKey::global(only), 10);
    let mut p = b.build();
    if let Some(who) = who {
        p.meta.extra.insert("submitter".into(), who.into());
    }
    if let Some(t) = t {
        p.meta.extra.insert("recorded-at".into(), t.to_string());
    }
    p.to_text()
}

fn self_weights(p: &Profile) -> Vec<(String, u64)> {
    p.functions
        .iter()
        .map(|f| (f.key.name.clone(), f.self_weight))
        .collect()
}

// --per-submitter, --half-life with --now and --cap-per-submitter give each input the
// effective weight of docs/design/merging.md, read off one function per input; the result
// records how it was weighted.
#[test]
fn fleet_options_weight_inputs() {
    const D: i64 = 86_400;
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("a1.sprof", "a1", Some("host-a"), Some(20 * D)),
        ("a2.sprof", "a2", Some("host-a"), Some(13 * D)),
        ("a3.sprof", "a3", Some("host-a"), Some(6 * D)),
        ("b1.sprof", "b1", Some("host-b"), Some(20 * D)),
        ("c1.sprof", "c1", None, None),
    ];
    for (file, f, who, t) in files {
        fs::write(dir.path().join(file), submission(f, who, t)).unwrap();
    }
    let run = |extra: &[&str]| -> Profile {
        let mut args = vec!["merge", "-o", "out.sprof"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-w", "2", "a1.sprof", "-w", "1", "a2.sprof", "a3.sprof"]);
        args.extend_from_slice(&["b1.sprof", "c1.sprof"]);
        sediment_ok(dir.path(), &args);
        Profile::from_text(&fs::read_to_string(dir.path().join("out.sprof")).unwrap()).unwrap()
    };
    let w = |v: &[u64]| -> Vec<(String, u64)> {
        ["a1", "a2", "a3", "b1", "c1"]
            .iter()
            .zip(v)
            .map(|(n, w)| (n.to_string(), *w))
            .collect()
    };
    let g = 1_000_000_000;
    // Plain: the -w weights.
    let p = run(&[]);
    assert_eq!(self_weights(&p), w(&[2 * g, g, g, g, g]));
    assert!(!p.meta.extra.contains_key("merge-submitters"));
    // Per submitter: host-a's 2, 1, 1 share one unit.
    let p = run(&["--per-submitter"]);
    assert_eq!(self_weights(&p), w(&[g / 2, g / 4, g / 4, g, g]));
    assert_eq!(p.meta.extra["merge-submitters"], "3");
    // Decay by one week from the newest time (day 20): a3 is two weeks old.
    let p = run(&["--half-life", "7"]);
    assert_eq!(self_weights(&p), w(&[2 * g, g / 2, g / 4, g, g]));
    assert_eq!(p.meta.extra["merge-now"], (20 * D).to_string());
    assert_eq!(p.meta.extra["merge-half-life-days"], "7");
    // ... or from a given time: day 27 makes everything a week older.
    let p = run(&["--half-life", "7", "--now", &(27 * D).to_string()]);
    assert_eq!(self_weights(&p), w(&[g, g / 4, g / 8, g / 2, g]));
    // All three: per submitter (1/2, 1/4, 1/4), decay (1/2, 1/8, 1/16 for host-a, 1 for b),
    // cap 0.25: host-a sums 11/16 -> scaled by 4/11, b 1 -> 0.25, c 1 -> 0.25.
    let p = run(&[
        "--per-submitter",
        "--half-life",
        "7",
        "--cap-per-submitter",
        "0.25",
    ]);
    let scaled = |x: f64| (x * 1e9 * 4.0 / 11.0).round() as u64;
    assert_eq!(
        self_weights(&p),
        w(&[scaled(0.5), scaled(0.125), scaled(0.0625), g / 4, g / 4])
    );
    assert_eq!(p.meta.extra["merge-cap-per-submitter"], "0.25");
    // Mixed submitters and times: neither is carried over.
    assert!(!p.meta.extra.contains_key("submitter"));
    assert!(!p.meta.extra.contains_key("recorded-at"));
}

// A directory stands for its *.sprof files, a list file for its lines (with weights); the
// merge of 60 inputs is byte-identical on 1, 2 and 7 threads and equal to naming each file.
#[test]
fn directory_list_and_threads_agree() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = dir.path().join("inbox");
    fs::create_dir(&inbox).unwrap();
    let mut names = Vec::new();
    for i in 0..60 {
        let mut b = ProfileBuilder::new(Meta {
            binary: "demo".into(),
            source: "perf".into(),
            ..Meta::default()
        });
        for f in 0..(i % 9 + 1) {
            b.add_self(
                &FuncKey::global(format!("f{}", (i * 7 + f) % 23)),
                1 + (i * f) as u64 % 17,
            );
            b.add_call(
                &FuncKey::global(format!("f{}", f % 5)),
                &FuncKey::global(format!("f{}", (i + f) % 23)),
                3 + i as u64,
            );
        }
        let mut p = b.build();
        p.meta
            .extra
            .insert("submitter".into(), format!("h{}", i % 4));
        let name = format!("w{i:02}.sprof");
        fs::write(inbox.join(&name), p.to_text()).unwrap();
        names.push(format!("inbox/{name}"));
    }
    fs::write(inbox.join("notes.txt"), "not a profile").unwrap();
    let out = |args: &[&str]| -> Vec<u8> {
        let mut all = vec!["merge", "-o", "out.sprof"];
        all.extend_from_slice(args);
        sediment_ok(dir.path(), &all);
        fs::read(dir.path().join("out.sprof")).unwrap()
    };
    let one = out(&["-j", "1", "--per-submitter", "inbox"]);
    assert_eq!(out(&["-j", "2", "--per-submitter", "inbox"]), one);
    assert_eq!(out(&["-j", "7", "--per-submitter", "inbox"]), one);
    let mut each: Vec<&str> = vec!["-j", "2", "--per-submitter"];
    each.extend(names.iter().rev().map(String::as_str));
    assert_eq!(out(&each), one);
    let text = String::from_utf8(one).unwrap();
    assert!(text.contains("meta merge-inputs 60\n"), "{text}");
    assert!(text.contains("meta merge-submitters 4\n"), "{text}");

    // A list: weights per line, comments, and a directory entry.
    let mut list = String::from("# inputs\n\n");
    for n in &names[..30] {
        list.push_str(&format!("3,{n}\n"));
    }
    fs::write(dir.path().join("inputs.list"), &list).unwrap();
    let listed = out(&["-j", "2", "--inputs-from", "inputs.list"]);
    let mut weighted: Vec<&str> = vec!["-j", "1", "-w", "3"];
    weighted.extend(names[..30].iter().map(String::as_str));
    assert_eq!(listed, out(&weighted));
    assert_ne!(listed, out(&["-j", "1", "inbox"]));
}

// Bad fleet input: a `recorded-at` that is no integer, a list line with a bad weight, an
// empty directory: one line, no output; --now without --half-life is a usage error.
#[test]
fn fleet_bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("a.sprof"),
        submission("f", Some("h"), Some(5)),
    )
    .unwrap();
    fs::write(
        dir.path().join("bad.sprof"),
        submission("f", Some("h"), None).replace(
            "meta submitter h\n",
            "meta recorded-at yesterday\nmeta submitter h\n",
        ),
    )
    .unwrap();
    fs::write(dir.path().join("bad.list"), "a.sprof\n-2,a.sprof\n").unwrap();
    fs::create_dir(dir.path().join("empty")).unwrap();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--half-life", "3", "a.sprof", "bad.sprof"],
            &["bad.sprof: meta recorded-at `yesterday` is not an integer"],
        ),
        (
            &["--inputs-from", "bad.list"],
            &["bad.list: line 2: weight `-2` is not a finite number >= 0"],
        ),
        (&["empty"], &["empty: no *.sprof file in this directory"]),
    ];
    for (args, needles) in cases {
        let mut all = vec!["merge", "-o", "out.sprof"];
        all.extend_from_slice(args);
        crate::common::fails_one_line(dir.path(), &all, needles);
        assert!(!dir.path().join("out.sprof").exists());
    }
    // A usage error (clap's, with its usage lines).
    let o = sediment(
        dir.path(),
        &["merge", "-o", "out.sprof", "--now", "5", "a.sprof"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--half-life"), "{}", stderr(&o));
    assert!(!dir.path().join("out.sprof").exists());
}
