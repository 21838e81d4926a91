//! Fuzzes the GCC `-fcallgraph-info` importer (`sediment_import::gcc_callgraph::read`): any
//! text gives a canonical profile or an error, never a panic.
//!
//! The input is cut at NUL bytes into up to four `.ci` files (the CLI takes one per translation
//! unit), so that the merging of nodes named in several units is fuzzed too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The CLI reads .ci files as UTF-8 text, so other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let names = ["a.ci", "b.ci", "c.ci", "d.ci"];
    let files: Vec<(&str, &str)> = names.iter().copied().zip(text.splitn(4, '\0')).collect();
    if let Ok(p) = sediment_import::gcc_callgraph::read(&files, "fuzz-binary") {
        assert!(
            p.is_canonical(),
            "gcc callgraph import gave a non-canonical profile"
        );
    }
});
