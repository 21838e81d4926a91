//! Concurrency and kills (issue 34): parallel `record --prof-dir` runs into one directory lose
//! no recording, a killed `merge` leaves no temporary file, and a killed `record` leaves no
//! profiler or workload running.

use crate::common::sediment_bin;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Compiles a tiny program `prog` in `d`.
fn build_prog(d: &Path) {
    std::fs::write(
        d.join("prog.c"),
        "__attribute__((noinline)) int f(int x) { return x * 3; }\n\
         int main(void) { return f(2) == 6 ? 0 : 1; }\n",
    )
    .unwrap();
    let out = Command::new("gcc")
        .current_dir(d)
        .args(["-O1", "-fno-omit-frame-pointer", "-o", "prog", "prog.c"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// Ten recordings at once into one directory: the read-merge-write of `prog.sprof` is done
// under a lock, so the file counts all ten.
#[test]
fn concurrent_prof_dir_records_lose_nothing() {
    require!("gcc", "valgrind");
    const N: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_prog(d);
    let children: Vec<_> = (0..N)
        .map(|_| {
            Command::new(sediment_bin())
                .current_dir(d)
                .args(["record", "--via", "callgrind", "--prof-dir", "profs"])
                .args(["--", "./prog"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(d.join("profs/prog.sprof")).unwrap();
    assert!(
        text.lines().any(|l| l == format!("meta recordings {N}")),
        "{}",
        text.lines()
            .filter(|l| l.starts_with("meta"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The lock leaves nothing behind in the directory: every file is a profile.
    for e in std::fs::read_dir(d.join("profs")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".sprof") && !name.starts_with('.'), "{name}");
    }
}
