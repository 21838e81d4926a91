//! `sediment merge`: weighted inputs normalized and summed, exact text out, one-line errors,
//! no output on failure, identical bytes on rerun.

use crate::common::sediment;
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
        let o = sediment(
            dir.path(),
            // `-f` is the old spelling of `-p`, still accepted.
            &[
                "merge", "-o", out, "-w", "3", "-f", "a.sprof", "-w", "1", "-f", "b.sprof",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
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
    let o = sediment(
        dir.path(),
        &["merge", "-o", "x.sprof", "-p", "a.sprof", "b.sprof"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sediment(
        dir.path(),
        &[
            "merge", "-o", "y.sprof", "-w", "1.0", "-p", "b.sprof", "-f", "a.sprof",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
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
    let o = sediment(
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
    assert!(o.status.success(), "{}", stderr(&o));
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
