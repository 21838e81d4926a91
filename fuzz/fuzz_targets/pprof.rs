//! Fuzzes the pprof importer (`sediment_import::pprof::read`) on raw bytes, gzipped or not, in
//! both modes: the protobuf decoding, the gzip cap and the location/function/mapping tables must
//! give canonical profiles or an error, never a panic or an unbounded allocation.
//!
//! The seeds are the captured `burn.pb.gz` and its gunzipped body, so that mutations reach the
//! protobuf decoder directly instead of stopping at the gzip checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_import::perf::Mode;

fuzz_target!(|data: &[u8]| {
    for mode in [Mode::Leaf, Mode::Chain] {
        if let Ok(profiles) = sediment_import::pprof::read("fuzz.pb", data, None, mode) {
            for p in &profiles {
                assert!(p.is_canonical(), "pprof import gave a non-canonical profile");
            }
        }
    }
});
