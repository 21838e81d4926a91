//! `sediment align`: what function alignment does to a binary, and alignment where it pays.
//!
//! Three modes, one verb (alignment is one task: measure it, choose it, apply it):
//!
//! - **Sweep** (`sediment align --binary BIN -- ARGS`): one traced run of the binary
//!   (`crate::pipeline::measure::simulate`, the run `sediment sim` makes) replayed with the
//!   binary's functions kept in link order and every start rounded up to 1, 2, 4, ..., 512
//!   bytes (`sediment_sim::align`), no relink. One row per alignment: the code bytes it gives
//!   and its growth over the binary as linked, I1 misses (32K and 16K), iTLB misses, lines and
//!   pages holding 99%, each `median [min-max]` over `--shifts` layouts (a pad of `S, 2S, ...`
//!   bytes before the code, the placement recomputed from the moved start). The row with the
//!   fewest I1 misses is marked `*` when its median is below the as-linked layout's range over
//!   the same shifts (the noise range), `~` when it is inside it: no win.
//! - **Select** (`--select FILE`): from the same kind of run, the functions whose start on a
//!   `--boundary` (64: a line; 128: a prefetched line pair) saves the most block fetches
//!   (`sediment_sim::align::choose`), under a size budget (`--max-growth`, percent of the code);
//!   written to FILE (an order file's format: one function per line) and checked by the
//!   simulator in a second run: as linked, every function on the boundary, the chosen ones.
//!   With `--capsules`, 4 KiB capsule boundaries chosen for stability instead
//!   (`crate::pipeline::align::capsules`), checked beside the layout as linked.
//! - **Build** (`--build -o DIR --binary BIN OBJECTS... -- ARGS`): the sweep's table, then the
//!   same alignments built for real: the objects relinked unchanged (`as linked`) and with every
//!   executable section aligned to 1, 2, ..., 512 bytes (`crate::pipeline::relink::aligned_copies`,
//!   the objects as `-falign-functions=A` would have compiled them), linked by `--cc` with the
//!   `--link-arg`s into `DIR/align-NNNN`, and each measured once by the measure stage of
//!   `sediment compare` (`crate::pipeline::measure::compare`), one row per build.
//! - **Apply** (`--apply FILE -o DIR OBJECTS...`): copies of the objects in DIR with the
//!   chosen functions' input sections aligned to the boundary (`sediment_elf::realign`), for
//!   any linker; the copies' paths are printed, one per line, in the order given.
//!
//! Output is deterministic: every number is a simulation count.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sediment_sim::align::{Row, Sweep, SWEEP};

use crate::pipeline::measure::{simulate, Aligned, Plan};

/// Arguments of `sediment align`.
#[derive(clap::Args)]
pub struct Args {
    /// The binary to sweep or choose functions of (sweep and `--select`).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "apply",
        conflicts_with = "apply"
    )]
    pub binary: Option<PathBuf>,
    /// Choose the functions to align and write them to FILE (one function per line).
    #[arg(long, value_name = "FILE", conflicts_with = "apply")]
    pub select: Option<PathBuf>,
    /// Write copies of OBJECTS into `-o DIR` with the functions of FILE (`--select` output)
    /// aligned; prints the copies' paths.
    #[arg(long, value_name = "FILE", requires = "output")]
    pub apply: Option<PathBuf>,
    /// Also build every alignment of the sweep for real from OBJECTS (into `-o DIR`:
    /// `align-0000` as linked, `align-0001` ... `align-0512`) and measure each, beside the
    /// predicted table.
    #[arg(long, requires_all = ["output", "binary"], conflicts_with = "select")]
    pub build: bool,
    /// The compiler driver that links the builds of `--build`.
    #[arg(
        long,
        value_name = "PROGRAM",
        default_value = "gcc",
        requires = "build"
    )]
    pub cc: String,
    /// An extra argument for every link of `--build`, after the objects (e.g. `--link-arg=-lm`);
    /// repeatable.
    #[arg(
        long = "link-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "build"
    )]
    pub link_args: Vec<String>,
    /// Directory for the copies of `--apply` and the builds of `--build`.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Boundary the chosen functions start on, in bytes: 64 (a cache line) or 128 (a line
    /// pair, as adjacent-line prefetchers fetch).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub boundary: u64,
    /// With `--select`: choose capsule boundaries instead: functions to start on a 4 KiB
    /// boundary (one way of the L1 I-cache, a page), so that growth before one of them moves
    /// the code after it by whole multiples of 4 KiB and changes no cache set. Chosen so that
    /// growth (at `--grow-after`; else at the end of each of the OBJECTS' code; else at the end
    /// of every function) moves as little executed code against the rest as the budget allows,
    /// counting the padding the binary as linked needs; among capsules that protect the same
    /// code, the one needing the least padding.
    #[arg(long, requires = "select")]
    pub capsules: bool,
    /// Size budget of `--select`: at most this percentage of the code in padding.
    #[arg(long, value_name = "PERCENT", default_value_t = 1.0)]
    pub max_growth: f64,
    /// Alignment the compiler gave every function (gcc's `-O2` on x86-64: 16): the functions
    /// `--select` leaves alone keep it, and so does code without a sized symbol (the C
    /// runtime's) in every layout.
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub align: u64,
    /// Layouts per row: the code as placed and behind pads of BYTES, 2*BYTES, ... bytes;
    /// cells become `median [min-max]` over them.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub shifts: u64,
    /// Bytes between consecutive shifts (default: a 4 KiB page and 80 bytes, so that the
    /// shifts move the code's pages to other iTLB sets and its lines to other L1i sets).
    #[arg(long, value_name = "BYTES", default_value_t = sediment_sim::PAGE_SHIFT_STEP)]
    pub shift_step: u64,
    /// Make each shift a growth of this function's end instead of a pad before the code:
    /// the code before it stays, the code after it moves (an unrelated change inside an early
    /// object). With the as-linked layout the step should be a multiple of `--align`.
    #[arg(long, value_name = "FUNCTION")]
    pub grow_after: Option<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Threads feeding the layouts (default: the number of cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// The `valgrind` executable.
    #[arg(long, value_name = "PROGRAM", default_value = "valgrind")]
    pub valgrind: OsString,
    /// Give every run of the binary this file as its standard input (default: empty), for
    /// programs driven by a script on stdin such as `postgres --single`.
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// The relocatable objects to copy (`--apply`) or build from (`--build`).
    #[arg(value_name = "OBJECT")]
    pub objects: Vec<PathBuf>,
    /// Arguments passed to the binary (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Runs `sediment align`.
pub fn run(args: Args) -> Result<()> {
    if !args.boundary.is_power_of_two() || !(16..=4096).contains(&args.boundary) {
        bail!(
            "--boundary must be a power of two between 16 and 4096, not {}",
            args.boundary
        );
    }
    if let Some(list) = &args.apply {
        return apply(&args, list);
    }
    if let Some(path) = &args.stdin {
        crate::cli::vocab::check_stdin(path)?;
    }
    if !args.objects.is_empty() && !args.build && !args.capsules {
        bail!("object files are only read by --apply, --build and --capsules");
    }
    if args.build && args.objects.is_empty() {
        bail!("--build needs the object files to link");
    }
    let Some(binary) = &args.binary else {
        bail!("--binary is required");
    };
    let mut plan = Plan::with_shifts(args.shifts, args.shift_step)?;
    plan.align = args.align;
    plan.grow_after.clone_from(&args.grow_after);
    plan.threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let text = match &args.select {
        None => {
            plan.aligned = SWEEP
                .iter()
                .map(|&a| (a.to_string(), Aligned::All(a)))
                .collect();
            let predicted = report(&args, binary, &plan)?;
            if args.build {
                build(&args, predicted)?
            } else {
                predicted
            }
        }
        Some(out) => select(&args, binary, out, plan)?,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Simulates the plan's aligned layouts and formats them as a sweep table (or JSON).
fn report(args: &Args, binary: &std::path::Path, plan: &Plan) -> Result<String> {
    let simulated = simulate(
        binary,
        &args.args,
        &args.valgrind,
        plan,
        args.stdin.as_deref(),
    )?;
    let labels =
        std::iter::once("as linked".to_string()).chain(plan.aligned.iter().map(|a| a.0.clone()));
    let rows = labels
        .zip(simulated.layouts)
        .zip(&simulated.code_bytes)
        .map(|((label, shifts), &code_bytes)| Row {
            label,
            code_bytes,
            shifts,
        })
        .collect();
    let sweep = Sweep { rows };
    Ok(if args.json {
        sweep.format_json()
    } else {
        let mut t = plan
            .describe_shifts()
            .map_or_else(String::new, |d| format!("# {d}\n"));
        if let Some(f) = &plan.grow_after {
            t.push_str(&format!(
                "# shifts grow the end of {f} instead of padding before the code\n"
            ));
        }
        t.push_str(&sweep.format_table());
        t
    })
}

/// `--build`: links the objects as they are and at every alignment of the sweep, measures each
/// build once, and returns the predicted table followed by the built one (JSON: both, as
/// `{"predicted": ..., "built": ...}`).
fn build(args: &Args, predicted: String) -> Result<String> {
    use crate::pipeline::relink;
    let dir = args.output.as_deref().context("--build needs -o DIR")?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let mut labels = vec!["as linked".to_string()];
    let mut binaries = Vec::new();
    let link = |inputs: &[PathBuf], name: &str| -> Result<PathBuf> {
        let inputs: Vec<OsString> = inputs.iter().map(|p| p.as_os_str().to_owned()).collect();
        let out = dir.join(name);
        let layout = relink::Layout {
            cc: &args.cc,
            inputs: &inputs,
            link_args: &args.link_args,
            pad: None,
            flags: &[],
        };
        relink::link_layout(&layout, dir, name, &out)
            .with_context(|| format!("linking {name} with {}", args.cc))?;
        Ok(out)
    };
    binaries.push(link(&args.objects, "align-0000")?);
    for &a in SWEEP.iter() {
        let copies =
            relink::aligned_copies(&args.objects, a, &dir.join(format!("objects-{a:04}")))?;
        binaries.push(link(&copies, &format!("align-{a:04}"))?);
        labels.push(a.to_string());
    }
    let mut opts = sediment_measure::onepass::OnePassOptions {
        cache: None,
        valgrind: args.valgrind.clone(),
        stdin: args.stdin.clone(),
        ..Default::default()
    };
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let compared = crate::pipeline::measure::compare(&binaries, &args.args, &opts, &|_, _| {})
        .context("sediment align --build")?;
    for n in compared.notes.iter().chain(&compared.warnings) {
        eprintln!("sediment align: {n}");
    }
    let mut rows = Vec::with_capacity(binaries.len());
    for ((label, b), (_, m)) in labels.into_iter().zip(&binaries).zip(compared.columns) {
        rows.push(Row {
            label,
            code_bytes: crate::pipeline::measure::code_bytes(b, args.align)?,
            shifts: vec![m],
        });
    }
    let built = Sweep { rows };
    Ok(if args.json {
        format!(
            "{{\"predicted\": {}, \"built\": {}}}\n",
            predicted.trim_end(),
            built.format_json().trim_end()
        )
    } else {
        format!(
            "{predicted}\n# built: the objects relinked by {} with every executable section aligned to each row's bytes ({}/align-NNNN), one measured run each\n{}",
            args.cc,
            dir.display(),
            built.format_table()
        )
    })
}

/// `--select`: records a run, chooses the functions, writes them to `out` and returns the
/// table of the as-linked layout, every function on the boundary and the chosen ones.
fn select(
    args: &Args,
    binary: &std::path::Path,
    out: &std::path::Path,
    plan: Plan,
) -> Result<String> {
    if args.align == 0 || !args.align.is_power_of_two() || args.align >= args.boundary {
        bail!(
            "--align must be a power of two below --boundary {}, not {}",
            args.boundary,
            args.align
        );
    }
    if !(args.max_growth > 0.0 && args.max_growth <= 100.0) {
        bail!(
            "--max-growth must be a percentage above 0 and at most 100, not {}",
            args.max_growth
        );
    }
    let (_, recorded) = crate::pipeline::measure::record(
        binary,
        &args.args,
        &args.valgrind,
        &Plan::as_linked(),
        args.stdin.as_deref(),
    )?;
    let rec = &recorded.recording;
    let code = sediment_sim::align::code_bytes(rec.starts(), rec.sizes());
    let budget = (code as f64 * args.max_growth / 100.0) as u64;
    let boundary = if args.capsules {
        sediment_sim::align::CAPSULE_BOUNDARY
    } else {
        args.boundary
    };
    if args.align >= boundary {
        bail!(
            "--align {} must be below the boundary {boundary}",
            args.align
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut note = String::new();
    if args.capsules {
        let caps = crate::pipeline::align::capsules(
            binary,
            &recorded,
            &args.objects,
            args.grow_after.as_deref(),
            boundary,
            budget,
        )?;
        let (before, after) = caps.choice.damage;
        note = format!(
            "; growth at {}: hot code moved against the rest {:.4} as linked, {:.4} with them; padding {} bytes in .text as linked, and .text starts {} bytes later",
            caps.growth, before, after, caps.choice.padding, caps.section_shift
        );
        names = caps.names;
    } else {
        for i in sediment_sim::align::choose(&rec.unit_ranges(), boundary, args.align, budget) {
            let name = &recorded.names[i];
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    let mut order = sediment_profile::FunctionOrder {
        functions: names
            .iter()
            .map(sediment_profile::FuncKey::global)
            .collect(),
        ..Default::default()
    };
    order
        .meta
        .insert("binary".into(), binary.display().to_string());
    order
        .meta
        .insert("source".into(), "sediment align --select".into());
    order.meta.insert("boundary".into(), boundary.to_string());
    crate::fsio::write_atomic(out, order.to_text().as_bytes())?;
    eprintln!(
        "sediment align: {} functions to align to {} bytes (budget {budget} bytes, {}% of {code}), written to {}{note}",
        names.len(),
        boundary,
        args.max_growth,
        out.display()
    );
    let mut plan = plan;
    let chosen = (
        format!(
            "{} {boundary}",
            if args.capsules { "capsules" } else { "chosen" }
        ),
        Aligned::Chosen {
            names,
            align: boundary,
            rest: args.align,
        },
    );
    // Every function on a capsule boundary would be no layout anyone builds.
    plan.aligned = if args.capsules {
        vec![chosen]
    } else {
        vec![(format!("all {boundary}"), Aligned::All(boundary)), chosen]
    };
    report(args, binary, &plan)
}

/// `--apply`: writes the aligned copies of the objects and prints their paths.
fn apply(args: &Args, list: &std::path::Path) -> Result<()> {
    if args.objects.is_empty() {
        bail!("--apply needs the object files to copy");
    }
    let text = crate::fsio::read_text(list)?;
    let order = sediment_profile::FunctionOrder::from_text(&text)
        .with_context(|| list.display().to_string())?;
    let boundary = match order.meta.get("boundary") {
        Some(b) => b
            .parse::<u64>()
            .ok()
            .filter(|b| b.is_power_of_two())
            .with_context(|| format!("{}: bad boundary {b:?}", list.display()))?,
        None => args.boundary,
    };
    let dir = args.output.as_deref().context("--apply needs -o DIR")?;
    let names: Vec<&str> = order.functions.iter().map(|k| k.name.as_str()).collect();
    let applied = crate::pipeline::align::apply(&args.objects, &names, boundary, dir)?;
    eprintln!(
        "sediment align: {} sections aligned to {boundary} bytes in {} objects{}",
        applied.sections,
        applied.copies.len(),
        if applied.missing > 0 {
            format!(
                "; {} functions of {} not in the objects",
                applied.missing,
                list.display()
            )
        } else {
            String::new()
        }
    );
    let mut out = std::io::stdout().lock();
    for c in &applied.copies {
        writeln!(out, "{}", c.display())?;
    }
    out.flush()?;
    Ok(())
}
