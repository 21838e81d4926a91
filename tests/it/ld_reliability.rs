//! `sediment ld` and `record --prof-dir` under hostile conditions (issue 34): a broken profile
//! fails the link on every route, a FIFO where a profile belongs never hangs, and the shim's
//! summary and temporary files tell the truth and stay private.

use crate::common::sediment_bin;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Functions without calls into libc, so that every linker links them alone (`-e main`).
const PROG: &str = "__attribute__((noinline)) int f(int x) { return x * 3; }\n\
                    __attribute__((noinline)) int g(int x) { return x + 1; }\n\
                    int main(void) { return f(2) + g(3); }\n";

/// Runs `cmd`, killing it (and failing) if it takes over 20 s.
fn run_bounded(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("{cmd:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `sediment ld --real REAL -- ARGS` in `dir`, with `SEDIMENT_PROF_DIR=prof`.
fn ld(dir: &Path, real: &str, args: &[&str]) -> Output {
    ld_with(dir, &[], real, args)
}

/// [`ld`] with the environment variables `env` set too.
fn ld_with(dir: &Path, env: &[(&str, &str)], real: &str, args: &[&str]) -> Output {
    run_bounded(
        Command::new(sediment_bin())
            .current_dir(dir)
            .env_remove("PROF_DIR")
            .env_remove("SEDIMENT_VERBOSE")
            .env("SEDIMENT_PROF_DIR", "prof")
            .envs(env.iter().copied())
            .args(["ld", "--real", real, "--"])
            .args(args),
    )
}

/// Compiles `PROG` in `dir` to `prog.o` (position-independent, one section per function) and
/// creates `dir/prof`.
fn project(dir: &Path) {
    std::fs::write(dir.join("prog.c"), PROG).unwrap();
    let out = Command::new("gcc")
        .current_dir(dir)
        .args(["-O1", "-fPIC", "-ffunction-sections", "-c", "prog.c"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::create_dir(dir.join("prof")).unwrap();
}

/// Asserts `out` failed with exactly one line of standard error, holding every needle.
fn failed_one_line(out: &Output, what: &str, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: succeeded: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    for n in needles {
        assert!(err.contains(n), "{what}: `{n}` not in {err}");
    }
}

// Regression (issue 34): a corrupt profile failed the link only when the link was going to be
// ordered; a relocatable link, a linker script, a response file, mold, or a shared library with
// a GNU ld that needs a full script skipped ordering first and linked unordered without a word.
// Now the profile is read and parsed before anything else is decided: each route fails with
// one line naming it, and nothing is linked.
#[test]
fn regress_a_corrupt_profile_fails_every_route_that_skips_ordering() {
    require!("gcc", "ld.lld", "ld", "mold");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    project(d);
    std::fs::write(d.join("script.ld"), "SECTIONS { .text : { *(.text*) } }\n").unwrap();
    std::fs::write(d.join("args.rsp"), "prog.o\n").unwrap();
    let routes: [(&str, &str, &[&str]); 5] = [
        ("-r", "ld.lld", &["-r", "-o", "alpha", "prog.o"]),
        (
            "-T",
            "ld.lld",
            &["-T", "script.ld", "-e", "main", "-o", "alpha", "prog.o"],
        ),
        (
            "@file",
            "ld.lld",
            &["-e", "main", "-o", "alpha", "@args.rsp"],
        ),
        ("mold", "mold", &["-e", "main", "-o", "alpha", "prog.o"]),
        (
            "GNU ld -shared",
            "ld",
            &["-shared", "-o", "alpha", "prog.o"],
        ),
    ];
    // Premise: with no profile at all, every route links.
    for (what, real, args) in routes {
        let out = ld(d, real, args);
        assert!(out.status.success(), "{what}: {out:?}");
        std::fs::remove_file(d.join("alpha")).unwrap();
    }
    let corrupt: [&[u8]; 2] = [b"sediment-profile 1\nfn 0 x\n", b"\xff\xfe not text\n"];
    for bytes in corrupt {
        std::fs::write(d.join("prof/alpha.sprof"), bytes).unwrap();
        for (what, real, args) in routes {
            let out = ld(d, real, args);
            failed_one_line(&out, what, &["sediment: ", "prof/alpha.sprof: "]);
            assert!(!d.join("alpha").exists(), "{what}: nothing linked");
        }
    }
}

// Regression (issue 34): a FIFO where a profile belongs hung `record --prof-dir` forever (the
// merge with the existing profile opened it and waited for a writer); `sediment ld` checked
// the path first and opened it afterwards, so a FIFO swapped in between hung it too. Now both
// open it once without blocking and check the opened file: one line naming it, at once.
#[test]
fn regress_a_fifo_where_the_profile_belongs_does_not_hang() {
    require!("gcc", "ld.lld", "valgrind");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    project(d);
    let fifo = d.join("prof/a.sprof");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = ld(d, "ld.lld", &["-e", "main", "-o", "a", "prog.o"]);
    failed_one_line(
        &out,
        "ld",
        &["prof/a.sprof: not a regular file where the profile of a should be"],
    );
    assert!(!d.join("a").exists(), "nothing linked");

    let out = Command::new("gcc")
        .current_dir(d)
        .args(["-O1", "-o", "a", "prog.c"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = run_bounded(
        Command::new(sediment_bin())
            .current_dir(d)
            .env_remove("PROF_DIR")
            .env_remove("SEDIMENT_PROF_DIR")
            .args([
                "record",
                "--via",
                "callgrind",
                "--prof-dir",
                "prof",
                // `./a` exits non-zero; what is tested is the FIFO, not that.
                "--keep-partial",
                "--",
                "./a",
            ]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("a.sprof")).collect();
    assert_eq!(
        ours,
        ["sediment: prof/a.sprof: not a regular file (a FIFO or a socket)"],
        "{err}"
    );
}

// Regression: a response file (`@FILE`) was read whole with no limit, its arguments held
// however many they came to, and a FIFO one was passed on to the real linker, which waited on
// it for ever. Now every link through the shim (with or without a profile) is held to the
// input budgets: a FIFO, a file over the run's read budget, and a file naming itself
// thousands of times (a few kilobytes expanding to gigabytes of arguments) each fail the link
// with one line naming the file, at once; nothing is linked.
#[test]
fn regress_hostile_response_files_fail_the_link_in_one_line() {
    require!("gcc", "ld");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    project(d);
    let fifo = d.join("fifo.rsp");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = ld(d, "ld", &["-e", "main", "-o", "a", "@fifo.rsp"]);
    failed_one_line(
        &out,
        "a FIFO",
        &[
            "fifo.rsp: a response file that is not a regular file",
            "nothing linked",
        ],
    );
    assert!(!d.join("a").exists(), "nothing linked");

    std::fs::write(d.join("objs.rsp"), "prog.o ".repeat(200)).unwrap();
    let out = ld_with(
        d,
        &[("SEDIMENT_MAX_INPUT_BYTES", "1000")],
        "ld",
        &["-e", "main", "-o", "a", "@objs.rsp"],
    );
    failed_one_line(
        &out,
        "over the read budget",
        &[
            "objs.rsp: reading it would take this run past its 1000-byte input limit",
            "nothing linked",
        ],
    );
    assert!(!d.join("a").exists(), "nothing linked");

    std::fs::write(d.join("l"), "@l ".repeat(30_000)).unwrap();
    let out = ld_with(
        d,
        &[("SEDIMENT_MAX_MEMORY", "50000000")],
        "ld",
        &["-e", "main", "-o", "a", "@l"],
    );
    failed_one_line(
        &out,
        "a file naming itself",
        &["sediment: l: expanding it takes this run past its memory limit of 50000000 bytes"],
    );
    assert!(!d.join("a").exists(), "nothing linked");

    // Premise: the same links with ordinary response files succeed.
    std::fs::write(d.join("ok.rsp"), "prog.o").unwrap();
    let out = ld(d, "ld", &["-e", "main", "-o", "a", "@ok.rsp"]);
    assert!(out.status.success(), "{out:?}");
}

/// A profile of `binary` where `main` calls `f` and `g`, all three hot.
fn profile_text(binary: &str) -> String {
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};
    let mut pb = ProfileBuilder::new(Meta {
        binary: binary.into(),
        source: "test".into(),
        ..Meta::default()
    });
    let k = FuncKey::global;
    pb.add_self(&k("f"), 1000);
    pb.add_self(&k("g"), 600);
    pb.add_self(&k("main"), 50);
    pb.add_call(&k("main"), &k("f"), 100);
    pb.add_call(&k("main"), &k("g"), 100);
    pb.build().to_text()
}

// Regression (issue 34): the summary said "ordered N of M profiled functions" with N the
// entries resolved, not those written: on the GNU ld route an object whose path holds a space
// cannot be named in a script, its entries are left out with a warning, and the line still
// counted them. Its "private temporary directory" was 0755 and the order file 0644. Now N is
// the number of entries written, the directory is 0700 and the file 0600.
#[test]
fn regress_ld_summary_counts_entries_written_and_its_files_are_private() {
    require!("gcc", "ld", "ld.lld");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("my dir")).unwrap();
    std::fs::create_dir(d.join("prof")).unwrap();
    std::fs::write(d.join("prof/alpha.sprof"), profile_text("alpha")).unwrap();
    // `f` in an object of a plain path; `g` and `main` in one whose path holds a space.
    std::fs::write(
        d.join("f.c"),
        "__attribute__((noinline)) int f(int x) { return x * 3; }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("my dir/m.c"),
        "int f(int);\n__attribute__((noinline)) int g(int x) { return x + 1; }\n\
         int main(void) { return f(2) + g(3); }\n",
    )
    .unwrap();
    for (src, obj) in [("f.c", "f.o"), ("my dir/m.c", "my dir/m.o")] {
        let out = Command::new("gcc")
            .current_dir(d)
            .args(["-O1", "-ffunction-sections", "-c", src, "-o", obj])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let out = ld(d, "ld", &["-e", "main", "-o", "alpha", "f.o", "my dir/m.o"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("sediment ld: alpha: ordered 1 of 3 profiled functions (c3, bfd, 1 warnings) from prof/alpha.sprof"),
        "{err}"
    );

    // The modes, seen by the real linker (lld) while the files exist.
    let spy = d.join("lld-spy");
    std::fs::write(
        &spy,
        "#!/bin/sh\nfor a; do case $a in --symbol-ordering-file=*) f=${a#*=};; esac; done\n\
         if [ -n \"$f\" ]; then stat -c %a \"$(dirname \"$f\")\" \"$f\" > modes; fi\n\
         exec ld.lld \"$@\"\n",
    )
    .unwrap();
    let made = Command::new("chmod").arg("755").arg(&spy).status();
    assert!(made.unwrap().success());
    let out = ld(
        d,
        "./lld-spy",
        &["-e", "main", "-o", "alpha", "f.o", "my dir/m.o"],
    );
    assert!(out.status.success(), "{out:?}");
    let modes = std::fs::read_to_string(d.join("modes")).unwrap();
    assert_eq!(modes, "700\n600\n");
}
