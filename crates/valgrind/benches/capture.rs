//! Instructions per second of the simulator's capture: one program run under valgrind with its
//! instruction trace streamed through a pipe into a [`Capture`] with `sediment sim`'s six
//! arrays, once with lackey's text (`--tool=lackey --trace-mem=yes`, parsed by
//! [`Capture::replay`]) and once with Sediment's own tool (`sedtrace`, decoded by
//! [`BinTraceReader`]). `valgrind --tool=none` (no instrumentation, no trace) is the floor.
//!
//! The workload is a C program built here with `gcc -O1`: a loop over 64 small functions
//! called through a table, about 30 instructions per outer iteration, with a data-dependent
//! branch. `SEDIMENT_BENCH_ITERS` sets the outer iterations (default 1,000,000: about 30 M
//! instructions, a lackey run of half a minute). Times are wall-clock seconds of the
//! whole run (valgrind and the reader are two processes); "reader CPU" is the CPU time of the
//! thread decoding the trace and simulating the arrays, which bounds a capture once valgrind
//! is faster than it. The bench fails if the two captures count different instructions or
//! fetch ranges.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use sediment_sim::bintrace::BinTraceReader;
use sediment_sim::{Capture, SetAssocLru};
use sediment_valgrind::tracer::Tool;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#define F(n) __attribute__((noinline)) static unsigned f##n(unsigned x) { \
    return x & (1u << (n % 7)) ? x * 3 + n : (x >> 1) ^ n; }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)
F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27) F(28) F(29) F(30)
F(31) F(32) F(33) F(34) F(35) F(36) F(37) F(38) F(39) F(40) F(41) F(42) F(43) F(44) F(45)
F(46) F(47) F(48) F(49) F(50) F(51) F(52) F(53) F(54) F(55) F(56) F(57) F(58) F(59) F(60)
F(61) F(62) F(63)
static unsigned (*const table[64])(unsigned) = {
 f0,f1,f2,f3,f4,f5,f6,f7,f8,f9,f10,f11,f12,f13,f14,f15,f16,f17,f18,f19,f20,f21,f22,f23,
 f24,f25,f26,f27,f28,f29,f30,f31,f32,f33,f34,f35,f36,f37,f38,f39,f40,f41,f42,f43,f44,f45,
 f46,f47,f48,f49,f50,f51,f52,f53,f54,f55,f56,f57,f58,f59,f60,f61,f62,f63 };
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
    unsigned x = 12345;
    for (unsigned long i = 0; i < n; i++) {
        x = table[x & 63](x);
        x = table[(x >> 3) & 63](x + i);
        x = table[(x >> 5) & 63](x);
    }
    printf("%u\n", x);
    return 0;
}
"#;

/// `sediment sim`'s six arrays: two L1i and four iTLBs.
fn arrays() -> Vec<SetAssocLru> {
    [
        (64, 512, 8),
        (64, 256, 4),
        (4096, 64, 8),
        (4096, 128, 8),
        (4096, 64, 64),
        (4096, 128, 128),
    ]
    .iter()
    .map(|&(b, e, w)| SetAssocLru::new(b, e, w).expect("valid geometry"))
    .collect()
}

/// Nanoseconds this thread has spent on a CPU (`/proc/thread-self/schedstat`), 0 where that
/// file is missing.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split(' ').next()?.trim().parse().ok())
        .unwrap_or(0)
}

/// Runs `valgrind ARGS -q --vgdb=no BIN ITERS` with descriptor 3 on a pipe handed to `read`;
/// returns `read`'s result, the wall seconds of the whole run and the CPU seconds of `read`.
fn run<T>(
    args: &[OsString],
    bin: &Path,
    iters: &str,
    read: impl FnOnce(&mut dyn Read) -> T,
) -> (T, f64, f64) {
    let t0 = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$@" 3>&1 1>/dev/null"#)
        .arg("sh")
        .arg("valgrind")
        .args(args)
        .args(["-q", "--vgdb=no"])
        .arg(bin)
        .arg(iters)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh and valgrind");
    let mut pipe = child.stdout.take().expect("piped");
    let c0 = cpu_ns();
    let out = read(&mut pipe);
    let reader = cpu_ns().saturating_sub(c0) as f64 / 1e9;
    drop(pipe);
    assert!(child.wait().expect("valgrind ran").success());
    (out, t0.elapsed().as_secs_f64(), reader)
}

fn main() {
    let iters = std::env::var("SEDIMENT_BENCH_ITERS").unwrap_or_else(|_| "1000000".into());
    let tool = Tool::get(&OsString::from("valgrind")).expect("building sedtrace");
    let dir = tempfile::tempdir().expect("temporary directory");
    let src = dir.path().join("w.c");
    std::fs::write(&src, PROGRAM).expect("write the workload");
    let bin = dir.path().join("w");
    let ok = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(ok.success());

    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    let discard = |p: &mut dyn Read| std::io::copy(p, &mut std::io::sink()).expect("read the pipe");
    let (_, none, _) = run(&os(&["--tool=none"]), &bin, &iters, discard);
    let (bytes, alone, _) = run(&tool.args(3), &bin, &iters, discard);
    let (ours, ours_s, ours_cpu) = run(&tool.args(3), &bin, &iters, |p| {
        let mut c = Capture::new(arrays());
        let mut r = BinTraceReader::new(p).expect("sedtrace header");
        r.replay(&mut c, None).expect("sedtrace trace");
        c.finish();
        (c.instructions(), c.fetches())
    });
    let (theirs, theirs_s, theirs_cpu) = run(
        &os(&["--tool=lackey", "--trace-mem=yes", "--log-fd=3"]),
        &bin,
        &iters,
        |p| {
            let mut c = Capture::new(arrays());
            c.replay(std::io::BufReader::with_capacity(1 << 20, p))
                .expect("lackey trace");
            c.finish();
            (c.instructions(), c.fetches(), c.lines())
        },
    );
    let insns = theirs.0;
    println!(
        "workload: {iters} iterations, {insns} instructions, {} fetch ranges; \
         lackey {} lines, sedtrace {} bytes",
        theirs.1, theirs.2, bytes
    );
    println!(
        "{:<36} {:>9} {:>11} {:>14}",
        "capture", "seconds", "M instr/s", "reader CPU s"
    );
    let row = |label: &str, secs: f64, reader: Option<f64>| {
        println!(
            "{:<36} {:>9.2} {:>11.2} {:>14}",
            label,
            secs,
            insns as f64 / secs / 1e6,
            reader.map_or("-".into(), |r| format!("{r:.2}"))
        );
    };
    row("valgrind --tool=none (no trace)", none, None);
    row("sedtrace, trace discarded", alone, None);
    row("lackey text -> Capture", theirs_s, Some(theirs_cpu));
    row("sedtrace binary -> Capture", ours_s, Some(ours_cpu));
    assert_eq!(
        (ours.0, ours.1),
        (theirs.0, theirs.1),
        "the two captures disagree"
    );
}
