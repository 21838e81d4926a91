//! `sediment-measure`: run a program under Valgrind and measure how well its code layout uses
//! the instruction cache, the instruction TLB and memory pages.
//!
//! `sediment compare` measures with [`onepass`]: one run per binary under Sediment's own
//! valgrind tool, every metric from its trace (the module doc defines each metric and how it
//! differs from cachegrind's), results cached by [`cache`]. The cachegrind/callgrind path below
//! stays for `sediment noise` and for the `compare` benchmark's old-against-new timing.
//!
//! For one binary and its arguments, [`measure`] runs five simulations (`sediment_valgrind::tools`),
//! in parallel up to the number of cores:
//! - four `valgrind --tool=cachegrind --cache-sim=yes` runs with fixed D1 and LL geometries (so
//!   results do not depend on the host), one per first-level instruction "cache" of the first
//!   `sediment_sim::geometry::CACHEGRIND` entries of `sediment_sim::GEOMETRIES` (two L1i, and
//!   two iTLBs modelled as caches whose "lines" are 4 KiB pages). The whole-run totals give the
//!   instruction count and the misses.
//! - one `valgrind --tool=callgrind --dump-instr=yes` run, whose per-instruction counts of the
//!   binary's own object (not libc or ld.so; `sediment_import::callgrind::object_instr_costs`)
//!   give the page and line footprint (`sediment_sim::footprint`, weighted by executed
//!   instructions: callgrind gives no instruction lengths).
//!
//! [`format_table`] prints several [`Metrics`] side by side with ratios to the first;
//! [`format_json`] writes them as JSON.
//!
//! Design constraints: this crate runs programs and reads their outputs (unlike the profile
//! model), but only through Valgrind, with temporary files in a private temporary directory that
//! is removed afterwards. The cachegrind summary parser reads only the totals; callgrind output is read by
//! `sediment-import`'s parser. Non-goal: wall-clock timing, which is noisy and
//! host-dependent; every number here is a deterministic simulation.

pub mod cache;
pub mod cachegrind;
pub mod onepass;
mod run;
pub mod spread;
mod table;

pub use run::{instruction_footprint, measure, Options};
pub use sediment_sim::Metrics;
pub use sediment_valgrind::fnv1a;
pub use table::{
    format_json, format_table, format_table_without, parse_json, report, Report, ROWS,
};

use std::path::PathBuf;

/// Errors of this crate. Every variant names the file or tool it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The binary to measure does not exist or is not a file.
    #[error("{0}: no such executable file")]
    NoBinary(PathBuf),
    /// Valgrind could not be started, or the run failed.
    #[error(transparent)]
    Valgrind(#[from] sediment_valgrind::Error),
    /// The callgrind output could not be read.
    #[error(transparent)]
    Callgrind(#[from] sediment_import::Error),
    /// A footprint could not be computed.
    #[error("footprint: {0}")]
    Footprint(#[from] sediment_sim::Error),
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
    /// Sediment's trace tool cannot be built here (no valgrind headers or static libraries,
    /// not amd64 Linux): what is missing, in one line. The caller may fall back to
    /// [`measure`].
    #[error("{0}")]
    NoTraceTool(String),
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

/// What the footprint rows count, printed under the table.
pub const FOOTPRINT_NOTE: &str = "# footprint rows: each binary's own code (its executable segments; not ld.so or libc), bytes weighted by execution count";
