//! `sediment record`: run a command under a profiler and write one profile per binary.
//!
//! `--via perf` (default) runs `perf record -e cpu-clock -g -o TMP -- CMD ARGS...`: the
//! software `cpu-clock` event works everywhere (VMs, containers) where hardware counters may
//! not, and `-g` records frame-pointer call chains, so build the program with
//! `-fno-omit-frame-pointer`. `--via callgrind` runs `valgrind --tool=callgrind`, which is
//! exact and needs no frame pointers but runs the program some 50 times slower. It is run with
//! `--demangle=no` (symbol-table names, which the linker orders by) and `--dump-instr=yes`:
//! instruction addresses let the importer attribute cost to the exact symbol, which keeps apart
//! same-named static functions defined in one header (callgrind merges those by name).
//!
//! The raw recording goes to a temporary directory that is removed afterwards; the profiles
//! are then imported by the `import` stage, exactly as `sediment import` does
//! ([`crate::pipeline::import`]: main executable -> OUT, every other binary with samples ->
//! `OUT.<basename>.sprof`), written atomically.
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
//! so a failure leaves DIR as it was.

use crate::cli::vocab;
use crate::fsio;
use crate::pipeline::{import, merge};
use anyhow::{bail, Context, Result};
use sediment_import::perf::Mode;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    /// Where to write the main executable's profile; others go to `FILE.<basename>.sprof`.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
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
    /// The command to profile and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Checks that `tool` runs; the error names the Debian package that provides it.
fn require_tool(tool: &str, package: &str) -> Result<()> {
    match Command::new(tool).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => bail!(
            "{tool} is installed but does not run ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{tool} not found: install the Debian package `{package}`")
        }
        Err(e) => bail!("cannot run {tool}: {e}"),
    }
}

/// The file `program` names, checked before any profiler starts: a name with a `/` must be an
/// executable file, a bare name one found in `PATH` (as `execvp` looks it up). Without this
/// check a missing program is only noticed by the profiler, which reports it in its own words
/// and leaves a stub recording behind (perf writes a header-only `perf.data`), so the error
/// would be about a truncated temporary file instead of the program.
fn find_program(program: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |m: &std::fs::Metadata| m.is_file() && m.permissions().mode() & 0o111 != 0;
    if program.contains('/') {
        return match std::fs::metadata(program) {
            Ok(m) if executable(&m) => Ok(PathBuf::from(program)),
            Ok(m) if m.is_dir() => bail!("{program}: a directory, not a program to record"),
            Ok(_) => bail!("{program}: not an executable file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{program}: no such program")
            }
            Err(e) => bail!("{program}: cannot run: {e}"),
        };
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| std::fs::metadata(p).is_ok_and(|m| executable(&m)))
        })
        .with_context(|| format!("{program}: no such program in PATH"))
}

/// Runs the profiler on `program`; a failing command is a warning (the profile may still be
/// useful), a profiler that wrote nothing is an error naming the program.
fn run_profiler(mut cmd: Command, tool: &str, program: &str, out_file: &Path) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {tool}"))?;
    if !out_file.exists() {
        bail!("{tool} failed ({status}) on {program} and wrote no recording");
    }
    if !status.success() {
        eprintln!("sediment: warning: {tool} exited with {status}; importing what it recorded");
    }
    Ok(())
}

/// Where `sediment record` writes: one file for the main executable, or a profile directory.
enum Target {
    Output(PathBuf),
    ProfDir(PathBuf),
}

/// Runs `sediment record`.
pub fn run(args: Args) -> Result<()> {
    // Before anything runs: `--mode` says how sampled call chains become edges, and callgrind
    // records no chains (it counts each call), so the option would be silently ignored. clap
    // cannot say "conflicts with one value of --via" (--via has a default), hence the check.
    if let (Via::Callgrind, Some(mode)) = (args.via, args.mode) {
        bail!(
            "--mode {} is for --via perf only: callgrind counts every call exactly and records no call chains",
            mode.name()
        );
    }
    let target = match (&args.output, &args.prof_dir) {
        (Some(o), _) => Target::Output(o.clone()),
        (None, Some(d)) => Target::ProfDir(d.clone()),
        (None, None) => match vocab::prof_dir_from_env() {
            Some((_, d)) => Target::ProfDir(PathBuf::from(d)),
            None => bail!("no output: give -o FILE or --prof-dir DIR (or set SEDIMENT_PROF_DIR)"),
        },
    };
    let whole = matches!(target, Target::ProfDir(_));
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given (usage: sediment record -o FILE -- CMD ARGS...)")?;
    // Before any profiler starts, so that a missing program is named as such; the file found
    // is also how the main executable is told among the profiles.
    let main = find_program(program)?;
    let tmp = tempfile::Builder::new()
        .prefix("sediment-record")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let imported = match args.via {
        Via::Perf => {
            require_tool("perf", "linux-perf")?;
            let data = tmp.path().join("perf.data");
            let mut cmd = Command::new("perf");
            cmd.args(["record", "-q", "-e", "cpu-clock", "-g", "-o"])
                .arg(&data)
                .arg("--")
                .arg(program)
                .args(rest);
            run_profiler(cmd, "perf record", program, &data)?;
            let options = import::Options {
                mode: Some(args.mode.unwrap_or_default()),
                skip_stripped: whole,
                ..import::Options::default()
            };
            import::import(import::Format::Perf, &[data], &options)?
        }
        Via::Callgrind => {
            require_tool("valgrind", "valgrind")?;
            // One file per process when children are traced (`%p` is the process id).
            let out = tmp.path().join(if whole {
                "callgrind.out.%p"
            } else {
                "callgrind.out"
            });
            let mut flag = std::ffi::OsString::from("--callgrind-out-file=");
            flag.push(&out);
            let mut cmd = Command::new("valgrind");
            cmd.args([
                "-q",
                "--vgdb=no", // as in sediment-measure: no PID-named FIFOs in /tmp
                "--tool=callgrind",
                "--demangle=no",
                "--dump-instr=yes",
            ]);
            if whole {
                cmd.arg("--trace-children=yes");
            }
            cmd.arg(flag).arg(program).args(rest);
            let status = cmd.status().context("cannot run valgrind")?;
            let mut files: Vec<PathBuf> = std::fs::read_dir(tmp.path())
                .context("cannot list the recording directory")?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("callgrind.out"))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                bail!("valgrind failed ({status}) on {program} and wrote no recording");
            }
            if !status.success() {
                eprintln!(
                    "sediment: warning: valgrind exited with {status}; importing what it recorded"
                );
            }
            let main = std::fs::canonicalize(&main).unwrap_or(main);
            let options = import::Options {
                command: Some(main),
                skip_stripped: whole,
                ..import::Options::default()
            };
            import::import(import::Format::Callgrind, &files, &options)?
        }
    };
    match target {
        Target::Output(out) => {
            let out = import::outputs(&out, imported)?;
            fsio::write_profiles(&out.as_set(), &out.warnings)
        }
        Target::ProfDir(dir) => {
            // Every file is computed first, then all are written as one set, in `dir` created
            // if missing ([`fsio::in_dir`]), so a failure leaves DIR as it was.
            let out = merge::into_prof_dir(&dir, imported)?;
            fsio::in_dir(&dir, || fsio::write_profiles(&out.as_set(), &out.warnings))
        }
    }
}
