//! `sediment structs BIN [--name SUBSTR] [--all] [--json] [--top N]`: data layout of the
//! structures in a binary built with `-g`: holes, tail padding, members that straddle a cache
//! line, and atomics or locks that share a cache line with other members (the static
//! signature of false sharing). The DWARF is read by `sediment_elf::types`, the analysis is
//! `sediment_explain::structs`.
//!
//! By default only structures with findings are listed, those sharing a line with a lock or
//! atomic first, then by wasted bytes, then by name; `--all` lists every structure. Each is
//! printed member by member in the manner of `pahole`, with the holes and line boundaries
//! between them.

use crate::fsio;
use anyhow::Result;
use sediment_elf::types::{read_structs, StructLayout};
use sediment_explain::structs::{analyze, StructReport};
use sediment_explain::LINE;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments of `sediment structs`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("binary_given").required(true).args(["binary_option", "binary_operand"])))]
pub struct Args {
    /// A linked binary with DWARF debug information (`-g`).
    #[arg(
        long = "binary",
        value_name = "FILE",
        required_unless_present = "binary_operand"
    )]
    pub binary_option: Option<PathBuf>,
    /// The old spelling of `--binary`: the binary as the operand.
    #[arg(value_name = "BINARY", hide = true)]
    pub binary_operand: Option<PathBuf>,
    /// The binary, under either spelling (`Args::with_binary` sets it).
    #[arg(skip)]
    pub binary: PathBuf,
    /// Only structures whose name contains this.
    #[arg(long, value_name = "SUBSTR")]
    pub name: Option<String>,
    /// List structures without findings too.
    #[arg(long)]
    pub all: bool,
    /// Print JSON (the reports, without member tables).
    #[arg(long)]
    pub json: bool,
    /// Structures listed at most.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
}

impl Args {
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

/// Runs `sediment structs`.
pub fn run(args: Args) -> Result<()> {
    let args = args.with_binary();
    let data = fsio::read_bytes(&args.binary)?;
    let structs = read_structs(&args.binary.display().to_string(), &data)?;
    let mut rows: Vec<(&StructLayout, StructReport)> = structs
        .iter()
        .filter(|s| args.name.as_deref().map_or(true, |n| s.name.contains(n)))
        .map(|s| (s, analyze(s)))
        .filter(|(_, r)| args.all || r.has_findings())
        .collect();
    rows.sort_by(|(_, a), (_, b)| {
        a.shared_lines
            .is_empty()
            .cmp(&b.shared_lines.is_empty())
            .then(b.wasted().cmp(&a.wasted()))
            .then(a.name.cmp(&b.name))
            .then(a.size.cmp(&b.size))
    });
    let total = rows.len();
    rows.truncate(args.top);
    let mut out = String::new();
    if args.json {
        let reports: Vec<&StructReport> = rows.iter().map(|(_, r)| r).collect();
        out = serde_json::to_string_pretty(&reports)?;
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "{} structures, {total} listed{}",
            structs.len(),
            if total > rows.len() {
                format!(" (first {} shown; --top)", rows.len())
            } else {
                String::new()
            }
        );
        for (s, r) in &rows {
            format_struct(&mut out, s, r);
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}

/// One structure, member by member.
fn format_struct(out: &mut String, s: &StructLayout, r: &StructReport) {
    let _ = writeln!(
        out,
        "\nstruct {}: {} bytes, {} cache line{}, {} bytes wasted",
        r.name,
        r.size,
        r.lines,
        if r.lines == 1 { "" } else { "s" },
        r.wasted()
    );
    for l in &r.shared_lines {
        let _ = writeln!(
            out,
            "  ! line {}: {} share{} it with {} (false sharing when threads write them apart)",
            l.line,
            l.sync.join(", "),
            if l.sync.len() == 1 { "s" } else { "" },
            if l.others.is_empty() {
                "each other".to_string()
            } else {
                l.others.join(", ")
            }
        );
    }
    for name in &r.straddling {
        let _ = writeln!(out, "  ! {name} straddles a cache-line boundary");
    }
    let _ = writeln!(
        out,
        "  {:>6} {:>5}  {:<24} type",
        "offset", "size", "member"
    );
    let mut line = 0;
    for m in &s.members {
        if let Some(h) = r.holes.iter().find(|h| h.offset + h.bytes == m.offset) {
            let _ = writeln!(out, "  {:>6} {:>5}  -- hole", h.offset, h.bytes);
        }
        while m.offset >= (line + 1) * LINE {
            line += 1;
            let _ = writeln!(
                out,
                "  {:-^48}",
                format!(" line {line} at {} ", line * LINE)
            );
        }
        let _ = writeln!(
            out,
            "  {:>6} {:>5}  {:<24} {}{}",
            m.offset,
            m.size,
            m.name,
            m.type_name,
            if m.sync { "  [sync]" } else { "" }
        );
    }
    if r.tail_padding > 0 {
        let _ = writeln!(
            out,
            "  {:>6} {:>5}  -- tail padding",
            r.size - r.tail_padding,
            r.tail_padding
        );
    }
}
