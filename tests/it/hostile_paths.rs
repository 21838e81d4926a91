//! Paths that a stranger's profile names: `sediment import` opens only regular files there. A
//! device (`/dev/zero`, endless) or a FIFO (whose open waits for a writer forever) is treated
//! like a missing binary, and an unreadable one is an error naming the binary and the profile.

use crate::common::sediment_bin;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A callgrind profile whose one object is `object`, and whose command is `cmd`.
fn callgrind_naming(object: &str, cmd: &str) -> String {
    format!(
        "# callgrind format\nversion: 1\ncmd: {cmd}\npositions: line\nevents: Ir\n\n\
         ob={object}\nfl=a.c\nfn=main\n0 5\n"
    )
}

/// Runs `sediment args` in `dir`, killing it (and failing) if it takes over 20 s.
fn run_bounded(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(sediment_bin())
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sediment");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("sediment {args:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

// Audit find: `ob=/dev/zero` read 1 GiB, and `ob=<a FIFO>` hung forever.
#[test]
fn regress_callgrind_object_that_is_a_device_or_fifo_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.display().to_string();
    for object in ["/dev/zero", fifo.as_str()] {
        std::fs::write(dir.path().join("p.cg"), callgrind_naming(object, object)).unwrap();
        let out = run_bounded(
            dir.path(),
            &["import", "--format", "callgrind", "-o", "p.sprof", "p.cg"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!(
                "1 objects could not be read to attribute their symbols (first: {object})"
            )),
            "{err}"
        );
    }
}

// Audit find: a perf-script frame in `(/dev/zero)` read 1 GiB to bind names.
#[test]
fn regress_perf_script_dso_that_is_a_device_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let script = "a.out 123 [000] 1.000001: 1 cpu-clock:\n\
                  \t    1130 main+0x10 (/dev/zero)\n\
                  \t    1080 start+0x4 (/dev/zero)\n\n";
    std::fs::write(dir.path().join("z.ps"), script).unwrap();
    let out = run_bounded(
        dir.path(),
        &["import", "--format", "perf-script", "-o", "z.sprof", "z.ps"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("/dev/zero: not found (or not a regular file); function names kept"),
        "{err}"
    );
}

// A named binary that cannot be read (here: over the input size limit, as a sparse file) is a
// one-line error naming the binary and the profile; a device given as the input itself is
// refused at once instead of being read to the limit.
#[test]
fn unreadable_named_binary_and_device_input_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((1 << 30) + 1)
        .unwrap();
    let big = big.display().to_string();
    std::fs::write(dir.path().join("b.cg"), callgrind_naming(&big, &big)).unwrap();
    let out = run_bounded(
        dir.path(),
        &["import", "--format", "callgrind", "-o", "b.sprof", "b.cg"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{big}: file is 1073741825 bytes")),
        "{err}"
    );
    assert!(err.contains("(needed for b.cg)"), "{err}");
    assert!(!dir.path().join("b.sprof").exists());

    let out = run_bounded(
        dir.path(),
        &[
            "import",
            "--format",
            "callgrind",
            "-o",
            "d.sprof",
            "/dev/zero",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sediment: /dev/zero: not a regular file (a directory or a device)\n"
    );
    assert!(!out.status.success());
}
