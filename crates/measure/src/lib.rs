//! `sediment-measure`: run a program under Valgrind and measure how well its code layout uses
//! the instruction cache, the instruction TLB and memory pages.
//!
//! For one binary and its arguments, [`measure`] runs five simulations, in parallel up to the
//! number of cores:
//! - four `valgrind --tool=cachegrind --cache-sim=yes` runs with fixed D1 and LL geometries (so
//!   results do not depend on the host) and four first-level instruction "caches" ([`I1_CONFIGS`]):
//!   a 32 KiB/8-way and a 16 KiB/4-way L1i with 64-byte lines, and two instruction TLBs modelled
//!   as caches whose "lines" are 4 KiB pages (64 entries = 256 KiB of 4 KiB lines, 8-way; 128
//!   entries = 512 KiB). A TLB is a cache of page translations, so an LRU cache with page-sized
//!   lines and the TLB's entry count and associativity misses exactly when the TLB would (for
//!   4 KiB pages, ignoring huge pages and the second-level TLB). The whole-run totals give the
//!   instruction count and the misses.
//! - one `valgrind --tool=callgrind --dump-instr=yes` run, from which [`callgrind`] extracts the
//!   execution count of every instruction of the binary's own object (not libc or ld.so), and
//!   [`footprint`] the number of 4 KiB pages and 64-byte lines covering 99% and 99.9% of those
//!   instructions, plus all pages and lines touched.
//!
//! [`format_table`] prints several [`Metrics`] side by side with ratios to the first;
//! [`format_json`] writes them as JSON.
//!
//! Design constraints: this crate runs programs and reads their outputs (unlike the profile
//! model), but only through Valgrind, with temporary files in a private temporary directory that
//! is removed afterwards. The parsers read only what the metrics need; they are not general
//! importers (that is `sediment-import`). Non-goal: wall-clock timing, which is noisy and
//! host-dependent; every number here is a deterministic simulation.

pub mod cache;
pub mod cachegrind;
pub mod callgrind;
pub mod footprint;
pub mod onepass;
mod run;
pub mod spread;
mod table;

pub use run::{measure, Options, I1_CONFIGS};
pub use sediment_valgrind::fnv1a;
pub use table::{format_json, format_table, format_table_without, parse_json, ROWS};

use std::path::PathBuf;

/// Errors of this crate. Every variant names the file or tool it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The binary to measure does not exist or is not a file.
    #[error("{0}: no such executable file")]
    NoBinary(PathBuf),
    /// Valgrind could not be started.
    #[error("cannot run `{tool}` to measure {binary}: {source} (is valgrind installed?)")]
    ToolMissing {
        /// The Valgrind tool (`cachegrind`, `callgrind`).
        tool: String,
        /// The binary being measured.
        binary: PathBuf,
        /// Why the spawn failed.
        source: std::io::Error,
    },
    /// Valgrind or the program under it exited unsuccessfully.
    #[error("valgrind {tool} run of {binary} failed ({status}): {detail}")]
    ProgramFailed {
        /// The Valgrind tool.
        tool: String,
        /// The binary being measured.
        binary: PathBuf,
        /// The exit status.
        status: String,
        /// The last line of standard error.
        detail: String,
    },
    /// A Valgrind output file could not be parsed.
    #[error("{file}: line {line}: {message}")]
    Parse {
        /// The output file (in the temporary directory).
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The callgrind output has no cost for the measured binary's own object.
    #[error("{file}: no costs for object {binary} (objects seen: {seen})")]
    ObjectNotFound {
        /// The callgrind output file.
        file: PathBuf,
        /// The binary being measured.
        binary: PathBuf,
        /// The objects that were in the file.
        seen: String,
    },
    /// A JSON comparison (from [`format_json`]) could not be read back.
    #[error("bad comparison JSON: {0}")]
    Json(String),
    /// A file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A one-pass run under Sediment's trace tool ([`onepass`]) failed.
    #[error("sedtrace run of {binary}: {message}")]
    Trace {
        /// The binary being measured.
        binary: PathBuf,
        /// What failed, with valgrind's last message when it said something.
        message: String,
    },
    /// The trace could not be decoded or simulated.
    #[error("trace: {0}")]
    Simulate(#[source] sediment_sim::Error),
}

/// Layout metrics of one binary run with one set of arguments. Counts are whole-run totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Metrics {
    /// The binary, as given.
    pub binary: String,
    /// Instructions executed by the whole process (cachegrind `Ir`, including ld.so and libc).
    pub instructions: u64,
    /// I1 misses, 32 KiB, 8-way, 64-byte lines.
    pub i1_misses_32k_8way: u64,
    /// I1 misses, 16 KiB, 4-way, 64-byte lines.
    pub i1_misses_16k_4way: u64,
    /// Instruction-TLB misses, 64 entries, 8-way, 4 KiB pages.
    pub itlb_misses_64: u64,
    /// Instruction-TLB misses, 128 entries, 8-way, 4 KiB pages.
    pub itlb_misses_128: u64,
    /// Instructions executed inside the binary's own object (callgrind).
    pub object_instructions: u64,
    /// 4 KiB pages of the binary holding 99% of [`Metrics::object_instructions`].
    pub pages_99: u64,
    /// 4 KiB pages holding 99.9%.
    pub pages_99_9: u64,
    /// 64-byte lines holding 99%.
    pub lines_99: u64,
    /// 64-byte lines holding 99.9%.
    pub lines_99_9: u64,
    /// Distinct 4 KiB pages of the binary with an executed instruction.
    pub pages_touched: u64,
    /// Distinct 64-byte lines of the binary with an executed instruction.
    pub lines_touched: u64,
    /// FNV-1a 64 hash (hex) of the program's standard output under callgrind: two layouts of
    /// one program must print the same thing.
    pub stdout_fnv1a: String,
}
