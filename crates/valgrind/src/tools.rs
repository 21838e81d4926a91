//! Cachegrind and callgrind runs: the program runs to its end under the tool, which writes its
//! results to a file the caller names and parses.
//!
//! Every run gets `-q` (no banner) and `--vgdb=no`: no gdbserver FIFOs in /tmp (they are named
//! by PID only, so a stale one left by another user's killed run makes valgrind refuse to start
//! under a reused PID). The binary is passed by its canonical path: valgrind would search PATH
//! for a bare name, and callgrind names the object by its real path.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::{die_with_parent, stdin_for, Error};

/// Fixed data-side caches, so that no result depends on the host's caches. D1 is a common
/// 32 KiB/8-way; LL an 8 MiB/16-way. Neither affects the instruction-side numbers except
/// through LL, which no Sediment metric uses.
pub const D1_CONFIG: &str = "32768,8,64";
/// See [`D1_CONFIG`].
pub const LL_CONFIG: &str = "8388608,16,64";

/// One run of `binary` (`canon`: its canonical path) with `args` under valgrind.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The `valgrind` executable.
    pub valgrind: &'a OsString,
    /// The binary as the user named it (for messages).
    pub binary: &'a Path,
    /// Its canonical path, which is what runs.
    pub canon: &'a Path,
    /// The program's arguments.
    pub args: &'a [OsString],
    /// A file the program reads as standard input (opened afresh), or nothing.
    pub stdin: Option<&'a Path>,
}

/// `valgrind --tool=cachegrind --cache-sim=yes --I1=i1` with [`D1_CONFIG`] and [`LL_CONFIG`],
/// results in `out`. `i1` is cachegrind's `size,assoc,line_size`.
pub fn cachegrind(run: &Run<'_>, i1: &str, out: &Path) -> Result<Output, Error> {
    let tool_args: Vec<OsString> = vec![
        "--cache-sim=yes".into(),
        format!("--I1={i1}").into(),
        format!("--D1={D1_CONFIG}").into(),
        format!("--LL={LL_CONFIG}").into(),
        os_concat("--cachegrind-out-file=", out),
    ];
    run_tool(run, "cachegrind", &tool_args)
}

/// `valgrind --tool=callgrind --dump-instr=yes`, results in `out`.
pub fn callgrind(run: &Run<'_>, out: &Path) -> Result<Output, Error> {
    let tool_args: Vec<OsString> = vec![
        "--dump-instr=yes".into(),
        os_concat("--callgrind-out-file=", out),
    ];
    run_tool(run, "callgrind", &tool_args)
}

/// The callgrind recording of `sediment record --via callgrind`: `program` with `args` under
/// `valgrind --tool=callgrind --demangle=no --dump-instr=yes`, writing `out` (a path that may
/// hold `%p`, the process id, for one file per process with `trace_children`), as a command
/// for the caller to start, wait for and stop ([`die_with_parent`] is already applied). The program keeps Sediment's standard input and
/// output (`quiet`: its standard output goes to `/dev/null`). A program that fails may still
/// have written a recording worth importing; one ended by `SIGTERM` writes what it collected.
///
/// `vgdb_prefix`: the gdbserver is enabled with its FIFOs under this prefix (a private
/// directory, so that no stale FIFO of another run can collide), and [`callgrind_progress`]
/// with the same prefix asks the run (and its children) how far it got; `None` keeps
/// `--vgdb=no`.
pub fn record_callgrind_command(
    valgrind: &OsString,
    program: &Path,
    args: &[OsString],
    out: &Path,
    trace_children: bool,
    quiet: bool,
    vgdb_prefix: Option<&Path>,
) -> Command {
    let mut cmd = Command::new(valgrind);
    cmd.arg("-q");
    match vgdb_prefix {
        Some(prefix) => cmd
            .arg("--vgdb=yes")
            .arg(os_concat("--vgdb-prefix=", prefix)),
        None => cmd.arg("--vgdb=no"),
    };
    cmd.args(["--tool=callgrind", "--demangle=no", "--dump-instr=yes"]);
    if trace_children {
        cmd.arg("--trace-children=yes");
    }
    cmd.arg(os_concat("--callgrind-out-file=", out))
        .arg(program)
        .args(args);
    if quiet {
        cmd.stdout(Stdio::null());
    }
    die_with_parent(&mut cmd);
    cmd
}

/// How far the callgrind runs started with `vgdb_prefix` got: (instructions executed so far,
/// processes), from `callgrind_control -e -b` ([`parse_progress`]); `None` when it cannot tell
/// (callgrind_control missing, no run answering, or no answer within [`PROGRESS_TIMEOUT`]:
/// `vgdb` can wait for a process that is ending, and a progress line must never hold up the
/// recording).
pub fn callgrind_progress(vgdb_prefix: &Path) -> Option<(u64, usize)> {
    use std::io::Read as _;
    let mut child = Command::new("callgrind_control")
        .arg(os_concat("--vgdb-prefix=", vgdb_prefix))
        .args(["-e", "-b"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < PROGRESS_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                // The script and the vgdb it started: the whole process group.
                // SAFETY: kill(2) on the group of a child this function started and has not
                // reaped.
                unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    parse_progress(&text)
}

/// How long [`callgrind_progress`] waits for `callgrind_control`.
pub const PROGRESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Sums the first event (`Ir`) of every thread's totals in `callgrind_control -e -b` output,
/// and counts the processes (`PID N: ...` headers):
///
/// ```text
/// PID 27720: ./hot 3000
/// sending command status internal to pid 27720
///
///   Totals:         Ir
///    Th 1  147,403,374
/// ```
pub fn parse_progress(text: &str) -> Option<(u64, usize)> {
    let mut processes = 0;
    let mut total = 0u64;
    let mut in_totals = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("PID ") && t.contains(':') {
            processes += 1;
            in_totals = false;
        } else if t.starts_with("Totals:") {
            in_totals = true;
        } else if in_totals && t.starts_with("Th ") {
            let n = t
                .split_whitespace()
                .nth(2)
                .and_then(|v| v.replace(',', "").parse::<u64>().ok())
                .unwrap_or(0);
            total += n;
        } else if !t.is_empty() {
            in_totals = false;
        }
    }
    (processes > 0).then_some((total, processes))
}

/// Runs `tool` with `tool_args` and waits; the program's output is captured. A run that exits
/// unsuccessfully is [`Error::ProgramFailed`], with the last line of standard error.
fn run_tool(run: &Run<'_>, tool: &str, tool_args: &[OsString]) -> Result<Output, Error> {
    let mut cmd = Command::new(run.valgrind);
    cmd.arg(format!("--tool={tool}")).args(["-q", "--vgdb=no"]);
    cmd.args(tool_args).arg(run.canon).args(run.args);
    die_with_parent(&mut cmd);
    cmd.stdin(stdin_for(run.stdin)?)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = cmd.output().map_err(|source| Error::ToolMissing {
        tool: format!("valgrind --tool={tool}"),
        binary: run.binary.to_path_buf(),
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
            binary: run.binary.to_path_buf(),
            status: output.status.to_string(),
            detail,
        });
    }
    Ok(output)
}

fn os_concat(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path.as_os_str());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two processes, one with two threads: every thread's Ir summed, a dot (no cost) as 0.
    #[test]
    fn progress_from_callgrind_control() {
        let text = "PID 1: ./a\nsending command status internal to pid 1\n\n  Totals:         Ir \n   Th 1  147,403,374 \n   Th 2  1,000 \n\n  Frame:          Ir Backtrace for Thread 1\n   [ 0]  147,281,062 spin (14 x)\nPID 2: ./b\n\n  Totals:         Ir \n   Th 1            . \n";
        assert_eq!(parse_progress(text), Some((147_404_374, 2)));
        assert_eq!(parse_progress(""), None);
    }
}
