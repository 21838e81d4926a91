//! `sediment diff OLD NEW [-p PROFILE] [--json] [--top N]`: why did the layout move?
//!
//! Reads the function symbols of two builds of one program (and optionally a profile, for
//! weights) and prints what `sediment_explain::diff` finds: how many functions match, the
//! *shift segments* (runs of functions that moved together by the same number of bytes, each
//! with the cause at its start: a function that grew, functions that arrived or left, padding,
//! or a reordering), the largest size changes, and with a profile the hot-code footprint in
//! 64-byte lines and 4 KiB pages of each build and the hot functions whose span in cache lines
//! changed. This is the question behind "one unrelated change swung the benchmark by 30%":
//! the answer is usually one segment with a shift that is not a multiple of 64 under the hot
//! code, visible here without running anything.
//!
//! Profile weights are bound to both builds by symbol key (name, plus source file for locals),
//! so the profile may come from either build. A profile of another program is refused: when
//! less than `sediment match`'s default minimum share of its weight names functions of either
//! build (`crate::pipeline::measure::read_weights`), the error names the files and the share.
//! Output is deterministic; the text lists are cut to `--top` rows (segments: the heaviest,
//! then in address order), JSON lists everything.

use crate::fsio;
use crate::pipeline::measure::read_weights;
use anyhow::Result;
use sediment_elf::Binary;
use sediment_explain::{diff, LayoutDiff, Placed};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments of `sediment diff`.
#[derive(clap::Args)]
pub struct Args {
    /// The old build (a linked ELF file with symbols).
    pub old: PathBuf,
    /// The new build.
    pub new: PathBuf,
    /// A profile of either build, for weights (hot footprint, heaviest segments first).
    #[arg(short = 'p', long = "profile", value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Print JSON (every list complete) instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Rows per list in the text report.
    #[arg(long, default_value_t = 15, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub demangle: super::vocab::Demangle,
}

/// Runs `sediment diff`.
pub fn run(args: Args) -> Result<()> {
    let old = fsio::read_binary(&args.old)?;
    let new = fsio::read_binary(&args.new)?;
    let weights = read_weights(
        args.profile.as_deref(),
        &[(args.old.as_path(), &old), (args.new.as_path(), &new)],
    )?;
    let d = diff(
        &Placed::of_binary(&old, &weights),
        &Placed::of_binary(&new, &weights),
    );
    let out = if args.json {
        let mut s = serde_json::to_string_pretty(&d)?;
        s.push('\n');
        s
    } else {
        format_text(&args, &old, &new, &d)
    };
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}

fn signed(v: i64) -> String {
    if v > 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

/// The text report.
fn format_text(args: &Args, old: &Binary, new: &Binary, d: &LayoutDiff) -> String {
    let mut s = String::new();
    let show = |name: &str| args.demangle.show(name).into_owned();
    let id = |b: &Binary| b.build_id.clone().unwrap_or_else(|| "no build-id".into());
    let _ = writeln!(s, "old: {} ({})", args.old.display(), id(old));
    let _ = writeln!(s, "new: {} ({})", args.new.display(), id(new));
    let _ = writeln!(
        s,
        "functions: {} in both, {} only in old, {} only in new; {} changed relative order",
        d.matched,
        d.only_old.len(),
        d.only_new.len(),
        d.reordered
    );
    let moved: usize = d
        .segments
        .iter()
        .filter(|g| g.shift != 0)
        .map(|g| g.functions)
        .sum();
    let _ = writeln!(
        s,
        "\nshift segments: {} ({} functions moved; a segment moves as one block)",
        d.segments.len(),
        moved
    );
    let mut rows: Vec<&sediment_explain::Segment> = d.segments.iter().collect();
    if rows.len() > args.top {
        rows.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then(a.old_address.cmp(&b.old_address))
        });
        rows.truncate(args.top);
        rows.sort_by_key(|g| g.old_address);
    }
    let _ = writeln!(
        s,
        "  {:<18} {:<32} {:>9} {:>8} {:>10}  cause",
        "old address", "first function", "functions", "shift", "weight"
    );
    for g in rows {
        let cause = match &g.cause {
            None => "start".to_string(),
            Some(c) if c.reordered => format!("reordered after {}", show(&c.after)),
            Some(c) => {
                let mut parts = Vec::new();
                if c.size_change != 0 {
                    parts.push(format!("{} size {}", show(&c.after), signed(c.size_change)));
                }
                if c.arrived > 0 {
                    parts.push(format!(
                        "{} arrived ({} new, {} B)",
                        c.arrived, c.arrived_new, c.arrived_bytes
                    ));
                }
                if c.left > 0 {
                    parts.push(format!(
                        "{} left ({} removed, {} B)",
                        c.left, c.left_removed, c.left_bytes
                    ));
                }
                if c.padding_change != 0 {
                    parts.push(format!("padding {}", signed(c.padding_change)));
                }
                parts.join("; ")
            }
        };
        let _ = writeln!(
            s,
            "  {:<#18x} {:<32} {:>9} {:>8} {:>10}  {}",
            g.old_address,
            show(&g.first),
            g.functions,
            signed(g.shift),
            g.weight,
            cause
        );
    }
    if !d.size_changes.is_empty() {
        let _ = writeln!(s, "\nsize changes: {}", d.size_changes.len());
        for c in d.size_changes.iter().take(args.top) {
            let _ = writeln!(
                s,
                "  {:<40} {:>7} -> {:<7} weight {}",
                show(&c.name),
                c.old_size,
                c.new_size,
                c.weight
            );
        }
    }
    if let Some(h) = &d.hot {
        let _ = writeln!(s, "\nhot code (profile weights):");
        let _ = writeln!(s, "  {:<34} {:>8} {:>8}", "", "old", "new");
        for (what, o, n) in [
            ("executed functions", &h.old_executed, &h.new_executed),
            (
                "functions holding 99% of weight",
                &h.old_hot99,
                &h.new_hot99,
            ),
        ] {
            for (label, ov, nv) in [
                (what.to_string(), o.functions as u64, n.functions as u64),
                ("  64-byte lines they cover".to_string(), o.lines, n.lines),
                ("  4 KiB pages they cover".to_string(), o.pages, n.pages),
            ] {
                let _ = writeln!(s, "  {label:<34} {ov:>8} {nv:>8}");
            }
        }
        if !d.span_changes.is_empty() {
            let _ = writeln!(
                s,
                "\nhot functions whose cache-line span changed: {}",
                d.span_changes.len()
            );
            for c in d.span_changes.iter().take(args.top) {
                let _ = writeln!(
                    s,
                    "  {:<40} lines {} -> {} (line offset {} -> {}), weight {}",
                    show(&c.name),
                    c.old_lines,
                    c.new_lines,
                    c.old_offset,
                    c.new_offset,
                    c.weight
                );
            }
        }
    }
    s
}
