//! `sediment stat`: run two commands interleaved many times and report, per metric, the
//! medians, the ratio B/A with 95% confidence intervals, Welch's p-value and the difference in
//! standard deviations (`docs/design/statistics.md` explains how to read it).
//!
//! The stage reads like its pipeline: split the command line into A and B, detect which perf
//! counters this CPU has, run the schedule (with a progress bar on a terminal), summarize,
//! print. The work is in `sediment-ab`.

use anyhow::{bail, Context, Result};
use sediment_ab::{progress::Progress, CommandLine, Options, Report};
use std::io::Write;

/// The separator between command A and command B on the command line (as in GNU parallel).
const SEPARATOR: &str = ":::";

/// Arguments of `sediment stat`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  sediment stat -n 20 -- ./prog.base input ::: ./prog.ordered input\n\n\
Commands are run directly (no shell); use `sh -c '...'` for pipelines. Their output is discarded."
)]
pub struct Args {
    /// Measured runs of each command (at least 2).
    #[arg(short = 'n', long = "runs", default_value_t = 10)]
    runs: usize,
    /// Unmeasured warm-up runs of each command before the measured ones.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Pin every run to this CPU (with `taskset -c CPU`).
    #[arg(long, value_name = "CPU")]
    pin: Option<usize>,
    /// Always run A before B in each pair, instead of alternating A B, B A (ABBA).
    #[arg(long)]
    no_alternate: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed of the bootstrap of the ratio of medians (same seed, same intervals).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// CMD_A [ARGS...] ::: CMD_B [ARGS...]
    #[arg(last = true, required = true, value_name = "CMD_A ::: CMD_B")]
    commands: Vec<String>,
}

/// Runs `sediment stat`.
pub fn run(args: Args) -> Result<()> {
    let (a, b) = split_commands(&args.commands)?;
    if args.runs < 2 {
        bail!(
            "-n {}: at least 2 runs of each command are needed for a variance",
            args.runs
        );
    }
    if let Some(cpu) = args.pin {
        check_pin(cpu)?;
    }

    // Which perf counters this CPU has; none -> rusage and wall time only.
    let perf = sediment_ab::detect_perf();
    let opts = Options {
        runs: args.runs,
        warmup: args.warmup,
        pin: args.pin,
        alternate: !args.no_alternate,
        perf_events: perf.events.clone(),
    };

    // Interleaved runs, with a progress bar when stderr is a terminal.
    let mut bar = Progress::new(2 * (args.runs + args.warmup));
    let samples = sediment_ab::run_ab(&a, &b, &opts, &mut |done, total| bar.update(done, total));
    bar.finish();
    let samples = samples?;

    // Statistics and output.
    let report = Report {
        command_a: a.display(),
        command_b: b.display(),
        runs: args.runs,
        warmup: args.warmup,
        order: if opts.alternate { "abba" } else { "ab" },
        pinned_cpu: args.pin,
        seed: args.seed,
        perf_events: perf.events,
        unavailable: perf.unavailable.iter().map(|m| m.name()).collect(),
        metrics: sediment_ab::summarize(&samples, args.seed),
    };
    let text = if args.json {
        sediment_ab::format_json(&report)
    } else {
        sediment_ab::format_table(&report)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the report to standard output")?;
    Ok(())
}

/// Splits `A... ::: B...` at the first separator; both sides must be non-empty.
fn split_commands(words: &[String]) -> Result<(CommandLine, CommandLine)> {
    let Some(at) = words.iter().position(|w| w == SEPARATOR) else {
        bail!("expected two commands separated by `{SEPARATOR}`: -- CMD_A ARGS {SEPARATOR} CMD_B ARGS");
    };
    let (a, b) = (&words[..at], &words[at + 1..]);
    if a.is_empty() || b.is_empty() {
        bail!(
            "command {} is empty: expected -- CMD_A ARGS {SEPARATOR} CMD_B ARGS",
            if a.is_empty() { "A" } else { "B" }
        );
    }
    Ok((CommandLine(a.to_vec()), CommandLine(b.to_vec())))
}

/// Fails early, with one line, if `taskset -c CPU` cannot run here (no such CPU, no taskset).
fn check_pin(cpu: usize) -> Result<()> {
    let out = std::process::Command::new("taskset")
        .args(["-c", &cpu.to_string(), "true"])
        .output()
        .with_context(|| format!("--pin {cpu}: cannot run taskset"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "--pin {cpu}: taskset refused it: {}",
            err.lines().next().unwrap_or("").trim()
        );
    }
    Ok(())
}
