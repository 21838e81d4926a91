//! Fuzzes the object-file inventory (`sediment_elf::objects::read_objects`), the reader behind
//! `sediment link`: relocatable ELF objects and `ar` archives of them. Any bytes must give an
//! inventory or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sediment_elf::objects::read_objects("fuzz.o", data);
});
