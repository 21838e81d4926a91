//! `sediment import` of the text formats shared when no perf.data can be (perf script, BOLT
//! fdata), and `sediment export --format fdata`, through the CLI.

use crate::common::{fixture, run, sediment};
use std::path::Path;

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
    // Import BOLT fdata, export it again, import the export: the export is the no_lbr sample
    // form (a profile keeps no call-site offsets), and every function's self weight survives
    // exactly.
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
    let text = std::fs::read_to_string(d.join("a.fdata")).unwrap();
    assert!(text.starts_with("no_lbr"), "{text}");
    ok(&import("a.fdata", "b.sprof"));
    let read = |f: &str| {
        sediment_profile::Profile::from_text(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap()
    };
    let (a, b) = (read("a.sprof"), read("b.sprof"));
    let weights = |p: &sediment_profile::Profile| {
        p.functions
            .iter()
            .map(|f| (f.key.to_string(), f.self_weight))
            .collect::<Vec<_>>()
    };
    assert_eq!(weights(&a), weights(&b));
    assert!(weights(&a).contains(&("helper (a.c)".into(), 300)));
    assert_eq!(a.edges.len(), 5);
    assert!(b.edges.is_empty());
}

// Regression: `export --format fdata` wrote every call as a branch from offset 0 of the caller,
// and BOLT rejected the profile as stale ("N out of M samples ... belong to functions with
// invalid (possibly stale) profile"). The export of a real recording must be read by the real
// llvm-bolt with no stale share, match every exported function (a static one included), and
// give a binary that runs.
#[test]
fn fdata_export_is_accepted_by_bolt() {
    let bolt = "/usr/lib/llvm-16/bin/llvm-bolt";
    require!("gcc", "valgrind", bolt);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.c"),
        "#include <stdio.h>\n\
         __attribute__((noinline)) static unsigned leaf(unsigned x) {\n\
           unsigned s = 0; for (unsigned i = 0; i < x % 7 + 3; i++) s += i * x; return s; }\n\
         __attribute__((noinline)) unsigned mid(unsigned x) { return leaf(x) + leaf(x + 1); }\n\
         __attribute__((noinline)) unsigned never(unsigned x) { return x ^ 5; }\n\
         int main(int argc, char **argv) { unsigned s = 0;\n\
           for (unsigned i = 0; i < 20000; i++) s += mid(i);\n\
           if (argc > 3) s += never(argc); printf(\"%u\\n\", s); return 0; }\n",
    )
    .unwrap();
    run(d, "gcc", &["-O2", "-Wl,--emit-relocs", "p.c", "-o", "p"]);
    let profile = crate::common::record_callgrind(d, "p.sprof", "./p");
    assert!(!profile.edges.is_empty(), "the recording has calls");
    ok(&sediment(
        d,
        &[
            "export", "--format", "fdata", "-p", "p.sprof", "-o", "p.fdata",
        ],
    ));
    let fdata = std::fs::read_to_string(d.join("p.fdata")).unwrap();
    assert!(fdata.contains(" leaf/p.c/1 0 "), "{fdata}");
    // The program's own functions, the static one spelled BOLT's way, alone in a file: BOLT
    // must find all three ("K out of N functions in the binary (..%) have non-empty execution
    // profile"). The C runtime's lines are left out of this count, since BOLT skips some of
    // them by its own rules.
    let own: String = fdata
        .lines()
        .filter(|l| {
            l.starts_with("no_lbr")
                || [" leaf/p.c/1 ", " mid ", " main "]
                    .iter()
                    .any(|n| l.contains(n))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("own.fdata"), &own).unwrap();
    let bolt_run = |data: &str, out: &str| {
        run_bolt(
            bolt,
            d,
            &[
                "p",
                &format!("-data={data}"),
                "-reorder-functions=hfsort",
                "-o",
                out,
            ],
        )
    };
    let log = bolt_run("own.fdata", "p.own");
    assert!(log.contains("BOLT-INFO: 3 out of "), "{log}\n{own}");
    // The whole export: read with no stale share, and the result runs.
    let log = bolt_run("p.fdata", "p.bolt");
    assert!(log.contains("have non-empty execution profile"), "{log}");
    assert!(!log.contains("stale"), "{log}");
    let want = crate::common::sh(d, "./p", &[]);
    assert_eq!(crate::common::sh(d, "./p.bolt", &[]), want);
}

/// A program whose hot function `work` has a loop of several blocks (an if/else-if/else) and a
/// cold path that never runs, for the block-layout tests of `export --format fdata`.
const BLOCKS_C: &str = "#include <stdio.h>\n\
#include <stdlib.h>\n\
__attribute__((noinline)) static unsigned work(unsigned *v, unsigned n, unsigned seed) {\n\
  unsigned s = 0;\n\
  for (unsigned i = 0; i < n; i++) {\n\
    unsigned x = v[i] ^ seed;\n\
    if (x & 1) s += x * 3;\n\
    else if (x & 2) s ^= x >> 1;\n\
    else s += i;\n\
    if (x == 0xdeadbeefu) {\n\
      fprintf(stderr, \"rare %u\\n\", x);\n\
      s += (unsigned)rand(); s *= 7; s ^= 12345; s += x / 3;\n\
    }\n\
  }\n\
  return s;\n\
}\n\
int main(int argc, char **argv) {\n\
  static unsigned v[4096];\n\
  for (unsigned i = 0; i < 4096; i++) v[i] = i * 2654435761u;\n\
  unsigned s = 0, reps = argc > 1 ? (unsigned)atoi(argv[1]) : 300;\n\
  for (unsigned r = 0; r < reps; r++) s += work(v, 4096, r);\n\
  printf(\"%u\\n\", s);\n\
  return 0;\n\
}\n";

/// Builds [`BLOCKS_C`] as `blocks` in `d`, lets `record` (the arguments before `--`) profile
/// `./blocks ARG`, exports the profile as fdata, BOLTs the binary with the block layout and
/// splitting on, and returns (the share of `work`'s weight its hot part keeps in the BOLTed
/// binary, measured by callgrind; BOLT's log). `old` exports the profile without its samples
/// (each function's weight at its entry, what profiles without instruction addresses give).
fn bolt_blocks(d: &std::path::Path, record: &[&str], arg: &str, old: bool) -> (f64, String) {
    let bolt = "/usr/lib/llvm-16/bin/llvm-bolt";
    std::fs::write(d.join("blocks.c"), BLOCKS_C).unwrap();
    run(
        d,
        "gcc",
        &["-O2", "-Wl,--emit-relocs", "blocks.c", "-o", "blocks"],
    );
    if record == ["perf-script"] {
        // perf's own recording, printed by `perf script` with its default fields.
        let perf = |args: &[&str]| run(d, "perf", args);
        perf(&[
            "record",
            "-e",
            "cpu-clock",
            "-o",
            "perf.data",
            "--",
            "./blocks",
            arg,
        ]);
        std::fs::write(d.join("p.txt"), perf(&["script", "-i", "perf.data"])).unwrap();
        ok(&sediment(
            d,
            &[
                "import",
                "--format",
                "perf-script",
                "--binary",
                "blocks",
                "p.txt",
                "-o",
                "b.sprof",
            ],
        ));
    } else {
        let mut args = record.to_vec();
        args.extend(["-o", "b.sprof", "--", "./blocks", arg]);
        ok(&sediment(d, &args));
    }
    let read = |f: &str| {
        sediment_profile::Profile::from_text(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap()
    };
    let mut p = read("b.sprof");
    let work = |p: &sediment_profile::Profile| {
        p.functions
            .iter()
            .find(|f| f.key.name.starts_with("work"))
            .map_or(0, |f| f.self_weight)
    };
    assert!(work(&p) > 0, "work ran: {:?}", p.functions);
    assert!(
        !p.samples.is_empty(),
        "the recording keeps instruction offsets"
    );
    if old {
        p.samples.clear();
        std::fs::write(d.join("b.sprof"), p.to_text()).unwrap();
    }
    let out = sediment(
        d,
        &[
            "export", "--format", "fdata", "-p", "b.sprof", "-o", "b.fdata",
        ],
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.contains("block counts inside functions are unknown"),
        old,
        "{err}"
    );
    let log = run_bolt(
        bolt,
        d,
        &[
            "blocks",
            "-data=b.fdata",
            "-reorder-blocks=ext-tsp",
            "-split-functions",
            "-split-all-cold",
            "-o",
            "blocks.bolt",
        ],
    );
    assert_eq!(
        crate::common::sh(d, "./blocks.bolt", &[arg]),
        crate::common::sh(d, "./blocks", &[arg])
    );
    // Where the BOLTed binary runs `work`: its own symbol is the hot part (`work*.cold.0` the
    // cold one), against all of `work` in the input binary, both counted by callgrind.
    let ir = |program: &str, out: &str| {
        ok(&sediment(
            d,
            &[
                "record",
                "--via",
                "callgrind",
                "-o",
                out,
                "--",
                program,
                "300",
            ],
        ));
        work(&read(out))
    };
    let (before, after) = (ir("./blocks", "in.sprof"), ir("./blocks.bolt", "out.sprof"));
    (after as f64 / before as f64, log)
}

// Regression: `export --format fdata` wrote one sample per function, at its entry, so BOLT took
// every other block for never run and, with `-split-functions -split-all-cold`, moved the hot
// loop into the cold part (cppcheck: 5.3 times the default link's iTLB misses). Samples at
// the instruction offsets callgrind recorded keep the loop hot; the entry-only export (a
// profile without offsets) is checked to fail the same assertion, so the test can fail.
#[test]
fn fdata_export_keeps_hot_blocks_hot_callgrind() {
    require!("gcc", "valgrind", "/usr/lib/llvm-16/bin/llvm-bolt");
    let dir = tempfile::tempdir().unwrap();
    let (hot, log) = bolt_blocks(dir.path(), &["record", "--via", "callgrind"], "300", false);
    assert!(
        log.contains("normalizing samples by instruction count"),
        "{log}"
    );
    assert!(!log.contains("stale") && !log.contains("invalid"), "{log}");
    assert!(
        hot > 0.99,
        "work's hot part runs {hot:.3} of its instructions\n{log}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (hot, log) = bolt_blocks(dir.path(), &["record", "--via", "callgrind"], "300", true);
    assert!(
        hot < 0.5,
        "entry-only export: hot part runs {hot:.3}\n{log}"
    );
}

// The same with a perf recording (cpu-clock samples at instruction pointers), through `record`
// and through `perf script` text (the leaf frames' `sym+0xoff`): every block of the loop is
// sampled, so it stays in the hot part.
#[test]
fn fdata_export_keeps_hot_blocks_hot_perf() {
    require!("gcc", "perf", "valgrind", "/usr/lib/llvm-16/bin/llvm-bolt");
    for route in [&["record"][..], &["perf-script"]] {
        let dir = tempfile::tempdir().unwrap();
        let (hot, log) = bolt_blocks(dir.path(), route, "20000", false);
        assert!(
            !log.contains("stale") && !log.contains("invalid"),
            "{route:?}: {log}"
        );
        assert!(
            hot > 0.95,
            "{route:?}: work's hot part runs {hot:.3} of its instructions\n{log}"
        );
    }
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

/// The names of `bin`'s function symbols in address order.
fn layout(d: &std::path::Path, bin: &str) -> Vec<String> {
    let data = std::fs::read(d.join(bin)).unwrap();
    let b = sediment_elf::Binary::parse(bin, &data).unwrap();
    let mut f: Vec<_> = b
        .functions
        .iter()
        .map(|s| (s.address, s.key.name.clone()))
        .collect();
    f.sort();
    f.into_iter().map(|(_, n)| n).collect()
}

// `export --format lld-call-graph` feeds lld's own C3: a recording of a program whose hot chain
// main -> hot_a -> hot_b -> leaf (a static) is scattered among cold functions over two files
// links, with the exported file, into a binary where the chain is contiguous in call order,
// which the default link does not give.
#[test]
fn lld_call_graph_export_orders_a_real_lld_link() {
    require!("gcc", "ld.lld", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("a.c"),
        "#include <stdio.h>\n\
         unsigned hot_b(unsigned); unsigned cold_x(unsigned);\n\
         __attribute__((noinline)) unsigned hot_a(unsigned x) { return hot_b(x) + hot_b(x + 1); }\n\
         __attribute__((noinline)) unsigned cold_1(unsigned x) { return x * 3 + cold_x(x); }\n\
         __attribute__((noinline)) unsigned cold_2(unsigned x) { return x * 5 + 1; }\n\
         int main(int argc, char **argv) { unsigned s = 0;\n\
           for (unsigned i = 0; i < 20000; i++) s += hot_a(i);\n\
           if (argc > 3) s += cold_1(argc) + cold_2(argc); printf(\"%u\\n\", s); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("b.c"),
        "__attribute__((noinline)) unsigned cold_x(unsigned x) { return x ^ 77; }\n\
         __attribute__((noinline)) unsigned cold_y(unsigned x) { return x ^ 99; }\n\
         __attribute__((noinline)) static unsigned leaf(unsigned x) {\n\
           unsigned s = 0; for (unsigned i = 0; i < x % 7 + 3; i++) s += i * x; return s; }\n\
         __attribute__((noinline)) unsigned hot_b(unsigned x) { return leaf(x) + 1; }\n",
    )
    .unwrap();
    run(
        d,
        "gcc",
        &["-O2", "-ffunction-sections", "-c", "a.c", "b.c"],
    );
    run(d, "gcc", &["-fuse-ld=lld", "a.o", "b.o", "-o", "p0"]);
    crate::common::record_callgrind(d, "p.sprof", "./p0");
    ok(&sediment(
        d,
        &[
            "export",
            "--format",
            "lld-call-graph",
            "-p",
            "p.sprof",
            "-o",
            "p.cg",
        ],
    ));
    let cg = std::fs::read_to_string(d.join("p.cg")).unwrap();
    assert!(cg.contains("hot_b leaf "), "{cg}");
    run(
        d,
        "gcc",
        &[
            "-fuse-ld=lld",
            "a.o",
            "b.o",
            "-o",
            "p1",
            "-Wl,--call-graph-ordering-file=p.cg",
        ],
    );
    let chain = ["main", "hot_a", "hot_b", "leaf"];
    let contiguous = |names: &[String]| {
        names
            .windows(chain.len())
            .any(|w| w.iter().zip(chain).all(|(a, b)| a == b))
    };
    let (before, after) = (layout(d, "p0"), layout(d, "p1"));
    assert!(
        !contiguous(&before),
        "premise: the default link scatters the chain: {before:?}"
    );
    assert!(contiguous(&after), "{after:?}");
    let want = crate::common::sh(d, "./p0", &[]);
    assert_eq!(crate::common::sh(d, "./p1", &[]), want);
}

/// Runs `llvm-bolt` (`bolt`) in `dir` with `args`, asserts it succeeded, and returns its
/// stdout and stderr together.
fn run_bolt(bolt: &str, dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new(bolt)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{log}");
    log
}
