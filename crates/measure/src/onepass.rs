//! One valgrind run per binary for every metric `sediment compare` prints.
//!
//! [`measure_one_pass`] runs each binary once under Sediment's own valgrind tool `sedtrace`
//! (`sediment_valgrind::tracer`), whose binary trace of executed instruction runs
//! (`sediment_sim::bintrace`) streams through a pipe into one `sediment_sim::Capture` holding
//! every array of the geometry table at once (`sediment_sim::geometry`, the first
//! `CACHEGRIND` entries: the two L1i and the two 8-way iTLBs). Binaries run in parallel, `jobs`
//! at a time; a binary's results can be read from and written to a cache ([`crate::cache`]),
//! so a compare that adds a variant runs only that variant.
//!
//! # What each metric counts
//!
//! - `instructions`: guest instructions executed by the whole process (dynamic loader, libc,
//!   the program), from the run records' counts. The same number as cachegrind's `Ir`.
//! - `i1_misses_32k_8way`, `i1_misses_16k_4way`: misses of an LRU L1i with 64-byte lines fed
//!   every fetch of the process. Consecutive instructions are merged into one fetch range and
//!   the range touches each line it covers once, in address order; cachegrind touches the
//!   line(s) of each instruction. Both give the same LRU state, except that an instruction
//!   straddling two lines counts up to two misses here and at most one in cachegrind
//!   (`cg_sim.c` counts one miss per straddling access). So these can be slightly higher than
//!   cachegrind's `I1mr`.
//! - `itlb_misses_64`, `itlb_misses_128`: the same with 4 KiB "lines" (an 8-way LRU iTLB of 64
//!   or 128 entries, huge pages and the second-level TLB ignored); the straddle rule applies
//!   to instructions crossing a page boundary.
//! - `object_instructions`: instructions whose first byte lies in the binary's own code, the
//!   run-time hull of its executable `PT_LOAD` segments (`.init`, `.plt` and `.text` alike,
//!   code BOLT moved to new segments included), not in ld.so or libc.
//! - `pages_99`, `pages_99_9`, `lines_99`, `lines_99_9`, `pages_touched`, `lines_touched`: the
//!   footprint of that code (`sediment_sim::footprint`, the one definition): each executed byte
//!   of the binary's code weighs its execution count, and the numbers are the 4 KiB pages / 64-byte
//!   lines, heaviest first, holding 99% and 99.9% of the executed bytes, and all touched
//!   ones. ("Executed bytes", not instructions: an instruction straddling a boundary belongs
//!   to both blocks.)
//!   `bounds` holds the same six numbers for the densest layout of those bytes (a lower bound
//!   over every layout), as `sediment sim` reports them. The cachegrind/callgrind path weighs
//!   executed instructions at their first byte instead, over the object callgrind names, so its
//!   99.9% counts can differ by a few percent on the same run.
//! - `stdout_fnv1a`, and [`Measured::stderr_fnv1a`]: hashes of the program's standard output
//!   and error, for checking that every variant did the same work ([`output_differences`]).
//!   A run whose program exits non-zero is an error, so every measured run exited 0.
//!
//! # Sampling
//!
//! With [`OnePassOptions::sample`] = `Some(n)` only the first `n` instructions of each run are
//! measured (rounded up to the end of the run record that reaches `n`: a straight-line run of
//! a few instructions); the process is then killed, so its output is not compared. Every
//! metric then describes that prefix of the run ([`Measured::sampled`]): start-up weighs more
//! in it than in the whole run. Windows later in the run are not offered.
//!
//! # Honesty checks
//!
//! [`output_differences`] names the variants whose standard output or error differs from the
//! base's. [`nondeterminism_warning`] flags binaries built from the same objects (the same
//! function symbols and data sections with the same sizes, [`Measured::code_fingerprint`]:
//! a heuristic, blind to a change that keeps every size) that executed
//! different instruction counts: a layout change alone does not change what a deterministic
//! program executes, so the workload varies from run to run, and so does every other number.
//!
//! Turned down: keeping only the arrays of the metrics asked for (`--metrics`): the arrays cost
//! little beside valgrind itself, and a cached result then answers any later choice.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sediment_sim::bintrace::{exec_hull, BinTraceReader, Record};
use sediment_sim::geometry::{CACHEGRIND, GEOMETRIES};
use sediment_sim::{Capture, FootprintWeight};
use sediment_valgrind::tracer::{self, Tool};

use crate::{cache, fnv1a, Error, Metrics};

/// Version of the one-pass measurement: part of every cache key, so a change of any metric's
/// definition (or of the cached fields) makes old entries miss.
pub const VERSION: u32 = 1;

/// Relative difference of instruction counts between two builds of the same objects above
/// which the workload is called non-deterministic: 10 per million. A deterministic program
/// relinked in another order executes exactly the same instructions; programs that hash or
/// sort code addresses (function pointers as keys) may differ by a few, an interpreter with
/// randomised hashing by a percent (1.2% for CPython without `PYTHONHASHSEED`).
pub const NONDETERMINISM_TOLERANCE: f64 = 1e-5;

/// Instructions between two [`Event::Progress`] reports of one run.
const PROGRESS_STEP: u64 = 1 << 26;

/// How to run the one-pass measurement.
#[derive(Debug, Clone)]
pub struct OnePassOptions {
    /// The `valgrind` executable.
    pub valgrind: OsString,
    /// Binaries run at once (at least 1).
    pub jobs: usize,
    /// A file every run reads as its standard input (opened afresh), or none (`/dev/null`).
    pub stdin: Option<PathBuf>,
    /// Measure only about the first this many instructions of each run (see the module doc).
    pub sample: Option<u64>,
    /// Where results are cached ([`cache::default_dir`]); `None` runs every binary.
    pub cache: Option<PathBuf>,
}

impl Default for OnePassOptions {
    /// `valgrind` from `PATH`, one job per core, no standard input, no sampling, the default
    /// cache directory.
    fn default() -> Self {
        Self {
            valgrind: "valgrind".into(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            stdin: None,
            sample: None,
            cache: cache::default_dir(),
        }
    }
}

/// What one binary's run gave.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Measured {
    /// The metrics (see the module doc for what each counts).
    pub metrics: Metrics,
    /// FNV-1a 64 hash (hex) of the program's standard error.
    pub stderr_fnv1a: String,
    /// `Some(n)`: the run was stopped after its first `n` instructions.
    pub sampled: Option<u64>,
    /// Hash of the binary's function symbols and allocated data sections (names and sizes,
    /// sorted): equal for two links of the same objects in any order.
    pub code_fingerprint: String,
    /// Read from the cache rather than measured now.
    #[serde(skip)]
    pub cached: bool,
}

/// What a run reports while it goes, to [`measure_one_pass`]'s `progress` callback (with the
/// binary's index).
#[derive(Debug, Clone)]
pub enum Event {
    /// The run started (valgrind is starting).
    Started,
    /// Instructions measured so far.
    Progress(u64),
    /// The binary is done.
    Finished {
        /// Instructions measured.
        instructions: u64,
        /// Read from the cache.
        cached: bool,
        /// Wall-clock seconds of the run (0 when cached).
        seconds: f64,
    },
    /// Something the user should know that does not stop the measurement (a cache entry that
    /// could not be written).
    Warning(String),
}

/// Measures every binary with the same arguments, one valgrind run each (or none when
/// cached); results in the order of `binaries`. After a failure no new run starts, and the
/// error of the first failed binary (in argument order) is returned.
pub fn measure_one_pass(
    binaries: &[PathBuf],
    args: &[OsString],
    opts: &OnePassOptions,
    progress: &(dyn Fn(usize, Event) + Sync),
) -> Result<Vec<Measured>, Error> {
    let mut canon = Vec::with_capacity(binaries.len());
    for b in binaries {
        if !b.is_file() {
            return Err(Error::NoBinary(b.clone()));
        }
        canon.push(std::fs::canonicalize(b).map_err(|source| Error::Io {
            path: b.clone(),
            source,
        })?);
    }
    let stdin_hash = match &opts.stdin {
        Some(p) => Some(cache::file_hash(p)?),
        None => None,
    };
    let tool = Tool::get(&opts.valgrind).map_err(|e| Error::NoTraceTool(e.to_string()))?;
    let slots: Vec<Mutex<Option<Result<Measured, Error>>>> =
        binaries.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.clamp(1, binaries.len().max(1)) {
            s.spawn(|| loop {
                if failed.load(Ordering::SeqCst) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(b) = binaries.get(i) else { break };
                let report = |e: Event| progress(i, e);
                let one = One {
                    binary: b,
                    canon: &canon[i],
                    args,
                    opts,
                    tool: &tool,
                    stdin_hash: stdin_hash.as_deref(),
                };
                let r = one.measure(&report);
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut out = Vec::with_capacity(binaries.len());
    let mut first_err = None;
    for slot in slots {
        match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(Ok(m)) => out.push(m),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {} // not started because another binary failed
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// One binary to measure.
struct One<'a> {
    binary: &'a Path,
    canon: &'a Path,
    args: &'a [OsString],
    opts: &'a OnePassOptions,
    tool: &'a Tool,
    stdin_hash: Option<&'a str>,
}

impl One<'_> {
    fn measure(&self, report: &dyn Fn(Event)) -> Result<Measured, Error> {
        let data = std::fs::read(self.canon).map_err(|source| Error::Io {
            path: self.canon.to_path_buf(),
            source,
        })?;
        let code = code_of(&data).ok_or_else(|| Error::Trace {
            binary: self.binary.to_path_buf(),
            message: "not an ELF file with an executable segment".into(),
        })?;
        let key = self.opts.cache.as_ref().map(|dir| {
            let k = cache::Key::new(&cache::KeyInput {
                binary: self.canon,
                content: &data,
                args: self.args,
                stdin_hash: self.stdin_hash,
                sample: self.opts.sample,
                tool: self.tool.exe(),
            });
            (dir, k)
        });
        if let Some((dir, k)) = &key {
            if let Some(mut m) = cache::load(dir, k) {
                m.metrics.binary = self.binary.display().to_string();
                m.metrics.weighed_by = FootprintWeight::ExecutedBytes;
                m.cached = true;
                report(Event::Finished {
                    instructions: m.metrics.instructions,
                    cached: true,
                    seconds: 0.0,
                });
                return Ok(m);
            }
        }
        report(Event::Started);
        let t0 = Instant::now();
        let mut m = self.run(&code, report)?;
        m.metrics.binary = self.binary.display().to_string();
        if let Some((dir, k)) = &key {
            if let Err(e) = cache::store(dir, k, &m) {
                report(Event::Warning(format!("result not cached: {e}")));
            }
        }
        report(Event::Finished {
            instructions: m.metrics.instructions,
            cached: false,
            seconds: t0.elapsed().as_secs_f64(),
        });
        Ok(m)
    }

    /// Runs the binary under `sedtrace` and replays its trace.
    fn run(&self, code: &Code, report: &dyn Fn(Event)) -> Result<Measured, Error> {
        let err = |message: String| Error::Trace {
            binary: self.binary.to_path_buf(),
            message,
        };
        let (mut run, pipe) = tracer::spawn(
            &self.opts.valgrind,
            self.tool,
            self.canon,
            self.args,
            self.opts.stdin.as_deref(),
        )
        .map_err(|e| err(e.to_string()))?;
        let arrays = GEOMETRIES[..CACHEGRIND]
            .iter()
            .map(|g| g.array())
            .collect::<Result<Vec<_>, _>>()
            .map_err(Error::Simulate)?;
        let mut capture = Capture::new(arrays);
        let replayed = replay(
            pipe,
            &mut capture,
            self.canon,
            &code.segments,
            self.opts.sample,
            report,
        );
        let sampled = match replayed {
            Ok(stopped) => stopped.then_some(capture.instructions()),
            Err(e) => {
                run.kill();
                let tail = run.stderr_tail();
                let said = if tail.is_empty() {
                    String::new()
                } else {
                    format!(" (valgrind said: {tail})")
                };
                return Err(err(format!("{e}{said}")));
            }
        };
        if sampled.is_some() {
            run.kill();
        }
        capture.finish();
        let finished = run.wait().map_err(|e| err(e.to_string()))?;
        if sampled.is_none() && !finished.status.success() {
            return Err(err(format!(
                "valgrind sedtrace run failed ({}): {}",
                finished.status,
                if finished.stderr_tail.is_empty() {
                    "no message"
                } else {
                    &finished.stderr_tail
                }
            )));
        }
        let profile = capture.exec_profile().map_err(Error::Simulate)?;
        let (pages, lines) = (
            profile.footprint(4096).map_err(Error::Simulate)?,
            profile.footprint(64).map_err(Error::Simulate)?,
        );
        let misses: Vec<u64> = capture.arrays().iter().map(|a| a.stats().misses).collect();
        let mut metrics = Metrics {
            instructions: capture.instructions(),
            object_instructions: capture.text_instructions(),
            stdout_fnv1a: fnv1a(&finished.stdout),
            weighed_by: FootprintWeight::ExecutedBytes,
            ..Metrics::default()
        };
        metrics.set_misses(&misses);
        metrics.set_footprints(&pages, &lines);
        Ok(Measured {
            metrics,
            stderr_fnv1a: fnv1a(&finished.stderr),
            sampled,
            code_fingerprint: code.fingerprint.clone(),
            cached: false,
        })
    }
}

/// Feeds the trace on `pipe` to `capture`, its text range set from the mapping records of
/// `canon` before the first run. Returns whether it stopped early at `sample` instructions.
fn replay(
    pipe: impl std::io::Read,
    capture: &mut Capture,
    canon: &Path,
    segments: &[(u64, u64)],
    sample: Option<u64>,
    report: &dyn Fn(Event),
) -> Result<bool, Error> {
    let mut reader = BinTraceReader::new(pipe).map_err(Error::Simulate)?;
    let mut maps = Vec::new();
    let mut next_report = PROGRESS_STEP;
    let limit = sample.unwrap_or(u64::MAX);
    while let Some(rec) = reader.next_record().map_err(Error::Simulate)? {
        match rec {
            Record::Run { start, len, count } => {
                if capture.text().is_none() {
                    let (s, e) =
                        exec_hull(&maps, canon, segments).map_err(|offset| Error::Trace {
                            binary: canon.to_path_buf(),
                            message: format!(
                                "executable segment at file offset {offset:#x} not mapped \
                                 before the first instruction"
                            ),
                        })?;
                    capture.set_text(s, e).map_err(Error::Simulate)?;
                }
                capture.run(start, start + len, count);
                let n = capture.instructions();
                if n >= next_report {
                    report(Event::Progress(n));
                    next_report = n + PROGRESS_STEP;
                }
                if n >= limit {
                    return Ok(true);
                }
            }
            Record::Map(m) => maps.push(m),
            Record::Exec { .. } | Record::End { .. } => {}
        }
    }
    Ok(false)
}

/// What the measurement needs from the binary's ELF file.
struct Code {
    /// `(file offset, size in memory)` of each executable `PT_LOAD` segment.
    segments: Vec<(u64, u64)>,
    /// See [`Measured::code_fingerprint`].
    fingerprint: String,
}

/// The executable segments and the function fingerprint of an ELF file; `None` when it is not
/// one or has no executable segment.
fn code_of(data: &[u8]) -> Option<Code> {
    use object::{
        Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SegmentFlags, SymbolKind,
    };
    let file = object::File::parse(data).ok()?;
    let segments: Vec<(u64, u64)> = file
        .segments()
        .filter(|s| {
            matches!(s.flags(), SegmentFlags::Elf { p_flags, .. }
                if p_flags.0 & object::elf::PF_X.0 != 0)
        })
        .map(|s| (s.file_range().0, s.size()))
        .filter(|&(_, size)| size > 0)
        .collect();
    if segments.is_empty() {
        return None;
    }
    let mut funcs: Vec<(&str, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.name().ok()?, s.size())))
        .collect();
    // Data of another size (a changed string, a new table) means other objects, even with
    // the same functions; code sections are left out, as padding between functions is
    // a layout's choice.
    funcs.extend(
        file.sections()
            .filter(|s| s.address() != 0 && s.kind() != SectionKind::Text)
            .filter_map(|s| Some((s.name().ok()?, s.size()))),
    );
    funcs.sort_unstable();
    let mut text = Vec::new();
    for (name, size) in funcs {
        text.extend_from_slice(name.as_bytes());
        text.push(0);
        text.extend_from_slice(&size.to_le_bytes());
    }
    Some(Code {
        segments,
        fingerprint: fnv1a(&text),
    })
}

/// Reads one output stream's hash.
type StreamHash = fn(&Measured) -> &str;

/// One line per output stream whose content differs from the base's (the first run), naming
/// the variants that differ; empty when all agree. Sampled runs were stopped early: their
/// outputs are not compared, and one line says so.
pub fn output_differences(labels: &[String], runs: &[Measured]) -> Vec<String> {
    let Some(base) = runs.first() else {
        return Vec::new();
    };
    if let Some(n) = runs.iter().find_map(|m| m.sampled) {
        return vec![format!(
            "outputs not compared: the runs were stopped after about {n} instructions (sampling)"
        )];
    }
    let mut out = Vec::new();
    let streams: [(&str, StreamHash); 2] = [
        ("standard output", |m| &m.metrics.stdout_fnv1a),
        ("standard error", |m| &m.stderr_fnv1a),
    ];
    for (what, get) in streams {
        let differing: Vec<&str> = labels
            .iter()
            .zip(runs)
            .skip(1)
            .filter(|(_, m)| get(m) != get(base))
            .map(|(l, _)| l.as_str())
            .collect();
        if !differing.is_empty() {
            out.push(format!(
                "{what} differs from {}'s for: {}",
                labels[0],
                differing.join(", ")
            ));
        }
    }
    out
}

/// A warning when two binaries built from the same objects ([`Measured::code_fingerprint`])
/// executed instruction counts more than [`NONDETERMINISM_TOLERANCE`] apart, with the usual
/// fixes; `None` otherwise (and for sampled runs, which all stop near the same count).
pub fn nondeterminism_warning(labels: &[String], runs: &[Measured]) -> Option<String> {
    let mut pairs = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        if a.sampled.is_some() {
            return None;
        }
        for (j, b) in runs.iter().enumerate().skip(i + 1) {
            if a.code_fingerprint != b.code_fingerprint {
                continue;
            }
            let (x, y) = (a.metrics.instructions, b.metrics.instructions);
            let rel = x.abs_diff(y) as f64 / x.max(y).max(1) as f64;
            if rel > NONDETERMINISM_TOLERANCE {
                pairs.push(format!(
                    "{} {x} vs {} {y} ({:+.3}%)",
                    labels[i],
                    labels[j],
                    (y as f64 - x as f64) / x.max(1) as f64 * 100.0
                ));
            }
        }
    }
    if pairs.is_empty() {
        return None;
    }
    Some(format!(
        "binaries linked from the same objects executed different instruction counts ({}): \
         the workload is not deterministic, so every difference in this table may be noise. \
         Usual fixes: PYTHONHASHSEED=0 (Python) or the interpreter's hash seed, fixed random \
         seeds, no address-space randomisation (`setarch -R`), one thread, no time- or \
         PID-dependent input",
        pairs.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, insns: u64, code: &str, out: &str, err: &str) -> (String, Measured) {
        (
            label.to_string(),
            Measured {
                metrics: Metrics {
                    binary: label.into(),
                    instructions: insns,
                    stdout_fnv1a: out.into(),
                    ..Metrics::default()
                },
                stderr_fnv1a: err.into(),
                sampled: None,
                code_fingerprint: code.into(),
                cached: false,
            },
        )
    }

    fn split(v: Vec<(String, Measured)>) -> (Vec<String>, Vec<Measured>) {
        v.into_iter().unzip()
    }

    // A program that reports on stderr: only stderr differs, and the line names it and the
    // variant; stdout agreeing is not enough.
    #[test]
    fn stderr_differences_are_named() {
        let (l, r) = split(vec![
            run("base", 10, "c", "o", "e1"),
            run("new", 10, "c", "o", "e2"),
            run("other", 10, "c", "o", "e1"),
        ]);
        let d = output_differences(&l, &r);
        assert_eq!(d, ["standard error differs from base's for: new"]);
        let (l, r) = split(vec![
            run("base", 10, "c", "o1", "e"),
            run("new", 10, "c", "o2", "e"),
        ]);
        assert_eq!(
            output_differences(&l, &r),
            ["standard output differs from base's for: new"]
        );
    }

    // Same objects relinked, 1.2% more instructions: warned, with the fixes; different
    // objects (another compiler flag) differing is expected; a tiny difference is tolerated.
    #[test]
    fn relinks_with_other_instruction_counts_are_flagged() {
        let (l, r) = split(vec![
            run("base", 1_000_000, "c", "o", "e"),
            run("relinked", 1_012_000, "c", "o", "e"),
            run("o3", 900_000, "d", "o", "e"),
        ]);
        let w = nondeterminism_warning(&l, &r).unwrap();
        assert!(
            w.contains("base 1000000 vs relinked 1012000 (+1.200%)"),
            "{w}"
        );
        assert!(
            w.contains("PYTHONHASHSEED=0") && w.contains("setarch -R"),
            "{w}"
        );
        assert!(!w.contains("o3"), "{w}");
        let (l, r) = split(vec![
            run("base", 1_000_000, "c", "o", "e"),
            run("relinked", 1_000_003, "c", "o", "e"),
        ]);
        assert_eq!(nondeterminism_warning(&l, &r), None);
    }

    // Sampled runs are not compared for output or instruction counts.
    #[test]
    fn sampled_runs_say_so() {
        let (l, mut r) = split(vec![
            run("base", 100, "c", "o1", "e"),
            run("new", 150, "c", "o2", "e"),
        ]);
        for m in &mut r {
            m.sampled = Some(100);
        }
        assert_eq!(nondeterminism_warning(&l, &r), None);
        let d = output_differences(&l, &r);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("not compared"), "{d:?}");
    }
}
