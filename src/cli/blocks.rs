//! `sediment blocks`: block-level hot/cold splitting through the compiler (see docs/design/blocks.md).
//!
//! - `plan`: from a clang `-fbasic-block-sections=labels` build and a callgrind profile of it
//!   (`--dump-instr=yes --collect-jumps=yes`), writes `bb-list.txt` for the second build's
//!   `-fbasic-block-sections=list=` and `order.txt` (hot parts, then `.cold` parts) for
//!   `sediment link`. On a binary without a block map (a GCC `-freorder-blocks-and-partition`
//!   build) it writes only the order, with GCC's `.cold` parts after all hot code.
//! - `check`: reads the second build and verifies that every hot part of a split function (every
//!   entry of the order but the C runtime's start-up code, for a plan without a cluster list)
//!   lies before every cold part, and reports how many bytes the hot parts span.
//!
//! The steps are the `import` stage (the callgrind profile, [`crate::pipeline::import`]),
//! `sediment_elf::read_bb_addr_map`, `sediment_import::callgrind::instr_counts`,
//! `sediment_blocks::plan` and `sediment_blocks::check::check`; this module only reads the
//! files, writes the outputs atomically and prints.

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::import;
use anyhow::{anyhow, bail, Context, Result};
use sediment_blocks::check::{check, listed_functions};
use sediment_blocks::{list_file, plan, Params};
use sediment_elf::{read_bb_addr_map, Binary};
use sediment_import::callgrind;
use sediment_order::Algorithm;
use sediment_profile::FunctionOrder;
use std::collections::HashSet;
use std::path::PathBuf;

/// Arguments of `sediment blocks`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Compute hot block clusters (clang list file) and the hot-then-cold function order.
    Plan(PlanArgs),
    /// Check that a split build places every hot part before every cold part.
    Check(CheckArgs),
}

/// Arguments of `sediment blocks plan`.
#[derive(clap::Args)]
struct PlanArgs {
    /// The profiled binary: a clang `-fbasic-block-sections=labels` build (or a GCC
    /// `-freorder-blocks-and-partition` build, for the order alone).
    #[arg(long, value_name = "FILE")]
    binary: PathBuf,
    /// callgrind.out of that binary, recorded with `--dump-instr=yes --collect-jumps=yes`.
    #[arg(value_name = "INPUT", required_unless_present = "profile_option")]
    input: Option<PathBuf>,
    /// The old spelling of INPUT (`-p, --profile` names a Sediment profile in every other verb).
    #[arg(
        short = 'p',
        long = "profile",
        value_name = "FILE",
        hide = true,
        conflicts_with = "input"
    )]
    profile_option: Option<PathBuf>,
    /// The callgrind.out given, under either spelling ([`PlanArgs::with_input`] sets it).
    #[arg(skip)]
    profile: PathBuf,
    /// Executions at which a block counts as hot.
    #[arg(long, value_name = "N", default_value_t = 1)]
    min_count: u64,
    /// Split the hot blocks in two clusters per function: the very hot ones, holding this
    /// share (0 to 1) of the training's executed code bytes, placed before every warm part
    /// (`name.__part.1` symbols). 0: one hot cluster per function.
    #[arg(long, value_name = "SHARE", default_value_t = 0.0, value_parser = vocab::parse_share)]
    hot_coverage: f64,
    /// Function-level algorithm ordering the hot parts (as in `sediment order`).
    #[arg(long, value_name = "NAME", default_value = "c3", value_parser = vocab::parse_algorithm)]
    algorithm: Algorithm,
    /// Keep the labels build's block order inside each cluster instead of ExtTSP's (for a
    /// build whose compiler already placed blocks from a profile, e.g. `-fprofile-sample-use`).
    #[arg(long)]
    keep_block_order: bool,
    /// Output directory (created): `bb-list.txt` and `order.txt`.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
}

/// Arguments of `sediment blocks check`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("binary_given").required(true).args(["binary_option", "binary_operand"])))]
struct CheckArgs {
    /// The directory `blocks plan` wrote (`order.txt`, and `bb-list.txt` for clang).
    #[arg(long, value_name = "DIR")]
    plan: PathBuf,
    /// The split build.
    #[arg(
        long = "binary",
        value_name = "FILE",
        required_unless_present = "binary_operand"
    )]
    binary_option: Option<PathBuf>,
    /// The old spelling of `--binary`: the binary as the operand.
    #[arg(value_name = "BINARY", hide = true)]
    binary_operand: Option<PathBuf>,
    /// The binary, under either spelling ([`CheckArgs::with_binary`] sets it).
    #[arg(skip)]
    binary: PathBuf,
}

/// Runs `sediment blocks`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Plan(a) => run_plan(a.with_input()),
        Command::Check(a) => run_check(a.with_binary()),
    }
}

impl CheckArgs {
    /// The arguments with `binary` set from either spelling.
    fn with_binary(mut self) -> Self {
        self.binary = self
            .binary_option
            .take()
            .or(self.binary_operand.take())
            .unwrap_or_default();
        self
    }
}

impl PlanArgs {
    /// The arguments with `profile` holding the input, under either spelling.
    fn with_input(mut self) -> Self {
        self.profile = self
            .input
            .take()
            .or(self.profile_option.take())
            .unwrap_or_default();
        self
    }
}

/// Runs `sediment blocks plan`. The outputs are one set, written all or nothing
/// ([`fsio::replace_files`]) in the output directory (created if missing, [`fsio::in_dir`]):
/// `order.txt`, and `bb-list.txt` for a binary with a block map. Without one the set removes
/// a `bb-list.txt` left by an earlier clang plan, since `blocks check` takes the list's
/// presence to mean a clang plan (docs/design/blocks.md: the GCC route writes `order.txt` only).
fn run_plan(args: PlanArgs) -> Result<()> {
    let bin_path = args.binary.display().to_string();
    let bytes = fsio::read_bytes(&args.binary)?;
    let binary = Binary::parse(&bin_path, &bytes)?;
    let map = read_bb_addr_map(&bin_path, &bytes)?;
    let aliases = sediment_elf::compiled_aliases(&bin_path, &bytes)?;

    // Function level: the profile of the main binary, attributed by address.
    let options = import::Options {
        binary: Some(args.binary.clone()),
        ..import::Options::default()
    };
    let imported = import::import(
        import::Format::Callgrind,
        std::slice::from_ref(&args.profile),
        &options,
    )?;
    // Printed once the outputs are written, so that a failure is the one line of its error.
    let mut warnings = imported.warnings;
    let main = imported.main.as_deref();
    let profile = imported
        .profiles
        .iter()
        .find(|p| Some(p.meta.binary.as_str()) == main)
        .ok_or_else(|| anyhow!("{}: no costs for {bin_path}", args.profile.display()))?;

    // Block level: instruction and jump counts at link-time addresses.
    let (executed, jumps) = if map.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let text = fsio::read_text(&args.profile)?;
        let input = callgrind::Input {
            path: &args.profile.display().to_string(),
            text: &text,
        };
        let c = callgrind::instr_counts(&[input], &profile.meta.binary, &binary, &bytes)?;
        if c.jumps.is_empty() {
            warnings.push(format!(
                "{}: no jump counts (record with --collect-jumps=yes); blocks are ordered by \
                 fall-throughs only",
                args.profile.display()
            ));
        }
        (c.executed, c.jumps)
    };

    let params = Params {
        min_count: args.min_count,
        algorithm: args.algorithm,
        // In 1/10000: a share read as 0.995 is 9950.
        hot_coverage: (args.hot_coverage * 10_000.0).round() as u32,
        keep_block_order: args.keep_block_order,
    };
    let plan = plan(&binary, &map, &aliases, &executed, &jumps, profile, &params)
        .with_context(|| format!("{bin_path}: cannot plan"))?;

    let list_path = args.output.join("bb-list.txt");
    let order_path = args.output.join("order.txt");
    let list = list_file(&plan);
    let order = plan.order.to_text();
    let set = [
        if map.is_empty() {
            fsio::Replacement::remove(&list_path)
        } else {
            fsio::Replacement::write(&list_path, list.as_bytes())
        },
        fsio::Replacement::write(&order_path, order.as_bytes()),
    ];
    fsio::in_dir(&args.output, || fsio::replace_files(&set))?;
    for w in &warnings {
        eprintln!("sediment: warning: {}", sediment_profile::quote_whole(w));
    }

    let s = &plan.stats;
    if map.is_empty() {
        eprintln!(
            "sediment: {bin_path} has no .llvm_bb_addr_map: wrote the function order only \
             ({} entries, `.cold` parts last)",
            plan.order.functions.len()
        );
    } else {
        let hot: u64 = plan.functions.iter().map(|f| f.hot_bytes).sum();
        let cold: u64 = plan.functions.iter().map(|f| f.cold_bytes).sum();
        eprintln!(
            "sediment: {} of {} mapped functions ran; {} split (hot {hot} bytes, cold {cold} \
             bytes moved out); skipped: {} ambiguous names, {} unsafe names, {} unnamed",
            s.listed, s.mapped, s.split, s.ambiguous, s.unsafe_names, s.unnamed
        );
        if let Some(t) = s.very_hot_min {
            let (parts, bytes) = plan
                .functions
                .iter()
                .flat_map(|f| &f.clusters)
                .filter(|c| c.tier == 0)
                .fold((0, 0), |(n, b), c| (n + 1, b + c.bytes));
            eprintln!(
                "sediment: very hot: blocks run at least {t} times, {parts} parts, {bytes} bytes"
            );
        }
    }
    Ok(())
}

fn run_check(args: CheckArgs) -> Result<()> {
    let order_path = args.plan.join("order.txt");
    let text = fsio::read_text(&order_path)?;
    let order =
        FunctionOrder::from_text(&text).map_err(|e| anyhow!("{}: {e}", order_path.display()))?;
    // With a cluster list, the hot parts checked are the listed (split) functions: other
    // entries of the order (C runtime start-up code) are not in the user's objects and the
    // linker places them where it likes.
    let list_path = args.plan.join("bb-list.txt");
    let listed: Option<HashSet<String>> = if list_path.exists() {
        Some(listed_functions(&fsio::read_text(&list_path)?))
    } else {
        None
    };
    let bin_path = args.binary.display().to_string();
    let bytes = fsio::read_bytes(&args.binary)?;
    let binary = Binary::parse(&bin_path, &bytes)?;
    let aliases = sediment_elf::aliases(&bin_path, &bytes)?;
    let report = check(&order, listed.as_ref(), &binary, &aliases);
    if report.hot_listed + report.cold_listed == 0 {
        bail!("{}: lists no parts to check", order_path.display());
    }
    if report.hot_found > 0 {
        println!(
            "hot parts: {} found of {}, spanning {:#x}..{:#x} ({} bytes)",
            report.hot_found,
            report.hot_listed,
            report.hot_start,
            report.hot_end,
            report.hot_end.saturating_sub(report.hot_start)
        );
    } else {
        println!("hot parts: 0 found of {}", report.hot_listed);
    }
    if report.cold_found > 0 {
        println!(
            "cold parts: {} found of {}, first at {:#x}",
            report.cold_found, report.cold_listed, report.cold_start
        );
    } else {
        println!("cold parts: 0 found of {}", report.cold_listed);
    }
    if let Some(first) = &report.first_dropped {
        println!(
            "dropped: {} parts of {} functions the split build did not emit (first: {first}); \
             the compiler inlined or removed them there, nothing of them is left to place",
            report.dropped_parts, report.dropped_functions
        );
    }
    // Every part of the plan is in the split build's objects (docs/design/blocks.md: check "finds
    // every part of the order"): one missing means another binary, or a build without the
    // plan's list file.
    if let Some(first) = &report.first_missing {
        let missing = report.hot_listed + report.cold_listed
            - report.hot_found
            - report.cold_found
            - report.dropped_parts;
        bail!(
            "{bin_path}: {missing} of the {} parts in {} are not in the binary (first: {first}); \
             is it the split build of this plan?",
            report.hot_listed + report.cold_listed,
            order_path.display()
        );
    }
    if report.hot_found > 0 && report.cold_found > 0 && report.cold_start < report.hot_end {
        bail!(
            "{bin_path}: a cold part starts at {:#x}, before the end of the hot parts at {:#x}",
            report.cold_start,
            report.hot_end
        );
    }
    // With a cluster list every part checked is in the user's objects, so lld must have
    // placed them all in the order's sequence (very hot parts, warm parts, cold parts).
    if listed.is_some() && report.inversions > 0 {
        bail!(
            "{bin_path}: {} parts are not in the order's sequence (was it linked with the plan's \
             order?)",
            report.inversions
        );
    }
    println!("ok: every hot part lies before every cold part");
    Ok(())
}
