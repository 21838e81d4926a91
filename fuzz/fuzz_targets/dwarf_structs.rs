//! Fuzzes the DWARF structure-layout reader (`sediment_elf::types::read_structs`) and the
//! layout analysis on what it returns. Any bytes must give layouts or an error, never a panic,
//! a hang on a cyclic type chain, or an allocation sized by a hostile count.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(structs) = sediment_elf::types::read_structs("fuzz.elf", data) else {
        return;
    };
    for s in &structs {
        let _ = sediment_explain::structs::analyze(s);
    }
});
