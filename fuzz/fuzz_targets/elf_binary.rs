//! Fuzzes the linked-binary reader (`sediment_elf::Binary::parse`: segments, build-id and the
//! address-sorted function symbols) and then its address lookups, which every sample goes
//! through. Any bytes must give a binary or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_elf::Binary;

fuzz_target!(|data: &[u8]| {
    let Ok(binary) = Binary::parse("fuzz.elf", data) else {
        return;
    };
    // Probe the lookups at every symbol's first and last byte, one past its end, and the
    // extremes of the address space.
    let mut probes = vec![0, u64::MAX];
    for s in &binary.functions {
        probes.push(s.address);
        probes.push(s.address.wrapping_add(s.size));
        probes.push(s.address.wrapping_add(s.size).wrapping_sub(1));
    }
    for s in &binary.segments {
        let _ = binary.offset_to_vaddr(s.offset);
        let _ = binary.offset_to_vaddr(s.offset.wrapping_add(s.file_size));
    }
    for a in probes {
        let _ = binary.lookup(a);
        let _ = binary.function_at(a);
    }
});
