//! `sediment sim BINARY... [--json] [-j N] -- ARGS`: run each binary with ARGS under valgrind
//! with Sediment's own trace tool (lackey where it cannot be built), stream its instruction
//! trace into Sediment's own simulator (`sediment_sim::capture`) and print I-cache and iTLB
//! misses for several geometries, and the page and line footprint of the binary's own code
//! with its lower bound, side by side like `sediment compare`.
//!
//! The run is `crate::pipeline::measure::simulate_all`: the tool and its runs live in
//! `sediment_valgrind::tracer` (lackey's in `sediment_valgrind::lackey`, the location of the
//! code for it in `sediment_valgrind::maps`), the replay in `sediment_sim::bintrace` (and
//! `sediment_sim::lackey`), lld's placement rule in `sediment_link::placement`. One pass
//! answers every geometry of `sediment_sim::GEOMETRIES`.
//!
//! Other layouts in the same run (`sediment_sim::capture` views):
//! - `--shifts K [--shift-step S]`: every layout is also simulated with the binary's code
//!   moved by `S, 2S, ... (K-1)S` bytes, as a pad before the code would move it, and each
//!   cell becomes `median [min-max]` over the K shifts. The default step,
//!   [`sediment_sim::PAGE_SHIFT_STEP`], moves the pages too. I1 miss counts move a lot with
//!   addresses alone (docs/design/statistics.md), so a single I1 figure is layout luck; the median over
//!   shifts is what `sediment compare --shifts` reports.
//! - `--order FILE` (one binary only, repeatable): a proposed function order is replayed
//!   without relinking. Each executed address of the binary's code is mapped to (function,
//!   offset) through the binary's function symbols, and the functions are placed the way lld
//!   places a `--symbol-ordering-file` link: the ordered functions first from the start of
//!   the first function, each aligned to `--align` bytes (gcc's `-O2` function alignment is
//!   16), then every other function in address order (lld's input order for a default link).
//!   Code outside every function symbol (`.init`, the PLT, padding) and `_init`/`_fini`
//!   (their own sections, which an ordering file does not move) keep their addresses.
//!   Entries resolve as lld resolves a symbol-ordering file, by name alone: every function
//!   of that name (statics of other files too) takes the position of the name's first entry,
//!   ties kept in address order. This is what `sediment link --linker lld` output gives
//!   (it warns about such shared names), so a prediction is checked against a real relink.
//!   Entries naming no function of the binary are one counted warning.
//! - `--first-order FILE` (one binary only): writes the binary's functions in the order their
//!   code first ran, an order file for `sediment order --algorithm bp --startup FILE`. The
//!   capture notes each distinct executed range of the code when it first runs
//!   (`Capture::first_executed`); each is moved back to its link-time address and looked up in
//!   the symbol table, and a function is listed at its first range.
//!
//! Output is deterministic: every number is a simulation count; wall time is not printed.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sediment_sim::{format_json, format_table, Metrics};

use crate::pipeline::measure::{labels, simulate_all, Plan};

/// Arguments of `sediment sim`.
#[derive(clap::Args)]
pub struct Args {
    /// The binaries to simulate; the first is the base of the ratio columns.
    #[arg(required = true, value_name = "BINARY")]
    pub binaries: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Threads (default: the number of cores): binaries simulated at once, and those left
    /// over with fewer binaries feed each run's shifted and reordered layouts.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// The `valgrind` executable.
    #[arg(long, value_name = "PROGRAM", default_value = "valgrind")]
    pub valgrind: OsString,
    /// Layouts per column: the code as linked and shifted by BYTES, 2*BYTES, ... bytes; cells
    /// become `median [min-max]` over them.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub shifts: u64,
    /// Bytes between consecutive shifts (default: a 4 KiB page and 80 bytes, so that the
    /// shifts move the code's pages to other iTLB sets and its lines to other L1i sets).
    #[arg(long, value_name = "BYTES", default_value_t = sediment_sim::PAGE_SHIFT_STEP)]
    pub shift_step: u64,
    /// A proposed function order (`sediment order` output) to replay without relinking, as
    /// an extra column; repeatable; needs exactly one binary.
    #[arg(long = "order", value_name = "FILE")]
    pub orders: Vec<PathBuf>,
    /// Write the binary's functions in the order they first ran (an order file, the
    /// first-execution order `sediment order --algorithm bp --startup` takes); one binary only.
    #[arg(long, value_name = "FILE")]
    pub first_order: Option<PathBuf>,
    /// Alignment in bytes of each function placed by `--order`.
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub align: u64,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
}

/// Most `--order` files (each is `--shifts` more sets of arrays).
const MAX_ORDERS: usize = 16;

/// Runs `sediment sim`.
pub fn run(args: Args) -> Result<()> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let mut plan = Plan::with_shifts(args.shifts, args.shift_step)?;
    plan.align = args.align;
    if !args.orders.is_empty() {
        if args.binaries.len() != 1 {
            bail!("--order replays proposed orders of one binary; give exactly one binary");
        }
        if args.orders.len() > MAX_ORDERS {
            bail!("at most {MAX_ORDERS} --order files");
        }
        if args.align == 0 || args.align > 4096 {
            bail!("--align must be between 1 and 4096, not {}", args.align);
        }
        let labels = labels(&args.orders);
        for (path, label) in args.orders.iter().zip(labels) {
            let text = crate::fsio::read_text(path)?;
            let order = sediment_profile::FunctionOrder::from_text(&text)
                .with_context(|| path.display().to_string())?;
            plan.orders.push((label, order));
        }
    }
    if args.first_order.is_some() {
        if args.binaries.len() != 1 {
            bail!(
                "--first-order records one binary's first-execution order; give exactly one binary"
            );
        }
        plan.first_order = true;
    }
    let results = simulate_all(
        &args.binaries,
        &args.args,
        &args.valgrind,
        jobs,
        &plan,
        None,
    )?;
    if let Some(path) = &args.first_order {
        let first = results
            .first()
            .map(|s| s.first_executed.clone())
            .unwrap_or_default();
        let mut order = sediment_profile::FunctionOrder {
            functions: first,
            ..Default::default()
        };
        order
            .meta
            .insert("binary".into(), args.binaries[0].display().to_string());
        order
            .meta
            .insert("source".into(), "lackey first execution".into());
        crate::fsio::write_atomic(path, order.to_text().as_bytes())?;
    }
    let mut columns: Vec<(String, Vec<Metrics>)> = Vec::new();
    for (label, simulated) in labels(&args.binaries).into_iter().zip(results) {
        for w in &simulated.warnings {
            eprintln!("sediment sim: warning: {}", args.demangle.text(w));
        }
        let mut layouts = simulated.layouts.into_iter();
        if let Some(linked) = layouts.next() {
            columns.push((label.clone(), linked));
        }
        for ((order_label, _), m) in plan.orders.iter().zip(layouts) {
            columns.push((format!("{label}@{order_label}"), m));
        }
    }
    let differing: Vec<&str> = columns[1..]
        .iter()
        .filter(|(_, m)| m[0].stdout_fnv1a != columns[0].1[0].stdout_fnv1a)
        .map(|(l, _)| l.as_str())
        .collect();
    if !differing.is_empty() {
        eprintln!(
            "sediment sim: warning: standard output differs from {} for: {}",
            columns[0].0,
            differing.join(", ")
        );
    }
    let text = if args.json {
        format_json(&columns, &plan.shifts)
    } else {
        let mut t = plan
            .describe_shifts()
            .map_or_else(String::new, |d| format!("# {d}\n"));
        t.push_str(&format_table(&columns, None));
        t
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
