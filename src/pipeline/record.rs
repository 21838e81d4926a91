//! The `record` stage: run a command under a profiler and import what it recorded, as the
//! `import` stage does ([`super::import::import`]).
//!
//! [`Via::Perf`] runs `perf record -e cpu-clock -g -o TMP -- CMD ARGS...`: the software
//! `cpu-clock` event works everywhere (VMs, containers) where hardware counters may not, and
//! `-g` records frame-pointer call chains, so build the program with `-fno-omit-frame-pointer`.
//! [`Via::Callgrind`] runs `valgrind --tool=callgrind`, which is exact and needs no frame
//! pointers but runs the program some 50 times slower. It is run with `--demangle=no`
//! (symbol-table names, which the linker orders by) and `--dump-instr=yes`: instruction
//! addresses let the importer attribute cost to the exact symbol, which keeps apart same-named
//! static functions defined in one header (callgrind merges those by name). With
//! [`Request::whole`] (a whole package) callgrind follows children (`--trace-children=yes`, one
//! output file per process) and perf follows them by itself.
//!
//! The raw recording goes to a temporary directory that is removed when the stage returns, or
//! when a signal ends Sediment (`crate::cleanup`), which also stops the profiler and, through
//! it, the workload. A command that fails (non-zero exit, or killed) is an error, so that
//! nothing is written from a run that did not do what the recording was meant to measure;
//! [`Request::keep_partial`] makes it a warning instead and imports what was recorded. A
//! profiler that wrote nothing is an error naming the program either way.

use super::{import, timings};
use anyhow::{bail, Context, Result};
use sediment_import::perf::Mode;
use sediment_import::Imported;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Profilers the stage can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `perf record -e cpu-clock -g` (sampling, needs frame pointers).
    Perf,
    /// `valgrind --tool=callgrind` (exact call counts, slow).
    Callgrind,
}

/// What to record.
pub struct Request<'a> {
    /// The profiler.
    pub via: Via,
    /// The command and its arguments.
    pub command: &'a [String],
    /// perf only: how call chains become edges (default `leaf`).
    pub mode: Option<Mode>,
    /// A whole package: children are followed and binaries without symbols are skipped.
    pub whole: bool,
    /// The command's standard output goes to `/dev/null` instead of this process's (the demo
    /// prints its own table there).
    pub quiet: bool,
    /// A failing command is a warning and its recording is imported (`record --keep-partial`),
    /// instead of an error.
    pub keep_partial: bool,
}

/// Runs the command under the profiler and imports the recording. Fails when the command
/// failed, unless [`Request::keep_partial`]; then the warnings of the returned report start
/// with that one.
pub fn record(req: &Request<'_>) -> Result<Imported> {
    let _t = timings::stage("record");
    if let (Via::Callgrind, Some(mode)) = (req.via, req.mode) {
        bail!(
            "--mode {} is for --via perf only: callgrind counts every call exactly and records no call chains",
            mode.name()
        );
    }
    let (program, rest) = req
        .command
        .split_first()
        .context("no command given (usage: sediment record -o FILE -- CMD ARGS...)")?;
    // Before any profiler starts, so that a missing program is named as such; the file found
    // is also how the main executable is told among the profiles.
    let main = find_program(program)?;
    // Removed on return, and on SIGTERM/SIGINT too (`crate::cleanup`).
    let (tmp, _tmp_tracked) = crate::cleanup::track_path(
        || tempfile::Builder::new().prefix("sediment-record").tempdir(),
        tempfile::TempDir::path,
    )
    .context("cannot create a temporary directory")?;
    let mut warnings = Vec::new();
    let mut imported = match req.via {
        Via::Perf => {
            require_tool("perf", "linux-perf")?;
            let data = tmp.path().join("perf.data");
            let mut cmd = Command::new("perf");
            cmd.args(["record", "-q", "-e", "cpu-clock", "-g", "-o"])
                .arg(&data)
                .arg("--")
                .arg(program)
                .args(rest);
            if req.quiet {
                cmd.stdout(std::process::Stdio::null());
            }
            let status = run_profiler(cmd, "perf record", program, Some(&data))?;
            warnings.extend(command_failed(req, "perf record", program, status)?);
            let options = import::Options {
                mode: Some(req.mode.unwrap_or_default()),
                skip_stripped: req.whole,
                ..import::Options::default()
            };
            import::import(import::Format::Perf, &[data], &options)?
        }
        Via::Callgrind => {
            require_tool("valgrind", "valgrind")?;
            // One file per process when children are traced (`%p` is the process id).
            let out = tmp.path().join(if req.whole {
                "callgrind.out.%p"
            } else {
                "callgrind.out"
            });
            let rest: Vec<std::ffi::OsString> = rest.iter().map(Into::into).collect();
            let cmd = sediment_valgrind::tools::record_callgrind_command(
                &"valgrind".into(),
                Path::new(program),
                &rest,
                &out,
                req.whole,
                req.quiet,
            );
            let status = run_profiler(cmd, "valgrind --tool=callgrind", program, None)?;
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
            warnings.extend(command_failed(req, "valgrind", program, status)?);
            let main = std::fs::canonicalize(&main).unwrap_or(main);
            let options = import::Options {
                command: Some(main),
                skip_stripped: req.whole,
                ..import::Options::default()
            };
            import::import(import::Format::Callgrind, &files, &options)?
        }
    };
    warnings.append(&mut imported.warnings);
    imported.warnings = warnings;
    Ok(imported)
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

/// Runs the profiler on `program` and returns its exit status (the command's: perf and
/// valgrind pass it on); a profiler that wrote nothing to `out_file` (when it names one file)
/// is an error naming the program.
fn run_profiler(
    mut cmd: Command,
    tool: &str,
    program: &str,
    out_file: Option<&Path>,
) -> Result<std::process::ExitStatus> {
    // Killed by the kernel when Sediment dies, and sent SIGTERM (which `perf record` passes
    // on to its workload) when Sediment gets SIGTERM or SIGINT (`crate::cleanup`).
    sediment_valgrind::die_with_parent(&mut cmd);
    let (mut child, tracked) = crate::cleanup::track_child(|| cmd.spawn())
        .with_context(|| format!("cannot run {tool}"))?;
    let status = crate::cleanup::wait_child(&mut child, tracked)
        .with_context(|| format!("cannot run {tool}"))?;
    if out_file.is_some_and(|f| !f.exists()) {
        bail!("{tool} failed ({status}) on {program} and wrote no recording");
    }
    Ok(status)
}

/// What a recording whose profiler exited with `status` becomes: nothing when it succeeded,
/// the warning to print with [`Request::keep_partial`], an error otherwise.
fn command_failed(
    req: &Request<'_>,
    tool: &str,
    program: &str,
    status: std::process::ExitStatus,
) -> Result<Option<String>> {
    if status.success() {
        return Ok(None);
    }
    if !req.keep_partial {
        bail!(
            "{program} failed under {tool} ({status}); nothing written (--keep-partial keeps what was recorded)"
        );
    }
    Ok(Some(format!(
        "{tool} exited with {status}; importing what it recorded"
    )))
}
