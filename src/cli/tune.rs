//! `sediment tune`: profile + binary + workload -> a function order chosen by the simulator.
//!
//! Every ordering algorithm's order of the profile is replayed on one valgrind run of
//! the binary with the workload (after `--`), and the search of `sediment-tune` keeps the
//! reorderings the simulator says make the layout cheaper against the best published value of
//! each count (the objective: that crate's documentation). The order goes to `-o`, the
//! search's table to stderr. The stage is [`crate::pipeline::tune`].
//!
//! Hidden options, used by the benchmark (`bench/run`): `--events` (the recorded run's cap)
//! and `--fill-from STATIC` / `--fill-rest`, which extend the tuned order from a static call
//! graph as `sediment order --fill-from` does.

use crate::fsio;
use crate::pipeline::{self, tune};
use anyhow::Result;
use sediment_order::FillParams;
use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `sediment tune`.
#[derive(clap::Args)]
pub struct Args {
    /// Profile to order (a `sediment-profile 1` file from `record` or `import`).
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: PathBuf,
    /// The binary to run under valgrind (the one the profile was recorded on, built
    /// with `-ffunction-sections`), best linked by the linker that will link the order: the
    /// tuned layout starts where its code starts.
    #[arg(long, value_name = "FILE")]
    pub binary: PathBuf,
    /// Most layouts replayed (each costs one replay of the recorded run).
    #[arg(long, value_name = "N", default_value_t = tune::DEFAULT_BUDGET)]
    pub budget: usize,
    /// Keep the recorded run in FILE, or reuse it if FILE holds a run of the same binary
    /// bytes and arguments (anything else is an error), so a search can be repeated with other
    /// profiles or budgets without running valgrind again.
    #[arg(long, value_name = "FILE")]
    pub recording: Option<PathBuf>,
    /// Climb from this algorithm's order (or its density tiers), or from the `cheapest`
    /// candidate on the recorded run; the targets are always every published algorithm's best.
    #[arg(long, value_name = "ALGORITHM", default_value = "c3", value_parser = <tune::Start as std::str::FromStr>::from_str)]
    pub start: tune::Start,
    /// Where to write the order file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Threads replaying each layout (default: the number of cores); neither the order nor
    /// the table depends on it.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Most fetches of the run kept for replay (16 bytes each); longer runs are sampled in
    /// whole windows.
    #[arg(long, hide = true, value_name = "N", default_value_t = tune::DEFAULT_EVENTS)]
    pub events: usize,
    /// A static call graph to extend the tuned order from, as `sediment order --fill-from`.
    #[arg(long, hide = true, value_name = "STATIC")]
    pub fill_from: Option<PathBuf>,
    /// With `--fill-from`: then every other function of the static graph, as `sediment order
    /// --fill-rest`.
    #[arg(long, hide = true, requires = "fill_from")]
    pub fill_rest: bool,
    /// The workload's arguments (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Runs `sediment tune`.
pub fn run(args: Args) -> Result<()> {
    let profile = fsio::read_profile(&args.profile)?;
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let tuned = tune::tune(&tune::Request {
        profile: &profile,
        profile_path: &args.profile,
        binary: &args.binary,
        workload: &args.args,
        recording: args.recording.as_deref(),
        budget: args.budget,
        events: args.events,
        start: args.start,
        threads,
    })?;
    for note in &tuned.notes {
        eprintln!("sediment tune: {note}");
    }
    eprint!("{}", tuned.table);
    let order = match &args.fill_from {
        Some(path) => {
            let graph = fsio::read_profile(path)?;
            let with = pipeline::order::Fill {
                graph: &graph,
                path,
                params: FillParams {
                    rest: args.fill_rest,
                    ..FillParams::default()
                },
            };
            let filled = pipeline::order::fill(&tuned.order, &profile, &args.profile, &with)?;
            eprintln!(
                "sediment: {} functions ordered from the profile, {} added from {}",
                filled.sampled,
                filled.added,
                path.display()
            );
            filled.order
        }
        None => tuned.order,
    };
    fsio::write_atomic(&args.output, order.to_text().as_bytes())
}
