//! Fuzzes the `perf script` text importer (`sediment_import::perf_script::read`) in both modes:
//! any text must give canonical profiles or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_import::perf::Mode;

fuzz_target!(|data: &[u8]| {
    // The CLI reads perf script output as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for mode in [Mode::Leaf, Mode::Chain] {
        if let Ok(import) = sediment_import::perf_script::read("fuzz.perf-script", text, mode) {
            for p in &import.profiles {
                assert!(
                    p.is_canonical(),
                    "perf script import gave a non-canonical profile"
                );
            }
        }
    }
});
