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
//! saw go, never the order of the ones it did. It follows any algorithm (`crate::pipeline::order`).
//!
//! `--refine` (hidden) is `sediment tune` under its former name, kept for one release: it runs
//! the tune stage on `--simulate FILE` and writes its order, filled as above.
//!
//! `--startup FILE` gives the first-execution order (an order file listing functions in the
//! order they first ran) that `--algorithm bp` partitions for; names the profile lacks are one
//! counted warning. `--compare` runs every algorithm on the same profile and prints a table of
//! what the profile predicts for each layout (see `docs/design/algorithms.md`, "Comparing"), so the
//! user sees why one is chosen; every column is computed from the profile alone, so the table
//! is the same bytes on every run. With `--simulate BIN` the table starts with BIN's current
//! layout, the replay table follows, and its last line recommends an algorithm from the replay
//! only (or says that ordering does not pay).

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::{self, tune};
use anyhow::{anyhow, Context, Result};
use sediment_order::{
    ext_tsp_score, order_graph, page_locality_score, startup_pages, weight_footprint, Algorithm,
    CallGraph, ExtTspParams, FillParams, PAGE_SIZE,
};
use sediment_profile::FunctionOrder;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments of `sediment order`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("simulated").args(["compare", "refine"]).multiple(true)))]
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
    #[arg(long, requires = "fill_from")]
    pub fill_rest: bool,
    /// First-execution order for `bp` (and the startup column of `--compare`): an order file
    /// listing functions in the order they first ran.
    #[arg(long, value_name = "FILE")]
    pub startup: Option<PathBuf>,
    /// Print every algorithm's predicted metrics for this profile as a table on stdout.
    #[arg(long)]
    pub compare: bool,
    /// With `--compare`: also replay every algorithm's order through Sediment's simulator on one
    /// valgrind run of binary FILE (the one the profile was recorded on, built with
    /// `-ffunction-sections`), with the workload's arguments after `--`: predicted iTLB and I1
    /// misses and pages/lines, with no relink (`sediment sim --order`). The first table then
    /// starts with FILE as linked, and a last line recommends an algorithm from the replay.
    #[arg(long, value_name = "FILE", requires = "simulated")]
    pub simulate: Option<PathBuf>,
    /// `sediment tune` under its former name (hidden, kept for one release): needs `--simulate
    /// BIN` and `-o`.
    #[arg(long, hide = true, requires_all = ["simulate", "output"])]
    pub refine: bool,
    /// `sediment tune --budget` (hidden alias).
    #[arg(long, hide = true, value_name = "N", requires = "refine")]
    pub refine_budget: Option<usize>,
    /// `sediment tune --events` (hidden alias).
    #[arg(long, hide = true, value_name = "N", requires = "refine")]
    pub refine_events: Option<usize>,
    /// `sediment tune --recording` (hidden alias).
    #[arg(long, hide = true, value_name = "FILE", requires = "refine")]
    pub refine_recording: Option<PathBuf>,
    /// `sediment tune --start` (hidden alias).
    #[arg(long, hide = true, value_name = "ALGORITHM", requires = "refine", value_parser = <tune::Start as std::str::FromStr>::from_str)]
    pub refine_start: Option<tune::Start>,
    /// With `--simulate`: threads replaying each layout (default: the number of cores);
    /// neither the order nor the table depends on it.
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
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
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
    // `--refine` (clap requires `--simulate` and `-o` with it): the tune stage's order.
    if let (true, Some(binary), Some(output)) = (args.refine, &args.simulate, &args.output) {
        let tuned = tune::tune(&tune::Request {
            profile: &profile,
            profile_path: &args.profile,
            binary,
            workload: &args.args,
            recording: args.refine_recording.as_deref(),
            budget: args.refine_budget.unwrap_or(tune::DEFAULT_BUDGET),
            events: args.refine_events.unwrap_or(tune::DEFAULT_EVENTS),
            start: args.refine_start.unwrap_or_default(),
            threads: jobs(&args),
        })?;
        for note in &tuned.notes {
            eprintln!("sediment tune: {note}");
        }
        eprint!("{}", tuned.table);
        write_order(output, tuned.order, &profile, &args)?;
    }
    if args.compare {
        let linked = match &args.simulate {
            Some(binary) => Some((binary.as_path(), linked_layout(&profile, &graph, binary)?)),
            None => None,
        };
        let table = compare_table(&graph, args.algorithm, linked.as_ref())
            .with_context(|| format!("{}: cannot order", args.profile.display()))?;
        write_stdout(table.as_bytes())?;
        if let Some(binary) = &args.simulate {
            let table = simulate_table(&profile, &graph, binary, &args, jobs(&args))?;
            write_stdout(table.as_bytes())?;
        }
    }
    if let Some(output) = args.output.as_ref().filter(|_| !args.refine) {
        let order = pipeline::order::order(&profile, &args.profile, &graph, args.algorithm)?;
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
        Some(path) => {
            let graph = fsio::read_profile(path)?;
            let with = pipeline::order::Fill {
                graph: &graph,
                path,
                params: FillParams {
                    max_depth: args.fill_depth,
                    callers: args.fill_callers,
                    rest: args.fill_rest,
                },
            };
            let filled = pipeline::order::fill(&order, profile, &args.profile, &with)?;
            eprintln!(
                "sediment: {} functions ordered from the profile, {} added from {}",
                filled.sampled,
                filled.added,
                path.display()
            );
            filled.order
        }
        None => order,
    };
    fsio::write_atomic(output, order.to_text().as_bytes())
}

/// Every algorithm's order replayed by the simulator on one valgrind run of `binary`: the table
/// of `sediment sim --order`, one column per algorithm after the binary as linked.
fn simulate_table(
    profile: &sediment_profile::Profile,
    graph: &CallGraph,
    binary: &std::path::Path,
    args: &Args,
    threads: usize,
) -> Result<String> {
    let workload = &args.args;
    let mut plan = crate::pipeline::measure::Plan {
        threads,
        ..crate::pipeline::measure::Plan::as_linked()
    };
    for name in Algorithm::NAMES {
        let order = order_graph(profile, graph, Algorithm::from_name(name)?)?;
        plan.orders.push((name.to_string(), order));
    }
    let simulated =
        crate::pipeline::measure::simulate(binary, workload, &"valgrind".into(), &plan, None)?;
    for w in &simulated.warnings {
        eprintln!("sediment sim: warning: {}", args.demangle.text(w));
    }
    let layouts = simulated.layouts;
    let mut columns = Vec::with_capacity(layouts.len());
    let labels = std::iter::once("as linked").chain(Algorithm::NAMES.iter().copied());
    for (label, per_shift) in labels.zip(layouts) {
        columns.push((label.to_string(), per_shift));
    }
    Ok(format!(
        "\nsimulated on {} (one valgrind run, no relink; ratios to the binary as linked):\n{}{}\n",
        binary.display(),
        sediment_sim::format_table(&columns, None),
        recommend(&columns)
    ))
}

/// The recommendation from the replay: the algorithm whose order has the fewest simulated
/// iTLB misses (64 entries; median over shifts; then I1 32K misses, then name order), if it
/// beats the binary as linked (the first column) by at least 1% on iTLB-64 misses, or ties
/// them and has at least 1% fewer I1 32K misses. Otherwise ordering is said not to pay.
fn recommend(columns: &[(String, Vec<sediment_sim::Metrics>)]) -> String {
    fn median(v: &[sediment_sim::Metrics], f: fn(&sediment_sim::Metrics) -> u64) -> u64 {
        let mut x: Vec<u64> = v.iter().map(f).collect();
        x.sort_unstable();
        x.get(x.len().saturating_sub(1) / 2).copied().unwrap_or(0)
    }
    let key = |m: &[sediment_sim::Metrics]| {
        (
            median(m, |m| m.itlb_misses_64),
            median(m, |m| m.i1_misses_32k_8way),
        )
    };
    let Some(((_, base), rest)) = columns.split_first() else {
        return String::new();
    };
    let base = key(base);
    let best = rest
        .iter()
        .map(|(name, m)| (key(m), name))
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    match best {
        Some(((itlb, i1), name))
            if itlb * 100 <= base.0 * 99 && itlb < base.0
                || itlb <= base.0 && i1 * 100 <= base.1 * 99 && i1 < base.1 =>
        {
            format!(
                "replay: `{name}` has the fewest simulated iTLB-64 misses ({itlb}, against {} as \
             linked; I1 32K {i1} against {}): order with --algorithm {name}",
                base.0, base.1
            )
        }
        _ => format!(
            "replay: no algorithm's order has 1% fewer simulated iTLB-64 (or, at equal iTLB, \
             I1 32K) misses than the binary as linked ({}, {}): ordering does not pay on this \
             workload",
            base.0, base.1
        ),
    }
}

/// `-j`, or the number of cores.
fn jobs(args: &Args) -> usize {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// Writes to stdout; a closed pipe (`| head`) is a normal end.
fn write_stdout(bytes: &[u8]) -> Result<()> {
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// The profile's functions as `binary` places them now ([`sediment_order::as_placed`]): the
/// graph with the gaps between them, and its layout, for the `--compare` row of the current
/// layout.
fn linked_layout(
    profile: &sediment_profile::Profile,
    graph: &CallGraph,
    binary: &std::path::Path,
) -> Result<(CallGraph, Vec<u32>)> {
    let b = fsio::read_binary(binary)?;
    let at: std::collections::HashMap<&sediment_profile::FuncKey, (u64, u64)> = b
        .functions
        .iter()
        .map(|f| (&f.key, (f.address, f.size)))
        .collect();
    let placed: Vec<Option<(u64, u64)>> = profile
        .functions
        .iter()
        .map(|f| at.get(&f.key).copied())
        .collect();
    Ok(sediment_order::as_placed(graph, &placed, PAGE_SIZE))
}

/// The `--compare` table: with `linked` (the binary of `--simulate` and its current layout), a
/// first row for the binary as linked; then one row per algorithm, in name order, the `chosen`
/// one marked.
fn compare_table(
    g: &CallGraph,
    chosen: Algorithm,
    linked: Option<&(&std::path::Path, (CallGraph, Vec<u32>))>,
) -> Result<String> {
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
    let mut row = |label: &str, g: &CallGraph, l: &[u32]| -> Result<()> {
        let fp = |block, share| weight_footprint(&g.sizes, &g.counts, l, block, share);
        let same_page = page_locality_score(&g.sizes, &g.edges, l, PAGE_SIZE)?;
        let tsp = ext_tsp_score(&g.sizes, &g.edges, l, &ExtTspParams::default())?;
        let _ = write!(
            out,
            "| {label} | {} | {} | {} | {:.1}% | {tsp:.4e} |",
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
                startup_pages(&g.sizes, l, &g.startup, STARTUP_PREFIX)?
            );
        }
        out.push('\n');
        Ok(())
    };
    if let Some((binary, (placed, layout))) = linked {
        row(
            &format!(
                "as linked ({})",
                sediment_profile::escape(&binary.display().to_string())
            ),
            placed,
            layout,
        )?;
    }
    for name in Algorithm::NAMES {
        let a = Algorithm::from_name(name)?;
        let l = a.layout(g)?;
        let mark = if a == chosen { " (chosen)" } else { "" };
        row(&format!("{name}{mark}"), g, &l)?;
    }
    out.push_str(
        "(predicted from the profile's weights alone, each function's spread over its bytes: pages \
         holding 99%/99.9% of the weight stand for iTLB reach and page faults, 64B lines for the \
         I-cache footprint, same-page calls and the ExtTSP score for caller-callee distance. \
         These estimates have ranked algorithms differently from measured iTLB misses; \
         recommend from the replay of --simulate BIN, or measure with `sediment compare`)\n",
    );
    Ok(out)
}
