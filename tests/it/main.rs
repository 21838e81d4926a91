//! The one integration-test binary: end-to-end runs of the `sediment` executable and the real
//! tools it drives (gcc, lld, gold, GNU ld, valgrind, perf). One module per area.

mod blocks;
mod callgrind;
mod common;
mod compare;
mod formats;
mod link;
mod matching;
mod merge;
mod noise;
mod order;
mod perf;
mod sim;
mod stat;
