//! `sedtrace` against lackey on one program: the same run traced both ways gives the same
//! fetch sequence (consecutive instructions merged into ranges, in execution order), the same
//! instruction count, and the same simulator metrics. Needs gcc and valgrind, so it follows
//! the test tiers of `tests/it/common.rs`: skipped with a printed reason in the quick tier
//! (`SEDIMENT_TEST_TIER=quick`); in the full tier a missing tool fails the test unless
//! `SEDIMENT_ALLOW_MISSING_TOOLS=1` is set.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sediment_sim::bintrace::{exec_hull, BinTraceReader, Record};
use sediment_sim::{Capture, SetAssocLru};
use sediment_valgrind::tracer::Tool;

/// Calls, a loop with a data-dependent branch, libc string functions (`rep`-prefixed and
/// vectorised code in the loader and libc) and output; with the argument `exec`, an `execv`
/// at the end (valgrind runs the new program natively, both traces stop there).
const PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) static unsigned step(unsigned x) { return x & 1 ? 3 * x + 1 : x / 2; }
__attribute__((noinline)) static unsigned collatz(unsigned x) {
    unsigned n = 0;
    while (x != 1) { x = step(x); n++; }
    return n;
}
int main(int argc, char **argv) {
    char buf[256];
    unsigned total = 0;
    for (unsigned i = 1; i < 3000; i++) total += collatz(i);
    memset(buf, 'a', sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    printf("%u %zu %s\n", total, strlen(buf), argc > 1 ? argv[1] : "");
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        char *args[] = {"true", 0};
        execv("/bin/true", args);
    }
    return 0;
}
"#;

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Full tier: whether every tool of `tools` runs; a missing one fails the test unless
/// `SEDIMENT_ALLOW_MISSING_TOOLS` is set (then a printed skip), as in `tests/it/common.rs`.
fn require(tools: &[&str]) -> bool {
    match tools.iter().find(|t| !have(t)) {
        None => true,
        Some(t) if std::env::var_os("SEDIMENT_ALLOW_MISSING_TOOLS").is_some() => {
            let why =
                format!("skipped: sedtrace_gives_lackeys_fetches_and_metrics: {t} not found\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), why.as_bytes());
            false
        }
        Some(t) => panic!(
            "{t} is not installed; run the README's setup (or set SEDIMENT_ALLOW_MISSING_TOOLS=1)"
        ),
    }
}

fn arrays() -> Vec<SetAssocLru> {
    [(64, 512, 8), (64, 64, 2), (4096, 64, 8), (4096, 16, 16)]
        .iter()
        .map(|&(b, e, w)| SetAssocLru::new(b, e, w).unwrap())
        .collect()
}

/// Merges consecutive instructions (next starts where the previous ended) into ranges.
#[derive(Default)]
struct Fetches {
    ranges: Vec<(u64, u64)>,
    instructions: u64,
}

impl Fetches {
    fn push(&mut self, start: u64, end: u64, count: u64) {
        self.instructions += count;
        match self.ranges.last_mut() {
            Some((_, e)) if *e == start => *e = end,
            _ => self.ranges.push((start, end)),
        }
    }
}

/// Runs `valgrind ARGS binary` through the same `sh` wrapper Sediment uses (descriptor 3 is
/// the pipe) and hands the pipe to `read`.
fn traced<T>(
    valgrind: &OsStr,
    args: &[OsString],
    binary: &Path,
    program_args: &[&str],
    read: impl FnOnce(&mut dyn Read) -> T,
) -> T {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$@" 3>&1 1>/dev/null 2>/dev/null"#)
        .arg("sh")
        .arg(valgrind)
        .args(args)
        .args(["-q", "--vgdb=no"])
        .arg(binary)
        .args(program_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdout.take().unwrap();
    let out = read(&mut pipe);
    drop(pipe);
    assert!(child.wait().unwrap().success());
    out
}

#[test]
fn sedtrace_gives_lackeys_fetches_and_metrics() {
    // The quick tier (`SEDIMENT_TEST_TIER=quick`) runs no external tool.
    if std::env::var_os("SEDIMENT_TEST_TIER").is_some_and(|t| t == "quick") {
        // Written to the stream itself, past the harness's capture, so that it shows.
        let why = "skipped: sedtrace_gives_lackeys_fetches_and_metrics: needs gcc, valgrind (full tier)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), why.as_bytes());
        return;
    }
    if !require(&["gcc", "valgrind"]) {
        return;
    }
    let valgrind = OsString::from("valgrind");
    let tool = Tool::get(&valgrind).expect("building sedtrace");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin: PathBuf = dir.path().join("p");
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let bin = std::fs::canonicalize(&bin).unwrap();
    compare(&valgrind, &tool, &bin, &[]);
    compare(&valgrind, &tool, &bin, &["exec"]);
}

/// Traces `bin ARGS` with both tools and asserts the same fetches and metrics.
fn compare(valgrind: &OsStr, tool: &Tool, bin: &Path, args: &[&str]) {
    // Sediment's tool: the fetch ranges, the text range (the executable mapping of `p`, from
    // the tool's mapping records), and a Capture fed by the decoder.
    let stream = traced(valgrind, &tool.args(3), bin, args, |pipe| {
        let mut v = Vec::new();
        pipe.read_to_end(&mut v).unwrap();
        v
    });
    let mut r = BinTraceReader::new(stream.as_slice()).unwrap();
    let mut ours = Fetches::default();
    let mut maps = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Run { start, len, count } => ours.push(start, start + len, count),
            Record::Map(m) => maps.push(m),
            Record::End { .. } | Record::Exec { .. } => {}
        }
    }
    let m = maps
        .iter()
        .find(|m| m.path == *bin)
        .expect("a mapping record for p");
    let hull = exec_hull(&maps, bin, &[(m.offset, m.end - m.start)]).unwrap();
    assert_eq!(hull, (m.start, m.end));
    let mut r = BinTraceReader::new(stream.as_slice()).unwrap();
    let first = r.next_record().unwrap();
    assert!(matches!(first, Some(Record::Map(_))), "mappings come first");
    let mut ours_capture = Capture::new(arrays());
    ours_capture.set_text(hull.0, hull.1).unwrap();
    r.replay(&mut ours_capture, first).unwrap();
    ours_capture.finish();

    // Lackey: the same, from its text.
    let lackey_args: Vec<OsString> = ["--tool=lackey", "--trace-mem=yes", "--log-fd=3"]
        .iter()
        .map(OsString::from)
        .collect();
    let (theirs, their_capture) = traced(valgrind, &lackey_args, bin, args, |pipe| {
        let mut text = Vec::new();
        pipe.read_to_end(&mut text).unwrap();
        let mut f = Fetches::default();
        for line in BufReader::new(text.as_slice()).lines() {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix("I  ") else {
                continue;
            };
            let (a, n) = rest.split_once(',').unwrap();
            let a = u64::from_str_radix(a, 16).unwrap();
            let n: u64 = n.parse().unwrap();
            f.push(a, a + n, 1);
        }
        let mut c = Capture::new(arrays());
        c.set_text(hull.0, hull.1).unwrap();
        c.replay(text.as_slice()).unwrap();
        c.finish();
        (f, c)
    });

    assert!(theirs.instructions > 100_000, "{}", theirs.instructions);
    assert_eq!(ours.instructions, theirs.instructions);
    assert_eq!(ours.ranges.len(), theirs.ranges.len());
    if let Some(i) = (0..ours.ranges.len()).find(|&i| ours.ranges[i] != theirs.ranges[i]) {
        panic!(
            "fetch {i} differs: sedtrace {:x?}, lackey {:x?}",
            ours.ranges[i], theirs.ranges[i]
        );
    }
    let (a, b) = (&ours_capture, &their_capture);
    assert_eq!(a.instructions(), b.instructions());
    assert!(a.text_instructions() > 0);
    assert_eq!(a.text_instructions(), b.text_instructions());
    assert_eq!(a.fetches(), b.fetches());
    let stats = |c: &Capture| c.arrays().iter().map(|x| x.stats()).collect::<Vec<_>>();
    assert_eq!(stats(a), stats(b));
    assert_eq!(a.exec_profile().unwrap(), b.exec_profile().unwrap());
    assert_eq!(a.first_executed(), b.first_executed());
}
