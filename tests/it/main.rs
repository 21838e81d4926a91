//! The one integration-test binary: end-to-end runs of the `sediment` executable and the real
//! tools it drives (gcc, lld, gold, GNU ld, valgrind, perf). One module per area.

mod bench;
mod blocks;
mod callgrind;
mod common;
mod compare;
mod diff;
mod formats;
mod gv;
mod hostile_paths;
mod lbr;
mod link;
mod matching;
mod merge;
mod noise;
mod order;
mod packaging;
mod perf;
mod pgo;
mod prof_dir;
mod sim;
mod stat;
mod structs;
mod vocabulary;
