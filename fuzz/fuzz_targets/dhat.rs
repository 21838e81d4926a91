//! Fuzzes the DHAT reader (`sediment_import::dhat::read`) on raw JSON bytes: any input gives
//! allocation points whose per-byte counts cover exactly their block size, or an error, never a
//! panic or an allocation sized by a count in the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sites) = sediment_import::dhat::read("fuzz.dhat", data) {
        for s in sites {
            assert_eq!(s.accesses.len() as u64, s.block_bytes);
            assert!(s.block_bytes <= sediment_import::dhat::MAX_BLOCK);
        }
    }
});
