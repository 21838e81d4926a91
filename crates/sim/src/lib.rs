//! Sediment's own deterministic model of the instruction side of a CPU: how many instruction
//! cache lines and iTLB pages a code layout costs, without hardware counters and without
//! relinking the program for every candidate layout.
//!
//! The machines Sediment is developed on have no usable performance counters, and valgrind's
//! cachegrind (the reference we validate against) needs a relinked binary and a full run per
//! layout. This crate answers the same question from a *trace* in a fraction of the time:
//!
//! - [`lru`]: a set-associative LRU array, used both as an instruction cache (blocks are cache
//!   lines) and as an iTLB (blocks are 4 KiB or 2 MiB pages). Fully associative is the special
//!   case `ways == entries`. Instruction fetches are fed as address ranges (a basic block or
//!   superblock executed once); every block the range covers is one access, in address order.
//!   This is the textbook model of Hennessy & Patterson, *Computer Architecture: A Quantitative
//!   Approach*, ch. 2 and appendix B, and the one cachegrind implements (`cg_sim.c`).
//! - [`footprint`]: from per-address execution counts, how many lines and pages the executed
//!   code touches, how many hold 99% / 99.9% of the executed bytes, and the lower bound on those
//!   numbers over *every* layout (all executed bytes packed densely, hottest first), so that a
//!   layout can be reported as a ratio to the limit.
//! - [`align`]: a linked binary's functions re-placed in link order under another alignment
//!   (all of them, or chosen ones), and the table of an alignment sweep.
//! - [`layout`]: places functions at addresses from an order, sizes and an alignment
//!   ([`layout_from_order`]) and turns function-relative ranges into addresses, which is how one
//!   trace is replayed under many layouts.
//! - [`trace`]: a small line-oriented trace format and its streaming reader over any
//!   [`std::io::BufRead`].
//! - [`geometry`]: the one table of simulated L1i and iTLB geometries ([`GEOMETRIES`]).
//! - [`metrics`]: the one metrics struct ([`Metrics`]) of every measured or simulated run.
//! - [`lackey`]: one live lackey run replayed under many layouts at once; [`table`]: simulated
//!   metrics over shifted layouts as a table or JSON.
//! - [`Machine`]: an L1i and an iTLB fed together.
//! - [`record`]: a bounded, sampled in-memory record of one run with the binary's code kept
//!   relative to its functions, replayable under any order (`sediment-tune` searches orders
//!   on it).
//! - [`bintrace`]: the binary trace of Sediment's own valgrind tool (runs of consecutive
//!   instructions and the program's executable mappings), decoded into a [`Capture`]; the
//!   same fetches as lackey's text, produced tens of times faster (`sediment-valgrind`'s
//!   `capture` bench measures both).
//! - [`capture`]: valgrind lackey's instruction trace, streamed into several arrays at once,
//!   and into further sets of arrays that see the main binary's code moved: shifted by a
//!   constant (the layout a pad would give) or relaid out by a proposed function order
//!   ([`TextMap`]), so that one run measures many layouts. [`order_footprint`] gives the
//!   footprint rows of an order from execution counts alone, without a trace in time.
//!
//! Design constraints:
//! - **No I/O** beyond the trace reader, which takes a `BufRead` the caller opened; no threads,
//!   no randomness, no clocks. The same inputs give the same numbers on every machine.
//! - **Hostile input.** Geometries, traces and counts come from users and files: every geometry
//!   is validated and bounded before anything is allocated ([`lru::MAX_ENTRIES`]), trace lines
//!   and ranges have caps, arithmetic on addresses is checked. Nothing here panics or exits on
//!   bad input; it returns an [`Error`].
//! - **Fast enough to sweep layouts**: the cache model is a flat array of `u64` tags per set,
//!   kept in MRU-first order, with power-of-two set masks and no hashing (see
//!   `docs/journal/simulator.md` for measured throughput).
//!
//! Non-goals: data-side caches, prefetchers, branch predictors, cache hierarchies with
//! inclusion policies, replacement policies other than true LRU, timing. The numbers are counts
//! of accesses and misses; turning them into cycles is a different model.

pub mod align;
pub mod bintrace;
pub mod capture;
pub mod footprint;
pub mod geometry;
pub mod lackey;
pub mod layout;
pub mod lru;
mod machine;
pub mod metrics;
pub mod record;
pub mod table;
pub mod trace;

pub use capture::{Capture, Relayout, TextMap};
pub use footprint::{blocks_for_target, ExecProfile, ExecRange, Footprint, Share};
pub use geometry::{Geometry, GEOMETRIES};
pub use layout::{layout_from_order, order_footprint, FuncRange, Layout};
pub use lru::{CacheConfig, PageSize, SetAssocLru, Stats, TlbConfig};
pub use machine::Machine;
pub use metrics::{Bounds, FootprintWeight, Metrics};
pub use record::{Recording, Saved};
pub use table::{format_json, format_table};
pub use trace::{TraceEvent, TraceReader};

/// Default step in bytes between shifted layouts when their iTLB figures count: one 4 KiB
/// page and 80 bytes. The page moves every page of the code to the next of an 8-way iTLB's
/// sets; the 80 bytes (a 64-byte line and 16) move every function to another L1i set and
/// another 16-byte position in its line. Valgrind loads the libraries at the same addresses
/// in every run, so one layout's iTLB conflicts with libc's pages are one draw of what address
/// randomisation varies from run to run; the median over page-shifted layouts is not.
pub const PAGE_SHIFT_STEP: u64 = 4096 + 80;

/// Errors of this crate. Trace errors carry the 1-based line number of the offending line;
/// the caller adds the file name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes that are not a saved recording ([`record::Saved`]).
    #[error("corrupt recording: {0}")]
    Corrupt(String),
    /// A cache or TLB geometry that cannot be built (sizes not powers of two, too large, ...).
    #[error("invalid geometry: {0}")]
    Geometry(String),
    /// A share (fraction) that is not between 0 and 1.
    #[error("invalid share {num}/{den}: must satisfy 0 <= num <= den and den > 0")]
    Share {
        /// Numerator.
        num: u64,
        /// Denominator.
        den: u64,
    },
    /// An address range that runs past the end of the 64-bit address space.
    #[error("range at {start:#x} of {len} bytes runs past the end of the address space")]
    AddressOverflow {
        /// First byte of the range.
        start: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Execution weights (count x bytes) too large to sum in 128 bits.
    #[error("execution weights overflow 128 bits")]
    WeightOverflow,
    /// A function-relative range names a function the layout does not have.
    #[error("function index {func} out of range (layout has {count} functions)")]
    NoSuchFunction {
        /// The function index from the trace.
        func: u32,
        /// How many functions the layout has.
        count: usize,
    },
    /// A function-relative range reaches beyond the end of its function.
    #[error(
        "range at offset {offset:#x} of {len} bytes lies outside function {func} of {size} bytes"
    )]
    OutsideFunction {
        /// The function index.
        func: u32,
        /// Offset within the function.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// Size of the function in the layout.
        size: u64,
    },
    /// Two parallel arrays of different lengths.
    #[error("{what}: {left} entries vs {right}")]
    LengthMismatch {
        /// Which arrays.
        what: &'static str,
        /// Length of the first.
        left: usize,
        /// Length of the second.
        right: usize,
    },
    /// A trace line that could not be parsed or replayed.
    #[error("line {line}: {message}")]
    Trace {
        /// 1-based line number.
        line: u64,
        /// What was wrong with it.
        message: String,
    },
    /// A binary trace ([`bintrace`]) that could not be decoded.
    #[error("binary trace, byte {offset}: {message}")]
    BinTrace {
        /// Offset of the record that failed, from the start of the stream.
        offset: u64,
        /// What was wrong with it.
        message: String,
    },
    /// The trace ended before its first instruction although other layouts were asked for.
    #[error("the trace has no instruction")]
    NoInstruction,
    /// The caller could not locate the binary's code in the running process.
    #[error("cannot locate the binary's code in the process")]
    CodeRange(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Reading the trace failed.
    #[error("line {line}: read failed")]
    Io {
        /// 1-based number of the line being read.
        line: u64,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
