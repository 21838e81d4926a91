//! `sediment compare BASE NEW... [--json] -- ARGS`: run each binary with ARGS under Valgrind
//! and print instruction-cache, iTLB and page/line footprint metrics side by side, with the
//! ratio of each NEW to BASE. The measuring is `sediment_measure::measure`; this file only
//! labels the columns and prints.
//!
//! `--shifts K` answers "is this difference more than layout luck?" for the I1 rows: every
//! binary is also simulated once more by `sediment sim` (valgrind lackey, streamed), with its
//! code virtually shifted by 0, STEP, ..., (K-1)*STEP bytes in the same pass
//! (`sediment_sim::capture` views), and the I1 misses are then reported only as
//! `median [min-max]` over those K layouts, beside the iTLB and page rows over the same
//! shifts, so that a gain can be read against the spread. The cachegrind table keeps its
//! exact rows except the I1 ones. The lackey run costs about 25 times a cachegrind run
//! (docs/design/simulator.md); the shifts themselves add only array lookups to it.
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
    /// Also report I1 misses over this many layouts shifted by `--shift-step` bytes, as median
    /// [min-max] (one extra `sediment sim` run per binary).
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

/// Cachegrind rows that `--shifts` replaces by their spread over shifted layouts.
const I1_ROWS: [&str; 2] = ["I1 misses 32K/8-way", "I1 misses 16K/4-way"];

/// `sediment sim` rows printed over the shifted layouts (JSON keys).
const SHIFTED_ROWS: [&str; 8] = [
    "i1_misses_32k_8way",
    "i1_misses_16k_4way",
    "itlb_misses_64",
    "itlb_misses_128",
    "pages_99",
    "pages_99_to_bound",
    "pages_99_9",
    "lines_99",
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
        let sim_columns: Vec<(String, Vec<sediment_sim::SimMetrics>)> = columns
            .iter()
            .map(|(l, _)| l.clone())
            .zip(
                shifted
                    .into_iter()
                    .filter_map(|s| s.layouts.into_iter().next()),
            )
            .collect();
        if args.json {
            format!(
                "{{\n\"cachegrind\": {},\n\"shifted\": {}}}\n",
                sediment_measure::format_json(&columns).trim_end(),
                sediment_sim::format_json(&sim_columns, &plan.shifts).trim_end()
            )
        } else {
            format!(
                "{}\n# {} (sediment sim)\n{}",
                sediment_measure::format_table_without(&columns, &I1_ROWS),
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
