//! `sediment-ab`: run two commands interleaved many times and say, per metric, whether and by
//! how much B differs from A, with the uncertainty stated.
//!
//! The usual way to judge a code-layout change, `perf stat --repeat N ./a; perf stat --repeat
//! N ./b`, runs all of A and then all of B, so anything that drifts over time (CPU frequency,
//! thermal throttling, a backup job) lands on one side; and it prints a mean with a ± spread but
//! no comparison. Here [`run_ab`] interleaves the runs A B A B ... (by default swapping the order
//! of every other pair, A B B A, so a linear drift cancels), optionally pins them to one CPU,
//! and measures every run ([`run`] module): wall time, CPU time from `wait4(2)` rusage, maximum
//! RSS, minor and major page faults, and, where the CPU exposes them to `perf stat`, cycles,
//! instructions, L1 instruction-cache misses, iTLB misses and task-clock. [`summarize`] then
//! computes per metric the medians, the ratio of means with a 95% confidence interval, a seeded
//! bootstrap interval of the ratio of medians, the paired ratio (run `i` of A against run `i`
//! of B, its neighbour in time, so the machine's drift cancels) with its interval, Welch's
//! t-test and the difference in pooled standard deviations ([`stats`] module, which documents
//! the methods and their sources). [`format_table`] and [`format_json`] present the result.
//!
//! Design constraints: [`stats`] is pure (slices in, numbers out) and tested against known
//! values; only [`run`] spawns processes, and only the two commands, `perf` and `taskset`.
//! Non-goals: deciding how many runs are enough (the interval width says it), removing
//! outliers (the medians and the bootstrap are the robust view), and statistics across more
//! than two commands.

pub mod layouts;
pub mod progress;
pub mod report;
pub mod run;
pub mod stats;

pub use report::{format_json, format_table, summarize, MetricSummary, Report};
pub use run::{detect_perf, run_ab, CommandLine, Options, PerfSupport};

use std::collections::BTreeMap;

/// Which of the two commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// The baseline.
    A,
    /// The candidate, compared against A.
    B,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::A => "A",
            Side::B => "B",
        })
    }
}

/// A measured quantity. The declaration order is the display order (and the sort order of
/// [`Samples`], so outputs are stable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Wall-clock time of the run, seconds.
    WallTime,
    /// User + system CPU time, seconds (rusage).
    CpuTime,
    /// User CPU time, seconds (rusage).
    UserTime,
    /// System CPU time, seconds (rusage).
    SysTime,
    /// perf `task-clock`, milliseconds.
    TaskClock,
    /// perf `cycles`.
    Cycles,
    /// perf `instructions`.
    Instructions,
    /// perf `L1-icache-load-misses`.
    L1iMisses,
    /// perf `iTLB-load-misses`.
    ItlbMisses,
    /// Maximum resident set size, KiB (rusage `ru_maxrss`).
    MaxRss,
    /// Minor page faults (rusage).
    MinorFaults,
    /// Major page faults (rusage).
    MajorFaults,
}

impl Metric {
    /// The stable name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Metric::WallTime => "wall_s",
            Metric::CpuTime => "cpu_s",
            Metric::UserTime => "user_s",
            Metric::SysTime => "sys_s",
            Metric::TaskClock => "task_clock_ms",
            Metric::Cycles => "cycles",
            Metric::Instructions => "instructions",
            Metric::L1iMisses => "l1i_misses",
            Metric::ItlbMisses => "itlb_misses",
            Metric::MaxRss => "max_rss_kib",
            Metric::MinorFaults => "minor_faults",
            Metric::MajorFaults => "major_faults",
        }
    }
}

/// The measured runs: per metric, one value per run, in run order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// Runs of command A.
    pub a: BTreeMap<Metric, Vec<f64>>,
    /// Runs of command B.
    pub b: BTreeMap<Metric, Vec<f64>>,
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A run of a command could not start or exited unsuccessfully.
    #[error("command {side} (`{command}`) failed on {run}: {detail}")]
    CommandFailed {
        /// Which command.
        side: Side,
        /// The command line.
        command: String,
        /// `run N` (1-based, among measured runs) or `warm-up run N`.
        run: String,
        /// Exit status or spawn error, and the last line of its standard error.
        detail: String,
    },
    /// The private temporary directory for perf and stderr output could not be created.
    #[error("cannot create a temporary directory: {0}")]
    TempDir(std::io::Error),
}
