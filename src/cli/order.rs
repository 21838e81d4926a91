//! `sediment order`: profile -> function order.
//!
//! Reads a profile, runs one ordering algorithm of `sediment-order` on it, and writes the
//! linker-neutral order file atomically. Only functions the profile saw are listed; the linker
//! places all others after them in its default order.
//!
//! `--fill-from STATIC.sprof` extends the order with functions a static call graph (GCC
//! `-fcallgraph-info`, imported with `sediment import --format gcc-callgraph`, or the objects'
//! relocations, `--format objects`) reaches from the ordered ones, placed after them
//! (`sediment_order::fill`); with `--fill-rest`, then every other function of that graph in
//! call-tree clusters. It is an `order` option rather than a `merge` input because it must not
//! change the measured profile: the static edges only decide where functions the profile never
//! saw go, never the order of the ones it did. It follows any algorithm and `--refine`.
//!
//! `--startup ORDER` gives the first-execution order (an order file listing functions in the
//! order they first ran) that `--algorithm bp` partitions for; names the profile lacks are one
//! counted warning. `--compare` runs every algorithm on the same profile and prints a table of
//! what the profile predicts for each layout (see `docs/design/algorithms.md`, "Comparing"), so the
//! user sees why one is chosen; every column is computed from the profile alone, so the table
//! is the same bytes on every run.

use crate::cli::vocab;
use crate::fsio;
use anyhow::{anyhow, bail, Context, Result};
use sediment_order::{
    ext_tsp_score, fill_order, order_graph, page_locality_score, startup_pages, weight_footprint,
    Algorithm, CallGraph, ExtTspParams, FillParams, PAGE_SIZE,
};
use sediment_profile::FunctionOrder;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments of `sediment order`.
#[derive(clap::Args)]
pub struct Args {
    /// Profile to order (a `sediment-profile 1` file from `record` or `import`).
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: PathBuf,
    /// Ordering algorithm: `c3` (call-chain clustering, hfsort), `hot` (hottest first),
    /// `pettis-hansen` (greedy heaviest-edge chaining), `ext-tsp` (chain merging maximising the
    /// ExtTSP score), `cdsort` (cache-directed sort), `bp` (balanced partitioning for startup),
    /// `tiered` (Sediment's own: CDSort inside density tiers) or `paged` (Sediment's own: C3
    /// without its cold members, hot functions moved off needless page crossings).
    #[arg(long, value_name = "NAME", default_value = "c3", value_parser = vocab::parse_algorithm)]
    pub algorithm: Algorithm,
    /// A static call graph (`import --format gcc-callgraph` or `--format objects`): append the
    /// functions its edges reach from the ordered ones, after them (low confidence; never
    /// reorders the profile's).
    #[arg(long, value_name = "STATIC")]
    pub fill_from: Option<PathBuf>,
    /// With `--fill-from`: how many levels of static edges to follow.
    #[arg(long, value_name = "N", default_value_t = FillParams::default().max_depth)]
    pub fill_depth: u32,
    /// With `--fill-from`: follow static edges back to callers too, not only to callees.
    #[arg(long)]
    pub fill_callers: bool,
    /// With `--fill-from`: then append every other function of the static graph in call-tree
    /// clusters (entry points first, each with its callees), so that code training never ran
    /// sits with the code it calls rather than in source-file order.
    #[arg(long)]
    pub fill_rest: bool,
    /// First-execution order for `bp` (and the startup column of `--compare`): an order file
    /// listing functions in the order they first ran.
    #[arg(long, value_name = "ORDER")]
    pub startup: Option<PathBuf>,
    /// Print every algorithm's predicted metrics for this profile as a table on stdout.
    #[arg(long)]
    pub compare: bool,
    /// With `--compare`: also replay every algorithm's order through Sediment's simulator on one
    /// valgrind lackey run of this binary (the one the profile was recorded on, built with
    /// `-ffunction-sections`), with the workload's arguments after `--`: predicted iTLB and I1
    /// misses and pages/lines, with no relink (`sediment sim --order`).
    #[arg(long, value_name = "BIN")]
    pub simulate: Option<PathBuf>,
    /// Sediment's own, simulation-guided: replay every algorithm's order on one lackey run of
    /// `--simulate BIN -- ARGS`, start from C3's (`--refine-start`), and keep the reorderings
    /// the simulator says bring it closer to the best published value of every metric
    /// (`docs/design/tune.md`, "refine"). Writes the refined order to `-o`; the search's
    /// table goes to stderr. BIN is best linked by the linker that will link the order: the
    /// refined layout starts where BIN's code starts, and pages and cache sets depend on it.
    #[arg(long, requires_all = ["simulate", "output"])]
    pub refine: bool,
    /// With `--refine`: most layouts replayed (each costs one replay of the kept run).
    #[arg(long, value_name = "N", default_value_t = sediment_sim::RefineParams::default().budget)]
    pub refine_budget: usize,
    /// With `--refine`: most fetches of the run kept for replay (16 bytes each); longer runs
    /// are sampled in whole windows.
    #[arg(long, value_name = "N", default_value_t = sediment_sim::record::DEFAULT_MAX_EVENTS)]
    pub refine_events: usize,
    /// With `--refine`: keep the recorded run in FILE, or reuse it if FILE holds a run of the
    /// same binary bytes, arguments and `--refine-events` (anything else is an error), so a
    /// search can be repeated with other profiles or budgets without running lackey again.
    #[arg(long, value_name = "FILE", requires = "refine")]
    pub refine_recording: Option<PathBuf>,
    /// With `--refine`: what weighs the pages and lines holding 99% (99.9%) of the executed
    /// bytes: `run`, the recorded run alone; or `profile` (the default), the recorded run and
    /// also the profile's weight of each function put on the run's shape of it (four more targets,
    /// counted after the run's eight: a short recorded run then also counts the functions
    /// as the profile's longer workload does), and the density tiers cut by the mean of each
    /// function's share of the run and of the profile. The cache and iTLB misses are always
    /// the recorded run's.
    #[arg(long, value_enum, value_name = "FROM", default_value_t = RefineWeights::Profile, requires = "refine")]
    pub refine_weights: RefineWeights,
    /// With `--refine`: how the iTLB misses over the page phases make one count: `median`, or
    /// `mean`, the expected count when address randomisation draws the phase (a layout that
    /// thrashes at a few phases has a low median and a higher mean).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = RefineItlb::Median, requires = "refine")]
    pub refine_itlb: RefineItlb,
    /// With `--refine`: where the pages and lines holding 99% (99.9%) are counted: `placed`,
    /// with the code where the link puts it, or `shifted`, the median over the shifted
    /// layouts (what the order holds wherever its code starts).
    #[arg(long, value_enum, value_name = "WHERE", default_value_t = RefineFootprint::Placed, requires = "refine")]
    pub refine_footprint: RefineFootprint,
    /// With `--refine`: which layouts the I1 misses are counted over: `shifts`, the median
    /// over the three shifted layouts; or over every page phase the iTLB counts too (eight),
    /// their `median` or `mean` (the default; the expected count when address randomisation
    /// draws the phase: the libraries' code does not move with the program's, so which L1i
    /// sets the two share changes with it).
    #[arg(long, value_enum, value_name = "OVER", default_value_t = RefineI1::Mean, requires = "refine")]
    pub refine_i1: RefineI1,
    /// With `--refine`: climb from this algorithm's order (or its density tiers), or from the
    /// `cheapest` candidate on the recorded run; the targets stay every published algorithm's
    /// best. `c3` (the default) with `--refine-i1 mean` gave the refined order that held up
    /// best on tests the recorded run did not cover (`docs/journal/tune.md`, "--refine-start").
    #[arg(long, value_name = "ALGORITHM", default_value = "c3", requires = "refine", value_parser = parse_refine_start)]
    pub refine_start: RefineStart,
    /// With `--refine` or `--simulate`: threads replaying each layout (default: the number of
    /// cores); neither the order nor the table depends on it.
    #[arg(long, short = 'j', value_name = "N", requires = "simulate")]
    pub jobs: Option<usize>,
    /// The workload's arguments for `--simulate` (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<std::ffi::OsString>,
    /// Where to write the order file (optional with `--compare`).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        required_unless_present = "compare"
    )]
    pub output: Option<PathBuf>,
}

/// `--refine-weights`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefineWeights {
    /// The recorded run and the profile's function weights on its shape of each function.
    Profile,
    /// The recorded run alone.
    Run,
}

/// `--refine-itlb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefineItlb {
    /// The median over the phases.
    Median,
    /// The mean over the phases.
    Mean,
}

/// `--refine-i1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefineI1 {
    /// The median over the shifts.
    Shifts,
    /// The median over every page phase.
    Median,
    /// The mean over every page phase.
    Mean,
}

/// `--refine-start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefineStart {
    /// The candidate closest to every target on the recorded run.
    Cheapest,
    /// One algorithm's order or its density tiers.
    From(Algorithm),
}

impl RefineStart {
    /// The command-line name.
    fn name(self) -> &'static str {
        match self {
            RefineStart::Cheapest => "cheapest",
            RefineStart::From(a) => a.name(),
        }
    }
}

/// `--refine-start`'s value: `cheapest` or an algorithm's name.
fn parse_refine_start(name: &str) -> Result<RefineStart, String> {
    if name == "cheapest" {
        return Ok(RefineStart::Cheapest);
    }
    vocab::parse_algorithm(name)
        .map(RefineStart::From)
        .map_err(|e| format!("{e}, or cheapest"))
}

/// `--refine-footprint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefineFootprint {
    /// Where the link puts the code.
    Placed,
    /// The median over the shifted layouts.
    Shifted,
}

/// Functions of the startup prefix whose pages the `--compare` startup column counts: the first
/// 1000 to run (a few pages' worth of a program's start-up path).
const STARTUP_PREFIX: usize = 1000;

/// Runs `sediment order`.
pub fn run(args: Args) -> Result<()> {
    let profile = fsio::read_profile(&args.profile)?;
    let mut graph = CallGraph::from_profile(&profile);
    if let Some(path) = &args.startup {
        let text = fsio::read_text(path)?;
        let first =
            FunctionOrder::from_text(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let unknown = graph.set_startup(&profile, &first.functions);
        if unknown > 0 {
            eprintln!(
                "sediment: warning: {}: {unknown} of {} functions are not in the profile, ignored",
                path.display(),
                first.functions.len()
            );
        }
    }
    if args.simulate.is_some() && !args.compare && !args.refine {
        bail!("--simulate needs --compare or --refine");
    }
    if args.fill_rest && args.fill_from.is_none() {
        bail!("--fill-rest needs --fill-from STATIC");
    }
    if args.refine {
        let (binary, output) = match (&args.simulate, &args.output) {
            (Some(b), Some(o)) => (b, o),
            _ => bail!("--refine needs --simulate BIN and -o ORDER"),
        };
        let order = refine(&profile, &graph, binary, &args)?;
        write_order(output, order, &profile, &args)?;
        if !args.compare {
            return Ok(());
        }
    }
    if args.compare {
        let table = compare_table(&graph, args.algorithm)
            .with_context(|| format!("{}: cannot order", args.profile.display()))?;
        write_stdout(table.as_bytes())?;
        if let Some(binary) = &args.simulate {
            let table = simulate_table(&profile, &graph, binary, &args.args, jobs(&args))?;
            write_stdout(table.as_bytes())?;
        }
    }
    if let Some(output) = args.output.as_ref().filter(|_| !args.refine) {
        let order = order_graph(&profile, &graph, args.algorithm)
            .with_context(|| format!("{}: cannot order", args.profile.display()))?;
        write_order(output, order, &profile, &args)?;
    }
    Ok(())
}

/// Writes `order` to `output` atomically, first extended from `--fill-from` when given
/// (checked against `profile`, the one ordered).
fn write_order(
    output: &std::path::Path,
    order: FunctionOrder,
    profile: &sediment_profile::Profile,
    args: &Args,
) -> Result<()> {
    let order = match &args.fill_from {
        Some(path) => fill(order, path, profile, args)?,
        None => order,
    };
    fsio::write_atomic(output, order.to_text().as_bytes())
}

/// Extends `order` with the functions the static graph at `path` reaches from it. The graph
/// must describe the profiled program: as for a binary a profile is bound to
/// ([`crate::cli::matching::require_share`]), enough of the profile's weight must be in
/// functions the graph names. Not its `meta binary`: a static graph read from the objects is
/// often named after another link of them (the bench's `v01-s0` for a profile of `prog`).
fn fill(
    order: FunctionOrder,
    path: &std::path::Path,
    profile: &sediment_profile::Profile,
    args: &Args,
) -> Result<FunctionOrder> {
    let graph = fsio::read_profile(path)?;
    let named: Vec<sediment_profile::FuncKey> =
        graph.functions.iter().map(|f| f.key.clone()).collect();
    crate::cli::matching::require_share(
        &args.profile,
        &path.display().to_string(),
        crate::cli::matching::binary_share(profile, &named),
        crate::cli::matching::DEFAULT_MIN_SHARE,
    )?;
    let params = FillParams {
        max_depth: args.fill_depth,
        callers: args.fill_callers,
        rest: args.fill_rest,
    };
    let sampled = order.functions.len();
    let (filled, added) = fill_order(&order, &graph, &params)
        .with_context(|| format!("{}: cannot fill the order", path.display()))?;
    eprintln!(
        "sediment: {sampled} functions ordered from the profile, {added} added from {}",
        path.display()
    );
    Ok(filled)
}

/// Every algorithm's order replayed by the simulator on one lackey run of `binary`: the table
/// of `sediment sim --order`, one column per algorithm after the binary as linked.
fn simulate_table(
    profile: &sediment_profile::Profile,
    graph: &CallGraph,
    binary: &std::path::Path,
    workload: &[std::ffi::OsString],
    threads: usize,
) -> Result<String> {
    let mut plan = crate::cli::sim::Plan {
        threads,
        ..crate::cli::sim::Plan::as_linked()
    };
    for name in Algorithm::NAMES {
        let order = order_graph(profile, graph, Algorithm::from_name(name)?)?;
        plan.orders.push((name.to_string(), order));
    }
    let layouts = crate::cli::sim::simulate(binary, workload, &"valgrind".into(), &plan, None)?;
    let mut columns = Vec::with_capacity(layouts.len());
    let labels = std::iter::once("as linked").chain(Algorithm::NAMES.iter().copied());
    for (label, per_shift) in labels.zip(layouts) {
        columns.push((label.to_string(), per_shift));
    }
    Ok(format!(
        "\nsimulated on {} (one lackey run, no relink; ratios to the binary as linked):\n{}",
        binary.display(),
        crate::cli::sim::format_table(&columns, None)
    ))
}

/// `-j`, or the number of cores.
fn jobs(args: &Args) -> usize {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// Algorithms that are Sediment's own, not published: `--refine` takes its targets from the
/// others.
const OWN_ALGORITHMS: [&str; 2] = ["tiered", "paged"];

/// `--refine`: every algorithm's order as a candidate, one recorded lackey run, the search of
/// [`sediment_sim::refine()`]; returns the refined order and prints the search's table on stderr.
fn refine(
    profile: &sediment_profile::Profile,
    graph: &CallGraph,
    binary: &std::path::Path,
    args: &Args,
) -> Result<FunctionOrder> {
    use std::collections::HashMap;
    // A profile of another program would leave the search only the names every program has
    // (`main`, `_start`): refused before the (slow) recording, naming both files. Profiles of
    // another build of this program (another linker, other flags) keep their names and pass.
    let simulated = fsio::read_binary(binary)?;
    let defined: Vec<sediment_profile::FuncKey> =
        simulated.functions.iter().map(|s| s.key.clone()).collect();
    crate::cli::matching::require_share(
        &args.profile,
        &binary.display().to_string(),
        crate::cli::matching::binary_share(profile, &defined),
        crate::cli::matching::DEFAULT_MIN_SHARE,
    )?;
    let mut orders = Vec::new();
    for name in Algorithm::NAMES {
        let order = order_graph(profile, graph, Algorithm::from_name(name)?)
            .with_context(|| format!("{}: cannot order", args.profile.display()))?;
        orders.push((*name, order));
    }
    let plan = crate::cli::sim::Plan {
        record: Some(args.refine_events),
        ..crate::cli::sim::Plan::as_linked()
    };
    let (linked, recorded) = recorded_run(binary, args, &plan)?;
    let rec = &recorded.recording;
    let mut units_of: HashMap<&str, Vec<u32>> = HashMap::new();
    for (u, name) in recorded.names.iter().enumerate() {
        units_of
            .entry(name.as_str())
            .or_default()
            .push(u32::try_from(u)?);
    }
    // Items: the names the orders list that the binary defines, first listed first.
    let mut item_of: HashMap<&str, u32> = HashMap::new();
    let mut items: Vec<Vec<u32>> = Vec::new();
    let mut keys = Vec::new();
    for (_, order) in &orders {
        for key in &order.functions {
            let name = key.name.as_str();
            if item_of.contains_key(name) {
                continue;
            }
            if let Some(units) = units_of.get(name) {
                item_of.insert(name, u32::try_from(items.len())?);
                items.push(units.clone());
                keys.push(key.clone());
            }
        }
    }
    if items.is_empty() {
        bail!(
            "{}: none of the profile's functions is in {} (profile of another program?)",
            args.profile.display(),
            binary.display()
        );
    }
    let candidates: Vec<Vec<u32>> = orders
        .iter()
        .map(|(_, order)| {
            let mut listed = vec![false; items.len()];
            let mut perm = Vec::with_capacity(items.len());
            for key in &order.functions {
                if let Some(&i) = item_of.get(key.name.as_str()) {
                    if !std::mem::replace(&mut listed[i as usize], true) {
                        perm.push(i);
                    }
                }
            }
            perm.extend((0..items.len() as u32).filter(|&i| !listed[i as usize]));
            perm
        })
        .collect();
    let reference: Vec<bool> = orders
        .iter()
        .map(|(name, _)| !OWN_ALGORITHMS.contains(name))
        .collect();
    let item_weights = (args.refine_weights == RefineWeights::Profile).then(|| {
        let mut by_name: HashMap<&str, u64> = HashMap::new();
        for f in &profile.functions {
            let w = by_name.entry(f.key.name.as_str()).or_default();
            *w = w.saturating_add(f.self_weight);
        }
        keys.iter()
            .map(|k| by_name.get(k.name.as_str()).copied().unwrap_or(0))
            .collect()
    });
    let params = sediment_sim::RefineParams {
        budget: args.refine_budget,
        item_weights,
        tlb_mean: args.refine_itlb == RefineItlb::Mean,
        footprint_median: args.refine_footprint == RefineFootprint::Shifted,
        i1_over: match args.refine_i1 {
            RefineI1::Shifts => sediment_sim::I1Over::Shifts,
            RefineI1::Median => sediment_sim::I1Over::PhaseMedian,
            RefineI1::Mean => sediment_sim::I1Over::PhaseMean,
        },
        start: match args.refine_start {
            RefineStart::Cheapest => None,
            RefineStart::From(a) => Some(
                Algorithm::NAMES
                    .iter()
                    .position(|n| *n == a.name())
                    .expect("every algorithm is among the candidates"),
            ),
        },
        threads: jobs(args),
        ..Default::default()
    };
    let r = sediment_sim::refine(rec, &items, &candidates, &reference, &params)
        .with_context(|| format!("refining on {}", binary.display()))?;
    eprint!(
        "{}",
        refine_table(rec, &r, &params, &orders, linked, items.len())
    );
    let mut order = FunctionOrder {
        functions: r.order.iter().map(|&i| keys[i as usize].clone()).collect(),
        ..Default::default()
    };
    order
        .meta
        .insert("binary".into(), profile.meta.binary.clone());
    order.meta.insert("algorithm".into(), "refine".into());
    order.meta.insert(
        "parameters".into(),
        format!(
            "budget={} events={} shifts={:?} tlb-shifts={:?} align={} weights={} itlb={} footprint={} i1={} start={}",
            params.budget,
            args.refine_events,
            params.shifts,
            params.tlb_shifts,
            params.align,
            value_name(args.refine_weights),
            value_name(args.refine_itlb),
            value_name(args.refine_footprint),
            value_name(args.refine_i1),
            args.refine_start.name(),
        ),
    );
    Ok(order)
}

/// An option value as the command line spells it.
fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_owned())
}

/// `--refine`'s lackey run of `binary`, with the as-linked I1 32K and iTLB 64 misses: recorded,
/// or read from `--refine-recording` when that holds a run of the same binary, arguments and
/// event cap (and written there after recording when it does not exist).
fn recorded_run(
    binary: &std::path::Path,
    args: &Args,
    plan: &crate::cli::sim::Plan,
) -> Result<([u64; 2], crate::cli::sim::Recorded)> {
    let file = args.refine_recording.as_deref();
    let key = match file {
        Some(_) => recording_key(binary, args)?,
        None => 0,
    };
    let saved = match file.filter(|p| p.exists()) {
        Some(path) => {
            let saved = sediment_sim::Saved::from_bytes(&fsio::read_bytes(path)?)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            if saved.key != key || saved.numbers.len() != 2 {
                bail!(
                    "{}: recorded from another binary, arguments or --refine-events than {} (delete it to record again)",
                    path.display(),
                    binary.display()
                );
            }
            eprintln!(
                "sediment order --refine: the run recorded in {}",
                path.display()
            );
            saved
        }
        None => {
            let (layouts, recorded) =
                crate::cli::sim::record(binary, &args.args, &"valgrind".into(), plan)?;
            let m = &layouts[0][0].misses;
            let saved = sediment_sim::Saved {
                key,
                numbers: vec![m[0], m[2]],
                names: recorded.names,
                recording: recorded.recording,
            };
            if let Some(path) = file {
                fsio::write_atomic(path, &saved.to_bytes())?;
            }
            saved
        }
    };
    let sediment_sim::Saved {
        numbers,
        names,
        recording,
        ..
    } = saved;
    let recorded = crate::cli::sim::Recorded { recording, names };
    Ok(([numbers[0], numbers[1]], recorded))
}

/// What a kept run is keyed by: a hash of the binary's bytes, the event cap and the arguments.
fn recording_key(binary: &std::path::Path, args: &Args) -> Result<u64> {
    use std::hash::Hasher as _;
    use std::os::unix::ffi::OsStrExt as _;
    let mut h = twox_hash::XxHash3_64::new();
    let mut field = |b: &[u8]| {
        h.write_u64(b.len() as u64);
        h.write(b);
    };
    field(&fsio::read_bytes(binary)?);
    field(&(args.refine_events as u64).to_le_bytes());
    args.args.iter().for_each(|a| field(a.as_bytes()));
    Ok(h.finish())
}

/// The search's table for stderr: every candidate's and the refined layout's metrics with
/// their ratios to the targets, and where the search started.
fn refine_table(
    rec: &sediment_sim::Recording,
    r: &sediment_sim::Refined,
    params: &sediment_sim::RefineParams,
    orders: &[(&str, FunctionOrder)],
    linked: [u64; 2],
    functions: usize,
) -> String {
    // The profile-weighted footprints only when the search counted them.
    let columns = match params.item_weights {
        Some(_) => sediment_sim::refine::METRICS,
        None => sediment_sim::refine::RUN_METRICS,
    };
    let mut table = format!(
        "sediment order --refine: {} functions, {} of {} fetches kept (1 window in {}), {} layouts replayed; I1 {} over shifts {:?}{}, iTLB {} over them and {:?}; pages and lines {}\n| layout | {} |\n|---|{}\n",
        functions,
        rec.kept(),
        rec.offered(),
        rec.period(),
        r.evaluations,
        match params.i1_over {
            sediment_sim::I1Over::PhaseMean => "means",
            _ => "medians",
        },
        params.shifts,
        match params.i1_over {
            sediment_sim::I1Over::Shifts => "",
            _ => " and the iTLB's",
        },
        if params.tlb_mean { "means" } else { "medians" },
        params.tlb_shifts,
        if params.footprint_median {
            "the median over all shifts"
        } else {
            "where placed"
        },
        sediment_sim::LayoutMetrics::NAMES[..columns].join(" | "),
        "---:|".repeat(columns)
    );
    let row = |t: &mut String, label: &str, m: &sediment_sim::LayoutMetrics| {
        let cells: Vec<String> = m.values()[..columns]
            .iter()
            .zip(r.targets.values())
            .map(|(v, b)| format!("{v} ({:.3})", *v as f64 / b.max(1) as f64))
            .collect();
        let _ = writeln!(t, "| {label} | {} |", cells.join(" | "));
    };
    for ((name, _), m) in orders.iter().zip(&r.candidates) {
        let own = if OWN_ALGORITHMS.contains(name) {
            " (own)"
        } else {
            ""
        };
        row(&mut table, &format!("{name}{own}"), m);
    }
    row(&mut table, "refined", &r.metrics);
    let _ = writeln!(
        table,
        "(ratios to the best published value of each metric; as linked: I1 32K {}, iTLB 64 {})",
        linked[0], linked[1]
    );
    let cuts: Vec<String> = r
        .tiers
        .iter()
        .map(|t| format!("{}.{}%", t / 10, t % 10))
        .collect();
    let hot = if cuts.is_empty() {
        String::new()
    } else {
        let phased = if r.phased {
            ", the later tiers in first-fetch order"
        } else {
            ""
        };
        format!(" in density tiers cut at {}{phased}", cuts.join(" and "))
    };
    let name = orders[r.start].0;
    let _ = match params.start.filter(|&s| s != r.start) {
        Some(s) => writeln!(
            table,
            "the climbs from {} ended costlier than {name}{hot}: kept that",
            orders[s].0
        ),
        None => writeln!(
            table,
            "started from {name}{hot}; {} moves kept",
            r.moves.len()
        ),
    };
    table
}

/// Writes to stdout; a closed pipe (`| head`) is a normal end.
fn write_stdout(bytes: &[u8]) -> Result<()> {
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// The `--compare` table: one row per algorithm, in name order, the `chosen` one marked.
fn compare_table(g: &CallGraph, chosen: Algorithm) -> Result<String> {
    let total_calls: u64 = g
        .edges
        .iter()
        .filter(|e| e.src != e.dst)
        .fold(0u64, |a, e| a.saturating_add(e.count));
    let has_startup = g.startup.iter().any(Option::is_some);
    let mut out = String::new();
    out.push_str(
        "| algorithm | 4K pages 99% | 4K pages 99.9% | 64B lines 99% | same-page calls | ExtTSP score |",
    );
    out.push_str(if has_startup {
        " startup pages |\n|---|---:|---:|---:|---:|---:|---:|\n"
    } else {
        "\n|---|---:|---:|---:|---:|---:|\n"
    });
    for name in Algorithm::NAMES {
        let a = Algorithm::from_name(name)?;
        let l = a.layout(g)?;
        let fp = |block, share| weight_footprint(&g.sizes, &g.counts, &l, block, share);
        let same_page = page_locality_score(&g.sizes, &g.edges, &l, PAGE_SIZE)?;
        let tsp = ext_tsp_score(&g.sizes, &g.edges, &l, &ExtTspParams::default())?;
        let mark = if a == chosen { " (chosen)" } else { "" };
        let _ = write!(
            out,
            "| {name}{mark} | {} | {} | {} | {:.1}% | {tsp:.4e} |",
            fp(PAGE_SIZE, (99, 100))?,
            fp(PAGE_SIZE, (999, 1000))?,
            fp(64, (99, 100))?,
            if total_calls == 0 {
                0.0
            } else {
                100.0 * same_page as f64 / total_calls as f64
            },
        );
        if has_startup {
            let _ = write!(
                out,
                " {} |",
                startup_pages(&g.sizes, &l, &g.startup, STARTUP_PREFIX)?
            );
        }
        out.push('\n');
    }
    Ok(out)
}
