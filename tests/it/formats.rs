//! `sediment import` of the text formats shared when no perf.data can be (perf script, BOLT
//! fdata), and `sediment export --format fdata`, through the CLI.

use crate::common::{fixture, sediment};

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn perf_script_text_imports_like_perf_data() {
    // The captured `perf script` of prog.c: 197 samples in helper, all called from main
    // (see tests/fixtures/perf_script/README.md). The binary is named but absent, so names stay
    // as recorded and sizes unknown.
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("perf_script/prog.perf-script.txt");
    let out = sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "perf-script",
            "--binary",
            "/nonexistent/prog",
            input.to_str().unwrap(),
            "-o",
            "p.sprof",
        ],
    );
    ok(&out);
    let text = std::fs::read_to_string(dir.path().join("p.sprof")).unwrap();
    let p = sediment_profile::Profile::from_text(&text).unwrap();
    assert_eq!(p.meta.source, "perf-script");
    let helper = p
        .find(&sediment_profile::FuncKey::global("helper"))
        .unwrap();
    let main = p.find(&sediment_profile::FuncKey::global("main")).unwrap();
    assert_eq!(p.functions[helper as usize].self_weight, 197);
    assert_eq!(
        p.edges,
        vec![sediment_profile::Edge {
            caller: main,
            callee: helper,
            weight: 197
        }]
    );
    // Only the named binary's profile is written.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn fdata_round_trips_through_export() {
    // Import BOLT fdata, export it again, import the export: the call edges survive exactly.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = fixture("fdata/lbr.fdata");
    let import = |src: &str, dst: &str| {
        sediment(
            d,
            &[
                "import",
                "--format",
                "fdata",
                "--binary",
                "/nonexistent/app",
                src,
                "-o",
                dst,
            ],
        )
    };
    ok(&import(input.to_str().unwrap(), "a.sprof"));
    ok(&sediment(
        d,
        &[
            "export", "--format", "fdata", "-p", "a.sprof", "-o", "a.fdata",
        ],
    ));
    ok(&import("a.fdata", "b.sprof"));
    let read = |f: &str| {
        sediment_profile::Profile::from_text(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap()
    };
    let (a, b) = (read("a.sprof"), read("b.sprof"));
    let edges = |p: &sediment_profile::Profile| -> Vec<(String, String, u64)> {
        p.edges
            .iter()
            .map(|e| {
                (
                    p.functions[e.caller as usize].key.to_string(),
                    p.functions[e.callee as usize].key.to_string(),
                    e.weight,
                )
            })
            .collect()
    };
    assert_eq!(edges(&a), edges(&b));
    assert!(edges(&a).contains(&("work".into(), "helper (a.c)".into(), 300)));
    assert_eq!(a.edges.len(), 5);
}

#[test]
fn fdata_without_binary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("fdata/lbr.fdata");
    let out = sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "fdata",
            input.to_str().unwrap(),
            "-o",
            "x.sprof",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("lbr.fdata") && err.contains("--binary"),
        "{err}"
    );
    assert!(!dir.path().join("x.sprof").exists());
}
