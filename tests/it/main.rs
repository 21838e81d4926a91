//! The one integration-test binary: end-to-end runs of the `sediment` executable and the real
//! tools it drives (gcc, lld, gold, GNU ld, valgrind, perf). One module per area. A test that
//! runs an external tool starts with `require!(...)`: skipped in the quick tier
//! (`SEDIMENT_TEST_TIER=quick`), failing on a missing tool in the full tier (`common::require`).

// First, for its `require!` macro.
#[macro_use]
mod common;

mod align;
mod attach;
mod bench;
mod blocks;
mod bundle;
mod callgrind;
mod compare;
mod cross;
mod cxx;
mod demangle;
mod diff;
mod formats;
mod gv;
mod hostile_paths;
mod kill_race;
mod lbr;
mod ld_reliability;
mod link;
mod link_routes;
mod matching;
mod measure;
mod merge;
mod noise;
mod order;
mod packaging;
mod parquet;
mod perf;
mod pgo;
mod prof_dir;
mod reference;
mod run_limits;
mod rust;
mod shim_load;
mod sim;
mod stat;
mod structs;
mod tune;
mod verify;
mod vocabulary;
