//! Fuzzes the `.gv` call-graph importer (`sediment_import::gv::read`): any text must give
//! canonical profiles or an error, never a panic; and what it reads must write and read back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI reads .gv files as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(profiles) = sediment_import::gv::read("fuzz.gv", text) {
        assert!(
            profiles.iter().all(|p| p.is_canonical()),
            "gv import gave a non-canonical profile"
        );
        // A name too long for a Graphviz string is refused; anything else is written.
        let Ok(written) = sediment_import::gv::write(&profiles) else {
            return;
        };
        let back = sediment_import::gv::read("again.gv", &written).expect("own output reads back");
        assert_eq!(back.len(), profiles.len());
    }
});
