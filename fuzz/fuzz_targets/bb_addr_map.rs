//! Fuzzes the `.llvm_bb_addr_map` section parser (`sediment_elf::bb_addr_map`): any bytes must
//! give block maps or an error, never a panic, and every block must end inside `u64`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(functions) = sediment_elf::bb_addr_map::parse_bb_addr_map_section("fuzz", data) {
        for f in &functions {
            for b in &f.blocks {
                assert!(b.offset.checked_add(b.size).is_some());
            }
        }
    }
});
