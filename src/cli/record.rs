//! `sediment record`: run a command under a profiler and write one profile per binary.
//!
//! The recording is the `record` stage ([`crate::pipeline::record`]: which profiler runs how,
//! and the import of what it wrote); this verb says where the profiles go: one file for the
//! main executable (`-o OUT`), or a profile directory, written atomically. With `-o`, the other
//! binaries that got samples (libc, the dynamic loader, ...) are left out, counted and named in
//! one line, unless `--keep-binaries all|NAME,...` asks for them: each then goes beside `OUT`
//! as `STEM.<basename>.sprof` (`app.sprof` -> `app.libz.so.1.sprof`).
//!
//! **Whole packages** (`--prof-dir DIR`, or the environment variable `SEDIMENT_PROF_DIR`, alias
//! `PROF_DIR`, when neither `-o` nor `--prof-dir` is given: [`vocab::prof_dir_from_env`]): one
//! recording of a test suite or script that runs many programs writes one profile per
//! executable or shared library it touched, under a name a build can find: `DIR/<basename>.sprof` (`DIR/sqlite3.sprof`, `DIR/libz.so.1.sprof`).
//! perf follows child processes by itself; callgrind is run with `--trace-children=yes` and one
//! output file per process (`callgrind.out.%p.%n`), which are summed per binary. The naming rules:
//! - Two *different* binaries of one base name in one recording (same name, other build-id;
//!   without build-ids, other paths) each go to `DIR/<basename>.<build-id>.sprof` (or, without
//!   a build-id, the path with `/` spelled `%2F`), so neither is mistaken for the other. Copies
//!   of one build (same build-id) at two paths are one binary: their weights are summed. (GNU
//!   ld's build-id hashes the loaded sections only, so two programs that differ only in symbol
//!   names share one; such twins are summed too.)
//! - An existing `DIR/<basename>.sprof` of the same binary is merged with the new recording
//!   (the `merge` stage, [`crate::pipeline::merge::into_prof_dir`]), each recording counting
//!   once: the file's `meta recordings` (1 if absent) is its weight, the new recording's is 1,
//!   and the result says one more.
//! - An existing file that describes another build (merge refuses: build-id or architecture
//!   differ) is left alone; the new profile goes to `DIR/<basename>.<build-id>.sprof` instead,
//!   with a warning.
//!
//! Every file is computed first and written (atomically) after all inputs were read and merged,
//! so a failure leaves DIR as it was. The read-merge-write holds an advisory lock on DIR
//! (`fsio::lock_dir`), so concurrent recordings into one directory lose none. A recorded
//! command that failed writes nothing and exits non-zero, unless `--keep-partial` asks to keep
//! what was recorded.

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::{import, merge, record};
use anyhow::{bail, Result};
use sediment_import::perf::Mode;
use std::path::PathBuf;
use std::str::FromStr as _;

/// Profilers `sediment record` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// `perf record -e cpu-clock -g` (sampling, needs frame pointers).
    Perf,
    /// `valgrind --tool=callgrind` (exact call counts, slow).
    Callgrind,
}

/// Arguments of `sediment record`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the main executable's profile (other binaries: `--keep-binaries`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With `-o`: also write the profiles of these other binaries that got samples (base names
    /// separated by commas, or `all`), each beside FILE as `STEM.<basename>.sprof` (`app.sprof`
    /// -> `app.libz.so.1.sprof`). Default: the main executable's only. (`--pid`/`--all` keep every binary.)
    #[arg(long, value_name = "NAMES", requires = "output", conflicts_with_all = ["pid", "all"])]
    pub keep_binaries: Option<import::KeepBinaries>,
    /// Whole-package mode: one profile per executable or shared library the command (and its
    /// children) touched, as `DIR/<basename>.sprof`, merged into existing ones. Default:
    /// `$SEDIMENT_PROF_DIR` (or `$PROF_DIR`), when `-o` is not given.
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    pub prof_dir: Option<PathBuf>,
    /// The profiler to run the command under.
    #[arg(long, value_enum, default_value = "perf")]
    pub via: Via,
    /// perf only: how perf's call chains become edges, `leaf` (default; hfsort: one caller ->
    /// sampled-function edge per sample) or `chain` (every adjacent pair of the call chain).
    /// Refused with `--via callgrind`, which counts every call exactly and has no chains.
    #[arg(long, value_name = "MODE", value_parser = Mode::from_str)]
    pub mode: Option<Mode>,
    /// Keep the recording of a command that failed (exits non-zero or is killed): import it
    /// with a warning. Without it such a recording is an error and nothing is written.
    #[arg(long)]
    pub keep_partial: bool,
    /// Record running processes instead of a command: `perf record -p` on these process ids
    /// (comma-separated), until `--duration`, until they all end, or until Ctrl-C (which stops
    /// the recording and writes the profiles). perf only.
    #[arg(long, value_name = "PID,...", value_delimiter = ',', num_args = 1.., conflicts_with = "all")]
    pub pid: Vec<u32>,
    /// Record the whole machine (`perf record -a`) for `--duration` seconds (or until Ctrl-C),
    /// one profile per program and shared library that ran, into `--prof-dir`. perf only;
    /// kernel samples are counted, never attributed.
    #[arg(long, requires = "duration", conflicts_with = "output")]
    pub all: bool,
    /// Stop recording after this many seconds and keep what was recorded.
    #[arg(long, value_name = "S", value_parser = vocab::parse_seconds)]
    pub duration: Option<std::time::Duration>,
    /// The command to profile and its arguments (after `--`).
    #[arg(last = true, required_unless_present_any = ["pid", "all"], conflicts_with_all = ["pid", "all"], value_name = "CMD")]
    pub command: Vec<String>,
}

/// Where `sediment record` writes: one file for the main executable, or a profile directory.
enum Target {
    Output(PathBuf),
    ProfDir(PathBuf),
}

/// Runs `sediment record`.
pub fn run(args: Args) -> Result<()> {
    let target = match (&args.output, &args.prof_dir) {
        (Some(o), _) => Target::Output(o.clone()),
        (None, Some(d)) => Target::ProfDir(d.clone()),
        (None, None) => match vocab::prof_dir_from_env() {
            Some((_, d)) => Target::ProfDir(PathBuf::from(d)),
            None => bail!("no output: give -o FILE or --prof-dir DIR (or set SEDIMENT_PROF_DIR)"),
        },
    };
    let attached = if args.all {
        Some(record::Targets::All)
    } else if !args.pid.is_empty() {
        Some(record::Targets::Pids(args.pid.clone()))
    } else {
        None
    };
    if let Some(targets) = attached {
        if args.via != Via::Perf {
            bail!("--pid and --all record with perf only (callgrind cannot attach to a running process)");
        }
        let imported = record::attach(&record::Attach {
            targets,
            duration: args.duration,
            mode: args.mode,
            whole: matches!(target, Target::ProfDir(_)),
        })?;
        // Attached processes have no one main executable: every binary is kept.
        return write(target, imported, &import::KeepBinaries::All);
    }
    let imported = record::record(&record::Request {
        via: match args.via {
            Via::Perf => record::Via::Perf,
            Via::Callgrind => record::Via::Callgrind,
        },
        command: &args.command,
        mode: args.mode,
        whole: matches!(target, Target::ProfDir(_)),
        quiet: false,
        keep_partial: args.keep_partial,
    })?;
    write(target, imported, &args.keep_binaries.unwrap_or_default())
}

/// Writes the profiles of a recording where `target` says; with `-o`, the binaries other than
/// the main executable only as `keep` says.
fn write(
    target: Target,
    imported: sediment_import::Imported,
    keep: &import::KeepBinaries,
) -> Result<()> {
    match target {
        Target::Output(out) => {
            let mut imported = imported;
            let dropped = import::keep_binaries(&mut imported, keep);
            if let Some(first) = dropped.first() {
                let names: Vec<String> = dropped
                    .iter()
                    .take(3)
                    .map(|b| sediment_profile::escape(sediment_profile::base_name(b)))
                    .collect();
                eprintln!(
                    "sediment: {} other binaries got samples and were not written ({}{}); --keep-binaries {} (or all) writes them",
                    dropped.len(),
                    names.join(", "),
                    if dropped.len() > 3 { ", ..." } else { "" },
                    sediment_profile::escape(sediment_profile::base_name(first))
                );
            }
            let out = import::outputs(&out, imported)?;
            fsio::write_profiles(&out.as_set(), &out.warnings)
        }
        Target::ProfDir(dir) => {
            // Every file is computed first, then all are written as one set, in `dir` created
            // if missing ([`fsio::in_dir`]), so a failure leaves DIR as it was. The read, the
            // merge and the write are one step under DIR's lock ([`fsio::lock_dir`]), so
            // concurrent recordings into DIR each count.
            fsio::in_dir(&dir, || {
                let _lock = fsio::lock_dir(&dir)?;
                let out = merge::into_prof_dir(&dir, imported)?;
                fsio::write_profiles(&out.as_set(), &out.warnings)
            })
        }
    }
}
