//! Fuzzes the BOLT fdata importer (`sediment_import::fdata::read`): any text must give a
//! canonical profile or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI reads fdata as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = sediment_import::fdata::read("fuzz.fdata", text, "fuzz-binary") {
        assert!(
            p.is_canonical(),
            "fdata import gave a non-canonical profile"
        );
    }
});
