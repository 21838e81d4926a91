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
//! Other layouts in the same run (`sediment_sim::capture` views):
//! - `--shifts K [--shift-step S]`: every layout is also simulated with the binary's code
//!   moved by `S, 2S, ... (K-1)S` bytes, as a pad before the code would move it, and each
//!   cell becomes `median [min-max]` over the K shifts. The default step,
//!   [`sediment_sim::PAGE_SHIFT_STEP`], moves the pages too. I1 miss counts move a lot with
//!   addresses alone (docs/design/statistics.md), so a single I1 figure is layout luck; the median over
//!   shifts is what `sediment compare --shifts` reports.
//! - `--order FILE` (one binary only, repeatable): a proposed function order is replayed
//!   without relinking. Each executed address of the binary's code is mapped to (function,
//!   offset) through the binary's function symbols, and the functions are placed the way lld
//!   places a `--symbol-ordering-file` link: the ordered functions first from the start of
//!   the first function, each aligned to `--align` bytes (gcc's `-O2` function alignment is
//!   16), then every other function in address order (lld's input order for a default link).
//!   Code outside every function symbol (`.init`, the PLT, padding) and `_init`/`_fini`
//!   (their own sections, which an ordering file does not move) keep their addresses.
//!   Entries resolve as lld resolves a symbol-ordering file, by name alone: every function
//!   of that name (statics of other files too) takes the position of the name's first entry,
//!   ties kept in address order. This is what `sediment link --linker lld` output gives
//!   (it warns about such shared names), so a prediction is checked against a real relink.
//!   Entries naming no function of the binary are one counted warning.
//! - `--first-order FILE` (one binary only): writes the binary's functions in the order their
//!   code first ran, an order file for `sediment order --algorithm bp --startup FILE`. The
//!   capture notes each distinct executed range of the code when it first runs
//!   (`Capture::first_executed`); each is moved back to its link-time address and looked up in
//!   the symbol table, and a function is listed at its first range.
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
use sediment_sim::{Capture, Footprint, Relayout, SetAssocLru, TextMap};

/// Arguments of `sediment sim`.
#[derive(clap::Args)]
pub struct Args {
    /// The binaries to simulate; the first is the base of the ratio columns.
    #[arg(required = true, value_name = "BINARY")]
    pub binaries: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Threads (default: the number of cores): binaries simulated at once, and those left
    /// over with fewer binaries feed each run's shifted and reordered layouts.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// The `valgrind` executable.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: OsString,
    /// Layouts per column: the code as linked and shifted by BYTES, 2*BYTES, ... bytes; cells
    /// become `median [min-max]` over them.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub shifts: u64,
    /// Bytes between consecutive shifts (default: a 4 KiB page and 80 bytes, so that the
    /// shifts move the code's pages to other iTLB sets and its lines to other L1i sets).
    #[arg(long, value_name = "BYTES", default_value_t = sediment_sim::PAGE_SHIFT_STEP)]
    pub shift_step: u64,
    /// A proposed function order (`sediment order` output) to replay without relinking, as
    /// an extra column; repeatable; needs exactly one binary.
    #[arg(long = "order", value_name = "FILE")]
    pub orders: Vec<PathBuf>,
    /// Write the binary's functions in the order they first ran (an order file, the
    /// first-execution order `sediment order --algorithm bp --startup` takes); one binary only.
    #[arg(long, value_name = "FILE")]
    pub first_order: Option<PathBuf>,
    /// Alignment in bytes of each function placed by `--order`.
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub align: u64,
    /// Arguments passed to every binary (after `--`).
    #[arg(last = true, value_name = "ARGS")]
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

/// Most shifts one run may ask for: each is one more set of arrays fed every fetch.
pub const MAX_SHIFTS: u64 = 64;

/// Largest total shift, as `sediment noise` allows for its pad: far beyond any cache or TLB.
const MAX_SHIFT_BYTES: u64 = 64 << 20;

/// Most `--order` files (each is `--shifts` more sets of arrays).
const MAX_ORDERS: usize = 16;

/// The layouts simulated from each run besides the binary as linked.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Shifts in bytes, the first 0.
    pub shifts: Vec<u64>,
    /// Proposed orders: (column label, order).
    pub orders: Vec<(String, sediment_profile::FunctionOrder)>,
    /// Also collect the first-execution order of the binary's functions.
    pub first_order: bool,
    /// Alignment of functions placed by an order.
    pub align: u64,
    /// Also keep the run for later replays ([`sediment_sim::Recording`]), at most this many
    /// fetches; see [`record`].
    pub record: Option<usize>,
    /// Threads feeding the run's other layouts (shifts and orders) their fetches
    /// ([`sediment_sim::Capture::set_threads`]); [`simulate_all`] sets it from its jobs.
    pub threads: usize,
}

impl Plan {
    /// Only the layout as linked.
    pub fn as_linked() -> Self {
        Self {
            shifts: vec![0],
            orders: Vec::new(),
            first_order: false,
            align: 16,
            record: None,
            threads: 1,
        }
    }

    /// Shifts `0, step, ..., (k-1)*step`, checked against [`MAX_SHIFTS`] and the largest pad.
    pub fn with_shifts(k: u64, step: u64) -> Result<Self> {
        if k == 0 || k > MAX_SHIFTS {
            bail!("--shifts must be between 1 and {MAX_SHIFTS}, not {k}");
        }
        match (k - 1).checked_mul(step) {
            Some(m) if m <= MAX_SHIFT_BYTES => {}
            _ => bail!(
                "--shifts {k} --shift-step {step}: the largest shift exceeds {MAX_SHIFT_BYTES} bytes"
            ),
        }
        Ok(Self {
            shifts: (0..k).map(|i| i * step).collect(),
            ..Self::as_linked()
        })
    }

    /// A description of the shifts for a table header, or `None` for one layout.
    pub fn describe_shifts(&self) -> Option<String> {
        let (k, last) = (self.shifts.len(), *self.shifts.last()?);
        (k > 1).then(|| {
            format!(
                "{k} layouts per column: code as linked and shifted by up to {last} bytes in steps of {}; cells: median [min-max]",
                self.shifts[1]
            )
        })
    }
}

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
    /// With [`Plan::first_order`], for the as-linked layout at shift 0: the binary's functions
    /// in the order they first ran; empty otherwise.
    pub first_executed: Vec<sediment_profile::FuncKey>,
}

/// Runs `sediment sim`.
pub fn run(args: Args) -> Result<()> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let mut plan = Plan::with_shifts(args.shifts, args.shift_step)?;
    plan.align = args.align;
    if !args.orders.is_empty() {
        if args.binaries.len() != 1 {
            bail!("--order replays proposed orders of one binary; give exactly one binary");
        }
        if args.orders.len() > MAX_ORDERS {
            bail!("at most {MAX_ORDERS} --order files");
        }
        if args.align == 0 || args.align > 4096 {
            bail!("--align must be between 1 and 4096, not {}", args.align);
        }
        let labels = super::compare::labels(&args.orders);
        for (path, label) in args.orders.iter().zip(labels) {
            let text = crate::fsio::read_text(path)?;
            let order = sediment_profile::FunctionOrder::from_text(&text)
                .with_context(|| path.display().to_string())?;
            plan.orders.push((label, order));
        }
    }
    if args.first_order.is_some() {
        if args.binaries.len() != 1 {
            bail!(
                "--first-order records one binary's first-execution order; give exactly one binary"
            );
        }
        plan.first_order = true;
    }
    let results = simulate_all(
        &args.binaries,
        &args.args,
        &args.valgrind,
        jobs,
        &plan,
        None,
    )?;
    if let Some(path) = &args.first_order {
        let first = results
            .first()
            .and_then(|l| l.first())
            .and_then(|s| s.first())
            .map(|m| m.first_executed.clone())
            .unwrap_or_default();
        let mut order = sediment_profile::FunctionOrder {
            functions: first,
            ..Default::default()
        };
        order
            .meta
            .insert("binary".into(), args.binaries[0].display().to_string());
        order
            .meta
            .insert("source".into(), "lackey first execution".into());
        crate::fsio::write_atomic(path, order.to_text().as_bytes())?;
    }
    let mut columns: Vec<(String, Vec<SimMetrics>)> = Vec::new();
    for (label, layouts) in super::compare::labels(&args.binaries)
        .into_iter()
        .zip(results)
    {
        let mut layouts = layouts.into_iter();
        if let Some(linked) = layouts.next() {
            columns.push((label.clone(), linked));
        }
        for ((order_label, _), m) in plan.orders.iter().zip(layouts) {
            columns.push((format!("{label}@{order_label}"), m));
        }
    }
    let differing: Vec<&str> = columns[1..]
        .iter()
        .filter(|(_, m)| m[0].stdout_fnv1a != columns[0].1[0].stdout_fnv1a)
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
        format_json(&columns, &plan.shifts)
    } else {
        let mut t = plan
            .describe_shifts()
            .map_or_else(String::new, |d| format!("# {d}\n"));
        t.push_str(&format_table(&columns, None));
        t
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The metrics of one binary: per layout (as linked, then each order of the plan), per shift.
pub type Layouts = Vec<Vec<SimMetrics>>;

/// Simulates every binary, `jobs` at a time; with fewer binaries than jobs, the rest share the
/// feeding of each run's layouts ([`Plan::threads`]). Each result lands in its binary's slot,
/// so the output does not depend on scheduling; on failure the error of the first failing
/// binary (in argument order) is returned. Every run reads `stdin` (a file, opened afresh) or nothing.
pub fn simulate_all(
    binaries: &[PathBuf],
    args: &[OsString],
    valgrind: &OsString,
    jobs: usize,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<Vec<Layouts>> {
    // Jobs left over once every binary has one feed that binary's layouts.
    let plan = &Plan {
        threads: (jobs / binaries.len().max(1)).max(1),
        ..plan.clone()
    };
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<Layouts>>>> =
        binaries.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(binaries.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(b) = binaries.get(i) else { break };
                let r = simulate(b, args, valgrind, plan, stdin);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut out: Vec<Layouts> = Vec::with_capacity(binaries.len());
    for (slot, b) in slots.into_iter().zip(binaries) {
        match slot.into_inner().ok().flatten() {
            Some(r) => out.push(r?),
            None => bail!("{}: simulation did not run", b.display()),
        }
    }
    Ok(out)
}

/// Runs one binary under lackey and replays its trace under every layout of `plan`; the
/// program reads `stdin` (a file) or nothing.
pub fn simulate(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<Layouts> {
    Ok(run_lackey(binary, args, valgrind, plan, stdin)?.0)
}

/// A run kept for replays: the recording and the name of each of its units (functions).
pub struct Recorded {
    /// The run, the binary's code relative to its functions.
    pub recording: sediment_sim::Recording,
    /// Symbol name of each unit of the recording.
    pub names: Vec<String>,
}

/// [`simulate`], also keeping the run ([`Plan::record`], or the default cap when unset).
pub fn record(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
) -> Result<(Layouts, Recorded)> {
    let mut plan = plan.clone();
    plan.record = plan
        .record
        .or(Some(sediment_sim::record::DEFAULT_MAX_EVENTS));
    match run_lackey(binary, args, valgrind, &plan, None)? {
        (layouts, Some(r)) => Ok((layouts, r)),
        (_, None) => bail!("{}: the trace has no instruction", binary.display()),
    }
}

fn run_lackey(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<(Layouts, Option<Recorded>)> {
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
    let units = Units::of(&elf, &exec_segments);
    let relayouts = plan
        .orders
        .iter()
        .map(|(label, order)| units.place(order, plan.align, &canon, label))
        .collect::<Result<Vec<_>>>()?;
    let to_record = plan
        .record
        .map(|max| (units.start.as_slice(), units.size.as_slice(), max));
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let out_file = tmp.path().join("stdout");
    let err_file = tmp.path().join("stderr");

    let mut sh = Command::new("sh");
    sediment_measure::die_with_parent(&mut sh);
    let mut child = sh
        .arg("-c")
        // Plain shell variables, not exported: the program sees our environment unchanged
        // (a longer environment alone changes the dynamic loader's instruction count).
        .arg(r#"o=$1 e=$2; shift 2; exec "$@" 3>&1 1>"$o" 2>"$e""#)
        .arg("sh")
        .arg(&out_file)
        .arg(&err_file)
        .arg(valgrind)
        // `--vgdb=no` as in sediment-measure: no PID-named FIFOs in /tmp.
        .args([
            "--tool=lackey",
            "--trace-mem=yes",
            "-q",
            "--vgdb=no",
            "--log-fd=3",
        ])
        .arg(&canon)
        .args(args)
        .stdin(sediment_measure::stdin_for(stdin)?)
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
    let replayed = replay(
        pipe,
        pid,
        &canon,
        &exec_segments,
        plan,
        &relayouts,
        to_record,
    );
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
    let mut capture = match replayed {
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
    let stdout = sediment_measure::fnv1a(&std::fs::read(&out_file).unwrap_or_default());
    // View `v` is layout `v / shifts`, shift `v % shifts`, with the base arrays standing in
    // for view "-1" (as linked, shift 0); see `replay`.
    let k = plan.shifts.len();
    let metrics =
        |arrays: &[SetAssocLru], profile: sediment_sim::ExecProfile| -> Result<SimMetrics> {
            Ok(SimMetrics {
                instructions: capture.instructions(),
                object_instructions: capture.text_instructions(),
                fetches: capture.fetches(),
                misses: arrays.iter().map(|a| a.stats().misses).collect(),
                pages: profile.footprint(4096)?,
                lines: profile.footprint(64)?,
                stdout_fnv1a: stdout.clone(),
                first_executed: Vec::new(),
            })
        };
    let mut out: Layouts = Vec::with_capacity(1 + relayouts.len());
    for layout in 0..=relayouts.len() {
        let mut per_shift = Vec::with_capacity(k);
        for shift in 0..k {
            let m = match (layout * k + shift).checked_sub(1) {
                None => metrics(capture.arrays(), capture.exec_profile()?),
                Some(v) => metrics(capture.view_arrays(v), capture.view_profile(v)?),
            }
            .with_context(|| format!("{}: footprint", binary.display()))?;
            per_shift.push(m);
        }
        out.push(per_shift);
    }
    if plan.first_order {
        if let Some(linked) = out.first_mut().and_then(|l| l.first_mut()) {
            linked.first_executed = first_functions(&elf, &exec_segments, &capture);
        }
    }
    let recorded = capture.take_recording().map(|recording| Recorded {
        recording,
        names: units
            .index
            .iter()
            .map(|&i| elf.functions[i].key.name.clone())
            .collect(),
    });
    Ok((out, recorded))
}

/// The binary's functions in the order their code first ran: each first-executed range of the
/// trace, moved back to link-time addresses (minus the load bias), looked up in the symbol
/// table; a function is listed at its first range. Ranges outside any function symbol (PLT
/// stubs) are skipped.
fn first_functions(
    elf: &sediment_elf::Binary,
    segments: &[sediment_elf::Segment],
    capture: &Capture,
) -> Vec<sediment_profile::FuncKey> {
    let Some((run_start, _)) = capture.text() else {
        return Vec::new();
    };
    let link_start = segments.iter().map(|g| g.vaddr).min().unwrap_or(0);
    let bias = run_start.wrapping_sub(link_start);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for &addr in capture.first_executed() {
        if let Some(f) = elf.function_at(addr.wrapping_sub(bias)) {
            if seen.insert(&f.key) {
                out.push(f.key.clone());
            }
        }
    }
    out
}

/// Arrays of one layout, one per entry of [`ARRAYS`].
fn new_arrays() -> Result<Vec<SetAssocLru>> {
    Ok(ARRAYS
        .iter()
        .map(|&(_, _, block, entries, ways)| SetAssocLru::new(block, entries, ways))
        .collect::<Result<Vec<_>, _>>()?)
}

/// The functions an order can move: function symbols with a size inside the executable
/// segments, except `_init` and `_fini` (they live in `.init`/`.fini`, which no ordering file
/// moves), in address order, sizes clipped so that none overlaps the next.
struct Units<'a> {
    elf: &'a sediment_elf::Binary,
    /// Indices into `elf.functions`.
    index: Vec<usize>,
    start: Vec<u64>,
    size: Vec<u64>,
}

/// A proposed order in link-time addresses: (old starts, sizes, new starts).
pub struct Placement {
    old: Vec<u64>,
    size: Vec<u64>,
    new: Vec<u64>,
}

impl<'a> Units<'a> {
    fn of(elf: &'a sediment_elf::Binary, exec: &[sediment_elf::Segment]) -> Self {
        let in_exec = |a: u64, n: u64| {
            exec.iter().any(|s| {
                a >= s.vaddr && a - s.vaddr < s.mem_size && n <= s.mem_size - (a - s.vaddr)
            })
        };
        let mut u = Units {
            elf,
            index: Vec::new(),
            start: Vec::new(),
            size: Vec::new(),
        };
        for (i, f) in elf.functions.iter().enumerate() {
            if f.size == 0 || matches!(f.key.name.as_str(), "_init" | "_fini") {
                continue;
            }
            if !in_exec(f.address, f.size) {
                continue;
            }
            // `functions` is sorted by address: clip the previous one at this start.
            if let (Some(ps), Some(pz)) = (u.start.last(), u.size.last_mut()) {
                *pz = (*pz).min(f.address - ps);
            }
            u.index.push(i);
            u.start.push(f.address);
            u.size.push(f.size);
        }
        u
    }

    /// Where `order` puts every unit: [`sediment_sim::layout_from_order`] from the first
    /// unit's address. Errors when no entry of the order names a function of the binary.
    fn place(
        &self,
        order: &sediment_profile::FunctionOrder,
        align: u64,
        binary: &Path,
        label: &str,
    ) -> Result<Placement> {
        use std::collections::HashMap;
        // lld's rule: a symbol name's priority is its first position in the file, and every
        // section defining a symbol of that name gets it, statics of other files included.
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (pos, key) in order.functions.iter().enumerate() {
            first.entry(key.name.as_str()).or_insert(pos);
        }
        let mut ranked: Vec<(usize, u32)> = Vec::new();
        let mut found: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (u, &i) in self.index.iter().enumerate() {
            let name = self.elf.functions[i].key.name.as_str();
            if let Some(&pos) = first.get(name) {
                let u = u32::try_from(u).context("too many functions")?;
                ranked.push((pos, u));
                found.insert(name);
            }
        }
        // Equal priorities keep address order (lld keeps input order), so the sort is total.
        ranked.sort_unstable();
        let idx: Vec<u32> = ranked.into_iter().map(|(_, u)| u).collect();
        let missing: Vec<String> = order
            .functions
            .iter()
            .filter(|k| !found.contains(k.name.as_str()))
            .map(|k| k.to_string())
            .collect();
        if idx.is_empty() && !order.functions.is_empty() {
            bail!(
                "{label}: none of its {} functions is in {} (order made for another program?)",
                order.functions.len(),
                binary.display()
            );
        }
        if !missing.is_empty() {
            let first: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
            eprintln!(
                "sediment sim: warning: {label}: {} of {} functions not in {} (first: {})",
                missing.len(),
                order.functions.len(),
                binary.display(),
                first.join(", ")
            );
        }
        let base = self.start.first().copied().unwrap_or(0);
        Ok(Placement {
            old: self.start.clone(),
            size: self.size.clone(),
            new: sediment_sim::layout_from_order(&idx, &self.size, align, base),
        })
    }
}

/// Reads the trace from `pipe`: the lines up to the first instruction, then the text range
/// from `/proc/PID/maps`, then the rest of the stream.
///
/// Views are added in the order layout-major, shift-minor, skipping (as linked, shift 0),
/// which the base arrays are: view `v` is layout `(v + 1) / shifts`, shift `(v + 1) % shifts`.
fn replay(
    pipe: impl Read,
    pid: u32,
    canon: &Path,
    segments: &[sediment_elf::Segment],
    plan: &Plan,
    relayouts: &[Placement],
    to_record: Option<(&[u64], &[u64], usize)>,
) -> Result<Capture> {
    let shifts = &plan.shifts;
    let mut capture = Capture::new(new_arrays()?);
    capture.set_threads(plan.threads);
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
        // Run-time minus link-time address of the code (the PIE load bias; 0 otherwise).
        let link_start = segments.iter().map(|g| g.vaddr).min().unwrap_or(0);
        let bias = s.wrapping_sub(link_start);
        if let Some((starts, sizes, max)) = to_record {
            let run: Vec<u64> = starts.iter().map(|a| a.wrapping_add(bias)).collect();
            let r = sediment_sim::Recording::new(run, sizes.to_vec(), max)
                .with_context(|| format!("{}: recording the run", canon.display()))?;
            capture.set_recording(r);
        }
        for &d in shifts.iter().skip(1) {
            capture.add_view(TextMap::Shift(d), new_arrays()?);
        }
        for p in relayouts {
            let old: Vec<u64> = p.old.iter().map(|a| a.wrapping_add(bias)).collect();
            for &d in shifts {
                let new: Vec<u64> = p
                    .new
                    .iter()
                    .map(|a| a.wrapping_add(bias).saturating_add(d))
                    .collect();
                let r = Relayout::new(&old, &p.size, &new)
                    .with_context(|| format!("{}: placing an order", canon.display()))?;
                capture.add_view(TextMap::Relayout(r), new_arrays()?);
            }
        }
    } else if shifts.len() > 1 || !relayouts.is_empty() {
        bail!("{}: the trace has no instruction", canon.display());
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
        let (Some(range), Some(perms), Some(off), _, _, Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        // Only executable mappings: a read-only mapping of the preceding segment can cover
        // the code segment's file offset too (lld leaves the code at a vaddr one page past
        // its file offset, so the read-only mapping's last page holds the same file bytes).
        if Path::new(path.trim_start()) != canon || !perms.contains('x') {
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

/// One cell of the table over K shifts: median, minimum and maximum of the row's values
/// (`None` when no shift had a value, e.g. a ratio to a bound of 0). The median of an even
/// count is the mean of the two middle values, as in `sediment_measure::spread`.
#[derive(Clone, Copy)]
struct Summary {
    count: bool,
    values: Option<(f64, f64, f64)>,
}

impl Summary {
    fn of(cells: &[Cell]) -> Self {
        let mut v: Vec<f64> = cells.iter().filter_map(|c| c.value()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let values = (n > 0).then(|| {
            let med = if n % 2 == 1 {
                v[n / 2]
            } else {
                v[n / 2 - 1] / 2.0 + v[n / 2] / 2.0
            };
            (med, v[0], v[n - 1])
        });
        Self {
            count: cells.first().is_some_and(|c| matches!(c, Cell::Count(_))),
            values,
        }
    }

    fn median(self) -> Option<f64> {
        self.values.map(|(m, ..)| m)
    }

    fn num(self, v: f64) -> String {
        if !self.count {
            format!("{v:.3}")
        } else if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    }

    /// `value`, or `median [min-max]` when the shifts disagree.
    fn text(self) -> String {
        match self.values {
            None => "-".into(),
            Some((m, lo, hi)) if lo == hi => self.num(m),
            Some((m, lo, hi)) => format!("{} [{}-{}]", self.num(m), self.num(lo), self.num(hi)),
        }
    }

    /// The JSON value of the median (an integer when it is one).
    fn json(self, v: Option<f64>) -> String {
        v.map_or("null".into(), |v| self.num(v))
    }
}

/// Every row of a column summarised over its shifts: (JSON key, label, summary).
fn summarise(shifted: &[SimMetrics]) -> Vec<(String, String, Summary)> {
    let per_shift: Vec<Vec<(String, String, Cell)>> = shifted.iter().map(rows).collect();
    let Some(first) = per_shift.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, (key, label, _))| {
            let cells: Vec<Cell> = per_shift.iter().map(|r| r[i].2).collect();
            (key.clone(), label.clone(), Summary::of(&cells))
        })
        .collect()
}

/// Text table: one row per metric (only the rows whose JSON key is in `only`, if given), one
/// column per layout, then NEW/BASE ratio columns of the medians (three decimals, `-` when
/// the base is 0). A cell is the value, or `median [min-max]` over the column's shifts.
/// Right-aligned to the widest cell.
pub fn format_table(columns: &[(String, Vec<SimMetrics>)], only: Option<&[&str]>) -> String {
    let Some((base_label, _)) = columns.first() else {
        return String::new();
    };
    let mut header: Vec<String> = vec!["metric".into()];
    header.extend(columns.iter().map(|(l, _)| l.clone()));
    for (l, _) in &columns[1..] {
        header.push(format!("{l}/{base_label}"));
    }
    let all: Vec<Vec<(String, String, Summary)>> =
        columns.iter().map(|(_, m)| summarise(m)).collect();
    let mut table = vec![header];
    for (i, (key, label, base_cell)) in all[0].iter().enumerate() {
        if only.is_some_and(|keys| !keys.contains(&key.as_str())) {
            continue;
        }
        let mut row = vec![label.clone()];
        row.extend(all.iter().map(|r| r[i].2.text()));
        for r in &all[1..] {
            row.push(match (r[i].2.median(), base_cell.median()) {
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

/// JSON: `{"base": LABEL, "shifts": [BYTES...], "columns": [{"label": ..., "metrics": {KEY:
/// VALUE, ...}}]}`, base first; counts are integers (the median over the shifts: a number
/// with one decimal when two middle values are averaged), ratios numbers with three decimals
/// (or null). With more than one shift each column also has `"min"` and `"max"` objects of the
/// same keys, and `"per_shift"`: one object of the same keys per shift, in shift order.
pub fn format_json(columns: &[(String, Vec<SimMetrics>)], shifts: &[u64]) -> String {
    let mut s = String::from("{\n");
    let base = columns.first().map_or("", |(l, _)| l.as_str());
    let _ = writeln!(s, "  \"base\": {},", json_str(base));
    let list: Vec<String> = shifts.iter().map(u64::to_string).collect();
    let _ = writeln!(s, "  \"shifts\": [{}],", list.join(", "));
    s.push_str("  \"columns\": [\n");
    for (ci, (label, shifted)) in columns.iter().enumerate() {
        let _ = writeln!(s, "    {{\n      \"label\": {},", json_str(label));
        let summary = summarise(shifted);
        let object = |pick: &dyn Fn(Summary) -> Option<f64>, extra: bool| {
            let mut fields: Vec<String> = summary
                .iter()
                .map(|(k, _, c)| format!("        {}: {}", json_str(k), c.json(pick(*c))))
                .collect();
            if extra {
                if let Some(m) = shifted.first() {
                    fields.push(format!("        \"fetches\": {}", m.fetches));
                    fields.push(format!(
                        "        \"stdout_fnv1a\": {}",
                        json_str(&m.stdout_fnv1a)
                    ));
                }
            }
            fields.join(",\n")
        };
        let _ = write!(
            s,
            "      \"metrics\": {{\n{}\n      }}",
            object(&|c| c.median(), true)
        );
        if shifted.len() > 1 {
            let _ = write!(
                s,
                ",\n      \"min\": {{\n{}\n      }},\n      \"max\": {{\n{}\n      }}",
                object(&|c| c.values.map(|v| v.1), false),
                object(&|c| c.values.map(|v| v.2), false)
            );
            let each: Vec<String> = shifted
                .iter()
                .map(|m| {
                    let fields: Vec<String> = summarise(std::slice::from_ref(m))
                        .iter()
                        .map(|(k, _, c)| format!("{}: {}", json_str(k), c.json(c.median())))
                        .collect();
                    format!("        {{{}}}", fields.join(", "))
                })
                .collect();
            let _ = write!(
                s,
                ",\n      \"per_shift\": [\n{}\n      ]",
                each.join(",\n")
            );
        }
        s.push_str("\n    }");
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

#[cfg(test)]
mod tests {
    use super::*;

    // Counts over shifts: odd count -> middle value, even -> mean of the middle two, a
    // constant row prints once; ratios keep three decimals and skip shifts with a zero bound.
    #[test]
    fn summaries_over_shifts() {
        let c = |v: &[u64]| Summary::of(&v.iter().map(|&n| Cell::Count(n)).collect::<Vec<_>>());
        assert_eq!(c(&[9, 1, 5]).text(), "5 [1-9]");
        assert_eq!(c(&[4, 1, 2, 9]).text(), "3 [1-9]");
        assert_eq!(c(&[4, 1, 3, 9]).text(), "3.5 [1-9]");
        assert_eq!(c(&[7, 7]).text(), "7");
        let r = Summary::of(&[Cell::Ratio(3, 2), Cell::Ratio(1, 0), Cell::Ratio(5, 2)]);
        assert_eq!(r.text(), "2.000 [1.500-2.500]");
        assert_eq!(Summary::of(&[Cell::Ratio(1, 0)]).text(), "-");
    }

    // Shift plans: K layouts from 0 in steps; K = 0, K over the cap and a pad past 64 MiB are
    // errors naming the flag.
    #[test]
    fn shift_plans() {
        assert_eq!(Plan::with_shifts(3, 80).unwrap().shifts, [0, 80, 160]);
        assert_eq!(Plan::with_shifts(1, 80).unwrap().describe_shifts(), None);
        assert!(Plan::with_shifts(0, 80)
            .unwrap_err()
            .to_string()
            .contains("--shifts"));
        assert!(Plan::with_shifts(65, 80).is_err());
        assert!(Plan::with_shifts(3, u64::MAX).is_err());
    }
}
