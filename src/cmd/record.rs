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
//! are then imported exactly as `sediment import` would (main executable -> OUT, every other
//! binary with samples -> `OUT.<basename>.sprof`), written atomically.

use crate::cmd::import::{self, parse_mode};
use anyhow::{bail, Context, Result};
use sediment_import::perf::Mode;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    /// Where to write the main executable's profile; others go to `OUT.<basename>.sprof`.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// The profiler to run the command under.
    #[arg(long, value_enum, default_value = "perf")]
    pub via: Via,
    /// perf only: `leaf` (hfsort: one caller -> sampled-function edge per sample) or `chain`
    /// (every adjacent pair of the call chain).
    #[arg(long, value_name = "MODE", default_value = "leaf", value_parser = parse_mode)]
    pub mode: Mode,
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

/// Runs the profiler; a failing command is a warning (the profile may still be useful), a
/// profiler that wrote nothing is an error.
fn run_profiler(mut cmd: Command, tool: &str, out_file: &Path) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {tool}"))?;
    if !out_file.exists() {
        bail!("{tool} failed ({status}) and wrote no recording");
    }
    if !status.success() {
        eprintln!("sediment: warning: {tool} exited with {status}; importing what it recorded");
    }
    Ok(())
}

/// The program file the command runs (for finding the main executable among the profiles).
fn program_path(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

/// Runs `sediment record`.
pub fn run(args: Args) -> Result<()> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given (usage: sediment record -o OUT -- CMD ARGS...)")?;
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
            run_profiler(cmd, "perf record", &data)?;
            import::import_perf(&data, None, args.mode)?
        }
        Via::Callgrind => {
            require_tool("valgrind", "valgrind")?;
            let out = tmp.path().join("callgrind.out");
            let mut flag = std::ffi::OsString::from("--callgrind-out-file=");
            flag.push(&out);
            let mut cmd = Command::new("valgrind");
            cmd.args([
                "-q",
                "--tool=callgrind",
                "--demangle=no",
                "--dump-instr=yes",
            ])
            .arg(flag)
            .arg(program)
            .args(rest);
            run_profiler(cmd, "valgrind", &out)?;
            let main = program_path(program);
            let main = std::fs::canonicalize(&main).unwrap_or(main);
            import::import_callgrind(&out, None, Some(&main))?
        }
    };
    import::write_profiles(&args.output, imported)
}
