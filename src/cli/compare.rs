//! `sediment compare BASE NEW... [--json] -- ARGS`: run each binary with ARGS under Valgrind
//! and print instruction-cache, iTLB and page/line footprint metrics side by side, with the
//! ratio of each NEW to BASE. The measuring is `sediment_measure::measure`; this file only
//! labels the columns and prints.
//!
//! The footprint rows say what they count: the cachegrind table's come from callgrind's
//! per-instruction counts (executed instructions), `sediment sim`'s from lackey's fetches
//! (executed bytes, with the lower bound over all layouts).
//!
//! `--shifts K` answers "is this difference more than layout luck?": every binary is also
//! simulated once more by `sediment sim` (valgrind lackey, streamed), with its code virtually
//! shifted by 0, STEP, ..., (K-1)*STEP bytes in the same pass (`sediment_sim::capture` views).
//! The I1 misses and the 99% / 99.9% footprints are then reported only as `median [min-max]`
//! over those K layouts, so that a gain can be read against the spread; the cachegrind table
//! keeps its other rows (instructions, iTLB misses, blocks touched). Each metric is printed
//! once. The lackey run costs about 25 times a cachegrind run (docs/design/simulator.md); the shifts
//! themselves add only array lookups to it.
//!
//! More than one NEW is accepted (the contract names one) so that `sediment demo` can measure
//! the default link once and every relinked binary beside it in one table.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// Arguments of `sediment compare`.
#[derive(clap::Args)]
pub struct Args {
    /// The reference binary (e.g. the default link).
    pub base: PathBuf,
    /// The binary or binaries to compare against BASE (e.g. the relinked one).
    #[arg(required = true)]
    pub new: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Simulations to run at once (default: the number of cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Also report I1 misses and footprints over this many layouts shifted by `--shift-step`
    /// bytes, as median [min-max] (one extra `sediment sim` run per binary).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub shifts: u64,
    /// Bytes between consecutive shifts (default: a 4 KiB page and 80 bytes, so that the
    /// shifts move the code's pages to other iTLB sets and its lines to other L1i sets).
    #[arg(long, value_name = "BYTES", default_value_t = sediment_sim::PAGE_SHIFT_STEP)]
    pub shift_step: u64,
    /// Give every run this file as its standard input (default: empty), for programs driven
    /// by a script on stdin such as `postgres --single`.
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Cachegrind rows (JSON keys) that `--shifts` replaces by their spread over shifted layouts:
/// the I1 misses and the 99% / 99.9% footprints, so that each metric is printed once.
const REPLACED_ROWS: [&str; 6] = [
    "i1_misses_32k_8way",
    "i1_misses_16k_4way",
    "pages_99",
    "pages_99_9",
    "lines_99",
    "lines_99_9",
];

/// `sediment sim` rows printed over the shifted layouts (JSON keys). The iTLB rows stay in the
/// cachegrind table.
const SHIFTED_ROWS: [&str; 7] = [
    "i1_misses_32k_8way",
    "i1_misses_16k_4way",
    "pages_99",
    "pages_99_to_bound",
    "pages_99_9",
    "lines_99",
    "lines_99_9",
];

/// Runs `sediment compare`.
pub fn run(args: Args) -> Result<()> {
    let mut binaries = vec![args.base.clone()];
    binaries.extend(args.new.iter().cloned());
    let plan = crate::pipeline::measure::Plan::with_shifts(args.shifts, args.shift_step)?;
    let mut opts = sediment_measure::Options::default();
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    // Checked here, once, so a wrong `--stdin` is one line before any run starts (a file, a
    // device such as /dev/null or a pipe can be read; a directory cannot).
    if let Some(path) = &args.stdin {
        let meta =
            std::fs::metadata(path).with_context(|| format!("{}: cannot open", path.display()))?;
        if meta.is_dir() {
            bail!(
                "{}: a directory, not a file to read (--stdin)",
                path.display()
            );
        }
    }
    opts.stdin.clone_from(&args.stdin);
    let metrics = sediment_measure::measure(&binaries, &args.args, &opts)?;
    let labels = crate::pipeline::measure::labels(&binaries);
    let columns: Vec<(String, sediment_measure::Metrics)> =
        labels.into_iter().zip(metrics).collect();

    let base_out = &columns[0].1.stdout_fnv1a;
    let differing: Vec<&str> = columns[1..]
        .iter()
        .filter(|(_, m)| &m.stdout_fnv1a != base_out)
        .map(|(l, _)| l.as_str())
        .collect();
    if !differing.is_empty() {
        eprintln!(
            "sediment compare: warning: standard output differs from {} for: {}",
            columns[0].0,
            differing.join(", ")
        );
    }

    let text = if plan.shifts.len() > 1 {
        let shifted = crate::pipeline::measure::simulate_all(
            &binaries,
            &args.args,
            &opts.valgrind,
            opts.jobs,
            &plan,
            args.stdin.as_deref(),
        )?;
        let sim_columns: Vec<(String, Vec<sediment_sim::Metrics>)> = columns
            .iter()
            .map(|(l, _)| l.clone())
            .zip(
                shifted
                    .into_iter()
                    .filter_map(|s| s.layouts.into_iter().next()),
            )
            .collect();
        if args.json {
            #[derive(serde::Serialize)]
            struct Both<'a> {
                cachegrind: sediment_measure::Report<'a>,
                shifted: sediment_sim::table::Report,
            }
            let both = Both {
                cachegrind: sediment_measure::report(&columns),
                shifted: sediment_sim::table::report(&sim_columns, &plan.shifts),
            };
            let mut s = serde_json::to_string_pretty(&both)?;
            s.push('\n');
            s
        } else {
            format!(
                "{}\n# {} (sediment sim)\n{}",
                sediment_measure::format_table_without(&columns, &REPLACED_ROWS),
                plan.describe_shifts().unwrap_or_default(),
                sediment_sim::format_table(&sim_columns, Some(&SHIFTED_ROWS))
            )
        }
    } else if args.json {
        sediment_measure::format_json(&columns)
    } else {
        sediment_measure::format_table(&columns)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
