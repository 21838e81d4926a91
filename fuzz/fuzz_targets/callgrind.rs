//! Fuzzes the callgrind.out importer (`sediment_import::callgrind::read`): any text must give
//! profiles or an error, never a panic, and every profile must be canonical.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI reads callgrind files as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(profiles) = sediment_import::callgrind::read(text, "fuzz.callgrind.out") {
        for p in &profiles {
            assert!(
                p.is_canonical(),
                "callgrind import gave a non-canonical profile"
            );
        }
    }
});
