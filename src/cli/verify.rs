//! `sediment verify BINARY... (--order FILE | -p FILE)`: how much of an intended order linked
//! binaries hold, with a non-zero exit below a threshold, so that a package build or a CI job
//! can gate on it; and `sediment verify --prof-dir DIR TREE...`, the pre-build check of a
//! source package's profiles against the outputs of a build tree.
//!
//! The intended order is an order file, or the order the linker shims would compute from a
//! profile (`--algorithm`, default `c3`, as `SEDIMENT_ALGORITHM`), whose self weights then
//! weigh the missing entries. Each binary's function symbols are read and measured by the
//! `verify` stage ([`crate::pipeline::verify::held`], [`sediment_link::held()`]): entries found
//! (LTO and clone renames recognised and counted), found in order (longest in-order
//! subsequence), the normalised Kendall tau distance, the missing entries (counted, their share
//! of the weight, the first named). The check fails when fewer than `--min-in-order` of the
//! found entries are in order, when fewer than `--min-found` are found, or when none is.
//!
//! The pre-build check ([`crate::pipeline::verify::applies`]) lists, for each profile of the
//! directory, the outputs of the build trees the shims would order with it (same base name)
//! and the share of its weight their functions define, the profiles that apply to nothing
//! the build makes, and the linked outputs no profile applies to. It fails on unreadable input, and with `--min-found` on an output below it.

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::verify::{self as stage, Intended, Prebuild};
use anyhow::{anyhow, bail, Result};
use sediment_link::Held;
use sediment_order::Algorithm;
use sediment_profile::FunctionOrder;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Default least share of the found entries that must be in the intended order.
pub const DEFAULT_MIN_IN_ORDER: f64 = 0.9;

/// How many missing entries a report names.
const NAMED: usize = 5;

/// Arguments of `sediment verify`.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("intended").required(true).args(["order", "profile", "prof_dir"]))]
pub struct Args {
    /// Linked binaries (ELF executables or shared objects with a symbol table) to check; with
    /// --prof-dir, build trees (directories, searched recursively) or outputs.
    #[arg(required = true, value_name = "BINARY")]
    pub binaries: Vec<PathBuf>,
    /// Function order written by `sediment order`: the order the binaries should hold.
    #[arg(long, value_name = "FILE")]
    pub order: Option<PathBuf>,
    /// Profile whose order (computed as the linker shims do, with --algorithm) the binaries
    /// should hold; its self weights weigh the missing functions.
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Ordering algorithm applied to --profile, as `sediment order --algorithm`.
    #[arg(long, value_name = "NAME", default_value = "c3", value_parser = vocab::parse_algorithm, requires = "profile")]
    pub algorithm: Algorithm,
    /// Pre-build check: the profile directory a package build links with (`DIR/NAME.sprof`
    /// orders the outputs named NAME); reports which outputs of the build trees each profile
    /// applies to and how much of its weight they define, and the outputs without a profile.
    #[arg(long, value_name = "DIR")]
    pub prof_dir: Option<PathBuf>,
    /// Least share (0 to 1) of the found entries that must be in the intended order (the
    /// longest in-order subsequence); below it the exit status is 1.
    #[arg(long, value_name = "SHARE", default_value_t = DEFAULT_MIN_IN_ORDER, value_parser = vocab::parse_share, conflicts_with = "prof_dir")]
    pub min_in_order: f64,
    /// Least share (0 to 1) of the order that must be found in the binary: of the profile's
    /// weight with --profile or --prof-dir, of the entries with --order; below it the exit
    /// status is 1. At 0, missing functions (inlined, discarded) are only reported.
    #[arg(long, value_name = "SHARE", default_value_t = 0.0, value_parser = vocab::parse_share)]
    pub min_found: f64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub demangle: vocab::Demangle,
}

/// Runs `sediment verify`.
pub fn run(args: Args) -> Result<()> {
    if let Some(dir) = &args.prof_dir {
        return run_prebuild(&args, dir);
    }
    let (source, intended) = if let Some(path) = &args.order {
        let text = fsio::read_text(path)?;
        let order =
            FunctionOrder::from_text(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        (path, Intended::from_order(&order))
    } else if let Some(path) = &args.profile {
        let profile = fsio::read_profile(path)?;
        (
            path,
            Intended::from_profile(&profile, path, args.algorithm)?,
        )
    } else {
        unreachable!("clap requires --order, --profile or --prof-dir");
    };
    let mut checked = Vec::new();
    for b in &args.binaries {
        checked.push((b, stage::held(b, &intended)?));
    }
    let text = if args.json {
        json_report(&args, source, &intended, &checked)?
    } else {
        text_report(&args, &intended, &checked)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    let failed: Vec<String> = checked
        .iter()
        .filter(|(_, h)| !h.passes(args.min_in_order, args.min_found))
        .map(|(b, h)| format!("{} ({})", b.display(), why_failed(&args, h)))
        .collect();
    if !failed.is_empty() {
        bail!(
            "{}: order not held by {}",
            source.display(),
            failed.join("; ")
        );
    }
    Ok(())
}

/// Why `h` fails the thresholds of `args`, in a few words.
fn why_failed(args: &Args, h: &Held) -> String {
    if h.found == 0 {
        return format!("none of its {} entries found", h.total - h.runtime);
    }
    let mut why = Vec::new();
    if h.in_order_share() < args.min_in_order {
        why.push(format!(
            "{} in order, below --min-in-order {}",
            percent(h.in_order_share()),
            args.min_in_order
        ));
    }
    if h.found_share() < args.min_found {
        why.push(format!(
            "{} found, below --min-found {}",
            percent(h.found_share()),
            args.min_found
        ));
    }
    why.join(", ")
}

/// `x` (0 to 1) as a percentage with one decimal.
fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The text report: a few lines per binary.
fn text_report(args: &Args, intended: &Intended, checked: &[(&PathBuf, Held)]) -> String {
    let mut s = String::new();
    for (b, h) in checked {
        let counted = h.total - h.runtime;
        let _ = writeln!(
            s,
            "{}: {} of {} entries found, {} of them in the intended order ({}); Kendall tau distance {:.3} (0: as intended, 0.5: unrelated)",
            b.display(),
            h.found,
            counted,
            h.in_order,
            percent(h.in_order_share()),
            h.distance()
        );
        if !h.missing.is_empty() {
            let names: Vec<String> = h
                .missing
                .iter()
                .take(NAMED)
                .map(|&i| {
                    args.demangle
                        .show(&intended.keys[i].to_string())
                        .into_owned()
                })
                .collect();
            let weight = h.missing_weight_share().map_or(String::new(), |w| {
                format!(", {} of the profile's weight", percent(w))
            });
            let _ = writeln!(
                s,
                "  missing: {}{weight} ({}{})",
                h.missing.len(),
                names.join(", "),
                if h.missing.len() > names.len() {
                    ", ..."
                } else {
                    ""
                }
            );
        }
        if h.renamed_total() > 0 {
            let kinds: Vec<String> = h.renamed.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(
                s,
                "  renamed: {} found under a compiler-given name (by suffix: {})",
                h.renamed_total(),
                kinds.join(", ")
            );
        }
        if h.runtime > 0 {
            let _ = writeln!(
                s,
                "  not counted: {} entries of the C runtime's start-up code, which the linker places itself",
                h.runtime
            );
        }
        let verdict = if h.passes(args.min_in_order, args.min_found) {
            "ok"
        } else {
            "FAIL"
        };
        let _ = writeln!(
            s,
            "  {verdict}: --min-in-order {} --min-found {}",
            args.min_in_order, args.min_found
        );
    }
    s
}

/// One binary of the `--json` report.
#[derive(Serialize)]
struct JsonBinary {
    path: String,
    entries: usize,
    runtime: usize,
    found: usize,
    found_share: f64,
    in_order: usize,
    in_order_share: f64,
    kendall_distance: f64,
    missing: JsonMissing,
    renamed: JsonRenamed,
    passes: bool,
}

/// The missing entries: the count, their weight's share (with a profile), the first named.
#[derive(Serialize)]
struct JsonMissing {
    count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight_share: Option<f64>,
    first: Vec<JsonFunction>,
}

/// A function: its symbol name and, for a static, its source file.
#[derive(Serialize)]
struct JsonFunction {
    name: String,
    file: Option<String>,
}

/// Entries found under another name, in all and by outermost suffix.
#[derive(Serialize)]
struct JsonRenamed {
    count: usize,
    by_suffix: BTreeMap<String, usize>,
}

/// The whole `--json` report; fields serialise in declaration order.
#[derive(Serialize)]
struct JsonReport {
    intended: String,
    weighted: bool,
    min_in_order: f64,
    min_found: f64,
    binaries: Vec<JsonBinary>,
}

fn json_report(
    args: &Args,
    source: &std::path::Path,
    intended: &Intended,
    checked: &[(&PathBuf, Held)],
) -> Result<String> {
    let report = JsonReport {
        intended: source.display().to_string(),
        weighted: intended.weights.is_some(),
        min_in_order: args.min_in_order,
        min_found: args.min_found,
        binaries: checked
            .iter()
            .map(|(b, h)| JsonBinary {
                path: b.display().to_string(),
                entries: h.total - h.runtime,
                runtime: h.runtime,
                found: h.found,
                found_share: h.found_share(),
                in_order: h.in_order,
                in_order_share: h.in_order_share(),
                kendall_distance: h.distance(),
                missing: JsonMissing {
                    count: h.missing.len(),
                    weight_share: h.missing_weight_share(),
                    first: h
                        .missing
                        .iter()
                        .take(NAMED)
                        .map(|&i| JsonFunction {
                            name: intended.keys[i].name.clone(),
                            file: intended.keys[i].file.clone(),
                        })
                        .collect(),
                },
                renamed: JsonRenamed {
                    count: h.renamed_total(),
                    by_suffix: h.renamed.clone(),
                },
                passes: h.passes(args.min_in_order, args.min_found),
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&report)?;
    s.push('\n');
    Ok(s)
}

/// Runs the pre-build check (`--prof-dir DIR TREE...`).
fn run_prebuild(args: &Args, dir: &std::path::Path) -> Result<()> {
    let pre = stage::applies(dir, &args.binaries)?;
    let text = if args.json {
        prebuild_json(args, dir, &pre)?
    } else {
        prebuild_text(args, &pre)
    };
    let all = &pre.profiles;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    let below: Vec<String> = all
        .iter()
        .flat_map(|a| a.outputs.iter().map(move |o| (a, o)))
        .filter(|(_, o)| o.share.fraction() < args.min_found)
        .map(|(a, o)| {
            format!(
                "{} on {} ({})",
                a.profile.display(),
                o.path.display(),
                percent(o.share.fraction())
            )
        })
        .collect();
    if !below.is_empty() {
        bail!(
            "{}: {} profiles below --min-found {}: {}",
            dir.display(),
            below.len(),
            args.min_found,
            below.join("; ")
        );
    }
    Ok(())
}

/// The pre-build table: one row per (profile, output), a row with no output for a profile
/// that applies to nothing, and two summary lines (the second naming the first few outputs
/// without a profile).
fn prebuild_text(args: &Args, pre: &Prebuild) -> String {
    let all = &pre.profiles;
    let mut rows: Vec<[String; 4]> = vec![[
        "profile".into(),
        "output".into(),
        "functions".into(),
        "weight matched".into(),
    ]];
    for a in all {
        let profile = a.profile.file_name().map_or_else(
            || a.profile.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if a.outputs.is_empty() {
            rows.push([
                profile,
                "-".into(),
                "-".into(),
                "no output of this name in the build".into(),
            ]);
            continue;
        }
        for o in &a.outputs {
            let mut share = percent(o.share.fraction());
            if o.stripped {
                share.push_str(" (stripped: dynamic symbols only)");
            }
            if o.share.fraction() < args.min_found {
                share.push_str(" below --min-found");
            }
            rows.push([
                profile.clone(),
                o.path.display().to_string(),
                o.functions.to_string(),
                share,
            ]);
        }
    }
    let widths: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut s = String::new();
    for r in &rows {
        let _ = writeln!(
            s,
            "{:w0$}  {:w1$}  {:>w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
    }
    let nothing = all.iter().filter(|a| a.outputs.is_empty()).count();
    let outputs: usize = all.iter().map(|a| a.outputs.len()).sum();
    let _ = writeln!(
        s,
        "{} profiles: {} apply to {outputs} outputs, {nothing} match nothing the build makes",
        all.len(),
        all.len() - nothing
    );
    let u = &pre.unprofiled;
    if !u.is_empty() {
        let names: Vec<String> = u
            .iter()
            .take(NAMED)
            .map(|p| p.display().to_string())
            .collect();
        let _ = writeln!(
            s,
            "{} linked outputs without a profile: {}{}",
            u.len(),
            names.join(", "),
            if u.len() > names.len() { ", ..." } else { "" }
        );
    }
    s
}

/// One output of a profile in the pre-build `--json` report.
#[derive(Serialize)]
struct JsonOutput {
    path: String,
    functions: usize,
    stripped: bool,
    found_weight: u64,
    total_weight: u64,
    share: f64,
}

/// One profile of the pre-build `--json` report.
#[derive(Serialize)]
struct JsonProfileUse {
    profile: String,
    outputs: Vec<JsonOutput>,
}

/// The pre-build `--json` report.
#[derive(Serialize)]
struct JsonPrebuild {
    prof_dir: String,
    min_found: f64,
    profiles: Vec<JsonProfileUse>,
    unprofiled: Vec<String>,
}

fn prebuild_json(args: &Args, dir: &std::path::Path, pre: &Prebuild) -> Result<String> {
    let all = &pre.profiles;
    let report = JsonPrebuild {
        unprofiled: pre
            .unprofiled
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        prof_dir: dir.display().to_string(),
        min_found: args.min_found,
        profiles: all
            .iter()
            .map(|a| JsonProfileUse {
                profile: a.profile.display().to_string(),
                outputs: a
                    .outputs
                    .iter()
                    .map(|o| JsonOutput {
                        path: o.path.display().to_string(),
                        functions: o.functions,
                        stripped: o.stripped,
                        found_weight: o.share.found,
                        total_weight: o.share.total,
                        share: o.share.fraction(),
                    })
                    .collect(),
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&report)?;
    s.push('\n');
    Ok(s)
}
