//! The `measure` stage: runs binaries under valgrind and measures their code layout.
//!
//! [`simulate`] runs one binary under valgrind with Sediment's own trace tool (lackey when the
//! tool cannot be built) and replays its instruction trace through Sediment's simulator
//! (`sediment_sim::bintrace`, `sediment_sim::lackey`) under every layout of a [`Plan`]: the binary as
//! linked, shifted by a pad's worth of bytes, or relaid out by a proposed function order
//! (`sediment_link::placement`, lld's rule) without relinking. One pass answers every geometry
//! of `sediment_sim::GEOMETRIES`. [`simulate_all`] does it for several binaries in parallel;
//! [`record`] also keeps the run for later replays (the search).
//!
//! Output is deterministic: every number is a simulation count.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use sediment_sim::{Capture, Metrics};

use super::timings;

/// Most shifts one run may ask for: each is one more set of arrays fed every fetch.
pub const MAX_SHIFTS: u64 = 64;

/// Largest total shift, as `sediment noise` allows for its pad: far beyond any cache or TLB.
const MAX_SHIFT_BYTES: u64 = 64 << 20;

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
    /// Aligned layouts: (label, alignment rule), each the binary's functions kept in link
    /// order with their starts rounded up (`sediment_sim::align`). Not with `orders`. With
    /// these, every shift re-places the functions from the moved start (as a pad before the
    /// code would, the alignment absorbing part of it), and the as-linked layout's shifts
    /// move only the functions.
    pub aligned: Vec<(String, Aligned)>,
    /// With [`Plan::aligned`]: make each shift a growth at the end of the function of this
    /// name (its first unit in address order) instead of a pad before the code, so that the
    /// code before it stays put.
    pub grow_after: Option<String>,
}

/// How an aligned layout rounds each function's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aligned {
    /// Every function to this many bytes.
    All(u64),
    /// The functions of these names to `align` bytes, every other to `rest`.
    Chosen {
        /// Symbol names of the chosen functions.
        names: Vec<String>,
        /// Their alignment.
        align: u64,
        /// The others' alignment.
        rest: u64,
    },
}

impl Aligned {
    /// The alignment of every unit of `names`.
    pub fn per_unit(&self, names: &[String]) -> Vec<u64> {
        match self {
            Aligned::All(a) => vec![*a; names.len()],
            Aligned::Chosen {
                names: chosen,
                align,
                rest,
            } => {
                let chosen: std::collections::HashSet<&str> =
                    chosen.iter().map(String::as_str).collect();
                names
                    .iter()
                    .map(|n| {
                        if chosen.contains(n.as_str()) {
                            *align
                        } else {
                            *rest
                        }
                    })
                    .collect()
            }
        }
    }
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
            aligned: Vec::new(),
            grow_after: None,
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

/// The metrics of one binary: per layout (as linked, then each order of the plan), per shift.
pub type Layouts = Vec<Vec<Metrics>>;

/// What one simulated binary gave.
#[derive(Debug, Clone)]
pub struct Simulated {
    /// Per layout, per shift.
    pub layouts: Layouts,
    /// With [`Plan::first_order`]: the binary's functions in the order they first ran (as
    /// linked); empty otherwise.
    pub first_executed: Vec<sediment_profile::FuncKey>,
    /// Warnings for the user (order entries naming no function of the binary), one line each.
    pub warnings: Vec<String>,
    /// With [`Plan::aligned`]: the code bytes (`sediment_sim::align::code_bytes`) of the
    /// layout as linked, then of each aligned layout; empty otherwise.
    pub code_bytes: Vec<u64>,
}

/// A run kept for replays: the recording and the name of each of its units (functions).
pub struct Recorded {
    /// The run, the binary's code relative to its functions.
    pub recording: sediment_sim::Recording,
    /// Symbol name of each unit of the recording.
    pub names: Vec<String>,
}

/// Simulates every binary, `jobs` at a time; with fewer binaries than jobs, the rest share the
/// feeding of each run's layouts ([`Plan::threads`]). Each result lands in its binary's slot,
/// so the output does not depend on scheduling; on failure the error of the first failing
/// binary (in argument order) is returned. Every run reads `stdin` (a file, opened afresh) or
/// nothing.
pub fn simulate_all(
    binaries: &[PathBuf],
    args: &[OsString],
    valgrind: &OsString,
    jobs: usize,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<Vec<Simulated>> {
    let _t = timings::stage("measure");
    // Jobs left over once every binary has one feed that binary's layouts.
    let plan = &Plan {
        threads: (jobs / binaries.len().max(1)).max(1),
        ..plan.clone()
    };
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<Simulated>>>> =
        binaries.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(binaries.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(b) = binaries.get(i) else { break };
                let r = run_traced(b, args, valgrind, plan, stdin).map(|(s, _)| s);
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

/// Runs one binary under valgrind and replays its trace under every layout of `plan`; the
/// program reads `stdin` (a file) or nothing.
pub fn simulate(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<Simulated> {
    let _t = timings::stage("measure");
    Ok(run_traced(binary, args, valgrind, plan, stdin)?.0)
}

/// [`simulate`], also keeping the run ([`Plan::record`], or the default cap when unset); the
/// program reads `stdin` (a file) or nothing.
pub fn record(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<(Simulated, Recorded)> {
    let _t = timings::stage("measure");
    let mut plan = plan.clone();
    plan.record = plan
        .record
        .or(Some(sediment_sim::record::DEFAULT_MAX_EVENTS));
    match run_traced(binary, args, valgrind, &plan, stdin)? {
        (s, Some(r)) => Ok((s, r)),
        (_, None) => bail!("{}: the trace has no instruction", binary.display()),
    }
}

/// Column labels: each binary's shortest path suffix (whole components) that no other binary
/// shares: the file name when file names differ (`postgres`, `app.lld`), else as many parent
/// directories as tell them apart (`/home/u/b/default/bin/postgres` and
/// `/home/u/b/c3/bin/postgres` are `default/bin/postgres` and `c3/bin/postgres`). A binary
/// named twice by the same path keeps that path.
pub fn labels(binaries: &[PathBuf]) -> Vec<String> {
    let parts: Vec<Vec<String>> = binaries
        .iter()
        .map(|b| {
            b.components()
                .filter_map(|c| match c {
                    std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let suffix = |p: &[String], k: usize| p[p.len().saturating_sub(k)..].join("/");
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let same = |k: usize| {
                parts
                    .iter()
                    .enumerate()
                    .any(|(j, q)| j != i && suffix(q, k) == suffix(p, k))
            };
            match (1..=p.len()).find(|&k| !same(k)) {
                Some(k) if k < p.len() || binaries[i].is_relative() => suffix(p, k),
                _ => binaries[i].display().to_string(),
            }
        })
        .collect()
}

/// Self weight per function key of the profile at `path`; empty without one. The profile must
/// be of the program `binaries` are builds of: it fails when too little of its weight names
/// functions of the best-fitting binary ([`crate::pipeline::require_share`]).
pub fn read_weights(
    path: Option<&Path>,
    binaries: &[(&Path, &sediment_elf::Binary)],
) -> Result<std::collections::HashMap<sediment_profile::FuncKey, u64>> {
    let Some(path) = path else {
        return Ok(std::collections::HashMap::new());
    };
    let profile = crate::fsio::read_profile(path)?;
    let best = binaries
        .iter()
        .map(|(_, b)| {
            let keys: Vec<sediment_profile::FuncKey> =
                b.functions.iter().map(|s| s.key.clone()).collect();
            sediment_profile::binary_share(&profile, &keys)
        })
        .max_by(|a, b| a.fraction().total_cmp(&b.fraction()));
    if let Some(share) = best {
        let names: Vec<String> = binaries
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        crate::pipeline::require_share(path, &names.join(" or "), share)?;
    }
    Ok(weights_by_key(&profile))
}

/// Self weight per function key.
fn weights_by_key(
    p: &sediment_profile::Profile,
) -> std::collections::HashMap<sediment_profile::FuncKey, u64> {
    p.functions
        .iter()
        .map(|f| (f.key.clone(), f.self_weight))
        .collect()
}

/// Sediment's own valgrind tool, built on first use ([`sediment_valgrind::tracer`]), or `None`
/// when it cannot be built; then one line says why, once per process, and runs use lackey.
fn sedtrace(valgrind: &OsString) -> Option<&'static sediment_valgrind::tracer::Tool> {
    static TOOL: std::sync::OnceLock<Option<sediment_valgrind::tracer::Tool>> =
        std::sync::OnceLock::new();
    TOOL.get_or_init(|| match sediment_valgrind::tracer::Tool::get(valgrind) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("sediment: simulating with valgrind lackey (much slower): {e}");
            None
        }
    })
    .as_ref()
}

/// Waits for a traced run whose trace was replayed (`replayed`), turning a failed replay or
/// run into an error that names the tool and says what valgrind said; returns the capture and
/// the program's standard output.
fn finish(
    mut run: sediment_valgrind::piped::PipedRun,
    replayed: Result<Capture, sediment_sim::Error>,
    binary: &Path,
    tool: &str,
) -> Result<(Capture, Vec<u8>)> {
    if replayed.is_err() {
        // Stop a run whose trace we no longer read; it would block on the full pipe.
        run.kill();
    }
    let capture = match replayed {
        Ok(c) => c,
        Err(e) => {
            let tail = run.stderr_tail();
            let e = anyhow::Error::new(e).context(format!("{tool} trace"));
            return Err(if tail.is_empty() {
                e
            } else {
                e.context(format!("valgrind said: {tail}"))
            })
            .with_context(|| format!("{tool} run of {}", binary.display()));
        }
    };
    let sediment_valgrind::piped::Finished {
        status,
        stdout,
        stderr_tail,
        ..
    } = run
        .wait()
        .with_context(|| format!("{}: waiting for valgrind", binary.display()))?;
    if !status.success() {
        let detail = capture.messages().last().cloned().unwrap_or(stderr_tail);
        bail!(
            "valgrind {tool} run of {} failed ({status}): {detail}",
            binary.display()
        );
    }
    Ok((capture, stdout))
}

/// One traced run: the binary's functions placed under every order of the plan
/// (`sediment_link::placement`), the trace replayed under every layout. The trace comes from
/// Sediment's own tool (`sediment_sim::bintrace`, the code located by the tool's mapping
/// records), or from lackey when the tool cannot be built (`sediment_sim::lackey`, the code
/// located through `/proc/PID/maps`, `sediment_valgrind::maps`); both give the same numbers.
fn run_traced(
    binary: &Path,
    args: &[OsString],
    valgrind: &OsString,
    plan: &Plan,
    stdin: Option<&Path>,
) -> Result<(Simulated, Option<Recorded>)> {
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
    let units = sediment_link::placement::Units::of(&elf, &exec_segments);
    let mut warnings = Vec::new();
    let mut placements = Vec::with_capacity(plan.orders.len());
    for (label, order) in &plan.orders {
        let p = units.place(order, |idx, sizes, base| {
            sediment_sim::layout_from_order(idx, sizes, plan.align, base)
        });
        if p.placed == 0 && !order.functions.is_empty() {
            bail!(
                "{label}: none of its {} functions is in {} (order made for another program?)",
                order.functions.len(),
                canon.display()
            );
        }
        if !p.missing.is_empty() {
            let first: Vec<&str> = p.missing.iter().take(5).map(String::as_str).collect();
            warnings.push(format!(
                "{label}: {} of {} functions not in {} (first: {})",
                p.missing.len(),
                order.functions.len(),
                canon.display(),
                first.join(", ")
            ));
        }
        placements.push(p);
    }
    let aligned = aligned_placements(&units, plan)?;
    let code_bytes = aligned.as_ref().map_or_else(Vec::new, |a| a.code.clone());
    let mut relayouts: Vec<(&[u64], &[u64], &[u64])> = placements
        .iter()
        .map(|p| (p.old.as_slice(), p.size.as_slice(), p.new.as_slice()))
        .collect();
    if let Some(a) = &aligned {
        relayouts.extend(
            a.news
                .iter()
                .map(|n| (a.old.as_slice(), a.size.as_slice(), n.as_slice())),
        );
    }
    let layouts = sediment_sim::lackey::RunLayouts {
        // Aligned layouts carry their shifts in their placements.
        shifts: if aligned.is_some() {
            &[0]
        } else {
            &plan.shifts
        },
        threads: plan.threads,
        link_start: exec_segments.iter().map(|g| g.vaddr).min().unwrap_or(0),
        relayouts: &relayouts,
        record: plan.record.map(|max| (units.starts(), units.sizes(), max)),
    };
    let segs: Vec<(u64, u64)> = exec_segments
        .iter()
        .map(|s| (s.offset, s.mem_size))
        .collect();

    let (capture, stdout) = match sedtrace(valgrind) {
        Some(tool) => {
            let (run, pipe) =
                sediment_valgrind::tracer::spawn(valgrind, tool, &canon, args, stdin)?;
            let replayed = sediment_sim::bintrace::replay_run(
                pipe,
                |maps| {
                    sediment_sim::bintrace::exec_hull(maps, &canon, &segs).map_err(|offset| {
                        format!(
                            "{}: executable segment at file offset {offset:#x} not in the \
                             trace's mapping records",
                            canon.display()
                        )
                        .into()
                    })
                },
                &layouts,
            );
            finish(run, replayed, binary, "sedtrace")?
        }
        None => {
            let (run, pipe) = sediment_valgrind::lackey::spawn(valgrind, &canon, args, stdin)?;
            let pid = run.pid();
            let replayed = sediment_sim::lackey::replay_run(
                pipe,
                || {
                    sediment_valgrind::maps::exec_range(pid, &canon, &segs)
                        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                },
                &layouts,
            );
            finish(run, replayed, binary, "lackey")?
        }
    };
    let stdout = sediment_valgrind::fnv1a(&stdout);
    let mut per_layout = sediment_sim::lackey::metrics(&capture, &layouts, &stdout)
        .with_context(|| format!("{}: footprint", binary.display()))?;
    if aligned.is_some() {
        // One layout per (layout, shift), the as-linked one without its shift 0: regroup
        // into one layout per row with its shifts.
        let flat: Vec<Metrics> = per_layout.into_iter().flatten().collect();
        let k = plan.shifts.len();
        per_layout = flat.chunks(k).map(<[Metrics]>::to_vec).collect();
    }
    let first_executed = if plan.first_order {
        first_functions(&elf, &exec_segments, &capture)
    } else {
        Vec::new()
    };
    let mut capture = capture;
    let recorded = capture.take_recording().map(|recording| Recorded {
        recording,
        names: units.names(),
    });
    Ok((
        Simulated {
            layouts: per_layout,
            first_executed,
            warnings,
            code_bytes,
        },
        recorded,
    ))
}

/// The code bytes of `binary` as the sweep counts them (`sediment_sim::align::code_bytes` over
/// its functions and the fillers between them, fillers aligned to `align`): the size a built
/// layout is compared by.
pub fn code_bytes(binary: &Path, align: u64) -> Result<u64> {
    let data = crate::fsio::read_bytes(binary)?;
    let elf = sediment_elf::Binary::parse(&binary.display().to_string(), &data)?;
    let exec: Vec<sediment_elf::Segment> = elf
        .segments
        .iter()
        .copied()
        .filter(|s| s.is_executable())
        .collect();
    let units = sediment_link::placement::Units::of(&elf, &exec);
    let (old, size, _) = sediment_sim::align::with_fillers(units.starts(), units.sizes(), align);
    Ok(sediment_sim::align::code_bytes(&old, &size))
}

/// The layouts of [`Plan::aligned`] in link-time addresses.
struct AlignedLayouts {
    /// Old start and size of every unit: the binary's functions and the fillers between them
    /// (`sediment_sim::align::with_fillers`).
    old: Vec<u64>,
    size: Vec<u64>,
    /// New starts: the as-linked layout moved by every shift but the first, then each
    /// aligned layout placed from the first unit's start plus each shift.
    news: Vec<Vec<u64>>,
    /// Code bytes of the as-linked layout and of each aligned one (unshifted).
    code: Vec<u64>,
}

/// The layouts of [`Plan::aligned`], `None` when it is empty. Fillers keep [`Plan::align`].
fn aligned_placements(
    units: &sediment_link::placement::Units<'_>,
    plan: &Plan,
) -> Result<Option<AlignedLayouts>> {
    use sediment_sim::align::{code_bytes, place_aligned, with_fillers};
    if plan.aligned.is_empty() {
        return Ok(None);
    }
    if !plan.orders.is_empty() {
        bail!("aligned layouts and proposed orders cannot be simulated in one run");
    }
    let (old, size, is_fn) = with_fillers(units.starts(), units.sizes(), plan.align);
    let Some(&base) = old.first() else {
        bail!("the binary has no function symbol to align");
    };
    let names = units.names();
    // The unit that grows (index into the units with fillers), or none: a pad before all.
    let grown = match &plan.grow_after {
        None => None,
        Some(name) => {
            let f = super::align::grow_after_index(names.iter().map(String::as_str), name)?;
            is_fn
                .iter()
                .enumerate()
                .filter(|(_, &f)| f)
                .nth(f)
                .map(|(i, _)| i)
        }
    };
    let mut news = Vec::new();
    for &d in plan.shifts.iter().skip(1) {
        news.push(
            old.iter()
                .enumerate()
                .map(|(i, a)| match grown {
                    Some(g) if i <= g => *a,
                    _ => a.saturating_add(d),
                })
                .collect(),
        );
    }
    let mut code = vec![code_bytes(&old, &size)];
    for (_, rule) in &plan.aligned {
        let mut of_fn = rule.per_unit(&names).into_iter();
        let per_unit: Vec<u64> = is_fn
            .iter()
            .map(|&f| {
                if f {
                    of_fn.next().unwrap_or(1)
                } else {
                    plan.align
                }
            })
            .collect();
        for (i, &d) in plan.shifts.iter().enumerate() {
            let new = match grown {
                Some(g) => sediment_sim::align::place_grown(&size, &per_unit, base, g, d),
                None => place_aligned(&size, &per_unit, base.saturating_add(d)),
            };
            if i == 0 {
                code.push(code_bytes(&new, &size));
            }
            news.push(new);
        }
    }
    Ok(Some(AlignedLayouts {
        old,
        size,
        news,
        code,
    }))
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

/// Measures every binary once under Sediment's trace tool for every metric `sediment compare`
/// prints (`sediment_measure::onepass`), reading and filling the result cache when the options
/// name one; `progress` hears each run's events (with the binary's index).
pub fn one_pass(
    binaries: &[PathBuf],
    args: &[OsString],
    opts: &sediment_measure::onepass::OnePassOptions,
    progress: &(dyn Fn(usize, sediment_measure::onepass::Event) + Sync),
) -> Result<Vec<sediment_measure::onepass::Measured>> {
    let _t = timings::stage("measure");
    Ok(sediment_measure::onepass::measure_one_pass(
        binaries, args, opts, progress,
    )?)
}

/// What [`compare`] measured: one column per binary, in the order given.
pub struct Compared {
    /// Each binary's label ([`labels`]) and metrics.
    pub columns: Vec<(String, Metrics)>,
    /// `Some(n)`: the runs were stopped after about their first `n` instructions.
    pub sampled: Option<u64>,
    /// How the binaries were measured, when not the usual way (one line each).
    pub notes: Vec<String>,
    /// Differing outputs and non-deterministic relinks (one line each).
    pub warnings: Vec<String>,
}

/// The `measure` stage of `sediment compare` and the demo: every binary run once with `args`
/// under Sediment's trace tool for every metric ([`one_pass`], cached when `opts` names a
/// cache); where the tool cannot be built (and no sampling is asked for), the five
/// cachegrind/callgrind runs per binary of `sediment_measure::measure` instead, with a note
/// saying why. The warnings name the binaries whose standard output or error differ from the
/// first's, and relinks of the same objects that ran different instruction counts.
pub fn compare(
    binaries: &[PathBuf],
    args: &[OsString],
    opts: &sediment_measure::onepass::OnePassOptions,
    progress: &(dyn Fn(usize, sediment_measure::onepass::Event) + Sync),
) -> Result<Compared> {
    compare_labeled(binaries, labels(binaries), args, opts, progress)
}

/// [`compare`] with the columns' labels given (`compare --label`), one per binary.
pub fn compare_labeled(
    binaries: &[PathBuf],
    labels: Vec<String>,
    args: &[OsString],
    opts: &sediment_measure::onepass::OnePassOptions,
    progress: &(dyn Fn(usize, sediment_measure::onepass::Event) + Sync),
) -> Result<Compared> {
    let mut notes = Vec::new();
    let measured = match one_pass(binaries, args, opts, progress) {
        Err(e) if is_no_trace_tool(&e) && opts.sample.is_none() => {
            notes.push(format!(
                "measuring with cachegrind and callgrind (five runs per binary, slower, not \
                 cached): {e}"
            ));
            let old = sediment_measure::Options {
                valgrind: opts.valgrind.clone(),
                jobs: opts.jobs,
                stdin: opts.stdin.clone(),
            };
            sediment_measure::measure(binaries, args, &old)?
                .into_iter()
                .enumerate()
                .map(|(i, metrics)| sediment_measure::onepass::Measured {
                    metrics,
                    // Not recorded by that path: stderr is not compared, and no two
                    // binaries count as built from the same objects.
                    stderr_fnv1a: String::new(),
                    sampled: None,
                    code_fingerprint: format!("unknown {i}"),
                    cached: false,
                })
                .collect()
        }
        r => r?,
    };
    let warnings = sediment_measure::onepass::output_differences(&labels, &measured)
        .into_iter()
        .chain(sediment_measure::onepass::nondeterminism_warning(
            &labels, &measured,
        ))
        .collect();
    let sampled = measured.iter().find_map(|m| m.sampled);
    let columns = labels
        .into_iter()
        .zip(measured.into_iter().map(|m| m.metrics))
        .collect();
    Ok(Compared {
        columns,
        sampled,
        notes,
        warnings,
    })
}

/// Whether `e` says that Sediment's trace tool cannot be built here.
fn is_no_trace_tool(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<sediment_measure::Error>(),
        Some(sediment_measure::Error::NoTraceTool(_))
    )
}

#[cfg(test)]
mod tests {
    // Columns of variants that are all called `postgres` are told apart by the shortest
    // suffix, not by 80-character paths; distinct file names stay file names.
    #[test]
    fn labels_are_shortest_unique_suffixes() {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            super::labels(&p(&[
                "/home/u/b/default/bin/postgres",
                "/home/u/b/c3/bin/postgres",
                "/home/u/b/c3-lld/bin/postgres"
            ])),
            [
                "default/bin/postgres",
                "c3/bin/postgres",
                "c3-lld/bin/postgres"
            ]
        );
        assert_eq!(super::labels(&p(&["./a", "/x/b"])), ["a", "b"]);
        assert_eq!(super::labels(&p(&["x/a", "y/a"])), ["x/a", "y/a"]);
        assert_eq!(super::labels(&p(&["/x/a", "/x/a"])), ["/x/a", "/x/a"]);
    }

    use super::*;

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
