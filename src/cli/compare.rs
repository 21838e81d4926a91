//! `sediment compare BASE NEW... [--json] -- ARGS`: run each binary with ARGS under Valgrind
//! and print instruction-cache, iTLB and page/line footprint metrics side by side, with the
//! ratio of each NEW to BASE. The measuring is one valgrind run per binary under Sediment's
//! trace tool (`sediment_measure::onepass`, whose module doc defines every metric), binaries
//! in parallel (`-j`), results cached by binary content, arguments, environment and input
//! (`sediment_measure::cache`; `--no-cache`), progress on standard error
//! (`super::progress`); this file only labels the columns and prints. `--metrics` picks the
//! rows, `--sample-first` measures a prefix of each run. Warnings say when the variants'
//! standard output or error differ, and when binaries linked from the same objects executed
//! different instruction counts (a workload that varies between runs).
//!
//! The footprint rows say what they count: executed bytes of the binary's own code, from the
//! trace's fetches, like `sediment sim`'s (which adds the lower bound over all layouts).
//!
//! `--shifts K` answers "is this difference more than layout luck?": every binary is also
//! simulated once more by `sediment sim` (its trace streamed), with its code virtually
//! shifted by 0, STEP, ..., (K-1)*STEP bytes in the same pass (`sediment_sim::capture` views).
//! The I1 misses and the 99% / 99.9% footprints are then reported only as `median [min-max]`
//! over those K layouts, so that a gain can be read against the spread; the one-pass table
//! keeps its other rows (instructions, iTLB misses, blocks touched). Each metric is printed
//! once. The shifts themselves add only array lookups to that second run.
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
    /// Binaries measured at once (default: the number of cores).
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
    /// by a script on stdin such as `postgres --single`. Binaries run in parallel (`-j`); when
    /// a run fails so, they are run again one at a time (a program that locks files it shares
    /// with the other runs, such as a server's data directory, fails beside itself), and a
    /// line says so.
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// The columns' headings, comma-separated, one per binary in order (BASE first). Default:
    /// each binary's shortest path suffix that no other binary shares (`postgres`, or
    /// `c3/bin/postgres` beside `default/bin/postgres`).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub label: Vec<String>,
    /// Metrics to print, comma-separated (default: all): `instructions`, `i1` (L1i misses),
    /// `itlb` (iTLB misses), `footprint` (pages and lines of the binary's code).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub metrics: Vec<MetricGroup>,
    /// Run every binary even when a cached result of the same binary, arguments, environment
    /// and input exists (results are cached under $XDG_CACHE_HOME/sediment/measure).
    #[arg(long)]
    pub no_cache: bool,
    /// Measure only the first N instructions of each run (then stop it): every metric then
    /// describes that prefix, which the output says, and outputs are not compared.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_first: Option<u64>,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
}

/// A group of rows `--metrics` can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricGroup {
    /// Instructions executed by the whole process.
    Instructions,
    /// L1i misses of both geometries.
    I1,
    /// iTLB misses of both sizes.
    Itlb,
    /// Pages and lines of the binary's code holding its executed bytes.
    Footprint,
}

impl MetricGroup {
    /// The group of a metric (its JSON key, which is also its row key); `None` for the
    /// columns' identity fields (binary, output hash), always kept.
    fn of(key: &str) -> Option<Self> {
        match key {
            "binary" | "stdout_fnv1a" => None,
            "instructions" => Some(Self::Instructions),
            k if k.starts_with("i1_") => Some(Self::I1),
            k if k.starts_with("itlb_") => Some(Self::Itlb),
            _ => Some(Self::Footprint),
        }
    }
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
    let one = sediment_measure::onepass::OnePassOptions {
        valgrind: opts.valgrind.clone(),
        jobs: opts.jobs,
        stdin: opts.stdin.clone(),
        sample: args.sample_first,
        cache: if args.no_cache {
            None
        } else {
            sediment_measure::cache::default_dir()
        },
    };
    let labels = if args.label.is_empty() {
        crate::pipeline::measure::labels(&binaries)
    } else if args.label.len() != binaries.len() {
        bail!(
            "--label gives {} labels for {} binaries (one per binary, BASE first)",
            args.label.len(),
            binaries.len()
        );
    } else if args.label.iter().any(String::is_empty) {
        bail!("--label: an empty label");
    } else {
        args.label.clone()
    };
    let run_all = |one: &sediment_measure::onepass::OnePassOptions| {
        let progress = super::progress::Progress::new("compare", &labels);
        let compared = crate::pipeline::measure::compare_labeled(
            &binaries,
            labels.clone(),
            &args.args,
            one,
            &|i, e| progress.event(i, e),
        );
        progress.finish();
        compared
    };
    let jobs = one.jobs.min(binaries.len());
    let compared = match run_all(&one) {
        // Runs at once share the files they open: a program that locks a data directory
        // (`postgres --single`) fails beside another run of itself. Run them one at a time
        // (the runs that succeeded come from the cache).
        Err(e) if jobs > 1 && args.stdin.is_some() => {
            eprintln!(
                "sediment compare: a run failed with {jobs} binaries running at once ({}); \
                 running them one at a time, as -j 1 does",
                format!("{e:#}").lines().next().unwrap_or_default()
            );
            let serial = sediment_measure::onepass::OnePassOptions { jobs: 1, ..one };
            run_all(&serial)?
        }
        other => other?,
    };
    for n in &compared.notes {
        eprintln!("sediment compare: {n}");
    }
    for w in &compared.warnings {
        eprintln!("sediment compare: warning: {}", args.demangle.text(w));
    }
    let sampled = compared.sampled;
    let columns = compared.columns;
    let wanted = |name: &str| {
        args.metrics.is_empty() || MetricGroup::of(name).map_or(true, |g| args.metrics.contains(&g))
    };
    let mut skip: Vec<&str> = sediment_measure::ROWS
        .iter()
        .map(|(key, _, _)| *key)
        .filter(|k| !wanted(k))
        .collect();

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
                sediment_measure::format_table_without(&columns, {
                    skip.extend(REPLACED_ROWS);
                    &skip
                }),
                plan.describe_shifts().unwrap_or_default(),
                sediment_sim::format_table(&sim_columns, Some(&SHIFTED_ROWS))
            )
        }
    } else if args.json {
        sediment_measure::format_json(&columns)
    } else {
        sediment_measure::format_table_without(&columns, &skip)
    };
    let text = if args.json {
        annotate_json(&text, sampled.and(args.sample_first), &wanted)?
    } else {
        let mut t = String::new();
        if let (Some(n), Some(_)) = (args.sample_first, sampled) {
            t.push_str(&sampled_note(n));
            t.push('\n');
        }
        t.push_str(&text);
        if wanted("pages_99") {
            t.push_str(sediment_measure::FOOTPRINT_NOTE);
            t.push('\n');
        }
        t
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The line saying that a table describes only a prefix of each run.
fn sampled_note(n: u64) -> String {
    format!("# sampled: only about the first {n} instructions of each run were measured (--sample-first); every row describes that prefix")
}

/// The JSON output with the metrics `wanted` keeps, and `"sampled_first_instructions"` at the
/// top when the runs were sampled.
fn annotate_json(
    text: &str,
    sampled: Option<u64>,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<String> {
    let mut doc: serde_json::Value = serde_json::from_str(text).context("comparison JSON")?;
    fn prune(v: &mut serde_json::Value, wanted: &dyn Fn(&str) -> bool) {
        match v {
            serde_json::Value::Object(map) => {
                if map.contains_key("stdout_fnv1a") {
                    map.retain(|k, _| wanted(k));
                } else {
                    for x in map.values_mut() {
                        prune(x, wanted);
                    }
                }
            }
            serde_json::Value::Array(xs) => xs.iter_mut().for_each(|x| prune(x, wanted)),
            _ => {}
        }
    }
    prune(&mut doc, wanted);
    if let (Some(n), Some(map)) = (sampled, doc.as_object_mut()) {
        // The requested limit; each column's `instructions` is what its run measured.
        map.insert("sampled_first_instructions".into(), n.into());
    }
    let mut s = serde_json::to_string_pretty(&doc)?;
    s.push('\n');
    Ok(s)
}
