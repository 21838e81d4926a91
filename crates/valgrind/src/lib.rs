//! Every run of a program under valgrind, in one place: cachegrind, callgrind, lackey and
//! Sediment's own trace tool.
//!
//! - [`tracer`]: Sediment's valgrind tool `sedtrace` (a binary instruction trace, tens of times
//!   faster than lackey's text), built from its C source on first use and cached, and a run of
//!   a program under it whose trace streams through a pipe.
//! - [`lackey`]: a lackey run whose instruction trace streams through a pipe to the caller
//!   (nothing stored), the program's own output kept in a private temporary directory.
//! - [`tools`]: cachegrind and callgrind runs to a result file the caller parses.
//! - [`maps`]: where the kernel mapped a binary's executable segments in a running process
//!   (`/proc/PID/maps`), which turns a trace's run-time addresses into the binary's code range.
//!
//! Children die with Sediment: every command is started with [`die_with_parent`] (the kernel
//! kills it when the thread that started it ends), and a run handle kills its child when dropped
//! before it was waited for.
//!
//! Design constraints: this crate starts processes and reads their outputs, nothing else; it
//! parses no valgrind output format (the simulator and the importers do) and prints nothing.

pub mod lackey;
pub mod maps;
pub mod piped;
pub mod tools;
pub mod tracer;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Errors of this crate. Every variant names the file or tool it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Sediment's valgrind tool could not be built (what is missing, in one line).
    #[error("{0}")]
    ToolBuild(String),
    /// Valgrind (or the shell wrapping it) could not be started.
    #[error("cannot run `{tool}` to measure {binary}: {source} (is valgrind installed?)")]
    ToolMissing {
        /// The command that failed to start.
        tool: String,
        /// The binary being run.
        binary: PathBuf,
        /// Why the spawn failed.
        source: std::io::Error,
    },
    /// Valgrind or the program under it exited unsuccessfully.
    #[error("valgrind {tool} run of {binary} failed ({status}): {detail}")]
    ProgramFailed {
        /// The Valgrind tool.
        tool: String,
        /// The binary being run.
        binary: PathBuf,
        /// The exit status.
        status: String,
        /// The last line of standard error.
        detail: String,
    },
    /// A file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An executable segment of the binary is not mapped in the process.
    #[error("{binary}: executable segment at file offset {offset:#x} not mapped in {maps}")]
    NotMapped {
        /// The binary.
        binary: PathBuf,
        /// The segment's file offset.
        offset: u64,
        /// The maps file read.
        maps: PathBuf,
    },
    /// The binary has no executable segment.
    #[error("{0}: no executable segment")]
    NoExecutableSegment(PathBuf),
}

/// Has the kernel kill the process `cmd` starts when the thread that started it ends (Linux
/// `PR_SET_PDEATHSIG` = `SIGKILL`, kept across `exec`), so that a `sediment` stopped by
/// `SIGTERM` or `SIGKILL` leaves no valgrind running behind it. (`Ctrl-C` reaches the whole
/// process group anyway.) Every caller waits for its child on the thread that spawned it, which
/// is what makes the thread's end the right moment.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The standard input of one run: `file` opened afresh (so every run reads it from the start),
/// or `/dev/null`.
pub fn stdin_for(file: Option<&Path>) -> Result<Stdio, Error> {
    match file {
        None => Ok(Stdio::null()),
        Some(p) => std::fs::File::open(p)
            .map(Stdio::from)
            .map_err(|source| Error::Io {
                path: p.to_path_buf(),
                source,
            }),
    }
}

/// FNV-1a, 64-bit (Fowler, Noll, Vo), as 16 hex digits: a tiny stable hash, enough to tell two
/// runs' outputs apart.
pub fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}
