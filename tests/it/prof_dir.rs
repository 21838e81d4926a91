//! `sediment record --prof-dir DIR` (and `PROF_DIR`): one recording of a shell script that runs
//! two gcc-built executables sharing a shared library gives one profile per binary, named
//! `DIR/<basename>.sprof`, merged into on the next recording.

use crate::common::{have_tool, sediment_bin};
use sediment_profile::Profile;
use std::path::Path;
use std::process::Command;

const LIB: &str = r#"
static __attribute__((noinline)) int lib_helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) int shared_work(int x) { return lib_helper(x) ^ lib_helper(x + 1); }
"#;

/// `NAME_work` is called N times (argv[1]), and calls `shared_work` once per call. `mul` makes
/// the code of two programs differ (GNU ld's build-id does not hash symbol names).
fn program(name: &str, mul: u32) -> String {
    format!(
        r#"
#include <stdlib.h>
int shared_work(int);
volatile int sink;
__attribute__((noinline)) int {name}_work(int i) {{ return shared_work(i) + i * {mul}; }}
int main(int argc, char **argv) {{
    long n = argc > 1 ? atol(argv[1]) : 1;
    for (long i = 0; i < n; i++) sink += {name}_work((int)i);
    return 0;
}}
"#
    )
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `libshared.so`, `a` and `b` (and `sub/a`, another program named `a`) in `d`.
fn build(d: &Path) {
    std::fs::write(d.join("lib.c"), LIB).unwrap();
    std::fs::write(d.join("a.c"), program("a", 3)).unwrap();
    std::fs::write(d.join("b.c"), program("b", 5)).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    run(Command::new("gcc")
        .current_dir(d)
        .args(["-O2", "-fPIC", "-shared", "-fno-omit-frame-pointer"])
        .args(["-o", "libshared.so", "lib.c"]));
    for (src, out) in [("a.c", "a"), ("b.c", "b"), ("b.c", "sub/a")] {
        run(Command::new("gcc")
            .current_dir(d)
            .args(["-O2", "-fno-omit-frame-pointer", "-o", out, src])
            .args([
                "-L.",
                "-lshared",
                "-Wl,-rpath,$ORIGIN",
                "-Wl,-rpath,$ORIGIN/..",
            ]));
    }
}

fn record(d: &Path, args: &[&str], env_dir: Option<&str>) -> String {
    let mut cmd = Command::new(sediment_bin());
    cmd.current_dir(d).arg("record").args(args);
    cmd.env_remove("PROF_DIR").env_remove("SEDIMENT_PROF_DIR");
    if let Some(dir) = env_dir {
        cmd.env("PROF_DIR", dir);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn load(path: &Path) -> Profile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Profile::from_text(&text).unwrap()
}

fn calls(p: &Profile, caller: &str, callee: &str) -> u64 {
    p.named_edges()
        .into_iter()
        .find(|(a, b, _)| a == caller && b == callee)
        .map_or(0, |e| e.2)
}

// callgrind with --trace-children: exact call counts land in each binary's own file; the
// library's file sums both programs; a second recording (through PROF_DIR) merges, each
// recording counting once.
#[test]
fn prof_dir_callgrind_one_profile_per_binary() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    std::fs::write(d.join("run.sh"), "./a 100\n./b 300\n").unwrap();
    let args = [
        "--via",
        "callgrind",
        "--prof-dir",
        "profs",
        "--",
        "sh",
        "run.sh",
    ];
    record(d, &args, None);
    let a = load(&d.join("profs/a.sprof"));
    let b = load(&d.join("profs/b.sprof"));
    let lib = load(&d.join("profs/libshared.so.sprof"));
    assert_eq!(calls(&a, "main", "a_work"), 100);
    assert_eq!(calls(&b, "main", "b_work"), 300);
    // Each shared_work calls lib_helper twice: (100 + 300) * 2 calls from both processes.
    assert_eq!(calls(&lib, "shared_work", "lib_helper (lib.c)"), 800);
    assert_eq!(lib.meta.extra["recordings"], "1");
    // The shell was touched too, and libc: every binary gets its file.
    assert!(d.join("profs/libc.so.6.sprof").exists());
    assert!(a.functions.iter().all(|f| f.key.name != "b_work"));

    // Again, through the environment variable: merged, two recordings, same proportions.
    let again = ["--via", "callgrind", "--", "sh", "run.sh"];
    record(d, &again, Some("profs"));
    let lib2 = load(&d.join("profs/libshared.so.sprof"));
    assert_eq!(lib2.meta.extra["recordings"], "2");
    assert_eq!(lib2.meta.source, "merge");
    let (s1, s2) = (
        lib.functions.iter().map(|f| f.self_weight).sum::<u64>() as f64,
        lib2.functions.iter().map(|f| f.self_weight).sum::<u64>() as f64,
    );
    let share =
        |p: &Profile, total: f64| calls(p, "shared_work", "lib_helper (lib.c)") as f64 / total;
    assert!((share(&lib, s1) - share(&lib2, s2)).abs() < 1e-6);

    // Two different programs both named `a` in one recording: build-ids keep them apart.
    std::fs::write(d.join("two.sh"), "./a 10\n./sub/a 20\n").unwrap();
    let two = [
        "--via",
        "callgrind",
        "--prof-dir",
        "two",
        "--",
        "sh",
        "two.sh",
    ];
    let log = record(d, &two, None);
    assert!(!d.join("two/a.sprof").exists(), "{log}");
    let mut named: Vec<(u64, u64)> = std::fs::read_dir(d.join("two"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("a.") && n != "a.sprof")
        .map(|n| {
            let p = load(&d.join("two").join(&n));
            let id = p.meta.build_id.clone().unwrap();
            assert_eq!(n, format!("a.{id}.sprof"));
            (calls(&p, "main", "a_work"), calls(&p, "main", "b_work"))
        })
        .collect();
    named.sort();
    assert_eq!(named, vec![(0, 20), (10, 0)]);
}

// perf follows the children by itself: sampled profiles of both programs and the library.
#[test]
fn prof_dir_perf_one_profile_per_binary() {
    if !have_tool("gcc") || !have_tool("perf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    std::fs::write(d.join("run.sh"), "./a 30000000\n./b 30000000\n").unwrap();
    record(d, &["--prof-dir", "profs", "--", "sh", "run.sh"], None);
    for name in ["a", "b", "libshared.so"] {
        let p = load(&d.join(format!("profs/{name}.sprof")));
        assert_eq!(p.meta.source, "perf");
        assert!(p.self_total() > 0, "{name}: no samples");
    }
    let lib = load(&d.join("profs/libshared.so.sprof"));
    assert!(lib
        .functions
        .iter()
        .any(|f| f.key.name == "shared_work" && f.self_weight > 0));
}

// Neither -o, --prof-dir nor PROF_DIR: a one-line error, nothing run.
#[test]
fn record_without_output_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(sediment_bin())
        .current_dir(dir.path())
        .env_remove("PROF_DIR")
        .env_remove("SEDIMENT_PROF_DIR")
        .args(["record", "--", "/bin/true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(
        stderr.trim_end(),
        "sediment: no output: give -o FILE or --prof-dir DIR (or set SEDIMENT_PROF_DIR)"
    );
}

// Regression: the profiles were written one by one, so one that could not be written (here a
// binary whose name is too long for `NAME.sprof`) failed the run with the profiles sorted
// before it already in DIR. Now they are written all or nothing: DIR is not even created.
#[test]
fn prof_dir_failure_leaves_dir_as_it_was() {
    if !have_tool("gcc") || !have_tool("valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.c"), "int main(void) { return 0; }\n").unwrap();
    run(Command::new("gcc")
        .current_dir(d)
        .args(["-O1", "-o", "a", "a.c"]));
    // 250 bytes: a valid file name, but not with `.sprof` after it.
    let long = "z".repeat(250);
    std::fs::copy(d.join("a"), d.join(&long)).unwrap();
    std::fs::write(d.join("run.sh"), format!("./a\n./{long}\n")).unwrap();
    let out = Command::new(sediment_bin())
        .current_dir(d)
        .env_remove("PROF_DIR")
        .env_remove("SEDIMENT_PROF_DIR")
        .args(["record", "--via", "callgrind", "--prof-dir", "profs"])
        .args(["--", "sh", "run.sh"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("{long}.sprof")), "{stderr}");
    assert!(!d.join("profs").exists(), "{stderr}");
}

// Regression (issue 33): a recorded command that failed was a warning, `record` exited 0 and
// wrote its profiles into DIR. Now it fails with one line and writes nothing, unless
// `--keep-partial` asks for what was recorded (then: exit 0, profiles written, a warning).
#[test]
fn record_of_failing_command_writes_nothing() {
    require!("gcc", "valgrind");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.c"), "int main(void) { return 3; }\n").unwrap();
    run(Command::new("gcc")
        .current_dir(d)
        .args(["-O1", "-o", "a", "a.c"]));
    let record = |extra: &[&str]| {
        Command::new(sediment_bin())
            .current_dir(d)
            .env_remove("PROF_DIR")
            .env_remove("SEDIMENT_PROF_DIR")
            .args(["record", "--via", "callgrind", "--prof-dir", "profs"])
            .args(extra)
            .args(["--", "./a"])
            .output()
            .unwrap()
    };
    let out = record(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("./a failed under valgrind"), "{stderr}");
    assert!(stderr.contains("--keep-partial"), "{stderr}");
    assert!(!d.join("profs").exists(), "{stderr}");

    let out = record(&["--keep-partial"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("valgrind exited with exit status: 3"),
        "{stderr}"
    );
    assert!(d.join("profs/a.sprof").exists(), "{stderr}");
}

/// The `*.sprof` files of `dir`, sorted.
fn sprofs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sprof"))
        .collect();
    names.sort();
    names
}

// Regression (issue 33): a whole-package recording wrote profiles of the system's binaries
// (the shell, libc, the loader) beside the package's own, each naming the recorder's absolute
// path. `--under DIR` keeps the binaries under a build tree (the rest counted in one line),
// `--keep-binaries` keeps a list, and the profiles name binaries by base name unless
// `--keep-paths`.
#[test]
fn record_prof_dir_under_a_build_tree_without_paths() {
    if !have_tool("gcc") || !have_tool("perf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build(d);
    // `c` spends its time in libc.
    std::fs::write(
        d.join("c.c"),
        "#include <stdio.h>\nint main(void) { char b[32]; unsigned s = 0;\n\
         for (long i = 0; i < 3000000; i++) { snprintf(b, sizeof b, \"%ld\", i); s += b[0]; }\n\
         return s == 1; }\n",
    )
    .unwrap();
    run(Command::new("gcc")
        .current_dir(d)
        .args(["-O1", "-o", "c", "c.c"]));
    std::fs::write(d.join("run.sh"), "./a 30000000\n./b 30000000\n./c\n").unwrap();
    let err = record(d, &["--prof-dir", "all", "--", "sh", "run.sh"], None);
    assert!(
        sprofs(&d.join("all")).contains(&"libc.so.6.sprof".to_string()),
        "{err}"
    );
    let err = record(
        d,
        &["--prof-dir", "pkg", "--under", ".", "--", "sh", "run.sh"],
        None,
    );
    // `c` is there when its own loop got samples too.
    let mut pkg = sprofs(&d.join("pkg"));
    pkg.retain(|n| n != "c.sprof");
    assert_eq!(pkg, ["a.sprof", "b.sprof", "libshared.so.sprof"], "{err}");
    assert!(
        err.contains("outside --under/--keep-binaries") && err.contains("not written (libc.so.6"),
        "{err}"
    );
    let here = d.display().to_string();
    for name in ["a", "b", "libshared.so"] {
        let text = std::fs::read_to_string(d.join(format!("pkg/{name}.sprof"))).unwrap();
        let p = Profile::from_text(&text).unwrap();
        assert_eq!(p.meta.binary, name);
        assert!(p.meta.build_id.is_some());
        assert!(!text.contains(&here), "{text}");
    }
    record(
        d,
        &[
            "--prof-dir",
            "list",
            "--keep-binaries",
            "b",
            "--",
            "sh",
            "run.sh",
        ],
        None,
    );
    assert_eq!(sprofs(&d.join("list")), ["b.sprof"]);
    record(
        d,
        &[
            "--prof-dir",
            "paths",
            "--under",
            d.to_str().unwrap(),
            "--keep-paths",
            "--",
            "sh",
            "run.sh",
        ],
        None,
    );
    let p = load(&d.join("paths/a.sprof"));
    assert!(
        p.meta.binary.starts_with('/') && p.meta.binary.ends_with("/a"),
        "{}",
        p.meta.binary
    );
}
