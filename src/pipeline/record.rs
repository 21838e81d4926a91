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
//! [`Request::duration`] caps a recording: the profiler (and every process it started) is
//! stopped, and what it wrote is imported with a warning. A callgrind recording prints its
//! progress every `PROGRESS_EVERY` (10 s), asked of the running callgrind processes through their
//! gdbserver (`callgrind_control`, FIFOs under the private temporary directory).
//!
//! [`attach`] records processes that are already running (`perf record -p PIDS` or `-a`); a
//! `crate::cleanup::StopOnSignal` makes the first Ctrl-C end the recording instead of
//! Sediment. Permissions perf would refuse are one line saying what to change
//! ([`permission_problem`]).
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
use std::time::{Duration, Instant};

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
    /// Stop the recording after this long and keep what was recorded (`record --duration`):
    /// perf gets `SIGINT` (it stops its workload and writes), callgrind and its children
    /// `SIGTERM` (each writes what it collected).
    pub duration: Option<Duration>,
}

/// How often a callgrind recording prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

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
            let (status, capped) = run_profiler(
                cmd,
                "perf record",
                program,
                &data,
                req.duration,
                libc::SIGINT,
                &mut |_| {},
            )?;
            warnings.extend(command_failed(req, "perf record", program, status, capped)?);
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
            // The gdbserver FIFOs go to the private directory: progress is asked through them.
            let prefix = tmp.path().join("vgdb");
            let cmd = sediment_valgrind::tools::record_callgrind_command(
                &"valgrind".into(),
                Path::new(program),
                &rest,
                &out,
                req.whole,
                req.quiet,
                Some(&prefix),
            );
            let mut next = PROGRESS_EVERY;
            let mut progress = |elapsed: Duration| {
                if elapsed < next {
                    return;
                }
                next = elapsed + PROGRESS_EVERY;
                if let Some((ir, n)) = sediment_valgrind::tools::callgrind_progress(&prefix) {
                    eprintln!(
                        "sediment: callgrind: {} instructions in {n} process{} after {} s",
                        human(ir),
                        if n == 1 { "" } else { "es" },
                        elapsed.as_secs()
                    );
                }
            };
            let (status, capped, _) =
                supervise(cmd, "valgrind", req.duration, libc::SIGTERM, &mut progress)?;
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
            warnings.extend(command_failed(req, "valgrind", program, status, capped)?);
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
    cmd: Command,
    tool: &str,
    program: &str,
    out_file: &Path,
    duration: Option<Duration>,
    stop: libc::c_int,
    tick: &mut dyn FnMut(Duration),
) -> Result<(std::process::ExitStatus, bool)> {
    let (status, capped, _) = supervise(cmd, tool, duration, stop, tick)?;
    if !out_file.exists() {
        bail!("{tool} failed ({status}) on {program} and wrote no recording");
    }
    Ok((status, capped))
}

/// Starts the profiler `cmd` and waits for it, calling `tick` with the time elapsed about
/// every 50 ms. After `duration` (when given) the profiler and every process it started get
/// the signal `stop`, once; the result says whether that happened (the recording was capped),
/// and gives the profiler's process ID.
/// The profiler is killed by the kernel when Sediment dies, and sent `SIGTERM` (which `perf
/// record` passes on to its workload) when Sediment gets `SIGTERM` or `SIGINT`
/// (`crate::cleanup`), unless a [`crate::cleanup::StopOnSignal`] is armed: then the first
/// such signal stops the recording as the duration does.
fn supervise(
    mut cmd: Command,
    tool: &str,
    duration: Option<Duration>,
    stop: libc::c_int,
    tick: &mut dyn FnMut(Duration),
) -> Result<(std::process::ExitStatus, bool, u32)> {
    sediment_valgrind::die_with_parent(&mut cmd);
    let on_signal = crate::cleanup::StopOnSignal::armed();
    let (mut child, tracked) = crate::cleanup::track_child(|| cmd.spawn())
        .with_context(|| format!("cannot run {tool}"))?;
    let start = Instant::now();
    let mut capped = false;
    // The processes stopped with the profiler: they may outlive it.
    let mut stopped = Vec::new();
    while !crate::cleanup::child_ended(&child).with_context(|| format!("cannot wait for {tool}"))? {
        let due = duration.is_some_and(|d| start.elapsed() >= d);
        let asked = on_signal.as_ref().is_some_and(|s| s.requested());
        if !capped && (due || asked) {
            capped = true;
            let root = child.id() as libc::pid_t;
            // Children first, so that none is orphaned still running.
            stopped = crate::cleanup::running_descendants_of(root);
            for &pid in stopped.iter().chain([&root]) {
                // SAFETY: kill(2) on our unreaped child and the processes it started.
                unsafe { libc::kill(pid, stop) };
            }
        }
        tick(start.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = crate::cleanup::wait_child(&mut child, tracked)
        .with_context(|| format!("cannot wait for {tool}"))?;
    // Processes of a capped callgrind may still be writing their files after the profiler
    // ended: orphaned, they are no longer its descendants (the subreaper made them this
    // process's children), so wait for the ones that were stopped, by PID.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && stopped.iter().any(|&pid| crate::cleanup::running(pid)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((status, capped, child.id()))
}

/// A count in the units a person reads at a glance (`1.23 G`).
fn human(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=9_999_999 => format!("{:.1} K", n as f64 / 1e3),
        10_000_000..=999_999_999 => format!("{:.1} M", n as f64 / 1e6),
        _ => format!("{:.2} G", n as f64 / 1e9),
    }
}

/// What a recording whose profiler exited with `status` becomes: nothing when it succeeded,
/// the warning to print with [`Request::keep_partial`], an error otherwise.
fn command_failed(
    req: &Request<'_>,
    tool: &str,
    program: &str,
    status: std::process::ExitStatus,
    capped: bool,
) -> Result<Option<String>> {
    if capped {
        let secs = req.duration.map_or(0.0, |d| d.as_secs_f64());
        return Ok(Some(format!(
            "stopped after --duration {secs} s: the profile holds what {program} ran until then"
        )));
    }
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

/// Running processes to record ([`attach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// These processes (`perf record -p`), with their threads.
    Pids(Vec<u32>),
    /// Every process of the machine (`perf record -a`).
    All,
}

/// What to record of running processes.
pub struct Attach {
    /// Which processes.
    pub targets: Targets,
    /// Stop after this long; without it, when the processes have all ended or on the first
    /// `SIGINT`/`SIGTERM` (Ctrl-C), which stop the recording instead of discarding it.
    pub duration: Option<std::time::Duration>,
    /// How call chains become edges (default `leaf`).
    pub mode: Option<Mode>,
    /// A whole package (`--prof-dir`): binaries without symbols, or that changed on disk since
    /// they ran, are skipped with a warning instead of failing the recording.
    pub whole: bool,
}

/// Records running processes with `perf record -e cpu-clock -g` (`-p PIDS` or `-a`) until
/// [`Attach::duration`], the end of every process, or a signal, and imports the recording. The
/// main executable is the first process's (`/proc/PID/exe`, read before perf starts); a
/// whole-machine recording has none. Missing processes and permissions perf would refuse are
/// one-line errors before perf starts ([`permission_problem`]).
pub fn attach(req: &Attach) -> Result<Imported> {
    let _t = timings::stage("record");
    require_tool("perf", "linux-perf")?;
    let euid = effective_uid();
    let mut main = None;
    let mut owners = Vec::new();
    if let Targets::Pids(pids) = &req.targets {
        for &pid in pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .map_err(|_| anyhow::anyhow!("PID {pid}: no such process"))?;
            if status
                .lines()
                .find_map(|l| l.strip_prefix("State:"))
                .is_some_and(|s| s.trim_start().starts_with('Z'))
            {
                bail!("PID {pid}: the process has ended (a zombie)");
            }
            let uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse::<u32>().ok());
            owners.push((pid, uid));
            if main.is_none() {
                main = std::fs::read_link(format!("/proc/{pid}/exe"))
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned());
            }
        }
    }
    let privileged = euid == 0 || has_perf_capability();
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let foreign = owners
        .iter()
        .find(|(_, uid)| uid.is_some_and(|u| u != euid))
        .map(|&(pid, uid)| (pid, uid.unwrap_or(0)));
    if let Some(problem) = permission_problem(&req.targets, paranoid, privileged, foreign) {
        bail!("{problem}");
    }

    let (tmp, _tmp_tracked) = crate::cleanup::track_path(
        || tempfile::Builder::new().prefix("sediment-record").tempdir(),
        tempfile::TempDir::path,
    )
    .context("cannot create a temporary directory")?;
    let data = tmp.path().join("perf.data");
    let log = tmp.path().join("perf.log");
    let mut cmd = Command::new("perf");
    cmd.args(["record", "-e", "cpu-clock", "-g", "-o"])
        .arg(&data);
    match &req.targets {
        Targets::Pids(pids) => {
            let list: Vec<String> = pids.iter().map(u32::to_string).collect();
            cmd.arg("-p").arg(list.join(","));
        }
        Targets::All => {
            cmd.arg("-a");
        }
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).context("cannot create perf's log file")?);
    // The first Ctrl-C stops the recording, which is then imported and written.
    let _stop = crate::cleanup::StopOnSignal::arm();
    let (status, stopped, perf_pid) =
        supervise(cmd, "perf record", req.duration, libc::SIGINT, &mut |_| {})?;
    use std::os::unix::process::ExitStatusExt as _;
    // perf ends as killed by SIGINT after writing; on the user's Ctrl-C it got one itself.
    let by_stop = stopped || matches!(status.signal(), Some(libc::SIGINT | libc::SIGTERM));
    if !(status.success() || by_stop) || !data.exists() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with("[ perf record"))
            .unwrap_or("no message");
        bail!(
            "perf record ({}) failed ({status}): {}",
            describe(&req.targets),
            last.trim()
        );
    }
    let options = import::Options {
        mode: Some(req.mode.unwrap_or_default()),
        skip_stripped: req.whole,
        exclude_pids: not_targets(&req.targets, perf_pid, std::process::id()),
        ..import::Options::default()
    };
    let mut imported = import::import(import::Format::Perf, &[data], &options)?;
    imported.main = main;
    Ok(imported)
}

/// The processes a recording of `targets` sees that are not targets, with how the warning names
/// them: a whole-machine recording samples the `perf record` doing it (`perf`, writing the
/// data) and this process (`me`, waiting for it), and would otherwise write profiles of perf and
/// its libraries. Their samples are counted and left out by the importer. `perf record -p`
/// samples only the processes named.
fn not_targets(targets: &Targets, perf: u32, me: u32) -> Vec<(i32, String)> {
    match targets {
        Targets::Pids(_) => Vec::new(),
        Targets::All => vec![
            (perf as i32, format!("perf record, PID {perf}")),
            (me as i32, format!("sediment, PID {me}")),
        ],
    }
}

/// How the targets are named in messages.
fn describe(targets: &Targets) -> String {
    match targets {
        Targets::Pids(pids) => {
            let list: Vec<String> = pids.iter().map(u32::to_string).collect();
            format!("PID {}", list.join(","))
        }
        Targets::All => "the whole machine".into(),
    }
}

/// The one line saying what to change when perf would refuse to record `targets`, from the
/// kernel's `perf_event_paranoid` (`None`: unknown), whether this process is privileged (root,
/// or `CAP_PERFMON`/`CAP_SYS_ADMIN`), and the first target process owned by another user (pid,
/// uid). The kernel's rules (`Documentation/admin-guide/perf-security.rst`): an unprivileged
/// user may profile their own processes' user code at level 2 or below, and every process of a
/// CPU (`-a`) only at level 0 or below; above 2 (Debian's level 3) nothing; another user's
/// process needs the rights to trace it.
pub fn permission_problem(
    targets: &Targets,
    paranoid: Option<i32>,
    privileged: bool,
    foreign: Option<(u32, u32)>,
) -> Option<String> {
    if privileged {
        return None;
    }
    let level = paranoid.unwrap_or(2);
    match targets {
        Targets::All if level > 0 => Some(format!(
            "recording the whole machine needs root (or CAP_PERFMON) or \
             kernel.perf_event_paranoid <= 0 (it is {level}): run as root, or \
             `sudo sysctl kernel.perf_event_paranoid=0`"
        )),
        Targets::Pids(_) if level > 2 => Some(format!(
            "kernel.perf_event_paranoid is {level}, which refuses perf to unprivileged users: \
             `sudo sysctl kernel.perf_event_paranoid=2` (or run as root)"
        )),
        Targets::Pids(_) => foreign.map(|(pid, uid)| {
            format!(
                "PID {pid} belongs to user {uid}, not to you: record it as that user or as root"
            )
        }),
        Targets::All => None,
    }
}

/// The effective user id.
fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process holds `CAP_PERFMON` (38) or `CAP_SYS_ADMIN` (21) in its effective set
/// (`CapEff` of `/proc/self/status`).
fn has_perf_capability() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 38 | 1 << 21) != 0)
}

/// Which binaries of a recording written to a profile directory or a bundle are kept
/// (`record --under DIR`, `--keep-binaries NAMES`): a binary is kept when its recorded path
/// lies under one of [`Filter::under`] (compared after resolving symbolic links on both
/// sides, so `./build` matches what perf saw as `/home/u/pkg/build/...`) or its base name is
/// one of [`Filter::names`]. An empty filter keeps every binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Directories: a build tree, an install prefix.
    pub under: Vec<PathBuf>,
    /// Base names (`postgres`, `libpq.so.5`).
    pub names: Vec<String>,
}

impl Filter {
    /// True when the filter keeps every binary.
    pub fn is_empty(&self) -> bool {
        self.under.is_empty() && self.names.is_empty()
    }
}

/// Drops from `imported` the profiles of binaries `filter` does not keep, and returns the
/// dropped binaries' base names, heaviest (self weight) first, ties by name. A directory of
/// [`Filter::under`] that does not exist is an error naming it (a typo would otherwise drop
/// everything).
pub fn filter_binaries(imported: &mut Imported, filter: &Filter) -> Result<Vec<String>> {
    if filter.is_empty() {
        return Ok(Vec::new());
    }
    let mut dirs = Vec::new();
    for d in &filter.under {
        let real = std::fs::canonicalize(d)
            .with_context(|| format!("--under {}: no such directory", d.display()))?;
        if !real.is_dir() {
            bail!("--under {}: not a directory", d.display());
        }
        dirs.push(real);
    }
    let kept = |p: &sediment_profile::Profile| {
        let name = sediment_profile::base_name(&p.meta.binary);
        if filter.names.iter().any(|n| n == name) {
            return true;
        }
        let path = Path::new(&p.meta.binary);
        let real = std::fs::canonicalize(path).ok();
        dirs.iter()
            .any(|d| path.starts_with(d) || real.as_deref().is_some_and(|r| r.starts_with(d)))
    };
    let (keep, mut dropped): (Vec<_>, Vec<_>) = std::mem::take(&mut imported.profiles)
        .into_iter()
        .partition(|p| kept(p));
    imported.profiles = keep;
    dropped.sort_by(|a, b| {
        b.self_total()
            .cmp(&a.self_total())
            .then_with(|| a.meta.binary.cmp(&b.meta.binary))
    });
    Ok(dropped
        .into_iter()
        .map(|p| sediment_profile::base_name(&p.meta.binary).to_string())
        .collect())
}

/// The `meta` keys a recording may fill with what the recorder typed or where it lives:
/// callgrind's `cmd` (the command line).
const PRIVATE_META: &[&str] = &["cmd"];

/// Keeps of every profile of `imported` only what a build needs to find and match it:
/// `meta binary` becomes the binary's base name (`/home/u/pkg/build/postgres` ->
/// `postgres`; the build-id, the architecture and the function names stay), and the keys of
/// `PRIVATE_META` (the command line) are removed. Used for profile directories and bundles,
/// which are shipped and sent to others (`record --keep-paths` skips it).
pub fn drop_private(imported: &mut Imported) {
    for p in &mut imported.profiles {
        let name = sediment_profile::base_name(&p.meta.binary).to_string();
        p.meta.binary = name;
        for key in PRIVATE_META {
            p.meta.extra.remove(*key);
        }
    }
    if let Some(main) = &mut imported.main {
        *main = sediment_profile::base_name(main).to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A whole-machine recording leaves out perf and Sediment themselves; attaching to PIDs
    // sees only them.
    #[test]
    fn whole_machine_leaves_out_the_recorder() {
        assert_eq!(
            not_targets(&Targets::All, 42, 7),
            vec![
                (42, "perf record, PID 42".to_string()),
                (7, "sediment, PID 7".to_string())
            ]
        );
        assert!(not_targets(&Targets::Pids(vec![42]), 42, 7).is_empty());
    }

    // One line per refusal, naming the setting and the command that changes it; nothing when
    // perf would accept.
    #[test]
    fn permission_messages() {
        let pids = Targets::Pids(vec![42]);
        assert_eq!(permission_problem(&Targets::All, Some(2), true, None), None);
        let all = permission_problem(&Targets::All, Some(2), false, None).unwrap();
        assert!(all.contains("sysctl kernel.perf_event_paranoid=0"), "{all}");
        assert!(all.contains("it is 2"), "{all}");
        assert_eq!(
            permission_problem(&Targets::All, Some(-1), false, None),
            None
        );
        assert_eq!(permission_problem(&pids, Some(2), false, None), None);
        let debian = permission_problem(&pids, Some(3), false, None).unwrap();
        assert!(
            debian.contains("sysctl kernel.perf_event_paranoid=2"),
            "{debian}"
        );
        let other = permission_problem(&pids, Some(1), false, Some((42, 1000))).unwrap();
        assert!(other.contains("PID 42 belongs to user 1000"), "{other}");
        for m in [all, debian, other] {
            assert_eq!(m.lines().count(), 1);
        }
    }
}
