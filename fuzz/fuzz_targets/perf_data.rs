//! Fuzzes the perf.data importer (`sediment_import::perf::read`) on raw bytes, in both modes:
//! the header, feature sections and record stream must never make it panic or allocate without
//! bound.
//!
//! Each input is read in one mode (leaf for an even length, chain for an odd one), twice: with a resolver that has no binaries (every mapped sample
//! is counted as missing), and with one that hands over the binaries the seed recordings were
//! made from (`hot` for the call-chain seed, `lbr` for the LBR branch-stack seeds
//! `lbr-*.perf.data` with `hw_idx` and counters) for any path ending in that name, so that
//! build-id checks, offset-to-address arithmetic, symbol lookups and the branch-stack decoder
//! (`perf_branch.rs`) run on hostile MMAP and sample records too. Every profile read must be
//! canonical.
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
/// The binary of the LBR seeds (tests/fixtures/perf/README.md).
static LBR: &[u8] = include_bytes!("../../tests/fixtures/perf/lbr");

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
        // One mode per input, by the parity of its length: mutations change the length all
        // the time, so both modes see every kind of input, at half the cost of reading each
        // input in both (the reads, not the set-up, are the cost of an execution).
        let mode = if data.len() % 2 == 0 { Mode::Leaf } else { Mode::Chain };
        {
            let mut no_binaries = |_: &str, _: Option<&str>| -> Resolved { Ok(None) };
            let _ = perf::read("fuzz.perf.data", data, mode, &mut no_binaries);
            let mut seeds = |path: &str, _: Option<&str>| -> Resolved {
                Ok(if path.ends_with("hot") {
                    Some(HOT.to_vec())
                } else if path.ends_with("lbr") {
                    Some(LBR.to_vec())
                } else {
                    None
                })
            };
            if let Ok(import) = perf::read("fuzz.perf.data", data, mode, &mut seeds) {
                for p in &import.profiles {
                    assert!(p.is_canonical(), "perf import gave a non-canonical profile");
                }
            }
        }
    }
);
