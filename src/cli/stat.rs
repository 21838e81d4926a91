//! `sediment stat`: run two commands interleaved many times and report, per metric, the
//! medians, the ratio B/A with 95% confidence intervals, Welch's p-value and the difference in
//! standard deviations (`docs/design/statistics.md` explains how to read it).
//!
//! The stage reads like its pipeline: split the command line into A and B, detect which perf
//! counters this CPU has, run the schedule (with a progress bar on a terminal), summarize,
//! print. The work is in `sediment-ab`.
//!
//! With `--layouts K` the two sides are builds instead of commands: link inputs (objects,
//! archives, driver flags) that are each linked K times with the code moved by a pad
//! (`crate::pipeline::relink`: a pad before the code, or after one object with `--pad-after`,
//! as growth at the end of that object would), every layout measured once by simulation as
//! `sediment compare` measures (`crate::pipeline::measure::compare`), and each metric's
//! difference between the builds judged against its spread across the layouts
//! (`sediment_ab::layouts`).

use anyhow::{bail, Context, Result};
use sediment_ab::{progress::Progress, CommandLine, Options, Report};
use std::ffi::OsString;
use std::io::Write;

use crate::pipeline::relink;

/// The separator between command A and command B on the command line (as in GNU parallel).
const SEPARATOR: &str = ":::";

/// Arguments of `sediment stat`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  sediment stat -n 20 -- ./prog.base input ::: ./prog.ordered input\n\n\
Commands are run directly (no shell); use `sh -c '...'` for pipelines. Their output is discarded.\n\n\
Two builds over shifted layouts:\n  sediment stat --layouts 8 -- a/*.o -lm ::: b/*.o -lm -- ARGS"
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
    /// Compare two builds over N layouts each instead of two commands: after `--` come A's
    /// link inputs (objects, archives, driver flags), `:::`, B's, and optionally `--` and the
    /// workload's arguments; each build is linked N times with a pad of 0, BYTES, ...,
    /// (N-1)*BYTES bytes (`--pad-step`), every layout measured once by simulation (as
    /// `compare`), and each metric's difference judged against the spread across layouts
    /// (permutation test over the layouts; at least 4 are needed to call a difference real).
    #[arg(long, value_name = "N", conflicts_with_all = ["runs", "warmup", "pin", "no_alternate"])]
    layouts: Option<usize>,
    /// Pad increment between layouts, in bytes (`--layouts`).
    #[arg(long = "pad-step", value_name = "BYTES", default_value_t = relink::DEFAULT_PAD_STEP, requires = "layouts")]
    pad_step: u64,
    /// Put the pad right after this input (its file name, on both sides) instead of before
    /// all of them: the code of the inputs before it stays, the rest moves, as growth at the
    /// end of that object would (`--layouts`).
    #[arg(long, value_name = "OBJECT", requires = "layouts")]
    pad_after: Option<String>,
    /// The compiler driver that links the layouts (and assembles the pad).
    #[arg(
        long,
        value_name = "PROGRAM",
        default_value = "gcc",
        requires = "layouts"
    )]
    cc: String,
    /// An extra argument for every link of both builds, after the inputs; repeatable.
    #[arg(
        long = "link-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "layouts"
    )]
    link_args: Vec<String>,
    /// Simulations to run at once (`--layouts`; default: the number of cores). A program whose
    /// runs lock a file they share (`postgres --single` and its data directory) needs `-j 1`.
    #[arg(long, short = 'j', value_name = "N", requires = "layouts")]
    jobs: Option<usize>,
    /// Give every run of the workload this file as its standard input (`--layouts`; default:
    /// empty), for programs driven by a script on stdin such as `postgres --single`.
    #[arg(long, value_name = "FILE", requires = "layouts")]
    stdin: Option<std::path::PathBuf>,
    /// CMD_A [ARGS...] ::: CMD_B [ARGS...]; with `--layouts`: INPUTS_A... ::: INPUTS_B... [-- ARGS...]
    #[arg(last = true, required = true, value_name = "CMD_A ::: CMD_B")]
    commands: Vec<String>,
}

/// Most layouts a side.
const MAX_LAYOUTS: usize = 64;

/// Runs `sediment stat`.
pub fn run(args: Args) -> Result<()> {
    if let Some(k) = args.layouts {
        return run_layouts(&args, k);
    }
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

/// `--layouts K`: links K layouts of each build, measures them all in one batch, and prints
/// the comparison over layouts.
fn run_layouts(args: &Args, k: usize) -> Result<()> {
    if !(2..=MAX_LAYOUTS).contains(&k) {
        bail!("--layouts {k}: the number of layouts must be in 2..={MAX_LAYOUTS}");
    }
    if let Some(path) = &args.stdin {
        crate::cli::vocab::check_stdin(path)?;
    }
    let (a, b) = split_commands(&args.commands)?;
    // B's side ends at a `--`, after which come the workload's arguments.
    let (b, workload): (Vec<String>, Vec<OsString>) = match b.0.iter().position(|w| w == "--") {
        Some(at) => (
            b.0[..at].to_vec(),
            b.0[at + 1..].iter().map(OsString::from).collect(),
        ),
        None => (b.0.clone(), Vec::new()),
    };
    if b.is_empty() {
        bail!("build B has no link inputs: expected -- INPUTS_A {SEPARATOR} INPUTS_B [-- ARGS]");
    }
    let sides = [a.0, b];
    let pads: Vec<u64> = (0..k as u64)
        .map(|i| {
            i.checked_mul(args.pad_step)
                .filter(|&p| p <= relink::MAX_PAD_BYTES)
                .with_context(|| {
                    format!(
                        "--pad-step {}: layout {i} would need a pad over {} bytes",
                        args.pad_step,
                        relink::MAX_PAD_BYTES
                    )
                })
        })
        .collect::<Result<_>>()?;
    // Where the pad goes on each side.
    let mut at = Vec::new();
    for (side, words) in ["A", "B"].iter().zip(&sides) {
        at.push(match &args.pad_after {
            None => relink::PadAt::First,
            Some(name) => relink::PadAt::After(
                words
                    .iter()
                    .position(|w| {
                        std::path::Path::new(w)
                            .file_name()
                            .is_some_and(|f| f.to_string_lossy() == name.as_str())
                    })
                    .with_context(|| {
                        format!("--pad-after {name}: no input of build {side} has that file name")
                    })?,
            ),
        });
    }
    let labels: Vec<String> = pads.iter().map(|p| format!("shift-{p}")).collect();
    let tmp = tempfile::Builder::new()
        .prefix("sediment-stat-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let mut binaries = Vec::new();
    for ((side, words), at) in ["a", "b"].iter().zip(&sides).zip(&at) {
        let inputs: Vec<OsString> = words.iter().map(OsString::from).collect();
        let layouts: Vec<relink::Layout<'_>> = pads
            .iter()
            .map(|&p| relink::Layout {
                cc: &args.cc,
                inputs: &inputs,
                link_args: &args.link_args,
                pad: Some((p, *at)),
                flags: &[],
            })
            .collect();
        let named: Vec<String> = labels.iter().map(|l| format!("{side}-{l}")).collect();
        binaries.extend(relink::link_layouts(&layouts, &named, tmp.path(), side)?);
    }
    let mut opts = sediment_measure::onepass::OnePassOptions {
        cache: None,
        stdin: args.stdin.clone(),
        ..Default::default()
    };
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let compared = crate::pipeline::measure::compare(&binaries, &workload, &opts, &|_, _| {})
        .context("sediment stat --layouts")?;
    for n in &compared.notes {
        eprintln!("sediment stat: {n}");
    }
    let metrics: Vec<sediment_measure::Metrics> =
        compared.columns.into_iter().map(|(_, m)| m).collect();
    let (ma, mb) = metrics.split_at(k);
    for (side, ms) in [("A", ma), ("B", mb)] {
        let differing: Vec<&str> = ms
            .iter()
            .zip(&labels)
            .filter(|(m, _)| m.stdout_fnv1a != ms[0].stdout_fnv1a)
            .map(|(_, l)| l.as_str())
            .collect();
        if !differing.is_empty() {
            eprintln!(
                "sediment stat: warning: build {side}: standard output differs from shift-0 for: {}",
                differing.join(", ")
            );
        }
    }
    let summaries = sediment_measure::ROWS
        .iter()
        .enumerate()
        .map(|(i, (key, _, get))| {
            let a: Vec<f64> = ma.iter().map(|m| get(m) as f64).collect();
            let b: Vec<f64> = mb.iter().map(|m| get(m) as f64).collect();
            sediment_ab::layouts::summarize_layouts(key, &a, &b, args.seed.wrapping_add(i as u64))
        })
        .collect();
    let where_ = match &args.pad_after {
        None => "before the code".to_string(),
        Some(o) => format!("after {o}"),
    };
    let report = sediment_ab::layouts::LayoutReport {
        build_a: sides[0].join(" "),
        build_b: sides[1].join(" "),
        layouts: format!(
            "{k} layouts each: a pad of 0..={} bytes in steps of {} {where_} ({} default linker{}), measured by simulation",
            pads[k - 1],
            args.pad_step,
            args.cc,
            if workload.is_empty() {
                String::new()
            } else {
                format!("; workload: {}", sides_args(&workload))
            }
        ),
        labels,
        metrics: summaries,
    };
    let text = if args.json {
        sediment_ab::layouts::format_layout_json(&report)
    } else {
        sediment_ab::layouts::format_layout_table(&report)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the report to standard output")?;
    Ok(())
}

/// The workload's arguments as one line.
fn sides_args(words: &[OsString]) -> String {
    words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
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
