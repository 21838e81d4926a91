//! `sediment noise -n N [--vary shuffle|shift] [--pad-step BYTES] [--cc CC] [--link-arg ARG]...
//! [--json] OBJECTS... -- ARGS`: the layout-noise baseline.
//!
//! A program's cache and TLB behaviour depends on addresses: moving every function by a few
//! bytes, or linking the same sections in another order, changes which code shares a cache
//! set, a line or a page, without changing a single instruction executed (Mytkowicz et al.,
//! "Producing Wrong Data Without Doing Anything Obviously Wrong!", ASPLOS 2009). Before
//! believing that an ordering beat the default link by X%, one should know how far the metrics
//! move under layouts that nobody chose. This command links N such layouts of the same
//! objects into a temporary directory, measures each exactly as `sediment compare` does
//! (`crate::pipeline::measure::compare`: one traced run per variant, all in one parallel batch, uncached), and prints per metric
//! the median, the minimum, the maximum and `(max - min) / median`
//! (`sediment_measure::spread`).
//!
//! The two kinds of layout:
//! - `shuffle` (the default): variant `i` (1-based) is linked by lld with
//!   `--shuffle-sections=.text*=i`, lld's seeded shuffle of the matching input sections
//!   (syntax `--shuffle-sections=<section-glob>=<seed>` since lld 13; seed 0 would be random
//!   and -1 a reversal, so the seeds are 1..=N). With `-ffunction-sections` objects this is a
//!   random function order, the STABILIZER idea of randomised code placement (Curtsinger and
//!   Berger, ASPLOS 2013) done once per link instead of at run time. Only code sections are
//!   shuffled: the metrics are instruction-side, and shuffling data would also reorder
//!   sections such as `.init_array` pieces that some programs depend on.
//! - `shift`: variant `k` (0-based) is linked with the driver's default linker and a pad object
//!   first on the line, whose only content is a `.text.0sediment_pad` section of `k * STEP`
//!   zero bytes. Sediment writes the pad as a two-line assembler file and compiles it with
//!   `CC -c`, so no C is needed. When a `--link-arg` names an ordering file (an lld
//!   symbol-ordering file, a gold section-ordering file, a GNU ld script or fragment, as
//!   `sediment link-flags` prints them), each variant links with a copy that lists the pad
//!   first, so that the pad lands before the ordered code rather than after it (see
//!   `crate::pipeline::relink::pad_first`). Every function of the objects that lands after the pad in
//!   `.text` moves by the same amount; the code itself is unchanged. The default step,
//!   [`DEFAULT_SHIFT_STEP`], is 80 bytes.
//!
//! The variants must print the same standard output (a warning lists those that do not).
//! Variant binaries are named with a fixed width (`layout-0001`), so that the path, and thus
//! the stack contents at start-up, has the same length in every variant; in the output they
//! are labelled `seed-S` or `shift-BYTES`, never by their temporary path, so the same inputs
//! give byte-identical output.
//!
//! Turned down: shifting through the environment size or a pad at the end of the stack (the
//! Mytkowicz effect on data). The metrics here are instruction-side and simulated, so only
//! code addresses change them.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sediment_measure::spread::spreads;
use sediment_measure::Metrics;

use crate::fsio;
use crate::pipeline::relink;

/// Default shift step of `--vary shift`, in bytes ([`relink::DEFAULT_PAD_STEP`]).
pub const DEFAULT_SHIFT_STEP: u64 = relink::DEFAULT_PAD_STEP;

/// Most variants one run may ask for (each is a link and five Valgrind runs).
const MAX_VARIANTS: usize = 1000;

use relink::MAX_PAD_BYTES;

/// The input-section glob lld shuffles in `--vary shuffle`.
const SHUFFLE_GLOB: &str = ".text*";

/// Arguments of `sediment noise`.
#[derive(clap::Args)]
pub struct Args {
    /// Number of layouts to build and measure.
    #[arg(short = 'n', long = "variants", value_name = "N")]
    pub n: usize,
    /// How the layouts differ: `shuffle`, lld --shuffle-sections with seeds 1..=N; `shift`, a
    /// pad of 0, BYTES, ..., (N-1)*BYTES bytes before the code (BYTES: `--pad-step`).
    #[arg(long = "vary", alias = "mode", value_name = "HOW", default_value = "shuffle", value_parser = ["shuffle", "shift"])]
    pub mode: String,
    /// Pad increment of `--vary shift`, in bytes.
    #[arg(long = "pad-step", alias = "shift-step", value_name = "BYTES", default_value_t = DEFAULT_SHIFT_STEP)]
    pub shift_step: u64,
    /// The compiler driver that links (and assembles the pad).
    #[arg(long, value_name = "PROGRAM", default_value = "gcc")]
    pub cc: String,
    /// An extra argument for every link, after the objects (e.g. `--link-arg=-lm`); repeatable.
    #[arg(long = "link-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub link_args: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Simulations to run at once (default: the number of cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// The relocatable objects (or static archives) of the program, in link order.
    #[arg(required = true, value_name = "OBJECT")]
    pub objects: Vec<PathBuf>,
    /// Arguments passed to every variant (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// One layout to build: its output label and how its link differs from the others.
struct Variant {
    label: String,
    /// Bytes of pad placed before the objects (`shift`), if any.
    pad: Option<u64>,
    /// Extra driver flags (`shuffle`).
    flags: Vec<String>,
}

/// Runs `sediment noise`.
pub fn run(args: Args) -> Result<()> {
    let variants = plan(&args)?;
    check_objects(&args)?;
    let tmp = tempfile::Builder::new()
        .prefix("sediment-noise-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let binaries = link_variants(&args, &variants, tmp.path())?;
    let metrics = measure_variants(&args, &variants, &binaries)?;
    warn_differing_stdout(&variants, &metrics);
    let text = if args.json {
        format_json(&args, &variants, &metrics)
    } else {
        format_table(&args, &metrics)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The variants, in output order: seeds 1..=N, or pads 0, STEP, ..., (N-1)*STEP.
fn plan(args: &Args) -> Result<Vec<Variant>> {
    if args.n == 0 || args.n > MAX_VARIANTS {
        bail!(
            "-n {}: the number of variants must be in 1..={MAX_VARIANTS}",
            args.n
        );
    }
    let mut out = Vec::with_capacity(args.n);
    for i in 0..args.n {
        out.push(if args.mode == "shift" {
            let bytes = (i as u64)
                .checked_mul(args.shift_step)
                .filter(|&b| b <= MAX_PAD_BYTES)
                .with_context(|| {
                    format!(
                        "--pad-step {}: variant {i} would need a pad over {MAX_PAD_BYTES} bytes",
                        args.shift_step
                    )
                })?;
            Variant {
                label: format!("shift-{bytes}"),
                pad: Some(bytes),
                flags: Vec::new(),
            }
        } else {
            let seed = i + 1;
            Variant {
                label: format!("seed-{seed}"),
                pad: None,
                flags: vec![
                    "-fuse-ld=lld".into(),
                    format!("-Wl,--shuffle-sections={SHUFFLE_GLOB}={seed}"),
                ],
            }
        });
    }
    Ok(out)
}

/// Refuses inputs that are not relocatable ELF objects or archives of them, and warns once,
/// with a count, when shuffling objects built without `-ffunction-sections` (whose functions
/// then move only in whole-object blocks).
fn check_objects(args: &Args) -> Result<()> {
    let mut shared = Vec::new();
    for path in &args.objects {
        let data = fsio::read_bytes(path)?;
        let shown = path.display().to_string();
        let objects = sediment_elf::objects::read_objects(&shown, &data)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if objects.iter().any(|o| !o.function_sections) {
            shared.push(shown);
        }
    }
    if args.mode == "shuffle" && !shared.is_empty() {
        eprintln!(
            "sediment noise: warning: {} of {} inputs not built with -ffunction-sections \
             (functions in them move only together), first: {}",
            shared.len(),
            args.objects.len(),
            shared[0]
        );
    }
    Ok(())
}

/// Links every variant into `dir` as `layout-NNNN` (`crate::pipeline::relink`); returns the
/// binaries in variant order.
fn link_variants(args: &Args, variants: &[Variant], dir: &Path) -> Result<Vec<PathBuf>> {
    let inputs: Vec<OsString> = args
        .objects
        .iter()
        .map(|o| o.as_os_str().to_owned())
        .collect();
    let layouts: Vec<relink::Layout<'_>> = variants
        .iter()
        .map(|v| relink::Layout {
            cc: &args.cc,
            inputs: &inputs,
            link_args: &args.link_args,
            pad: v.pad.map(|b| (b, relink::PadAt::First)),
            flags: &v.flags,
        })
        .collect();
    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    relink::link_layouts(&layouts, &labels, dir, "layout")
}

/// Measures every variant in one batch and relabels each [`Metrics::binary`] with its variant
/// label (the temporary path would make the output differ from run to run).
fn measure_variants(
    args: &Args,
    variants: &[Variant],
    binaries: &[PathBuf],
) -> Result<Vec<Metrics>> {
    // The measure stage of `sediment compare` (one traced run per variant), uncached: the
    // variants are temporary links that never come back.
    let mut opts = sediment_measure::onepass::OnePassOptions {
        cache: None,
        ..Default::default()
    };
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let compared = crate::pipeline::measure::compare(binaries, &args.args, &opts, &|_, _| {})
        .context("sediment noise")?;
    for n in &compared.notes {
        eprintln!("sediment noise: {n}");
    }
    let mut metrics: Vec<Metrics> = compared.columns.into_iter().map(|(_, m)| m).collect();
    for (m, v) in metrics.iter_mut().zip(variants) {
        m.binary.clone_from(&v.label);
    }
    Ok(metrics)
}

/// Warns when some variant printed something else than the first one did.
fn warn_differing_stdout(variants: &[Variant], metrics: &[Metrics]) {
    let Some(first) = metrics.first() else { return };
    let differing: Vec<&str> = variants
        .iter()
        .zip(metrics)
        .filter(|(_, m)| m.stdout_fnv1a != first.stdout_fnv1a)
        .map(|(v, _)| v.label.as_str())
        .collect();
    if !differing.is_empty() {
        eprintln!(
            "sediment noise: warning: standard output differs from {} for: {}",
            variants[0].label,
            differing.join(", ")
        );
    }
}

/// One line saying how the layouts were made.
fn describe(args: &Args) -> String {
    if args.mode == "shift" {
        format!(
            "{} layouts, code shifted by 0..={} bytes in steps of {} ({} default linker)",
            args.n,
            (args.n as u64 - 1) * args.shift_step,
            args.shift_step,
            args.cc
        )
    } else {
        format!(
            "{} layouts, lld --shuffle-sections={SHUFFLE_GLOB}=SEED with seeds 1..={}",
            args.n, args.n
        )
    }
}

/// The text report: a header line, then one row per metric with median, min, max and the
/// relative range in percent (`-` when the median is 0), right-aligned columns.
fn format_table(args: &Args, metrics: &[Metrics]) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        "metric".into(),
        "median".into(),
        "min".into(),
        "max".into(),
        "(max-min)/median".into(),
    ]];
    for (_, label, s) in spreads(metrics) {
        rows.push([
            label.to_string(),
            format!("{}", s.median),
            s.min.to_string(),
            s.max.to_string(),
            s.relative_range
                .map_or_else(|| "-".to_string(), |r| format!("{:.2}%", r * 100.0)),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("layout noise: {}\n", describe(args));
    for r in &rows {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for c in 1..5 {
            line.push_str(&format!("  {:>w$}", r[c], w = widths[c]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The JSON report (`sediment_measure::spread::format_json`), variants labelled.
fn format_json(args: &Args, variants: &[Variant], metrics: &[Metrics]) -> String {
    let columns: Vec<(String, Metrics)> = variants
        .iter()
        .zip(metrics)
        .map(|(v, m)| (v.label.clone(), m.clone()))
        .collect();
    sediment_measure::spread::format_json(&args.mode, &describe(args), &columns)
}
