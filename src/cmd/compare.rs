//! `sediment compare BASE NEW... [--json] -- ARGS`: run each binary with ARGS under Valgrind
//! and print instruction-cache, iTLB and page/line footprint metrics side by side, with the
//! ratio of each NEW to BASE. The measuring is `sediment_measure::measure`; this file only
//! labels the columns and prints.
//!
//! More than one NEW is accepted (the contract names one) so that `sediment demo` can measure
//! the default link once and every relinked binary beside it in one table.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

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
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true)]
    pub args: Vec<OsString>,
}

/// Runs `sediment compare`.
pub fn run(args: Args) -> Result<()> {
    let mut binaries = vec![args.base.clone()];
    binaries.extend(args.new.iter().cloned());
    let mut opts = sediment_measure::Options::default();
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let metrics =
        sediment_measure::measure(&binaries, &args.args, &opts).context("sediment compare")?;
    let labels = labels(&binaries);
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

    let text = if args.json {
        sediment_measure::format_json(&columns)
    } else {
        sediment_measure::format_table(&columns)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Column labels: each binary's file name, or its path as given when file names collide.
pub(crate) fn labels(binaries: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = binaries
        .iter()
        .map(|b| {
            b.file_name().map_or_else(
                || b.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    if unique.len() == names.len() {
        names
    } else {
        binaries.iter().map(|b| b.display().to_string()).collect()
    }
}
