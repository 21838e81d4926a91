//! Fuzzes the `perf script` text importer (`sediment_import::perf_script::read`) in both modes
//! (one per input): any text must give canonical profiles or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_import::perf::Mode;

fuzz_target!(|data: &[u8]| {
    // The CLI reads perf script output as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // One mode per input, by the parity of its length (mutations change it all the time, so
    // both modes see every kind of input, at half the cost of two reads per input).
    let mode = if data.len() % 2 == 0 { Mode::Leaf } else { Mode::Chain };
    {
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
