//! Running the Valgrind simulations and assembling [`Metrics`].
//!
//! Every (binary, simulation) pair is one job; jobs are independent, so a small pool of scoped
//! threads takes them from a shared counter, and each result lands in the slot of its job, so
//! the outcome does not depend on which thread ran what. After a failure no new job starts,
//! and the error of the lowest-numbered failed job is returned.
//!
//! Turned down: one cachegrind run per binary with several I1 caches. Cachegrind simulates
//! exactly one I1, one D1 and one LL, so four I1 geometries need four runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::{cachegrind, callgrind, fnv1a, footprint, Error, Metrics};

/// The four I1 geometries, as cachegrind's `--I1=size,assoc,line_size`, in the order of the
/// [`Metrics`] fields: 32 KiB/8-way and 16 KiB/4-way L1i (64-byte lines), then the 64- and
/// 128-entry 8-way instruction TLBs modelled as caches of 4 KiB "lines".
pub const I1_CONFIGS: [&str; 4] = ["32768,8,64", "16384,4,64", "262144,8,4096", "524288,8,4096"];

/// Fixed data-side caches, so that no result depends on the host's caches. D1 is a common
/// 32 KiB/8-way; LL an 8 MiB/16-way. Neither affects the instruction-side numbers except
/// through LL, which none of the metrics use.
const D1_CONFIG: &str = "32768,8,64";
const LL_CONFIG: &str = "8388608,16,64";

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
    /// Cachegrind with `I1_CONFIGS[i]`.
    Cache(usize),
    /// Callgrind with per-instruction counts.
    Instr,
}

enum Outcome {
    /// Cachegrind totals: (Ir, I1mr).
    Cache(u64, u64),
    /// Callgrind: object instructions, page and line footprints, stdout hash.
    Instr(u64, footprint::Footprint, footprint::Footprint, String),
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
        .chain((0..I1_CONFIGS.len()).map(Sim::Cache))
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
                m.pages_99 = pages.for_99;
                m.pages_99_9 = pages.for_99_9;
                m.pages_touched = pages.touched;
                m.lines_99 = lines.for_99;
                m.lines_99_9 = lines.for_99_9;
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
fn run_one(
    opts: &Options,
    binary: &Path,
    canon: &Path,
    args: &[OsString],
    sim: Sim,
    out: &Path,
) -> Result<Outcome, Error> {
    let tool = match sim {
        Sim::Cache(_) => "cachegrind",
        Sim::Instr => "callgrind",
    };
    let mut cmd = Command::new(&opts.valgrind);
    // `--vgdb=no`: no gdbserver FIFOs in /tmp. They are named by PID only, so a stale one left
    // by another user's killed run makes valgrind refuse to start under a reused PID.
    cmd.arg(format!("--tool={tool}")).args(["-q", "--vgdb=no"]);
    match sim {
        Sim::Cache(i) => {
            cmd.arg("--cache-sim=yes")
                .arg(format!("--I1={}", I1_CONFIGS[i]))
                .arg(format!("--D1={D1_CONFIG}"))
                .arg(format!("--LL={LL_CONFIG}"))
                .arg(os_concat("--cachegrind-out-file=", out));
        }
        Sim::Instr => {
            cmd.arg("--dump-instr=yes")
                .arg(os_concat("--callgrind-out-file=", out));
        }
    }
    // The canonical path: valgrind would search PATH for a bare name, and callgrind names the
    // object by its real path, which is what the `ob=` match below compares against.
    cmd.arg(canon).args(args);
    sediment_valgrind::die_with_parent(&mut cmd);
    cmd.stdin(stdin_for(opts.stdin.as_deref())?)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = cmd.output().map_err(|source| Error::ToolMissing {
        tool: format!("valgrind --tool={tool}"),
        binary: binary.to_path_buf(),
        source,
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let detail = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .chars()
            .take(200)
            .collect();
        return Err(Error::ProgramFailed {
            tool: tool.into(),
            binary: binary.to_path_buf(),
            status: output.status.to_string(),
            detail,
        });
    }
    let text = std::fs::read_to_string(out).map_err(|source| Error::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let parse_err = |e: callgrind::ParseError| Error::Parse {
        file: out.to_path_buf(),
        line: e.line,
        message: e.message,
    };
    match sim {
        Sim::Cache(_) => {
            let t = cachegrind::totals(&text).map_err(parse_err)?;
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
            let mut counts = object_counts(&text, canon).map_err(|e| match e {
                Ok(seen) => Error::ObjectNotFound {
                    file: out.to_path_buf(),
                    binary: binary.to_path_buf(),
                    seen,
                },
                Err(e) => parse_err(e),
            })?;
            // The binary's code valgrind did not attach to its object (most of it in BOLT's
            // binaries): reported as `???` at run-time addresses.
            let elf = std::fs::read(canon).map_err(|source| Error::Io {
                path: canon.to_path_buf(),
                source,
            })?;
            if let Some((segments, pie)) = callgrind::exec_segments(&elf) {
                let unnamed =
                    callgrind::instruction_counts(&text, &|o| o == callgrind::UNNAMED_OBJECT)
                        .map_err(parse_err)?;
                let base = if pie { callgrind::VALGRIND_PIE_BASE } else { 0 };
                callgrind::add_unattributed(&mut counts, &unnamed.counts, &segments, base);
            }
            let total = counts.values().fold(0u64, |a, &c| a.saturating_add(c));
            Ok(Outcome::Instr(
                total,
                footprint::footprint(&counts, 12),
                footprint::footprint(&counts, 6),
                fnv1a(&output.stdout),
            ))
        }
    }
}

/// Per-instruction counts of the object whose path is `canon`. Callgrind prints the real path,
/// so an exact match is tried first; failing that, the file name alone (for objects reached
/// through a symlinked directory). `Err(Ok(seen))` lists the objects when neither matches.
fn object_counts(
    text: &str,
    canon: &Path,
) -> Result<std::collections::BTreeMap<u64, u64>, Result<String, callgrind::ParseError>> {
    let exact = callgrind::instruction_counts(text, &|o| Path::new(o) == canon).map_err(Err)?;
    if exact.found {
        return Ok(exact.counts);
    }
    let name = canon.file_name();
    let loose =
        callgrind::instruction_counts(text, &|o| Path::new(o).file_name() == name).map_err(Err)?;
    if loose.found {
        return Ok(loose.counts);
    }
    Err(Ok(exact.objects.join(", ")))
}

/// The standard input of one run: `file` opened afresh, or `/dev/null`.
fn stdin_for(file: Option<&Path>) -> Result<Stdio, Error> {
    sediment_valgrind::stdin_for(file).map_err(|e| match e {
        sediment_valgrind::Error::Io { path, source } => Error::Io { path, source },
        e => Error::Io {
            path: file.map(Path::to_path_buf).unwrap_or_default(),
            source: std::io::Error::other(e.to_string()),
        },
    })
}

fn os_concat(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path.as_os_str());
    s
}
