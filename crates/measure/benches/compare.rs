//! The time of a 2-binary `sediment compare` measurement, old path against new, not a test:
//! `cargo bench -p sediment-measure --bench compare`.
//!
//! The workload is a C program built here with gcc: a loop over 64 small functions called
//! through a table (about 30 instructions per iteration, with data-dependent branches), built
//! twice (`-O1`, and `-O1 -falign-functions=64`, another layout of the same code).
//! `SEDIMENT_BENCH_ITERS` sets the iterations (default 33,000,000: about 1 G instructions per
//! run). Both binaries are measured with 2 jobs by:
//!
//! - the cachegrind/callgrind path ([`sediment_measure::measure`]): four cachegrind runs (one
//!   per I1/iTLB geometry) and one callgrind run per binary;
//! - the one-pass path ([`sediment_measure::onepass`]): one `sedtrace` run per binary, every
//!   metric from its trace, no cache;
//! - the one-pass path again with a warm cache.
//!
//! It prints wall seconds and measured instructions per wall second for each, then the
//! metrics of the first binary by both paths side by side. `SEDIMENT_BENCH_OLD=0` skips the
//! old path (the slow one).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use sediment_measure::onepass::{measure_one_pass, OnePassOptions};
use sediment_measure::{measure, Metrics, Options};

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

fn main() {
    let iters = std::env::var("SEDIMENT_BENCH_ITERS").unwrap_or_else(|_| "33000000".into());
    let run_old = std::env::var("SEDIMENT_BENCH_OLD").map_or(true, |v| v != "0");
    let dir = tempfile::tempdir().expect("temporary directory");
    let src = dir.path().join("w.c");
    std::fs::write(&src, PROGRAM).expect("write the workload");
    let bins: Vec<PathBuf> = ["w", "w-aligned"]
        .iter()
        .map(|n| dir.path().join(n))
        .collect();
    for (bin, extra) in bins.iter().zip([&[][..], &["-falign-functions=64"][..]]) {
        let ok = Command::new("gcc")
            .arg("-O1")
            .args(extra)
            .arg("-o")
            .arg(bin)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(ok.success());
    }
    let args = [OsString::from(&iters)];
    // Built before timing (a second, once per valgrind version).
    sediment_valgrind::tracer::Tool::get(&OsString::from("valgrind")).expect("building sedtrace");

    let one = OnePassOptions {
        jobs: 2,
        cache: None,
        ..OnePassOptions::default()
    };
    let t = Instant::now();
    let new = measure_one_pass(&bins, &args, &one, &|_, _| {}).expect("one-pass path");
    let new_s = t.elapsed().as_secs_f64();
    let cached = OnePassOptions {
        cache: Some(dir.path().join("cache")),
        ..one.clone()
    };
    measure_one_pass(&bins, &args, &cached, &|_, _| {}).expect("filling the cache");
    let t = Instant::now();
    measure_one_pass(&bins, &args, &cached, &|_, _| {}).expect("cached path");
    let cached_s = t.elapsed().as_secs_f64();
    let old = run_old.then(|| {
        let opts = Options {
            jobs: 2,
            ..Options::default()
        };
        let t = Instant::now();
        let m = measure(&bins, &args, &opts).expect("cachegrind/callgrind path");
        (m, t.elapsed().as_secs_f64())
    });

    let insns: u64 = new.iter().map(|m| m.metrics.instructions).sum();
    println!(
        "workload: {iters} iterations, {} instructions per run, 2 binaries, 2 jobs, {} cores",
        new[0].metrics.instructions,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("{:<44} {:>9} {:>12}", "path", "seconds", "M instr/s");
    let row = |label: &str, secs: f64| {
        println!(
            "{label:<44} {secs:>9.2} {:>12.2}",
            insns as f64 / secs / 1e6
        );
    };
    if let Some((_, s)) = &old {
        row("cachegrind x4 + callgrind per binary", *s);
    }
    row("one pass (sedtrace), no cache", new_s);
    row("one pass, cached", cached_s);
    if let Some((old, _)) = &old {
        println!("\nmetrics of {}: old path vs one pass", bins[0].display());
        side_by_side(&old[0], &new[0].metrics);
    }
}

fn side_by_side(old: &Metrics, new: &Metrics) {
    let (o, n) = (
        serde_json::to_value(old).expect("metrics serialise"),
        serde_json::to_value(new).expect("metrics serialise"),
    );
    let (Some(o), Some(n)) = (o.as_object(), n.as_object()) else {
        return;
    };
    for (k, v) in o {
        if let (Some(a), Some(b)) = (v.as_u64(), n.get(k).and_then(|x| x.as_u64())) {
            println!("{k:<24} {a:>14} {b:>14}");
        }
    }
}
