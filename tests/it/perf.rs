//! `sediment record` under perf and `sediment import --format perf`: a real capture of a
//! program whose hot loop is known, the committed fixture against its golden profiles, and
//! damaged inputs (one-line error, non-zero exit, no output file).

use crate::common::{fixture, have_tool, sediment, sediment_ok};
use sediment_profile::{FuncKey, Profile};
use std::path::Path;
use std::process::Command;

/// Compiles `tests/fixtures/perf/hot.c` into `dir/hot` with the flags the README uses.
fn build_hot(dir: &Path, extra: &[&str]) {
    let out = Command::new("gcc")
        .args(["-O2", "-fno-omit-frame-pointer", "-ffunction-sections"])
        .args(extra)
        .arg("-o")
        .arg(dir.join("hot"))
        .arg(fixture("perf/hot.c"))
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_profile(path: &Path) -> Profile {
    let text = std::fs::read_to_string(path).expect("profile written");
    Profile::from_text(&text).expect("valid profile")
}

fn edge(p: &Profile, caller: &FuncKey, callee: &FuncKey) -> u64 {
    let (Some(a), Some(b)) = (p.find(caller), p.find(callee)) else {
        return 0;
    };
    p.edges
        .iter()
        .find(|e| e.caller == a && e.callee == b)
        .map_or(0, |e| e.weight)
}

/// Asserts a failed run: non-zero exit, exactly one stderr line containing every `needle`.
fn assert_one_line_error(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "`{n}` missing from: {err}");
    }
}

// A real capture: `spin` (static, hot.c) takes nearly all samples, and `work -> spin` is the edge.
#[test]
fn record_finds_the_hot_loop_and_its_caller() {
    if !have_tool("perf") || !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build_hot(dir.path(), &[]);
    sediment_ok(
        dir.path(),
        &["record", "-o", "hot.sprof", "--", "./hot", "60"],
    );
    let p = read_profile(&dir.path().join("hot.sprof"));
    assert_eq!(p.meta.source, "perf");
    assert_eq!(p.meta.event.as_deref(), Some("cpu-clock"));
    assert!(p.meta.binary.ends_with("/hot"), "{}", p.meta.binary);
    let spin = FuncKey::local("spin", "hot.c");
    let work = FuncKey::global("work");
    let spin_w = p.functions[p.find(&spin).expect("spin sampled") as usize].self_weight;
    assert!(p.self_total() >= 50, "too few samples: {}", p.self_total());
    assert!(
        spin_w * 10 >= p.self_total() * 9,
        "spin has {spin_w} of {}",
        p.self_total()
    );
    assert!(edge(&p, &work, &spin) * 10 >= spin_w * 9, "{}", p.to_text());
    // Leaf mode never credits main -> work: only first-caller edges exist.
    assert_eq!(edge(&p, &FuncKey::global("main"), &work), 0);

    sediment_ok(
        dir.path(),
        &[
            "record",
            "--mode",
            "chain",
            "-o",
            "chain.sprof",
            "--",
            "./hot",
            "30",
        ],
    );
    let c = read_profile(&dir.path().join("chain.sprof"));
    assert!(
        edge(&c, &FuncKey::global("main"), &work) > 0,
        "{}",
        c.to_text()
    );
    assert!(edge(&c, &work, &spin) > 0, "{}", c.to_text());
}

// The committed capture imports to exactly the committed golden profiles, in both modes.
#[test]
fn fixture_matches_golden_profiles() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["leaf", "chain"] {
        let out_path = dir.path().join(format!("{mode}.sprof"));
        sediment_ok(
            dir.path(),
            &[
                "import",
                "--format",
                "perf",
                "--mode",
                mode,
                "--binary",
                fixture("perf/hot").to_str().unwrap(),
                fixture("perf/hot.perf.data").to_str().unwrap(),
                "-o",
                out_path.to_str().unwrap(),
            ],
        );
        let got = std::fs::read_to_string(&out_path).unwrap();
        let golden = fixture(&format!("perf/hot.{mode}.sprof"));
        if std::env::var_os("SEDIMENT_UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, &got).unwrap();
        }
        assert_eq!(got, std::fs::read_to_string(&golden).unwrap(), "{mode}");
        // Only the named binary is imported.
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1 + (mode == "chain") as usize
        );
    }
}

fn import_expect_error(input: &Path, binary: &Path, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = sediment(
        dir.path(),
        &[
            "import",
            "--format",
            "perf",
            "--binary",
            binary.to_str().unwrap(),
            input.to_str().unwrap(),
            "-o",
            "out.sprof",
        ],
    );
    assert_one_line_error(&out, needles);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "output left behind"
    );
}

// A file that is not a perf.data at all.
#[test]
fn not_a_perf_data_is_refused() {
    import_expect_error(
        &fixture("perf/hot.c"),
        &fixture("perf/hot"),
        &["hot.c: not a perf.data file"],
    );
}

// A capture cut in half: the error gives the offset of the section that runs off the end.
#[test]
fn truncated_perf_data_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::read(fixture("perf/hot.perf.data")).unwrap();
    let cut = dir.path().join("cut.perf.data");
    std::fs::write(&cut, &data[..data.len() / 2]).unwrap();
    import_expect_error(
        &cut,
        &fixture("perf/hot"),
        &["cut.perf.data: offset ", "truncated?"],
    );
}

// The binary on disk is another build than the one recorded.
#[test]
fn other_build_of_the_binary_is_refused() {
    if !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build_hot(dir.path(), &["-DOTHER_BUILD=1", "-O1"]);
    import_expect_error(
        &fixture("perf/hot.perf.data"),
        &dir.path().join("hot"),
        &["/hot: build-id mismatch"],
    );
}

// Without perf on PATH, record says which package to install.
#[test]
fn record_names_the_missing_package() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(crate::common::sediment_bin())
        .args(["record", "-o", "x.sprof", "--", "/bin/true"])
        .current_dir(dir.path())
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_one_line_error(&out, &["perf not found", "linux-perf"]);
    let out = Command::new(crate::common::sediment_bin())
        .args([
            "record",
            "--via",
            "callgrind",
            "-o",
            "x.sprof",
            "--",
            "/bin/true",
        ])
        .current_dir(dir.path())
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_one_line_error(&out, &["valgrind not found", "`valgrind`"]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// Regression (found by fuzzing): a sample whose callchain length overflows when multiplied by 8
// is a one-line parse error, with no panic message on stderr, in any build profile.
#[test]
fn regress_callchain_overflow_is_a_one_line_error() {
    import_expect_error(
        &fixture("perf/regress-callchain-overflow.bin"),
        &fixture("perf/hot"),
        &["regress-callchain-overflow.bin: offset "],
    );
}

// Regression: recording a program that does not exist ended with an error about perf's stub
// temporary perf.data ("truncated?"), and under callgrind with "valgrind failed (exit status:
// 127)", neither naming the program. Now it is checked (a bare name in PATH) before the
// profiler starts; no output is written.
#[test]
fn regress_record_names_a_missing_program() {
    let dir = tempfile::tempdir().unwrap();
    for (via, program, want) in [
        ("perf", "./nonexist", "./nonexist: no such program"),
        ("callgrind", "./nonexist", "./nonexist: no such program"),
        (
            "perf",
            "nonexist-sediment-test",
            "nonexist-sediment-test: no such program in PATH",
        ),
        (
            "callgrind",
            "./",
            "./: a directory, not a program to record",
        ),
    ] {
        let out = sediment(
            dir.path(),
            &["record", "--via", via, "-o", "x.sprof", "--", program],
        );
        assert_one_line_error(&out, &[want]);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// Regression: `record --via callgrind --mode chain` was accepted and the mode silently ignored
// (it says how perf's sampled call chains become edges; callgrind counts calls and has no
// chains). Now any `--mode` with callgrind is refused in one line before anything runs: the
// command, which would leave a file behind, is not started, and nothing is written.
#[test]
fn regress_record_refuses_mode_with_callgrind() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["chain", "leaf"] {
        let out = sediment(
            dir.path(),
            &[
                "record",
                "--via",
                "callgrind",
                "--mode",
                mode,
                "-o",
                "x.sprof",
                "--",
                "sh",
                "-c",
                "touch ran",
            ],
        );
        assert_one_line_error(&out, &[&format!("--mode {mode}"), "--via perf only"]);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// Regression (issue 33): perf samples in the PLT (the stubs a call into libc goes through)
// were attributed to `_init`, the size-less symbol that ends `.init` just before `.plt`, so
// `_init` looked hot and was ordered among the hot functions. Now the PLT sections are known
// (`Binary::plt`), no function is found there, and such samples are counted as PLT in one
// line. A program calling libc's `labs` through its PLT in a tight loop (about 40% of its
// samples land in the stub).
#[test]
fn regress_plt_samples_are_not_init() {
    if !have_tool("perf") || !have_tool("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("plt.c"),
        "#include <stdlib.h>\n\
         int main(int argc, char **argv) {\n\
           long n = argc > 1 ? atol(argv[1]) : 1; long s = 0;\n\
           for (long i = 0; i < n; i++) s += labs(i - n / 2);\n\
           return s == 7;\n}\n",
    )
    .unwrap();
    let out = Command::new("gcc")
        .current_dir(d)
        .args([
            "-O1",
            "-fno-builtin",
            "-fno-omit-frame-pointer",
            "-o",
            "plt",
            "plt.c",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The linked binary: `_init` has no size, and the PLT sections follow it.
    let bin = sediment_elf::Binary::parse("plt", &std::fs::read(d.join("plt")).unwrap()).unwrap();
    assert!(!bin.plt.is_empty(), "no PLT section found");
    let init = bin
        .functions
        .iter()
        .find(|f| f.key.name == "_init")
        .expect("crti's _init");
    for &(start, end) in &bin.plt {
        assert!(start > init.address);
        assert_eq!(bin.lookup(start), None);
        assert_eq!(bin.lookup(end - 1), None);
    }
    assert_eq!(
        bin.lookup(init.address),
        bin.functions.iter().position(|f| f.key.name == "_init")
    );

    let out = sediment_ok(
        d,
        &["record", "-o", "plt.sprof", "--", "./plt", "100000000"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("were in PLT stubs"), "{err}");
    let p = read_profile(&d.join("plt.sprof"));
    let init = p
        .find(&FuncKey::global("_init"))
        .map_or(0, |i| p.functions[i as usize].self_weight);
    assert_eq!(init, 0, "{}", p.to_text());
}
