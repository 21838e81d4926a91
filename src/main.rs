//! `sediment`: profile-guided code layout for Linux binaries.
//!
//! The pipeline, one subcommand per stage, data flowing one way:
//! `record`/`import` (sources -> profile) -> `order` (profile -> function order) ->
//! `link`/`link-flags` (order -> linker input, checked against the objects) ->
//! `compare` (two binaries -> measured layout metrics). `demo` runs all of them on the
//! built-in example.
//!
//! This file only parses the command line and dispatches; each stage lives in `cmd/`, and the
//! work itself in the library crates under `crates/`.

mod cmd;
mod fsio;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sediment",
    version,
    about = "Profile-guided code layout for Linux binaries"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command under perf or callgrind and write a profile per executable it ran.
    Record(cmd::record::Args),
    /// Convert a profiler's output (callgrind.out, perf.data) into a Sediment profile.
    Import(cmd::import::Args),
    /// Write a profile in another tool's format (BOLT fdata, Graphviz call graph).
    Export(cmd::export::Args),
    /// Compute a function order from a profile.
    Order(cmd::order::Args),
    /// Split hot from cold blocks inside functions through the compiler (clang list file, GCC).
    Blocks(cmd::blocks::Args),
    /// Write a callgrind training run as llvm-profgen's unsymbolized profile (clang sample PGO
    /// without LBR).
    Pgo(cmd::pgo::Args),
    /// Check an order against object files and write the chosen linker's ordering input.
    Link(cmd::link::Args),
    /// Write linker shims into a directory: with `-BDIR/` every link of a package build is
    /// ordered from its own profile when one exists, and left unchanged when none does.
    Wrappers(cmd::ldwrap::WrappersArgs),
    /// Run a real linker, adding the ordering input for its output's profile (used by the shims).
    Ld(cmd::ldwrap::LdArgs),
    /// Print the compiler-driver flags that make a linker use an ordering file.
    LinkFlags(cmd::link::FlagsArgs),
    /// Run two binaries under valgrind and compare instructions, I-cache, iTLB and page use.
    Compare(cmd::compare::Args),
    /// Merge several profiles of one executable, each with a weight.
    Merge(cmd::merge::Args),
    /// Run two commands interleaved many times and report the difference with confidence intervals.
    Stat(cmd::stat::Args),
    /// Match a profile recorded on another build to a binary, and report the coverage.
    Match(cmd::matching::Args),
    /// Simulate I-cache and iTLB behaviour of binaries from a streamed instruction trace.
    Sim(cmd::sim::Args),
    /// Explain what moved between two builds' layouts, and why (shift segments, hot footprint).
    Diff(cmd::diff::Args),
    /// Draw where the executed code sits in binaries (pages x cache lines, coloured by weight) as SVG.
    Heatmap(cmd::heatmap::Args),
    /// Report structure layouts from DWARF: holes, padding, cache-line straddles, false sharing.
    Structs(cmd::structs::Args),
    /// Link N layouts of the same objects (shuffled or shifted) and report each metric's spread.
    Noise(cmd::noise::Args),
    /// Build the built-in example, profile, order, relink with every linker, and compare.
    Demo(cmd::demo::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(a) => cmd::record::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Order(a) => cmd::order::run(a),
        Command::Blocks(a) => cmd::blocks::run(a),
        Command::Pgo(a) => cmd::pgo::run(a),
        Command::Link(a) => cmd::link::run(a),
        Command::Wrappers(a) => cmd::ldwrap::run_wrappers(a),
        Command::Ld(a) => cmd::ldwrap::run_ld(a),
        Command::LinkFlags(a) => cmd::link::run_flags(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Stat(a) => cmd::stat::run(a),
        Command::Match(a) => cmd::matching::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Heatmap(a) => cmd::heatmap::run(a),
        Command::Structs(a) => cmd::structs::run(a),
        Command::Noise(a) => cmd::noise::run(a),
        Command::Demo(a) => cmd::demo::run(a),
    };
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
