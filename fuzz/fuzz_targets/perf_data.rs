//! Fuzzes the perf.data importer (`sediment_import::perf::read`) on raw bytes, in both modes:
//! the header, feature sections and record stream must never make it panic or allocate without
//! bound.
//!
//! Each input is read twice per mode: with a resolver that has no binaries (every mapped sample
//! is counted as missing), and with one that hands over the `hot` binary the seed recording was
//! made from for any path ending in `hot`, so that build-id checks, offset-to-address arithmetic
//! and symbol lookups run on hostile MMAP and sample records too.
//!
//! `perf::read` parses the record stream with `linux-perf-data` inside `catch_unwind` and turns
//! a panic there into a corrupt-file error (see its module docs). libFuzzer's panic hook would
//! abort before that unwinding, so `init` installs a hook that lets panics raised in the
//! `linux-perf-*` crates' own sources unwind to that fallback; every other panic (ours) still
//! aborts and is reported. Found this way: `tests/fixtures/perf/regress-callchain-overflow.bin`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_import::perf::{self, Mode};

/// The binary of the seed `corpus/perf_data/hot.perf.data` (tests/fixtures/perf/README.md).
static HOT: &[u8] = include_bytes!("../../tests/fixtures/perf/hot");

type Resolved = Result<Option<Vec<u8>>, String>;

/// True for a panic raised in the perf.data parsing crates, which `perf::read` catches.
fn in_perf_parser(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().contains("/linux-perf-"))
}

fuzz_target!(
    init: {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !in_perf_parser(info) {
                abort(info);
            }
        }));
    },
    |data: &[u8]| {
        for mode in [Mode::Leaf, Mode::Chain] {
            let mut no_binaries = |_: &str, _: Option<&str>| -> Resolved { Ok(None) };
            let _ = perf::read("fuzz.perf.data", data, mode, &mut no_binaries);
            let mut only_hot = |path: &str, _: Option<&str>| -> Resolved {
                Ok(path.ends_with("hot").then(|| HOT.to_vec()))
            };
            let _ = perf::read("fuzz.perf.data", data, mode, &mut only_hot);
        }
    }
);
