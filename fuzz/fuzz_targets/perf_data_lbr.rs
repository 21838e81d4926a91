//! Fuzzes the perf.data importer on recordings with LBR branch stacks (`-j any_call`, `hw_idx`,
//! `-j ...,counter`): the seeds are the synthetic `tests/fixtures/perf/lbr-*.perf.data`, so that
//! mutations land in branch counts, `branch_sample_type` bits and the fields before the stack,
//! which `sediment_import::perf`'s own decoder reads (`perf_branch.rs`). Both modes, with no
//! binaries and with the real `lbr` binary for any path ending in `lbr`.
//!
//! Like `perf_data`, `init` lets panics raised inside the `linux-perf-*` crates unwind to the
//! importer's fallback (see that target); every panic in Sediment's code aborts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_import::perf::{self, Mode};

/// The binary the seeds were written for (tests/fixtures/perf/README.md).
static LBR: &[u8] = include_bytes!("../../tests/fixtures/perf/lbr");

type Resolved = Result<Option<Vec<u8>>, String>;

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
            let mut only_lbr = |path: &str, _: Option<&str>| -> Resolved {
                Ok(path.ends_with("lbr").then(|| LBR.to_vec()))
            };
            if let Ok(import) = perf::read("fuzz.perf.data", data, mode, &mut only_lbr) {
                for p in &import.profiles {
                    assert!(p.is_canonical(), "perf import gave a non-canonical profile");
                }
            }
        }
    }
);
