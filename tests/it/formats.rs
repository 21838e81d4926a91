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
    let edges = sediment_profile::Profile::named_edges;
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

/// Reads a written profile's edges as (caller, callee, weight) with display names.
fn edges_of(path: &std::path::Path) -> Vec<(String, String, u64)> {
    sediment_profile::Profile::from_text(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .named_edges()
}

#[test]
fn gprof_gmon_out_gives_exact_call_counts() {
    // prog.c: main calls a() 1000 times and c() 10 times; a calls prog.c's static b 2000 times,
    // c calls other.c's static b 30 times (tests/fixtures/gprof/README.md).
    let dir = tempfile::tempdir().unwrap();
    let (bin, gmon) = (fixture("gprof/prog"), fixture("gprof/gmon.out"));
    let out = sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "gprof",
            "--binary",
            bin.to_str().unwrap(),
            gmon.to_str().unwrap(),
            "-o",
            "g.sprof",
        ],
    );
    ok(&out);
    let want: Vec<(String, String, u64)> = [
        ("a", "b (prog.c)", 2000),
        ("c", "b (other.c)", 30),
        ("main", "a", 1000),
        ("main", "c", 10),
    ]
    .iter()
    .map(|&(a, b, w)| (a.to_string(), b.to_string(), w))
    .collect();
    assert_eq!(edges_of(&dir.path().join("g.sprof")), want);
}

#[test]
fn gcc_callgraph_info_gives_the_static_graph() {
    // Three translation units each with a static `helper`; ring calls its own helper twice.
    let dir = tempfile::tempdir().unwrap();
    let cis = [
        fixture("gcc_callgraph/main.ci"),
        fixture("gcc_callgraph/util.ci"),
        fixture("gcc_callgraph/sub/ring.ci"),
    ];
    let mut args = vec![
        "import",
        "--format",
        "gcc-callgraph",
        "--program",
        "/nonexistent/prog",
        "-o",
        "s.sprof",
    ];
    args.extend(cis.iter().map(|p| p.to_str().unwrap()));
    ok(&sediment(dir.path(), &args));
    let edges = edges_of(&dir.path().join("s.sprof"));
    assert!(
        edges.contains(&("ring".into(), "helper (ring.c)".into(), 2)),
        "{edges:?}"
    );
    assert!(
        edges.contains(&("work".into(), "helper (util.c)".into(), 1)),
        "{edges:?}"
    );
    assert!(
        edges.contains(&("main".into(), "helper (main.c)".into(), 1)),
        "{edges:?}"
    );
    assert_eq!(edges.len(), 5, "{edges:?}");
}

#[test]
fn one_input_only_where_the_format_takes_one() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("fdata/lbr.fdata");
    let f = f.to_str().unwrap();
    let out = sediment(
        dir.path(),
        &[
            "import", "--format", "fdata", "--binary", "x", f, f, "-o", "x.sprof",
        ],
    );
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    assert!(!dir.path().join("x.sprof").exists());
}

#[test]
fn pprof_profile_imports_with_exact_weights() {
    // burn.go: burnA does twice burnB's work; both called from main.main
    // (tests/fixtures/pprof/README.md has the `go tool pprof -raw` dump).
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("pprof/burn.pb.gz");
    ok(&sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "pprof",
            input.to_str().unwrap(),
            "-o",
            "g.sprof",
        ],
    ));
    let want: Vec<(String, String, u64)> = [
        ("main.main", "main.burnA", 68),
        ("main.main", "main.burnB", 34),
    ]
    .iter()
    .map(|&(a, b, w)| (a.to_string(), b.to_string(), w))
    .collect();
    assert_eq!(edges_of(&dir.path().join("g.sprof")), want);
}
