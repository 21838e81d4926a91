//! Concurrency and kills (issue 34): parallel `record --prof-dir` runs into one directory lose
//! no recording, a killed `merge` leaves no temporary file, and a killed `record` leaves no
//! profiler or workload running.

use crate::common::{descendants, sediment_bin};
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

/// Names in `dir` other than `keep`: what a killed run left behind.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

// `merge` killed by SIGTERM (or SIGINT) while it writes its output leaves no temporary file
// beside it. The kill is sent as soon as the temporary file appears, so it lands mid-write
// (the output is tens of megabytes); each signal is tried several times.
#[test]
fn killed_merge_leaves_no_temporary_file() {
    use sediment_profile::{FuncKey, Meta, ProfileBuilder};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut b = ProfileBuilder::new(Meta {
        binary: "/bin/big".to_string(),
        ..Meta::default()
    });
    let keys: Vec<FuncKey> = (0..100_000)
        .map(|i| FuncKey::global(format!("function_with_a_long_name_{i:08}")))
        .collect();
    for (i, k) in keys.iter().enumerate() {
        b.add_self(k, i as u64 + 1);
        b.add_call(k, &keys[(i * 7 + 1) % keys.len()], 3);
        b.add_call(k, &keys[(i * 13 + 5) % keys.len()], 2);
    }
    std::fs::write(d.join("in.sprof"), b.build().to_text()).unwrap();
    let mut caught = 0;
    for (round, sig) in [libc::SIGTERM, libc::SIGINT]
        .repeat(3)
        .into_iter()
        .enumerate()
    {
        let out = d.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let mut child = Command::new(sediment_bin())
            .current_dir(d)
            .args(["merge", "-o", "out/m.sprof", "in.sprof", "in.sprof"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the temporary file (or the end), then kill.
        let start = Instant::now();
        let mut killed = false;
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(60) {
            if !leftovers(&out, &["m.sprof"]).is_empty() {
                // SAFETY: kill(2) of our own child, not yet reaped.
                unsafe { libc::kill(child.id() as libc::pid_t, sig) };
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = child.wait().unwrap();
        if killed && !status.success() {
            caught += 1;
            use std::os::unix::process::ExitStatusExt as _;
            assert_eq!(status.signal(), Some(sig), "round {round}: {status}");
        }
        assert_eq!(
            leftovers(&out, &["m.sprof"]),
            Vec::<String>::new(),
            "round {round}"
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
    assert!(caught > 0, "no kill landed while the output was written");
}

/// Sends SIGTERM to `child` (a sediment run), reaps it, and waits up to 8 s for `procs` (its
/// descendants seen before) to end; returns its status and, for each still alive, its
/// `/proc/PID/<what>` (`comm` or `cmdline`).
fn terminate(
    child: &mut std::process::Child,
    procs: &[u32],
    what: &str,
) -> (std::process::ExitStatus, Vec<String>) {
    // SAFETY: kill(2) of our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let start = Instant::now();
    while procs.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = procs
        .iter()
        .filter(|&&p| alive(p))
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/{what}")).unwrap_or_default())
        .collect();
    (status, left)
}

/// True while `pid` runs (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
    })
}

// `record -- sleep 30` killed by SIGTERM: perf and the workload end within seconds, and the
// recording directory is removed.
#[test]
fn killed_record_leaves_no_profiler_or_workload() {
    require!("perf");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("tmp")).unwrap();
    let mut child = Command::new(sediment_bin())
        .current_dir(d)
        .env("TMPDIR", d.join("tmp"))
        .args(["record", "-o", "out.sprof", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the workload runs under perf.
    let start = Instant::now();
    let procs = loop {
        let procs = descendants(child.id());
        let has_sleep = procs.iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        if has_sleep {
            break procs;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "sleep never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (status, left) = terminate(&mut child, &procs, "comm");
    assert!(left.is_empty(), "still running after {status}: {left:?}");
    assert_eq!(leftovers(&d.join("tmp"), &[]), Vec::<String>::new());
    assert!(!d.join("out.sprof").exists());
}

// Regression (issue 34): `record --via callgrind` killed by SIGTERM left the workload's
// children running (a shell's background job and its foreground command here), under
// valgrind when it follows children (`--prof-dir`: `--trace-children=yes`) or natively. Now
// the whole tree ends, and nothing is written.
#[test]
fn regress_killed_callgrind_record_leaves_no_grandchild() {
    require!("valgrind");
    killed_callgrind_record(&["-o", "out.sprof"]);
    killed_callgrind_record(&["--prof-dir", "profs"]);
}

/// `record --via callgrind OUTPUT_ARGS -- sh -c ...` killed once its grandchildren run.
fn killed_callgrind_record(output: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("tmp")).unwrap();
    let mut child = Command::new(sediment_bin())
        .current_dir(d)
        .env("TMPDIR", d.join("tmp"))
        .args(["record", "--via", "callgrind"])
        .args(output)
        .arg("--")
        .args(["/bin/sh", "-c", "sleep 30 & sleep 31; wait"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until both sleeps run (each under its own valgrind).
    let start = Instant::now();
    let procs = loop {
        let procs = descendants(child.id());
        let sleeps = procs
            .iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.contains("sleep\u{0}3"))
            })
            .count();
        if sleeps >= 2 {
            break procs;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sleeps never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let (status, left) = terminate(&mut child, &procs, "cmdline");
    for &p in procs.iter().filter(|&&p| alive(p)) {
        // Whatever is left would outlive the test: end it.
        // SAFETY: kill(2) of a process this test saw descend from its child.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "still running after {status}: {left:?}");
    assert_eq!(leftovers(&d.join("tmp"), &[]), Vec::<String>::new());
    assert_eq!(leftovers(d, &["tmp"]), Vec::<String>::new());
}
