//! Sediment: profile-guided code layout for Linux binaries.
//!
//! Data flows one way: **sources -> profile -> order -> link -> verify**, with **measure**
//! beside the whole pipeline. [`pipeline`] holds one verb-named, typed function per stage; the
//! command line ([`cli`]), the demo, the linker shims and the bench are its callers. The work
//! itself lives in the library crates under `crates/` (profile model, importers, ELF/DWARF,
//! ordering algorithms, linker emitters, the simulator, valgrind runners, A/B statistics).

pub(crate) mod cleanup;
pub mod cli;
pub(crate) mod fsio;
pub mod membudget;
pub mod pipeline;
