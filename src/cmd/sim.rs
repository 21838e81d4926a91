//! `sediment sim BINARY... [--json] [-j N] -- ARGS`: run each binary with ARGS under valgrind's
//! lackey, stream its instruction trace into Sediment's own simulator (`sediment_sim::capture`)
//! and print I-cache and iTLB misses for several geometries, and the page and line footprint
//! of the binary's own code with its lower bound, side by side like `sediment compare`.
//!
//! The trace is never stored: lackey writes it to descriptor 3 (`--log-fd=3`), which a
//! `sh -c '... exec valgrind ... 3>&1 1>OUT 2>ERR'` wrapper points at our pipe while the program's own
//! standard output and error go to files in a private temporary directory. One pass answers
//! every geometry of [`ARRAYS`].
//!
//! The binary's code range. Lackey prints run-time addresses, and under valgrind a PIE is
//! loaded at a base of valgrind's choosing (0x108000 on amd64 with valgrind 3.19). Valgrind
//! and the program are one process, so once the first instruction line arrives (the dynamic
//! loader's, before any of the program's) the executable is mapped and `/proc/PID/maps`
//! shows where: for each executable `PT_LOAD` segment of the ELF file, the mapping of the same
//! file at the segment's page offset gives its run-time start,
//! `map_start + (p_offset - map_offset)`, and the range is `p_memsz` bytes from there (the
//! hull of all executable segments). The process cannot have exited at that point: it blocks
//! on the pipe until we read. Turned down: guessing the base from the lowest executed address
//! in a window (wrong when the program's first executed code is not at the segment start) and
//! valgrind's `-v` messages (they do not print load addresses).
//!
//! Output is deterministic: every number is a simulation count; wall time is not printed.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use sediment_sim::{Capture, Footprint, SetAssocLru};

/// Arguments of `sediment sim`.
#[derive(clap::Args)]
pub struct Args {
    /// The binaries to simulate; the first is the base of the ratio columns.
    #[arg(required = true)]
    pub binaries: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Binaries simulated at once (default: the number of cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// The `valgrind` executable.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: OsString,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true)]
    pub args: Vec<OsString>,
}

/// The simulated arrays: (JSON key, table label, block bytes, entries, ways). The first four
/// are the geometries `sediment compare` gives cachegrind (`sediment_measure::I1_CONFIGS`:
/// cachegrind's "iTLB" is an I1 of 4 KiB lines, e.g. `--I1=262144,8,4096` = 64 entries,
/// 8-way); the last two are fully associative iTLBs, which cachegrind cannot model.
pub const ARRAYS: [(&str, &str, u64, u64, u64); 6] = [
    ("i1_misses_32k_8way", "I1 misses 32K/8-way", 64, 512, 8),
    ("i1_misses_16k_4way", "I1 misses 16K/4-way", 64, 256, 4),
    (
        "itlb_misses_64",
        "iTLB misses 64 entries 8-way",
        4096,
        64,
        8,
    ),
    (
        "itlb_misses_128",
        "iTLB misses 128 entries 8-way",
        4096,
        128,
        8,
    ),
    (
        "itlb_misses_64_full",
        "iTLB misses 64 entries full",
        4096,
        64,
        64,
    ),
    (
        "itlb_misses_128_full",
        "iTLB misses 128 entries full",
        4096,
        128,
        128,
    ),
];

/// Everything `sediment sim` reports for one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimMetrics {
    /// Instructions executed by the whole process (comparable to cachegrind's `Ir`).
    pub instructions: u64,
    /// Instructions whose first byte is in the binary's executable segments.
    pub object_instructions: u64,
    /// Merged fetch ranges replayed.
    pub fetches: u64,
    /// Misses per entry of [`ARRAYS`], whole process.
    pub misses: Vec<u64>,
    /// Footprint of the binary's code at 4 KiB pages.
    pub pages: Footprint,
    /// Footprint of the binary's code at 64-byte lines.
    pub lines: Footprint,
    /// FNV-1a 64 of the program's standard output.
    pub stdout_fnv1a: String,
}

/// Runs `sediment sim`.
pub fn run(args: Args) -> Result<()> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let results = simulate_all(&args.binaries, &args.args, &args.valgrind, jobs)?;
    let labels = super::compare::labels(&args.binaries);
    let columns: Vec<(String, SimMetrics)> = labels.into_iter().zip(results).collect();
    let differing: Vec<&str> = columns[1..]
        .iter()
        .filter(|(_, m)| m.stdout_fnv1a != columns[0].1.stdout_fnv1a)
        .map(|(l, _)| l.as_str())
        .collect();
    if !differing.is_empty() {
        eprintln!(
            "sediment sim: warning: standard output differs from {} for: {}",
            columns[0].0,
            differing.join(", ")
        );
    }
    let text = if args.json {
        format_json(&columns)
    } else {
        format_table(&columns)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Simulates every binary, `jobs` at a time. Each result lands in its binary's slot, so the
/// output does not depend on scheduling; on failure the error of the first failing binary (in
/// argument order) is returned.
fn simulate_all(
    binaries: &[PathBuf],
    args: &[OsString],
    valgrind: &OsString,
    jobs: usize,
) -> Result<Vec<SimMetrics>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<SimMetrics>>>> =
        binaries.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(binaries.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(b) = binaries.get(i) else { break };
                let r = simulate(b, args, valgrind);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(binaries.len());
    for (slot, b) in slots.into_iter().zip(binaries) {
        match slot.into_inner().ok().flatten() {
            Some(r) => out.push(r?),
            None => bail!("{}: simulation did not run", b.display()),
        }
    }
    Ok(out)
}

/// Runs one binary under lackey and replays its trace.
pub fn simulate(binary: &Path, args: &[OsString], valgrind: &OsString) -> Result<SimMetrics> {
    let canon = std::fs::canonicalize(binary)
        .with_context(|| format!("{}: no such executable file", binary.display()))?;
    let data = crate::fsio::read_bytes(&canon)?;
    // The ELF reader's errors already name the file.
    let elf = sediment_elf::Binary::parse(&canon.to_string_lossy(), &data)?;
    let exec_segments: Vec<sediment_elf::Segment> = elf
        .segments
        .iter()
        .copied()
        .filter(|s| s.is_executable())
        .collect();
    if exec_segments.is_empty() {
        bail!("{}: no executable PT_LOAD segment", binary.display());
    }
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let out_file = tmp.path().join("stdout");
    let err_file = tmp.path().join("stderr");

    let mut child = Command::new("sh")
        .arg("-c")
        // Plain shell variables, not exported: the program sees our environment unchanged
        // (a longer environment alone changes the dynamic loader's instruction count).
        .arg(r#"o=$1 e=$2; shift 2; exec "$@" 3>&1 1>"$o" 2>"$e""#)
        .arg("sh")
        .arg(&out_file)
        .arg(&err_file)
        .arg(valgrind)
        .args(["--tool=lackey", "--trace-mem=yes", "-q", "--log-fd=3"])
        .arg(&canon)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "cannot run `sh -c 'exec valgrind ...'` to simulate {}",
                binary.display()
            )
        })?;
    let pid = child.id();
    let Some(pipe) = child.stdout.take() else {
        bail!("{}: no pipe to valgrind", binary.display());
    };
    let replayed = replay(pipe, pid, &canon, &exec_segments);
    if replayed.is_err() {
        // Stop a run whose trace we no longer read; it would block on the full pipe.
        let _ = child.kill();
    }
    let status = child
        .wait()
        .with_context(|| format!("{}: waiting for valgrind", binary.display()))?;
    let stderr_tail = || {
        std::fs::read_to_string(&err_file)
            .unwrap_or_default()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string()
    };
    let capture = match replayed {
        Ok(c) => c,
        Err(e) => {
            let tail = stderr_tail();
            return Err(if tail.is_empty() {
                e
            } else {
                e.context(format!("valgrind said: {tail}"))
            })
            .with_context(|| format!("lackey run of {}", binary.display()));
        }
    };
    if !status.success() {
        let detail = capture
            .messages()
            .last()
            .cloned()
            .unwrap_or_else(stderr_tail);
        bail!(
            "valgrind lackey run of {} failed ({status}): {detail}",
            binary.display()
        );
    }
    let profile = capture
        .exec_profile()
        .with_context(|| format!("{}: footprint", binary.display()))?;
    let stdout = std::fs::read(&out_file).unwrap_or_default();
    Ok(SimMetrics {
        instructions: capture.instructions(),
        object_instructions: capture.text_instructions(),
        fetches: capture.fetches(),
        misses: capture.arrays().iter().map(|a| a.stats().misses).collect(),
        pages: profile.footprint(4096)?,
        lines: profile.footprint(64)?,
        stdout_fnv1a: sediment_measure::fnv1a(&stdout),
    })
}

/// Reads the trace from `pipe`: the lines up to the first instruction, then the text range
/// from `/proc/PID/maps`, then the rest of the stream.
fn replay(
    pipe: impl Read,
    pid: u32,
    canon: &Path,
    segments: &[sediment_elf::Segment],
) -> Result<Capture> {
    let arrays = ARRAYS
        .iter()
        .map(|&(_, _, block, entries, ways)| SetAssocLru::new(block, entries, ways))
        .collect::<Result<Vec<_>, _>>()?;
    let mut capture = Capture::new(arrays);
    let mut reader = BufReader::with_capacity(1 << 20, pipe);
    // Valgrind messages before the first instruction (none with -q, unless it warns): bounded
    // by the line count so that a stream with no instruction cannot grow this buffer forever.
    let mut head = Vec::new();
    let mut first_insn = false;
    for _ in 0..10_000 {
        let start = head.len();
        let n = (&mut reader)
            .take(sediment_sim::capture::MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut head)
            .context("reading the lackey trace")?;
        if n == 0 {
            break;
        }
        if head[start] == b'I' {
            first_insn = true;
            break;
        }
    }
    if first_insn {
        let (s, e) = text_range(pid, canon, segments)?;
        capture.set_text(s, e)?;
    }
    capture
        .replay(head.as_slice().chain(reader))
        .context("lackey trace")?;
    capture.finish();
    Ok(capture)
}

/// The run-time `[start, end)` hull of the executable segments, from the process's memory map.
fn text_range(pid: u32, canon: &Path, segments: &[sediment_elf::Segment]) -> Result<(u64, u64)> {
    let maps_path = PathBuf::from(format!("/proc/{pid}/maps"));
    let maps = std::fs::read_to_string(&maps_path)
        .with_context(|| format!("{}: cannot read", maps_path.display()))?;
    let mut maps_of_file = Vec::new();
    for line in maps.lines() {
        // start-end perms offset dev inode path (the path may contain spaces).
        let mut f = line.splitn(6, ' ');
        let (Some(range), Some(_perms), Some(off), _, _, Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if Path::new(path.trim_start()) != canon {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let hex = |t: &str| u64::from_str_radix(t, 16).ok();
        if let (Some(s), Some(e), Some(o)) = (hex(s), hex(e), hex(off)) {
            maps_of_file.push((s, e, o));
        }
    }
    let mut hull: Option<(u64, u64)> = None;
    for seg in segments {
        let found = maps_of_file
            .iter()
            .find(|&&(s, e, o)| seg.offset >= o && seg.offset - o < e - s);
        let Some(&(s, _, o)) = found else {
            bail!(
                "{}: executable segment at file offset {:#x} not mapped in {}",
                canon.display(),
                seg.offset,
                maps_path.display()
            );
        };
        let start = s + (seg.offset - o);
        let end = start.saturating_add(seg.mem_size);
        hull = Some(match hull {
            None => (start, end),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }
    hull.ok_or_else(|| anyhow::anyhow!("{}: no executable segment", canon.display()))
}

/// One value of the table: a count, or a ratio `num / den` (printed with three decimals).
#[derive(Clone, Copy)]
enum Cell {
    Count(u64),
    Ratio(u64, u64),
}

impl Cell {
    fn value(self) -> Option<f64> {
        match self {
            Cell::Count(n) => Some(n as f64),
            Cell::Ratio(_, 0) => None,
            Cell::Ratio(n, d) => Some(n as f64 / d as f64),
        }
    }

    fn text(self) -> String {
        match self {
            Cell::Count(n) => n.to_string(),
            Cell::Ratio(..) => self.value().map_or("-".into(), |v| format!("{v:.3}")),
        }
    }
}

/// The rows: (JSON key, label, value).
fn rows(m: &SimMetrics) -> Vec<(String, String, Cell)> {
    let mut r = vec![
        (
            "instructions".into(),
            "instructions".into(),
            Cell::Count(m.instructions),
        ),
        (
            "object_instructions".into(),
            "instructions in binary".into(),
            Cell::Count(m.object_instructions),
        ),
    ];
    for (i, (key, label, ..)) in ARRAYS.iter().enumerate() {
        r.push((
            (*key).into(),
            (*label).into(),
            Cell::Count(m.misses.get(i).copied().unwrap_or(0)),
        ));
    }
    for (unit, key, f) in [
        ("4K pages", "pages", &m.pages),
        ("64B lines", "lines", &m.lines),
    ] {
        for (what, k, actual, bound) in [
            ("for 99%", "99", f.p99, f.bound_p99),
            ("for 99.9%", "99_9", f.p999, f.bound_p999),
            ("touched", "touched", f.touched, f.bound_touched),
        ] {
            r.push((
                format!("{key}_{k}"),
                format!("{unit} {what}"),
                Cell::Count(actual),
            ));
            r.push((
                format!("{key}_{k}_bound"),
                format!("{unit} {what}, lower bound"),
                Cell::Count(bound),
            ));
            r.push((
                format!("{key}_{k}_to_bound"),
                format!("{unit} {what} / bound"),
                Cell::Ratio(actual, bound),
            ));
        }
    }
    r
}

/// Text table: one row per metric, one column per binary, then NEW/BASE ratio columns
/// (three decimals, `-` when the base is 0). Right-aligned to the widest cell.
pub fn format_table(columns: &[(String, SimMetrics)]) -> String {
    let Some((base_label, base)) = columns.first() else {
        return String::new();
    };
    let mut header: Vec<String> = vec!["metric".into()];
    header.extend(columns.iter().map(|(l, _)| l.clone()));
    for (l, _) in &columns[1..] {
        header.push(format!("{l}/{base_label}"));
    }
    let base_rows = rows(base);
    let all: Vec<Vec<(String, String, Cell)>> = columns.iter().map(|(_, m)| rows(m)).collect();
    let mut table = vec![header];
    for (i, (_, label, base_cell)) in base_rows.iter().enumerate() {
        let mut row = vec![label.clone()];
        row.extend(all.iter().map(|r| r[i].2.text()));
        for r in &all[1..] {
            row.push(match (r[i].2.value(), base_cell.value()) {
                (Some(n), Some(b)) if b != 0.0 => format!("{:.3}", n / b),
                _ => "-".into(),
            });
        }
        table.push(row);
    }
    let ncol = table[0].len();
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for c in 1..ncol {
            let _ = write!(line, "  {:>w$}", r[c], w = widths[c]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// JSON: `{"base": LABEL, "columns": [{"label": ..., "metrics": {KEY: VALUE, ...}}]}`, base
/// first; counts are integers, ratios numbers with three decimals (or null).
pub fn format_json(columns: &[(String, SimMetrics)]) -> String {
    let mut s = String::from("{\n");
    let base = columns.first().map_or("", |(l, _)| l.as_str());
    let _ = writeln!(s, "  \"base\": {},", json_str(base));
    s.push_str("  \"columns\": [\n");
    for (ci, (label, m)) in columns.iter().enumerate() {
        let _ = writeln!(s, "    {{\n      \"label\": {},", json_str(label));
        s.push_str("      \"metrics\": {\n");
        let mut fields: Vec<String> = rows(m)
            .into_iter()
            .map(|(k, _, c)| {
                let v = match c {
                    Cell::Count(n) => n.to_string(),
                    Cell::Ratio(..) => c.value().map_or("null".into(), |v| format!("{v:.3}")),
                };
                format!("        {}: {v}", json_str(&k))
            })
            .collect();
        fields.push(format!("        \"fetches\": {}", m.fetches));
        fields.push(format!(
            "        \"stdout_fnv1a\": {}",
            json_str(&m.stdout_fnv1a)
        ));
        s.push_str(&fields.join(",\n"));
        s.push_str("\n      }\n    }");
        s.push_str(if ci + 1 < columns.len() { ",\n" } else { "\n" });
    }
    s.push_str("  ]\n}\n");
    s
}

/// A JSON string literal.
fn json_str(t: &str) -> String {
    let mut s = String::from("\"");
    for ch in t.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}
