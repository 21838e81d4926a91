//! One module per subcommand: argument definitions and a `run` function that reads inputs,
//! calls the library crates, and writes outputs atomically.

pub mod blocks;
pub mod compare;
pub mod demo;
pub mod diff;
pub mod export;
pub mod heatmap;
pub mod import;
pub mod ldwrap;
pub mod link;
pub mod matching;
pub mod merge;
pub mod noise;
pub mod order;
pub mod pgo;
pub mod record;
pub mod sim;
pub mod stat;
pub mod structs;
