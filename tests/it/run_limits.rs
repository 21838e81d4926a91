//! Limits of one run (issue 34): an import that writes thousands of profiles holds no
//! descriptor per file, the paths a stranger's profile names are read once per file, and the
//! bytes one run reads are bounded.

use crate::common::{sediment_bin, sediment_ok};
use std::path::Path;
use std::process::{Command, Output};

/// `perf script` text with one sample in each of `dsos` (a frame `f+0x1 (DSO)` each).
fn perf_script_naming(dsos: &[String]) -> String {
    let mut s = String::new();
    for (i, dso) in dsos.iter().enumerate() {
        s.push_str(&format!(
            "a.out 123 [000] {}.000001: 1 cpu-clock:\n\t    1130 f{i}+0x10 ({dso})\n\n",
            i + 1
        ));
    }
    s
}

/// Runs `sediment args` in `dir` under a shell that first sets `ulimit -n LIMIT`.
fn sediment_with_fd_limit(dir: &Path, limit: u32, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(sediment_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run sh")
}

// Regression (issue 34): an import writing more profiles than the process may open files
// failed with EMFILE, because every temporary file stayed open until the renames. 300
// profiles under `ulimit -n 64`.
#[test]
fn regress_import_of_many_profiles_holds_no_descriptor_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let dsos: Vec<String> = (0..300)
        .map(|i| format!("/nonexistent/lib{i:03}.so"))
        .collect();
    std::fs::write(d.join("many.ps"), perf_script_naming(&dsos)).unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    let out = sediment_with_fd_limit(
        d,
        64,
        &[
            "import",
            "--format",
            "perf-script",
            "-o",
            "out/p.sprof",
            "many.ps",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", err.lines().last().unwrap_or(""));
    let written = std::fs::read_dir(d.join("out")).unwrap().count();
    assert_eq!(written, 300);
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A directory holding `lib.so` (a copy of an ELF fixture with a symbol table), the symbolic
/// link `link.so` to it, the directory `sub`, and `out/`; and the spellings of `lib.so` a
/// stranger's profile may use, in `d`: `./lib.so`, `././lib.so`, ... (`n` of those),
/// `sub/../lib.so`, `/lib.so` (a doubled `/`), `link.so` and `lib.so`. Returns the spellings and the size of lib.so.
fn spellings(d: &Path, n: usize) -> (Vec<String>, u64) {
    let lib = d.join("lib.so");
    std::fs::copy(crate::common::fixture("gprof/prog"), &lib).unwrap();
    std::os::unix::fs::symlink("lib.so", d.join("link.so")).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    let d = d.display();
    let mut s: Vec<String> = (1..=n)
        .map(|k| format!("{d}/{}lib.so", "./".repeat(k)))
        .collect();
    s.push(format!("{d}/sub/../lib.so"));
    s.push(format!("{d}//lib.so"));
    s.push(format!("{d}/link.so"));
    s.push(format!("{d}/lib.so"));
    (s, std::fs::metadata(&lib).unwrap().len())
}

// Regression (issue 34): a callgrind file naming one object 60 ways read it 60 times (123 MB
// each, 31 s of CPU) and wrote 60 profiles. Now every spelling of one file is one object, read
// once: the run is held to less than twice the bytes of the input and the object, and writes
// one profile.
#[test]
fn regress_callgrind_object_spelled_many_ways_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (names_of_lib, lib_len) = spellings(d, 56);
    assert_eq!(names_of_lib.len(), 60);
    let mut text = "# callgrind format\nversion: 1\ncmd: lib.so\npositions: line\n\
                    events: Ir\n\n"
        .to_string();
    for (i, ob) in names_of_lib.iter().enumerate() {
        text.push_str(&format!("ob={ob}\nfl=prog.c\nfn=main\n{} 5\n", i + 1));
    }
    std::fs::write(d.join("p.cg"), &text).unwrap();
    // Every spelling's cost is in the one profile: 60 cost lines of 5.
    imports_to_one_profile(d, "callgrind", "p.cg", text.len() as u64 + 2 * lib_len, 300);
}

// Regression (issue 34): a 2 KB perf-script file with 20 spellings of one dso took 20 s and
// wrote 21 profiles. Now: one profile, the binary read once.
#[test]
fn regress_perf_script_dso_spelled_many_ways_is_one_profile() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (names_of_lib, lib_len) = spellings(d, 16);
    assert_eq!(names_of_lib.len(), 20);
    let text: String = names_of_lib
        .iter()
        .enumerate()
        .map(|(i, dso)| {
            format!(
                "prog 123 [000] {}.000001: 1 cpu-clock:\n\t    1130 main+0x10 ({dso})\n\n",
                i + 1
            )
        })
        .collect();
    std::fs::write(d.join("p.ps"), &text).unwrap();
    imports_to_one_profile(
        d,
        "perf-script",
        "p.ps",
        text.len() as u64 + 2 * lib_len,
        20,
    );
}

/// Imports `input` (in `format`) in `d` under a read limit of `limit` bytes: it succeeds and
/// writes exactly one profile, whose `meta total` is `total`.
fn imports_to_one_profile(d: &Path, format: &str, input: &str, limit: u64, total: u64) {
    let limit = limit.to_string();
    let out = sediment_ok(
        d,
        &[
            "import",
            "--format",
            format,
            "--max-input-bytes",
            &limit,
            "-o",
            "out/p.sprof",
            input,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(names(&d.join("out")), ["p.sprof"], "{err}");
    let p = std::fs::read_to_string(d.join("out/p.sprof")).unwrap();
    let want = format!("meta total {total}");
    assert!(p.lines().any(|l| l == want), "{p}");
}

// Regression (issue 34): `/proc/self/mem` named as an object is a "regular" file whose every
// read fails; it made the import fail. Files of kernel pseudo file systems are now treated
// like a missing binary.
#[test]
fn regress_proc_file_named_as_object_is_treated_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for object in [
        "/proc/self/mem",
        "/proc/self/environ",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        if std::fs::metadata(object).is_err() {
            continue;
        }
        let text = format!(
            "# callgrind format\nversion: 1\ncmd: {object}\npositions: line\nevents: Ir\n\n\
             ob={object}\nfl=a.c\nfn=main\n0 5\n"
        );
        std::fs::write(d.join("p.cg"), text).unwrap();
        let out = sediment_ok(
            d,
            &["import", "--format", "callgrind", "-o", "p.sprof", "p.cg"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "1 objects could not be read to attribute their symbols (first: {object})"
            )),
            "{err}"
        );
    }
}

// Issue 34: the bytes one import reads are bounded for the whole run, not only per file:
// three inputs each well under every per-file limit, together over `--max-input-bytes` (or
// `SEDIMENT_MAX_INPUT_BYTES`), are refused in one line naming the input that passes it and
// the limit, and nothing is written.
#[test]
fn inputs_together_over_the_run_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let part = |i: usize| {
        let mut t = format!(
            "# callgrind format\nversion: 1\ncmd: /bin/x\npositions: line\nevents: Ir\n\n\
             ob=/nonexistent/x\nfl=a.c\nfn=f{i}\n"
        );
        while t.len() < 1000 {
            t.push_str("1 1\n");
        }
        t
    };
    let mut total = 0;
    for i in 0..3 {
        let t = part(i);
        total += t.len();
        std::fs::write(d.join(format!("c{i}.out")), t).unwrap();
    }
    let limit = (total - 10).to_string();
    let args = [
        "import",
        "--format",
        "callgrind",
        "-o",
        "p.sprof",
        "c0.out",
        "c1.out",
        "c2.out",
    ];
    let needles = [
        "c2.out: reading it would take this run past its",
        &format!("{limit}-byte input limit"),
    ];
    limit_holds(
        d,
        &args,
        ("--max-input-bytes", "SEDIMENT_MAX_INPUT_BYTES"),
        &limit,
        &needles,
    );
}

/// `args` (writing `p.sprof` in `d`) fails in one line holding `needles` with `FLAG LIMIT`,
/// fails the same with the environment variable `ENV=LIMIT`, writes nothing either way, and
/// succeeds without both (the default limit).
fn limit_holds(d: &Path, args: &[&str], (flag, env): (&str, &str), limit: &str, needles: &[&str]) {
    let with_flag: Vec<&str> = args.iter().copied().chain([flag, limit]).collect();
    crate::common::fails_one_line(d, &with_flag, needles);
    assert!(!d.join("p.sprof").exists());
    let run = |value: Option<&str>| {
        let mut cmd = Command::new(sediment_bin());
        cmd.args(args).current_dir(d).env_remove(env);
        if let Some(v) = value {
            cmd.env(env, v);
        }
        cmd.output().unwrap()
    };
    let out = run(Some(limit));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{env}={limit}: {err}");
    assert!(needles.iter().all(|n| err.contains(n)), "{err}");
    assert!(!d.join("p.sprof").exists());
    let out = run(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(d.join("p.sprof").exists());
}

// Issue 34: memory is bounded for the whole run, not per input file. A callgrind file of many
// distinct functions expands in memory well past its size; with a memory limit a little above
// the file's own size the import stops with one line naming the input and the limit, writes
// nothing, and the same limit from the environment does the same; without a limit (the
// default: three quarters of the machine's memory) it is imported.
#[test]
fn import_past_the_memory_limit_is_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = String::from(
        "# callgrind format\nversion: 1\ncmd: /bin/x\npositions: line\nevents: Ir\n\nob=/nonexistent/x\nfl=a.c\n",
    );
    let mut i = 0;
    while t.len() < 4_000_000 {
        t.push_str(&format!(
            "fn=function_with_a_long_name_{i:08}\n1 {}\ncfn=callee_{i:08}\ncalls=1 1\n1 1\n",
            i % 97 + 1
        ));
        i += 1;
    }
    std::fs::write(d.join("big.out"), &t).unwrap();
    let limit = (t.len() + t.len() / 2).to_string();
    let args = [
        "import",
        "--format",
        "callgrind",
        "-o",
        "p.sprof",
        "big.out",
    ];
    let needles = [
        "big.out: importing it takes this run past its memory limit of",
        limit.as_str(),
    ];
    limit_holds(
        d,
        &args,
        ("--max-memory", "SEDIMENT_MAX_MEMORY"),
        &limit,
        &needles,
    );
}
