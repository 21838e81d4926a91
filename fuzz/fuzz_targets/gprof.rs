//! Fuzzes the gprof importer (`sediment_import::gprof::read`) on raw `gmon.out` bytes, against
//! the real `-pg` binary the seed was recorded from (`tests/fixtures/gprof/prog`), so histogram
//! and call-arc addresses run through the symbol lookups: any input gives a canonical profile or
//! an error, never a panic or an allocation sized by a count in the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_elf::Binary;
use std::sync::OnceLock;

/// The binary of the seed `corpus/gprof/gmon.out` (tests/fixtures/gprof/README.md).
static PROG: &[u8] = include_bytes!("../../tests/fixtures/gprof/prog");

fn prog() -> &'static Binary {
    static PARSED: OnceLock<Binary> = OnceLock::new();
    PARSED.get_or_init(|| Binary::parse("prog", PROG).expect("the gprof fixture binary parses"))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = sediment_import::gprof::read("fuzz.gmon.out", data, "prog", prog()) {
        assert!(p.is_canonical(), "gprof import gave a non-canonical profile");
    }
});
