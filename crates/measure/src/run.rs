//! Running the Valgrind simulations and assembling [`Metrics`].
//!
//! Every (binary, simulation) pair is one job; jobs are independent, so a small pool of scoped
//! threads takes them from a shared counter, and each result lands in the slot of its job, so
//! the outcome does not depend on which thread ran what. After a failure no new job starts,
//! and the error of the lowest-numbered failed job is returned.
//!
//! Turned down: one cachegrind run per binary with several I1 caches. Cachegrind simulates
//! exactly one I1, one D1 and one LL, so four I1 geometries need four runs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use sediment_sim::geometry::{CACHEGRIND, GEOMETRIES};

use crate::{cachegrind, fnv1a, Error, Metrics};

/// How to run the measurements.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `valgrind` executable.
    pub valgrind: OsString,
    /// Simulations run at once (at least 1).
    pub jobs: usize,
    /// A file every run reads as its standard input (each run opens it afresh); `None` gives
    /// the program an empty standard input (`/dev/null`). For programs driven by a script on
    /// stdin, such as `postgres --single`.
    pub stdin: Option<PathBuf>,
}

impl Default for Options {
    /// `valgrind` from `PATH`, one job per available core, no standard input.
    fn default() -> Self {
        Options {
            valgrind: "valgrind".into(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            stdin: None,
        }
    }
}

#[derive(Clone, Copy)]
enum Sim {
    /// Cachegrind with the I1 of `GEOMETRIES[i]`.
    Cache(usize),
    /// Callgrind with per-instruction counts.
    Instr,
}

enum Outcome {
    /// Cachegrind totals: (Ir, I1mr).
    Cache(u64, u64),
    /// Callgrind: object instructions, page and line footprints, stdout hash.
    Instr(
        u64,
        sediment_sim::Footprint,
        sediment_sim::Footprint,
        String,
    ),
}

/// Measures every binary with the same arguments. The results are in the order of `binaries`.
pub fn measure(
    binaries: &[PathBuf],
    args: &[OsString],
    opts: &Options,
) -> Result<Vec<Metrics>, Error> {
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
    // Checked once here, so that a missing input is one error rather than one per job.
    if let Some(p) = &opts.stdin {
        std::fs::File::open(p).map_err(|source| Error::Io {
            path: p.clone(),
            source,
        })?;
    }
    let tmp = tempfile::Builder::new()
        .prefix("sediment-measure-")
        .tempdir()
        .map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;

    // Callgrind first: it is the slowest simulation, so starting it early shortens the run.
    let sims: Vec<Sim> = std::iter::once(Sim::Instr)
        .chain((0..CACHEGRIND).map(Sim::Cache))
        .collect();
    let jobs: Vec<(usize, Sim)> = (0..binaries.len())
        .flat_map(|b| sims.iter().map(move |&s| (b, s)))
        .collect();
    let results: Vec<Mutex<Option<Result<Outcome, Error>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let workers = opts.jobs.clamp(1, jobs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                if failed.load(Ordering::SeqCst) {
                    break;
                }
                let j = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(b, sim)) = jobs.get(j) else { break };
                let out = tmp.path().join(format!("job{j}.out"));
                let r = run_one(opts, &binaries[b], &canon[b], args, sim, &out);
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                *results[j].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });

    let mut metrics: Vec<Metrics> = binaries
        .iter()
        .map(|b| Metrics {
            binary: b.display().to_string(),
            instructions: 0,
            ..Metrics::default()
        })
        .collect();
    for (slot, &(b, sim)) in results.into_iter().zip(&jobs) {
        let Some(r) = slot.into_inner().unwrap_or_else(|e| e.into_inner()) else {
            continue; // not run because another job failed; that failure is reported below
        };
        let m = &mut metrics[b];
        match (r?, sim) {
            (Outcome::Cache(ir, miss), Sim::Cache(i)) => match i {
                0 => {
                    m.instructions = ir;
                    m.i1_misses_32k_8way = miss;
                }
                1 => m.i1_misses_16k_4way = miss,
                2 => m.itlb_misses_64 = miss,
                _ => m.itlb_misses_128 = miss,
            },
            (Outcome::Instr(n, pages, lines, hash), _) => {
                m.object_instructions = n;
                m.pages_99 = pages.p99;
                m.pages_99_9 = pages.p999;
                m.pages_touched = pages.touched;
                m.lines_99 = lines.p99;
                m.lines_99_9 = lines.p999;
                m.lines_touched = lines.touched;
                m.stdout_fnv1a = hash;
            }
            (Outcome::Cache(..), Sim::Instr) => unreachable!("callgrind jobs yield Instr outcomes"),
        }
    }
    // Reaching here means no job failed, so every slot was filled.
    drop(tmp);
    Ok(metrics)
}

/// Runs one simulation of `binary` and parses its output file `out`.
/// Runs one simulation of `binary` and parses its output file `out`.
fn run_one(
    opts: &Options,
    binary: &Path,
    canon: &Path,
    args: &[OsString],
    sim: Sim,
    out: &Path,
) -> Result<Outcome, Error> {
    let run = sediment_valgrind::tools::Run {
        valgrind: &opts.valgrind,
        binary,
        canon,
        args,
        stdin: opts.stdin.as_deref(),
    };
    let output = match sim {
        Sim::Cache(i) => {
            sediment_valgrind::tools::cachegrind(&run, &GEOMETRIES[i].cachegrind_i1(), out)?
        }
        Sim::Instr => sediment_valgrind::tools::callgrind(&run, out)?,
    };
    let text = std::fs::read_to_string(out).map_err(|source| Error::Io {
        path: out.to_path_buf(),
        source,
    })?;
    match sim {
        Sim::Cache(_) => {
            let t = cachegrind::totals(&text).map_err(|e| Error::Parse {
                file: out.to_path_buf(),
                line: e.line,
                message: e.message,
            })?;
            let get = |k: &str| {
                t.get(k).copied().ok_or_else(|| Error::Parse {
                    file: out.to_path_buf(),
                    line: 1,
                    message: format!("no `{k}` event in the summary"),
                })
            };
            Ok(Outcome::Cache(get("Ir")?, get("I1mr")?))
        }
        Sim::Instr => {
            let path = out.display().to_string();
            let objects = sediment_import::callgrind::object_instr_costs(&[
                sediment_import::callgrind::Input {
                    path: &path,
                    text: &text,
                },
            ])?;
            let mut counts =
                object_counts(&objects, canon).map_err(|seen| Error::ObjectNotFound {
                    file: out.to_path_buf(),
                    binary: binary.to_path_buf(),
                    seen,
                })?;
            // The binary's code valgrind did not attach to its object (most of it in BOLT's
            // binaries): reported as `???` at run-time addresses.
            let elf = std::fs::read(canon).map_err(|source| Error::Io {
                path: canon.to_path_buf(),
                source,
            })?;
            if let (Some((segments, pie)), Some(unnamed)) =
                (exec_segments(&elf), objects.get(UNNAMED_OBJECT))
            {
                let base = if pie { VALGRIND_PIE_BASE } else { 0 };
                add_unattributed(&mut counts, unnamed, &segments, base);
            }
            let total = counts.values().fold(0u64, |a, &c| a.saturating_add(c));
            let (pages, lines) = instruction_footprint(&counts)?;
            Ok(Outcome::Instr(total, pages, lines, fnv1a(&output.stdout)))
        }
    }
}

/// Page and line footprints (`sediment_sim::footprint`, the one definition) of per-instruction
/// execution counts. Callgrind gives no instruction lengths, so each instruction is its first
/// byte: the weight counts executed instructions, and an instruction belongs to the block of
/// its first byte.
pub fn instruction_footprint(
    counts: &BTreeMap<u64, u64>,
) -> Result<(sediment_sim::Footprint, sediment_sim::Footprint), sediment_sim::Error> {
    let ranges: Vec<sediment_sim::ExecRange> = counts
        .iter()
        .map(|(&start, &count)| sediment_sim::ExecRange {
            start,
            len: 1,
            count,
        })
        .collect();
    let profile = sediment_sim::ExecProfile::new(&ranges)?;
    Ok((profile.footprint(4096)?, profile.footprint(64)?))
}

/// Per-instruction counts of the object whose path is `canon`. Callgrind prints the real path,
/// so an exact match is tried first; failing that, the file name alone (for objects reached
/// through a symlinked directory). `Err(seen)` lists the objects when neither matches.
fn object_counts(
    objects: &BTreeMap<String, BTreeMap<u64, u64>>,
    canon: &Path,
) -> Result<BTreeMap<u64, u64>, String> {
    if let Some((_, c)) = objects.iter().find(|(o, _)| Path::new(o) == canon) {
        return Ok(c.clone());
    }
    let name = canon.file_name();
    if let Some((_, c)) = objects
        .iter()
        .find(|(o, _)| Path::new(o).file_name() == name)
    {
        return Ok(c.clone());
    }
    Err(objects.keys().cloned().collect::<Vec<_>>().join(", "))
}

/// The object name callgrind writes for code it cannot attribute to a file.
pub const UNNAMED_OBJECT: &str = "???";

/// Where valgrind (3.19, amd64) maps a position-independent executable: callgrind writes the
/// measured object's costs at link-time addresses, but `???` costs at run-time ones.
pub const VALGRIND_PIE_BASE: u64 = 0x10_8000;

/// Adds the `unnamed` counts (callgrind's `???` object, run-time addresses) that lie, `base`
/// removed, in one of the binary's executable `segments` (link-time `[start, end)`) to the
/// measured object's `counts`; returns the instructions added.
///
/// Why: valgrind 3.19 attaches to an object only the code of its one executable mapping's
/// `.text`-like range. BOLT's output has its rewritten `.text` in a new segment, its split-off
/// `.text.cold` beside it and the functions it left alone in the original segment: callgrind
/// names only the first, the rest comes as `???` at run-time addresses, and a footprint of the
/// named object alone leaves it out (18% of the program's instructions on SQLite's held-out
/// workload, docs/journal/blocks.md). Usual binaries have a few such instructions (start-up code).
pub fn add_unattributed(
    counts: &mut BTreeMap<u64, u64>,
    unnamed: &BTreeMap<u64, u64>,
    segments: &[(u64, u64)],
    base: u64,
) -> u64 {
    let mut added = 0u64;
    for (&a, &n) in unnamed {
        let Some(v) = a.checked_sub(base) else {
            continue;
        };
        if segments.iter().any(|&(lo, hi)| (lo..hi).contains(&v)) {
            let e = counts.entry(v).or_insert(0);
            *e = e.saturating_add(n);
            added = added.saturating_add(n);
        }
    }
    added
}

/// The executable `PT_LOAD` segments of an ELF file as link-time `[start, end)`, and whether
/// it is position-independent (`ET_DYN`). `None` for anything that is not a readable ELF file.
pub fn exec_segments(elf: &[u8]) -> Option<(Vec<(u64, u64)>, bool)> {
    use object::{Object, ObjectSegment};
    let file = object::File::parse(elf).ok()?;
    if file.format() != object::BinaryFormat::Elf {
        return None;
    }
    let out = file
        .segments()
        .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0))
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    Some((out, file.kind() == object::ObjectKind::Dynamic))
}

#[cfg(test)]
mod tests {
    use super::*;

    // BOLT's layout: the object's counts lie in the new segment; `???` code in either
    // segment (at the PIE base) is the binary's and is added, `???` code outside the binary
    // (valgrind's own) is not.
    #[test]
    fn unattributed_code_of_the_binary_is_added() {
        let mut counts: BTreeMap<u64, u64> = [(0x40_0000, 5), (0x40_0010, 7)].into();
        let unnamed: BTreeMap<u64, u64> = [
            (VALGRIND_PIE_BASE + 0x8100, 3),
            (VALGRIND_PIE_BASE + 0x8104, 4),
            (VALGRIND_PIE_BASE + 0x43_a440, 9),
            (0x483_8000, 1),
        ]
        .into();
        let segs = [(0x8000, 0xd000), (0x20_0000, 0x62_0000)];
        assert_eq!(
            add_unattributed(&mut counts, &unnamed, &segs, VALGRIND_PIE_BASE),
            16
        );
        let want: BTreeMap<u64, u64> = [
            (0x8100, 3),
            (0x8104, 4),
            (0x40_0000, 5),
            (0x40_0010, 7),
            (0x43_a440, 9),
        ]
        .into();
        assert_eq!(counts, want);
        // A non-PIE binary (base 0): the run-time address is the link-time one.
        let mut fixed: BTreeMap<u64, u64> = BTreeMap::new();
        let unnamed: BTreeMap<u64, u64> = [(0x8100, 2), (0x10_8000 + 0x8100, 1)].into();
        assert_eq!(
            add_unattributed(&mut fixed, &unnamed, &[(0x8000, 0xd000)], 0),
            2
        );
        assert_eq!(fixed, [(0x8100, 2)].into());
    }

    #[test]
    fn exec_segments_of_this_test_binary() {
        // The running test program: rustc links position-independent executables on Linux.
        let elf = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let (segs, pie) = exec_segments(&elf).expect("an ELF file");
        assert!(pie);
        assert!(!segs.is_empty() && segs.iter().all(|&(lo, hi)| lo < hi));
        assert_eq!(exec_segments(&elf[..40]), None);
        assert_eq!(exec_segments(b"not an elf"), None);
    }

    // One instruction per page, counts 1, 90 and 9: 90 + 9 = 99 of 100, so two pages reach
    // 99% and the third is needed for 99.9%.
    #[test]
    fn covering_counts_largest_first() {
        let counts: BTreeMap<u64, u64> = [(0x1000, 1), (0x2000, 90), (0x3000, 9)].into();
        let (pages, _) = instruction_footprint(&counts).unwrap();
        assert_eq!((pages.p99, pages.p999), (2, 3));
    }

    // 999 of 1000 is exactly 99.9%: one page suffices, no rounding.
    #[test]
    fn covering_exact_boundary_is_enough() {
        let counts: BTreeMap<u64, u64> = [(0x1000, 999), (0x2000, 1)].into();
        assert_eq!(instruction_footprint(&counts).unwrap().0.p999, 1);
    }

    // No executed instructions: no block is needed.
    #[test]
    fn covering_nothing_is_zero() {
        let (pages, lines) = instruction_footprint(&BTreeMap::new()).unwrap();
        assert_eq!((pages.p99, lines.p99, pages.touched), (0, 0, 0));
        let zero: BTreeMap<u64, u64> = [(0x1000, 0), (0x2000, 0)].into();
        assert_eq!(instruction_footprint(&zero).unwrap().0.p99, 0);
    }

    // 0x1000 and 0x1ff0 share a page, 0x3000 is another; lines split all three.
    #[test]
    fn pages_group_addresses() {
        let counts: BTreeMap<u64, u64> =
            [(0x1000, 500), (0x1ff0, 499), (0x3000, 1), (0x5000, 0)].into();
        let (pages, lines) = instruction_footprint(&counts).unwrap();
        assert_eq!((pages.p99, pages.p999, pages.touched), (1, 1, 2));
        assert_eq!((lines.p99, lines.p999, lines.touched), (2, 2, 3));
    }

    const SAMPLE: &str = "\
# callgrind format
version: 1
positions: instr line
events: Ir
ob=(1) /bin/prog
fl=(1) a.c
fn=(1) main
0x1000 1 2
+4 * 3
cob=(2) /lib/libc.so
cfn=(2) puts
calls=1 0x9000 0
* * 500
+5 2 1
ob=(2)
fn=(3) puts
0x9000 0 500
ob=(1)
fn=(1)
0x1000 1 2
";

    // 0x1000 runs 2+2 times, 0x1004 3 times, 0x1009 once; the call's inclusive 500 is not the
    // call instruction's own cost, and libc's lines belong to another object, whose `ob=(2)`
    // refers to the name first defined by `cob=(2) /lib/libc.so`.
    #[test]
    fn callgrind_counts_per_object() {
        let objects =
            sediment_import::callgrind::object_instr_costs(&[sediment_import::callgrind::Input {
                path: "t",
                text: SAMPLE,
            }])
            .unwrap();
        let want: BTreeMap<u64, u64> = [(0x1000, 4), (0x1004, 3), (0x1009, 1)].into();
        assert_eq!(
            object_counts(&objects, Path::new("/bin/prog")).unwrap(),
            want
        );
        assert_eq!(
            object_counts(&objects, Path::new("/lib/libc.so")).unwrap(),
            [(0x9000, 500)].into()
        );
        assert_eq!(
            object_counts(&objects, Path::new("/bin/other")).unwrap_err(),
            "/bin/prog, /lib/libc.so"
        );
    }
}
