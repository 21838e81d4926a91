//! The command line: one module per verb. A verb module parses its arguments, calls stage
//! functions of [`crate::pipeline`] and the library crates, and prints; no verb module imports
//! another. This module holds the top-level parser and the dispatch.

pub mod align;
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
pub mod progress;
pub mod record;
pub mod sim;
pub mod stat;
pub mod structs;
pub mod tune;
pub mod verify;
pub mod vocab;

use clap::{Parser, Subcommand};

use crate::pipeline::timings;

#[derive(Parser)]
#[command(
    name = "sediment",
    version,
    about = "Profile-guided code layout for Linux binaries"
)]
pub struct Cli {
    /// Print how long each pipeline stage took (wall time, on stderr) when the verb ends.
    #[arg(long, global = true)]
    timings: bool,
    #[command(subcommand)]
    command: Command,
}

/// The whole command tree, for the vocabulary test and the generated reference pages.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a command under perf or callgrind, or attach perf to running processes, and write
    /// its profile (`--prof-dir`: one per executable and library).
    #[command(after_help = vocab::RECORD_ENV_HELP)]
    Record(record::Args),
    /// Convert a profiler's output (callgrind.out, perf.data) into a Sediment profile.
    #[command(after_help = vocab::INPUT_LIMIT_ENV_HELP)]
    Import(import::Args),
    /// Write a profile in another tool's format (BOLT fdata, lld call graph, Graphviz call graph).
    Export(export::Args),
    /// Compute a function order from a profile.
    Order(order::Args),
    /// Search for a function order with the simulator on one recorded run of the binary.
    Tune(tune::Args),
    /// Split hot from cold blocks inside functions through the compiler (clang list file, GCC).
    Blocks(blocks::Args),
    /// Write a callgrind training run as llvm-profgen's unsymbolized profile (clang sample PGO
    /// without LBR).
    Pgo(pgo::Args),
    /// Check an order against object files and write the chosen linker's ordering input.
    Link(link::Args),
    /// Write linker shims into a directory: with `-BDIR/` every link of a package build is
    /// ordered from its own profile when one exists, and left unchanged when none does; with
    /// gcc, `-specs=DIR/gcc.specs` (written beside them) does the same where libtool drops `-B`.
    #[command(after_help = vocab::LINK_TIME_ENV_HELP)]
    Wrappers(ldwrap::WrappersArgs),
    /// Run a real linker, adding the ordering input for its output's profile (used by the shims;
    /// internal, hence hidden from the verb list).
    #[command(hide = true, after_help = vocab::LINK_TIME_ENV_HELP)]
    Ld(ldwrap::LdArgs),
    /// Print the compiler-driver flags that make a linker use an ordering file.
    LinkFlags(link::FlagsArgs),
    /// Check how much of an order (an order file, or a profile's) linked binaries hold, and
    /// exit non-zero below a threshold; with `--prof-dir`, which outputs of a build tree each
    /// profile of a directory would order.
    ///
    /// For each binary: the order's entries found (also under the names LTO and GCC's clones
    /// give them: `.lto_priv.N`, `.llvm.N`, `.constprop.N`, `.isra.N`, `.part.N`, `.cold`,
    /// counted), how many of those are in the intended order (the longest in-order
    /// subsequence), the normalised Kendall tau distance (the share of pairs of found entries
    /// placed the other way round: 0 as intended, about 0.5 unrelated, 1 reversed), and the
    /// missing entries (counted, the first named, and with a profile their share of its
    /// weight). The C runtime's start-up code (`_start`, `frame_dummy`, ...) is left out.
    Verify(verify::Args),
    /// Run two binaries under valgrind and compare instructions, I-cache, iTLB and page use.
    Compare(compare::Args),
    /// Merge several profiles of one executable, each with a weight.
    Merge(merge::Args),
    /// Run two commands interleaved many times and report the difference with confidence intervals.
    Stat(stat::Args),
    /// Match a profile recorded on another build to a binary, and report the coverage.
    Match(matching::Args),
    /// Simulate I-cache and iTLB behaviour of binaries from a streamed instruction trace.
    Sim(sim::Args),
    /// Explain what moved between two builds' layouts, and why (shift segments, hot footprint).
    Diff(diff::Args),
    /// Draw where the executed code sits in binaries (pages x cache lines, coloured by weight) as SVG.
    Heatmap(heatmap::Args),
    /// Report structure layouts from DWARF: holes, padding, cache-line straddles, false sharing.
    Structs(structs::Args),
    /// Predict what function alignment does (1 to 512 bytes), choose functions worth aligning
    /// under a size budget, and align them in copies of the objects for any linker.
    Align(align::Args),
    /// Link N layouts of the same objects (shuffled or shifted) and report each metric's spread.
    Noise(noise::Args),
    /// Build the built-in example, profile, order, relink with every linker, and compare.
    Demo(demo::Args),
}

/// Parses the command line, runs the verb, prints the error chain and exits non-zero on failure.
pub fn main() {
    crate::cleanup::install();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(a) => record::run(a),
        Command::Import(a) => import::run(a),
        Command::Export(a) => export::run(a),
        Command::Order(a) => order::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Blocks(a) => blocks::run(a),
        Command::Pgo(a) => pgo::run(a),
        Command::Link(a) => link::run(a),
        Command::Wrappers(a) => ldwrap::run_wrappers(a),
        Command::Ld(a) => ldwrap::run_ld(a),
        Command::LinkFlags(a) => link::run_flags(a),
        Command::Verify(a) => verify::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Stat(a) => stat::run(a),
        Command::Match(a) => matching::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Heatmap(a) => heatmap::run(a),
        Command::Structs(a) => structs::run(a),
        Command::Align(a) => align::run(a),
        Command::Noise(a) => noise::run(a),
        Command::Demo(a) => demo::run(a),
    };
    if cli.timings {
        eprint!("{}", timings::report());
    }
    if let Err(e) = result {
        if is_broken_pipe(&e) {
            return;
        }
        eprintln!("sediment: {e:#}");
        std::process::exit(1);
    }
}

/// A closed pipe (`sediment ... | head`) is a normal end, not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
