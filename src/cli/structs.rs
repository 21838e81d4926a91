//! `sediment structs BIN [--name SUBSTR] [--all] [--json] [--top N] [--accesses DHAT]`: data
//! layout of the structures in a binary built with `-g`: holes, tail padding, members that
//! straddle a cache line, atomics or locks that share a cache line with other members or sit on
//! both lines of one 128-byte pair (the static signatures of false sharing). The DWARF is read
//! by `sediment_elf::types`, the analysis is `sediment_explain::structs`.
//!
//! By default only structures with findings are listed, those sharing a line with a lock or
//! atomic first, then by wasted bytes, then by name; `--all` lists every structure. Each is
//! printed member by member in the manner of `pahole`, with the holes and line boundaries
//! between them.
//!
//! With `--accesses` (a DHAT heap profile, `sediment_import::dhat`), the structures whose size
//! matches heap blocks with per-byte access counts are listed instead, most accessed first,
//! each member with its accesses, and a proposed hot/cold split of the first cache line.

use crate::fsio;
use anyhow::Result;
use sediment_elf::types::{read_structs, StructLayout};
use sediment_explain::structs::{analyze, fold, weigh, StructReport, Weighed};
use sediment_explain::LINE;
use sediment_import::dhat;
use std::collections::BTreeMap;
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
    /// A DHAT heap profile of a run (`valgrind --tool=dhat --dhat-out-file=FILE PROG`): weigh
    /// each member by how often its bytes were accessed in heap blocks of exactly the
    /// structure's size (up to 1024 bytes), and propose which members belong in the first
    /// cache line. Allocation points whose 16-bit counts overflowed are skipped and counted.
    #[arg(long, value_name = "FILE")]
    pub accesses: Option<PathBuf>,
    /// With `--accesses`: only heap blocks allocated with this function on the allocation
    /// stack (e.g. the constructor of the structure), when blocks of one size hold several
    /// structures.
    #[arg(long, value_name = "FUNCTION", requires = "accesses")]
    pub allocated_in: Option<String>,
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
    let sites = match &args.accesses {
        Some(path) => {
            let mut sites = dhat::read(&path.display().to_string(), &fsio::read_bytes(path)?)?;
            if let Some(f) = &args.allocated_in {
                sites.retain(|s| s.stack.iter().any(|frame| allocated_in(frame, f)));
            }
            Some(sites)
        }
        None => None,
    };
    let named: Vec<&StructLayout> = structs
        .iter()
        .filter(|s| args.name.as_deref().map_or(true, |n| s.name.contains(n)))
        .collect();
    // Looked up per structure by size: the sites by block size, the listed names by size.
    let mut by_size: BTreeMap<u64, Vec<&dhat::Site>> = BTreeMap::new();
    for site in sites.iter().flatten() {
        by_size.entry(site.block_bytes).or_default().push(site);
    }
    let mut names_of_size: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for s in &named {
        names_of_size.entry(s.size).or_default().push(&s.name);
    }
    let mut rows: Vec<Row> = named
        .iter()
        .map(|s| Row {
            layout: s,
            report: analyze(s),
            weighed: by_size.get(&s.size).and_then(|sites| {
                let same_size = names_of_size
                    .get(&s.size)
                    .map_or(0, |n| n.iter().filter(|&&n| n != s.name).count());
                weigh_from(s, sites, same_size)
            }),
        })
        .filter(|r| {
            args.all
                || match &sites {
                    Some(_) => r.weighed.is_some(),
                    None => r.report.has_findings(),
                }
        })
        .collect();
    rows.sort_by(|a, b| {
        let used = |r: &Row| r.weighed.as_ref().map_or(0, |w| w.weighed.accesses);
        used(b)
            .cmp(&used(a))
            .then(
                a.report
                    .shared_lines
                    .is_empty()
                    .cmp(&b.report.shared_lines.is_empty()),
            )
            .then(b.report.wasted().cmp(&a.report.wasted()))
            .then(a.report.name.cmp(&b.report.name))
            .then(a.report.size.cmp(&b.report.size))
    });
    let total = rows.len();
    rows.truncate(args.top);
    let mut out = String::new();
    if args.json {
        let reports: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(&r.report)?;
                if let (Some(w), Some(obj)) = (&r.weighed, v.as_object_mut()) {
                    obj.insert("accesses".into(), serde_json::to_value(w)?);
                }
                Ok(v)
            })
            .collect::<Result<_>>()?;
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
        for r in &rows {
            format_struct(&mut out, r);
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}

/// One listed structure: its layout, findings and, with `--accesses`, its use.
struct Row<'a> {
    layout: &'a StructLayout,
    report: StructReport,
    weighed: Option<Used>,
}

/// A structure weighed by a DHAT profile, and where the counts came from.
#[derive(serde::Serialize)]
struct Used {
    /// Allocation points of the structure's size skipped because DHAT's 16-bit counts
    /// stopped or wrapped there (`sediment_import::dhat::Site::exact`).
    inexact: usize,
    /// Allocation points whose counts were folded onto the structure.
    blocks: usize,
    /// Other listed structures of the same size (the counts may be theirs).
    same_size: usize,
    /// The allocation point of the first matching block (its innermost frame outside the
    /// allocator).
    allocated_at: String,
    #[serde(flatten)]
    weighed: Weighed,
}

/// Weighs `s` by the DHAT sites whose blocks are of its size (`sites`, at least one);
/// `same_size` other listed structures have that size.
fn weigh_from(s: &StructLayout, sites: &[&dhat::Site], same_size: usize) -> Option<Used> {
    let first = sites.first()?;
    let inexact = sites.iter().filter(|x| !x.exact).count();
    let blocks: Vec<(u64, &[u64])> = sites
        .iter()
        .filter(|x| x.exact)
        .map(|x| (x.block_bytes, x.accesses.as_slice()))
        .collect();
    let (counts, used) = fold(s.size, &blocks).unwrap_or((vec![0; s.size as usize], 0));
    let allocated_at = first
        .stack
        .iter()
        .find(|f| !f.contains("vgpreload_") && !f.contains("[root]"))
        .map_or_else(String::new, |f| {
            f.split_once(": ")
                .map_or(f.as_str(), |(_, n)| n)
                .to_string()
        });
    Some(Used {
        inexact,
        blocks: used,
        same_size,
        allocated_at,
        weighed: weigh(s, &counts),
    })
}

/// One structure, member by member.
fn format_struct(out: &mut String, row: &Row) {
    let (s, r) = (row.layout, &row.report);
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
    for p in &r.paired_lines {
        let _ = writeln!(
            out,
            "  ! lines {} and {} (one 128-byte pair): {} and {} are fetched together (false sharing through the adjacent-line prefetcher)",
            p.line,
            p.line + 1,
            p.first.join(", "),
            p.second.join(", ")
        );
    }
    for name in &r.straddling {
        let _ = writeln!(out, "  ! {name} straddles a cache-line boundary");
    }
    if let Some(u) = &row.weighed {
        format_use(out, u);
    }
    let w = row
        .weighed
        .as_ref()
        .filter(|u| u.blocks > 0)
        .map(|u| &u.weighed);
    let _ = writeln!(
        out,
        "  {:>6} {:>5}  {:<24} {}type",
        "offset",
        "size",
        "member",
        if w.is_some() {
            format!("{:>10} {:>6}  ", "accesses", "share")
        } else {
            String::new()
        }
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
        let used = w
            .and_then(|w| {
                w.members
                    .iter()
                    .find(|u| u.offset == m.offset && u.name == m.name)
            })
            .map_or_else(String::new, |u| {
                format!(
                    "{:>10} {:>5.1}%  ",
                    u.accesses,
                    percent(u.accesses, w.map_or(0, |w| w.accesses))
                )
            });
        let _ = writeln!(
            out,
            "  {:>6} {:>5}  {:<24} {used}{}{}",
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

/// Whether a DHAT frame (`0xADDR: name (file:line)` or `0xADDR: name (in object)`) names
/// `function`.
fn allocated_in(frame: &str, function: &str) -> bool {
    let name = frame.split_once(": ").map_or(frame, |(_, n)| n);
    name.split(" (").next() == Some(function)
}

/// `n` as a percentage of `total` (0 when there is no total).
fn percent(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}

/// The access summary of one structure: where the counts came from, hot lines and pairs, and
/// the proposed split.
fn format_use(out: &mut String, u: &Used) {
    let w = &u.weighed;
    if u.inexact > 0 {
        let _ = writeln!(
            out,
            "  ! {} allocation point{} of this size skipped: DHAT's 16-bit counts stopped or wrapped there (record a shorter run)",
            u.inexact,
            if u.inexact == 1 { "" } else { "s" }
        );
    }
    if u.blocks == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  accesses: {} byte accesses in {} allocation point{} (first at {}){}",
        w.accesses,
        u.blocks,
        if u.blocks == 1 { "" } else { "s" },
        if u.allocated_at.is_empty() {
            "?"
        } else {
            &u.allocated_at
        },
        if u.same_size > 0 {
            format!(
                "; {} other structure{} of this size: narrow with --name",
                u.same_size,
                if u.same_size == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        }
    );
    let lines: Vec<String> = w
        .per_line
        .iter()
        .enumerate()
        .map(|(i, &n)| format!("{i}: {:.1}%", percent(n, w.accesses)))
        .collect();
    let _ = writeln!(out, "  per line: {}", lines.join(", "));
    for l in &w.hot_pairs {
        let _ = writeln!(
            out,
            "  ! lines {l} and {} (one 128-byte pair) are both hot: if different threads write them, the pair bounces",
            l + 1
        );
    }
    if w.hot.is_empty() {
        let _ = writeln!(
            out,
            "  first line holds {:.1}% of accesses; no split gains 5 points",
            100.0 * w.first_line_share
        );
    } else {
        let _ = writeln!(
            out,
            "  proposed first line: {} ({:.1}% of accesses, now {:.1}%); the rest after it",
            w.hot.join(", "),
            100.0 * w.proposed_share,
            100.0 * w.first_line_share
        );
    }
}
