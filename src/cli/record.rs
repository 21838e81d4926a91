//! `sediment record`: run a command under a profiler and write one profile per binary.
//!
//! The recording is the `record` stage ([`crate::pipeline::record`]: which profiler runs how,
//! and the import of what it wrote); this verb says where the profiles go: one file for the
//! main executable (`-o OUT`), or a profile directory, written atomically. With `-o`, the other
//! binaries that got samples (libc, the dynamic loader, ...) are left out, counted and named in
//! one line, unless `--keep-binaries all|NAME,...` asks for them: each then goes beside `OUT`
//! as `STEM.<basename>.sprof` (`app.sprof` -> `app.libz.so.1.sprof`).
//!
//! **Running processes** (`--pid PID,...`, `--all`): perf attaches to the processes (or the
//! whole machine) until `--duration`, their end, or the first Ctrl-C, which stops the recording
//! and writes it ([`record::attach`]); the profiles go where they go for a command. `--all`
//! writes to a profile directory only: it has no main executable.
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
//! What a profile directory keeps: the binaries under `--under DIR` and those `--keep-binaries
//! NAMES` lists (default: every binary), the rest counted in one line
//! ([`record::filter_binaries`]); and, unless `--keep-paths`, binaries named by base name and
//! build-id only, without the recording's directories or command line
//! ([`record::drop_private`]).
//!
//! **Contributor bundles** (`--bundle FILE`): the same filters and privacy, the package and
//! version of each binary where dpkg or rpm knows it ([`bundle::package_of`], looked up before
//! the paths are dropped), and the recording's duration and total, in one file
//! ([`crate::pipeline::bundle`]) a packager merges with `sediment merge --prof-dir`.
//!
//! Every file is computed first and written (atomically) after all inputs were read and merged,
//! so a failure leaves DIR as it was. The read-merge-write holds an advisory lock on DIR
//! (`fsio::lock_dir`), so concurrent recordings into one directory lose none. A recorded
//! command that failed writes nothing and exits non-zero, unless `--keep-partial` asks to keep
//! what was recorded.

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::{bundle, import, merge, record};
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
    /// With `--prof-dir` or `--bundle`: keep only these binaries (and those `--under` keeps);
    /// default `all`.
    #[arg(long, value_name = "NAMES")]
    pub keep_binaries: Option<import::KeepBinaries>,
    /// With `--prof-dir` or `--bundle`: keep only the binaries whose path lies under DIR (a
    /// build tree, an install prefix; repeat for several), and those `--keep-binaries` names;
    /// the others (the C library, the loader, ...) are counted in one line.
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    pub under: Vec<PathBuf>,
    /// With `--prof-dir` or `--bundle`: keep each binary's path and the command line in the
    /// profiles. Without it they name binaries by base name and build-id only, which is all a
    /// build needs to find and match them.
    #[arg(long, conflicts_with = "output")]
    pub keep_paths: bool,
    /// Write a contributor bundle: one file to send in (a gzip-compressed tar file) holding a
    /// profile per binary keyed by base name and build-id, the package and version that
    /// installed each binary where dpkg or rpm knows it, the recording's duration and samples,
    /// and no paths or command lines (unless `--keep-paths`). A packager merges an inbox of
    /// them with `sediment merge --prof-dir`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["output", "prof_dir"])]
    pub bundle: Option<PathBuf>,
    /// With `--bundle`: who sends it (a name, a host), for the packager's `merge
    /// --per-submitter`. Default: none (each bundle counts as its own submitter).
    #[arg(long, value_name = "NAME", requires = "bundle")]
    pub submitter: Option<String>,
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
    /// Stop recording after this many seconds and keep what was recorded: the command (with
    /// the processes it started) is stopped, or perf detaches from `--pid`/`--all`. A long
    /// callgrind run prints its progress every 10 s; this caps it.
    #[arg(long, value_name = "S", value_parser = vocab::parse_seconds)]
    pub duration: Option<std::time::Duration>,
    /// The command to profile and its arguments (after `--`).
    #[arg(last = true, required_unless_present_any = ["pid", "all"], conflicts_with_all = ["pid", "all"], value_name = "CMD")]
    pub command: Vec<String>,
}

/// Where `sediment record` writes: one file for the main executable, a profile directory, or
/// a contributor bundle.
enum Target {
    Output(PathBuf),
    ProfDir(PathBuf),
    Bundle(PathBuf),
}

/// Runs `sediment record`.
pub fn run(args: Args) -> Result<()> {
    let started = std::time::Instant::now();
    let started_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let target = match (&args.output, &args.prof_dir, &args.bundle) {
        (_, _, Some(b)) => Target::Bundle(b.clone()),
        (Some(o), _, _) => Target::Output(o.clone()),
        (None, Some(d), _) => Target::ProfDir(d.clone()),
        (None, None, None) => match vocab::prof_dir_from_env() {
            Some((_, d)) => Target::ProfDir(PathBuf::from(d)),
            None if args.all => bail!(
                "--all writes one profile per binary: give --prof-dir DIR (or set SEDIMENT_PROF_DIR)"
            ),
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
            whole: !matches!(target, Target::Output(_)),
        })?;
        // Attached processes have no one main executable: every binary is kept.
        let keep = args
            .keep_binaries
            .clone()
            .unwrap_or(import::KeepBinaries::All);
        let recording = Recording {
            args: &args,
            started,
            started_at,
        };
        return write(target, imported, &keep, &recording);
    }
    let imported = record::record(&record::Request {
        via: match args.via {
            Via::Perf => record::Via::Perf,
            Via::Callgrind => record::Via::Callgrind,
        },
        command: &args.command,
        mode: args.mode,
        whole: !matches!(target, Target::Output(_)),
        quiet: false,
        keep_partial: args.keep_partial,
        duration: args.duration,
    })?;
    let keep = args.keep_binaries.clone().unwrap_or(match target {
        Target::Output(_) => import::KeepBinaries::MainOnly,
        _ => import::KeepBinaries::All,
    });
    let recording = Recording {
        args: &args,
        started,
        started_at,
    };
    write(target, imported, &keep, &recording)
}

/// What `write` needs to know of the recording beside its profiles.
struct Recording<'a> {
    args: &'a Args,
    started: std::time::Instant,
    started_at: i64,
}

/// For a profile directory or a bundle: drops the binaries `--under`/`--keep-binaries` do not
/// keep (one line counting them), then, unless `--keep-paths`, what is private
/// ([`record::drop_private`]). `before_private` runs on the kept profiles while they still
/// name their paths (the bundle's package lookup).
fn filter_and_strip(
    imported: &mut sediment_import::Imported,
    keep: &import::KeepBinaries,
    rec: &Recording<'_>,
    before_private: impl FnOnce(&mut sediment_import::Imported),
) -> Result<()> {
    let filter = record::Filter {
        under: rec.args.under.clone(),
        names: match keep {
            import::KeepBinaries::Named(names) => names.clone(),
            _ => Vec::new(),
        },
    };
    let dropped = record::filter_binaries(imported, &filter)?;
    if !dropped.is_empty() {
        let names: Vec<String> = dropped
            .iter()
            .take(3)
            .map(|b| sediment_profile::escape(b))
            .collect();
        eprintln!(
            "sediment: {} binar{} outside --under/--keep-binaries {} not written ({}{})",
            dropped.len(),
            if dropped.len() == 1 { "y" } else { "ies" },
            if dropped.len() == 1 { "was" } else { "were" },
            names.join(", "),
            if dropped.len() > 3 { ", ..." } else { "" }
        );
    }
    before_private(imported);
    if !rec.args.keep_paths {
        record::drop_private(imported);
    }
    Ok(())
}

/// Writes the profiles of a recording where `target` says; with `-o`, the binaries other than
/// the main executable only as `keep` says.
fn write(
    target: Target,
    mut imported: sediment_import::Imported,
    keep: &import::KeepBinaries,
    rec: &Recording<'_>,
) -> Result<()> {
    match target {
        Target::Output(out) => {
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
        Target::Bundle(path) => {
            let total: u64 = imported.profiles.iter().map(|p| p.meta.total).sum();
            filter_and_strip(&mut imported, keep, rec, |imported| {
                for p in &mut imported.profiles {
                    if let Some((name, version)) =
                        bundle::package_of(std::path::Path::new(&p.meta.binary))
                    {
                        p.meta.extra.insert(bundle::META_PACKAGE.into(), name);
                        p.meta
                            .extra
                            .insert(bundle::META_PACKAGE_VERSION.into(), version);
                    }
                }
            })?;
            if imported.profiles.is_empty() {
                bail!(
                    "no binary of the recording is left to put in {}; nothing written",
                    path.display()
                );
            }
            for p in &mut imported.profiles {
                if let Some(s) = &rec.args.submitter {
                    p.meta
                        .extra
                        .insert(sediment_profile::META_SUBMITTER.into(), s.clone());
                }
                p.meta.extra.insert(
                    sediment_profile::META_RECORDED_AT.into(),
                    rec.started_at.to_string(),
                );
            }
            imported.profiles.sort_by(|a, b| {
                (&a.meta.binary, &a.meta.build_id).cmp(&(&b.meta.binary, &b.meta.build_id))
            });
            let events: std::collections::BTreeSet<Option<&String>> = imported
                .profiles
                .iter()
                .map(|p| p.meta.event.as_ref())
                .collect();
            let manifest = bundle::Manifest {
                format: bundle::FORMAT.into(),
                submitter: rec.args.submitter.clone(),
                recorded_at: Some(rec.started_at),
                source: imported.source.to_string(),
                event: match events.into_iter().collect::<Vec<_>>()[..] {
                    [Some(e)] => Some(e.clone()),
                    _ => None,
                },
                duration_ms: rec.started.elapsed().as_millis() as u64,
                total,
                profiles: bundle::entries(&imported.profiles),
            };
            let bytes = bundle::to_bytes(&manifest, &imported.profiles)
                .map_err(|e| anyhow::anyhow!("{}: {e:#}; nothing written", path.display()))?;
            fsio::write_atomic(&path, &bytes)?;
            for w in &imported.warnings {
                eprintln!("sediment: warning: {}", sediment_profile::quote_whole(w));
            }
            eprintln!(
                "sediment: wrote {} ({} binar{}, {} {} in {:.1} s)",
                sediment_profile::quote_whole(&path.display().to_string()),
                manifest.profiles.len(),
                if manifest.profiles.len() == 1 {
                    "y"
                } else {
                    "ies"
                },
                total,
                manifest.event.as_deref().unwrap_or("weight"),
                manifest.duration_ms as f64 / 1000.0
            );
            Ok(())
        }
        Target::ProfDir(dir) => {
            filter_and_strip(&mut imported, keep, rec, |_| {})?;
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
